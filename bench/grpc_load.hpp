#pragma once

// An asynchronous OpenEngine load generator on gRPC's callback API: all
// streams from a few gRPC threads, never a thread per stream, with the
// time to the first token and the gaps between tokens of every stream.

#include <cstdint>
#include <string>
#include <vector>

namespace outrider::bench {

struct grpc_stream_result {
  bool ok = false;
  uint32_t tokens = 0;
  double ttft_s = -1;
  std::vector<double> gaps_s; // between token messages
};

/// Runs `streams` Generate calls at once against `endpoint` (prompt of
/// `prompt_len` tokens, distinct per stream, `max_tokens` out) and waits
/// for all of them (at most `deadline_s`).
std::vector<grpc_stream_result>
run_grpc_load(const std::string& endpoint, size_t streams, unsigned prompt_len,
              unsigned max_tokens, double deadline_s = 300);

} // namespace outrider::bench
