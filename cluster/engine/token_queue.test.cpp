#include "cluster/engine/token_queue.hpp"

#include <catch2/catch.hpp>

using namespace outrider::engine;
namespace oe = openengine::v1;

namespace {

oe::GenerateResponse token(uint32_t id, uint32_t index = 0) {
  oe::GenerateResponse r;
  r.mutable_token()->set_output_index(index);
  r.mutable_token()->add_tokens()->set_token_id(id);
  return r;
}

std::vector<uint32_t> ids(const oe::GenerateResponse& r) {
  std::vector<uint32_t> out;
  for (const auto& t : r.token().tokens())
    out.push_back(t.token_id());
  return out;
}

} // namespace

TEST_CASE("tokens queued behind a write are merged into one message") {
  std::deque<oe::GenerateResponse> q;
  oe::GenerateResponse prompt;
  prompt.mutable_prompt()->set_num_prompt_tokens(7);
  enqueue_coalesced(q, std::move(prompt));
  for (uint32_t t = 1; t <= 4; ++t)
    enqueue_coalesced(q, token(t));
  REQUIRE(q.size() == 2); // the prompt event keeps its place
  CHECK(q[0].has_prompt());
  CHECK(ids(q[1]) == std::vector<uint32_t>{1, 2, 3, 4});
  // Another output index, and a finish, are not merged; order holds.
  enqueue_coalesced(q, token(9, 1));
  oe::GenerateResponse fin;
  fin.mutable_finished();
  enqueue_coalesced(q, std::move(fin));
  enqueue_coalesced(q, token(5));
  REQUIRE(q.size() == 5);
  CHECK(ids(q[2]) == std::vector<uint32_t>{9});
  CHECK(q[3].has_finished());
  CHECK(ids(q[4]) == std::vector<uint32_t>{5});
}
