// The behaviour table of DESIGN.md, row by row, against the pure machine.
#include "actors/sidecar/lifecycle_machine.hpp"

#include <catch2/catch.hpp>

using namespace outrider;
using namespace outrider::sidecar;
namespace cmd = lifecycle_cmd;
using engine::engine_health;

namespace {

template <class T>
const T* find(const lifecycle_commands& cs) {
  for (const auto& c : cs)
    if (auto* x = std::get_if<T>(&c))
      return x;
  return nullptr;
}

template <class T>
size_t count(const lifecycle_commands& cs) {
  size_t n = 0;
  for (const auto& c : cs)
    n += std::holds_alternative<T>(c) ? 1 : 0;
  return n;
}

engine::engine_info info_of(const std::string& instance) {
  engine::engine_info i;
  i.instance_id = instance;
  i.model = "m";
  i.protocol = "vllm";
  i.kv_block_size = 16;
  i.total_kv_blocks = 1000;
  i.data_parallel_size = 2;
  return i;
}

std::vector<engine::kv_source> two_ranks() {
  return {{0, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", ""},
          {1, "tcp://127.0.0.1:3", "", ""}};
}

lifecycle_machine::config cfg(bool shutdown_on_gap = false) {
  return {"w1", "127.0.0.1:9100", "127.0.0.1:50051", shutdown_on_gap};
}

// Drives a machine from nothing to registered and ready with `instance`;
// `same` is the indexer's answer; `next` what it says per rank.
void bring_up(lifecycle_machine& m, const std::string& instance, bool same,
              uint64_t next = 0) {
  auto out = m.on_health(engine_health::serving, "");
  auto* id = find<cmd::identify>(out);
  REQUIRE(id);
  out = m.on_identity(id->attempt, info_of(instance), two_ranks());
  auto* check = find<cmd::check_instance>(out);
  REQUIRE(check);
  CHECK(check->instance_id == instance);
  out = m.on_instance_checked(check->attempt, same);
  REQUIRE(count<cmd::ask_next_seq>(out) == 2);
  CHECK_FALSE(find<cmd::register_worker>(out)); // not caught up yet
  for (int rank : {0, 1}) {
    auto start = m.on_next_seq(m.attempt(), rank, next);
    auto* f = find<cmd::start_forwarder>(start);
    REQUIRE(f);
    CHECK(f->source.rank == rank);
    CHECK(f->next_seq == next);
  }
  CHECK_FALSE(find<cmd::register_worker>(m.on_caught_up(0)));
  out = m.on_caught_up(1);
  auto* reg = find<cmd::register_worker>(out);
  REQUIRE(reg);
  CHECK(reg->record.instance_id == instance);
  CHECK(reg->record.worker_id == "w1");
  CHECK(reg->record.relay_endpoint == "127.0.0.1:9100");
  CHECK(reg->record.data_parallel_size == 2);
  auto ready = m.on_registered(reg->attempt, true);
  REQUIRE(find<cmd::set_ready>(ready));
  CHECK(find<cmd::set_ready>(ready)->ready);
}

} // namespace

TEST_CASE("lifecycle: registers only once serving, identified and caught up",
          "[lifecycle]") {
  lifecycle_machine m{cfg()};
  // Not serving yet: nothing is registered, nothing asked.
  auto out = m.on_health(engine_health::not_serving, "");
  CHECK(find<cmd::deregister>(out));
  CHECK_FALSE(find<cmd::identify>(out));
  bring_up(m, "A", false);
  CHECK(m.wants_registration());
  // A record that could not be written leaves the sidecar unready.
  auto again = m.on_caught_up(0);
  auto* reg = find<cmd::register_worker>(again);
  REQUIRE(reg);
  auto failed = m.on_registered(reg->attempt, false);
  CHECK_FALSE(find<cmd::set_ready>(failed)->ready);
  // ... and it is written again shortly.
  auto* retry = find<cmd::retry_later>(failed);
  REQUIRE(retry);
  CHECK(find<cmd::register_worker>(m.on_retry(retry->attempt)));
}

TEST_CASE("lifecycle row: engine crash deregisters at once and keeps the "
          "index until the instance id is read again",
          "[lifecycle]") {
  lifecycle_machine m{cfg()};
  bring_up(m, "A", false);
  auto before = m.attempt();
  auto out = m.on_health(engine_health::unreachable, "stream dropped");
  CHECK(find<cmd::deregister>(out));
  CHECK_FALSE(find<cmd::set_ready>(out)->ready);
  CHECK(find<cmd::stop_forwarders>(out));
  CHECK_FALSE(find<cmd::check_instance>(out)); // no reset yet
  CHECK_FALSE(m.identified());
  // A late answer of the old attempt cannot make it ready again.
  CHECK_FALSE(find<cmd::set_ready>(m.on_registered(before, true))->ready);
  CHECK(m.on_next_seq(before, 0, 5).empty());
  // Back: it must prove who it is.
  out = m.on_health(engine_health::serving, "");
  REQUIRE(find<cmd::identify>(out));
  CHECK_FALSE(find<cmd::register_worker>(out));
}

TEST_CASE("lifecycle row: engine back with a new instance id re-registers "
          "as a replacement after the index reset",
          "[lifecycle]") {
  lifecycle_machine m{cfg()};
  bring_up(m, "A", false);
  m.on_health(engine_health::unreachable, "");
  // The indexer sees a new id and resets (answers false).
  bring_up(m, "B", false, 0);
  CHECK(m.info().instance_id == "B");
}

TEST_CASE("lifecycle row: NOT_SERVING deregisters, keeps the index and "
          "re-registers on SERVING without re-reading",
          "[lifecycle]") {
  lifecycle_machine m{cfg()};
  bring_up(m, "A", true, 7);
  auto out = m.on_health(engine_health::not_serving, "sleeping");
  CHECK(find<cmd::deregister>(out));
  CHECK_FALSE(find<cmd::set_ready>(out)->ready);
  CHECK_FALSE(find<cmd::stop_forwarders>(out)); // events still ingested
  CHECK(m.identified());
  out = m.on_health(engine_health::serving, "");
  CHECK_FALSE(find<cmd::identify>(out));
  REQUIRE(find<cmd::register_worker>(out));
  CHECK(find<cmd::register_worker>(out)->record.instance_id == "A");
}

TEST_CASE("lifecycle row: a restarted sidecar recovers the index of the same "
          "instance and forwards from the stored sequence",
          "[lifecycle]") {
  // A new machine is what a restarted sidecar has; the indexer recovered
  // from RocksDB says "same" and next = 1234.
  lifecycle_machine m{cfg()};
  bring_up(m, "A", true, 1234);
}

TEST_CASE("lifecycle row: history lost with --on-kv-gap shutdown-engine "
          "stays deregistered and stops the engine",
          "[lifecycle]") {
  lifecycle_machine m{cfg(true)};
  bring_up(m, "A", false);
  auto out = m.on_kv_gap(0);
  CHECK(find<cmd::deregister>(out));
  REQUIRE(find<cmd::shutdown_engine>(out));
  CHECK(find<cmd::shutdown_engine>(out)->protocol == "vllm");
  // The forwarder catching up again does not bring the record back.
  CHECK_FALSE(find<cmd::register_worker>(m.on_caught_up(0)));
  CHECK_FALSE(m.wants_registration());
}

TEST_CASE("lifecycle row: history lost with --on-kv-gap reset keeps serving",
          "[lifecycle]") {
  lifecycle_machine m{cfg(false)};
  bring_up(m, "A", false);
  // The forwarder reset the rank itself; the registration stands.
  CHECK(m.on_kv_gap(1).empty());
  CHECK(m.wants_registration());
}

TEST_CASE("lifecycle row: SIGTERM turns unready and deregisters for good",
          "[lifecycle]") {
  lifecycle_machine m{cfg()};
  bring_up(m, "A", true);
  auto out = m.on_stopping();
  CHECK(find<cmd::deregister>(out));
  CHECK_FALSE(find<cmd::set_ready>(out)->ready);
  CHECK_FALSE(find<cmd::register_worker>(m.on_caught_up(0)));
  CHECK_FALSE(
    find<cmd::register_worker>(m.on_health(engine_health::serving, "")));
}

TEST_CASE(
  "lifecycle: identity errors retry, and the startup deadline exits only "
  "if the engine never served",
  "[lifecycle]") {
  lifecycle_machine m{cfg()};
  auto deadline = m.on_deadline();
  auto* exit = find<cmd::request_exit>(deadline);
  REQUIRE(exit);
  CHECK(exit->code == 1);
  lifecycle_machine n{cfg()};
  auto out = n.on_health(engine_health::serving, "");
  auto attempt = find<cmd::identify>(out)->attempt;
  out = n.on_identity_failed(attempt, "deadline exceeded");
  auto* retry = find<cmd::retry_later>(out);
  REQUIRE(retry);
  CHECK(find<cmd::identify>(n.on_retry(retry->attempt)));
  CHECK(n.on_retry(retry->attempt).empty()); // that attempt is gone now
  CHECK(n.on_deadline().empty());
}

TEST_CASE("lifecycle: a restarted registrar gets the record again only when "
          "it is wanted",
          "[lifecycle]") {
  lifecycle_machine m{cfg()};
  CHECK(m.on_registrar_restarted().empty()); // nothing to register yet
  bring_up(m, "A", true);
  auto again = m.on_registrar_restarted();
  auto* reg = find<cmd::register_worker>(again);
  REQUIRE(reg);
  CHECK(reg->record.instance_id == "A");
  m.on_health(engine_health::not_serving, "");
  CHECK(m.on_registrar_restarted().empty());
}

TEST_CASE("lifecycle: an indexer that does not answer makes it start over",
          "[lifecycle]") {
  lifecycle_machine m{cfg()};
  auto serving = m.on_health(engine_health::serving, "");
  REQUIRE(find<cmd::identify>(serving));
  auto attempt = find<cmd::identify>(serving)->attempt;
  m.on_identity(attempt, info_of("A"), two_ranks());
  m.on_instance_checked(attempt, true);
  auto out = m.on_next_seq_failed(attempt);
  CHECK(find<cmd::stop_forwarders>(out));
  auto* retry = find<cmd::retry_later>(out);
  REQUIRE(retry);
  CHECK(find<cmd::identify>(m.on_retry(retry->attempt)));
  // An answer of the old attempt starts nothing.
  CHECK(m.on_next_seq(attempt, 0, 3).empty());
}

TEST_CASE("lifecycle: a stopped forwarder makes it re-read the engine",
          "[lifecycle]") {
  lifecycle_machine m{cfg()};
  bring_up(m, "A", true);
  auto out = m.on_forwarder_down(1);
  CHECK(find<cmd::deregister>(out));
  CHECK(find<cmd::identify>(out));
  CHECK_FALSE(m.identified());
}

TEST_CASE("lifecycle row: a store that cannot write withdraws the worker "
          "until it writes again, and says so once",
          "[lifecycle]") {
  lifecycle_machine m{cfg()};
  bring_up(m, "A", false);
  auto out = m.on_index_store(false, "rocksdb: IO error: No space left");
  CHECK(find<cmd::deregister>(out));
  REQUIRE(find<cmd::set_ready>(out));
  CHECK_FALSE(find<cmd::set_ready>(out)->ready);
  REQUIRE(find<cmd::report>(out));
  CHECK(find<cmd::report>(out)->component == "index");
  CHECK_FALSE(m.wants_registration());
  // Told again: nothing new. Caught up again meanwhile: still withdrawn.
  CHECK(m.on_index_store(false, "again").empty());
  CHECK_FALSE(find<cmd::register_worker>(m.on_caught_up(0)));
  // Writable: registered again, with the same engine.
  auto back = m.on_index_store(true, "");
  auto* reg = find<cmd::register_worker>(back);
  REQUIRE(reg);
  CHECK(reg->record.instance_id == "A");
  CHECK(m.wants_registration());
}
