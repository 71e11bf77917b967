#include "actors/router/watch/kv_follower.hpp"

#include <charconv>
#include <set>

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "actors/router/watch/jitter.hpp"
#include "cluster/kv/kv_proto.hpp"
#include "cluster/tls.hpp"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace oe = openengine::v1;

namespace {

// What is kept from NATS while a snapshot is being taken.
constexpr size_t max_held = 100000;
constexpr auto snapshot_deadline = std::chrono::seconds{10};

runtime::counter& resyncs(const std::string& reason) {
  return runtime::global_metrics().get_counter(
    "outrider_router_kv_resyncs_total",
    "Workers resynchronised from a sidecar snapshot on the NATS event plane, "
    "by reason (start, gap, epoch: the sidecar restarted, heartbeat: the "
    "last batch was lost, reconnect, overflow, malformed)",
    {{"reason", reason}});
}

std::optional<uint64_t>
metadata_number(const std::multimap<grpc::string_ref, grpc::string_ref>& md,
                const char* key) {
  auto i = md.find(key);
  if (i == md.end())
    return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] =
    std::from_chars(i->second.data(), i->second.data() + i->second.size(), v);
  if (ec != std::errc{} || p != i->second.data() + i->second.size())
    return std::nullopt;
  return v;
}

} // namespace

struct kv_follower::snapshot_result {
  std::string reason;
  bool complete = false;
  uint64_t epoch = 0, position = 0, count = 0;
  std::vector<oe::KvEventBatch> batches;
};

kv_follower::kv_follower(cluster::worker_record record,
                         runtime::slot_ptr<kv_router_actor> router,
                         std::shared_ptr<grpc::ChannelCredentials> creds,
                         std::string tls_server_name,
                         std::shared_ptr<trace::tracer> tracer)
  : record_(std::move(record)), router_(std::move(router)),
    tracer_(std::move(tracer)),
    channel_(
      cluster::relay_channel(record_.relay_endpoint, creds, tls_server_name)),
    start_pending_(true), resync_reason_("start") {
  maybe_start();
}

kv_follower::~kv_follower() {
  stop_stream(mtx_, stopping_, call_, pause_, pending_);
}

void kv_follower::resync(const std::string& reason) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    request_resync(reason);
  }
  maybe_start();
}

void kv_follower::request_resync(const std::string& reason) {
  following_ = false;
  held_.clear();
  if (resync_reason_.empty())
    resync_reason_ = reason;
  if (!snapshotting_ && !backing_off_)
    start_pending_ = true;
}

void kv_follower::on_message(cluster::kv_plane_message m) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!following_) {
      if (held_.size() >= max_held) {
        resync_reason_.clear();
        request_resync("overflow"); // start the snapshot again, keep anew
      } else {
        held_.push_back(std::move(m));
      }
    } else {
      follow(std::move(m), true);
    }
  }
  maybe_start();
}

void kv_follower::follow(cluster::kv_plane_message m, bool live) {
  // A traced batch: its receipt under the publisher's span (held ones
  // are recorded again when replayed).
  std::optional<trace::span> span;
  if (tracer_ && !m.traceparent.empty())
    if (auto ctx = trace::parse_traceparent(m.traceparent))
      span.emplace(tracer_->start_child("router.kv_receive", *ctx,
                                        trace::span_kind::consumer));
  auto position = m.position;
  size_t events = 0;
  const char* outcome = follow_batch(m, live, &events);
  if (span && span->recording()) {
    span->set("outrider.worker_id", record_.worker_id)
      .set("outrider.kv.position", static_cast<int64_t>(position))
      .set("outrider.kv.events", static_cast<int64_t>(events))
      .set("outrider.kv.outcome", outcome)
      .set("outrider.kv.replayed", !live);
    span->end();
  }
}

const char* kv_follower::follow_batch(cluster::kv_plane_message& m, bool live,
                                      size_t* events) {
  if (m.epoch == retired_epoch_)
    return "retired"; // late news from the sidecar's previous life
  if (m.epoch != epoch_) {
    request_resync("epoch");
    if (live) // may be the first the next snapshot lacks
      held_.push_back(std::move(m));
    return "new_epoch";
  }
  if (m.heartbeat) {
    if (m.position > position_)
      request_resync("heartbeat");
    return "heartbeat";
  }
  if (m.position <= position_)
    return "known"; // the snapshot holds it already
  if (m.position != position_ + 1) {
    // Live: the missing ones may follow the next snapshot. Just after a
    // snapshot: no sidecar publishes past its own position, so it is
    // dropped (else a bogus message would resynchronise for ever).
    request_resync("gap");
    if (live)
      held_.push_back(std::move(m));
    return "gap";
  }
  // In an arena: one block for the whole batch instead of an allocation
  // per message and string (kv_stream.cpp says why).
  google::protobuf::Arena arena{kv_batch_arena_options()};
  auto& batch =
    *google::protobuf::Arena::CreateMessage<oe::KvEventBatch>(&arena);
  if (!batch.ParseFromString(m.batch)) {
    request_resync("malformed");
    return "malformed";
  }
  position_ = m.position;
  *events = static_cast<size_t>(batch.events_size());
  deliver(static_cast<int>(batch.data_parallel_rank()), false, batch);
  return "applied";
}

