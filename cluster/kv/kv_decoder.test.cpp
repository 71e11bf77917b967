#include "cluster/kv/kv_decoder.hpp"

#include <catch2/catch.hpp>

#include "cluster/kv/replay_frame.hpp"
#include "sim/kv_encoding.hpp"

using namespace outrider;
using namespace outrider::kv;

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

decode_result decode(const std::string& bytes) {
  return decode_kv_batch(bytes.data(), bytes.size());
}

std::string ascii(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    char buf[3];
    std::snprintf(buf, sizeof(buf), "%02x", c);
    out += buf;
  }
  return out;
}

} // namespace

// The bytes of a real engine's batch, from docs/wire.md ("KV events").
const std::string wire_example = from_hex("93cb41d954fc40400000"
                                          "91"
                                          "88"
                                          "a474797065"
                                          "ab426c6f636b53746f726564"
                                          "ac626c6f636b5f686173686573"
                                          "912a"
                                          "b1706172656e745f626c6f636b5f68617368"
                                          "29"
                                          "a9746f6b656e5f696473"
                                          "926465"
                                          "aa626c6f636b5f73697a65"
                                          "02"
                                          "a76c6f72615f6964"
                                          "c0"
                                          "a66d656469756d"
                                          "a3475055"
                                          "a96c6f72615f6e616d65"
                                          "c0"
                                          "01");

TEST_CASE("the engine's own bytes decode to the documented batch") {
  auto r = decode(wire_example);
  REQUIRE(r.ok);
  CHECK(r.batch.timestamp == 1700000001.0);
  REQUIRE(r.batch.dp_rank);
  CHECK(*r.batch.dp_rank == 1);
  REQUIRE(r.batch.events.size() == 1);
  auto& s = std::get<kv::block_stored>(r.batch.events[0]);
  CHECK(s.block_hashes == std::vector<uint64_t>{42});
  CHECK(s.parent_block_hash == std::optional<uint64_t>{41});
  CHECK(s.token_ids == std::vector<uint32_t>{100, 101});
  CHECK(s.block_size == 2);
}

TEST_CASE("the simulator encodes exactly the engine's bytes") {
  kv::block_stored s{{42}, 41, {100, 101}, 2};
  auto bytes =
    sim::encode_batch(1700000001.0, {s}, 1, sim::event_encoding::map);
  CHECK(ascii(bytes) == ascii(wire_example));
}

TEST_CASE("both encodings and every hash form decode alike") {
  std::vector<kv::kv_event> events{
    kv::block_stored{{1ULL << 63 | 5, 7}, std::nullopt, {1, 2, 3, 4}, 2},
    kv::block_removed{{9}},
    kv::all_blocks_cleared{},
  };
  for (auto enc : {sim::event_encoding::map, sim::event_encoding::array})
    for (auto hf : {sim::hash_format::uint64, sim::hash_format::int64}) {
      auto r = decode(sim::encode_batch(1.5, events, std::nullopt, enc, hf));
      REQUIRE(r.ok);
      CHECK_FALSE(r.batch.dp_rank);
      REQUIRE(r.batch.events.size() == 3);
      CHECK(r.batch.rejected.empty());
      auto& s = std::get<kv::block_stored>(r.batch.events[0]);
      CHECK(s.block_hashes == std::vector<uint64_t>{1ULL << 63 | 5, 7});
      CHECK_FALSE(s.parent_block_hash);
      CHECK(std::get<kv::block_removed>(r.batch.events[1]).block_hashes ==
            std::vector<uint64_t>{9});
      CHECK(std::holds_alternative<kv::all_blocks_cleared>(r.batch.events[2]));
    }
  auto r = decode(sim::encode_batch(1.5, events, 0, sim::event_encoding::map,
                                    sim::hash_format::bytes));
  REQUIRE(r.ok);
  auto bytes = sim::hash_bytes(7);
  CHECK(std::get<kv::block_stored>(r.batch.events[0]).block_hashes[1] ==
        fold_hash_bytes(bytes.data(), bytes.size()));
}

TEST_CASE("old two-element batches and longer arrays are accepted") {
  // [ts, [["BlockRemoved", [5], "GPU", 0, "future"]]]
  auto bytes = from_hex("92cb3ff0000000000000"
                        "91"
                        "95ac426c6f636b52656d6f766564"
                        "9105"
                        "a3475055"
                        "00"
                        "a6667574757265");
  auto r = decode(bytes);
  REQUIRE(r.ok);
  CHECK_FALSE(r.batch.dp_rank);
  REQUIRE(r.batch.events.size() == 1);
  CHECK(std::get<kv::block_removed>(r.batch.events[0]).block_hashes ==
        std::vector<uint64_t>{5});
}

