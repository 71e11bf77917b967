#include "runtime/options.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

extern char** environ;

namespace outrider::runtime {

namespace {

using ot = option_type;

option_spec make(std::string key, ot type, std::string def, std::string help,
                 std::string example, std::vector<std::string> choices = {},
                 int64_t min = 0, int64_t max = 0, bool hidden = false) {
  return option_spec{std::move(key),
                     type,
                     std::move(def),
                     std::move(help),
                     std::move(example),
                     std::move(choices),
                     min,
                     max,
                     hidden};
}

std::string default_discovery_dir() {
  const char* tmp = std::getenv("TMPDIR");
  return std::string{tmp && *tmp ? tmp : "/tmp"} + "/outrider/discovery";
}

std::vector<option_spec> make_specs() {
  return {
    make("role", ot::string, "", "which part to run", "--role sidecar",
         {"sidecar", "router", "all"}),
    make("config", ot::string, "", "YAML file with any of these keys",
         "--config cluster.yaml"),
    make("system-host", ot::string, "127.0.0.1",
         "address of the status server (/live, /ready, /health, /metrics)",
         "--system-host 0.0.0.0"),
    make("system-port", ot::integer, "9090",
         "port of the status server (0: any)", "--system-port 9091", {}, 0,
         65535),
    make("log-level", ot::string, "info", "least severe log level printed",
         "--log-level debug",
         {"trace", "debug", "info", "warn", "error", "off"}),
    make("log-format", ot::string, "text", "log line format",
         "--log-format json", {"text", "json"}),
    make("scheduler-threads", ot::integer, "0",
         "actor scheduler threads (0: one per core)", "--scheduler-threads 2",
         {}, 0, 256),
    make("shutdown-timeout", ot::duration, "5s",
         "after SIGTERM, exit anyway once this has passed",
         "--shutdown-timeout 2s"),
    make("supervisor-initial-backoff", ot::duration, "100ms",
         "first delay before restarting a failed actor",
         "--supervisor-initial-backoff 50ms"),
    make("supervisor-max-backoff", ot::duration, "10s",
         "the restart delay doubles up to this",
         "--supervisor-max-backoff 30s"),
    make("supervisor-stable-period", ot::duration, "30s",
         "an actor up this long gets the initial delay again",
         "--supervisor-stable-period 1m"),
    make("supervisor-max-restarts", ot::integer, "5",
         "restarts within the window before the supervisor gives up",
         "--supervisor-max-restarts 10", {}, 1, 1000),
    make("supervisor-restart-window", ot::duration, "60s",
         "window for --supervisor-max-restarts",
         "--supervisor-restart-window 5m"),
    make("engine-endpoint", ot::string, "127.0.0.1:50051",
         "the engine's gRPC address (sidecar)",
         "--engine-endpoint 127.0.0.1:50051"),
    make("engine-protocol", ot::string, "auto",
         "the engine's gRPC dialect (auto: OpenEngine, else vLLM)",
         "--engine-protocol vllm", {"auto", "openengine", "vllm"}),
    make("on-kv-gap", ot::string, "reset",
         "when the engine's replay cannot cover a gap: reset the rank, or "
         "also shut the engine down (vLLM) so it restarts clean",
         "--on-kv-gap shutdown-engine", {"reset", "shutdown-engine"}),
    make("data-dir", ot::string, "./outrider-data",
         "sidecar: where the KV index lives (RocksDB)",
         "--data-dir /var/lib/outrider"),
    make("discovery", ot::string, "file", "where workers are registered",
         "--discovery file", {"file", "memory"}),
    make("discovery-dir", ot::string, default_discovery_dir(),
         "the file backend's directory of worker records",
         "--discovery-dir /run/outrider/discovery"),
    make("discovery-ttl", ot::duration, "10s",
         "a record not refreshed for this long is stale",
         "--discovery-ttl 30s"),
    make("worker-id", ot::string, "",
         "this worker's name in discovery (default: host-enginePort)",
         "--worker-id gpu0-vllm"),
    make("relay-host", ot::string, "127.0.0.1",
         "the sidecar's OpenEngine relay for routers: address",
         "--relay-host 10.0.0.5"),
    make("relay-port", ot::integer, "9100",
         "the sidecar's OpenEngine relay for routers: port",
         "--relay-port 9101", {}, 1, 65535),
    make("engine-startup-deadline", ot::duration, "10m",
         "sidecar: give up if the engine is not SERVING by then",
         "--engine-startup-deadline 15m"),
    make("http-host", ot::string, "127.0.0.1",
         "router: address of the OpenAI-compatible frontend",
         "--http-host 0.0.0.0"),
    make("http-port", ot::integer, "8000", "router: port of the frontend",
         "--http-port 8080", {}, 0, 65535),
    make("grpc-port", ot::integer, "8001",
         "router: port of the OpenEngine Inference frontend (0: off)",
         "--grpc-port 8001", {}, 0, 65535),
    make("dispatch", ot::string, "relay",
         "router: through each worker's sidecar relay, or straight to its "
         "engine (OpenEngine or vLLM native)",
         "--dispatch direct", {"relay", "direct"}),
    make("router-mode", ot::string, "kv",
         "router: kv (prefix overlap and load), round-robin or random",
         "--router-mode round-robin", {"kv", "round-robin", "random"}),
    make("kv-overlap-score-weight", ot::number, "1.0",
         "router: weight of prefill blocks against decode blocks in the cost",
         "--kv-overlap-score-weight 2"),
    make("router-temperature", ot::number, "0",
         "router: 0 picks the lowest cost; above 0 samples softmax(-cost/T)",
         "--router-temperature 0.5"),
    make("migration-limit", ot::integer, "2",
         "router: times a broken stream moves to another worker",
         "--migration-limit 1", {}, 0, 100),
    make("router-conditional-disagg", ot::boolean, "false",
         "router: prefill on prefill workers and decode on decode workers, "
         "or prefill locally on the decode worker, by policy",
         "--router-conditional-disagg"),
    make("router-conditional-disagg-config", ot::string, "{}",
         "router: the policy as JSON (policy isl_bounding|prefill_load|"
         "isl_or_load, eff_isl_threshold, eff_isl_ratio_threshold, "
         "prefill_busy_threshold, decode_busy_threshold)",
         "--router-conditional-disagg-config "
         "'{\"policy\":\"isl_or_load\",\"eff_isl_threshold\":4096}'"),
    make("router-queue-threshold", ot::number, "0",
         "router: queued prefill tokens above which a worker counts as busy "
         "(0: no threshold)",
         "--router-queue-threshold 8192"),
    make("served-model", ot::string, "",
         "router: the model to serve (default: the workers')",
         "--served-model llama-3-8b"),
    make("sim-engines", ot::integer, "2",
         "role all: simulated engines to start (each with a sidecar)",
         "--sim-engines 4", {}, 1, 64),
    make("sim-binary", ot::string, "",
         "role all: the simulated engine (default: next to outrider)",
         "--sim-binary /usr/local/bin/outrider-sim"),
    make("sim-speedup", ot::number, "10",
         "role all: the simulated engines' --speedup", "--sim-speedup 1"),
    make("sim-kv-blocks", ot::integer, "16384",
         "role all: KV blocks (of 16 tokens) per simulated engine",
         "--sim-kv-blocks 65536", {}, 16, 100000000),
    make("demo-requests", ot::integer, "0",
         "role all: send this many requests, print a summary, exit",
         "--demo-requests 48", {}, 0, 1000000),
    make("debug-hang-on-shutdown", ot::boolean, "false",
         "debugging: add an actor that never stops, to exercise "
         "--shutdown-timeout",
         "--debug-hang-on-shutdown", {}, 0, 0, true),
    make("debug-crash-endpoint", ot::boolean, "false",
         "debugging: POST /debug/crash?child=NAME on the status server kills "
         "that supervised actor (fault tests)",
         "--debug-crash-endpoint", {}, 0, 0, true),
  };
}

const option_spec* find_spec(const std::string& key) {
  for (const auto& s : option_specs())
    if (s.key == key)
      return &s;
  return nullptr;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min(
        {row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string suggestion(const std::string& key) {
  const option_spec* best = nullptr;
  size_t best_d = 4;
  for (const auto& s : option_specs()) {
    auto d = edit_distance(key, s.key);
    if (d < best_d) {
      best_d = d;
      best = &s;
    }
  }
  return best ? " (did you mean '" + best->key + "'?)" : "";
}

std::optional<bool> parse_bool(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), ::tolower);
  if (l == "true" || l == "yes" || l == "on" || l == "1")
    return true;
  if (l == "false" || l == "no" || l == "off" || l == "0")
    return false;
  return std::nullopt;
}

std::optional<int64_t> parse_int(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty())
    return std::nullopt;
  return v;
}

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs)
    out += (out.empty() ? "" : ", ") + x;
  return out;
}

