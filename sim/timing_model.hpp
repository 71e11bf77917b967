#pragma once

#include <algorithm>
#include <cstdint>

namespace outrider::sim {

/// Step times of the reference model (docs/wire.md, "The simulator's reference
/// model"), in milliseconds before the speed-up factor. Coefficients are
/// configurable.
struct timing_model {
  double prefill_a = 4.21e-7;  // per new token squared
  double prefill_b = 1.518e-2; // per new token
  double prefill_c = 16.5;
  double decode_a = -25.74; // u is the fraction of KV blocks in use
  double decode_b = 54.01;
  double decode_c = 5.74;
  double decode_min = 1.0;

  double prefill_ms(uint64_t new_tokens) const {
    auto t = static_cast<double>(new_tokens);
    return prefill_a * t * t + prefill_b * t + prefill_c;
  }

  double decode_ms(double used_fraction) const {
    double u = std::clamp(used_fraction, 0.0, 1.0);
    return std::max(decode_min, decode_a * u * u + decode_b * u + decode_c);
  }
};

} // namespace outrider::sim
