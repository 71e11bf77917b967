// Golden batches of every event shape engines publish today (docs/wire.md,
// "KV events"), written byte by byte from the msgpack format: fixmap 0x8N,
// fixarray 0x9N, fixstr 0xa0+len, nil 0xc0, float64 0xcb, uint8 0xcc,
// int8 0xd0, positive fixint 0x00-0x7f, negative fixint 0xe0-0xff, array16
// 0xdc and map16 0xde with a big-endian 16-bit count.
#include <catch2/catch.hpp>

#include "cluster/kv/kv_decoder.hpp"
#include "cluster/kv/kv_proto.hpp"
#include "sim/kv_encoding.hpp"

using namespace outrider;
using namespace outrider::kv;

namespace {

// A fixstr: 0xa0 | length, then the bytes (names here are under 32).
std::string s(const std::string& v) {
  return std::string(1, static_cast<char>(0xa0 | v.size())) + v;
}
// fixarray/fixmap up to 15 elements, array16 (0xdc)/map16 (0xde) beyond.
std::string header(int n, int fix, char wide) {
  if (n < 16)
    return std::string(1, static_cast<char>(fix | n));
  return std::string(1, wide) + static_cast<char>(n >> 8) +
         static_cast<char>(n & 0xff);
}
std::string arr(int n) {
  return header(n, 0x90, '\xdc');
}
std::string map(int n) {
  return header(n, 0x80, '\xde');
}
std::string u(int v) {
  return std::string(1, static_cast<char>(v));
} // 0-127
const std::string nil = "\xc0";
// [1.5 (float64), events, rank]
std::string batch(int n, const std::string& events, const std::string& rank) {
  return arr(3) + std::string("\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00", 9) +
         arr(n) + events + rank;
}

decode_result decode(const std::string& bytes) {
  return decode_kv_batch(bytes.data(), bytes.size());
}

} // namespace

TEST_CASE("vLLM v0.33's BlockStored map: all fifteen keys, unknown keys "
          "ignored") {
  // Two blocks of two tokens under adapter "sql"; block 0's extra keys are
  // the adapter, an image that starts 1 token in, and the tenant's salt;
  // block 1's the adapter and the image, begun 1 token before it (-1).
  auto ev = map(16) + s("type") + s("BlockStored") + s("block_hashes") +
            arr(2) + u(10) + u(11) + s("parent_block_hash") + nil +
            s("token_ids") + arr(4) + u(1) + u(2) + u(3) + u(4) +
            s("block_size") + u(2) + s("lora_id") + u(3) + s("medium") +
            s("GPU") + s("lora_name") + s("sql") + s("extra_keys") + arr(2) +
            arr(3) + s("sql") + arr(2) + s("img-a") + u(1) + s("tenant-1") +
            arr(2) + s("sql") + arr(2) + s("img-a") + "\xff" + s("group_idx") +
            u(0) + s("kv_cache_spec_kind") + s("full_attention") +
            s("kv_cache_spec_sliding_window") + nil + s("locality") +
            s("LOCAL") + s("ownership") + nil + s("session_id") + s("conv-7") +
            s("future_field") + arr(1) + u(1);
  auto r = decode(batch(1, ev, u(0)));
  REQUIRE(r.ok);
  REQUIRE(r.batch.rejected.empty());
  REQUIRE(r.batch.events.size() == 1);
  const auto& b = std::get<block_stored>(r.batch.events[0]);
  CHECK(b.block_hashes == std::vector<uint64_t>{10, 11});
  CHECK(b.lora_id == std::optional<int64_t>{3});
  CHECK(b.lora_name == "sql");
  CHECK(b.medium == medium::gpu);
  REQUIRE(b.extra_keys.size() == 2);
  CHECK(b.extra_keys[0] == block_extra{{extra_key::kind::text, "sql", 0},
                                       {extra_key::kind::media, "img-a", 1},
                                       {extra_key::kind::text, "tenant-1", 0}});
  CHECK(b.extra_keys[1][1] == extra_key{extra_key::kind::media, "img-a", -1});
  CHECK(b.group_idx == std::optional<uint32_t>{0});
  CHECK(b.spec_kind == "full_attention");
  CHECK_FALSE(b.sliding_window);
  CHECK(b.locality == locality::local);
  CHECK(b.session_id == "conv-7");
  // The identity drops the adapter's name from the extras (it seeds).
  auto id0 = identity_of(b, 0);
  CHECK(id0.lora == "sql");
  CHECK(id0.extra.size() == 2);
  CHECK(identity_of(b, 1).extra ==
        block_extra{{extra_key::kind::media, "img-a", -1}});
}

