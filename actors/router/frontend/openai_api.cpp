#include "actors/router/frontend/openai_api.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/metrics.hpp"
#include "runtime/text_checks.hpp"

namespace outrider::router {

namespace {

using json = nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

runtime::http_response json_response(int status, const json& body) {
  runtime::http_response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = dump(body) + "\n";
  return r;
}

json usage_of(const generate_outcome& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.tokens.size()},
          {"total_tokens", o.prompt_tokens + o.tokens.size()},
          {"prompt_tokens_details", {{"cached_tokens", o.cached_tokens}}}};
}

std::optional<runtime::http_response> parse_prompt(const json& doc,
                                                   const api_limits& lim,
                                                   bool text,
                                                   completion_request& out) {
  auto p = doc.find("prompt");
  if (p == doc.end())
    return api_error(400, "'prompt' is required", "missing_prompt");
  const json* prompt = &*p;
  if (prompt->is_array() && prompt->size() == 1 &&
      ((*prompt)[0].is_array() || (*prompt)[0].is_string()))
    prompt = &(*prompt)[0]; // a batch of one
  if (prompt->is_string()) {
    if (!text)
      return api_error(400,
                       "text prompts need a tokenizer (start the router "
                       "with --tokenizer DIR); or send token ids: "
                       "\"prompt\": [1, 2, 3]",
                       "text_prompt_unsupported");
    if (prompt->get_ref<const std::string&>().empty())
      return api_error(400, "'prompt' is empty", "invalid_prompt");
    out.prompt_text = prompt->get<std::string>();
    return std::nullopt;
  }
  if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_string())
    return api_error(400,
                     "send one prompt per request (batches of more "
                     "than one are not supported)",
                     "batch_unsupported");
  if (!prompt->is_array() || prompt->empty())
    return api_error(400, "'prompt' must be a non-empty array of token ids",
                     "invalid_prompt");
  if (prompt->size() > lim.max_prompt_tokens)
    return api_error(400,
                     "the prompt has " + std::to_string(prompt->size()) +
                       " tokens; the limit is " +
                       std::to_string(lim.max_prompt_tokens),
                     "prompt_too_long");
  out.params.prompt.reserve(prompt->size());
  for (const auto& t : *prompt) {
    if (!t.is_number_unsigned() || t.get<uint64_t>() > UINT32_MAX)
      return api_error(400, "every prompt token must be an unsigned integer",
                       "invalid_prompt");
    out.params.prompt.push_back(t.get<uint32_t>());
  }
  return std::nullopt;
}

std::optional<runtime::http_response> parse_sampling(const json& doc,
                                                     completion_request& out) {
  if (auto m = doc.find("max_tokens"); m != doc.end() && !m->is_null()) {
    if (!m->is_number_integer() || m->get<int64_t>() < 1 ||
        m->get<int64_t>() > 1'000'000)
      return api_error(400, "'max_tokens' must be an integer from 1 to 1000000",
                       "invalid_max_tokens");
    out.params.max_tokens = m->get<uint32_t>();
  }
  if (auto t = doc.find("temperature"); t != doc.end() && !t->is_null()) {
    if (!t->is_number() || t->get<double>() < 0)
      return api_error(400, "'temperature' must be a number of 0 or more",
                       "invalid_type");
    out.params.temperature = t->get<double>();
  }
  if (auto s = doc.find("stream"); s != doc.end() && !s->is_null()) {
    if (!s->is_boolean())
      return api_error(400, "'stream' must be true or false", "invalid_type");
    out.stream = s->get<bool>();
  }
  if (auto e = doc.find("echo");
      e != doc.end() && e->is_boolean() && e->get<bool>())
    return api_error(400, "'echo' is not supported", "echo_unsupported");
  // What is not supported is refused, never silently ignored.
  if (auto n = doc.find("n");
      n != doc.end() && !n->is_null() &&
      !(n->is_number_integer() && n->get<int64_t>() == 1))
    return api_error(400, "only 'n': 1 is supported", "n_unsupported");
  for (const char* key : {"logprobs", "top_logprobs"})
    if (auto l = doc.find(key);
        l != doc.end() && !l->is_null() &&
        !(l->is_boolean() && !l->get<bool>()) &&
        !(l->is_number_integer() && l->get<int64_t>() == 0))
      return api_error(400, std::string("'") + key + "' is not supported",
                       "logprobs_unsupported");
  if (auto p = doc.find("top_p"); p != doc.end() && !p->is_null()) {
    if (!p->is_number() || p->get<double>() <= 0 || p->get<double>() > 1)
      return api_error(400, "'top_p' must be a number above 0, at most 1",
                       "invalid_type");
    if (p->get<double>() != 1)
      return api_error(400, "'top_p' other than 1 is not supported yet",
                       "top_p_unsupported");
  }
  // vLLM's extension: a tenant's salt, so that its prompts share KV only
  // with prompts of the same salt (docs/wire.md, "extra_keys").
  if (auto c = doc.find("cache_salt"); c != doc.end() && !c->is_null()) {
    if (!c->is_string() || c->get_ref<const std::string&>().empty() ||
        c->get_ref<const std::string&>().size() > max_cache_salt_bytes)
      return api_error(400,
                       "'cache_salt' must be a non-empty string of at most " +
                         std::to_string(max_cache_salt_bytes) + " bytes",
                       "invalid_cache_salt");
    out.params.cache_salt = c->get<std::string>();
  }
  return std::nullopt;
}

