#include "cluster/kv/kv_proto.hpp"

#include <xxhash.h>

namespace outrider::kv {

namespace oe = openengine::v1;

oe::KvBlockHash to_proto_hash(uint64_t h) {
  oe::KvBlockHash out;
  std::string v(8, '\0');
  for (int i = 7; i >= 0; --i, h >>= 8)
    v[static_cast<size_t>(i)] = static_cast<char>(h & 0xff);
  out.set_value(v);
  out.set_encoding("uint64");
  return out;
}

namespace {

std::optional<uint64_t> from_proto_hash(const oe::KvBlockHash& h) {
  const auto& v = h.value();
  if ((h.encoding() == "uint64" || h.encoding() == "int64") && v.size() == 8) {
    uint64_t x = 0;
    for (unsigned char c : v)
      x = (x << 8) | c;
    return x;
  }
  if (h.encoding() == "bytes" && !v.empty())
    return XXH3_64bits(v.data(), v.size());
  return std::nullopt;
}

oe::StorageMedium to_proto(medium m) {
  switch (m) {
  case medium::cpu:
    return oe::STORAGE_MEDIUM_CPU_PINNED;
  case medium::storage:
    return oe::STORAGE_MEDIUM_DISK;
  case medium::gpu:
    break;
  }
  return oe::STORAGE_MEDIUM_GPU;
}

medium from_proto(oe::StorageMedium m) {
  switch (m) {
  case oe::STORAGE_MEDIUM_CPU_PINNED:
    return medium::cpu;
  case oe::STORAGE_MEDIUM_DISK:
  case oe::STORAGE_MEDIUM_EXTERNAL:
    return medium::storage;
  default:
    return medium::gpu;
  }
}

oe::KvLocality to_proto(locality l) {
  return l == locality::local    ? oe::KV_LOCALITY_LOCAL
         : l == locality::remote ? oe::KV_LOCALITY_REMOTE
                                 : oe::KV_LOCALITY_UNSPECIFIED;
}

locality from_proto(oe::KvLocality l) {
  return l == oe::KV_LOCALITY_LOCAL    ? locality::local
         : l == oe::KV_LOCALITY_REMOTE ? locality::remote
                                       : locality::unspecified;
}

void to_proto(const block_extra& ex, oe::KvBlockExtra* out) {
  for (const auto& k : ex) {
    auto* p = out->add_keys();
    switch (k.k) {
    case extra_key::kind::text:
      p->set_text(k.value);
      break;
    case extra_key::kind::media:
      p->mutable_media()->set_identifier(k.value);
      p->mutable_media()->set_offset(k.offset);
      break;
    case extra_key::kind::digest:
      p->set_digest(k.value);
      break;
    }
  }
}

bool from_proto(const oe::KvBlockExtra& in, block_extra& out) {
  for (const auto& k : in.keys()) {
    switch (k.item_case()) {
    case oe::KvExtraKey::kText:
      out.push_back({extra_key::kind::text, k.text(), 0});
      break;
    case oe::KvExtraKey::kMedia:
      out.push_back(
        {extra_key::kind::media, k.media().identifier(), k.media().offset()});
      break;
    case oe::KvExtraKey::kDigest:
      out.push_back({extra_key::kind::digest, k.digest(), 0});
      break;
    default:
      return false;
    }
  }
  return true;
}

} // namespace

void to_proto(const kv_event& ev, oe::KvEvent* out) {
  if (auto* s = std::get_if<block_stored>(&ev)) {
    auto* b = out->mutable_block_stored();
    for (auto h : s->block_hashes)
      *b->add_block_hashes() = to_proto_hash(h);
    if (s->parent_block_hash)
      *b->mutable_parent_block_hash() = to_proto_hash(*s->parent_block_hash);
    b->mutable_token_ids()->Add(s->token_ids.begin(), s->token_ids.end());
    b->set_block_size(s->block_size);
    if (s->lora_id)
      b->set_lora_id(*s->lora_id);
    b->set_lora_name(s->lora_name);
    b->set_medium(to_proto(s->medium));
    if (s->group_idx)
      b->set_group_idx(*s->group_idx);
    for (const auto& ex : s->extra_keys)
      to_proto(ex, b->add_extra_keys());
    b->set_kv_cache_spec_kind(s->spec_kind);
    if (s->sliding_window)
      b->set_kv_cache_spec_sliding_window(*s->sliding_window);
    b->set_locality(to_proto(s->locality));
    b->set_ownership(s->ownership);
    b->set_session_id(s->session_id);
    b->set_cache_salt(s->cache_salt);
  } else if (auto* r = std::get_if<block_removed>(&ev)) {
    auto* b = out->mutable_block_removed();
    for (auto h : r->block_hashes)
      *b->add_block_hashes() = to_proto_hash(h);
    b->set_medium(to_proto(r->medium));
    if (r->group_idx)
      b->set_group_idx(*r->group_idx);
    b->set_locality(to_proto(r->locality));
    b->set_ownership(r->ownership);
  } else {
    out->mutable_all_blocks_cleared();
  }
}

std::optional<kv_event> from_proto(const oe::KvEvent& ev) {
  switch (ev.event_case()) {
  case oe::KvEvent::kBlockStored: {
    const auto& b = ev.block_stored();
    block_stored s;
    for (const auto& h : b.block_hashes()) {
      auto x = from_proto_hash(h);
      if (!x)
        return std::nullopt;
      s.block_hashes.push_back(*x);
    }
    if (b.has_parent_block_hash()) {
      auto p = from_proto_hash(b.parent_block_hash());
      if (!p)
        return std::nullopt;
      s.parent_block_hash = *p;
    }
    s.token_ids.assign(b.token_ids().begin(), b.token_ids().end());
    s.block_size = b.block_size();
    if (s.block_hashes.empty() ||
        (!s.tokenless() &&
         (s.block_size == 0 ||
          s.token_ids.size() != s.block_hashes.size() * s.block_size)))
      return std::nullopt;
    if (b.has_lora_id())
      s.lora_id = b.lora_id();
    s.lora_name = b.lora_name();
    s.medium = from_proto(b.medium());
    if (b.has_group_idx())
      s.group_idx = b.group_idx();
    if (b.extra_keys_size() != 0 &&
        static_cast<size_t>(b.extra_keys_size()) != s.block_hashes.size())
      return std::nullopt;
    for (const auto& ex : b.extra_keys())
      if (!from_proto(ex, s.extra_keys.emplace_back()))
        return std::nullopt;
    s.spec_kind = b.kv_cache_spec_kind();
    if (b.has_kv_cache_spec_sliding_window())
      s.sliding_window = b.kv_cache_spec_sliding_window();
    s.locality = from_proto(b.locality());
    s.ownership = b.ownership();
    s.session_id = b.session_id();
    s.cache_salt = b.cache_salt();
    return s;
  }
  case oe::KvEvent::kBlockRemoved: {
    const auto& b = ev.block_removed();
    block_removed r;
    for (const auto& h : b.block_hashes()) {
      auto x = from_proto_hash(h);
      if (!x)
        return std::nullopt;
      r.block_hashes.push_back(*x);
    }
    r.medium = from_proto(b.medium());
    if (b.has_group_idx())
      r.group_idx = b.group_idx();
    r.locality = from_proto(b.locality());
    r.ownership = b.ownership();
    return r;
  }
  case oe::KvEvent::kAllBlocksCleared:
    return all_blocks_cleared{};
  default:
    return std::nullopt;
  }
}

} // namespace outrider::kv
