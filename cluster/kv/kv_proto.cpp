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
    b->set_medium(oe::STORAGE_MEDIUM_GPU);
  } else if (auto* r = std::get_if<block_removed>(&ev)) {
    auto* b = out->mutable_block_removed();
    for (auto h : r->block_hashes)
      *b->add_block_hashes() = to_proto_hash(h);
    b->set_medium(oe::STORAGE_MEDIUM_GPU);
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
    if (s.block_size == 0 || s.block_hashes.empty() ||
        s.token_ids.size() != s.block_hashes.size() * s.block_size)
      return std::nullopt;
    return s;
  }
  case oe::KvEvent::kBlockRemoved: {
    block_removed r;
    for (const auto& h : ev.block_removed().block_hashes()) {
      auto x = from_proto_hash(h);
      if (!x)
        return std::nullopt;
      r.block_hashes.push_back(*x);
    }
    return r;
  }
  case oe::KvEvent::kAllBlocksCleared:
    return all_blocks_cleared{};
  default:
    return std::nullopt;
  }
}

} // namespace outrider::kv