// Returns an empty string when `text` is a valid value for `spec`.
std::string validate(const option_spec& spec, const std::string& text) {
  switch (spec.type) {
  case ot::integer: {
    auto v = parse_int(text);
    if (!v)
      return "'" + spec.key + "' must be an integer, got '" + text + "'";
    if (spec.min != spec.max && (*v < spec.min || *v > spec.max))
      return "'" + spec.key + "' must be between " + std::to_string(spec.min) +
             " and " + std::to_string(spec.max) + ", got " + text;
    break;
  }
  case ot::number: {
    char* end = nullptr;
    auto v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(v >= 0))
      return "'" + spec.key + "' must be a non-negative number, got '" + text +
             "'";
    break;
  }
  case ot::boolean:
    if (!parse_bool(text))
      return "'" + spec.key + "' must be true or false, got '" + text + "'";
    break;
  case ot::duration:
    if (!parse_duration(text))
      return "'" + spec.key +
             "' must be a duration such as 500ms, 5s or 2m, got '" + text + "'";
    break;
  case ot::string:
    if (!spec.choices.empty() &&
        std::find(spec.choices.begin(), spec.choices.end(), text) ==
          spec.choices.end())
      return "'" + spec.key + "' must be one of " + join(spec.choices) +
             ", got '" + text + "'";
    break;
  }
  return {};
}

