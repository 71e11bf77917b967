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

oe::EngineRole to_oe(engine_role r) {
  switch (r) {
  case engine_role::prefill:
    return oe::ENGINE_ROLE_PREFILL;
  case engine_role::decode:
    return oe::ENGINE_ROLE_DECODE;
  case engine_role::aggregated:
    break;
  }
  return oe::ENGINE_ROLE_AGGREGATED;
}

class inference final : public oe::Inference::Service {
 public:
  explicit inference(sim_engine& e) : e_(e) {}

  Status Generate(ServerContext* ctx, const oe::GenerateRequest* in,
                  grpc::ServerWriter<oe::GenerateResponse>* w) override {
    const auto& cfg = e_.config();
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
    return e_.generate(ctx, rank, std::move(req), [&](auto& outs) {
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

class control final : public oe::Control::Service {
 public:
  explicit control(sim_engine& e) : e_(e) {}

  Status GetServerInfo(ServerContext*, const oe::GetServerInfoRequest*,
                       oe::ServerInfo* out) override {
    const auto& c = e_.config();
    out->set_engine_name("outrider-sim");
    out->set_engine_version("0.1.0");
    out->set_engine_role(to_oe(c.role));
    out->set_instance_id(e_.instance_id());
    out->add_supported_models(c.model);
    auto* p = out->mutable_parallelism();
    p->set_tensor_parallel_size(1);
    p->set_pipeline_parallel_size(1);
    p->set_data_parallel_size(static_cast<uint32_t>(e_.ranks()));
    p->set_data_parallel_start_rank(0);
    out->set_schema_revision(1);
    out->set_minimum_client_revision(1);
    out->set_schema_release("v1");
    auto* cap = out->mutable_capacity();
    cap->set_kv_block_size(c.engine.block_size);
    cap->set_total_kv_blocks(c.engine.num_blocks);
    cap->set_max_running_requests(c.engine.max_num_seqs);
    cap->set_max_batched_tokens(c.engine.max_batched_tokens);
    return Status::OK;
  }

  Status GetModelInfo(ServerContext*, const oe::GetModelInfoRequest* in,
                      oe::ModelInfo* out) override {
    const auto& c = e_.config();
    if (!in->model().empty() && in->model() != c.model)
      return {StatusCode::NOT_FOUND, "model '" + in->model() +
                                       "' is not "
                                       "served here"};
    out->set_model_id(c.model);
    out->set_served_model_name(c.model);
    out->set_max_model_len(c.engine.max_model_len);
    return Status::OK;
  }

  Status GetLoad(ServerContext*, const oe::GetLoadRequest* in,
                 oe::LoadInfo* out) override {
    out->set_instance_id(e_.instance_id());
    out->set_timestamp_unix_nanos(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::system_clock::now().time_since_epoch())
        .count()));
    for (int r = 0; r < e_.ranks(); ++r) {
      auto l = e_.runner(r).load();
      out->set_running_requests(out->running_requests() + l.running);
      out->set_queued_requests(out->queued_requests() + l.waiting);
      out->set_used_kv_blocks(out->used_kv_blocks() + l.used_blocks);
      out->set_total_kv_blocks(out->total_kv_blocks() + l.total_blocks);
      out->set_running_tokens(out->running_tokens() + l.running_tokens);
      out->set_waiting_tokens(out->waiting_tokens() + l.waiting_tokens);
      if (in->include_per_rank()) {
        auto* rk = out->add_ranks();
        rk->set_data_parallel_rank(static_cast<uint32_t>(r));
        rk->set_running_requests(l.running);
        rk->set_queued_requests(l.waiting);
        rk->set_used_kv_blocks(l.used_blocks);
        rk->set_total_kv_blocks(l.total_blocks);
      }
    }
    return Status::OK;
  }

  Status Health(ServerContext*, const oe::HealthRequest*,
                oe::HealthResponse* out) override {
    out->set_state(e_.draining() ? oe::HEALTH_STATE_DRAINING
                   : e_.paused() ? oe::HEALTH_STATE_NOT_READY
                   : e_.loaded() ? oe::HEALTH_STATE_READY
                                 : oe::HEALTH_STATE_STARTING);
    return Status::OK;
  }

  Status Abort(ServerContext*, const oe::AbortRequest* in,
               oe::AbortResponse* out) override {
    switch (in->target_case()) {
    case oe::AbortRequest::kRequestId:
      for (int r = 0; r < e_.ranks(); ++r)
        if (e_.runner(r).abort(in->request_id())) {
          out->set_status(oe::ABORT_STATUS_ABORTED);
          return Status::OK;
        }
      return {StatusCode::NOT_FOUND,
              "no running request '" + in->request_id() + "'"};
    case oe::AbortRequest::kAllRequests:
      for (int r = 0; r < e_.ranks(); ++r)
        e_.runner(r).abort_all();
      out->set_status(oe::ABORT_STATUS_ABORTED);
      return Status::OK;
    case oe::AbortRequest::kKvSession:
      if (!e_.find_session(in->kv_session().session_id()))
        return {StatusCode::NOT_FOUND, "no such KV session"};
      out->set_status(oe::ABORT_STATUS_ALREADY_FINISHED);
      return Status::OK;
    default:
      return {StatusCode::INVALID_ARGUMENT, "no abort target given"};
    }
  }

  Status GetKvEventSources(ServerContext*,
                           const oe::GetKvEventSourcesRequest* in,
                           oe::GetKvEventSourcesResponse* out) override {
    const auto& c = e_.config();
    if (!c.kv_events)
      return Status::OK;
    for (int r = 0; r < e_.ranks(); ++r) {
      if (in->data_parallel_ranks_size() > 0 &&
          std::find(
            in->data_parallel_ranks().begin(), in->data_parallel_ranks().end(),
            static_cast<uint32_t>(r)) == in->data_parallel_ranks().end())
        continue;
      auto* s = out->add_sources();
      s->set_transport("zmq");
      // Routable addresses, never the bind wildcard.
      auto fill = [&](const std::string& ep, oe::KvEndpoint* out_ep) {
        auto e = rank_endpoint(ep, r);
        auto colon = e.rfind(':');
        out_ep->set_host(c.host);
        out_ep->set_port(
          static_cast<uint32_t>(std::atoi(e.c_str() + colon + 1)));
        out_ep->set_protocol("tcp");
      };
      fill(c.kv_endpoint, s->mutable_endpoint_addr());
      if (!c.kv_replay_endpoint.empty())
        fill(c.kv_replay_endpoint, s->mutable_replay_endpoint());
      s->set_topic(c.kv_topic);
      s->set_data_parallel_rank(static_cast<uint32_t>(r));
      s->set_encoding("msgpack");
      s->set_schema_version(1);
      s->set_buffer_steps(static_cast<uint32_t>(c.kv_buffer_steps));
      s->set_hwm(static_cast<uint32_t>(c.kv_hwm));
      s->set_max_queue_size(static_cast<uint32_t>(c.kv_max_queue_size));
    }
    return Status::OK;
  }

  Status SubscribeKvEvents(
    ServerContext* ctx, const oe::SubscribeKvEventsRequest* in,
    grpc::ServerWriter<oe::SubscribeKvEventsResponse>* w) override {
    std::vector<int> ranks;
    for (auto r : in->data_parallel_ranks()) {
      if (r >= static_cast<uint32_t>(e_.ranks()))
        return {StatusCode::INVALID_ARGUMENT,
                "rank " + std::to_string(r) + " does not exist"};
      ranks.push_back(static_cast<int>(r));
    }
    if (ranks.empty())
      for (int r = 0; r < e_.ranks(); ++r)
        ranks.push_back(r);
    if (in->has_start_sequence_number())
      return {StatusCode::UNIMPLEMENTED,
              "start_sequence_number: this engine keeps no history here; use "
              "include_snapshot or the ZMQ replay socket"};
    std::vector<std::pair<int, std::shared_ptr<event_subscription>>> subs;
    for (auto r : ranks) {
      std::vector<kv_event> snapshot;
      uint64_t seq = 0;
      subs.emplace_back(
        r, e_.runner(r).subscribe(in->include_snapshot(), &snapshot, &seq));
      if (in->include_snapshot() && !snapshot.empty()) {
        // The snapshot stands for every batch before `seq`.
        if (!write_batch(w, r, seq == 0 ? 0 : seq - 1, snapshot))
          return Status::OK;
      }
    }
    while (!ctx->IsCancelled() && !e_.draining()) {
      for (auto& [r, sub] : subs) {
        auto batches =
          sub->wait(std::chrono::milliseconds{subs.size() == 1 ? 100 : 10});
        for (auto& [seq, events] : batches)
          if (!write_batch(w, r, seq, events))
            return Status::OK;
        if (sub->overflowed()) {
          oe::SubscribeKvEventsResponse resp;
          auto* err = resp.mutable_error();
          err->set_code(oe::ERROR_CODE_OVERLOADED);
          err->set_message("subscriber too slow; resubscribe with a snapshot");
          err->set_retryable(true);
          w->Write(resp);
          return Status::OK;
        }
      }
    }
    return Status::OK;
  }

 private:
  static bool write_batch(grpc::ServerWriter<oe::SubscribeKvEventsResponse>* w,
                          int rank, uint64_t seq,
                          const std::vector<kv_event>& events) {
    oe::SubscribeKvEventsResponse resp;
    auto* b = resp.mutable_batch();
    b->set_sequence_number(seq);
    b->set_timestamp_unix_nanos(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::system_clock::now().time_since_epoch())
        .count()));
    b->set_data_parallel_rank(static_cast<uint32_t>(rank));
    for (const auto& ev : events)
      kv::to_proto(ev, b->add_events());
    return w->Write(resp);
  }

  sim_engine& e_;
};

} // namespace

std::unique_ptr<grpc::Service> make_openengine_inference(sim_engine& e) {
  return std::make_unique<inference>(e);
}

std::unique_ptr<grpc::Service> make_openengine_control(sim_engine& e) {
  return std::make_unique<control>(e);
}

} // namespace outrider::sim
