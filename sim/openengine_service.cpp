// OpenEngine v1 (package openengine.v1) on top of the simulated engine.
#include <chrono>
#include <thread>

#include "cluster/kv/kv_proto.hpp"
#include "openengine.grpc.pb.h"
#include "sim/sim_server.hpp"

namespace outrider::sim {

namespace {

namespace oe = openengine::v1;
using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

constexpr const char* rank_key = "openengine-target-dp-rank";

// Repeated openengine- keys and a malformed priority are refused.
Status check_metadata(const ServerContext& ctx) {
  std::map<std::string, int> seen;
  for (const auto& [k, v] : ctx.client_metadata()) {
    std::string key(k.data(), k.size());
    if (key.rfind("openengine-", 0) != 0)
      continue;
    if (++seen[key] > 1)
      return {StatusCode::INVALID_ARGUMENT,
              "metadata '" + key + "' is repeated"};
    if (key == "openengine-priority") {
      std::string val(v.data(), v.size());
      auto body = val.rfind('-', 0) == 0 ? val.substr(1) : val;
      if (body.empty() || body.size() > 9 ||
          body.find_first_not_of("0123456789") != std::string::npos)
        return {StatusCode::INVALID_ARGUMENT,
                "metadata 'openengine-priority' must be an integer"};
    }
  }
  return Status::OK;
}

oe::FinishReason to_oe(finish_reason r) {
  switch (r) {
  case finish_reason::stop:
    return oe::FINISH_REASON_STOP;
  case finish_reason::length:
    return oe::FINISH_REASON_LENGTH;
  case finish_reason::aborted:
    return oe::FINISH_REASON_CANCELLED;
  case finish_reason::none:
    break;
  }
  return oe::FINISH_REASON_UNSPECIFIED;
}

class inference final : public oe::Inference::Service {
 public:
  explicit inference(sim_engine& e) : e_(e) {}

  Status Generate(ServerContext* ctx, const oe::GenerateRequest* in,
                  grpc::ServerWriter<oe::GenerateResponse>* w) override {
    const auto& cfg = e_.config();
    e_.note_trace(*ctx);
    if (auto st = check_metadata(*ctx); !st.ok())
      return st;
    int rank = 0;
    if (auto st = rank_from_metadata(*ctx, rank_key, e_.ranks(), &rank);
        !st.ok())
      return st;
    if (rank < 0)
      rank = e_.pick_rank();
    engine_request req;
    if (auto st = to_request(*in, req); !st.ok())
      return st;
    // A hint: honoured with priority scheduling, ignored without it.
    auto pri = ctx->client_metadata().find("openengine-priority");
    if (pri != ctx->client_metadata().end())
      req.priority =
        std::stoi(std::string(pri->second.data(), pri->second.size()));
    bool prefill = cfg.engine_role_prefill();
    if (prefill)
      req.max_tokens = 1;
    auto prompt_len = static_cast<uint32_t>(req.prompt.size());
    auto id = req.id;
    oe::GenerateResponse first;
    first.set_request_id(id);
    first.mutable_prompt()->set_num_prompt_tokens(prompt_len);
    if (!w->Write(first))
      return {StatusCode::CANCELLED, "the client went away"};
    uint32_t produced = 0;
    return e_.generate(
      [ctx] { return ctx->IsCancelled(); }, rank, std::move(req),
      [&](auto& outs) {
        for (const auto& o : outs) {
          if (o.has_token && !prefill) {
            oe::GenerateResponse r;
            r.set_request_id(id);
            auto* t = r.mutable_token();
            t->set_output_index(0);
            t->add_tokens()->set_token_id(o.token);
            ++produced;
            if (!w->Write(r))
              return false;
          }
          if (o.finished == finish_reason::none)
            continue;
          if (prefill && o.finished != finish_reason::aborted &&
              !w->Write(prefill_ready(id, rank, prompt_len)))
            return false;
          if (!w->Write(finished(id, o, prefill, prompt_len, produced)))
            return false;
        }
        return true;
      });
  }

