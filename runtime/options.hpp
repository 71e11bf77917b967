#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/option_keys.hpp"

namespace outrider::runtime {

/// The type of an option's value; decides how text is parsed and validated.
enum class option_type { string, integer, boolean, duration, number };

/// One option: the same key is a flag (`--key`), a YAML key (`key:`) and an
/// environment variable (`OUTRIDER_KEY`, dashes become underscores).
struct option_spec {
  std::string key;
  option_type type;
  std::string default_value;
  std::string help;
  std::string example;
  std::vector<std::string> choices; // empty: any value of the type
  int64_t min = 0;                  // integers only
  int64_t max = 0;                  // integers only; min == max: no range
  bool hidden = false;              // debugging aids, listed separately
  double lowest = 0;                // numbers only: the smallest allowed
  double highest = 0; // numbers only; lowest == highest: any finite >= 0
};

/// Every option outrider understands, in the order `--help` lists them.
const std::vector<option_spec>& option_specs();

/// Where a value came from; precedence is flag > env > file > default.
enum class option_source { default_value, file, env, flag };

/// Validated option values.
class options {
 public:
  const std::string& get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::chrono::milliseconds get_duration(const std::string& key) const;
  double get_number(const std::string& key) const;
  option_source source(const std::string& key) const;

  /// The value of a typed key (runtime/option_keys.hpp): the type follows
  /// from the key, and a misspelled key does not compile.
  template <class T>
  T get(option_key<T> key) const {
    if constexpr (std::is_same_v<T, std::string>)
      return get_string(key.name);
    else if constexpr (std::is_same_v<T, bool>)
      return get_bool(key.name);
    else if constexpr (std::is_same_v<T, int64_t>)
      return get_int(key.name);
    else if constexpr (std::is_same_v<T, double>)
      return get_number(key.name);
    else
      return get_duration(key.name);
  }
  template <class T>
  option_source source(option_key<T> key) const {
    return source(std::string{key.name});
  }

  /// Sets a value without validation; for tests and internal defaults.
  void set(const std::string& key, std::string value, option_source src);

 private:
  struct value {
    std::string text;
    option_source src = option_source::default_value;
  };
  const value& at(const std::string& key) const;
  std::map<std::string, value> values_;
};

/// The outcome of reading the command line, environment and config file.
struct parse_outcome {
  enum kind { ok, help, version, error };
  kind what = ok;
  options opts;
  std::string message; // the error line, or the help text
  /// Lines worth a warning that did not stop the parse (e.g. an unknown
  /// `OUTRIDER_*` variable).
  std::vector<std::string> warnings;
};

/// Parses flags (`--key value`, `--key=value`, bare `--flag` for booleans),
/// `OUTRIDER_*` variables from `env` and the YAML file named by `--config`.
parse_outcome parse_options(const std::vector<std::string>& args,
                            const std::map<std::string, std::string>& env);

/// Reads command-line flags against `specs` and nothing else: the values of
/// the flags given (source `flag`), the defaults for the rest. CLI11 splits
/// the arguments (`--key value`, `--key=value`, a bare boolean `--key`, the
/// last of a repeated flag wins); the table checks each value.
parse_outcome parse_flags(const std::vector<option_spec>& specs,
                          const std::vector<std::string>& args);

/// The settings that differ from their defaults, one `key = value (from
/// flag|environment|config file)` line each, secrets (tokens, passwords)
/// shown as `***`: what `--check-config` prints.
std::string describe_settings(const options& opts);

/// The spec of `key` in `specs`, or null.
const option_spec* find_option(const std::vector<option_spec>& specs,
                               const std::string& key);
/// " (did you mean 'key'?)" for the nearest key of `specs`, or empty.
std::string typo_hint(const std::vector<option_spec>& specs,
                      const std::string& key);
/// Empty when `text` is a valid value for `spec`, else the problem.
std::string check_value(const option_spec& spec, const std::string& text);
/// The options part of a help text: flag, values, help, default, example.
std::string option_list_text(const std::vector<option_spec>& specs,
                             bool hidden);

/// Parses a duration such as `250ms`, `5s`, `2m` or a bare number of
/// milliseconds; nullopt when malformed or negative.
std::optional<std::chrono::milliseconds> parse_duration(const std::string& s);
/// true/yes/on/1 and false/no/off/0, any case.
std::optional<bool> parse_bool(const std::string& s);
/// A whole decimal integer, nothing else.
std::optional<int64_t> parse_int(const std::string& s);

/// The `--help` text.
std::string help_text();

/// "a, b, c": how help and errors list an option's choices.
std::string join_choices(const std::vector<std::string>& choices);

/// Collects `OUTRIDER_*` variables from the process environment.
std::map<std::string, std::string> process_environment();

} // namespace outrider::runtime
