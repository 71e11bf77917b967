// OpenEngine v1 Control on top of the simulated engine.
#include <chrono>

#include "cluster/kv/kv_proto.hpp"
#include "openengine.grpc.pb.h"
#include "sim/sim_server.hpp"

namespace outrider::sim {

namespace {

namespace oe = openengine::v1;
using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

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

  Status ListLoras(ServerContext*, const oe::ListLorasRequest*,
                   oe::ListLorasResponse* out) override {
    for (const auto& a : e_.config().lora_adapters)
      out->add_lora_names(a);
    return Status::OK;
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
    // The subscription is accepted: say so now, before any batch (a router
    // places on a worker once its event source answered).
    w->SendInitialMetadata();
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

std::unique_ptr<grpc::Service> make_openengine_control(sim_engine& e) {
  return std::make_unique<control>(e);
}

} // namespace outrider::sim
