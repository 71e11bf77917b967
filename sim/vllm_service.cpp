// vLLM's native gRPC (package vllm) on top of the simulated engine.
#include <csignal>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "sim/sim_server.hpp"
#include "vllm.grpc.pb.h"

namespace outrider::sim {

namespace {

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

constexpr const char* rank_key = "x-data-parallel-rank";

vllm::FinishReason to_vllm(finish_reason r) {
  switch (r) {
  case finish_reason::length:
    return vllm::LENGTH;
  case finish_reason::stop:
    return vllm::STOP;
  case finish_reason::aborted:
    return vllm::ABORTED;
  case finish_reason::none:
    break;
  }
  return vllm::NOT_FINISHED;
}

// Checks a request and turns it into an engine request.
Status prepare(sim_engine& e, ServerContext* ctx,
               const vllm::GenerateRequest& in, engine_request* out,
               int* rank) {
  const auto& cfg = e.config();
  if (auto st = rank_from_metadata(*ctx, rank_key, e.ranks(), rank); !st.ok())
    return st;
  if (*rank < 0)
    *rank = e.pick_rank();
  if (!in.model().empty() && in.model() != cfg.model)
    return {StatusCode::NOT_FOUND, "model '" + in.model() +
                                     "' is not served "
                                     "here (serving '" +
                                     cfg.model + "')"};
  if (in.has_text())
    return {StatusCode::INVALID_ARGUMENT,
            "text prompts are not supported by this engine; send token_ids"};
  if (!in.has_token_ids() || in.token_ids().ids_size() == 0)
    return {StatusCode::INVALID_ARGUMENT, "the prompt is empty"};
  if (in.stopping().max_new_tokens() == 0)
    return {StatusCode::INVALID_ARGUMENT, "max_new_tokens must be at least 1"};
  out->id = in.request_id().empty() ? e.new_request_id() : in.request_id();
  out->prompt.assign(in.token_ids().ids().begin(), in.token_ids().ids().end());
  out->max_tokens = in.stopping().max_new_tokens();
  out->seed =
    in.sampling().has_seed() ? static_cast<uint64_t>(in.sampling().seed()) : 0;
  out->stop_token_ids.assign(in.stopping().stop_token_ids().begin(),
                             in.stopping().stop_token_ids().end());
  // As vLLM: a priority needs --scheduling-policy priority.
  if (in.priority() != 0 && !cfg.engine.priority_scheduling)
    return {StatusCode::INVALID_ARGUMENT,
            "a priority needs --scheduling-policy priority"};
  out->priority = in.priority();
  if (auto st = take_identity(cfg, in.lora_name(), in.kv().cache_salt(), *out);
      !st.ok())
    return st;
  // Disaggregation through kv_transfer_params, like vLLM's connectors.
  const auto& params = in.kv().kv_transfer_params().fields();
  auto remote = params.find("do_remote_prefill");
  bool from_prefill = remote != params.end() && remote->second.bool_value();
  if (cfg.engine_role_prefill() && from_prefill)
    return {StatusCode::FAILED_PRECONDITION,
            "role mismatch: this is a prefill engine"};
  if (from_prefill) {
    if (!cfg.engine_role_decode())
      return {StatusCode::FAILED_PRECONDITION,
              "role mismatch: this engine does not take remote KV"};
    auto sid = params.find("session_id");
    if (sid == params.end() || sid->second.string_value().empty())
      return {StatusCode::INVALID_ARGUMENT,
              "kv_transfer_params.session_id is missing"};
    out->kv_preloaded = true;
  }
  if (cfg.engine_role_prefill())
    out->max_tokens = 1;
  return Status::OK;
}

// A prefill engine's answer names the KV it holds for the decode engine.
void set_transfer_params(const sim_engine& e, const kv_session& s,
                         google::protobuf::Struct* params) {
  auto& f = *params->mutable_fields();
  f["do_remote_prefill"].set_bool_value(true);
  f["session_id"].set_string_value(s.id);
  f["remote_host"].set_string_value(e.config().host);
  f["remote_port"].set_number_value(e.config().grpc_port);
  f["remote_dp_rank"].set_number_value(s.rank);
}

void fill(const sim_engine& e, const std::vector<token_output>& outs,
          uint32_t& produced, const std::optional<kv_session>& session,
          vllm::GenerateResponse* resp) {
  auto* seq = resp->mutable_outputs();
  for (const auto& o : outs) {
    if (o.has_token) {
      seq->add_token_ids(o.token);
      ++produced;
    }
    if (o.finished != finish_reason::none) {
      auto* fi = seq->mutable_finish_info();
      fi->set_num_output_tokens(produced);
      fi->set_finish_reason(to_vllm(o.finished));
      if (session && o.finished != finish_reason::aborted)
        set_transfer_params(e, *session, fi->mutable_kv_transfer_params());
    }
  }
  seq->set_num_tokens(produced);
}

class inference final : public vllm::Inference::Service {
 public:
  explicit inference(sim_engine& e) : e_(e) {}

