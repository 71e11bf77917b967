#include "actors/sidecar/kv_forwarder.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <zmq.hpp>

#include <spdlog/spdlog.h>

#include "actors/sidecar/kv_replay_client.hpp"
#include "actors/sidecar/kv_sequencer.hpp"
#include "cluster/kv/kv_decoder.hpp"
#include "cluster/kv/seq_frame.hpp"
#include "runtime/metrics.hpp"

namespace outrider::sidecar {

namespace {

using clock_type = std::chrono::steady_clock;

// How long replays may fail to answer for one gap before its history counts
// as lost.
constexpr auto unanswered_replay_limit = std::chrono::seconds{5};

enum class catch_up_result {
  done,
  waiting,
  /// No replay covers the gap (no endpoint, or none answered in time).
  unrecoverable,
};

struct forwarder_state {
  forwarder_state() = default;
  forwarder_config cfg;
  std::unique_ptr<zmq::socket_t> sub;
  kv_sequencer seq;
  bool caught_up = false;
  clock_type::time_point last_log{};
  // Since when replays for the current gap have not answered.
  std::optional<clock_type::time_point> unanswered_since;
  static inline const char* name = "kv_forwarder";

  // Counter handles, each looked up in the registry once, on first use (a
  // series appears only once something happened), except those alerts
  // read (gaps), registered at start: deploy/prometheus.
  struct lazy_counter {
    const char* name;
    const char* help;
    runtime::counter* c = nullptr;
  };
  lazy_counter batches{"outrider_kv_batches_received_total",
                       "KV event batches received from the engine"};
  lazy_counter replays{"outrider_kv_replay_requests_total",
                       "Replays asked of the engine"};
  lazy_counter duplicates{"outrider_kv_duplicates_total",
                          "Live batches already applied (after a replay)"};
  lazy_counter gaps{"outrider_kv_gaps_total",
                    "Sequence gaps in the live stream"};
  lazy_counter unrecoverable{"outrider_kv_gaps_unrecoverable_total",
                             "Gaps the engine's replay could not cover"};
  std::map<std::string, runtime::counter*> rejected; // by reason

  runtime::counter& handle(const char* name, const char* help,
                           const std::string& reason = {}) {
    runtime::label_set labels;
    if (!reason.empty())
      labels.emplace_back("reason", reason);
    labels.emplace_back("rank", std::to_string(cfg.source.rank));
    return runtime::global_metrics().get_counter(name, help, labels);
  }

  runtime::counter& counter(lazy_counter& l) {
    if (!l.c)
      l.c = &handle(l.name, l.help);
    return *l.c;
  }

