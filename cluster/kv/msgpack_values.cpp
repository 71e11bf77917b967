#include "cluster/kv/msgpack_values.hpp"

#include "cluster/kv/kv_decoder.hpp"

namespace outrider::kv::mp {

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

// Token ids, or SGLang's EAGLE bigrams `[token, next]` (the first is the
// block's token).
bool as_tokens(const object& o, std::vector<uint32_t>& out) {
  if (o.type != t::ARRAY)
    return false;
  out.reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    const auto* v = &o.via.array.ptr[i];
    if (v->type == t::ARRAY && v->via.array.size == 2)
      v = &v->via.array.ptr[0];
    if (v->type != t::POSITIVE_INTEGER || v->via.u64 > UINT32_MAX)
      return false;
    out.push_back(static_cast<uint32_t>(v->via.u64));
  }
  return true;
}

// An optional string: nil or absent is "", anything else not a string fails.
bool opt_str(const object* o, std::string& out) {
  if (!o || o->type == t::NIL)
    return true;
  if (o->type != t::STR)
    return false;
  out.assign(o->via.str.ptr, o->via.str.size);
  return true;
}

bool opt_u32(const object* o, std::optional<uint32_t>& out) {
  if (!o || o->type == t::NIL)
    return true;
  if (o->type != t::POSITIVE_INTEGER || o->via.u64 > UINT32_MAX)
    return false;
  out = static_cast<uint32_t>(o->via.u64);
  return true;
}

bool opt_i64(const object* o, std::optional<int64_t>& out) {
  if (!o || o->type == t::NIL)
    return true;
  if (o->type == t::POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
    out = static_cast<int64_t>(o->via.u64);
  else if (o->type == t::NEGATIVE_INTEGER)
    out = o->via.i64;
  else
    return false;
  return true;
}

// A medium name; one not known counts as storage (credited least).
bool opt_medium(const object* o, kv::medium& out) {
  std::string name;
  if (!opt_str(o, name))
    return false;
  if (!name.empty())
    out = kv::medium_of(name).value_or(kv::medium::storage);
  return true;
}

bool opt_locality(const object* o, kv::locality& out) {
  std::string name;
  if (!opt_str(o, name))
    return false;
  out = name == "REMOTE"  ? kv::locality::remote
        : name == "LOCAL" ? kv::locality::local
                          : kv::locality::unspecified;
  return true;
}

// One item of a block's extra keys: str, [identifier, offset], or bin.
bool as_extra_item(const object& o, kv::extra_key& out) {
  if (o.type == t::STR) {
    out = {kv::extra_key::kind::text, std::string(str(o)), 0};
    return true;
  }
  if (o.type == t::BIN) {
    out = {kv::extra_key::kind::digest,
           std::string(o.via.bin.ptr, o.via.bin.size), 0};
    return true;
  }
  if (o.type == t::ARRAY && o.via.array.size == 2) {
    const auto& id = o.via.array.ptr[0];
    std::optional<int64_t> off;
    if (!opt_i64(&o.via.array.ptr[1], off) || !off)
      return false;
    if (id.type == t::STR)
      out = {kv::extra_key::kind::media, std::string(str(id)), *off};
    else if (id.type == t::BIN)
      out = {kv::extra_key::kind::media,
             std::string(id.via.bin.ptr, id.via.bin.size), *off};
    else
      return false;
    return true;
  }
  return false;
}

// extra_keys: nil, or one entry (nil or a list of items) per block hash.
bool opt_extra_keys(const object* o, size_t blocks,
                    std::vector<kv::block_extra>& out) {
  if (!o || o->type == t::NIL)
    return true;
  if (o->type != t::ARRAY || o->via.array.size != blocks)
    return false;
  out.resize(blocks);
  bool any = false;
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    const auto& e = o->via.array.ptr[i];
    if (e.type == t::NIL)
      continue;
    if (e.type != t::ARRAY)
      return false;
    for (uint32_t j = 0; j < e.via.array.size; ++j) {
      kv::extra_key k;
      if (!as_extra_item(e.via.array.ptr[j], k))
        return false;
      out[i].push_back(std::move(k));
      any = true;
    }
  }
  if (!any)
    out.clear();
  return true;
}

} // namespace outrider::kv::mp
