#pragma once

#include <string>

namespace outrider::bench {

enum class api { vllm, openengine };

/// Streamed tokens per second that `streams` client threads get from
/// `endpoint`, each running `rounds` requests of `prompt_len` prompt tokens
/// and `max_tokens` output tokens. Failed or short streams are reported on
/// stderr.
double stream_rate(const std::string& endpoint, api which, int streams,
                   int rounds, unsigned prompt_len, unsigned max_tokens);

/// Blocks until `endpoint` accepts connections (false after 10 s).
bool wait_connected(const std::string& endpoint);

} // namespace outrider::bench
