#include "actors/sidecar/kv_sequencer.hpp"

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
  return plan;
}

kv_sequencer::replay_plan kv_sequencer::plan_unanswered(uint64_t seq) {
  replay_plan plan;
  if (seq <= next_)
    return plan;
  plan.lost = true;
  plan.lost_from = next_;
  plan.resume = seq;
  next_ = seq;
  return plan;
}

bool kv_sequencer::resync(uint64_t expected) {
  if (expected == next_)
    return false;
  next_ = expected;
  return true;
}

} // namespace outrider::sidecar