  Status Generate(ServerContext* ctx, const vllm::GenerateRequest* in,
                  vllm::GenerateResponse* out) override {
    e_.note_trace(*ctx);
    engine_request req;
    int rank = 0;
    if (auto st = prepare(e_, ctx, *in, &req, &rank); !st.ok())
      return st;
    uint32_t produced = 0;
    auto prompt_len = static_cast<uint32_t>(req.prompt.size());
    auto session = open_session(rank, req);
    auto st = run(ctx, rank, std::move(req), [&](auto& outs) {
      fill(e_, outs, produced, session, out);
      return true;
    });
    out->mutable_prompt_info()->set_num_prompt_tokens(prompt_len);
    return st;
  }

  Status
  GenerateStream(ServerContext* ctx, const vllm::GenerateRequest* in,
                 grpc::ServerWriter<vllm::GenerateResponse>* w) override {
    engine_request req;
    int rank = 0;
    if (auto st = prepare(e_, ctx, *in, &req, &rank); !st.ok())
      return st;
    uint32_t produced = 0;
    bool first = true;
    auto prompt_len = static_cast<uint32_t>(req.prompt.size());
    auto session = open_session(rank, req);
    return run(ctx, rank, std::move(req), [&](auto& outs) {
      vllm::GenerateResponse resp;
      if (first) {
        resp.mutable_prompt_info()->set_num_prompt_tokens(prompt_len);
        first = false;
      }
      fill(e_, outs, produced, session, &resp);
      return w->Write(resp);
    });
  }

 private:
  std::optional<kv_session> open_session(int rank, const engine_request& r) {
    if (!e_.config().engine_role_prefill())
      return std::nullopt;
    return e_.open_session(rank, r.prompt.size());
  }

  Status run(ServerContext* ctx, int rank, engine_request req,
             const std::function<bool(std::vector<token_output>&)>& write) {
    if (req.kv_preloaded) {
      // Simulated KV transfer from the prefill engine.
      auto blocks = req.prompt.size() / e_.config().engine.block_size;
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(
        e_.config().transfer_ms_per_block * static_cast<double>(blocks) /
        e_.config().speedup));
    }
    return e_.generate([ctx] { return ctx->IsCancelled(); }, rank,
                       std::move(req), write);
  }

  sim_engine& e_;
};

// What vLLM answers to GetKvEventSources: one source per rank, the bind
// address as configured (wildcard included).
void kv_event_sources(sim_engine& e, vllm::GetKvEventSourcesResponse* out) {
  const auto& c = e.config();
  if (!c.kv_events)
    return;
  for (int r = 0; r < e.ranks(); ++r) {
    auto* s = out->add_sources();
    s->set_transport("zmq");
    s->set_endpoint(rank_endpoint(c.kv_endpoint, r));
    s->set_topic(c.kv_topic);
    if (!c.kv_replay_endpoint.empty())
      s->set_replay_endpoint(rank_endpoint(c.kv_replay_endpoint, r));
    s->set_data_parallel_rank(static_cast<uint32_t>(r));
    s->set_encoding("msgpack");
    s->set_schema_version(1);
    s->set_buffer_steps(static_cast<uint32_t>(c.kv_buffer_steps));
    s->set_hwm(static_cast<uint32_t>(c.kv_hwm));
    s->set_max_queue_size(static_cast<uint32_t>(c.kv_max_queue_size));
  }
}

// vLLM's split surface (PR #56364): KV event discovery on its own service.
class kv_transfer final : public vllm::KvTransfer::Service {
 public:
  explicit kv_transfer(sim_engine& e) : e_(e) {}
  Status GetKvEventSources(ServerContext*,
                           const vllm::GetKvEventSourcesRequest*,
                           vllm::GetKvEventSourcesResponse* out) override {
    kv_event_sources(e_, out);
    return Status::OK;
  }

 private:
  sim_engine& e_;
};

} // namespace

std::string vllm_kv_event_sources_json(sim_engine& e) {
  vllm::GetKvEventSourcesResponse sources;
  kv_event_sources(e, &sources);
  auto list = nlohmann::json::array();
  for (const auto& s : sources.sources())
    list.push_back(
      {{"data_parallel_rank", s.data_parallel_rank()},
       {"endpoint", s.endpoint()},
       {"replay_endpoint", s.replay_endpoint().empty()
                             ? nlohmann::json()
                             : nlohmann::json(s.replay_endpoint())},
       {"topic", s.topic()}});
  return nlohmann::json{{"sources", list}}.dump() + "\n";
}

