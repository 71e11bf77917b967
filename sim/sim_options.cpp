#include "sim/sim_options.hpp"

#include <charconv>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "runtime/options.hpp"

namespace outrider::sim {

namespace {

struct flag {
  std::string help;
  std::function<std::string(sim_config&, const std::string&)> apply;
  bool takes_value = true;
};

// A numeric flag stored where `field` points (in the config or its engine
// part), checked against [min, max].
template <class T, class Field>
std::function<std::string(sim_config&, const std::string&)>
numeric(std::string name, Field field, T min, T max) {
  return [=](sim_config& c, const std::string& v) -> std::string {
    T x{};
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc{} || p != v.data() + v.size() || x < min || x > max)
      return "--" + name + " must be a number between " + std::to_string(min) +
             " and " + std::to_string(max) + ", got '" + v + "'";
    field(c) = x;
    return {};
  };
}

template <class T>
auto number(std::string name, T sim_config::*member, T min, T max) {
  return numeric<T>(
    std::move(name), [member](sim_config& c) -> T& { return c.*member; }, min,
    max);
}

template <class T>
auto engine_number(std::string name, T engine_config::*member, T min, T max) {
  return numeric<T>(
    std::move(name), [member](sim_config& c) -> T& { return c.engine.*member; },
    min, max);
}

std::string parse_kv_events(sim_config& c, const std::string& text) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return "--kv-events-config must be a JSON object";
  try {
    for (auto& [k, v] : doc.items()) {
      if (k == "enable_kv_cache_events")
        c.kv_events = v.get<bool>();
      else if (k == "publisher") {
        auto p = v.get<std::string>();
        if (p != "zmq" && p != "null")
          return "--kv-events-config: publisher must be \"zmq\", got \"" + p +
                 "\"";
        if (p == "null")
          c.kv_events = false;
      } else if (k == "endpoint")
        c.kv_endpoint = v.get<std::string>();
      else if (k == "replay_endpoint")
        c.kv_replay_endpoint = v.is_null() ? "" : v.get<std::string>();
      else if (k == "topic")
        c.kv_topic = v.get<std::string>();
      else if (k == "buffer_steps")
        c.kv_buffer_steps = v.get<size_t>();
      else if (k == "hwm")
        c.kv_hwm = v.get<int>();
      else if (k == "max_queue_size")
        c.kv_max_queue_size = v.get<int>();
      else
        return "--kv-events-config: unknown field '" + k + "'";
    }
  } catch (const nlohmann::json::exception& e) {
    return std::string{"--kv-events-config: wrong type: "} + e.what();
  }
  if (c.kv_buffer_steps == 0)
    return "--kv-events-config: buffer_steps must be at least 1";
  return {};
}

