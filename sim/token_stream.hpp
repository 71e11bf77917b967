#pragma once

// The simulated engine's output tokens: deterministic, so that tests can
// check every token of a stream, migrations included.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace outrider::sim {

/// SplitMix64's finaliser: the mixing step of the token stream (and of
/// the simulator's other seeded choices).
uint64_t splitmix(uint64_t x);

/// The next output token: a pure function of every token so far (prompt and
/// output, folded into `context_hash`) and the seed, so a stream continued
/// elsewhere with the tokens produced so far appended to the prompt goes on
/// with the same tokens.
uint32_t next_token(uint64_t context_hash, uint64_t seed, uint32_t vocab);
/// Folds one token into a context hash; start from `context_seed`.
uint64_t fold_token(uint64_t context_hash, uint32_t token);
inline constexpr uint64_t context_seed = 0x6a09e667f3bcc908ULL;

/// The first `n` tokens an engine generates after `prompt` (with `seed` and
/// `vocab`): what a test expects a stream to be, migrations included.
std::vector<uint32_t> continuation(const std::vector<uint32_t>& prompt,
                                   size_t n, uint64_t seed = 0,
                                   uint32_t vocab = 32000);

} // namespace outrider::sim
