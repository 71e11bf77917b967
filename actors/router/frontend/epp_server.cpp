#include "actors/router/frontend/epp_server.hpp"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "actors/router/frontend/epp_stream.hpp"
#include "grpc/health/v1/health.grpc.pb.h"

namespace outrider::router {

namespace pb = envoy::service::ext_proc::v3;

namespace {

using epp_state = epp_server::state;

class refused_stream final
  : public grpc::ServerBidiReactor<pb::ProcessingRequest,
                                   pb::ProcessingResponse> {
 public:
  explicit refused_stream(grpc::Status st) { Finish(std::move(st)); }
  void OnDone() override { delete this; }
};

class processor final : public pb::ExternalProcessor::CallbackService {
 public:
  explicit processor(std::shared_ptr<epp_state> st) : st_(std::move(st)) {}

  grpc::ServerBidiReactor<pb::ProcessingRequest, pb::ProcessingResponse>*
  Process(grpc::CallbackServerContext*) override {
    if (st_->stopping.load())
      return new refused_stream(
        {grpc::StatusCode::UNAVAILABLE, "the router is shutting down"});
    if (st_->streams.fetch_add(1) >= st_->cfg.max_streams) {
      st_->streams.fetch_sub(1);
      st_->outcome("refused").inc();
      return new refused_stream(
        {grpc::StatusCode::RESOURCE_EXHAUSTED, "too many ext_proc streams"});
    }
    return new_epp_stream(st_);
  }

 private:
  std::shared_ptr<epp_state> st_;
};

// grpc.health.v1 as the endpoint picker protocol names its services:
// `liveness` (and the whole server, "") serve while the process answers;
// `readiness` and the ExternalProcessor's while discovery is synced and
// the router is not stopping. Any other name is NOT_FOUND.
class epp_health final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit epp_health(std::shared_ptr<epp_state> st) : st_(std::move(st)) {}

  grpc::ServerUnaryReactor*
  Check(grpc::CallbackServerContext* ctx,
        const grpc::health::v1::HealthCheckRequest* req,
        grpc::health::v1::HealthCheckResponse* resp) override {
    using status = grpc::health::v1::HealthCheckResponse;
    auto* r = ctx->DefaultReactor();
    const auto& name = req->service();
    if (name.empty() || name == "liveness") {
      resp->set_status(status::SERVING);
    } else if (name == "readiness" ||
               name == "envoy.service.ext_proc.v3.ExternalProcessor") {
      bool ready =
        !st_->stopping.load() && (!st_->cfg.ready || st_->cfg.ready());
      resp->set_status(ready ? status::SERVING : status::NOT_SERVING);
    } else {
      r->Finish({grpc::StatusCode::NOT_FOUND, "unknown service " + name});
      return r;
    }
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  std::shared_ptr<epp_state> st_;
};

} // namespace

epp_server::epp_server(dispatch_queue& queue,
                       std::function<std::vector<std::string>()> models,
                       epp_config cfg)
  : state_(std::make_shared<state>(queue, std::move(models), std::move(cfg))) {}

epp_server::~epp_server() {
  stop();
}

std::string epp_server::start(const std::string& host, uint16_t port,
                              std::shared_ptr<grpc::ServerCredentials> creds) {
  std::lock_guard<std::mutex> guard{mtx_};
  host_ = host;
  creds_ = std::move(creds);
  port_ = port;
  auto err = listen();
  if (err.empty())
    spdlog::info("router: endpoint picker (ext_proc) on {}:{}", host,
                 port_.load());
  return err;
}

std::string epp_server::listen() {
  // A service serves one server in its life: new ones, the same state.
  service_ = std::make_unique<processor>(state_);
  health_ = std::make_unique<epp_health>(state_);
  grpc::ServerBuilder builder;
  auto address = host_ + ":" + std::to_string(port_.load());
  builder.RegisterService(service_.get());
  builder.RegisterService(health_.get());
  if (auto err =
        server_.start(builder, address, creds_, state_->cfg.server, "epp");
      !err.empty())
    return "the endpoint picker cannot listen on " + address + (": " + err);
  port_ = server_.port();
  return {};
}

bool epp_server::restart(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopped_ || port_ == 0)
    return false;
  server_.shutdown(std::chrono::system_clock::now() + grace);
  auto err = listen();
  if (!err.empty()) {
    spdlog::error("router: {} again yet", err);
    return false;
  }
  spdlog::warn("router: endpoint picker listening again on port {}",
               port_.load());
  return true;
}

void epp_server::stop() {
  std::lock_guard<std::mutex> guard{mtx_};
  stopped_ = true;
  state_->stopping = true;
  // Streams still open are cancelled after a short grace; their bookings
  // go with them (OnDone).
  server_.shutdown(std::chrono::system_clock::now() + std::chrono::seconds{2});
  state_->pool.stop();
}

} // namespace outrider::router
