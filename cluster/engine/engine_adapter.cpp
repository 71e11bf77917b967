#include "cluster/engine/engine_adapter.hpp"

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "openengine.grpc.pb.h"
#include "sglang.grpc.pb.h"
#include "vllm.grpc.pb.h"

namespace outrider::engine {

/// SGLang's adapter (sglang_adapter.cpp).
std::unique_ptr<engine_adapter>
make_sglang_adapter(std::shared_ptr<grpc::Channel> ch, std::string host);

namespace {

namespace oe = openengine::v1;

void deadline(grpc::ClientContext& ctx) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{5});
}

// gRPC statuses become outrider errors here, at the edge: a caller
// retries what is unreachable and gives up on what was refused.
caf::error from_status(const grpc::Status& s) {
  auto what = "gRPC " + std::to_string(static_cast<int>(s.error_code())) +
              ": " + s.error_message();
  switch (s.error_code()) {
  case grpc::StatusCode::UNAVAILABLE:
  case grpc::StatusCode::DEADLINE_EXCEEDED:
  case grpc::StatusCode::CANCELLED:
    return make_error(errc::engine_unreachable, std::move(what));
  default:
    return make_error(errc::engine_refused, std::move(what));
  }
}

caf::error malformed(std::string what) {
  return make_error(errc::engine_malformed, std::move(what));
}

caf::error not_known_yet() {
  return make_error(errc::engine_unreachable,
                    "the engine's protocol is not known yet");
}

std::string host_of(const std::string& endpoint) {
  auto colon = endpoint.rfind(':');
  return colon == std::string::npos ? endpoint : endpoint.substr(0, colon);
}

class vllm_adapter final : public engine_adapter {
 public:
  explicit vllm_adapter(std::shared_ptr<grpc::Channel> ch, std::string host)
    : control_(vllm::Control::NewStub(ch)),
      kv_transfer_(vllm::KvTransfer::NewStub(ch)), host_(std::move(host)) {}

  caf::error server_info(engine_info& out) override {
    grpc::ClientContext ctx;
    deadline(ctx);
    vllm::GetServerInfoRequest req;
    vllm::ServerInfo info;
    if (auto st = control_->GetServerInfo(&ctx, req, &info); !st.ok())
      return from_status(st);
    grpc::ClientContext mctx;
    deadline(mctx);
    vllm::GetModelInfoRequest mreq;
    vllm::ModelInfo model;
    if (auto st = control_->GetModelInfo(&mctx, mreq, &model); !st.ok())
      return from_status(st);
    out.instance_id = info.instance_id();
    out.model = model.served_model_name();
    out.kv_block_size = info.kv_block_size();
    out.total_kv_blocks = info.total_kv_blocks();
    out.data_parallel_size =
      std::max(1u, info.parallelism().data_parallel_size());
    out.protocol = "vllm";
    if (out.instance_id.empty())
      return malformed("the engine reported no instance_id");
    // Adapters (Control.ListLoras); an engine without LoRA, or one that
    // does not answer, lists none.
    out.lora_adapters.clear();
    grpc::ClientContext lctx;
    deadline(lctx);
    vllm::ListLorasResponse loras;
    if (control_->ListLoras(&lctx, vllm::ListLorasRequest{}, &loras).ok())
      for (const auto& a : loras.adapters())
        out.add_adapter(a.lora_name());
    return {};
  }

