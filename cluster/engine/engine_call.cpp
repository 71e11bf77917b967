#include "cluster/engine/engine_call.hpp"

#include <charconv>
#include <cstdint>
#include <set>

#include "cluster/engine/sglang_translate.hpp"
#include "cluster/engine/vllm_translate.hpp"
#include "openengine.grpc.pb.h"
#include "sglang.grpc.pb.h"
#include "vllm.grpc.pb.h"

namespace outrider::engine {

namespace {

namespace oe = openengine::v1;

// OpenEngine engines: each response passed through. Deletes itself when
// the call is done.
class openengine_call final
  : public grpc::ClientReadReactor<oe::GenerateResponse> {
 public:
  openengine_call(const std::shared_ptr<grpc::Channel>& ch,
                  const oe::GenerateRequest& req, grpc::ClientContext& ctx,
                  generate_sink& sink)
    : stub_(oe::Inference::NewStub(ch)), req_(req), sink_(sink) {
    stub_->async()->Generate(&ctx, &req_, this);
    StartRead(&resp_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok)
      return; // the stream ended; OnDone follows
    auto n = resp_.has_token()
               ? static_cast<uint32_t>(resp_.token().tokens_size())
               : 0;
    sink_.on_response(std::move(resp_), n);
    resp_.Clear();
    StartRead(&resp_);
  }

  void OnDone(const grpc::Status& st) override {
    sink_.on_done(st);
    delete this;
  }

 private:
  std::unique_ptr<oe::Inference::Stub> stub_;
  oe::GenerateRequest req_;
  oe::GenerateResponse resp_;
  generate_sink& sink_;
};

// vLLM engines: each response translated into OpenEngine events.
class vllm_call final : public grpc::ClientReadReactor<vllm::GenerateResponse> {
 public:
  vllm_call(const std::shared_ptr<grpc::Channel>& ch,
            const oe::GenerateRequest& req, int32_t priority,
            grpc::ClientContext& ctx, generate_sink& sink)
    : stub_(vllm::Inference::NewStub(ch)), req_(to_vllm(req)),
      translator_(req.request_id()), sink_(sink) {
    req_.set_priority(priority);
    stub_->async()->GenerateStream(&ctx, &req_, this);
    StartRead(&resp_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok)
      return;
    translator_.translate(resp_, [this](oe::GenerateResponse&& r, uint32_t n) {
      sink_.on_response(std::move(r), n);
      return true;
    });
    StartRead(&resp_);
  }

  void OnDone(const grpc::Status& st) override {
    sink_.on_done(st);
    delete this;
  }

 private:
  std::unique_ptr<vllm::Inference::Stub> stub_;
  vllm::GenerateRequest req_;
  vllm::GenerateResponse resp_;
  vllm_translator translator_;
  generate_sink& sink_;
};

// SGLang engines: each response translated into OpenEngine events; the DP
// rank travels in the body. Dropping the stream aborts the request there.
class sglang_call final
  : public grpc::ClientReadReactor<sglang::runtime::v1::GenerateResponse> {
 public:
  sglang_call(const std::shared_ptr<grpc::Channel>& ch,
              const oe::GenerateRequest& req, int rank,
              grpc::ClientContext& ctx, generate_sink& sink)
    : stub_(sglang::runtime::v1::SglangService::NewStub(ch)),
      req_(to_sglang(req, rank)), translator_(req.request_id(), false),
      ctx_(ctx), sink_(sink) {
    stub_->async()->Generate(&ctx, &req_, this);
    StartRead(&resp_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok)
      return;
    bool fine = translator_.translate(
      resp_, [this](oe::GenerateResponse&& r, uint32_t n) {
        sink_.on_response(std::move(r), n);
        return true;
      });
    if (!fine) {
      malformed_ = true;
      ctx_.TryCancel(); // OnDone reports it
      return;
    }
    resp_.Clear();
    StartRead(&resp_);
  }

  void OnDone(const grpc::Status& st) override {
    sink_.on_done(malformed_ ? grpc::Status{grpc::StatusCode::INTERNAL,
                                            "the engine sent a malformed "
                                            "SGLang response"}
                             : st);
    delete this;
  }

 private:
  std::unique_ptr<sglang::runtime::v1::SglangService::Stub> stub_;
  sglang::runtime::v1::GenerateRequest req_;
  sglang::runtime::v1::GenerateResponse resp_;
  sglang_translator translator_;
  grpc::ClientContext& ctx_;
  generate_sink& sink_;
  bool malformed_ = false;
};

} // namespace

namespace {

constexpr const char* rank_key = "openengine-target-dp-rank";
constexpr const char* priority_key = "openengine-priority";

template <class T>
std::optional<T> whole_number(const std::string& v) {
  T out{};
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc{} || end != v.data() + v.size())
    return std::nullopt;
  return out;
}

} // namespace

