// Any bytes as configuration: the input is split at "\n--\n" into a YAML
// file, command-line arguments (one per line) and OUTRIDER_* variables
// (NAME=value lines). The loader answers with options or one error line.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "runtime/options.hpp"

namespace {

std::vector<std::string> split(const std::string& text,
                               const std::string& sep) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    auto next = text.find(sep, at);
    out.push_back(text.substr(at, next - at));
    if (next == std::string::npos)
      return out;
    at = next + sep.size();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace outrider::runtime;
  static const std::string path =
    "/tmp/outrider-fuzz-options-" + std::to_string(::getpid()) + ".yaml";
  auto parts =
    split(std::string{reinterpret_cast<const char*>(data), size}, "\n--\n");
  std::ofstream(path, std::ios::trunc | std::ios::binary) << parts[0];
  std::vector<std::string> args{"--config", path};
  if (parts.size() > 1)
    for (auto& a : split(parts[1], "\n"))
      args.push_back(a);
  std::map<std::string, std::string> env;
  if (parts.size() > 2)
    for (auto& line : split(parts[2], "\n"))
      if (auto eq = line.find('='); eq != std::string::npos)
        env[line.substr(0, eq)] = line.substr(eq + 1);
  auto r = parse_options(args, env);
  if (r.what == parse_outcome::error && r.message.empty())
    __builtin_trap(); // an error always says what
  if (r.what == parse_outcome::ok)
    for (const auto& spec : option_specs())
      (void)r.opts.get_string(spec.key); // every key has a value
  return 0;
}