void kv_follower::deliver(int rank, bool reset, const oe::KvEventBatch& batch) {
  auto& bad = runtime::global_metrics().get_counter(
    "outrider_router_events_rejected_total",
    "Malformed KV events from sidecars");
  auto ev = std::make_shared<worker_events>();
  ev->worker_id = record_.worker_id;
  ev->rank = rank;
  ev->reset = reset;
  ev->sent_unix_nanos = batch.timestamp_unix_nanos();
  ev->received = std::chrono::steady_clock::now();
  for (const auto& e : batch.events()) {
    if (auto k = kv::from_proto(e))
      ev->events.push_back(std::move(*k));
    else
      bad.inc();
  }
  std::lock_guard<std::mutex> guard{announce_mtx_};
  auto r = router_->get();
  if (!r)
    return;
  if (!std::exchange(announced_, true))
    caf::anon_send(r, worker_up_atom::value, record_);
  caf::anon_send(r, kv_events_atom::value,
                 std::shared_ptr<const worker_events>{std::move(ev)});
}

void kv_follower::maybe_start() {
  auto snap = std::make_shared<snapshot_result>();
  uint64_t attempt = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_ || !start_pending_)
      return;
    attempt = ++attempts_;
    start_pending_ = false;
    snapshotting_ = true;
    snap->reason.swap(resync_reason_);
    pending_.add();
  }
  resyncs(snap->reason).inc();
  auto ctx = open_kv_stream(
    channel_, record_.worker_id,
    std::chrono::system_clock::now() + snapshot_deadline,
    {[snap](const kv_metadata& md) {
       auto epoch = metadata_number(md, kv::kv_epoch_key);
       auto position = metadata_number(md, kv::kv_position_key);
       auto count = metadata_number(md, kv::kv_batches_key);
       if (!epoch || !position || !count ||
           *count > cluster::max_data_parallel_size)
         return false;
       snap->epoch = *epoch;
       snap->position = *position;
       snap->count = *count;
       snap->complete = *count == 0;
       return !snap->complete; // nothing to read: done
     },
     [snap](oe::SubscribeKvEventsResponse& resp) {
       if (!resp.has_batch())
         return false;
       snap->batches.push_back(std::move(*resp.mutable_batch()));
       snap->complete = snap->batches.size() == snap->count;
       return !snap->complete; // the snapshot is in: the rest comes by NATS
     },
     [this, snap](const grpc::Status& st) { snapshot_done(*snap, st); }});
  std::lock_guard<std::mutex> guard{mtx_};
  if (attempt == attempts_) // else it is over, and another may be open
    call_ = std::move(ctx);
  if (stopping_)
    call_->TryCancel();
}

void kv_follower::snapshot_done(snapshot_result& snap, const grpc::Status& st) {
  if (snap.complete)
    apply(snap);
  else
    failed(snap, st);
  maybe_start();
  pending_.release();
}

void kv_follower::failed(snapshot_result& snap, const grpc::Status& st) {
  spdlog::warn("router: no snapshot from {} at {}: {}", record_.worker_id,
               record_.relay_endpoint,
               st.ok() || st.error_code() == grpc::StatusCode::CANCELLED
                 ? std::string{"no snapshot position in its answer"}
                 : st.error_message());
  std::lock_guard<std::mutex> guard{mtx_};
  snapshotting_ = false;
  if (resync_reason_.empty())
    resync_reason_ = snap.reason;
  if (stopping_)
    return;
  backing_off_ = true;
  pending_.add();
  // Jittered, as the gRPC plane's subscriptions: followers of many records
  // that failed together retry apart.
  pause_.arm(std::chrono::system_clock::now() + jittered(backoff_),
             [this](bool fired) {
               {
                 std::lock_guard<std::mutex> guard{mtx_};
                 backing_off_ = false;
                 start_pending_ = fired && !resync_reason_.empty();
               }
               maybe_start();
               pending_.release();
             });
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds{5000});
}

void kv_follower::apply(const snapshot_result& snap) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    backoff_ = std::chrono::milliseconds{200};
  }
  // Every rank starts again from the snapshot; ranks it lacks hold none.
  std::set<int> ranks;
  for (const auto& b : snap.batches)
    ranks.insert(static_cast<int>(b.data_parallel_rank()));
  for (uint32_t r = 0; r < record_.data_parallel_size; ++r)
    if (!ranks.count(static_cast<int>(r)))
      deliver(static_cast<int>(r), true, oe::KvEventBatch{});
  for (const auto& b : snap.batches)
    deliver(static_cast<int>(b.data_parallel_rank()), true, b);
  std::lock_guard<std::mutex> guard{mtx_};
  snapshotting_ = false;
  if (!resync_reason_.empty()) {
    start_pending_ = true; // asked again meanwhile (a reconnect, an overflow)
    return;
  }
  if (epoch_ != snap.epoch)
    retired_epoch_ = epoch_;
  epoch_ = snap.epoch;
  position_ = snap.position;
  following_ = true;
  auto held = std::move(held_);
  held_.clear();
  for (auto& m : held) {
    if (!following_)
      break; // a gap in what was held: another snapshot
    follow(std::move(m), false);
  }
}

} // namespace outrider::router
