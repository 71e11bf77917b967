#pragma once

// For unit tests: wait for a condition with a deadline, never for a fixed
// time (the end-to-end tests have their own in tests/e2e/process.hpp).

#include <chrono>
#include <thread>

namespace outrider::test {

/// Polls `pred` every 10 ms until it holds or `limit` passed; its last
/// answer.
template <class Pred>
bool eventually(Pred pred,
                std::chrono::milliseconds limit = std::chrono::seconds{10}) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  return pred();
}

} // namespace outrider::test
