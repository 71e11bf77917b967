#pragma once

#include <optional>
#include <string_view>

/// The domain's words, as enums: parsed once where text comes in (worker
/// records, options, engines' answers) and written back only where text goes
/// out. The strings below are the only ones in the code base (tests aside).
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

/// What an engine does in disaggregated serving: both phases, the prompt
/// only (its KV handed over), or decoding from a handed-over prompt.
enum class worker_role { aggregated, prefill, decode };

/// As written in worker records, `--disaggregation-mode` and SGLang's
/// server info.
constexpr const char* to_string(worker_role r) {
  switch (r) {
  case worker_role::prefill:
    return "prefill";
  case worker_role::decode:
    return "decode";
  default:
    return "aggregated";
  }
}

/// `aggregated`, `prefill` or `decode`; nullopt for anything else.
constexpr std::optional<worker_role> worker_role_of(std::string_view s) {
  for (auto r :
       {worker_role::aggregated, worker_role::prefill, worker_role::decode})
    if (s == to_string(r))
      return r;
  return std::nullopt;
}

/// How the router picks a worker (`--router-mode`).
enum class router_mode { kv, round_robin, random };

constexpr const char* to_string(router_mode m) {
  switch (m) {
  case router_mode::round_robin:
    return "round-robin";
  case router_mode::random:
    return "random";
  default:
    return "kv";
  }
}

/// `kv`, `round-robin` or `random`; nullopt for anything else.
constexpr std::optional<router_mode> router_mode_of(std::string_view s) {
  for (auto m :
       {router_mode::kv, router_mode::round_robin, router_mode::random})
    if (s == to_string(m))
      return m;
  return std::nullopt;
}

/// Why a generation ended, as OpenAI's `finish_reason` and OpenEngine's
/// `FinishReason` say it: the token budget ran out (or the engine gave no
/// reason), or the model's end of sequence or a stop string was reached.
enum class finish_reason { length, stop };

/// `length` or `stop`, as OpenAI's APIs write it.
constexpr const char* to_string(finish_reason f) {
  return f == finish_reason::stop ? "stop" : "length";
}

} // namespace outrider::engine