  caf::error kv_sources(std::vector<kv_source>& out) override {
    grpc::ClientContext ctx;
    deadline(ctx);
    vllm::GetKvEventSourcesRequest req;
    vllm::GetKvEventSourcesResponse resp;
    // vllm.KvTransfer first (the split surface), then vllm.Control.
    auto st = kv_transfer_->GetKvEventSources(&ctx, req, &resp);
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      grpc::ClientContext again;
      deadline(again);
      resp.Clear();
      st = control_->GetKvEventSources(&again, req, &resp);
    }
    if (!st.ok())
      return from_status(st);
    for (const auto& s : resp.sources()) {
      if (s.transport() != "zmq" || s.encoding() != "msgpack")
        return malformed("unsupported KV event source: " + s.transport() + "/" +
                         s.encoding());
      kv_source k;
      k.rank = s.has_data_parallel_rank()
                 ? static_cast<int>(s.data_parallel_rank())
                 : 0;
      k.endpoint = connectable(s.endpoint(), host_);
      if (!s.replay_endpoint().empty())
        k.replay_endpoint = connectable(s.replay_endpoint(), host_);
      k.topic = s.topic();
      out.push_back(std::move(k));
    }
    return {};
  }

  caf::error abort(const std::string& id) override {
    grpc::ClientContext ctx;
    deadline(ctx);
    vllm::AbortRequest req;
    req.add_request_ids(id);
    vllm::AbortResponse resp;
    auto st = control_->Abort(&ctx, req, &resp);
    return st.ok() ? caf::error{} : from_status(st);
  }

  caf::error shutdown() override {
    grpc::ClientContext ctx;
    deadline(ctx);
    vllm::ShutdownRequest req;
    vllm::ShutdownResponse resp;
    auto st = control_->Shutdown(&ctx, req, &resp);
    return st.ok() ? caf::error{} : from_status(st);
  }

 private:
  std::unique_ptr<vllm::Control::Stub> control_;
  std::unique_ptr<vllm::KvTransfer::Stub> kv_transfer_;
  std::string host_;
};

class openengine_adapter final : public engine_adapter {
 public:
  explicit openengine_adapter(std::shared_ptr<grpc::Channel> ch)
    : control_(oe::Control::NewStub(ch)) {}

  grpc::Status info(engine_info& out) {
    grpc::ClientContext ctx;
    deadline(ctx);
    oe::GetServerInfoRequest req;
    oe::ServerInfo info;
    auto st = control_->GetServerInfo(&ctx, req, &info);
    if (!st.ok())
      return st;
    out.instance_id = info.instance_id();
    out.model = info.supported_models_size() > 0 ? info.supported_models(0)
                                                 : std::string{};
    out.role =
      info.engine_role() == oe::ENGINE_ROLE_PREFILL  ? worker_role::prefill
      : info.engine_role() == oe::ENGINE_ROLE_DECODE ? worker_role::decode
                                                     : worker_role::aggregated;
    out.kv_block_size = info.capacity().kv_block_size();
    out.total_kv_blocks = info.capacity().total_kv_blocks();
    out.data_parallel_size =
      std::max(1u, info.parallelism().data_parallel_size());
    out.protocol = "openengine";
    // Adapters, where the engine lists them (UNIMPLEMENTED: none).
    grpc::ClientContext lctx;
    deadline(lctx);
    oe::ListLorasResponse loras;
    out.lora_adapters.clear();
    if (control_->ListLoras(&lctx, oe::ListLorasRequest{}, &loras).ok())
      for (const auto& n : loras.lora_names())
        out.add_adapter(n);
    return st;
  }

  caf::error server_info(engine_info& out) override {
    if (auto st = info(out); !st.ok())
      return from_status(st);
    if (out.instance_id.empty())
      return malformed("the engine reported no instance_id");
    return {};
  }

  caf::error kv_sources(std::vector<kv_source>& out) override {
    grpc::ClientContext ctx;
    deadline(ctx);
    oe::GetKvEventSourcesRequest req;
    oe::GetKvEventSourcesResponse resp;
    if (auto st = control_->GetKvEventSources(&ctx, req, &resp); !st.ok())
      return from_status(st);
    for (const auto& s : resp.sources()) {
      if (s.transport() != "zmq" || s.encoding() != "msgpack")
        return malformed("unsupported KV event source: " + s.transport() + "/" +
                         s.encoding());
      kv_source k;
      k.rank = static_cast<int>(s.data_parallel_rank());
      k.endpoint = "tcp://" + s.endpoint_addr().host() + ":" +
                   std::to_string(s.endpoint_addr().port());
      if (s.has_replay_endpoint())
        k.replay_endpoint = "tcp://" + s.replay_endpoint().host() + ":" +
                            std::to_string(s.replay_endpoint().port());
      k.topic = s.topic();
      out.push_back(std::move(k));
    }
    return {};
  }