  void reject(const std::string& reason, const std::string& detail,
              uint64_t n = 1) {
    auto& c = rejected[reason];
    if (!c)
      c = &handle("outrider_kv_events_rejected_total",
                  "KV frames or events rejected, by reason", reason);
    c->inc(n);
    // Logged at most once a second: bad input must not flood the log.
    auto now = clock_type::now();
    if (now - last_log > std::chrono::seconds{1}) {
      last_log = now;
      spdlog::warn("kv_forwarder[{}]: rejected ({}): {}", cfg.source.rank,
                   reason, detail);
    }
  }
};

using self_ptr = kv_forwarder_actor::stateful_pointer<forwarder_state>;

replay_result replay(self_ptr self, uint64_t from) {
  auto& st = self->state;
  if (st.cfg.source.replay_endpoint.empty())
    return {};
  st.counter(st.replays).inc();
  return ask_replay(*st.cfg.zmq, st.cfg.source.replay_endpoint, from,
                    st.cfg.max_message_bytes,
                    [&](const std::string& reason, const std::string& detail) {
                      st.reject(reason, detail);
                    });
}

void apply(self_ptr self, uint64_t seq, const std::string& payload) {
  auto& st = self->state;
  auto b = std::make_shared<indexer::kv_batch>();
  b->rank = st.cfg.source.rank;
  b->seq = seq;
  auto r = kv::decode_kv_batch(payload.data(), payload.size(),
                               st.cfg.max_batch_events);
  if (!r.ok) {
    // The sequence still advances: an empty batch keeps the index in step.
    st.reject(kv::to_string(r.error), r.detail);
  } else {
    // Counted once per reason and batch, not looked up per event.
    std::map<kv::kv_reject, uint64_t> by_reason;
    for (auto why : r.batch.rejected)
      ++by_reason[why];
    for (auto [why, n] : by_reason)
      st.reject(kv::to_string(why), std::to_string(n) + " event(s) left out",
                n);
    b->events = std::move(r.batch.events);
  }
  st.counter(st.batches).inc();
  if (auto idx = st.cfg.indexer->get())
    self->send(idx, indexer::apply_atom::value,
               std::shared_ptr<const indexer::kv_batch>{std::move(b)});
}

// Replays from the next expected sequence; handles history the engine no
// longer has.
// History before `plan.resume` is gone: the indexer resets the rank (and
// tells subscribers), the lifecycle applies --on-kv-gap.
void lose_history(self_ptr self, const kv_sequencer::replay_plan& plan,
                  const char* why) {
  auto& st = self->state;
  st.counter(st.unrecoverable).inc();
  if (plan.resume < plan.lost_from)
    spdlog::warn("kv_forwarder[{}]: the publisher numbers from {} again "
                 "(expected {}): it restarted; resetting the rank",
                 st.cfg.source.rank, plan.resume, plan.lost_from);
  else
    spdlog::warn("kv_forwarder[{}]: history {}..{} is gone ({}); resetting "
                 "the rank",
                 st.cfg.source.rank, plan.lost_from, plan.resume - 1, why);
  st.cfg.tracer->start_event("sidecar.kv_reset")
    .set("outrider.dp_rank", int64_t{st.cfg.source.rank})
    .set("outrider.lost_from", static_cast<int64_t>(plan.lost_from))
    .set("outrider.resume", static_cast<int64_t>(plan.resume))
    .set("outrider.reason", plan.resume < plan.lost_from ? "restarted" : why);
  if (auto idx = st.cfg.indexer->get())
    self->send(idx, indexer::reset_rank_atom::value,
               int32_t{st.cfg.source.rank}, plan.resume);
  caf::anon_send(st.cfg.parent, kv_gap_atom::value,
                 int32_t{st.cfg.source.rank});
}

// Replays from the next expected sequence up to `upto_hint` (the live batch
// that showed the gap; 0 at start). A gap that no replay covers is lost
// history: the rank is reset and the stream goes on from the live batch, so
// the index never freezes behind a gap.
catch_up_result catch_up(self_ptr self, uint64_t upto_hint) {
  auto& st = self->state;
  auto from = st.seq.next();
  auto r = replay(self, from);
  if (!r.ok && upto_hint <= from) {
    // At start: nothing to replay without an endpoint; otherwise wait for
    // an answer, at most the limit, then the stored history of the rank
    // cannot be vouched for: it is reset and the stream goes on.
    if (st.cfg.source.replay_endpoint.empty())
      return catch_up_result::done;
    auto now = clock_type::now();
    if (!st.unanswered_since)
      st.unanswered_since = now;
    if (now - *st.unanswered_since < unanswered_replay_limit)
      return catch_up_result::waiting;
    st.unanswered_since.reset();
    kv_sequencer::replay_plan unknown;
    unknown.lost = true;
    unknown.lost_from = from;
    unknown.resume = from;
    lose_history(self, unknown, "the replay did not answer");
    return catch_up_result::done;
  }
  if (!r.ok) {
    // A slow engine gets a few more live batches to answer; after that (or
    // with no replay endpoint at all) the history is lost.
    auto now = clock_type::now();
    if (!st.unanswered_since)
      st.unanswered_since = now;
    bool none = st.cfg.source.replay_endpoint.empty();
    if (none || now - *st.unanswered_since >= unanswered_replay_limit) {
      st.unanswered_since.reset();
      return catch_up_result::unrecoverable;
    }
    return catch_up_result::done;
  }
  st.unanswered_since.reset();
  std::vector<uint64_t> seqs;
  seqs.reserve(r.batches.size());
  for (const auto& b : r.batches)
    seqs.push_back(b.first);
  auto plan = st.seq.plan_replay(seqs);
  if (plan.lost)
    lose_history(self, plan, "older than the engine's replay buffer");
  // The plan has moved the sequencer past these already.
  for (auto i : plan.apply)
    apply(self, r.batches[i].first, r.batches[i].second);
  return catch_up_result::done;
}

// A live batch no replay explains: held until a run of them confirms
// where the publisher is (kv_sequencer::stray), then the rank is reset
// and the run applied. One bogus sequence never freezes the stream.
void take_stray(self_ptr self, uint64_t seq, std::string payload,
                const char* why) {
  auto& st = self->state;
  auto plan = st.seq.stray(seq, std::move(payload));
  if (plan.dropped)
    st.reject("sequence_unconfirmed",
              "a run of unexplained sequences was not confirmed", plan.dropped);
  if (!plan.adopt)
    return;
  lose_history(self, plan.reset, why);
  for (auto& [s, p] : plan.apply) {
    apply(self, s, p);
    st.seq.applied(s);
  }
}

void poll_once(self_ptr self) {
  auto& st = self->state;
  if (!st.caught_up) {
    // "Caught up" only after a replay that answered (or history given up
    // on by the gap policy): until then the next poll asks again.
    if (catch_up(self, 0) == catch_up_result::waiting)
      return;
    st.caught_up = true;
    caf::anon_send(st.cfg.parent, caught_up_atom::value,
                   int32_t{st.cfg.source.rank});
  }
  zmq::pollitem_t item{st.sub->handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, std::chrono::milliseconds{20});
  // Bounded per poll so that exit messages are seen.
  for (int n = 0; n < 4096; ++n) {
    std::vector<zmq::message_t> frames;
    zmq::message_t first;
    if (!st.sub->recv(first, zmq::recv_flags::dontwait))
      return;
    bool more = first.more();
    frames.push_back(std::move(first));
    while (more && frames.size() < 8) {
      zmq::message_t m;
      if (!st.sub->recv(m))
        break;
      more = m.more();
      frames.push_back(std::move(m));
    }
    while (more) { // drain an oversized message
      zmq::message_t m;
      if (!st.sub->recv(m))
        break;
      more = m.more();
    }
    if (!frames.empty() &&
        frames.back().size() > static_cast<size_t>(st.cfg.max_message_bytes)) {
      st.reject("oversized_frame", std::to_string(frames.back().size()) +
                                     " bytes, at most " +
                                     std::to_string(st.cfg.max_message_bytes));
      continue;
    }
    if (frames.size() != 3 || frames[1].size() != 8) {
      st.reject("malformed_frame",
                std::to_string(frames.size()) + " frames, sequence of " +
                  std::to_string(frames.size() > 1 ? frames[1].size() : 0) +
                  " bytes");
      continue;
    }
    auto seq = kv::decode_seq(frames[1].data());
    auto v = st.seq.classify(seq);
    using verdict = kv_sequencer::verdict;
    if (v == verdict::gap) {
      st.counter(st.gaps).inc();
      // While strays are held, their run is being checked: no replay.
      if (st.seq.held() > 0) {
        take_stray(self, seq, frames[2].to_string(), "no replay covered it");
        continue;
      }
      if (catch_up(self, seq) == catch_up_result::unrecoverable) {
        take_stray(self, seq, frames[2].to_string(),
                   st.cfg.source.replay_endpoint.empty()
                     ? "the engine has no replay endpoint"
                     : "the replay did not answer");
        continue;
      }
      v = st.seq.classify(seq);
    }
    if (v == verdict::duplicate) {
      if (st.seq.echo(seq))
        st.counter(st.duplicates).inc();
      else // behind, and no replay explains it: a restarted publisher?
        take_stray(self, seq, frames[2].to_string(), "numbered again");
    } else if (v == verdict::apply) {
      if (auto n = st.seq.settle())
        st.reject("sequence_unconfirmed",
                  "unexplained sequences, then the expected one", n);
      apply(self, seq, frames[2].to_string());
      st.seq.applied(seq);
    } else
      st.reject("sequence_ahead", "sequence " + std::to_string(seq) +
                                    " beyond the engine's history");
  }
}

kv_forwarder_actor::behavior_type forwarder(self_ptr self,
                                            forwarder_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.seq = kv_sequencer{st.cfg.next_seq};
  st.counter(st.gaps);
  st.counter(st.unrecoverable);
  st.sub = std::make_unique<zmq::socket_t>(*st.cfg.zmq, zmq::socket_type::sub);
  st.sub->set(zmq::sockopt::subscribe, st.cfg.source.topic);
  st.sub->set(zmq::sockopt::linger, 0);
  // No ZeroMQ maxmsgsize here: libzmq ends a connection that exceeds it
  // as a protocol error and never reconnects, which would silence the
  // engine for good. Oversized live frames are refused after receipt.
  st.sub->set(zmq::sockopt::rcvhwm, 100000);
  st.sub->connect(st.cfg.source.endpoint);
  spdlog::info("kv_forwarder[{}]: {} (replay {}), from sequence {}",
               st.cfg.source.rank, st.cfg.source.endpoint,
               st.cfg.source.replay_endpoint.empty()
                 ? "none"
                 : st.cfg.source.replay_endpoint,
               st.seq.next());
  self->send(self, poll_atom::value);
  return {
    [=](poll_atom) {
      try {
        poll_once(self);
      } catch (const zmq::error_t& e) {
        spdlog::warn("kv_forwarder[{}]: {}", self->state.cfg.source.rank,
                     e.what());
      }
      self->send(self, poll_atom::value);
    },
    [=](indexer::resync_atom, int32_t, uint64_t expected) {
      auto& st = self->state;
      auto was = st.seq.next();
      if (!st.seq.resync(expected))
        return;
      spdlog::info("kv_forwarder[{}]: indexer expects {}, I am at {}",
                   st.cfg.source.rank, expected, was);
      catch_up(self, 0);
    },
  };
}

} // namespace

kv_forwarder_actor spawn_kv_forwarder(caf::actor_system& sys,
                                      forwarder_config cfg) {
  return sys.spawn<caf::detached>(forwarder, std::move(cfg));
}

} // namespace outrider::sidecar