// `stop`: a string or up to 4 of them, as OpenAI's API has it.
std::optional<runtime::http_response> parse_stop(const json& doc, bool text,
                                                 completion_request& out) {
  auto s = doc.find("stop");
  if (s == doc.end() || s->is_null())
    return std::nullopt;
  json list = s->is_string() ? json::array({*s}) : *s;
  if (!list.is_array() || list.size() > 4)
    return api_error(400, "'stop' must be a string or up to 4 strings",
                     "invalid_stop");
  for (const auto& one : list) {
    if (!one.is_string() || one.get_ref<const std::string&>().empty() ||
        one.get_ref<const std::string&>().size() > 1024)
      return api_error(400,
                       "each 'stop' string must be non-empty and at most "
                       "1024 bytes",
                       "invalid_stop");
    out.stop.push_back(one.get<std::string>());
  }
  if (!text && !out.stop.empty())
    return api_error(400, "'stop' strings need a tokenizer (--tokenizer DIR)",
                     "stop_unsupported");
  return std::nullopt;
}

} // namespace

runtime::http_response api_error(int status, const std::string& message,
                                 const std::string& code,
                                 const std::string& type) {
  runtime::global_metrics()
    .get_counter("outrider_http_errors_total",
                 "Frontend requests answered with an error", {{"code", code}})
    .inc();
  return json_response(status, {{"error",
                                 {{"message", message},
                                  {"type", type},
                                  {"param", nullptr},
                                  {"code", code}}}});
}

std::optional<runtime::http_response>
parse_completion(const std::string& body,
                 const std::vector<std::string>& models, const api_limits& lim,
                 bool text, completion_request& out) {
  // Checked before parsing: no hostile nesting reaches the parser.
  if (!runtime::json_depth_within(body, lim.json_depth))
    return api_error(400,
                     "the body nests deeper than " +
                       std::to_string(lim.json_depth) + " levels",
                     "too_deep");
  auto doc = json::parse(body, nullptr, false);
  if (doc.is_discarded())
    return api_error(400, "the body is not valid JSON (or not UTF-8)",
                     "invalid_json");
  if (!doc.is_object())
    return api_error(400, "the body must be a JSON object", "invalid_body");
  if (auto m = doc.find("model"); m != doc.end()) {
    if (!m->is_string())
      return api_error(400, "'model' must be a string", "invalid_type");
    out.model = m->get<std::string>();
    if (!models.empty() &&
        std::find(models.begin(), models.end(), out.model) == models.end())
      return api_error(404,
                       "the model '" +
                         (out.model.size() > 128
                            ? out.model.substr(0, 128) + "..."
                            : out.model) +
                         "' does not exist",
                       "model_not_found");
  } else if (!models.empty()) {
    out.model = models.front();
  }
  if (auto bad = parse_prompt(doc, lim, text, out))
    return bad;
  if (auto bad = parse_sampling(doc, out))
    return bad;
  if (auto bad = parse_stop(doc, text, out))
    return bad;
  out.params.model = out.model;
  return std::nullopt;
}