  caf::error abort(const std::string& id) override {
    grpc::ClientContext ctx;
    deadline(ctx);
    oe::AbortRequest req;
    req.set_request_id(id);
    oe::AbortResponse resp;
    auto st = control_->Abort(&ctx, req, &resp);
    return st.ok() ? caf::error{} : from_status(st);
  }

  caf::error shutdown() override {
    return make_error(errc::engine_refused,
                      "OpenEngine has no call to shut an engine down");
  }

 private:
  std::unique_ptr<oe::Control::Stub> control_;
};

// Which protocol an engine speaks, by the services it offers: the first of
// OpenEngine, vLLM and SGLang whose GetServerInfo is not UNIMPLEMENTED.
// Any other failure (the engine is not up yet) is returned as it is.
grpc::Status detect(const std::shared_ptr<grpc::Channel>& ch,
                    std::string* protocol) {
  auto probe = [&](auto&& call) {
    grpc::ClientContext ctx;
    deadline(ctx);
    return call(ctx);
  };
  auto st = probe([&](grpc::ClientContext& ctx) {
    oe::ServerInfo info;
    return oe::Control::NewStub(ch)->GetServerInfo(&ctx, {}, &info);
  });
  *protocol = "openengine";
  if (st.error_code() != grpc::StatusCode::UNIMPLEMENTED)
    return st;
  st = probe([&](grpc::ClientContext& ctx) {
    vllm::ServerInfo info;
    return vllm::Control::NewStub(ch)->GetServerInfo(&ctx, {}, &info);
  });
  *protocol = "vllm";
  if (st.error_code() != grpc::StatusCode::UNIMPLEMENTED)
    return st;
  *protocol = "sglang";
  return probe([&](grpc::ClientContext& ctx) {
    sglang::runtime::v1::GetServerInfoResponse info;
    return sglang::runtime::v1::SglangService::NewStub(ch)->GetServerInfo(
      &ctx, {}, &info);
  });
}

// Detects the protocol once and settles on its adapter.
class auto_adapter final : public engine_adapter {
 public:
  auto_adapter(std::shared_ptr<grpc::Channel> ch, std::string host)
    : ch_(std::move(ch)), host_(std::move(host)) {}

  caf::error server_info(engine_info& out) override {
    if (!chosen_) {
      std::string protocol;
      if (auto st = detect(ch_, &protocol); !st.ok())
        return from_status(st);
      if (protocol == "openengine")
        chosen_ = std::make_unique<openengine_adapter>(ch_);
      else if (protocol == "vllm")
        chosen_ = std::make_unique<vllm_adapter>(ch_, host_);
      else
        chosen_ = make_sglang_adapter(ch_, host_);
    }
    return chosen_->server_info(out);
  }

  caf::error kv_sources(std::vector<kv_source>& out) override {
    return chosen_ ? chosen_->kv_sources(out) : not_known_yet();
  }

  caf::error abort(const std::string& id) override {
    return chosen_ ? chosen_->abort(id) : not_known_yet();
  }

  caf::error shutdown() override {
    return chosen_ ? chosen_->shutdown() : not_known_yet();
  }

 private:
  std::shared_ptr<grpc::Channel> ch_;
  std::string host_;
  std::unique_ptr<engine_adapter> chosen_;
};

} // namespace

std::string connectable(const std::string& endpoint,
                        const std::string& engine_host) {
  for (const std::string wildcard : {"tcp://*:", "tcp://0.0.0.0:"})
    if (endpoint.rfind(wildcard, 0) == 0)
      return "tcp://" + engine_host + ":" + endpoint.substr(wildcard.size());
  return endpoint;
}

std::unique_ptr<engine_adapter>
make_engine_adapter(const std::string& protocol, const std::string& endpoint) {
  auto ch = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  auto host = host_of(endpoint);
  if (protocol == "openengine")
    return std::make_unique<openengine_adapter>(ch);
  if (protocol == "vllm")
    return std::make_unique<vllm_adapter>(ch, host);
  if (protocol == "sglang")
    return make_sglang_adapter(ch, host);
  return std::make_unique<auto_adapter>(ch, host);
}

} // namespace outrider::engine