TEST_CASE("the legacy array form reads every position and ignores extra "
          "trailing ones") {
  // ["BlockStored", [5], 4, [7, 8], 2, nil, "CPU", nil, nil, 1,
  //  "sliding_window", 128, "REMOTE", "kvcr", nil, "more"]
  auto ev = arr(16) + s("BlockStored") + arr(1) + u(5) + u(4) + arr(2) + u(7) +
            u(8) + u(2) + nil + s("CPU") + nil + nil + u(1) +
            s("sliding_window") + "\xcc\x80" + s("REMOTE") + s("kvcr") + nil +
            s("more");
  auto r = decode(batch(1, ev, nil));
  REQUIRE(r.ok);
  REQUIRE(r.batch.events.size() == 1);
  const auto& b = std::get<block_stored>(r.batch.events[0]);
  CHECK(b.parent_block_hash == std::optional<uint64_t>{4});
  CHECK(b.medium == medium::cpu);
  CHECK(b.group_idx == std::optional<uint32_t>{1});
  CHECK(b.spec_kind == "sliding_window");
  CHECK(b.sliding_window == std::optional<uint32_t>{128});
  CHECK(b.locality == locality::remote);
  CHECK(b.ownership == "kvcr");
  CHECK_FALSE(serves_prefix(b.spec_kind));
}

TEST_CASE("SGLang's shapes: the metadata map at lora_name's position, the "
          "tagged map with cache_salt, EAGLE bigrams, its media names") {
  // Intermediate (SGLang 0.5.18 on): 7 positions, then {"cache_salt": "t1"}.
  auto mid = arr(8) + s("BlockStored") + arr(1) + "\xd0\xfe" + nil + arr(2) +
             u(1) + u(2) + u(2) + nil + s("GPU") + map(1) + s("cache_salt") +
             s("t1");
  // Current: a tagged map; token ids as [token, next] bigrams.
  auto cur = map(8) + s("type") + s("BlockStored") + s("block_hashes") +
             arr(1) + u(9) + s("parent_block_hash") + nil + s("token_ids") +
             arr(2) + arr(2) + u(1) + u(2) + arr(2) + u(2) + u(3) +
             s("block_size") + u(2) + s("lora_id") + nil + s("medium") +
             s("CPU_PINNED") + s("cache_salt") + s("t1");
  auto removed = map(3) + s("type") + s("BlockRemoved") + s("block_hashes") +
                 arr(1) + u(9) + s("medium") + s("DISK");
  auto r = decode(batch(3, mid + cur + removed, u(1)));
  REQUIRE(r.ok);
  REQUIRE(r.batch.rejected.empty());
  REQUIRE(r.batch.events.size() == 3);
  const auto& a = std::get<block_stored>(r.batch.events[0]);
  CHECK(a.block_hashes == std::vector<uint64_t>{static_cast<uint64_t>(-2)});
  CHECK(a.cache_salt == "t1");
  CHECK(a.lora_name.empty());
  const auto& c = std::get<block_stored>(r.batch.events[1]);
  CHECK(c.token_ids == std::vector<uint32_t>{1, 2});
  CHECK(c.medium == medium::cpu);
  CHECK(c.cache_salt == "t1");
  // The salt seeds a root block's identity as vLLM's salt key does.
  CHECK(identity_of(a, 0).extra ==
        block_extra{{extra_key::kind::text, "t1", 0}});
  CHECK(std::get<block_removed>(r.batch.events[2]).medium == medium::storage);
}

TEST_CASE("offload placeholders and chunk events decode, unknown event "
          "types are skipped and counted, the rest applies") {
  // One placeholder per offload key: no tokens, block size 0, medium CPU.
  auto placeholder = map(9) + s("type") + s("BlockStored") + s("block_hashes") +
                     arr(1) + u(42) + s("parent_block_hash") + nil +
                     s("token_ids") + arr(0) + s("block_size") + u(0) +
                     s("lora_id") + nil + s("medium") + s("CPU") +
                     s("lora_name") + nil + s("group_idx") + u(0);
  // A self-describing chunk: two GPU blocks' hashes, the whole chunk's
  // tokens, the GPU block size.
  auto chunk = arr(8) + s("BlockStored") + arr(2) + u(1) + u(2) + nil + arr(4) +
               u(1) + u(2) + u(3) + u(4) + u(2) + nil + s("STORAGE") + nil;
  auto inactive =
    map(2) + s("type") + s("BlockInactive") + s("block_hashes") + arr(1) + u(1);
  auto removed = arr(6) + s("BlockRemoved") + arr(1) + u(42) + s("CPU") + u(0) +
                 s("LOCAL") + nil;
  auto r = decode(batch(4, placeholder + chunk + inactive + removed, nil));
  REQUIRE(r.ok);
  CHECK(r.batch.rejected ==
        std::vector<kv_reject>{kv_reject::unknown_event_type});
  REQUIRE(r.batch.events.size() == 3);
  const auto& p = std::get<block_stored>(r.batch.events[0]);
  CHECK(p.tokenless());
  CHECK(p.medium == medium::cpu);
  const auto& c = std::get<block_stored>(r.batch.events[1]);
  CHECK(c.block_hashes.size() == 2);
  CHECK(c.medium == medium::storage);
  const auto& rm = std::get<block_removed>(r.batch.events[2]);
  CHECK(rm.medium == medium::cpu);
  CHECK(rm.locality == locality::local);
}

