// SGLang's native gRPC (sglang.runtime.v1, proto/sglang.proto) on top of
// the simulated engine, on the same port as the vLLM and OpenEngine
// services: streamed Generate (incremental output ids; cumulative when
// started with --sglang-cumulative-output), meta_info as JSON strings, the
// DP rank in the body (routed_dp_rank), abort by rid and on a dropped
// stream, WatchEngineState (a full snapshot on connect and on every
// change: pause, drain), server info with kv_events, load, pause.
#include <chrono>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include "sglang.grpc.pb.h"
#include "sim/sim_server.hpp"

namespace outrider::sim {

namespace {

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;
namespace sg = sglang::runtime::v1;

std::string finish_json(finish_reason r) {
  const char* type = r == finish_reason::length    ? "length"
                     : r == finish_reason::stop    ? "stop"
                     : r == finish_reason::aborted ? "abort"
                                                   : "";
  return nlohmann::json{{"type", type}}.dump();
}

// "tcp://*:5557" -> ("*", 5557)
std::pair<std::string, int> host_port(const std::string& endpoint) {
  auto colon = endpoint.rfind(':');
  auto slash = endpoint.find("//");
  std::string host =
    endpoint.substr(slash == std::string::npos ? 0 : slash + 2,
                    colon - (slash == std::string::npos ? 0 : slash + 2));
  return {host, std::atoi(endpoint.c_str() + colon + 1)};
}

std::string server_info(const sim_engine& e) {
  const auto& c = e.config();
  nlohmann::json kv = nullptr;
  if (c.kv_events) {
    auto [host, port] = host_port(c.kv_endpoint);
    kv = {{"publisher", "zmq"},
          {"endpoint_host", host},
          {"endpoint_port_base", port},
          {"topic", c.kv_topic},
          {"block_size", c.engine.block_size},
          {"dp_size", e.ranks()}};
  }
  // SGLang writes null for an aggregated engine.
  const char* mode = c.role == engine_role::aggregated
                       ? nullptr
                       : outrider::engine::to_string(c.role);
  return nlohmann::json{
    {"page_size", c.engine.block_size},
    {"max_total_num_tokens",
     uint64_t{c.engine.num_blocks} * c.engine.block_size},
    {"max_running_requests", c.engine.max_num_seqs},
    {"max_prefill_tokens", c.engine.max_batched_tokens},
    {"context_length", c.engine.max_model_len},
    {"served_model_name", c.model},
    {"dp_size", e.ranks()},
    {"tp_size", 1},
    {"disaggregation_mode", mode ? nlohmann::json(mode) : nlohmann::json()},
    {"disaggregation_bootstrap_port", c.grpc_port},
    {"host", c.host},
    {"kv_events", kv}}
    .dump();
}

// SGLang's instance id is a number: the simulator's, hashed.
uint64_t instance_number(const sim_engine& e) {
  return std::hash<std::string>{}(e.instance_id()) >> 1;
}

class service final : public sg::SglangService::Service {
 public:
  service(sim_engine& e, bool cumulative) : e_(e), cumulative_(cumulative) {}

  Status Generate(ServerContext* ctx, const sg::GenerateRequest* in,
                  grpc::ServerWriter<sg::GenerateResponse>* w) override {
    e_.note_trace(*ctx);
    engine_request req;
    int rank = 0;
    if (auto st = prepare(*in, &req, &rank); !st.ok())
      return st;
    auto id = req.id;
    std::vector<int32_t> all; // for cumulative output
    bool first = true;
    // A prefill leg ends once its decode engine has fetched the KV.
    bool prefill_leg = e_.config().engine_role_prefill();
    auto room = in->disaggregated_params().bootstrap_room();
    auto prompt_len = static_cast<uint32_t>(req.prompt.size());
    auto st = e_.generate(
      [ctx] { return ctx->IsCancelled(); }, rank, std::move(req),
      [&](auto& outs) {
        sg::GenerateResponse resp;
        auto& meta = *resp.mutable_meta_info();
        for (const auto& o : outs) {
          if (o.has_token)
            all.push_back(static_cast<int32_t>(o.token));
          if (first) {
            meta["prompt_tokens"] = std::to_string(o.prompt_tokens);
            meta["cached_tokens"] = std::to_string(o.cached_tokens);
          }
          if (!cumulative_ && o.has_token)
            resp.add_output_ids(static_cast<int32_t>(o.token));
          if (o.finished != finish_reason::none) {
            meta["finish_reason"] = finish_json(o.finished);
            if (prefill_leg && o.finished != finish_reason::aborted &&
                !hand_over(ctx, room, prompt_len, rank))
              meta["finish_reason"] = nlohmann::json{
                {"type", "abort"},
                {"message", "no decode engine fetched the KV of "
                            "bootstrap room " +
                              std::to_string(
                                room)}}.dump();
            meta["completion_tokens"] = std::to_string(all.size());
            resp.set_finished(true);
          }
        }
        if (cumulative_)
          resp.mutable_output_ids()->Add(all.begin(), all.end());
        first = false;
        if (ctx->IsCancelled() || !w->Write(resp)) {
          e_.runner(rank).abort(id); // SGLang: a dropped stream aborts
          return false;
        }
        return true;
      });
    return st;
  }

