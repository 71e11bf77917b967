#include "actors/sidecar/relay.hpp"

#include <atomic>
#include <chrono>
#include <mutex>

#include <caf/all.hpp>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "actors/sidecar/relay_impl.hpp"
#include "cluster/engine/engine_adapter.hpp"
#include "openengine.grpc.pb.h"
#include "runtime/metrics.hpp"
#include "vllm.grpc.pb.h"

namespace outrider::sidecar {

namespace {

namespace oe = openengine::v1;
using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;
using clock_type = std::chrono::steady_clock;

using engine::dialect;

class control final : public oe::Control::WithCallbackMethod_SubscribeKvEvents<
                        oe::Control::Service> {
 public:
  explicit control(relay::impl& r) : r_(r) {}

  Status GetServerInfo(ServerContext* ctx, const oe::GetServerInfoRequest*,
                       oe::ServerInfo* out) override {
    if (auto refused = r_.misaddressed(ctx->client_metadata()))
      return *refused;
    engine::engine_info info;
    if (auto err = r_.server_info(info))
      return {StatusCode::UNAVAILABLE, describe(err)};
    out->set_engine_name("outrider-sidecar (" + info.protocol + ")");
    out->set_instance_id(info.instance_id);
    using engine::worker_role;
    out->set_engine_role(
      info.role == worker_role::prefill  ? oe::ENGINE_ROLE_PREFILL
      : info.role == worker_role::decode ? oe::ENGINE_ROLE_DECODE
                                         : oe::ENGINE_ROLE_AGGREGATED);
    out->add_supported_models(info.model);
    out->mutable_parallelism()->set_data_parallel_size(info.data_parallel_size);
    out->set_schema_revision(1);
    out->set_minimum_client_revision(1);
    out->set_schema_release("v1");
    out->mutable_capacity()->set_kv_block_size(info.kv_block_size);
    out->mutable_capacity()->set_total_kv_blocks(info.total_kv_blocks);
    return Status::OK;
  }

  Status GetModelInfo(ServerContext*, const oe::GetModelInfoRequest*,
                      oe::ModelInfo* out) override {
    engine::engine_info info;
    if (auto err = r_.server_info(info))
      return {StatusCode::UNAVAILABLE, describe(err)};
    out->set_model_id(info.model);
    out->set_served_model_name(info.model);
    return Status::OK;
  }

  Status GetLoad(ServerContext* ctx, const oe::GetLoadRequest* in,
                 oe::LoadInfo* out) override {
    if (auto refused = r_.misaddressed(ctx->client_metadata()))
      return *refused;
    if (r_.resolve() == dialect::openengine) {
      grpc::ClientContext ectx;
      ectx.set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds{2});
      return r_.oe_control->GetLoad(&ectx, *in, out);
    }
    // vLLM reports no load: what the relay itself carries.
    out->set_running_requests(
      static_cast<uint32_t>(std::max(0.0, r_.m.inflight.value())));
    return Status::OK;
  }

  Status Health(ServerContext*, const oe::HealthRequest*,
                oe::HealthResponse* out) override {
    out->set_state(r_.cfg.health->shutting_down() ? oe::HEALTH_STATE_DRAINING
                   : r_.cfg.health->ready()       ? oe::HEALTH_STATE_READY
                                                  : oe::HEALTH_STATE_NOT_READY);
    return Status::OK;
  }

  Status Abort(ServerContext* ctx, const oe::AbortRequest* in,
               oe::AbortResponse* out) override {
    if (auto refused = r_.misaddressed(ctx->client_metadata()))
      return *refused;
    if (in->target_case() != oe::AbortRequest::kRequestId)
      return {StatusCode::UNIMPLEMENTED, "only aborts by request_id"};
    caf::error err;
    {
      std::lock_guard<std::mutex> guard{r_.adapter_mtx};
      err = r_.adapter->abort(in->request_id());
    }
    if (err)
      return {StatusCode::NOT_FOUND, describe(err)};
    out->set_status(oe::ABORT_STATUS_ABORTED);
    return Status::OK;
  }

