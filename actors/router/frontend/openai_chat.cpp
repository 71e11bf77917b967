#include "actors/router/frontend/openai_chat.hpp"

#include <atomic>
#include <unistd.h>

#include "runtime/text_checks.hpp"

namespace outrider::router {

namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t max_messages = 4096;
constexpr size_t max_object_members = 1024;

std::string dump(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

runtime::http_response json_200(const ojson& body) {
  runtime::http_response r;
  r.status = 200;
  r.content_type = "application/json";
  r.body = dump(body) + "\n";
  return r;
}

ojson usage_of(const generate_outcome& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.tokens.size()},
          {"total_tokens", o.prompt_tokens + o.tokens.size()},
          {"prompt_tokens_details", {{"cached_tokens", o.cached_tokens}}}};
}

// An image part's URL and the client's identifier for it (vLLM's `uuid`
// beside `image_url`); an error message when it is malformed.
std::optional<std::string> image_of(const ojson& part,
                                    generate_params::media_item& out) {
  auto img = part.find("image_url");
  if (img == part.end() || !img->is_object())
    return "an image_url part needs an object {\"url\": \"...\"}";
  auto u = img->find("url");
  if (u == img->end() || !u->is_string() ||
      u->get_ref<const std::string&>().empty())
    return "an image_url part needs a url";
  out.url = u->get<std::string>();
  if (auto id = part.find("uuid"); id != part.end() && !id->is_null()) {
    if (!id->is_string() || id->get_ref<const std::string&>().empty() ||
        id->get_ref<const std::string&>().size() >
          generate_params::max_uuid_bytes)
      return "an image part's uuid must be a non-empty string of at most " +
             std::to_string(generate_params::max_uuid_bytes) + " bytes";
    out.uuid = id->get<std::string>();
  }
  return std::nullopt;
}

// A message's content as the template sees it: a string (parts joined by
// newlines, as vLLM does; an image part as `placeholder`, its item added to
// `media`), or null; an error message otherwise.
std::optional<std::string>
content_of(ojson& m, const std::string& placeholder,
           std::vector<generate_params::media_item>& media) {
  auto c = m.find("content");
  if (c == m.end() || c->is_null() || c->is_string())
    return std::nullopt;
  if (!c->is_array())
    return "'content' must be a string or a list of parts";
  std::string text;
  bool first = true;
  for (const auto& part : *c) {
    auto type = part.is_object() ? part.value("type", "") : "";
    std::string piece;
    if (type == "text" && part.contains("text") && part["text"].is_string()) {
      piece = part["text"].get<std::string>();
    } else if (type == "image_url") {
      if (media.size() >= generate_params::max_media)
        return "more than " + std::to_string(generate_params::max_media) +
               " media items";
      generate_params::media_item item;
      if (auto bad = image_of(part, item))
        return bad;
      media.push_back(std::move(item));
      piece = placeholder;
    } else {
      return "only text and image_url content parts are supported "
             "({\"type\": \"text\", \"text\": \"...\"}, "
             "{\"type\": \"image_url\", \"image_url\": {\"url\": \"...\"}})";
    }
    text += (first ? "" : "\n") + piece;
    first = false;
  }
  *c = text;
  return std::nullopt;
}

std::optional<runtime::http_response>
parse_messages(ojson& doc, const std::string& placeholder,
               std::vector<generate_params::media_item>& media) {
  auto ms = doc.find("messages");
  if (ms == doc.end() || !ms->is_array() || ms->empty())
    return api_error(400, "'messages' must be a non-empty list",
                     "invalid_messages");
  if (ms->size() > max_messages)
    return api_error(400,
                     "more than " + std::to_string(max_messages) + " messages",
                     "invalid_messages");
  for (auto& m : *ms) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return api_error(400, "every message needs a 'role' string",
                       "invalid_messages");
    auto role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" &&
        role != "tool" && role != "developer")
      return api_error(400, "unknown role '" + role + "'", "invalid_messages");
    if (auto bad = content_of(m, placeholder, media))
      return api_error(400, *bad, "invalid_messages");
  }
  return std::nullopt;
}

} // namespace

