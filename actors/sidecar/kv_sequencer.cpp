#include "actors/sidecar/kv_sequencer.hpp"

#include <algorithm>
#include <cstdint>

namespace outrider::sidecar {

kv_sequencer::verdict kv_sequencer::classify(uint64_t seq) const {
  if (seq < next_)
    return verdict::duplicate;
  return seq == next_ ? verdict::apply : verdict::gap;
}

void kv_sequencer::applied(uint64_t seq) {
  next_ = seq + 1;
}

kv_sequencer::replay_plan
kv_sequencer::plan_replay(const std::vector<uint64_t>& seqs) {
  replay_plan plan;
  echo_lo_ = next_;
  // An empty answer means the engine has nothing newer: a live sequence
  // beyond it is bogus, not a gap.
  if (!seqs.empty() && seqs.front() > next_) {
    plan.lost = true;
    plan.lost_from = next_;
    plan.resume = seqs.front();
    next_ = plan.resume;
  }
  for (size_t i = 0; i < seqs.size(); ++i)
    if (seqs[i] == next_) {
      plan.apply.push_back(i);
      next_ = seqs[i] + 1;
    }
  echo_hi_ = next_;
  return plan;
}

bool kv_sequencer::resync(uint64_t expected) {
  if (expected == next_)
    return false;
  // Raised: what lies between was applied before (the indexer has it).
  echo_lo_ = std::min(next_, expected);
  echo_hi_ = expected;
  next_ = expected;
  return true;
}

kv_sequencer::stray_plan kv_sequencer::stray(uint64_t seq,
                                             std::string payload) {
  stray_plan plan;
  if (seq > next_ && seq - next_ <= near_gap_) {
    plan.dropped = held_.size();
    held_.clear();
    held_.emplace_back(seq, std::move(payload));
  } else {
    bool continues = !held_.empty() && held_.back().first != UINT64_MAX &&
                     seq == held_.back().first + 1;
    if (!continues) {
      plan.dropped = held_.size();
      held_.clear();
    }
    held_.emplace_back(seq, std::move(payload));
    auto start = held_.front().first;
    auto needed = start > next_ ? confirm_ahead : confirm_behind;
    if (held_.size() < needed)
      return plan;
  }
  plan.adopt = true;
  plan.reset.lost = true;
  plan.reset.lost_from = next_;
  plan.reset.resume = held_.front().first;
  next_ = plan.reset.resume;
  echo_lo_ = echo_hi_ = next_;
  plan.apply = std::move(held_);
  held_.clear();
  return plan;
}

size_t kv_sequencer::settle() {
  auto n = held_.size();
  held_.clear();
  return n;
}

} // namespace outrider::sidecar
