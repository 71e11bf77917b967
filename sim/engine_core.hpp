#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/kv/block_hash.hpp"
#include "sim/block_manager.hpp"
#include "sim/offload_tier.hpp"
#include "sim/timing_model.hpp"
#include "sim/token_stream.hpp"

namespace outrider::sim {

struct engine_config {
  uint32_t num_blocks = 16384;
  uint32_t block_size = 64;
  uint32_t max_num_seqs = 256;
  uint32_t max_batched_tokens = 8192;
  uint32_t max_model_len = 131072;
  uint32_t vocab_size = 32000;
  /// vLLM's --scheduling-policy priority: waiting requests are admitted by
  /// (priority, arrival), lower first; false: arrival order only.
  bool priority_scheduling = false;
  /// Salt of the engine's block hashes: opaque, not the router's hash.
  uint64_t hash_salt = 0x9e3779b97f4a7c15ULL;
  timing_model timing;
  /// A CPU offload tier of this many blocks (0: none), as vLLM's
  /// OffloadingConnector: every block computed on GPU is written through
  /// to it; a prompt's blocks found there after its GPU prefix are loaded
  /// back at `offload_load_ms` each instead of computed. Its events
  /// (medium CPU) are self-describing (full metadata) or, with
  /// `offload_placeholders`, tokenless (one per hash); `offload_locality`
  /// marks them (REMOTE: a tier another node holds); `offload_store_only`
  /// publishes no removals (LMCache's connector).
  uint32_t offload_blocks = 0;
  bool offload_placeholders = false;
  kv::locality offload_locality = kv::locality::unspecified;
  bool offload_store_only = false;
  /// Prompt tokens a media item's placeholder stands for: the blocks they
  /// overlap are keyed by the item (vLLM's (identifier, offset) extra key).
  uint32_t media_item_tokens = 16;
  double offload_load_ms = 0.05;
  /// Publish every GPU event also as group 1 of a sliding-window layer
  /// (same hashes, as vLLM's hybrid models), group 0 full attention.
  bool hybrid_groups = false;
};

/// A request as the engine core sees it.
struct engine_request {
  std::string id;
  std::vector<uint32_t> prompt;
  uint32_t max_tokens = 16;
  uint64_t seed = 0;
  std::vector<uint32_t> stop_token_ids;
  /// The prompt's KV arrives from a prefill engine: its full blocks are
  /// stored without computing them.
  bool kv_preloaded = false;
  /// Lower is admitted first, with priority scheduling (vLLM's meaning).
  int32_t priority = 0;
  /// The LoRA adapter and the tenant's cache salt: as in vLLM, they key the
  /// request's KV (the adapter every block, the salt the first and so the
  /// chain), and its KV events carry them (lora_name, extra_keys).
  std::string lora;
  std::string cache_salt;
  /// Media items of the prompt (identifier, first token, tokens covered).
  std::vector<kv::media_span> media;
};

enum class finish_reason { none, length, stop, aborted };

/// What one request got in one step.
struct token_output {
  std::string request_id;
  uint32_t token = 0;
  bool has_token = false;
  finish_reason finished = finish_reason::none;
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0; // prompt tokens served from the prefix cache
  uint32_t output_index = 0;  // position of `token` in the output
};

struct step_result {
  double duration_ms = 0; // model time, before the speed-up
  uint32_t prefill_tokens = 0;
  uint32_t decode_tokens = 0;
  std::vector<token_output> outputs;
  std::vector<kv_event> events;
};

struct engine_load {
  uint32_t running = 0;
  uint32_t waiting = 0;
  uint32_t used_blocks = 0;
  uint32_t total_blocks = 0;
  uint64_t running_tokens = 0;
  uint64_t waiting_tokens = 0;
};

/// A vLLM-like scheduler over a block manager: waiting and running queues, a
/// per-step token budget spent on running requests first, chunked prefill,
/// at most max_num_seqs running, preemption of the newest request when blocks
/// run out. Pure: no threads, no clock; `step()` returns the model's time.
class engine_core {
 public:
  explicit engine_core(engine_config cfg);
  ~engine_core();

  const engine_config& config() const { return cfg_; }

  /// Queues a request; false (with `why`) when it can never run.
  bool submit(engine_request req, std::string* why = nullptr);
  /// Removes a request; returns false when it is unknown (or finished).
  bool abort(const std::string& id);
  bool has_request(const std::string& id) const;
  bool idle() const { return running_.empty() && waiting_.empty(); }

  /// Schedules and runs one step.
  step_result step();

  /// Prefix-cache reset; records AllBlocksCleared.
  void reset_prefix_cache();
  /// Every cached block: the GPU's, then the offload tier's copies.
  std::vector<cached_block> cache_snapshot() const;
  engine_load load() const;
  uint64_t preemptions() const { return preemptions_; }

 private:
  struct request_state;
  using request_ptr = std::shared_ptr<request_state>;

  bool ensure_blocks(request_state& r, size_t tokens);
  void preempt(const request_ptr& r);
  void free_blocks(request_state& r);
  void commit_full_blocks(request_state& r);
  std::vector<uint64_t> full_block_hashes(const request_state& r) const;
  uint64_t block_hash(const request_state& r, size_t block,
                      std::optional<uint64_t> parent,
                      const uint32_t* tokens) const;
  bool admit(const request_ptr& r, uint32_t& budget,
             std::vector<std::pair<request_ptr, uint32_t>>& scheduled);

  engine_config cfg_;
  block_manager blocks_;
  std::deque<request_ptr> waiting_;
  std::vector<request_ptr> running_; // in admission order
  std::unordered_map<std::string, request_ptr> by_id_;
  uint64_t preemptions_ = 0;
  offload_tier offload_;
  double load_ms_ = 0; // reloads of the step being scheduled
  std::vector<token_output> pending_outputs_; // aborts between steps
};

} // namespace outrider::sim
