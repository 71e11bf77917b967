#include "cluster/kv/kv_decoder.hpp"

#include <cstring>
#include <msgpack.hpp>
#include <string_view>
#include <xxhash.h>

namespace outrider::kv {

namespace {

using msgpack::object;
namespace t = msgpack::type;

std::string_view str(const object& o) {
  return {o.via.str.ptr, o.via.str.size};
}

bool is_str(const object& o, std::string_view s) {
  return o.type == t::STR && str(o) == s;
}

std::optional<uint64_t> as_hash(const object& o) {
  switch (o.type) {
  case t::POSITIVE_INTEGER:
    return o.via.u64;
  case t::NEGATIVE_INTEGER:
    return static_cast<uint64_t>(o.via.i64);
  case t::BIN:
    return fold_hash_bytes(o.via.bin.ptr, o.via.bin.size);
  default:
    return std::nullopt;
  }
}

bool as_hashes(const object& o, std::vector<uint64_t>& out) {
  if (o.type != t::ARRAY)
    return false;
  out.reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    auto h = as_hash(o.via.array.ptr[i]);
    if (!h)
      return false;
    out.push_back(*h);
  }
  return true;
}

bool as_tokens(const object& o, std::vector<uint32_t>& out) {
  if (o.type != t::ARRAY)
    return false;
  out.reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    const auto& v = o.via.array.ptr[i];
    if (v.type != t::POSITIVE_INTEGER || v.via.u64 > UINT32_MAX)
      return false;
    out.push_back(static_cast<uint32_t>(v.via.u64));
  }
  return true;
}

// The fields of one event, found by name (maps) or position (arrays).
struct fields {
  const object* values[4] = {nullptr, nullptr, nullptr, nullptr};
};

enum class tag { stored, removed, cleared, unknown };

tag tag_of(std::string_view s) {
  if (s == "BlockStored")
    return tag::stored;
  if (s == "BlockRemoved")
    return tag::removed;
  if (s == "AllBlocksCleared")
    return tag::cleared;
  return tag::unknown;
}

// Field names in declaration order; the first `required` must be present.
constexpr std::string_view stored_fields[] = {
  "block_hashes", "parent_block_hash", "token_ids", "block_size"};
constexpr std::string_view removed_fields[] = {"block_hashes"};

// A BlockStored event's fields, in order: block_hashes, parent_block_hash,
// token_ids, block_size.
std::optional<kv_reject> decode_stored(const fields& f,
                                       std::vector<kv::kv_event>& out) {
  kv::block_stored s;
  if (!as_hashes(*f.values[0], s.block_hashes))
    return kv_reject::bad_event;
  if (f.values[1]->type != t::NIL) {
    auto p = as_hash(*f.values[1]);
    if (!p)
      return kv_reject::bad_event;
    s.parent_block_hash = *p;
  }
  if (!as_tokens(*f.values[2], s.token_ids))
    return kv_reject::bad_event;
  const auto& bs = *f.values[3];
  if (bs.type != t::POSITIVE_INTEGER || bs.via.u64 == 0 ||
      bs.via.u64 > UINT32_MAX)
    return kv_reject::bad_event;
  s.block_size = static_cast<uint32_t>(bs.via.u64);
  if (s.block_hashes.empty() ||
      s.token_ids.size() != s.block_hashes.size() * s.block_size)
    return kv_reject::token_count_mismatch;
  out.emplace_back(std::move(s));
  return std::nullopt;
}

