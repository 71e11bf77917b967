#include "actors/router/core/migration.hpp"

#include <deque>
#include <map>
#include <optional>

#include <catch2/catch.hpp>
#include <grpcpp/support/status_code_enum.h>

using namespace outrider::router;

namespace {

// A scripted engine stream per worker: how many tokens it produces before
// it ends, and how it ends.
struct script {
  uint32_t tokens = 0;
  attempt_end end = attempt_end::finished;
};

// The test double of the migration seams: workers in a fixed order, each
// with a script; records what the loop asked for.
struct fake_seams final : attempt_seams {
  std::vector<std::string> workers{"a", "b", "c"};
  std::map<std::string, std::deque<script>> scripts;
  std::vector<route_request> placed;
  std::vector<std::vector<uint32_t>> streamed; // prompt of each attempt
  std::vector<uint32_t> max_tokens;            // of each attempt
  int released = 0;
  int migrations = 0;
  uint32_t next_token = 1000;

  void place(const std::shared_ptr<route_request>& in,
             std::function<void(route_decision)> done) override {
    done(pick(*in));
  }

  route_decision pick(const route_request& req) {
    placed.push_back(req);
    route_decision d;
    for (const auto& w : workers)
      if (std::find(req.exclude.begin(), req.exclude.end(), w) ==
          req.exclude.end()) {
        d.ok = true;
        d.worker_id = w;
        return d;
      }
    d.error = "no worker is available";
    return d;
  }

  void stream(const route_decision& d, const std::vector<uint32_t>& tokens,
              uint32_t max, int attempt, generate_outcome& out,
              const token_sink& on_tokens,
              std::function<void(attempt_result)> done) override {
    done(play(d, tokens, max, attempt, out, on_tokens));
  }

  attempt_result play(const route_decision& d,
                      const std::vector<uint32_t>& tokens, uint32_t max, int,
                      generate_outcome& out, const token_sink& on_tokens) {
    streamed.push_back(tokens);
    max_tokens.push_back(max);
    auto& queue = scripts[d.worker_id];
    auto s = queue.empty() ? script{max, attempt_end::finished} : queue.front();
    if (!queue.empty())
      queue.pop_front();
    for (uint32_t i = 0; i < s.tokens && i < max; ++i) {
      std::vector<uint32_t> chunk{next_token++};
      out.tokens.push_back(chunk[0]);
      if (!on_tokens(chunk))
        return {attempt_end::cancelled, {}};
    }
    return {s.end, s.end == attempt_end::finished ? "" : "broke"};
  }

  void release(const route_decision&) override { ++released; }
  void migrating(const route_decision&, const generate_outcome&) override {
    ++migrations;
  }
};

// The double answers at once, so the run ends before this returns.
generate_outcome run_with_migration(const generate_params& p, int limit,
                                    fake_seams& f, token_sink on_tokens) {
  std::optional<generate_outcome> out;
  outrider::router::run_with_migration(
    p, limit, std::shared_ptr<attempt_seams>(&f, [](attempt_seams*) {}),
    std::move(on_tokens), [&](generate_outcome o) { out = std::move(o); });
  REQUIRE(out);
  return *out;
}

generate_params params(uint32_t max_tokens) {
  generate_params p;
  p.prompt = {1, 2, 3};
  p.max_tokens = max_tokens;
  return p;
}

} // namespace

TEST_CASE("migration: a broken stream continues on another worker and the "
          "client sees one contiguous stream",
          "[migration]") {
  fake_seams f;
  f.scripts["a"] = {{3, attempt_end::unavailable}};
  std::vector<uint32_t> seen;
  auto out = run_with_migration(params(8), 2, f, [&](const auto& chunk) {
    seen.insert(seen.end(), chunk.begin(), chunk.end());
    return true;
  });
  REQUIRE(out.ok);
  CHECK(out.migrations == 1);
  CHECK(out.worker_id == "b");
  CHECK(out.tokens.size() == 8);
  CHECK(seen == out.tokens);
  for (uint32_t i = 0; i < 8; ++i)
    CHECK(seen[i] == 1000 + i); // no gap, no repeat
  // The second attempt carries the tokens so far and asks for the rest.
  REQUIRE(f.streamed.size() == 2);
  CHECK(f.streamed[1] == std::vector<uint32_t>{1, 2, 3, 1000, 1001, 1002});
  CHECK(f.max_tokens == std::vector<uint32_t>{8, 5});
  CHECK(f.placed[1].exclude == std::vector<std::string>{"a"});
  CHECK(f.released == 2); // every booking released
  CHECK(f.migrations == 1);
}