TEST_CASE("malformed new fields reject the event, not the batch") {
  // extra_keys with one entry for two hashes.
  auto short_extra = map(6) + s("type") + s("BlockStored") + s("block_hashes") +
                     arr(2) + u(1) + u(2) + s("parent_block_hash") + nil +
                     s("token_ids") + arr(2) + u(1) + u(2) + s("block_size") +
                     u(1) + s("extra_keys") + arr(1) + nil;
  // A token count with block size 0 that is not a placeholder.
  auto zero =
    arr(5) + s("BlockStored") + arr(1) + u(1) + nil + arr(1) + u(1) + u(0);
  auto ok = arr(2) + s("BlockRemoved") + arr(1) + u(3);
  auto r = decode(batch(3, short_extra + zero + ok, nil));
  REQUIRE(r.ok);
  CHECK(r.batch.rejected ==
        std::vector<kv_reject>{kv_reject::bad_event,
                               kv_reject::token_count_mismatch});
  CHECK(r.batch.events.size() == 1);
}

namespace {

// A store and a removal with every field engines add, set.
std::vector<kv_event> full_events() {
  block_stored b;
  b.block_hashes = {10, 11};
  b.parent_block_hash = 9;
  b.token_ids = {1, 2, 3, 4};
  b.block_size = 2;
  b.lora_id = 3;
  b.lora_name = "sql";
  b.medium = medium::cpu;
  b.extra_keys = {
    {{extra_key::kind::text, "sql", 0}, {extra_key::kind::media, "img", 1}},
    {{extra_key::kind::text, "sql", 0},
     {extra_key::kind::digest, std::string(32, '\x07'), 0}}};
  b.group_idx = 2;
  b.spec_kind = "full_attention";
  b.sliding_window = 64;
  b.locality = locality::remote;
  b.ownership = "kvcr";
  b.session_id = "conv-1";
  block_removed r;
  r.block_hashes = {10};
  r.medium = medium::storage;
  r.group_idx = 2;
  r.locality = locality::local;
  r.ownership = "kvcr";
  return {b, r};
}

void check_same(const std::vector<kv_event>& got) {
  auto want = full_events();
  REQUIRE(got.size() == 2);
  const auto& a = std::get<block_stored>(got[0]);
  const auto& b = std::get<block_stored>(want[0]);
  CHECK(a.block_hashes == b.block_hashes);
  CHECK(a.parent_block_hash == b.parent_block_hash);
  CHECK(a.token_ids == b.token_ids);
  CHECK(a.lora_id == b.lora_id);
  CHECK(a.lora_name == b.lora_name);
  CHECK(a.medium == b.medium);
  CHECK(a.extra_keys == b.extra_keys);
  CHECK(a.group_idx == b.group_idx);
  CHECK(a.spec_kind == b.spec_kind);
  CHECK(a.sliding_window == b.sliding_window);
  CHECK(a.locality == b.locality);
  CHECK(a.ownership == b.ownership);
  CHECK(a.session_id == b.session_id);
  const auto& x = std::get<block_removed>(got[1]);
  const auto& y = std::get<block_removed>(want[1]);
  CHECK(x.block_hashes == y.block_hashes);
  CHECK(x.medium == y.medium);
  CHECK(x.group_idx == y.group_idx);
  CHECK(x.locality == y.locality);
  CHECK(x.ownership == y.ownership);
}

} // namespace

TEST_CASE("every field survives the simulator's encodings and the "
          "OpenEngine messages the sidecar forwards") {
  for (auto enc : {sim::event_encoding::map, sim::event_encoding::array}) {
    auto bytes = sim::encode_batch(1.0, full_events(), 0, enc);
    auto r = decode(bytes);
    REQUIRE(r.ok);
    CHECK(r.batch.rejected.empty());
    check_same(r.batch.events);
  }
  std::vector<kv_event> back;
  for (const auto& ev : full_events()) {
    openengine::v1::KvEvent pb;
    to_proto(ev, &pb);
    openengine::v1::KvEvent wire;
    REQUIRE(wire.ParseFromString(pb.SerializeAsString()));
    auto got = from_proto(wire);
    REQUIRE(got);
    back.push_back(*got);
  }
  check_same(back);
}
