#include "actors/router/frontend/flow_identity.hpp"

#include <charconv>
#include <cstdio>
#include <openssl/sha.h>

#include <nlohmann/json.hpp>

namespace outrider::router {

namespace {

constexpr int min_band = -100;
constexpr int max_band = 100;

std::optional<int> band_of(const std::string& text) {
  int v = 0;
  auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc{} || p != end || text.empty() || v < min_band ||
      v > max_band)
    return std::nullopt;
  return v;
}

// Printable ASCII only, at most 64 bytes: it becomes a metric label.
std::string clean_flow(const std::string& id) {
  std::string out;
  for (char c : id.substr(0, 64))
    out += c > 0x20 && c < 0x7f && c != '"' && c != '\\' ? c : '_';
  return out;
}

} // namespace

std::optional<std::map<std::string, int>>
parse_objectives(const std::string& json, std::string* why) {
  auto doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    *why = "--flow-objectives is not a JSON object";
    return std::nullopt;
  }
  std::map<std::string, int> out;
  for (const auto& [name, v] : doc.items()) {
    if (!v.is_number_integer() || v.get<int64_t>() < min_band ||
        v.get<int64_t>() > max_band) {
      *why = "--flow-objectives: '" + name +
             "' needs an integer priority in -100..100";
      return std::nullopt;
    }
    out[name] = v.get<int>();
  }
  return out;
}

std::optional<flow_identity>
flow_identity_of(const std::map<std::string, std::string>& headers,
                 const std::map<std::string, int>& objectives,
                 const std::string& session_header, std::string* why) {
  flow_identity id;
  id.flow = "default";
  if (auto a = headers.find("authorization");
      a != headers.end() && a->second.rfind("Bearer ", 0) == 0) {
    // A SHA-256 prefix: the flow names the key in metrics and logs
    // without revealing it.
    unsigned char digest[SHA256_DIGEST_LENGTH];
    auto key = a->second.substr(7);
    SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(),
           digest);
    char hex[17];
    for (int i = 0; i < 8; ++i)
      std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    id.flow = std::string{"key:"} + hex;
  } else if (auto f = headers.find(fairness_id_header);
             f != headers.end() && !f->second.empty()) {
    id.flow = clean_flow(f->second);
  }
  if (auto p = headers.find(priority_header); p != headers.end()) {
    auto band = band_of(p->second);
    if (!band) {
      *why = std::string{priority_header} +
             " must be an integer in -100..100, not '" +
             p->second.substr(0, 32) + "'";
      return std::nullopt;
    }
    id.band = *band;
  } else if (auto o = headers.find(objective_header); o != headers.end()) {
    if (auto known = objectives.find(o->second); known != objectives.end())
      id.band = known->second;
  }
  if (auto sid = headers.find(session_header); sid != headers.end())
    id.session = sid->second.substr(0, 256);
  return id;
}

} // namespace outrider::router
