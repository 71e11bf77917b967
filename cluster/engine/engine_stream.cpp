#include "cluster/engine/engine_stream.hpp"

#include "openengine.grpc.pb.h"
#include "vllm.grpc.pb.h"

namespace outrider::engine {

namespace {

namespace oe = openengine::v1;

oe::FinishReason from_vllm(vllm::FinishReason r) {
  switch (r) {
  case vllm::STOP:
    return oe::FINISH_REASON_STOP;
  case vllm::LENGTH:
    return oe::FINISH_REASON_LENGTH;
  case vllm::ABORTED:
    return oe::FINISH_REASON_CANCELLED;
  default:
    return oe::FINISH_REASON_UNSPECIFIED;
  }
}

std::shared_ptr<grpc::Channel> borrow(grpc::Channel& ch) {
  return std::shared_ptr<grpc::Channel>(&ch, [](grpc::Channel*) {});
}

using deliver_fn = std::function<bool(const oe::GenerateResponse&, uint32_t)>;

// OpenEngine engines: passed through.
stream_outcome stream_openengine(grpc::Channel& ch,
                                 const oe::GenerateRequest& in,
                                 grpc::ClientContext& ctx,
                                 const deliver_fn& deliver) {
  stream_outcome out;
  auto reader = oe::Inference::NewStub(borrow(ch))->Generate(&ctx, in);
  oe::GenerateResponse resp;
  while (reader->Read(&resp)) {
    auto n =
      resp.has_token() ? static_cast<uint32_t>(resp.token().tokens_size()) : 0;
    out.tokens += n;
    if (!deliver(resp, n)) {
      out.cancelled = true;
      ctx.TryCancel();
      break;
    }
  }
  out.status = reader->Finish();
  return out;
}

vllm::GenerateRequest to_vllm(const oe::GenerateRequest& in) {
  vllm::GenerateRequest req;
  req.set_request_id(in.request_id());
  req.set_model(in.model());
  *req.mutable_token_ids()->mutable_ids() = in.token_ids().ids();
  const auto& stop = in.stopping();
  req.mutable_stopping()->set_max_new_tokens(
    stop.has_max_tokens() ? stop.max_tokens() : 16);
  for (const auto& c : stop.conditions())
    if (c.has_stop_token_id())
      req.mutable_stopping()->add_stop_token_ids(c.stop_token_id());
  if (in.sampling().has_seed())
    req.mutable_sampling()->set_seed(
      static_cast<int64_t>(in.sampling().seed()));
  if (in.sampling().has_temperature())
    req.set_temperature(static_cast<float>(in.sampling().temperature()));
  return req;
}

oe::GenerateResponse finished_of(const std::string& id,
                                 const vllm::FinishInfo& info,
                                 uint32_t prompt_tokens) {
  oe::GenerateResponse fin;
  fin.set_request_id(id);
  fin.mutable_finished()->set_reason(from_vllm(info.finish_reason()));
  auto* u = fin.mutable_usage();
  u->set_prompt_tokens(prompt_tokens);
  u->set_completion_tokens(info.num_output_tokens());
  u->set_total_tokens(prompt_tokens + info.num_output_tokens());
  return fin;
}

// vLLM engines: their responses become OpenEngine prompt, token and
// finished events.
stream_outcome stream_vllm(grpc::Channel& ch, const oe::GenerateRequest& in,
                           grpc::ClientContext& ctx,
                           const deliver_fn& deliver) {
  stream_outcome out;
  auto reader =
    vllm::Inference::NewStub(borrow(ch))->GenerateStream(&ctx, to_vllm(in));
  vllm::GenerateResponse resp;
  bool first = true;
  uint32_t prompt_tokens = 0;
  auto send = [&](const oe::GenerateResponse& r, uint32_t n) {
    out.tokens += n;
    if (deliver(r, n))
      return true;
    out.cancelled = true;
    ctx.TryCancel();
    return false;
  };
  while (reader->Read(&resp)) {
    oe::GenerateResponse ev;
    ev.set_request_id(in.request_id());
    if (first) {
      first = false;
      prompt_tokens = resp.prompt_info().num_prompt_tokens();
      ev.mutable_prompt()->set_num_prompt_tokens(prompt_tokens);
      if (!send(ev, 0))
        break;
      ev.Clear();
      ev.set_request_id(in.request_id());
    }
    const auto& seq = resp.outputs();
    if (seq.token_ids_size() > 0) {
      auto* t = ev.mutable_token();
      t->set_output_index(seq.index());
      for (auto tok : seq.token_ids())
        t->add_tokens()->set_token_id(tok);
      if (!send(ev, static_cast<uint32_t>(seq.token_ids_size())))
        break;
    }
    if (seq.has_finish_info() &&
        !send(finished_of(in.request_id(), seq.finish_info(), prompt_tokens),
              0))
      break;
  }
  out.status = reader->Finish();
  return out;
}

} // namespace

stream_outcome stream_generate(
  grpc::Channel& ch, dialect d, const oe::GenerateRequest& in,
  const std::vector<std::pair<std::string, std::string>>& metadata,
  grpc::ClientContext& ctx, const deliver_fn& deliver) {
  for (const auto& [k, v] : metadata) {
    if (d != dialect::vllm)
      ctx.AddMetadata(k, v);
    else if (k == "openengine-target-dp-rank")
      ctx.AddMetadata("x-data-parallel-rank", v);
  }
  if (d != dialect::vllm)
    return stream_openengine(ch, in, ctx, deliver);
  stream_outcome out;
  if (in.has_prompt()) {
    out.status = {grpc::StatusCode::INVALID_ARGUMENT,
                  "text prompts are not supported; send token_ids"};
    return out;
  }
  if (in.kv().has_session()) {
    out.status = {grpc::StatusCode::UNIMPLEMENTED,
                  "KV sessions are not passed to vLLM engines yet"};
    return out;
  }
  return stream_vllm(ch, in, ctx, deliver);
}

} // namespace outrider::engine
