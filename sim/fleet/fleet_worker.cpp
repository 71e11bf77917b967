#include "sim/fleet/fleet_worker.hpp"

#include <chrono>
#include <xxhash.h>

#include "cluster/kv/kv_proto.hpp"
#include "sim/token_stream.hpp"

namespace outrider::sim {

uint64_t fleet_block_hash(std::optional<uint64_t> parent,
                          const uint32_t* tokens, uint32_t block_size) {
  return XXH3_64bits_withSeed(tokens, block_size * sizeof(uint32_t),
                              splitmix(parent.value_or(0x6f75747269646572)));
}

fleet_worker::fleet_worker(size_t index, std::string id, uint32_t blocks,
                           uint32_t block_size)
  : index_(index), id_(std::move(id)), cache_(blocks, block_size) {}

size_t fleet_worker::run(const std::vector<uint32_t>& tokens) {
  const uint32_t bs = cache_.block_size();
  const size_t full = tokens.size() / bs;
  std::vector<uint64_t> hashes;
  hashes.reserve(full);
  std::optional<uint64_t> parent;
  for (size_t b = 0; b < full; ++b) {
    hashes.push_back(fleet_block_hash(parent, tokens.data() + b * bs, bs));
    parent = hashes.back();
  }
  std::lock_guard<std::mutex> guard{mtx_};
  size_t hit = cache_.match_prefix(hashes);
  auto held = cache_.acquire({hashes.begin(), hashes.begin() + hit});
  block_stored run;
  run.block_size = bs;
  if (hit > 0)
    run.parent_block_hash = hashes[hit - 1];
  for (size_t b = hit; b < full; ++b) {
    auto id = cache_.allocate();
    if (!id) // every block held by this prompt: the rest is not cached
      break;
    held.push_back(*id);
    std::vector<uint32_t> toks(tokens.begin() + static_cast<ptrdiff_t>(b * bs),
                               tokens.begin() +
                                 static_cast<ptrdiff_t>((b + 1) * bs));
    std::optional<uint64_t> up;
    if (b > 0)
      up = hashes[b - 1];
    run.token_ids.insert(run.token_ids.end(), toks.begin(), toks.end());
    run.block_hashes.push_back(hashes[b]);
    cache_.commit(*id, hashes[b], up, std::move(toks));
  }
  // The tail first into the LRU pool: evicted before the head it hangs on.
  for (auto b = held.rbegin(); b != held.rend(); ++b)
    cache_.release(*b);
  auto events = cache_.take_events(); // evictions, in order
  if (!run.block_hashes.empty())
    events.push_back(std::move(run));
  if (!events.empty())
    publish(std::move(events));
  return hit;
}

void fleet_worker::publish(std::vector<kv::kv_event> events) {
  auto resp = std::make_shared<kv_response>();
  auto* batch = resp->mutable_batch();
  batch->set_sequence_number(++seq_);
  batch->set_timestamp_unix_nanos(
    static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()));
  batch->set_data_parallel_rank(0);
  for (const auto& ev : events)
    kv::to_proto(ev, batch->add_events());
  kv_response_ptr shared = std::move(resp);
  std::erase_if(sinks_, [&](const auto& weak) {
    auto s = weak.lock();
    return !s || !s->push(shared);
  });
}

void fleet_worker::subscribe(const std::shared_ptr<fleet_sink>& sink) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto resp = std::make_shared<kv_response>();
  auto* batch = resp->mutable_batch();
  batch->set_sequence_number(seq_);
  batch->set_data_parallel_rank(0);
  for (const auto& ev : kv::stores_parents_first(cache_.snapshot()))
    kv::to_proto(ev, batch->add_events());
  if (sink->push(std::move(resp)))
    sinks_.push_back(sink);
}

void fleet_worker::follow(const std::shared_ptr<fleet_sink>& sink) {
  std::lock_guard<std::mutex> guard{mtx_};
  sinks_.push_back(sink);
}

uint64_t fleet_worker::batches() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return seq_;
}

} // namespace outrider::sim