TEST_CASE("migration: stops at the limit with a 502", "[migration]") {
  fake_seams f;
  f.scripts["a"] = {{1, attempt_end::unavailable}};
  f.scripts["b"] = {{1, attempt_end::unavailable}};
  auto out =
    run_with_migration(params(8), 1, f, [](const auto&) { return true; });
  CHECK_FALSE(out.ok);
  CHECK(out.kind == outcome_kind::failed);
  CHECK(out.http_status() == 502);
  CHECK(out.migrations == 1);
  CHECK(out.error == "the engine failed: broke");
  CHECK(f.released == 2);
}

TEST_CASE("migration: running out of workers is a 503", "[migration]") {
  fake_seams f;
  f.workers = {"a"};
  f.scripts["a"] = {{2, attempt_end::unavailable}};
  auto out =
    run_with_migration(params(8), 5, f, [](const auto&) { return true; });
  CHECK(out.kind == outcome_kind::no_worker);
  CHECK(out.http_status() == 503);
  CHECK(out.error == "no worker is available");
  CHECK(out.tokens.size() == 2);
}

TEST_CASE("migration: a refused request and a cancelled one do not migrate",
          "[migration]") {
  fake_seams f;
  f.scripts["a"] = {{0, attempt_end::invalid}};
  auto refused =
    run_with_migration(params(4), 3, f, [](const auto&) { return true; });
  CHECK(refused.kind == outcome_kind::refused);
  CHECK(refused.http_status() == 400);
  CHECK(refused.migrations == 0);
  fake_seams g;
  int chunks = 0;
  auto cancelled = run_with_migration(
    params(4), 3, g, [&](const auto&) { return ++chunks < 2; });
  CHECK(cancelled.kind == outcome_kind::cancelled);
  CHECK(cancelled.http_status() == 499);
  CHECK(cancelled.migrations == 0);
  CHECK(g.released == 1);
}

TEST_CASE("migration: an overloaded engine answers 503 without migrating, "
          "and gRPC statuses count as docs/wire.md says",
          "[migration]") {
  fake_seams f;
  f.scripts["a"] = {{0, attempt_end::overloaded}};
  auto busy =
    run_with_migration(params(4), 3, f, [](const auto&) { return true; });
  CHECK(busy.kind == outcome_kind::overloaded);
  CHECK(busy.http_status() == 503);
  CHECK(busy.migrations == 0);
  CHECK(f.released == 1);
  using grpc::StatusCode;
  auto end = [](StatusCode c, bool broke = false) {
    return end_for_status(static_cast<int>(c), broke);
  };
  CHECK(end(StatusCode::OK) == attempt_end::finished);
  CHECK(end(StatusCode::UNAVAILABLE, true) == attempt_end::unavailable);
  CHECK(end(StatusCode::RESOURCE_EXHAUSTED) == attempt_end::overloaded);
  CHECK(end(StatusCode::DEADLINE_EXCEEDED) == attempt_end::timed_out);
  for (auto c : {StatusCode::INVALID_ARGUMENT, StatusCode::NOT_FOUND,
                 StatusCode::FAILED_PRECONDITION, StatusCode::OUT_OF_RANGE})
    CHECK(end(c) == attempt_end::invalid);
  CHECK(end(StatusCode::PERMISSION_DENIED) == attempt_end::failed);
}

TEST_CASE("migration: a stream that broke after its last token is not "
          "retried",
          "[migration]") {
  fake_seams f;
  f.scripts["a"] = {{4, attempt_end::unavailable}};
  auto out =
    run_with_migration(params(4), 3, f, [](const auto&) { return true; });
  CHECK(out.kind == outcome_kind::failed);
  CHECK(out.http_status() == 502);
  CHECK(out.tokens.size() == 4);
  CHECK(f.streamed.size() == 1);
}

TEST_CASE("migration: a request past its deadline is a 504, not migrated",
          "[migration]") {
  fake_seams f;
  f.scripts["a"] = {{2, attempt_end::timed_out}};
  auto out =
    run_with_migration(params(8), 3, f, [](const auto&) { return true; });
  CHECK(out.kind == outcome_kind::timed_out);
  CHECK(out.http_status() == 504);
  CHECK(out.migrations == 0);
  CHECK(f.streamed.size() == 1);
  CHECK(f.released == 1);
}