std::optional<call_target> call_target_from(
  const std::vector<std::pair<std::string, std::string>>& metadata,
  std::string* why) {
  call_target t;
  std::set<std::string> seen;
  for (const auto& [k, v] : metadata) {
    if (k == hops_key) {
      auto n = whole_number<uint32_t>(v);
      if (!n || !seen.insert(k).second) {
        *why = "metadata '" + k + "' must be given once, a base-10 uint32";
        return std::nullopt;
      }
      t.hops = *n;
      continue;
    }
    if (k == "traceparent" || k == "tracestate") {
      // The first of each counts; the trace context is advisory, a
      // malformed one is no context (never a refusal).
      auto& slot = k == "traceparent" ? t.traceparent : t.tracestate;
      if (slot.empty() && v.size() <= 512)
        slot = v;
      continue;
    }
    if (k.rfind("openengine-", 0) != 0)
      continue;
    if (!seen.insert(k).second) {
      *why = "metadata '" + k + "' is given more than once";
      return std::nullopt;
    }
    if (k == rank_key) {
      t.dp_rank = whole_number<uint32_t>(v);
      if (!t.dp_rank) {
        *why = "metadata '" + k + "' must be a base-10 uint32";
        return std::nullopt;
      }
    } else if (k == priority_key) {
      t.priority = whole_number<int32_t>(v);
      if (!t.priority) {
        *why = "metadata '" + k + "' must be an int32";
        return std::nullopt;
      }
    } else {
      t.passthrough.emplace_back(k, v);
    }
  }
  return t;
}

std::optional<call_target>
call_target_of_call(const std::multimap<grpc::string_ref, grpc::string_ref>& md,
                    std::string* why) {
  std::vector<std::pair<std::string, std::string>> metadata;
  for (const auto& [k, v] : md)
    metadata.emplace_back(std::string(k.data(), k.size()),
                          std::string(v.data(), v.size()));
  return call_target_from(metadata, why);
}

void start_generate(const std::shared_ptr<grpc::Channel>& ch, dialect d,
                    const oe::GenerateRequest& req, const call_target& target,
                    grpc::ClientContext& ctx, generate_sink& sink) {
  if (target.hops > 0)
    ctx.AddMetadata(hops_key, std::to_string(target.hops));
  if (!target.worker.empty())
    ctx.AddMetadata(worker_key, target.worker);
  if (!target.traceparent.empty()) {
    ctx.AddMetadata("traceparent", target.traceparent);
    if (!target.tracestate.empty())
      ctx.AddMetadata("tracestate", target.tracestate);
  }
  if (d == dialect::openengine || d == dialect::unknown) {
    if (target.dp_rank)
      ctx.AddMetadata(rank_key, std::to_string(*target.dp_rank));
    if (target.priority)
      ctx.AddMetadata(priority_key, std::to_string(*target.priority));
    for (const auto& [k, v] : target.passthrough)
      ctx.AddMetadata(k, v);
  } else if (d == dialect::vllm && target.dp_rank) {
    ctx.AddMetadata("x-data-parallel-rank", std::to_string(*target.dp_rank));
  }
  int rank = target.dp_rank ? static_cast<int>(*target.dp_rank) : -1;
  int32_t priority = target.priority.value_or(0);
  // Media reach OpenEngine engines only (outrider's MediaInput fields):
  // vLLM's MediaItem modality values and SGLang's image fields are not in
  // the sources outrider read (docs/wire.md, "Media"). Sent without them,
  // the engine would answer for a prompt without its images.
  if (req.media_size() > 0 && d != dialect::openengine && d != dialect::unknown)
    return sink.on_done({grpc::StatusCode::INVALID_ARGUMENT,
                         "media items are passed only to OpenEngine engines; "
                         "this worker speaks " +
                           std::string(to_string(d))});
  if (d == dialect::sglang) {
    if (req.has_prompt())
      return sink.on_done({grpc::StatusCode::INVALID_ARGUMENT,
                           "text prompts are not supported; send token_ids"});
    if (req.kv().has_session() && !bootstrap_params(req.kv().session()))
      return sink.on_done({grpc::StatusCode::UNIMPLEMENTED,
                           "SGLang engines take only bootstrap-room KV "
                           "sessions"});
    // SGLang's native gRPC request has no salt field (proto/sglang.proto):
    // sent without it, the tenant's prompt would share others' cache.
    if (req.kv().has_cache_salt() && !req.kv().cache_salt().empty())
      return sink.on_done({grpc::StatusCode::INVALID_ARGUMENT,
                           "cache_salt is not supported by SGLang engines' "
                           "gRPC; send the request without it or to a vLLM "
                           "or OpenEngine worker"});
    new sglang_call(ch, req, rank, ctx, sink);
    return;
  }
  if (d != dialect::vllm) {
    new openengine_call(ch, req, ctx, sink); // OpenEngine (and unknown)
    return;
  }
  if (req.has_prompt())
    return sink.on_done({grpc::StatusCode::INVALID_ARGUMENT,
                         "text prompts are not supported; send token_ids"});
  if (req.kv().has_session())
    return sink.on_done({grpc::StatusCode::UNIMPLEMENTED,
                         "KV sessions are not passed to vLLM engines yet"});
  new vllm_call(ch, req, priority, ctx, sink);
}

bool transport_broke(const grpc::Status& st) {
  auto code = st.error_code();
  if (code == grpc::StatusCode::UNAVAILABLE)
    return true;
  if (code != grpc::StatusCode::UNKNOWN && code != grpc::StatusCode::INTERNAL)
    return false;
  const auto& m = st.error_message();
  for (const char* sign : {"Connection reset by peer", "Broken pipe",
                           "Socket closed", "Stream removed", "GOAWAY"})
    if (m.find(sign) != std::string::npos)
      return true;
  return false;
}

} // namespace outrider::engine
