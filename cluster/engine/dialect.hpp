#pragma once

#include <string_view>

namespace outrider::engine {

/// The native protocol an engine speaks. The one enum every engine client
/// (adapters, streams, the relay, direct dispatch) uses.
enum class dialect { unknown, openengine, vllm, sglang };

/// `openengine`, `vllm` or `sglang` (as in a worker record or
/// `--engine-protocol`); anything else is `unknown`.
constexpr dialect dialect_of(std::string_view protocol) {
  if (protocol == "openengine")
    return dialect::openengine;
  if (protocol == "vllm")
    return dialect::vllm;
  if (protocol == "sglang")
    return dialect::sglang;
  return dialect::unknown;
}

constexpr const char* to_string(dialect d) {
  switch (d) {
  case dialect::openengine:
    return "openengine";
  case dialect::vllm:
    return "vllm";
  case dialect::sglang:
    return "sglang";
  default:
    return "unknown";
  }
}

} // namespace outrider::engine
