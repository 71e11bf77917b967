// The router's read of one KV batch off its event plane (a
// SubscribeKvEventsResponse as the gRPC plane carries it), parsed and
// turned into the index's events, per second on one thread: the message
// kept and parsed into again (as gRPC's reader does with the message it is
// given: Clear, then parse; protobuf frees a oneof's member on Clear, so
// every event's messages are freed and made again each read) against the
// message made in an arena that is reset after each read.
//
//   build/bench/kv_batch_parse [reads]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <google/protobuf/arena.h>

#include "cluster/kv/kv_proto.hpp"
#include "openengine.pb.h"

using namespace outrider;
namespace oe = openengine::v1;
using clock_type = std::chrono::steady_clock;

namespace {

// A fleet worker's batch (sim/fleet): 16 blocks of 16 tokens stored, 16
// removed.
std::string make_batch(uint64_t seed) {
  oe::SubscribeKvEventsResponse r;
  auto* b = r.mutable_batch();
  b->set_timestamp_unix_nanos(1);
  kv::block_stored s;
  s.block_size = 16;
  s.parent_block_hash = seed;
  kv::block_removed rm;
  for (uint64_t i = 0; i < 16; ++i) {
    s.block_hashes.push_back((seed + i + 1) * 0x9e3779b97f4a7c15ULL);
    rm.block_hashes.push_back((seed + i + 100) * 0x9e3779b97f4a7c15ULL);
    for (uint32_t t = 0; t < 16; ++t)
      s.token_ids.push_back(static_cast<uint32_t>(seed + i * 16 + t));
  }
  kv::to_proto(kv::kv_event{s}, b->add_events());
  kv::to_proto(kv::kv_event{rm}, b->add_events());
  return r.SerializeAsString();
}

size_t convert(const oe::SubscribeKvEventsResponse& r) {
  std::vector<kv::kv_event> out;
  for (const auto& e : r.batch().events())
    if (auto k = kv::from_proto(e))
      out.push_back(std::move(*k));
  return out.size();
}

template <class Read>
double per_second(const std::vector<std::string>& wire, size_t reads,
                  Read read) {
  size_t events = 0;
  auto t0 = clock_type::now();
  for (size_t i = 0; i < reads; ++i)
    events += read(wire[i % wire.size()]);
  double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (events != reads * 2) {
    std::fprintf(stderr, "kv_batch_parse: %zu events, expected %zu\n", events,
                 reads * 2);
    std::exit(1);
  }
  return static_cast<double>(reads) / s;
}

} // namespace

int main(int argc, char** argv) {
  size_t reads = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 400000;
  std::vector<std::string> wire;
  for (uint64_t i = 0; i < 64; ++i)
    wire.push_back(make_batch(i * 1000));

  oe::SubscribeKvEventsResponse kept;
  auto reused = [&](const std::string& w) {
    if (!kept.ParseFromString(w))
      return size_t{0};
    return convert(kept);
  };
  google::protobuf::ArenaOptions opt;
  opt.start_block_size = 4096;
  opt.max_block_size = 65536;
  google::protobuf::Arena arena{opt};
  auto in_arena = [&](const std::string& w) {
    auto* m =
      google::protobuf::Arena::CreateMessage<oe::SubscribeKvEventsResponse>(
        &arena);
    size_t n = m->ParseFromString(w) ? convert(*m) : 0;
    arena.Reset();
    return n;
  };
  std::printf("batch: %zu bytes, 2 events of 16 blocks\n", wire[0].size());
  // Alternated, three rounds: the machine is shared.
  for (int round = 1; round <= 3; ++round) {
    double a = per_second(wire, reads, reused);
    double b = per_second(wire, reads, in_arena);
    std::printf("round %d: message kept %.0f reads/s (%.2f us each), arena "
                "reset per read %.0f reads/s (%.2f us each): %.2fx\n",
                round, a, 1e6 / a, b, 1e6 / b, b / a);
  }
}