std::map<std::string, flag> flags() {
  using c_t = sim_config;
  std::map<std::string, flag> f;
  f["host"] = {"address to listen on (default 127.0.0.1)",
               [](c_t& c, const std::string& v) {
                 c.host = v;
                 return std::string{};
               }};
  f["grpc-port"] = {"gRPC port: health, vLLM and OpenEngine (default 50051)",
                    number<int>("grpc-port", &c_t::grpc_port, 1, 65535)};
  f["debug-port"] = {"HTTP port for ground truth and /reset_prefix_cache "
                     "(default 0: off)",
                     number<int>("debug-port", &c_t::debug_port, 0, 65535)};
  f["served-model-name"] = {"model name (default sim-model)",
                            [](c_t& c, const std::string& v) {
                              c.model = v;
                              return std::string{};
                            }};
  f["data-parallel-size"] = {
    "independent ranks (default 1)",
    number<int>("data-parallel-size", &c_t::data_parallel_size, 1, 64)};
  f["block-size"] = {
    "tokens per KV block (default 64)",
    engine_number<uint32_t>("block-size", &engine_config::block_size, 1, 4096)};
  f["num-gpu-blocks-override"] = {
    "KV blocks per rank (default 16384)",
    engine_number<uint32_t>("num-gpu-blocks-override",
                            &engine_config::num_blocks, 1, 100000000)};
  f["max-num-seqs"] = {"running requests per rank (default 256)",
                       engine_number<uint32_t>("max-num-seqs",
                                               &engine_config::max_num_seqs, 1,
                                               100000)};
  f["max-num-batched-tokens"] = {
    "token budget per step (default 8192)",
    engine_number<uint32_t>("max-num-batched-tokens",
                            &engine_config::max_batched_tokens, 1, 10000000)};
  f["max-model-len"] = {"context length (default 131072)",
                        engine_number<uint32_t>("max-model-len",
                                                &engine_config::max_model_len,
                                                1, 100000000)};
  f["speedup"] = {"divide every modelled step time by this (default 1)",
                  number<double>("speedup", &c_t::speedup, 0.001, 1e9)};
  f["no-sleep"] = {"run steps back to back, no modelled time",
                   [](c_t& c, const std::string&) {
                     c.no_sleep = true;
                     return std::string{};
                   },
                   false};
  f["startup-delay"] = {"NOT_SERVING for this long first (e.g. 2s)",
                        [](c_t& c, const std::string& v) {
                          auto d = runtime::parse_duration(v);
                          if (!d)
                            return "--startup-delay must be a duration such "
                                   "as 500ms or 2s, got '" +
                                   v + "'";
                          c.startup_delay_ms = d->count();
                          return std::string{};
                        }};
  f["drain-timeout"] = {"on SIGTERM, wait this long for requests (default 5s)",
                        [](c_t& c, const std::string& v) {
                          auto d = runtime::parse_duration(v);
                          if (!d)
                            return "--drain-timeout must be a duration, got '" +
                                   v + "'";
                          c.drain_timeout_ms = d->count();
                          return std::string{};
                        }};
  f["kv-events-config"] = {"vLLM's KV event JSON, e.g. "
                           "'{\"enable_kv_cache_events\":true,\"publisher\":"
                           "\"zmq\",\"endpoint\":\"tcp://*:5557\","
                           "\"replay_endpoint\":\"tcp://*:5600\"}'",
                           parse_kv_events};
  f["kv-event-encoding"] = {"map (current engines) or array (older)",
                            [](c_t& c, const std::string& v) {
                              if (v == "map")
                                c.kv_encoding = event_encoding::map;
                              else if (v == "array")
                                c.kv_encoding = event_encoding::array;
                              else
                                return "--kv-event-encoding must be map or "
                                       "array, got '" +
                                       v + "'";
                              return std::string{};
                            }};
  f["kv-hash-format"] = {"uint64 (vLLM), int64 (SGLang) or bytes",
                         [](c_t& c, const std::string& v) {
                           if (v == "uint64")
                             c.kv_hashes = hash_format::uint64;
                           else if (v == "int64")
                             c.kv_hashes = hash_format::int64;
                           else if (v == "bytes")
                             c.kv_hashes = hash_format::bytes;
                           else
                             return "--kv-hash-format must be uint64, int64 "
                                    "or bytes, got '" +
                                    v + "'";
                           return std::string{};
                         }};
  f["replay-topic-frame"] = {"true: replay replies carry the topic frame "
                             "(current vLLM); false: older vLLM / SGLang",
                             [](c_t& c, const std::string& v) {
                               if (v != "true" && v != "false")
                                 return "--replay-topic-frame must be true or "
                                        "false, got '" +
                                        v + "'";
                               c.replay_topic_frame = v == "true";
                               return std::string{};
                             }};
  f["disaggregation-mode"] = {
    "aggregated (default), prefill or decode",
    [](c_t& c, const std::string& v) {
      if (v == "aggregated")
        c.role = engine_role::aggregated;
      else if (v == "prefill")
        c.role = engine_role::prefill;
      else if (v == "decode")
        c.role = engine_role::decode;
      else
        return "--disaggregation-mode must be aggregated, prefill or decode, "
               "got '" +
               v + "'";
      return std::string{};
    }};
  f["kv-transfer-ms-per-block"] = {
    "simulated KV transfer time per block on a decode engine (default 0.05)",
    number<double>("kv-transfer-ms-per-block", &c_t::transfer_ms_per_block, 0,
                   1e6)};
  return f;
}

} // namespace

std::string sim_help_text() {
  std::string out = "outrider-sim: a simulated vLLM engine speaking the real "
                    "protocols (grpc.health.v1,\nvllm.Inference/Control, "
                    "openengine.v1.Inference/Control, ZMQ KV events).\n\n"
                    "Options:\n";
  for (const auto& [name, f] : flags())
    out += "  --" + name + (f.takes_value ? " <value>" : "") + "\n      " +
           f.help + "\n";
  return out;
}

sim_parse_result parse_sim_options(const std::vector<std::string>& args) {
  sim_parse_result out;
  auto table = flags();
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "-h" || a == "--help") {
      out.what = sim_parse_result::help;
      out.message = sim_help_text();
      return out;
    }
    if (a.rfind("--", 0) != 0) {
      out.what = sim_parse_result::error;
      out.message = "unexpected argument '" + a + "'";
      return out;
    }
    auto eq = a.find('=');
    auto name =
      a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    auto it = table.find(name);
    if (it == table.end()) {
      out.what = sim_parse_result::error;
      out.message = "unknown flag '--" + name + "'";
      return out;
    }
    std::string value;
    if (eq != std::string::npos)
      value = a.substr(eq + 1);
    else if (it->second.takes_value) {
      if (i + 1 >= args.size()) {
        out.what = sim_parse_result::error;
        out.message = "--" + name + " needs a value";
        return out;
      }
      value = args[++i];
    }
    if (auto err = it->second.apply(out.cfg, value); !err.empty()) {
      out.what = sim_parse_result::error;
      out.message = err;
      return out;
    }
  }
  return out;
}

} // namespace outrider::sim
