#include "cluster/engine/kv_sources_http.hpp"

#include <charconv>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/http/client.hpp"

namespace outrider::engine {

namespace {

using json = nlohmann::json;

constexpr size_t max_sources = 1024;
constexpr int max_rank = 65535;

caf::error malformed(std::string what) {
  return make_error(errc::engine_malformed,
                    "GET /kv_event_sources: " + std::move(what));
}

std::optional<int> rank_of(const std::string& key) {
  int r = -1;
  auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), r);
  if (ec != std::errc{} || end != key.data() + key.size() || r < 0 ||
      r > max_rank)
    return std::nullopt;
  return r;
}

std::string text(const json& src, const char* key) {
  auto it = src.find(key);
  return it != src.end() && it->is_string() ? it->get<std::string>()
                                            : std::string{};
}

caf::error take(const json& src, std::optional<int> key_rank,
                const std::string& host, std::vector<kv_source>& out,
                std::set<int>& seen) {
  if (!src.is_object())
    return malformed("a source is not an object");
  kv_source k;
  k.rank = key_rank.value_or(0);
  if (auto r = src.find("data_parallel_rank");
      r != src.end() && !r->is_null()) {
    if (!r->is_number_unsigned() || r->get<uint64_t>() > max_rank)
      return malformed("data_parallel_rank is not a rank");
    k.rank = static_cast<int>(r->get<uint64_t>());
  }
  auto endpoint = text(src, "endpoint");
  if (endpoint.rfind("tcp://", 0) != 0)
    return malformed("source of rank " + std::to_string(k.rank) +
                     " has no tcp:// endpoint");
  k.endpoint = connectable(endpoint, host);
  if (auto replay = text(src, "replay_endpoint"); !replay.empty())
    k.replay_endpoint = connectable(replay, host);
  k.topic = text(src, "topic");
  if (!seen.insert(k.rank).second)
    return malformed("rank " + std::to_string(k.rank) + " named twice");
  out.push_back(std::move(k));
  return {};
}

// Delegates everything; KV sources from HTTP where gRPC gives none.
class http_discovery final : public engine_adapter {
 public:
  http_discovery(std::unique_ptr<engine_adapter> inner, std::string host_port)
    : inner_(std::move(inner)), host_port_(std::move(host_port)) {}

  caf::error server_info(engine_info& out) override {
    return inner_->server_info(out);
  }

  caf::error kv_sources(std::vector<kv_source>& out) override {
    std::vector<kv_source> grpc;
    auto err = inner_->kv_sources(grpc);
    if (!err && !grpc.empty()) {
      out = std::move(grpc);
      return {};
    }
    if (err && !(err == errc::engine_refused))
      return err;
    return fetch_kv_sources_http(host_port_, out);
  }

  caf::error abort(const std::string& id) override { return inner_->abort(id); }
  caf::error shutdown() override { return inner_->shutdown(); }

 private:
  std::unique_ptr<engine_adapter> inner_;
  std::string host_port_;
};

} // namespace

std::unique_ptr<engine_adapter>
with_http_kv_discovery(std::unique_ptr<engine_adapter> inner,
                       std::string host_port) {
  return std::make_unique<http_discovery>(std::move(inner),
                                          std::move(host_port));
}

caf::error parse_kv_sources_json(const std::string& body,
                                 const std::string& engine_host,
                                 std::vector<kv_source>& out) {
  auto doc = json::parse(body, nullptr, false);
  if (doc.is_discarded())
    return malformed("the answer is not JSON");
  std::vector<kv_source> got;
  std::set<int> seen;
  auto each = [&](const json& list) -> caf::error {
    if (list.size() > max_sources)
      return malformed("more than 1024 sources");
    for (const auto& s : list)
      if (auto err = take(s, std::nullopt, engine_host, got, seen))
        return err;
    return {};
  };
  caf::error err;
  if (doc.is_array()) {
    err = each(doc);
  } else if (doc.is_object() && doc.contains("sources")) {
    if (!doc["sources"].is_array())
      return malformed("sources is not a list");
    err = each(doc["sources"]);
  } else if (doc.is_object()) {
    if (doc.size() > max_sources)
      return malformed("more than 1024 sources");
    for (const auto& [key, s] : doc.items()) {
      auto r = rank_of(key);
      if (!r)
        return malformed("key '" + key.substr(0, 32) + "' is not a rank");
      if ((err = take(s, r, engine_host, got, seen)))
        break;
    }
  } else {
    return malformed("neither a list nor an object");
  }
  if (err)
    return err;
  out = std::move(got);
  return {};
}

caf::error fetch_kv_sources_http(const std::string& host_port,
                                 std::vector<kv_source>& out) {
  auto colon = host_port.rfind(':');
  int port = 0;
  if (colon != std::string::npos)
    std::from_chars(host_port.data() + colon + 1,
                    host_port.data() + host_port.size(), port);
  if (colon == std::string::npos || port <= 0 || port > 65535)
    return make_error(errc::engine_refused,
                      "not host:port: '" + host_port + "'");
  auto host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto got = runtime::http_get(host, static_cast<uint16_t>(port),
                               "/kv_event_sources", std::chrono::seconds{5});
  if (!got.error.empty())
    return make_error(errc::engine_unreachable, "GET /kv_event_sources on " +
                                                  host_port + ": " + got.error);
  if (got.status != 200)
    return make_error(errc::engine_refused, "GET /kv_event_sources on " +
                                              host_port + ": HTTP " +
                                              std::to_string(got.status));
  return parse_kv_sources_json(got.body, host, out);
}

} // namespace outrider::engine
