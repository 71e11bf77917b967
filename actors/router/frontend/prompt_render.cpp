#include "actors/router/frontend/prompt_render.hpp"

#include <chrono>

#include <nlohmann/json.hpp>

#include "actors/router/frontend/openai_chat.hpp"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace {

runtime::histogram& tokenize_seconds() {
  static auto& h = runtime::global_metrics().get_histogram(
    "outrider_router_tokenize_seconds", "Time to tokenize one text prompt",
    {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1});
  return h;
}

std::optional<std::string> render_chat(const prompt_tools& t,
                                       const completion_request& c,
                                       std::string* why) {
  auto vars = nlohmann::ordered_json::parse(c.chat_vars);
  vars["bos_token"] = t.tokenizer->bos_token();
  vars["eos_token"] = t.tokenizer->eos_token();
  return t.chat_template->render(vars, why);
}

} // namespace

std::optional<runtime::http_response>
read_request(const prompt_tools& t, const std::vector<std::string>& models,
             bool chat, const std::string& body, completion_request& c) {
  if (chat && !t.chat_template)
    return api_error(400,
                     t.tokenizer
                       ? "the model's chat template cannot be used: " +
                           t.chat_template_error
                       : "chat needs the model's tokenizer and chat template "
                         "(start the router with --tokenizer DIR)",
                     "chat_unsupported");
  if (auto bad =
        chat ? parse_chat(body, models, t.api, c)
             : parse_completion(body, models, t.api, t.tokenizer != nullptr, c))
    return bad;
  if (t.is_adapter && t.is_adapter(c.model))
    c.params.lora = c.model;
  return std::nullopt;
}

std::optional<runtime::http_response> render_prompt(const prompt_tools& t,
                                                    completion_request& c) {
  if (!c.prompt_text && !c.chat)
    return std::nullopt;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<uint32_t> ids;
  if (c.chat) {
    // The template writes the special tokens (BOS included) itself.
    std::string why;
    auto text = render_chat(t, c, &why);
    if (!text)
      return api_error(400, why, "chat_template_failed");
    ids = t.tokenizer->encode(*text, false);
    if (!c.params.media.empty())
      place_media(
        *text, t.api.media_placeholder, ids,
        [&](std::string_view s) { return t.tokenizer->encode(s, false); },
        c.params.media);
  } else {
    ids = t.tokenizer->encode(*c.prompt_text);
  }
  auto took = std::chrono::steady_clock::now() - t0;
  tokenize_seconds().observe(std::chrono::duration<double>(took).count());
  c.prompt_text.reset();
  if (ids.size() > t.api.max_prompt_tokens)
    return api_error(400,
                     "the prompt has " + std::to_string(ids.size()) +
                       " tokens; the limit is " +
                       std::to_string(t.api.max_prompt_tokens),
                     "prompt_too_long");
  c.params.prompt = std::move(ids);
  c.params.preprocess = took;
  return std::nullopt;
}

} // namespace outrider::router