  // On the callback API (relay_subscribe.cpp): no thread per subscriber.
  grpc::ServerWriteReactor<oe::SubscribeKvEventsResponse>*
  SubscribeKvEvents(grpc::CallbackServerContext* ctx,
                    const oe::SubscribeKvEventsRequest* in) override {
    return subscribe_kv_events(r_, ctx, *in);
  }

 private:
  relay::impl& r_;
};

} // namespace

relay::relay(relay_config cfg) : impl_(std::make_unique<impl>()) {
  impl_->cfg = std::move(cfg);
  impl_->channel = grpc::CreateChannel(impl_->cfg.engine_endpoint,
                                       grpc::InsecureChannelCredentials());
  impl_->oe_control = oe::Control::NewStub(impl_->channel);
  impl_->adapter = engine::make_engine_adapter(impl_->cfg.engine_protocol,
                                               impl_->cfg.engine_endpoint);
  impl_->inference_service = make_generate_service(*impl_);
  impl_->control_service = std::make_unique<control>(*impl_);
  impl_->mux_service = make_mux_service(*impl_);
}

relay::~relay() {
  stop();
}

namespace {

// Builds and starts the server on `listen` (services already made);
// the port bound, 0 when it could not.
uint16_t build_server(relay::impl& r, const std::string& listen) {
  grpc::ServerBuilder builder;
  builder.RegisterService(r.inference_service.get());
  builder.RegisterService(r.control_service.get());
  builder.RegisterService(r.mux_service.get());
  auto err =
    r.server.start(builder, listen, r.cfg.credentials, r.cfg.limits, "relay");
  if (!err.empty()) {
    spdlog::error("relay: {}", err);
    return 0;
  }
  return r.server.port();
}

} // namespace

caf::error relay::start() {
  std::lock_guard<std::mutex> guard{impl_->server_mtx};
  auto port = build_server(*impl_, impl_->cfg.listen);
  if (port == 0)
    return make_error(errc::bind_failed,
                      "relay: cannot listen on " + impl_->cfg.listen);
  impl_->port = port;
  spdlog::info("relay: serving OpenEngine on {} (port {})", impl_->cfg.listen,
               port);
  return {};
}

bool relay::restart(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> guard{impl_->server_mtx};
  uint16_t port = impl_->port;
  if (impl_->stopping || port == 0)
    return false;
  impl_->mux_draining->store(true);
  impl_->server.shutdown(std::chrono::system_clock::now() + grace);
  // A service serves one server in its life: new ones, same state.
  impl_->mux_draining = std::make_shared<std::atomic<bool>>(false);
  impl_->inference_service = make_generate_service(*impl_);
  impl_->control_service = std::make_unique<control>(*impl_);
  impl_->mux_service = make_mux_service(*impl_);
  const auto& listen = impl_->cfg.listen;
  auto host = listen.substr(0, listen.rfind(':'));
  auto bound = build_server(*impl_, host + ":" + std::to_string(port));
  if (bound != port) {
    // another port: not the advertised one
    impl_->server.shutdown(std::chrono::system_clock::now());
    spdlog::error("relay: cannot listen on port {} again yet", port);
    return false;
  }
  spdlog::warn("relay: listening again on port {}", port);
  return true;
}

uint16_t relay::port() const {
  return impl_->port;
}

void relay::set_dialect(engine::dialect d) {
  if (d == engine::dialect::unknown)
    return;
  // The adapter for that protocol from now on, aborts included: the
  // automatic one knows the protocol only once asked for server info.
  auto adapter = engine::make_engine_adapter(engine::to_string(d),
                                             impl_->cfg.engine_endpoint);
  {
    std::lock_guard<std::mutex> guard{impl_->adapter_mtx};
    impl_->adapter = std::move(adapter);
  }
  impl_->engine_dialect = d;
}

void relay::stop(std::chrono::milliseconds grace) {
  impl_->stopping = true;
  std::lock_guard<std::mutex> guard{impl_->server_mtx};
  impl_->mux_draining->store(true);
  impl_->server.shutdown(std::chrono::system_clock::now() + grace);
}

} // namespace outrider::sidecar