struct layer {
  std::map<std::string, std::string> values;
  std::string error;
  std::vector<std::string> warnings;
};

// Kubernetes injects service-link variables for every Service in the
// namespace: for a Service `outrider-x`, OUTRIDER_X_SERVICE_HOST,
// OUTRIDER_X_SERVICE_PORT[_NAME], OUTRIDER_X_PORT=tcp://10.0.0.1:80 and
// OUTRIDER_X_PORT_80_TCP[_PROTO|_PORT|_ADDR]. They are not ours.
bool is_service_link(const std::string& name, const std::string& value) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
             0;
  };
  auto link_value = [&] {
    for (const char* scheme : {"tcp://", "udp://", "sctp://"})
      if (value.rfind(scheme, 0) == 0)
        return true;
    return false;
  };
  if (ends_with("_SERVICE_HOST") || name.find("_SERVICE_PORT") != name.npos)
    return true;
  for (const char* proto : {"_TCP", "_UDP", "_SCTP"}) {
    auto at = name.find(proto);
    if (at == name.npos || name.find("_PORT_") == name.npos)
      continue;
    auto rest = name.substr(at + std::string_view{proto}.size());
    if (rest.empty() || rest == "_PROTO" || rest == "_PORT" || rest == "_ADDR")
      return true;
  }
  return ends_with("_PORT") && link_value();
}

