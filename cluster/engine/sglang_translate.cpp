#include "cluster/engine/sglang_translate.hpp"

#include <charconv>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace outrider::engine {

namespace {

namespace oe = openengine::v1;
namespace sg = sglang::runtime::v1;

// A meta_info number ("12", JSON-encoded); `fallback` when absent or bad.
uint32_t meta_number(const sg::GenerateResponse& r, const char* key,
                     uint32_t fallback) {
  auto it = r.meta_info().find(key);
  if (it == r.meta_info().end())
    return fallback;
  auto j = nlohmann::json::parse(it->second, nullptr, false);
  return j.is_number_unsigned() ? j.get<uint32_t>() : fallback;
}

bool finish_of(const sg::GenerateResponse& r, oe::FinishReason* reason,
               std::string* message) {
  auto it = r.meta_info().find("finish_reason");
  if (it == r.meta_info().end()) {
    *reason = oe::FINISH_REASON_STOP; // finished with no reason given
    return true;
  }
  auto j = nlohmann::json::parse(it->second, nullptr, false);
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return false;
  auto type = j["type"].get<std::string>();
  *reason = type == "length" ? oe::FINISH_REASON_LENGTH
            : type == "stop" ? oe::FINISH_REASON_STOP
                             : oe::FINISH_REASON_CANCELLED;
  if (j.contains("message") && j["message"].is_string())
    *message = j["message"].get<std::string>();
  return true;
}

} // namespace

sg::GenerateRequest to_sglang(const oe::GenerateRequest& in, int rank) {
  sg::GenerateRequest req;
  for (auto id : in.token_ids().ids())
    req.add_input_ids(static_cast<int32_t>(id));
  req.set_stream(true);
  req.set_rid(in.request_id());
  if (rank >= 0)
    req.set_routed_dp_rank(rank);
  auto* sp = req.mutable_sampling_params();
  const auto& stop = in.stopping();
  sp->set_max_new_tokens(
    static_cast<int32_t>(stop.has_max_tokens() ? stop.max_tokens() : 16));
  for (const auto& c : stop.conditions())
    if (c.has_stop_token_id())
      sp->add_stop_token_ids(static_cast<int32_t>(c.stop_token_id()));
  if (in.sampling().has_temperature())
    sp->set_temperature(static_cast<float>(in.sampling().temperature()));
  // SGLang names a loaded adapter by its name in lora_path.
  if (!in.lora_name().empty())
    req.set_lora_path(in.lora_name());
  if (in.kv().has_session())
    if (auto p = bootstrap_params(in.kv().session()))
      *req.mutable_disaggregated_params() = std::move(*p);
  return req;
}

std::optional<sg::DisaggregatedParams>
bootstrap_params(const oe::KvSessionRef& s) {
  if (s.transfer_backend() != sglang_bootstrap_backend ||
      s.endpoints_size() != 1 || s.endpoints(0).host().empty() ||
      s.endpoints(0).port() == 0 || s.endpoints(0).port() > 65535)
    return std::nullopt;
  const auto& id = s.session_id();
  int64_t room = -1;
  auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), room);
  if (ec != std::errc{} || end != id.data() + id.size() || room < 0)
    return std::nullopt;
  sg::DisaggregatedParams p;
  p.set_bootstrap_host(s.endpoints(0).host());
  p.set_bootstrap_port(static_cast<int32_t>(s.endpoints(0).port()));
  p.set_bootstrap_room(room);
  return p;
}

oe::KvSessionRef bootstrap_session(int64_t room, const std::string& endpoint,
                                   int prefill_rank) {
  oe::KvSessionRef s;
  s.set_session_id(std::to_string(room));
  s.set_transfer_backend(sglang_bootstrap_backend);
  auto colon = endpoint.rfind(':');
  auto* ep = s.add_endpoints();
  ep->set_host(endpoint.substr(0, colon));
  if (colon != std::string::npos)
    ep->set_port(
      static_cast<uint32_t>(std::atoi(endpoint.c_str() + colon + 1)));
  ep->set_protocol(sglang_bootstrap_backend);
  s.set_dp_rank(static_cast<uint32_t>(prefill_rank));
  return s;
}

bool sglang_translator::translate(const sg::GenerateResponse& resp,
                                  const emit_fn& emit) {
  if (first_) {
    first_ = false;
    prompt_tokens_ = meta_number(resp, "prompt_tokens", 0);
    cached_tokens_ = meta_number(resp, "cached_tokens", 0);
    oe::GenerateResponse ev;
    ev.set_request_id(id_);
    ev.mutable_prompt()->set_num_prompt_tokens(prompt_tokens_);
    if (!emit(std::move(ev), 0))
      return false;
  }
  auto n = static_cast<uint32_t>(resp.output_ids_size());
  if (cumulative_ && n < sent_)
    return false; // a cumulative list never shrinks
  uint32_t from = cumulative_ ? sent_ : 0;
  if (n > from) {
    oe::GenerateResponse ev;
    ev.set_request_id(id_);
    auto* t = ev.mutable_token();
    t->set_output_index(sent_);
    for (uint32_t i = from; i < n; ++i)
      t->add_tokens()->set_token_id(
        static_cast<uint32_t>(resp.output_ids(static_cast<int>(i))));
    sent_ += n - from;
    if (!emit(std::move(ev), n - from))
      return false;
  }
  if (!resp.finished())
    return true;
  oe::GenerateResponse fin;
  fin.set_request_id(id_);
  oe::FinishReason reason{};
  std::string message;
  if (!finish_of(resp, &reason, &message))
    return false;
  fin.mutable_finished()->set_reason(reason);
  fin.mutable_finished()->set_output_index(sent_);
  fin.mutable_finished()->set_message(message);
  auto* u = fin.mutable_usage();
  u->set_prompt_tokens(prompt_tokens_);
  u->set_completion_tokens(sent_);
  u->set_total_tokens(prompt_tokens_ + sent_);
  u->set_cached_prompt_tokens(cached_tokens_);
  return emit(std::move(fin), 0);
}

} // namespace outrider::engine
