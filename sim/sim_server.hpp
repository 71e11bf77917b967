#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/service_type.h>

#include "cluster/engine/vocabulary.hpp"
#include "openengine.pb.h"
#include "sim/bootstrap.hpp"
#include "sim/engine_runner.hpp"
#include "sim/kv_publisher.hpp"

namespace outrider::sim {

using engine_role = outrider::engine::worker_role;

/// Everything `outrider-sim` is configured with.
struct sim_config {
  std::string host = "127.0.0.1";
  int grpc_port = 50051;
  int debug_port = 0;        // 0: no debug HTTP
  int http_port = 0;         // OpenAI HTTP, rank r on http_port + r; 0: none
  std::string tokenizer_dir; // text and chat on the OpenAI HTTP
  /// Requests a rank lets wait before refusing more with
  /// RESOURCE_EXHAUSTED (an overloaded engine); 0: no limit.
  uint32_t max_waiting = 0;
  std::string model = "sim-model";
  /// LoRA adapters served besides the base model (vLLM --lora-modules):
  /// requests may name them; each keys its KV apart.
  std::vector<std::string> lora_adapters;
  /// vLLM's control surface: `old` (KV event discovery on Control only),
  /// `both` (also on KvTransfer, Control kept), `split` (KvTransfer only;
  /// Control's answers UNIMPLEMENTED).
  bool vllm_kv_transfer = true;
  bool vllm_split_services = false;
  /// false (--vllm-services none): no gRPC KV discovery at all, as a vLLM
  /// before PR #50033; GET /kv_event_sources on the debug port still is.
  bool vllm_grpc_discovery = true;
  int data_parallel_size = 1;
  engine_config engine;
  double speedup = 1.0;
  bool no_sleep = false;
  long startup_delay_ms = 0;
  long drain_timeout_ms = 5000;
  // KV events (vLLM's --kv-events-config).
  bool kv_events = false;
  std::string kv_endpoint = "tcp://*:5557";
  std::string kv_replay_endpoint;
  std::string kv_topic;
  size_t kv_buffer_steps = 10000;
  int kv_hwm = 100000;
  int kv_max_queue_size = 100000;
  event_encoding kv_encoding = event_encoding::map;
  hash_format kv_hashes = hash_format::uint64;
  bool replay_topic_frame = true;
  // SGLang's Generate without --incremental-streaming-output: every
  // message carries all output ids so far.
  bool sglang_cumulative_output = false;
  std::string protocol = "all"; // the services served: all, or one family
  bool serves(const char* family) const {
    return protocol == "all" || protocol == family;
  }
  // Disaggregation.
  engine_role role = engine_role::aggregated;
  double transfer_ms_per_block = 0.05;
  long bootstrap_timeout_ms = 10000; // SGLang's bootstrap handoff

  bool engine_role_prefill() const { return role == engine_role::prefill; }
  bool engine_role_decode() const { return role == engine_role::decode; }
};

/// Reads a request's data-parallel rank from metadata `key`: -1 when absent,
/// an error status when repeated, not base-10 or out of range.
grpc::Status rank_from_metadata(const grpc::ServerContext& ctx,
                                const std::string& key, int ranks, int* rank);

/// A KV session a prefill engine handed out.
struct kv_session {
  std::string id;
  int rank = 0;
  size_t prompt_tokens = 0;
};

/// The engine's shared state: one runner (and publisher) per rank, serving
/// status, sessions. RPC services hold a reference.
class sim_engine {
 public:
  explicit sim_engine(sim_config cfg);
  ~sim_engine();

  /// Binds the KV event sockets and starts the runners; error text or empty.
  std::string start();

  const sim_config& config() const { return cfg_; }
  const std::string& instance_id() const { return instance_id_; }
  int ranks() const { return static_cast<int>(runners_.size()); }
  engine_runner& runner(int r) { return *runners_[static_cast<size_t>(r)]; }
  /// Malformed requests the rank's replay socket ignored.
  uint64_t malformed_replay_requests(int r) const {
    return publishers_.empty()
             ? 0
             : publishers_[static_cast<size_t>(r)]->malformed_replay_requests();
  }
  /// The least loaded rank.
  int pick_rank() const;

