#include "actors/router/grpc_frontend.hpp"

#include <grpcpp/grpcpp.h>

#include "openengine.grpc.pb.h"

namespace outrider::router {

namespace {

namespace oe = openengine::v1;

grpc::StatusCode code_for(int http_status) {
  switch (http_status) {
  case 400:
    return grpc::StatusCode::INVALID_ARGUMENT;
  case 404:
    return grpc::StatusCode::NOT_FOUND;
  case 499:
    return grpc::StatusCode::CANCELLED;
  case 503:
    return grpc::StatusCode::UNAVAILABLE;
  default:
    return grpc::StatusCode::INTERNAL;
  }
}

class inference final : public oe::Inference::Service {
 public:
  inference(dispatcher& d, std::function<std::vector<std::string>()> models)
    : d_(d), models_(std::move(models)) {}

  grpc::Status Generate(grpc::ServerContext* ctx, const oe::GenerateRequest* in,
                        grpc::ServerWriter<oe::GenerateResponse>* w) override {
    if (in->has_prompt())
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "text prompts need a tokenizer; send token_ids"};
    if (in->token_ids().ids_size() == 0)
      return {grpc::StatusCode::INVALID_ARGUMENT, "the prompt is empty"};
    auto models = models_();
    if (!in->model().empty() && !models.empty() &&
        std::find(models.begin(), models.end(), in->model()) == models.end())
      return {grpc::StatusCode::NOT_FOUND,
              "the model '" + in->model() + "' is not served"};
    const auto& stop = in->stopping();
    if (stop.has_max_tokens() && stop.max_tokens() == 0)
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "max_tokens must be at least 1"};
    generate_params p;
    p.prompt.assign(in->token_ids().ids().begin(), in->token_ids().ids().end());
    p.max_tokens = stop.has_max_tokens() ? stop.max_tokens() : 16;
    if (in->sampling().has_temperature())
      p.temperature = in->sampling().temperature();
    oe::GenerateResponse first;
    first.set_request_id(in->request_id());
    first.mutable_prompt()->set_num_prompt_tokens(
      static_cast<uint32_t>(p.prompt.size()));
    if (!w->Write(first))
      return {grpc::StatusCode::CANCELLED, "the client went away"};
    auto o = d_.generate(p, [&](const std::vector<uint32_t>& toks) {
      if (ctx->IsCancelled())
        return false;
      oe::GenerateResponse r;
      r.set_request_id(in->request_id());
      auto* t = r.mutable_token();
      t->set_output_index(0);
      for (auto tok : toks)
        t->add_tokens()->set_token_id(tok);
      return w->Write(r);
    });
    if (!o.ok)
      return {code_for(o.http_status), o.error};
    oe::GenerateResponse fin;
    fin.set_request_id(in->request_id());
    fin.mutable_finished()->set_reason(o.finish_reason == "stop"
                                         ? oe::FINISH_REASON_STOP
                                         : oe::FINISH_REASON_LENGTH);
    auto* u = fin.mutable_usage();
    u->set_prompt_tokens(o.prompt_tokens);
    u->set_completion_tokens(static_cast<uint32_t>(o.tokens.size()));
    u->set_total_tokens(o.prompt_tokens +
                        static_cast<uint32_t>(o.tokens.size()));
    u->set_cached_prompt_tokens(o.cached_tokens);
    w->Write(fin);
    return grpc::Status::OK;
  }

 private:
  dispatcher& d_;
  std::function<std::vector<std::string>()> models_;
};

} // namespace

grpc_frontend::grpc_frontend(dispatcher& d,
                             std::function<std::vector<std::string>()> models)
  : service_(std::make_unique<inference>(d, std::move(models))) {}

grpc_frontend::~grpc_frontend() {
  stop();
}

std::string grpc_frontend::start(const std::string& host, uint16_t port) {
  grpc::ServerBuilder builder;
  int bound = 0;
  auto address = host + ":" + std::to_string(port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || bound == 0)
    return "cannot listen on " + address;
  return {};
}

void grpc_frontend::stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds{1});
    server_.reset();
  }
}

} // namespace outrider::router