layer read_flags(const std::vector<std::string>& args, bool& help,
                 bool& version) {
  layer out;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "-h" || a == "--help") {
      help = true;
      continue;
    }
    if (a == "--version") {
      version = true;
      continue;
    }
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      out.error = "unexpected argument '" + a + "' (options start with --)";
      return out;
    }
    auto body = a.substr(2);
    auto eq = body.find('=');
    std::string key = body.substr(0, eq);
    const auto* spec = find_spec(key);
    if (!spec) {
      out.error = "unknown flag '--" + key + "'" + suggestion(key);
      return out;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
    } else if (spec->type == ot::boolean &&
               (i + 1 >= args.size() || !parse_bool(args[i + 1]))) {
      value = "true";
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      out.error = "flag '--" + key + "' needs a value, e.g. " + spec->example;
      return out;
    }
    if (auto err = validate(*spec, value); !err.empty()) {
      out.error = "--" + key + ": " + err;
      return out;
    }
    out.values[key] = value;
  }
  return out;
}

layer read_env(const std::map<std::string, std::string>& env) {
  layer out;
  for (const auto& [name, value] : env) {
    if (name.rfind("OUTRIDER_", 0) != 0)
      continue;
    std::string key = name.substr(9);
    std::transform(key.begin(), key.end(), key.begin(), [](char c) {
      return c == '_' ? '-' : static_cast<char>(::tolower(c));
    });
    const auto* spec = find_spec(key);
    auto err = spec ? validate(*spec, value) : std::string{};
    if ((!spec || !err.empty()) && is_service_link(name, value))
      continue; // e.g. a Service named outrider-http: OUTRIDER_HTTP_PORT
    if (!spec) {
      out.warnings.push_back("ignoring unknown environment variable " + name +
                             suggestion(key));
      continue;
    }
    if (!err.empty()) {
      out.error = name + ": " + err;
      return out;
    }
    out.values[key] = value;
  }
  return out;
}

layer read_file(const std::string& path) {
  layer out;
  std::ifstream probe(path);
  if (!probe) {
    out.error = "cannot read config file '" + path + "'";
    return out;
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    out.error =
      path + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg;
    return out;
  } catch (const std::exception& e) {
    out.error = "cannot read config file '" + path + "': " + e.what();
    return out;
  }
  if (root.IsNull())
    return out;
  if (!root.IsMap()) {
    out.error = path + ":" + std::to_string(root.Mark().line + 1) +
                ": the config file must be a mapping of option keys";
    return out;
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    auto where = path + ":" + std::to_string(it->first.Mark().line + 1) + ": ";
    if (!it->first.IsScalar()) {
      out.error = where + "keys must be plain option names";
      return out;
    }
    auto key = it->first.Scalar();
    const auto* spec = find_spec(key);
    if (!spec) {
      out.error = where + "unknown key '" + key + "'" + suggestion(key);
      return out;
    }
    if (key == "config") {
      out.error = where + "'config' cannot be set inside a config file";
      return out;
    }
    if (!it->second.IsScalar()) {
      out.error = where + "'" + key + "' must be a single value";
      return out;
    }
    auto value = it->second.Scalar();
    if (auto err = validate(*spec, value); !err.empty()) {
      out.error = where + err;
      return out;
    }
    out.values[key] = value;
  }
  return out;
}

} // namespace

const std::vector<option_spec>& option_specs() {
  static const auto specs = make_specs();
  return specs;
}

std::optional<std::chrono::milliseconds> parse_duration(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
    ++i;
  if (i == 0 || i > 12)
    return std::nullopt;
  auto n = *parse_int(s.substr(0, i));
  auto unit = s.substr(i);
  using namespace std::chrono;
  if (unit.empty() || unit == "ms")
    return milliseconds{n};
  if (unit == "s")
    return duration_cast<milliseconds>(seconds{n});
  if (unit == "m")
    return duration_cast<milliseconds>(minutes{n});
  if (unit == "h")
    return duration_cast<milliseconds>(hours{n});
  return std::nullopt;
}

const options::value& options::at(const std::string& key) const {
  auto i = values_.find(key);
  if (i == values_.end())
    throw std::logic_error("option not declared: " + key);
  return i->second;
}

const std::string& options::get_string(const std::string& key) const {
  return at(key).text;
}

int64_t options::get_int(const std::string& key) const {
  return parse_int(at(key).text).value_or(0);
}