  Status HealthCheck(ServerContext*, const sg::HealthCheckRequest*,
                     sg::HealthCheckResponse* out) override {
    out->set_healthy(e_.loaded() && !e_.draining());
    return Status::OK;
  }

  Status
  WatchEngineState(ServerContext* ctx, const sg::WatchEngineStateRequest*,
                   grpc::ServerWriter<sg::EngineStateSnapshot>* w) override {
    uint64_t revision = 0;
    std::optional<std::tuple<bool, bool, bool>> sent; // loaded, paused, drain
    // Bounded: ends when the client goes or the engine drains.
    while (!ctx->IsCancelled()) {
      std::tuple<bool, bool, bool> now{e_.loaded(), e_.paused(), e_.draining()};
      if (!sent || *sent != now) {
        sg::EngineStateSnapshot s;
        s.set_instance_id(instance_number(e_));
        s.set_revision(++revision);
        auto [loaded, paused, draining] = now;
        s.set_healthy(loaded && !draining);
        s.set_server_status(draining ? sg::SERVER_STATUS_UNHEALTHY
                            : loaded ? sg::SERVER_STATUS_UP
                                     : sg::SERVER_STATUS_STARTING);
        s.set_is_pause(paused);
        s.mutable_model_info()->set_model_path(e_.config().model);
        s.mutable_server_info()->set_json_info(server_info(e_));
        list_models(*s.mutable_models());
        if (!w->Write(s))
          break;
        sent = now;
        if (draining)
          break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    return Status::OK;
  }

  Status GetModelInfo(ServerContext*, const sg::GetModelInfoRequest*,
                      sg::GetModelInfoResponse* out) override {
    out->set_model_path(e_.config().model);
    out->set_json_info(nlohmann::json{
      {"model_path", e_.config().model},
      {"is_generation",
       true}}.dump());
    return Status::OK;
  }

  Status GetServerInfo(ServerContext*, const sg::GetServerInfoRequest*,
                       sg::GetServerInfoResponse* out) override {
    out->set_json_info(server_info(e_));
    return Status::OK;
  }

  Status ListModels(ServerContext*, const sg::ListModelsRequest*,
                    sg::ListModelsResponse* out) override {
    list_models(*out);
    return Status::OK;
  }

  // The served model, then a card per LoRA adapter with the model as its
  // parent, as SGLang lists them.
  void list_models(sg::ListModelsResponse& out) const {
    const auto& c = e_.config();
    auto* card = out.add_models();
    card->set_id(c.model);
    card->set_root(c.model);
    card->set_max_model_len(static_cast<int32_t>(c.engine.max_model_len));
    for (const auto& name : c.lora_adapters) {
      auto* a = out.add_models();
      a->set_id(name);
      a->set_root("/adapters/" + name);
      a->set_parent(c.model);
    }
  }

  Status Abort(ServerContext*, const sg::AbortRequest* in,
               sg::AbortResponse* out) override {
    bool found = false;
    for (int r = 0; r < e_.ranks() && !in->rid().empty(); ++r)
      found = e_.runner(r).abort(in->rid()) || found;
    out->set_success(found);
    return Status::OK;
  }

  Status PauseGeneration(ServerContext*, const sg::PauseGenerationRequest*,
                         sg::PauseGenerationResponse* out) override {
    e_.set_paused(true, false); // SGLang's standard health stays SERVING
    out->set_message("paused");
    return Status::OK;
  }

  Status ContinueGeneration(ServerContext*,
                            const sg::ContinueGenerationRequest*,
                            sg::ContinueGenerationResponse* out) override {
    e_.set_paused(false, false);
    out->set_message("continued");
    return Status::OK;
  }

 private:
  Status prepare(const sg::GenerateRequest& in, engine_request* out,
                 int* rank) {
    if (in.input_ids_size() == 0)
      return {StatusCode::INVALID_ARGUMENT, "input_ids is empty"};
    for (auto t : in.input_ids())
      if (t < 0)
        return {StatusCode::INVALID_ARGUMENT, "a negative token id"};
    *rank = in.has_routed_dp_rank() ? in.routed_dp_rank() : e_.pick_rank();
    if (*rank < 0 || *rank >= e_.ranks())
      return {StatusCode::INVALID_ARGUMENT,
              "routed_dp_rank " + std::to_string(*rank) + " is out of range"};
    const auto& sp = in.sampling_params();
    if (sp.has_max_new_tokens() && sp.max_new_tokens() < 1)
      return {StatusCode::INVALID_ARGUMENT, "max_new_tokens must be >= 1"};
    out->id =
      in.has_rid() && !in.rid().empty() ? in.rid() : e_.new_request_id();
    out->prompt.assign(in.input_ids().begin(), in.input_ids().end());
    out->max_tokens =
      sp.has_max_new_tokens() ? static_cast<uint32_t>(sp.max_new_tokens()) : 16;
    out->stop_token_ids.assign(sp.stop_token_ids().begin(),
                               sp.stop_token_ids().end());
    const auto& c = e_.config();
    if (auto st = take_identity(c, in.lora_path(), {}, *out); !st.ok())
      return st;
    bool decode_leg = in.has_disaggregated_params() && c.engine_role_decode();
    if (c.engine_role_prefill() || c.engine_role_decode()) {
      if (!in.has_disaggregated_params())
        return {StatusCode::INVALID_ARGUMENT,
                "a disaggregated engine needs disaggregated_params"};
      if (in.disaggregated_params().bootstrap_room() < 0)
        return {StatusCode::INVALID_ARGUMENT, "bootstrap_room is negative"};
    }
    out->kv_preloaded = decode_leg;
    if (c.engine_role_prefill())
      out->max_tokens = 1;
    return decode_leg ? fetch_kv(in.disaggregated_params(), *out) : Status::OK;
  }

  // The decode leg: the KV comes from the prefill engine's bootstrap
  // server (waiting for its prefill), then the simulated transfer.
  Status fetch_kv(const sg::DisaggregatedParams& p, const engine_request& r) {
    const auto& c = e_.config();
    if (p.bootstrap_host().empty() || p.bootstrap_port() <= 0)
      return {StatusCode::INVALID_ARGUMENT,
              "a decode leg needs bootstrap_host and bootstrap_port"};
    auto st =
      fetch_room(p.bootstrap_host(), p.bootstrap_port(), p.bootstrap_room(),
                 static_cast<uint32_t>(r.prompt.size()),
                 std::chrono::milliseconds{c.bootstrap_timeout_ms});
    if (!st.ok())
      return {StatusCode::UNAVAILABLE,
              "KV transfer from the prefill engine failed: " +
                st.error_message()};
    auto blocks = r.prompt.size() / c.engine.block_size;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(
      c.transfer_ms_per_block * static_cast<double>(blocks) / c.speedup));
    return Status::OK;
  }

  bool hand_over(ServerContext* ctx, int64_t room, uint32_t prompt_len,
                 int rank) {
    return e_.rooms().offer_and_wait(
      room, prompt_len, rank,
      std::chrono::milliseconds{e_.config().bootstrap_timeout_ms},
      [ctx] { return ctx->IsCancelled(); });
  }

  sim_engine& e_;
  bool cumulative_;
};

} // namespace

std::unique_ptr<grpc::Service> make_sglang_service(sim_engine& e,
                                                   bool cumulative) {
  return std::make_unique<service>(e, cumulative);
}

} // namespace outrider::sim
