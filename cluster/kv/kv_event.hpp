#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace outrider::kv {

/// The KV cache events engines publish (docs/wire.md, "KV events"), shared
/// by the simulated engine (which emits them) and outrider (which decodes,
/// stores, forwards and indexes them). Block hashes are the engine's opaque
/// keys, folded to 64 bits. Every field today's vLLM (v0.26-v0.33) and
/// SGLang put in an event is kept, so that what the engine said reaches
/// the router whole.

/// Where a copy of a block lives. vLLM: "GPU", "CPU", "STORAGE" (v0.26's
/// "FS"/"OBJ" read as storage); SGLang: "GPU", "CPU_PINNED", "DISK",
/// "EXTERNAL" (the last two read as storage). Absent means GPU.
enum class medium : uint8_t { gpu = 0, cpu = 1, storage = 2 };
inline constexpr size_t medium_count = 3;

/// Relative to the publisher: a REMOTE copy is held by another node's tier.
enum class locality : uint8_t { unspecified = 0, local = 1, remote = 2 };

/// One item of vLLM's `extra_keys` for one block: a bare string (the LoRA
/// name, or the tenant's cache salt on the first block), a media item
/// (identifier, offset of its first token relative to the block start,
/// negative when it began in an earlier block), or a digest (32 bytes of a
/// prompt-embeds SHA-256).
struct extra_key {
  enum class kind : uint8_t { text = 0, media = 1, digest = 2 };
  kind k = kind::text;
  std::string value;
  int64_t offset = 0; // media only
  friend bool operator==(const extra_key& a, const extra_key& b) {
    return a.k == b.k && a.value == b.value && a.offset == b.offset;
  }
};
/// A block's extra keys, in the engine's order.
using block_extra = std::vector<extra_key>;

/// Newly cached blocks of one request step, in sequence order. A tokenless
/// store (no token ids, block size 0) is an offload placeholder: one per
/// offload key, resolvable only through a hash already known.
struct block_stored {
  std::vector<uint64_t> block_hashes;
  std::optional<uint64_t> parent_block_hash; // nullopt at the root
  std::vector<uint32_t> token_ids;           // block_size per hash
  uint32_t block_size = 0;
  std::optional<int64_t> lora_id; // deprecated by vLLM; name preferred
  std::string lora_name;          // "" = the base model
  kv::medium medium = kv::medium::gpu;
  /// Empty, or one entry per hash (each possibly empty).
  std::vector<block_extra> extra_keys;
  std::optional<uint32_t> group_idx;
  std::string spec_kind; // kv_cache_spec_kind, "" when not said
  std::optional<uint32_t> sliding_window;
  kv::locality locality = kv::locality::unspecified;
  std::string ownership;  // "" = the framework's own cache
  std::string session_id; // informational
  std::string cache_salt; // SGLang: the tenant salt seeding the chain

  bool tokenless() const { return block_size == 0 && token_ids.empty(); }
};

/// Blocks evicted from one medium.
struct block_removed {
  std::vector<uint64_t> block_hashes;
  kv::medium medium = kv::medium::gpu;
  std::optional<uint32_t> group_idx;
  kv::locality locality = kv::locality::unspecified;
  std::string ownership;
};

/// Every cached block of the rank is gone (prefix-cache reset).
struct all_blocks_cleared {};

using kv_event = std::variant<block_stored, block_removed, all_blocks_cleared>;

/// The wire names of a medium and a locality, and back; nullopt for a name
/// not known.
const char* to_string(kv::medium m);
std::optional<kv::medium> medium_of(std::string_view name);
const char* to_string(kv::locality l);

/// Whether blocks of this kv_cache_spec_kind serve prefix matches: full
/// attention kinds do (and an unspecified kind); sliding-window, chunked
/// local and mamba groups do not.
bool serves_prefix(std::string_view spec_kind);

/// What, besides its tokens, makes one block's KV distinct: the LoRA
/// adapter (by name; "#lora-id:N" when only the id is known) and the
/// block's other extra keys (media items, the tenant salt, digests) in the
/// engine's order. The router's key for a block is made of both.
struct block_identity {
  std::string lora;
  block_extra extra;
};

/// The identity of block `i` of a store: the LoRA name from `lora_name`
/// (else `lora_id`), the block's extra keys without that name, and for a
/// store at the root of a chain with SGLang's `cache_salt` the salt.
block_identity identity_of(const block_stored& s, size_t i);

/// One cached block as the engine knows it (ground truth for tests, and
/// the sidecar's snapshots).
struct cached_block {
  uint64_t hash = 0;
  std::optional<uint64_t> parent;
  std::vector<uint32_t> token_ids;
  block_identity identity;
  kv::medium medium = kv::medium::gpu;
  kv::locality locality = kv::locality::unspecified;
  std::string ownership;
  std::optional<uint32_t> group_idx;
  std::string spec_kind;
};

/// Cached blocks as one store each, every block after its parent when the
/// parent is among them (a snapshot that can be applied in order). Linear.
std::vector<kv_event> stores_parents_first(std::vector<cached_block> blocks);

} // namespace outrider::kv
