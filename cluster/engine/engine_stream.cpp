#include "cluster/engine/engine_stream.hpp"

#include "cluster/engine/vllm_translate.hpp"
#include "openengine.grpc.pb.h"
#include "vllm.grpc.pb.h"

namespace outrider::engine {

namespace {

namespace oe = openengine::v1;

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

// vLLM engines: their responses become OpenEngine prompt, token and
// finished events.
stream_outcome stream_vllm(grpc::Channel& ch, const oe::GenerateRequest& in,
                           grpc::ClientContext& ctx,
                           const deliver_fn& deliver) {
  stream_outcome out;
  auto reader =
    vllm::Inference::NewStub(borrow(ch))->GenerateStream(&ctx, to_vllm(in));
  vllm::GenerateResponse resp;
  vllm_translator translator{in.request_id()};
  auto send = [&](oe::GenerateResponse&& r, uint32_t n) {
    out.tokens += n;
    if (deliver(r, n))
      return true;
    out.cancelled = true;
    ctx.TryCancel();
    return false;
  };
  while (reader->Read(&resp))
    if (!translator.translate(resp, send))
      break;
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
