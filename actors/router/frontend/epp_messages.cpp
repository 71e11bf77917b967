#include "actors/router/frontend/epp_messages.hpp"

#include <algorithm>
#include <cctype>

namespace outrider::router::epp {

namespace core = envoy::config::core::v3;

const std::vector<std::string>& reserved_headers() {
  static const std::vector<std::string> names{
    destination_key, prefiller_key, "x-gateway-inference-fairness-id",
    "x-gateway-inference-objective", "x-gateway-model-name-rewrite"};
  return names;
}

std::map<std::string, std::string> headers_of(const core::HeaderMap& m) {
  std::map<std::string, std::string> out;
  for (const auto& h : m.headers()) {
    std::string key = h.key();
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) {
      return static_cast<char>(std::tolower(c));
    });
    const std::string& value =
      h.raw_value().empty() ? h.value() : h.raw_value();
    auto [it, fresh] = out.try_emplace(key, value);
    if (!fresh)
      it->second += ", " + value;
  }
  return out;
}

namespace {

std::string trim(std::string s) {
  auto sp = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && sp(static_cast<unsigned char>(s.back())))
    s.pop_back();
  size_t i = 0;
  while (i < s.size() && sp(static_cast<unsigned char>(s[i])))
    ++i;
  return s.substr(i);
}

void split_into(const std::string& s, std::vector<std::string>& out) {
  size_t at = 0;
  while (at <= s.size()) {
    auto comma = s.find(',', at);
    auto part = trim(s.substr(at, comma == std::string::npos ? std::string::npos
                                                             : comma - at));
    if (!part.empty())
      out.push_back(std::move(part));
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
}

const google::protobuf::Value* lookup(const core::Metadata& m, const char* ns,
                                      const char* key) {
  // Keys as std::string: protobuf's maps look `const char*` up through a
  // transparent hash that crashed a ThreadSanitizer build here.
  auto n = m.filter_metadata().find(std::string{ns});
  if (n == m.filter_metadata().end())
    return nullptr;
  auto k = n->second.fields().find(std::string{key});
  return k == n->second.fields().end() ? nullptr : &k->second;
}

} // namespace

std::optional<std::vector<std::string>> subset_of(const core::Metadata& m) {
  const auto* v = lookup(m, subset_namespace, subset_key);
  if (!v)
    return std::nullopt;
  std::vector<std::string> out;
  if (v->has_string_value())
    split_into(v->string_value(), out);
  else if (v->has_list_value())
    for (const auto& e : v->list_value().values())
      if (e.has_string_value())
        split_into(e.string_value(), out);
  return out;
}

std::string served_of(const core::Metadata& m) {
  const auto* v = lookup(m, lb_namespace, served_key);
  return v && v->has_string_value() ? v->string_value() : std::string{};
}

pb::CommonResponse picked(const std::string& endpoint,
                          const std::string& prefiller) {
  pb::CommonResponse c;
  c.set_clear_route_cache(true);
  auto* mut = c.mutable_header_mutation();
  for (const auto& name : reserved_headers())
    if (name != destination_key && (prefiller.empty() || name != prefiller_key))
      mut->add_remove_headers(name);
  auto set = [&](const char* key, const std::string& value) {
    auto* h = mut->add_set_headers();
    h->mutable_header()->set_key(key);
    h->mutable_header()->set_raw_value(value);
    h->set_append_action(core::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
  };
  set(destination_key, endpoint);
  if (!prefiller.empty())
    set(prefiller_key, prefiller);
  return c;
}

google::protobuf::Struct picked_metadata(const std::string& endpoint) {
  google::protobuf::Struct s;
  auto& lb =
    *(*s.mutable_fields())[std::string{lb_namespace}].mutable_struct_value();
  (*lb.mutable_fields())[std::string{destination_key}].set_string_value(
    endpoint);
  return s;
}

pb::ProcessingResponse immediate(const runtime::http_response& r,
                                 const std::string& details) {
  pb::ProcessingResponse out;
  auto* im = out.mutable_immediate_response();
  im->mutable_status()->set_code(
    static_cast<envoy::type::v3::StatusCode>(r.status));
  im->set_body(r.body);
  im->set_details(details);
  auto add = [&](const std::string& k, const std::string& v) {
    auto* h = im->mutable_headers()->add_set_headers();
    h->mutable_header()->set_key(k);
    h->mutable_header()->set_raw_value(v);
    h->set_append_action(core::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
  };
  add("content-type", r.content_type);
  for (const auto& [k, v] : r.headers) {
    std::string key = k;
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) {
      return static_cast<char>(std::tolower(c));
    });
    add(key, v);
  }
  return out;
}

} // namespace outrider::router::epp