namespace {

class control final : public vllm::Control::Service {
 public:
  explicit control(sim_engine& e) : e_(e) {}

  Status GetServerInfo(ServerContext*, const vllm::GetServerInfoRequest*,
                       vllm::ServerInfo* out) override {
    const auto& c = e_.config();
    out->set_engine_version("outrider-sim 0.1.0");
    out->set_api_version("v1");
    out->set_instance_id(e_.instance_id());
    auto* p = out->mutable_parallelism();
    p->set_tensor_parallel_size(1);
    p->set_pipeline_parallel_size(1);
    p->set_data_parallel_size(static_cast<uint32_t>(e_.ranks()));
    out->set_max_model_len(c.engine.max_model_len);
    out->set_kv_block_size(c.engine.block_size);
    out->set_total_kv_blocks(c.engine.num_blocks);
    out->set_max_running_requests(c.engine.max_num_seqs);
    out->set_max_batched_tokens(c.engine.max_batched_tokens);
    return Status::OK;
  }

  Status GetModelInfo(ServerContext*, const vllm::GetModelInfoRequest*,
                      vllm::ModelInfo* out) override {
    out->set_model_id(e_.config().model);
    out->set_served_model_name(e_.config().model);
    out->set_supports_text_input(false);
    out->set_supports_token_ids_input(true);
    out->set_supports_lora(!e_.config().lora_adapters.empty());
    return Status::OK;
  }

  Status ListLoras(ServerContext*, const vllm::ListLorasRequest*,
                   vllm::ListLorasResponse* out) override {
    int64_t id = 0;
    for (const auto& name : e_.config().lora_adapters) {
      auto* a = out->add_adapters();
      a->set_lora_id(++id);
      a->set_lora_name(name);
      a->set_source_path("/adapters/" + name);
    }
    return Status::OK;
  }

  Status Abort(ServerContext*, const vllm::AbortRequest* in,
               vllm::AbortResponse*) override {
    if (in->request_ids_size() == 0)
      return {StatusCode::INVALID_ARGUMENT, "no request_ids given"};
    size_t found = 0;
    for (const auto& id : in->request_ids())
      for (int r = 0; r < e_.ranks(); ++r)
        if (e_.runner(r).abort(id)) {
          ++found;
          break;
        }
    if (found == 0)
      return {StatusCode::NOT_FOUND, "no such running request"};
    return Status::OK;
  }

  Status GetKvEventSources(ServerContext*,
                           const vllm::GetKvEventSourcesRequest*,
                           vllm::GetKvEventSourcesResponse* out) override {
    if (e_.config().vllm_split_services)
      return {StatusCode::UNIMPLEMENTED,
              "moved to vllm.KvTransfer (--vllm-services split)"};
    if (!e_.config().vllm_grpc_discovery)
      return {StatusCode::UNIMPLEMENTED, "no KV event discovery over gRPC "
                                         "(--vllm-services none)"};
    kv_event_sources(e_, out);
    return Status::OK;
  }

  Status PauseGeneration(ServerContext*, const vllm::PauseGenerationRequest*,
                         vllm::PauseGenerationResponse*) override {
    e_.set_paused(true);
    return Status::OK;
  }

  Status ResumeGeneration(ServerContext*, const vllm::ResumeGenerationRequest*,
                          vllm::ResumeGenerationResponse*) override {
    e_.set_paused(false);
    return Status::OK;
  }

  Status IsPaused(ServerContext*, const vllm::IsPausedRequest*,
                  vllm::IsPausedResponse* out) override {
    out->set_paused(e_.paused());
    return Status::OK;
  }

  Status Shutdown(ServerContext*, const vllm::ShutdownRequest*,
                  vllm::ShutdownResponse*) override {
    ::kill(::getpid(), SIGTERM);
    return Status::OK;
  }

 private:
  sim_engine& e_;
};

} // namespace

std::unique_ptr<grpc::Service> make_vllm_inference(sim_engine& e) {
  return std::make_unique<inference>(e);
}

std::unique_ptr<grpc::Service> make_vllm_control(sim_engine& e) {
  return std::make_unique<control>(e);
}

std::unique_ptr<grpc::Service> make_vllm_kv_transfer(sim_engine& e) {
  return std::make_unique<kv_transfer>(e);
}

} // namespace outrider::sim