TEST_CASE("broken frames are rejected with a reason, never a crash") {
  CHECK(decode("").error == kv_reject::malformed_msgpack);
  CHECK(decode(from_hex("93cb41")).error == kv_reject::malformed_msgpack);
  CHECK(decode(from_hex("c1")).error == kv_reject::malformed_msgpack);
  // An array header claiming 2^32-1 elements with nothing behind it.
  CHECK_FALSE(decode(from_hex("ddffffffff")).ok);
  CHECK(decode(from_hex("2a")).error == kv_reject::bad_batch);
  CHECK(decode(from_hex("92a178"
                        "90"))
          .error == kv_reject::bad_batch);
  CHECK(decode(from_hex("9201"
                        "2a"))
          .error == kv_reject::bad_batch);
  CHECK(decode(from_hex("930190a178")).error == kv_reject::bad_batch);
  CHECK(decode(wire_example + "00").error == kv_reject::malformed_msgpack);
}

TEST_CASE("bad events are left out and counted while the rest apply") {
  std::vector<kv::kv_event> good{kv::block_removed{{3}}};
  auto base = sim::encode_batch(2.0, good, 0, sim::event_encoding::array);
  // [2.0, [["BlockRemoved",[3],"GPU"], ["BlockMoved"], 7,
  //        ["BlockStored",[1],nil,[1,2,3],2], ["BlockStored",[1]]], 0]
  auto bytes = from_hex("93cb4000000000000000"
                        "95"
                        "93ac426c6f636b52656d6f766564"
                        "9103"
                        "a3475055"
                        "91aa426c6f636b4d6f766564"
                        "07"
                        "95ab426c6f636b53746f726564"
                        "9101"
                        "c0"
                        "93010203"
                        "02"
                        "92ab426c6f636b53746f726564"
                        "9101"
                        "00");
  (void)base;
  auto r = decode(bytes);
  REQUIRE(r.ok);
  REQUIRE(r.batch.events.size() == 1);
  CHECK(std::get<kv::block_removed>(r.batch.events[0]).block_hashes ==
        std::vector<uint64_t>{3});
  CHECK(r.batch.rejected ==
        std::vector<kv_reject>{
          kv_reject::unknown_event_type, kv_reject::bad_event,
          kv_reject::token_count_mismatch, kv_reject::bad_event});
}

TEST_CASE("map events with a wrong field type are rejected") {
  // [1.0, [{"type":"BlockRemoved","block_hashes":"x"}], 0]
  auto bytes = from_hex("93cb3ff0000000000000"
                        "91"
                        "82"
                        "a474797065"
                        "ac426c6f636b52656d6f766564"
                        "ac626c6f636b5f686173686573"
                        "a178"
                        "00");
  auto r = decode(bytes);
  REQUIRE(r.ok);
  CHECK(r.batch.events.empty());
  CHECK(r.batch.rejected == std::vector<kv_reject>{kv_reject::bad_event});
}

TEST_CASE("a batch with more events than allowed is rejected whole") {
  // [ts, [AllBlocksCleared x n], nil] in the positional encoding.
  auto batch = [](size_t n) {
    std::string b = from_hex("93cb41d954fc40400000");
    b += from_hex("dd") + from_hex("00000000"); // array32 header, patched
    for (int i = 0; i < 4; ++i)
      b[b.size() - 1 - static_cast<size_t>(i)] =
        static_cast<char>((n >> (8 * i)) & 0xff);
    for (size_t i = 0; i < n; ++i)
      b += from_hex("91b0416c6c426c6f636b73436c6561726564");
    b += from_hex("c0");
    return b;
  };
  auto ok = batch(10);
  auto at_limit = decode_kv_batch(ok.data(), ok.size(), 10);
  REQUIRE(at_limit.ok);
  CHECK(at_limit.batch.events.size() == 10);
  auto over = decode_kv_batch(ok.data(), ok.size(), 9);
  CHECK_FALSE(over.ok);
  CHECK(over.error == kv_reject::too_many_events);
  CHECK(over.detail == "10 events, at most 9");
  CHECK(std::string{to_string(kv_reject::too_many_events)} ==
        "too_many_events");
  // The default limit holds for callers that give none.
  auto big = batch(default_max_batch_events + 1);
  CHECK(decode(big).error == kv_reject::too_many_events);
}

TEST_CASE("replay replies: with and without a topic, the end, and junk") {
  using outrider::kv::parse_replay_reply;
  using outrider::kv::replay_reply;
  auto seq7 = outrider::kv::encode_seq(7);
  auto end = outrider::kv::encode_seq(outrider::kv::replay_end_seq);
  auto topic = parse_replay_reply({"", "kv", seq7, "payload"});
  CHECK(topic.what == replay_reply::batch);
  CHECK(topic.seq == 7);
  CHECK(topic.payload == "payload");
  CHECK(parse_replay_reply({"", seq7, "p"}).what == replay_reply::batch);
  CHECK(parse_replay_reply({"", "", end, ""}).what == replay_reply::end);
  CHECK(parse_replay_reply({"", "not a sequence"}).what ==
        replay_reply::malformed);
  CHECK(parse_replay_reply({"x", seq7, "p"}).what == replay_reply::malformed);
  CHECK(parse_replay_reply({"", "1234567", "p"}).what ==
        replay_reply::malformed);
  CHECK(parse_replay_reply({}).what == replay_reply::malformed);
}
