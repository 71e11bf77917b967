// KV events decoded and applied per second on one thread, against a
// baseline measured in the same run: msgpack parsing alone.
//
//   build/bench/kv_apply [batches]
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <msgpack.hpp>
#include <string>
#include <vector>

#include "actors/indexer/index_store.hpp"
#include "actors/indexer/local_index.hpp"
#include "cluster/kv/kv_decoder.hpp"
#include "sim/kv_encoding.hpp"

using namespace outrider;
using clock_type = std::chrono::steady_clock;

namespace {

// Batches like an engine's: each stores 16 blocks of 16 tokens; once 100,000
// blocks are cached, each also evicts the 16 oldest (an engine's cache is
// bounded, so is the index).
std::vector<std::string> make_batches(size_t n, size_t& block_events) {
  std::vector<std::string> out;
  std::deque<uint64_t> live;
  block_events = 0;
  uint64_t h = 1;
  for (size_t i = 0; i < n; ++i) {
    std::vector<kv::kv_event> evs;
    kv::block_stored s;
    s.block_size = 16;
    s.parent_block_hash = (h - 1) * 0x9e3779b97f4a7c15ULL;
    for (int b = 0; b < 16; ++b) {
      auto hash = h++ * 0x9e3779b97f4a7c15ULL;
      s.block_hashes.push_back(hash);
      live.push_back(hash);
      for (uint32_t t = 0; t < 16; ++t)
        s.token_ids.push_back(static_cast<uint32_t>(h + t) % 32000);
    }
    block_events += 16;
    evs.push_back(std::move(s));
    if (live.size() > 100000) {
      kv::block_removed r;
      for (int b = 0; b < 16; ++b) {
        r.block_hashes.push_back(live.front());
        live.pop_front();
      }
      block_events += 16;
      evs.push_back(std::move(r));
    }
    out.push_back(sim::encode_batch(1.0, evs, 0, sim::event_encoding::map));
  }
  return out;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
  size_t n = argc > 1 ? std::stoul(argv[1]) : 60000;
  size_t block_events = 0;
  auto batches = make_batches(n, block_events);

  auto t0 = clock_type::now();
  size_t objects = 0;
  for (const auto& b : batches)
    objects += msgpack::unpack(b.data(), b.size()).get().via.array.size;
  double parse_s = seconds_since(t0);

  t0 = clock_type::now();
  size_t decoded = 0;
  for (const auto& b : batches)
    decoded += kv::decode_kv_batch(b.data(), b.size()).batch.events.size();
  double decode_s = seconds_since(t0);

  indexer::local_index index;
  t0 = clock_type::now();
  for (const auto& b : batches) {
    auto r = kv::decode_kv_batch(b.data(), b.size());
    index.apply(0, r.batch.events);
  }
  double apply_s = seconds_since(t0);

  auto dir = std::filesystem::temp_directory_path() / "outrider-bench-kv";
  std::filesystem::remove_all(dir);
  indexer::index_store store;
  if (auto err = store.open(dir.string())) {
    std::fprintf(stderr, "%s\n", describe(err).c_str());
    return 1;
  }
  indexer::local_index durable;
  t0 = clock_type::now();
  uint64_t seq = 0;
  for (const auto& b : batches) {
    auto r = kv::decode_kv_batch(b.data(), b.size());
    store.apply(0, ++seq, r.batch.events);
    durable.apply(0, r.batch.events);
    if (seq % 10000 == 0) // as the indexer does
      store.compact(0, durable.ranks().at(0), seq);
  }
  double durable_s = seconds_since(t0);
  std::filesystem::remove_all(dir);

  auto rate = [&](double s) { return static_cast<double>(block_events) / s; };
  std::printf("%zu batches, %zu block events (%zu objects, %zu events)\n", n,
              block_events, objects, decoded);
  std::printf("%-34s %14s %10s\n", "stage (one thread)", "block ev/s",
              "vs parse");
  std::printf("%-34s %14.0f %10.2f\n", "msgpack parse only (baseline)",
              rate(parse_s), 1.0);
  std::printf("%-34s %14.0f %10.2f\n", "decode (checked)", rate(decode_s),
              parse_s / decode_s);
  std::printf("%-34s %14.0f %10.2f\n", "decode + apply (memory)", rate(apply_s),
              parse_s / apply_s);
  std::printf("%-34s %14.0f %10.2f\n", "decode + apply + RocksDB log",
              rate(durable_s), parse_s / durable_s);
  return 0;
}
