// The sidecar's view of an SGLang engine (sglang.runtime.v1): identity from
// WatchEngineState's first snapshot (instance_id, with the topology folded
// in), capacity and topology
// from GetServerInfo's JSON, KV event sources from its kv_events (rank r
// on endpoint_port_base + r; a wildcard host is the engine's), abort by
// rid. SGLang advertises no replay endpoint in this revision.
#include <chrono>
#include <cstdio>
#include <functional>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "cluster/engine/engine_adapter.hpp"
#include "sglang.grpc.pb.h"

namespace outrider::engine {

namespace {

namespace sg = sglang::runtime::v1;
using json = nlohmann::json;

void deadline(grpc::ClientContext& ctx) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{5});
}

caf::error from_status(const grpc::Status& s) {
  auto what = "gRPC " + std::to_string(static_cast<int>(s.error_code())) +
              ": " + s.error_message();
  auto c = s.error_code();
  return make_error(c == grpc::StatusCode::UNAVAILABLE ||
                        c == grpc::StatusCode::DEADLINE_EXCEEDED ||
                        c == grpc::StatusCode::CANCELLED
                      ? errc::engine_unreachable
                      : errc::engine_refused,
                    std::move(what));
}

caf::error malformed(std::string what) {
  return make_error(errc::engine_malformed, "SGLang: " + std::move(what));
}

uint64_t number(const json& j, const char* key, uint64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>()
                                                   : fallback;
}

class sglang_adapter final : public engine_adapter {
 public:
  sglang_adapter(std::shared_ptr<grpc::Channel> ch, std::string host)
    : stub_(sg::SglangService::NewStub(ch)), host_(std::move(host)) {}

  caf::error server_info(engine_info& out) override {
    json info;
    if (auto err = fetch_info(info))
      return err;
    auto page = number(info, "page_size", 0);
    if (page == 0)
      return malformed("server info has no page_size");
    grpc::ClientContext ctx;
    deadline(ctx);
    auto watch = stub_->WatchEngineState(&ctx, {});
    sg::EngineStateSnapshot snap;
    if (!watch->Read(&snap)) {
      auto st = watch->Finish();
      return from_status(
        st.ok() ? grpc::Status{grpc::StatusCode::UNAVAILABLE, "no engine state"}
                : st);
    }
    ctx.TryCancel();
    watch->Finish();
    if (snap.instance_id() == 0)
      return malformed("the engine reported no instance_id");
    // A change of topology between attaches (tp_size, dp_size, kv_events)
    // is a new engine, as a new instance_id is: both are in the identity.
    auto topology = json{{"tp", info.value("tp_size", json{})},
                         {"dp", info.value("dp_size", json{})},
                         {"kv", info.value("kv_events", json{})}}
                      .dump();
    char tag[17];
    std::snprintf(tag, sizeof tag, "%016zx",
                  std::hash<std::string>{}(topology));
    out.instance_id = std::to_string(snap.instance_id()) + "-" + tag;
    out.model = info.value("served_model_name", std::string{});
    if (out.model.empty())
      out.model = snap.model_info().model_path();
    out.kv_block_size = static_cast<uint32_t>(page);
    out.total_kv_blocks =
      (number(info, "max_total_num_tokens", 0) + page - 1) / page;
    out.data_parallel_size =
      static_cast<uint32_t>(std::max<uint64_t>(1, number(info, "dp_size", 1)));
    auto mode = info.value("disaggregation_mode", json{});
    out.role = mode.is_string() ? worker_role_of(mode.get<std::string>())
                                    .value_or(worker_role::aggregated)
                                : worker_role::aggregated;
    out.protocol = "sglang";
    // SGLang lists each loaded LoRA adapter as a model card whose parent
    // is the served model (docs/wire.md, "SGLang's gRPC").
    out.lora_adapters.clear();
    for (const auto& card : snap.models().models())
      if (card.has_parent())
        out.add_adapter(card.id());
    auto port = number(info, "disaggregation_bootstrap_port", 0);
    if (out.role == worker_role::prefill && port > 0 && port < 65536)
      out.bootstrap_endpoint = engine_host(info.value("host", std::string{})) +
                               ":" + std::to_string(port);
    return {};
  }

  caf::error kv_sources(std::vector<kv_source>& out) override {
    json info;
    if (auto err = fetch_info(info))
      return err;
    auto kv = info.value("kv_events", json{});
    if (kv.is_null())
      return {};
    if (!kv.is_object() || kv.value("publisher", "") != "zmq")
      return malformed("kv_events is not a zmq publisher");
    auto page = number(info, "page_size", 0);
    auto block = number(kv, "block_size", page);
    if (block != page)
      return malformed("kv_events block_size " + std::to_string(block) +
                       " disagrees with page_size " + std::to_string(page));
    auto base = number(kv, "endpoint_port_base", 0);
    if (base == 0 || base > 65535)
      return malformed("kv_events has no endpoint_port_base");
    auto host = engine_host(kv.value("endpoint_host", std::string{"*"}));
    auto ranks = std::max<uint64_t>(1, number(kv, "dp_size", 1));
    for (uint64_t r = 0; r < ranks; ++r) {
      kv_source k;
      k.rank = static_cast<int>(r);
      k.endpoint = "tcp://" + host + ":" + std::to_string(base + r);
      k.topic = kv.value("topic", std::string{});
      out.push_back(std::move(k));
    }
    return {};
  }

  caf::error abort(const std::string& id) override {
    grpc::ClientContext ctx;
    deadline(ctx);
    sg::AbortRequest req;
    req.set_rid(id);
    sg::AbortResponse resp;
    auto st = stub_->Abort(&ctx, req, &resp);
    return st.ok() ? caf::error{} : from_status(st);
  }

  caf::error shutdown() override {
    return make_error(errc::engine_refused,
                      "SGLang has no shutdown RPC: stop its process");
  }

 private:
  caf::error fetch_info(json& out) {
    grpc::ClientContext ctx;
    deadline(ctx);
    sg::GetServerInfoResponse resp;
    if (auto st = stub_->GetServerInfo(&ctx, {}, &resp); !st.ok())
      return from_status(st);
    out = json::parse(resp.json_info(), nullptr, false);
    if (!out.is_object())
      return malformed("server info is not a JSON object");
    return {};
  }

  std::unique_ptr<sg::SglangService::Stub> stub_;
  // A wildcard (or missing) host is the engine's gRPC host.
  std::string engine_host(const std::string& h) const {
    return h.empty() || h == "*" || h == "0.0.0.0" || h == "::" ? host_ : h;
  }

  std::string host_;
};

} // namespace

std::unique_ptr<engine_adapter>
make_sglang_adapter(std::shared_ptr<grpc::Channel> ch, std::string host) {
  return std::make_unique<sglang_adapter>(std::move(ch), std::move(host));
}

} // namespace outrider::engine
