#include "runtime/options.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace outrider::runtime {

namespace {

const option_spec* find_spec(const std::string& key) {
  return find_option(option_specs(), key);
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
    auto err = spec ? check_value(*spec, value) : std::string{};
    if ((!spec || !err.empty()) && is_service_link(name, value))
      continue; // e.g. a Service named outrider-http: OUTRIDER_HTTP_PORT
    if (!spec) {
      out.warnings.push_back("ignoring unknown environment variable " + name +
                             typo_hint(option_specs(), key));
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
  std::ifstream probe(path, std::ios::binary | std::ios::ate);
  if (!probe) {
    out.error = "cannot read config file '" + path + "'";
    return out;
  }
  // A config is a page of settings: a larger file is refused before the
  // YAML parser builds it (1M keys took 946 MB of memory to refuse).
  constexpr std::streamoff max_config_bytes = 1 << 20;
  if (auto size = static_cast<std::streamoff>(probe.tellg());
      size > max_config_bytes) {
    out.error = "config file '" + path + "' is " + std::to_string(size) +
                " bytes; the limit is 1 MiB";
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
  std::map<std::string, int> first_line;
  for (auto it = root.begin(); it != root.end(); ++it) {
    auto line = it->first.Mark().line + 1;
    auto where = path + ":" + std::to_string(line) + ": ";
    if (!it->first.IsScalar()) {
      out.error = where + "keys must be plain option names";
      return out;
    }
    auto key = it->first.Scalar();
    const auto* spec = find_spec(key);
    if (!spec) {
      out.error =
        where + "unknown key '" + key + "'" + typo_hint(option_specs(), key);
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
    if (auto seen = first_line.find(key); seen != first_line.end()) {
      out.error = where + "'" + key + "' is set twice (first on line " +
                  std::to_string(seen->second) + ")";
      return out;
    }
    first_line[key] = line;
    auto value = it->second.Scalar();
    if (auto err = check_value(*spec, value); !err.empty()) {
      out.error = where + err;
      return out;
    }
    out.values[key] = value;
  }
  return out;
}

} // namespace

parse_outcome parse_options(const std::vector<std::string>& args,
                            const std::map<std::string, std::string>& env) {
  parse_outcome out;
  auto fail = [&](std::string msg) {
    out.what = parse_outcome::error;
    out.message = std::move(msg);
    return out;
  };
  auto flags = parse_flags(option_specs(), args);
  if (flags.what == parse_outcome::help) {
    flags.message = help_text();
    return flags;
  }
  if (flags.what != parse_outcome::ok)
    return flags;
  auto envs = read_env(env);
  if (!envs.error.empty())
    return fail(envs.error);
  out.warnings = envs.warnings;
  layer file;
  std::string config_path =
    flags.opts.source(opt::config) == option_source::flag
      ? flags.opts.get(opt::config)
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
    if (flags.opts.source(spec.key) == option_source::flag)
      out.opts.set(spec.key, flags.opts.get_string(spec.key),
                   option_source::flag);
    else if (!pick(envs, option_source::env) &&
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

std::string describe_settings(const options& opts) {
  std::string out;
  for (const auto& spec : option_specs()) {
    auto src = opts.source(spec.key);
    if (src == option_source::default_value)
      continue;
    bool secret = spec.key.find("password") != std::string::npos ||
                  spec.key.find("token") != std::string::npos;
    out += "  " + spec.key + " = " +
           (secret ? "***" : opts.get_string(spec.key)) + " (from " +
           (src == option_source::flag  ? "flag"
            : src == option_source::env ? "environment"
                                        : "config file") +
           ")\n";
  }
  return out;
}

} // namespace outrider::runtime