std::optional<kv_reject> decode_event(const object& ev,
                                      std::vector<kv::kv_event>& out) {
  tag kind = tag::unknown;
  fields f;
  size_t wanted = 0;
  auto wanted_for = [](tag k) -> size_t {
    return k == tag::stored ? 4 : (k == tag::removed ? 1 : 0);
  };
  if (ev.type == t::MAP) {
    const auto& m = ev.via.map;
    for (uint32_t i = 0; i < m.size; ++i)
      if (is_str(m.ptr[i].key, "type")) {
        if (m.ptr[i].val.type != t::STR)
          return kv_reject::bad_event;
        kind = tag_of(str(m.ptr[i].val));
      }
    if (kind == tag::unknown)
      return kv_reject::unknown_event_type;
    wanted = wanted_for(kind);
    const auto* names = kind == tag::stored ? stored_fields : removed_fields;
    for (uint32_t i = 0; i < m.size; ++i) {
      if (m.ptr[i].key.type != t::STR)
        return kv_reject::bad_event;
      for (size_t k = 0; k < wanted; ++k)
        if (str(m.ptr[i].key) == names[k])
          f.values[k] = &m.ptr[i].val;
    }
  } else if (ev.type == t::ARRAY && ev.via.array.size > 0) {
    const auto& a = ev.via.array;
    if (a.ptr[0].type != t::STR)
      return kv_reject::bad_event;
    kind = tag_of(str(a.ptr[0]));
    if (kind == tag::unknown)
      return kv_reject::unknown_event_type;
    wanted = wanted_for(kind);
    for (size_t k = 0; k < wanted && k + 1 < a.size; ++k)
      f.values[k] = &a.ptr[k + 1];
  } else {
    return kv_reject::bad_event;
  }
  for (size_t k = 0; k < wanted; ++k)
    if (!f.values[k])
      return kv_reject::bad_event;
  switch (kind) {
  case tag::stored:
    return decode_stored(f, out);
  case tag::removed: {
    kv::block_removed r;
    if (!as_hashes(*f.values[0], r.block_hashes))
      return kv_reject::bad_event;
    out.emplace_back(std::move(r));
    return std::nullopt;
  }
  case tag::cleared:
    out.emplace_back(kv::all_blocks_cleared{});
    return std::nullopt;
  case tag::unknown:
    break;
  }
  return kv_reject::unknown_event_type;
}

decode_result fail(kv_reject why, std::string detail) {
  decode_result r;
  r.ok = false;
  r.error = why;
  r.detail = std::move(detail);
  return r;
}

} // namespace

const char* to_string(kv_reject r) {
  switch (r) {
  case kv_reject::malformed_msgpack:
    return "malformed_msgpack";
  case kv_reject::bad_batch:
    return "bad_batch";
  case kv_reject::bad_event:
    return "bad_event";
  case kv_reject::unknown_event_type:
    return "unknown_event_type";
  case kv_reject::token_count_mismatch:
    return "token_count_mismatch";
  case kv_reject::too_many_events:
    return "too_many_events";
  }
  return "unknown";
}

uint64_t fold_hash_bytes(const void* data, size_t size) {
  return XXH3_64bits(data, size);
}

decode_result decode_kv_batch(const void* data, size_t size,
                              size_t max_events) {
  msgpack::object_handle oh;
  try {
    size_t off = 0;
    // Bounds keep a hostile length header from allocating gigabytes.
    msgpack::unpack_limit limit{1u << 22, 64, 1u << 16, 1u << 16, 0, 16};
    oh = msgpack::unpack(static_cast<const char*>(data), size, off, nullptr,
                         nullptr, limit);
    if (off != size)
      return fail(kv_reject::malformed_msgpack,
                  "trailing bytes after the batch");
  } catch (const std::exception& e) {
    return fail(kv_reject::malformed_msgpack, e.what());
  }
  const object& root = oh.get();
  if (root.type != t::ARRAY || root.via.array.size < 2)
    return fail(kv_reject::bad_batch, "a batch is [ts, events, dp_rank]");
  const auto& a = root.via.array;
  decode_result out;
  const auto& ts = a.ptr[0];
  if (ts.type == t::FLOAT64 || ts.type == t::FLOAT32)
    out.batch.timestamp = ts.via.f64;
  else if (ts.type == t::POSITIVE_INTEGER)
    out.batch.timestamp = static_cast<double>(ts.via.u64);
  else
    return fail(kv_reject::bad_batch, "the timestamp is not a number");
  if (a.ptr[1].type != t::ARRAY)
    return fail(kv_reject::bad_batch, "events is not an array");
  if (a.size >= 3) {
    const auto& r = a.ptr[2];
    if (r.type == t::POSITIVE_INTEGER && r.via.u64 <= INT32_MAX)
      out.batch.dp_rank = static_cast<int64_t>(r.via.u64);
    else if (r.type != t::NIL)
      return fail(kv_reject::bad_batch, "dp_rank is neither an int nor nil");
  }
  const auto& evs = a.ptr[1].via.array;
  if (evs.size > max_events)
    return fail(kv_reject::too_many_events, std::to_string(evs.size) +
                                              " events, at most " +
                                              std::to_string(max_events));
  out.batch.events.reserve(evs.size);
  for (uint32_t i = 0; i < evs.size; ++i)
    if (auto why = decode_event(evs.ptr[i], out.batch.events))
      out.batch.rejected.push_back(*why);
  out.ok = true;
  return out;
}

} // namespace outrider::kv
