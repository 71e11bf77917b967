#pragma once

// What the hardening tests (issue 33's table) share: a prompt run on an
// engine and a look at whether the sidecar's index holds it.

#include <chrono>
#include <cstdint>

#include <catch2/catch.hpp>

#include "tests/e2e/sidecar_process.hpp"
#include "tests/e2e/sim_process.hpp"
#include "vllm.grpc.pb.h"

namespace outrider::test {

using namespace std::chrono_literals;

// The index follows the engine: the prompt starting at `first` (token ids
// first, first+1, ...) has at least `n` blocks in it.
inline bool indexed(const sidecar_process& side, uint32_t first, size_t n) {
  size_t found = 0;
  for (const auto& b : side.index_blocks()) {
    const auto& t = b["token_ids"];
    found += !t.empty() && t[0] >= first && t[0] < first + 1000;
  }
  return found >= n;
}

/// Runs a 13-token prompt (three 4-token blocks) from `first` on the
/// engine; true when it was served. When it was not, the engine's status
/// and the end of its log go with the next assertion (row 2 failed once
/// here, on a busy machine, with nothing to say why).
inline bool prompt(const sim_process& sim, uint32_t first) {
  auto stub = vllm::Inference::NewStub(sim.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  vllm::GenerateRequest req;
  for (uint32_t i = 0; i < 13; ++i) // three 4-token blocks
    req.mutable_token_ids()->add_ids(first + i);
  req.mutable_stopping()->set_max_new_tokens(2);
  vllm::GenerateResponse resp;
  auto st = stub->Generate(&ctx, req, &resp);
  if (!st.ok()) {
    auto log = sim.proc ? sim.proc->output() : std::string{};
    if (log.size() > 3000)
      log = log.substr(log.size() - 3000);
    UNSCOPED_INFO("Generate of the prompt from "
                  << first << ": status " << st.error_code() << " '"
                  << st.error_message() << "'; the engine's log ends:\n"
                  << log);
  }
  return st.ok();
}

} // namespace outrider::test