  /// Connects the health service (after the gRPC server started).
  void attach(grpc::Server* server) { server_ = server; }
  void set_loaded(bool loaded);
  /// `in_health`: standard health turns NOT_SERVING while paused (vLLM,
  /// OpenEngine); SGLang's pause leaves it SERVING.
  void set_paused(bool paused, bool in_health = true);
  bool paused() const { return paused_.load(); }
  bool loaded() const { return loaded_.load(); }
  void begin_drain();
  bool draining() const { return draining_.load(); }

  std::string new_request_id();
  kv_session open_session(int rank, size_t prompt_tokens);
  std::optional<kv_session> find_session(const std::string& id) const;
  /// SGLang's bootstrap rooms (prefill engines).
  bootstrap_rooms& rooms() { return rooms_; }
  /// Remembers the `traceparent` metadata a Generate call carried (the
  /// last 64; "" for none), for tests: `GET /debug/traces`.
  void note_trace(const grpc::ServerContext& ctx);
  std::vector<std::string> traces() const;

  /// Runs a request to its end, handing outputs to `write` (false: stop),
  /// until `cancelled` says the client went. Cancellation does not abort
  /// the request (vLLM's rule).
  grpc::Status
  generate(const std::function<bool()>& cancelled, int rank, engine_request req,
           const std::function<bool(std::vector<token_output>&)>& write);

 private:
  void update_health();

  sim_config cfg_;
  std::string instance_id_;
  zmq::context_t zmq_;
  std::vector<std::unique_ptr<kv_publisher>> publishers_;
  std::vector<std::unique_ptr<engine_runner>> runners_;
  grpc::Server* server_ = nullptr;
  std::atomic<bool> loaded_{false};
  std::atomic<bool> paused_{false};
  std::atomic<bool> pause_in_health_{true};
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{0};
  mutable std::mutex mtx_;
  std::unordered_map<std::string, kv_session> sessions_; // guarded by mtx_
  std::deque<std::string> traces_;                       // guarded by mtx_
  bootstrap_rooms rooms_;
};

/// The gRPC services; each keeps a reference to the engine.
/// Takes a request's adapter and salt into `req`; NOT_FOUND for an adapter
/// not served (as vLLM answers), INVALID_ARGUMENT for a salt over 1 KiB.
grpc::Status take_identity(const sim_config& cfg, const std::string& lora,
                           const std::string& cache_salt, engine_request& req);
/// Takes an OpenEngine request's media items (outrider's MediaInput
/// fields): each covers `item_tokens` prompt tokens from its offset and is
/// known by its uuid, else by a digest of its URL (standing in for vLLM's
/// hash of the item's content). At most 64; an item without a URL or past
/// the prompt is INVALID_ARGUMENT.
grpc::Status take_media(const openengine::v1::GenerateRequest& in,
                        uint32_t item_tokens, engine_request& req);

std::unique_ptr<grpc::Service> make_vllm_inference(sim_engine& e);
std::unique_ptr<grpc::Service> make_vllm_control(sim_engine& e);
std::unique_ptr<grpc::Service> make_vllm_kv_transfer(sim_engine& e);
/// vLLM's HTTP `GET /kv_event_sources` body: `{"sources": [...]}`.
std::string vllm_kv_event_sources_json(sim_engine& e);
std::unique_ptr<grpc::Service> make_openengine_inference(sim_engine& e);
std::unique_ptr<grpc::Service> make_openengine_control(sim_engine& e);
/// SGLang's SglangService (proto/sglang.proto).
std::unique_ptr<grpc::Service> make_sglang_service(sim_engine& e,
                                                   bool cumulative);

} // namespace outrider::sim