std::optional<runtime::http_response>
parse_chat(const std::string& body, const std::vector<std::string>& models,
           const api_limits& lim, completion_request& out) {
  if (!runtime::json_depth_within(body, lim.json_depth))
    return api_error(400,
                     "the body nests deeper than " +
                       std::to_string(lim.json_depth) + " levels",
                     "too_deep");
  // Parsed insertion-ordered (the template sees keys as sent), so each key
  // is looked up linearly: members are capped first.
  if (!runtime::json_object_members_within(body, max_object_members))
    return api_error(400,
                     "an object in the body has more than " +
                       std::to_string(max_object_members) + " members",
                     "too_many_members");
  auto doc = ojson::parse(body, nullptr, false);
  if (doc.is_discarded())
    return api_error(400, "the body is not valid JSON (or not UTF-8)",
                     "invalid_json");
  if (!doc.is_object())
    return api_error(400, "the body must be a JSON object", "invalid_body");
  std::vector<generate_params::media_item> media;
  if (auto bad = parse_messages(doc, lim.media_placeholder, media))
    return bad;
  // The common fields, as /v1/completions checks them (a stand-in prompt:
  // the real one is the rendered messages).
  auto common = doc;
  common.erase("messages");
  common.erase("tools");
  common["prompt"] = "chat";
  if (common.contains("max_completion_tokens") &&
      !common.contains("max_tokens"))
    common["max_tokens"] = common["max_completion_tokens"];
  if (auto bad = parse_completion(dump(common), models, lim, true, out))
    return bad;
  out.prompt_text.reset();
  out.chat = true;
  out.params.media = std::move(media); // offsets once tokenized
  ojson vars{{"messages", doc["messages"]}, {"add_generation_prompt", true}};
  if (auto t = doc.find("tools"); t != doc.end() && !t->is_null()) {
    if (!t->is_array())
      return api_error(400, "'tools' must be a list", "invalid_tools");
    vars["tools"] = *t;
  }
  if (auto k = doc.find("chat_template_kwargs"); k != doc.end()) {
    if (!k->is_object())
      return api_error(400, "'chat_template_kwargs' must be an object",
                       "invalid_type");
    for (const auto& [key, v] : k->items())
      if (key != "messages" && key != "tools")
        vars[key] = v;
  }
  out.chat_vars = dump(vars);
  return std::nullopt;
}

void place_media(
  const std::string& text, const std::string& placeholder,
  const std::vector<uint32_t>& ids,
  const std::function<std::vector<uint32_t>(std::string_view)>& encode,
  std::vector<generate_params::media_item>& media) {
  size_t from = 0;
  for (auto& m : media) {
    auto at =
      placeholder.empty() ? std::string::npos : text.find(placeholder, from);
    if (at == std::string::npos) {
      m.offset = 0;
      continue;
    }
    auto before = encode(std::string_view{text}.substr(0, at));
    size_t same = 0;
    while (same < before.size() && same < ids.size() &&
           before[same] == ids[same])
      ++same;
    m.offset = same;
    from = at + placeholder.size();
  }
}

runtime::http_response chat_response(const std::string& id,
                                     const std::string& model,
                                     const generate_outcome& o,
                                     const std::string& text) {
  return json_200({{"id", id},
                   {"object", "chat.completion"},
                   {"created", now_seconds()},
                   {"model", model},
                   {"choices",
                    {{{"index", 0},
                      {"message", {{"role", "assistant"}, {"content", text}}},
                      {"logprobs", nullptr},
                      {"finish_reason", engine::to_string(o.finish)}}}},
                   {"usage", usage_of(o)}});
}

chat_chunk_writer::chat_chunk_writer(const std::string& id, int64_t created,
                                     const std::string& model)
  : id_(id), model_(model), created_(created) {
  prefix_ = "data: {\"id\":" + dump(ojson(id)) +
            ",\"object\":\"chat.completion.chunk\",\"created\":" +
            std::to_string(created) + ",\"model\":" + dump(ojson(model)) +
            ",\"choices\":[{\"index\":0,\"delta\":";
}

std::string chat_chunk_writer::role() const {
  return prefix_ +
         "{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
         "\"finish_reason\":null}]}\n\n";
}

std::string chat_chunk_writer::text(const std::string& t) const {
  return prefix_ + "{\"content\":" + dump(ojson(t)) +
         "},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
}

std::string chat_chunk_writer::last(const std::string& rest,
                                    const generate_outcome& o) const {
  ojson ev{
    {"id", id_},
    {"object", "chat.completion.chunk"},
    {"created", created_},
    {"model", model_},
    {"choices",
     {{{"index", 0},
       {"delta", rest.empty() ? ojson::object() : ojson{{"content", rest}}},
       {"logprobs", nullptr},
       {"finish_reason", engine::to_string(o.finish)}}}},
    {"usage", usage_of(o)}};
  return "data: " + dump(ev) + "\n\n";
}

std::string chat_completion_id() {
  static std::atomic<uint64_t> n{0};
  return "chatcmpl-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

} // namespace outrider::router
