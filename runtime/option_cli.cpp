// The command-line layer of the option table, on CLI11: every spec becomes a
// CLI11 option whose check is the table's own validation, so a value is
// refused with the same words whether it came from a flag, the environment
// or the config file. Typo hints and value checks are ours (CLI11 has no
// suggestions, and its range messages name no example). The --help text and
// the OUTRIDER_* variables read from the environment are here too.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <sstream>

#include "runtime/options.hpp"

extern char** environ;

namespace outrider::runtime {

namespace {

using ot = option_type;

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

std::string check_number(const option_spec& spec, const std::string& text) {
  char* end = nullptr;
  auto v = std::strtod(text.c_str(), &end);
  bool parsed =
    !text.empty() && end == text.c_str() + text.size() && std::isfinite(v);
  if (spec.lowest == spec.highest) {
    if (!parsed || !(v >= 0))
      return "'" + spec.key + "' must be a finite non-negative number, got '" +
             text + "'";
    return {};
  }
  if (!parsed || v < spec.lowest || v > spec.highest) {
    std::ostringstream os;
    os << "'" << spec.key << "' must be a number between " << spec.lowest
       << " and " << spec.highest << ", got '" << text << "'";
    return os.str();
  }
  return {};
}

// The first argument CLI11 left over, as the one error line.
std::string leftover_error(const std::vector<option_spec>& specs,
                           const std::string& arg) {
  if (arg.size() < 3 || arg.compare(0, 2, "--") != 0)
    return "unexpected argument '" + arg + "' (options start with --)";
  auto key = arg.substr(2, arg.find('=') - 2);
  return "unknown flag '--" + key + "'" + typo_hint(specs, key);
}

} // namespace

const option_spec* find_option(const std::vector<option_spec>& specs,
                               const std::string& key) {
  for (const auto& s : specs)
    if (s.key == key)
      return &s;
  return nullptr;
}

std::string typo_hint(const std::vector<option_spec>& specs,
                      const std::string& key) {
  const option_spec* best = nullptr;
  size_t best_d = 4;
  for (const auto& s : specs) {
    auto d = edit_distance(key, s.key);
    if (d < best_d) {
      best_d = d;
      best = &s;
    }
  }
  return best ? " (did you mean '" + best->key + "'?)" : "";
}

std::string check_value(const option_spec& spec, const std::string& text) {
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
  case ot::number:
    return check_number(spec, text);
  case ot::boolean:
    if (!parse_bool(text))
      return "'" + spec.key + "' must be true or false, got '" + text + "'";
    break;
  case ot::duration: {
    auto d = parse_duration(text);
    if (!d)
      return "'" + spec.key +
             "' must be a duration such as 500ms, 5s or 2m, got '" + text + "'";
    // Longer ones overflow a clock's time point (nanoseconds) downstream.
    if (*d > std::chrono::hours{24 * 365})
      return "'" + spec.key + "' must be at most a year (8760h), got '" + text +
             "'";
    break;
  }
  case ot::string:
    // A control character (a newline in a host, say) is never meant: it
    // would surface later as a name no resolver or file system takes. The
    // JSON documents (keys ending in -config) may hold JSON's whitespace.
    for (bool document =
           spec.key.size() > 7 &&
           spec.key.compare(spec.key.size() - 7, 7, "-config") == 0;
         unsigned char c : text) {
      bool whitespace = c == '\t' || c == '\n' || c == '\r';
      if ((c < 0x20 || c == 0x7f) && !(document && whitespace))
        return "'" + spec.key + "' has a control character (byte " +
               std::to_string(static_cast<int>(c)) + ")";
    }
    if (!spec.choices.empty() &&
        std::find(spec.choices.begin(), spec.choices.end(), text) ==
          spec.choices.end())
      return "'" + spec.key + "' must be one of " + join_choices(spec.choices) +
             ", got '" + text + "'";
    break;
  }
  return {};
}

std::string option_list_text(const std::vector<option_spec>& specs,
                             bool hidden) {
  std::ostringstream os;
  for (const auto& s : specs) {
    if (s.hidden != hidden)
      continue;
    os << "  --" << s.key;
    if (s.type != ot::boolean)
      os << " <" << (s.choices.empty() ? "value" : join_choices(s.choices))
         << ">";
    os << "\n      " << s.help;
    if (!s.default_value.empty())
      os << " (default: " << s.default_value << ")";
    os << "\n      e.g. " << s.example << "\n";
  }
  return os.str();
}

parse_outcome parse_flags(const std::vector<option_spec>& specs,
                          const std::vector<std::string>& args) {
  parse_outcome out;
  for (const auto& a : args) {
    if (a == "-h" || a == "--help") {
      out.what = parse_outcome::help;
      return out;
    }
  }
  CLI::App app;
  app.set_help_flag();
  app.allow_extras(true);
  auto* version = app.add_flag("--version");
  std::map<std::string, std::vector<std::string>> given;
  for (const auto& spec : specs) {
    auto* o = app.add_option("--" + spec.key, given[spec.key]);
    // Every option takes at most one value. CLI11 records a bare flag as an
    // empty value: true for a boolean, a missing value for the rest.
    o->expected(0, 1);
    o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    o->check(CLI::Validator(
      [&spec](const std::string& v) { return check_value(spec, v); }, "", ""));
  }
  auto fail = [&](std::string msg) {
    out.what = parse_outcome::error;
    out.message = std::move(msg);
    return out;
  };
  // This overload of CLI11's parse takes the arguments reversed, without
  // the program name.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return fail(e.what());
  }
  if (auto rest = app.remaining(); !rest.empty())
    return fail(leftover_error(specs, rest.front()));
  if (version->count() > 0) {
    out.what = parse_outcome::version;
    return out;
  }
  for (const auto& spec : specs) {
    const auto& values = given[spec.key];
    if (app.count("--" + spec.key) == 0) {
      out.opts.set(spec.key, spec.default_value, option_source::default_value);
    } else if (!values.empty() && !values.back().empty()) {
      out.opts.set(spec.key, values.back(), option_source::flag);
    } else if (spec.type == ot::boolean) {
      out.opts.set(spec.key, "true", option_source::flag);
    } else {
      return fail("flag '--" + spec.key + "' needs a value, e.g. " +
                  spec.example);
    }
  }
  return out;
}

std::string join_choices(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs) {
    if (!out.empty())
      out += ", ";
    out += x;
  }
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
  os << option_list_text(option_specs(), false);
  os << "  -h, --help     this text\n  --version      print the version\n\n"
        "Debugging:\n";
  os << option_list_text(option_specs(), true);
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