runtime::http_response shed_response(shed_reason reason,
                                     const std::string& why) {
  auto r = api_error(429, why, "rate_limit_exceeded", "requests");
  r.headers["Retry-After"] = "1";
  r.headers["x-outrider-dropped-reason"] = to_string(reason);
  return r;
}

runtime::http_response models_response(const std::vector<std::string>& models) {
  json data = json::array();
  for (const auto& m : models)
    data.push_back({{"id", m},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "outrider"}});
  return json_response(200, {{"object", "list"}, {"data", data}});
}

std::string ids_as_text(const std::vector<uint32_t>& tokens) {
  // (Appending in place: `" " + to_string` trips GCC 12's -Wrestrict at
  // -O3, a false positive.)
  std::string out;
  for (auto t : tokens) {
    if (!out.empty())
      out.push_back(' ');
    out.append(std::to_string(t));
  }
  return out;
}

runtime::http_response completion_response(const std::string& id,
                                           const std::string& model,
                                           const generate_outcome& o,
                                           const std::string& text) {
  return json_response(200,
                       {{"id", id},
                        {"object", "text_completion"},
                        {"created", now_seconds()},
                        {"model", model},
                        {"choices",
                         {{{"index", 0},
                           {"text", text},
                           {"token_ids", o.tokens},
                           {"logprobs", nullptr},
                           {"finish_reason", engine::to_string(o.finish)}}}},
                        {"usage", usage_of(o)}});
}

std::string completion_event(const std::string& id, int64_t created,
                             const std::string& model,
                             const std::vector<uint32_t>& tokens,
                             const std::string& text,
                             const generate_outcome* last) {
  json ev{{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices",
           {{{"index", 0},
             {"text", text},
             {"token_ids", tokens},
             {"logprobs", nullptr},
             {"finish_reason",
              last ? json(engine::to_string(last->finish)) : json(nullptr)}}}}};
  if (last)
    ev["usage"] = usage_of(*last);
  return "data: " + dump(ev) + "\n\n";
}

token_event_writer::token_event_writer(const std::string& id, int64_t created,
                                       const std::string& model) {
  prefix_ =
    "data: {\"id\":" + dump(json(id)) +
    ",\"object\":\"text_completion\",\"created\":" + std::to_string(created) +
    ",\"model\":" + dump(json(model)) +
    ",\"choices\":[{\"index\":0,\"text\":\"";
}

std::string token_event_writer::operator()(const std::vector<uint32_t>& tokens,
                                           const std::string* text) const {
  std::string out;
  out.reserve(prefix_.size() + 96 + tokens.size() * 22);
  out += prefix_;
  char num[16];
  auto append_ids = [&](char sep) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0)
        out.push_back(sep);
      auto [end, ec] = std::to_chars(num, num + sizeof(num), tokens[i]);
      out.append(num, end);
    }
  };
  if (text) {
    auto quoted = dump(json(*text)); // escaped, with its quotes
    out.append(quoted, 1, quoted.size() - 2);
  } else {
    append_ids(' '); // no tokenizer: the ids, space separated
  }
  out += "\",\"token_ids\":[";
  append_ids(',');
  out += "],\"logprobs\":null,\"finish_reason\":null}]}\n\n";
  return out;
}

std::string error_event(const std::string& message) {
  json err{{"error",
            {{"message", message},
             {"type", "server_error"},
             {"code", "generation_failed"}}}};
  return "data: " + dump(err) + "\n\n";
}

std::string completion_id() {
  static std::atomic<uint64_t> n{0};
  return "cmpl-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

} // namespace outrider::router
