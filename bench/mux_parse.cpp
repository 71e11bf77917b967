// The router's read of one relay mux message (proto/relay_mux.proto): one
// engine step's tokens for every request relayed through a sidecar, one
// `Update` a request, each a `GenerateResponse` with one token, parsed and
// its token ids read out, per token on one thread. The message kept and
// parsed into again (gRPC's reader Clears it, then parses: protobuf frees a
// oneof's member on Clear, so every token's `TokenOutput` and `TokenInfo`
// are freed and made again each read) against the message made in an arena
// that is reset after each read.
//
//   build/bench/mux_parse [requests per message] [reads]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <google/protobuf/arena.h>

#include "relay_mux.pb.h"

namespace mx = outrider::relaymux::v1;
using clock_type = std::chrono::steady_clock;

namespace {

// One engine step as the sidecar sends it: `n` requests, a token each.
std::string make_step(size_t n, uint32_t step) {
  mx::MuxResponse m;
  for (size_t i = 0; i < n; ++i) {
    auto* u = m.add_updates();
    u->set_id(i + 1);
    auto* r = u->add_responses();
    r->set_request_id("cmpl-" + std::to_string(100000 + i));
    auto* t = r->mutable_token();
    t->set_output_index(0);
    t->add_tokens()->set_token_id(1000 + step * 7 + static_cast<uint32_t>(i));
  }
  return m.SerializeAsString();
}

// What the router does with each token: its ids into a chunk.
size_t read_tokens(const mx::MuxResponse& m, std::vector<uint32_t>& ids) {
  size_t n = 0;
  for (const auto& u : m.updates())
    for (const auto& r : u.responses())
      if (r.has_token()) {
        ids.clear();
        for (const auto& t : r.token().tokens())
          ids.push_back(t.token_id());
        n += ids.size();
      }
  return n;
}

template <class Read>
double us_per_token(const std::vector<std::string>& wire, size_t reads,
                    size_t per_message, Read read) {
  size_t tokens = 0;
  auto t0 = clock_type::now();
  for (size_t i = 0; i < reads; ++i)
    tokens += read(wire[i % wire.size()]);
  double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (tokens != reads * per_message) {
    std::fprintf(stderr, "mux_parse: %zu tokens, expected %zu\n", tokens,
                 reads * per_message);
    std::exit(1);
  }
  return 1e6 * s / static_cast<double>(tokens);
}

} // namespace

int main(int argc, char** argv) {
  size_t per_message = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
  size_t reads = argc > 2 ? std::strtoul(argv[2], nullptr, 10)
                          : 4000000 / (per_message ? per_message : 1);
  if (per_message == 0 || reads == 0)
    return 2;
  std::vector<std::string> wire;
  for (uint32_t step = 0; step < 8; ++step)
    wire.push_back(make_step(per_message, step));
  std::vector<uint32_t> ids;

  mx::MuxResponse kept;
  auto reused = [&](const std::string& w) {
    kept.Clear();
    return kept.ParseFromString(w) ? read_tokens(kept, ids) : 0;
  };
  google::protobuf::ArenaOptions opt;
  opt.start_block_size = 4096;
  opt.max_block_size = 256 << 10;
  google::protobuf::Arena arena{opt};
  auto in_arena = [&](const std::string& w) {
    auto* m = google::protobuf::Arena::CreateMessage<mx::MuxResponse>(&arena);
    size_t n = m->ParseFromString(w) ? read_tokens(*m, ids) : 0;
    arena.Reset();
    return n;
  };
  std::printf("step: %zu requests, %zu bytes\n", per_message, wire[0].size());
  // Alternated, three rounds: the machine is shared.
  for (int round = 1; round <= 3; ++round) {
    double a = us_per_token(wire, reads, per_message, reused);
    double b = us_per_token(wire, reads, per_message, in_arena);
    std::printf("round %d: message kept %.3f us a token, arena reset per "
                "read %.3f us a token: %.2fx\n",
                round, a, b, a / b);
  }
}
