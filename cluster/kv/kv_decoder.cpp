#include "cluster/kv/kv_decoder.hpp"

#include <cstring>
#include <iterator>
#include <msgpack.hpp>
#include <string_view>
#include <xxhash.h>

#include "cluster/kv/msgpack_values.hpp"

namespace outrider::kv {

namespace {

using msgpack::object;
namespace t = msgpack::type;

using namespace mp;

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

// Field names in declaration order (= positions after the tag in the array
// form); the first `required` must be present. BlockStored's `cache_salt`
// is SGLang's (maps only).
constexpr std::string_view stored_fields[] = {"block_hashes",
                                              "parent_block_hash",
                                              "token_ids",
                                              "block_size",
                                              "lora_id",
                                              "medium",
                                              "lora_name",
                                              "extra_keys",
                                              "group_idx",
                                              "kv_cache_spec_kind",
                                              "kv_cache_spec_sliding_window",
                                              "locality",
                                              "ownership",
                                              "session_id",
                                              "cache_salt"};
constexpr size_t stored_positional = 14; // cache_salt has no position
constexpr size_t stored_required = 4;
constexpr std::string_view removed_fields[] = {
  "block_hashes", "medium", "group_idx", "locality", "ownership"};
constexpr size_t removed_required = 1;
constexpr size_t max_fields = std::size(stored_fields);

// The fields of one event, found by name (maps) or position (arrays).
struct fields {
  const object* values[max_fields] = {};
  // SGLang's intermediate array form: a metadata map where vLLM has
  // lora_name ({"cache_salt"?, "session_id"?}).
  const object* metadata = nullptr;
};

enum stored_pos : size_t {
  s_hashes,
  s_parent,
  s_tokens,
  s_block_size,
  s_lora_id,
  s_medium,
  s_lora_name,
  s_extra,
  s_group,
  s_kind,
  s_window,
  s_locality,
  s_ownership,
  s_session,
  s_salt,
};

std::optional<kv_reject> decode_stored(fields& f,
                                       std::vector<kv::kv_event>& out) {
  kv::block_stored s;
  if (!as_hashes(*f.values[s_hashes], s.block_hashes) || s.block_hashes.empty())
    return kv_reject::bad_event;
  if (f.values[s_parent]->type != t::NIL) {
    auto p = as_hash(*f.values[s_parent]);
    if (!p)
      return kv_reject::bad_event;
    s.parent_block_hash = *p;
  }
  if (!as_tokens(*f.values[s_tokens], s.token_ids))
    return kv_reject::bad_event;
  const auto& bs = *f.values[s_block_size];
  if (bs.type != t::POSITIVE_INTEGER || bs.via.u64 > UINT32_MAX)
    return kv_reject::bad_event;
  s.block_size = static_cast<uint32_t>(bs.via.u64);
  if (f.metadata) {
    const auto& m = f.metadata->via.map;
    for (uint32_t i = 0; i < m.size; ++i)
      if (is_str(m.ptr[i].key, "cache_salt"))
        f.values[s_salt] = &m.ptr[i].val;
      else if (is_str(m.ptr[i].key, "session_id"))
        f.values[s_session] = &m.ptr[i].val;
  }
  if (!opt_i64(f.values[s_lora_id], s.lora_id) ||
      !opt_medium(f.values[s_medium], s.medium) ||
      !opt_str(f.values[s_lora_name], s.lora_name) ||
      !opt_extra_keys(f.values[s_extra], s.block_hashes.size(), s.extra_keys) ||
      !opt_u32(f.values[s_group], s.group_idx) ||
      !opt_str(f.values[s_kind], s.spec_kind) ||
      !opt_u32(f.values[s_window], s.sliding_window) ||
      !opt_locality(f.values[s_locality], s.locality) ||
      !opt_str(f.values[s_ownership], s.ownership) ||
      !opt_str(f.values[s_session], s.session_id) ||
      !opt_str(f.values[s_salt], s.cache_salt))
    return kv_reject::bad_event;
  // An offload placeholder has neither tokens nor a block size; any other
  // store carries block_size tokens per hash.
  if (!s.tokenless() &&
      (s.block_size == 0 ||
       s.token_ids.size() != s.block_hashes.size() * s.block_size))
    return kv_reject::token_count_mismatch;
  out.emplace_back(std::move(s));
  return std::nullopt;
}

std::optional<kv_reject> decode_removed(const fields& f,
                                        std::vector<kv::kv_event>& out) {
  kv::block_removed r;
  if (!as_hashes(*f.values[0], r.block_hashes) ||
      !opt_medium(f.values[1], r.medium) ||
      !opt_u32(f.values[2], r.group_idx) ||
      !opt_locality(f.values[3], r.locality) ||
      !opt_str(f.values[4], r.ownership))
    return kv_reject::bad_event;
  out.emplace_back(std::move(r));
  return std::nullopt;
}

std::optional<kv_reject> decode_event(const object& ev,
                                      std::vector<kv::kv_event>& out) {
  tag kind = tag::unknown;
  fields f;
  auto names_of = [](tag k) -> std::pair<const std::string_view*, size_t> {
    if (k == tag::stored)
      return {stored_fields, std::size(stored_fields)};
    if (k == tag::removed)
      return {removed_fields, std::size(removed_fields)};
    return {nullptr, 0};
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
    auto [names, count] = names_of(kind);
    // Keys not known are ignored (newer engines add fields).
    for (uint32_t i = 0; i < m.size; ++i) {
      if (m.ptr[i].key.type != t::STR)
        return kv_reject::bad_event;
      for (size_t k = 0; k < count; ++k)
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
    auto count = kind == tag::stored    ? stored_positional
                 : kind == tag::removed ? std::size(removed_fields)
                                        : 0;
    // Trailing positions not known are ignored.
    for (size_t k = 0; k < count && k + 1 < a.size; ++k)
      f.values[k] = &a.ptr[k + 1];
    if (kind == tag::stored && f.values[s_lora_name] &&
        f.values[s_lora_name]->type == t::MAP) {
      f.metadata = f.values[s_lora_name];
      f.values[s_lora_name] = nullptr;
    }
  } else {
    return kv_reject::bad_event;
  }
  auto required = kind == tag::stored    ? stored_required
                  : kind == tag::removed ? removed_required
                                         : 0;
  for (size_t k = 0; k < required; ++k)
    if (!f.values[k])
      return kv_reject::bad_event;
  switch (kind) {
  case tag::stored:
    return decode_stored(f, out);
  case tag::removed:
    return decode_removed(f, out);
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
