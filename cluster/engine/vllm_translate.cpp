#include "cluster/engine/vllm_translate.hpp"

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

} // namespace

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
  // What keys the prompt's KV besides its tokens (docs/wire.md).
  if (!in.lora_name().empty())
    req.set_lora_name(in.lora_name());
  if (in.kv().has_cache_salt())
    req.mutable_kv()->set_cache_salt(in.kv().cache_salt());
  return req;
}

bool vllm_translator::translate(const vllm::GenerateResponse& resp,
                                const emit_fn& emit) {
  if (first_) {
    first_ = false;
    prompt_tokens_ = resp.prompt_info().num_prompt_tokens();
    oe::GenerateResponse ev;
    ev.set_request_id(id_);
    ev.mutable_prompt()->set_num_prompt_tokens(prompt_tokens_);
    if (!emit(std::move(ev), 0))
      return false;
  }
  const auto& seq = resp.outputs();
  if (seq.token_ids_size() > 0) {
    oe::GenerateResponse ev;
    ev.set_request_id(id_);
    auto* t = ev.mutable_token();
    t->set_output_index(seq.index());
    for (auto tok : seq.token_ids())
      t->add_tokens()->set_token_id(tok);
    if (!emit(std::move(ev), static_cast<uint32_t>(seq.token_ids_size())))
      return false;
  }
  if (seq.has_finish_info())
    return emit(finished_of(id_, seq.finish_info(), prompt_tokens_), 0);
  return true;
}

} // namespace outrider::engine