 private:
  // Validates the request and fills `req` (sleeping for the simulated KV
  // transfer of a session a decode engine receives).
  Status to_request(const oe::GenerateRequest& in, engine_request& req) {
    const auto& cfg = e_.config();
    if (!in.model().empty() && in.model() != cfg.model)
      return {StatusCode::NOT_FOUND,
              "model '" + in.model() + "' is not served here"};
    if (in.has_prompt())
      return {StatusCode::INVALID_ARGUMENT,
              "text prompts are not supported by this engine; send token_ids"};
    if (!in.has_token_ids() || in.token_ids().ids_size() == 0)
      return {StatusCode::INVALID_ARGUMENT, "the prompt is empty"};
    const auto& stop = in.stopping();
    if (stop.has_max_tokens() && stop.max_tokens() == 0)
      return {StatusCode::INVALID_ARGUMENT, "max_tokens must be at least 1"};
    req.id = in.request_id().empty() ? e_.new_request_id() : in.request_id();
    req.prompt.assign(in.token_ids().ids().begin(), in.token_ids().ids().end());
    req.max_tokens = stop.has_max_tokens() ? stop.max_tokens() : 16;
    req.seed = in.sampling().has_seed() ? in.sampling().seed() : 0;
    for (const auto& c : stop.conditions())
      if (c.has_stop_token_id())
        req.stop_token_ids.push_back(c.stop_token_id());
    if (auto st = take_identity(cfg, in.lora_name(), in.kv().cache_salt(), req);
        !st.ok())
      return st;
    if (auto st = take_media(in, cfg.engine.media_item_tokens, req); !st.ok())
      return st;
    if (!in.kv().has_session())
      return Status::OK;
    if (!cfg.engine_role_decode())
      return {StatusCode::FAILED_PRECONDITION,
              "role mismatch: only a decode engine takes a KV session"};
    const auto& s = in.kv().session();
    if (s.session_id().empty() || s.endpoints_size() == 0)
      return {StatusCode::INVALID_ARGUMENT,
              "kv.session needs a session_id and an endpoint"};
    req.kv_preloaded = true;
    auto blocks = req.prompt.size() / cfg.engine.block_size;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(
      cfg.transfer_ms_per_block * static_cast<double>(blocks) / cfg.speedup));
    return Status::OK;
  }

  oe::GenerateResponse prefill_ready(const std::string& id, int rank,
                                     uint32_t prompt_len) {
    const auto& cfg = e_.config();
    oe::GenerateResponse r;
    r.set_request_id(id);
    auto s = e_.open_session(rank, prompt_len);
    auto* ref = r.mutable_prefill_ready()->mutable_kv_session();
    ref->set_session_id(s.id);
    ref->set_transfer_backend("outrider-sim");
    auto* ep = ref->add_endpoints();
    ep->set_host(cfg.host);
    ep->set_port(static_cast<uint32_t>(cfg.grpc_port));
    ep->set_protocol("grpc");
    ref->set_dp_rank(static_cast<uint32_t>(rank));
    return r;
  }

  template <class Output>
  static oe::GenerateResponse finished(const std::string& id, const Output& o,
                                       bool prefill, uint32_t prompt_len,
                                       uint32_t produced) {
    oe::GenerateResponse r;
    r.set_request_id(id);
    r.mutable_finished()->set_reason(
      prefill && o.finished == finish_reason::length ? oe::FINISH_REASON_STOP
                                                     : to_oe(o.finished));
    auto* u = r.mutable_usage();
    u->set_prompt_tokens(prompt_len);
    u->set_completion_tokens(produced);
    u->set_total_tokens(prompt_len + produced);
    u->set_cached_prompt_tokens(o.cached_tokens);
    return r;
  }

 private:
  sim_engine& e_;
};

} // namespace

std::unique_ptr<grpc::Service> make_openengine_inference(sim_engine& e) {
  return std::make_unique<inference>(e);
}

} // namespace outrider::sim