bool options::get_bool(const std::string& key) const {
  return parse_bool(at(key).text).value_or(false);
}

std::chrono::milliseconds options::get_duration(const std::string& key) const {
  return parse_duration(at(key).text).value_or(std::chrono::milliseconds{0});
}

double options::get_number(const std::string& key) const {
  return std::strtod(at(key).text.c_str(), nullptr);
}

option_source options::source(const std::string& key) const {
  return at(key).src;
}

void options::set(const std::string& key, std::string text, option_source src) {
  values_[key] = value{std::move(text), src};
}

parse_outcome parse_options(const std::vector<std::string>& args,
                            const std::map<std::string, std::string>& env) {
  parse_outcome out;
  auto fail = [&](std::string msg) {
    out.what = parse_outcome::error;
    out.message = std::move(msg);
    return out;
  };
  bool help = false;
  bool version = false;
  auto flags = read_flags(args, help, version);
  if (help) {
    out.what = parse_outcome::help;
    out.message = help_text();
    return out;
  }
  if (version) {
    out.what = parse_outcome::version;
    return out;
  }
  if (!flags.error.empty())
    return fail(flags.error);
  auto envs = read_env(env);
  if (!envs.error.empty())
    return fail(envs.error);
  out.warnings = envs.warnings;
  layer file;
  std::string config_path =
    flags.values.count("config")
      ? flags.values["config"]
      : (envs.values.count("config") ? envs.values["config"] : std::string{});
  if (!config_path.empty()) {
    file = read_file(config_path);
    if (!file.error.empty())
      return fail(file.error);
  }
  for (const auto& spec : option_specs()) {
    auto pick = [&](const layer& l, option_source src) {
      auto i = l.values.find(spec.key);
      if (i == l.values.end())
        return false;
      out.opts.set(spec.key, i->second, src);
      return true;
    };
    if (!pick(flags, option_source::flag) && !pick(envs, option_source::env) &&
        !pick(file, option_source::file))
      out.opts.set(spec.key, spec.default_value, option_source::default_value);
  }
  if (out.opts.get_string("role").empty())
    return fail("no role given: pass --role sidecar, --role router or "
                "--role all (see --help)");
  if (out.opts.get_duration("supervisor-initial-backoff") >
      out.opts.get_duration("supervisor-max-backoff"))
    return fail("'supervisor-initial-backoff' must not exceed "
                "'supervisor-max-backoff'");
  return out;
}

std::string help_text() {
  std::ostringstream os;
  os << "outrider: the cluster runtime beside LLM inference engines.\n\n"
        "Usage: outrider --role sidecar|router|all [options]\n\n"
        "Every option has one spelling: the flag --key, the YAML key `key:` "
        "in --config,\nand the environment variable OUTRIDER_KEY (dashes "
        "become underscores).\nPrecedence: flag > environment > config file "
        "> default.\nDurations take ms, s, m or h (a bare number is ms).\n\n"
        "Options:\n";
  auto print = [&](bool hidden) {
    for (const auto& s : option_specs()) {
      if (s.hidden != hidden)
        continue;
      os << "  --" << s.key;
      if (s.type != ot::boolean)
        os << " <" << (s.choices.empty() ? "value" : join(s.choices)) << ">";
      os << "\n      " << s.help;
      if (!s.default_value.empty())
        os << " (default: " << s.default_value << ")";
      os << "\n      e.g. " << s.example << "\n";
    }
  };
  print(false);
  os << "  -h, --help     this text\n  --version      print the version\n\n"
        "Debugging:\n";
  print(true);
  os << "\nExit codes: 0 clean stop, 1 runtime failure, 2 bad command line "
        "or configuration.\n"
        "Example: outrider --role sidecar --engine-endpoint 127.0.0.1:50051 "
        "--system-port 9090\n";
  return os.str();
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("OUTRIDER_", 0) != 0)
      continue;
    auto eq = kv.find('=');
    if (eq != std::string::npos)
      out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

} // namespace outrider::runtime
