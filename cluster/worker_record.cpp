// A worker record's JSON form (what discovery stores and reads back) and
// its validation: every field a router acts on is checked here, once.

#include "cluster/worker_record.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace outrider::cluster {

bool valid_worker_id(const std::string& id) {
  return !id.empty() && id.size() <= 200 && id != "." && id != ".." &&
         std::all_of(id.begin(), id.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                  c == '_' || c == '.' || c == ':';
         });
}

// host:port with a port in 1..65535 and a host of at most 253 characters.
bool valid_host_port(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon > 253 ||
      s.size() - colon - 1 > 5 || colon + 1 == s.size())
    return false;
  uint32_t port = 0;
  for (auto i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    port = port * 10 + static_cast<uint32_t>(s[i] - '0');
  }
  return port > 0 && port < 65536;
}

std::string to_json(const worker_record& r) {
  nlohmann::json j{
    {"worker_id", r.worker_id},
    {"instance_id", r.instance_id},
    {"model", r.model},
    {"role", engine::to_string(r.role)},
    {"relay_endpoint", r.relay_endpoint},
    {"engine_endpoint", r.engine_endpoint},
    {"protocol", r.protocol},
    {"kv_block_size", r.kv_block_size},
    {"total_kv_blocks", r.total_kv_blocks},
    {"data_parallel_size", r.data_parallel_size},
    {"version", r.version},
  };
  if (!r.bootstrap_endpoint.empty())
    j["bootstrap_endpoint"] = r.bootstrap_endpoint;
  if (!r.http_endpoint.empty())
    j["http_endpoint"] = r.http_endpoint;
  if (!r.lora_adapters.empty())
    j["lora_adapters"] = r.lora_adapters;
  return j.dump();
}

std::optional<worker_record> record_from_json(const std::string& text,
                                              std::string* why) {
  auto fail = [&](std::string msg) -> std::optional<worker_record> {
    if (why)
      *why = std::move(msg);
    return std::nullopt;
  };
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail("not a JSON object");
  worker_record r;
  auto str = [&](const char* key, std::string& out) {
    auto i = j.find(key);
    if (i == j.end() || !i->is_string())
      return false;
    out = i->get<std::string>();
    return true;
  };
  auto num = [&](const char* key, auto& out) {
    auto i = j.find(key);
    if (i == j.end() || !i->is_number_unsigned())
      return false;
    out = i->get<std::decay_t<decltype(out)>>();
    return true;
  };
  if (!str("worker_id", r.worker_id) || !valid_worker_id(r.worker_id))
    return fail("bad or missing worker_id");
  if (!str("instance_id", r.instance_id) || r.instance_id.empty())
    return fail("bad or missing instance_id");
  std::string role;
  if (!str("model", r.model) || !str("role", role) ||
      !str("relay_endpoint", r.relay_endpoint) ||
      !str("engine_endpoint", r.engine_endpoint) ||
      !str("protocol", r.protocol) || !str("version", r.version))
    return fail("a string field is missing or not a string");
  if (j.contains("bootstrap_endpoint") &&
      !str("bootstrap_endpoint", r.bootstrap_endpoint))
    return fail("bootstrap_endpoint is not a string");
  if (!r.bootstrap_endpoint.empty() && !valid_host_port(r.bootstrap_endpoint))
    return fail("bootstrap_endpoint is not host:port");
  if (j.contains("http_endpoint") && !str("http_endpoint", r.http_endpoint))
    return fail("http_endpoint is not a string");
  if (!r.http_endpoint.empty() && !valid_host_port(r.http_endpoint))
    return fail("http_endpoint is not host:port");
  if (auto a = j.find("lora_adapters"); a != j.end()) {
    if (!a->is_array() || a->size() > max_lora_adapters)
      return fail("lora_adapters is not a list of at most " +
                  std::to_string(max_lora_adapters) + " names");
    for (const auto& n : *a) {
      if (!n.is_string() || n.get_ref<const std::string&>().empty() ||
          n.get_ref<const std::string&>().size() > max_lora_name_bytes)
        return fail("an adapter name is not a string of 1 to " +
                    std::to_string(max_lora_name_bytes) + " bytes");
      r.lora_adapters.push_back(n.get<std::string>());
    }
  }
  if (auto known = engine::worker_role_of(role))
    r.role = *known;
  else
    return fail("unknown role '" + role + "'");
  if (!num("kv_block_size", r.kv_block_size) || r.kv_block_size == 0 ||
      !num("total_kv_blocks", r.total_kv_blocks) ||
      !num("data_parallel_size", r.data_parallel_size) ||
      r.data_parallel_size == 0)
    return fail("a numeric field is missing, zero or not an unsigned integer");
  if (r.data_parallel_size > max_data_parallel_size)
    return fail("data_parallel_size " + std::to_string(r.data_parallel_size) +
                " is over " + std::to_string(max_data_parallel_size));
  return r;
}

} // namespace outrider::cluster
