#include "actors/router/kv_follower.hpp"

#include <charconv>
#include <set>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/kv/kv_proto.hpp"
#include "cluster/tls.hpp"
#include "openengine.grpc.pb.h"
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
  uint64_t epoch = 0, position = 0;
  std::vector<oe::KvEventBatch> batches;
};

kv_follower::kv_follower(cluster::worker_record record,
                         runtime::slot_ptr<kv_router_actor> router,
                         std::shared_ptr<grpc::ChannelCredentials> creds,
                         std::string tls_server_name)
  : record_(std::move(record)), router_(std::move(router)),
    creds_(std::move(creds)), server_name_(std::move(tls_server_name)),
    resync_reason_("start") {
  thread_ = std::thread([this] { run(); });
}

kv_follower::~kv_follower() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    if (call_)
      call_->TryCancel();
  }
  wake_.notify_all();
  thread_.join();
}

void kv_follower::resync(const std::string& reason) {
  std::lock_guard<std::mutex> guard{mtx_};
  request_resync(reason);
}

void kv_follower::request_resync(const std::string& reason) {
  following_ = false;
  held_.clear();
  if (resync_reason_.empty())
    resync_reason_ = reason;
  wake_.notify_all();
}

void kv_follower::on_message(cluster::kv_plane_message m) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!following_) {
    if (held_.size() >= max_held) {
      resync_reason_.clear();
      request_resync("overflow"); // start the snapshot again, keep anew
      return;
    }
    held_.push_back(std::move(m));
    return;
  }
  follow(std::move(m), true);
}

void kv_follower::follow(cluster::kv_plane_message m, bool live) {
  if (m.epoch == retired_epoch_)
    return; // late news from the sidecar's previous life
  if (m.epoch != epoch_) {
    request_resync("epoch");
    if (live) // may be the first the next snapshot lacks
      held_.push_back(std::move(m));
    return;
  }
  if (m.heartbeat) {
    if (m.position > position_)
      request_resync("heartbeat");
    return;
  }
  if (m.position <= position_)
    return; // the snapshot holds it already
  if (m.position != position_ + 1) {
    // Live: the missing ones may follow the next snapshot. Just after a
    // snapshot: no sidecar publishes past its own position, so it is
    // dropped (else a bogus message would resynchronise for ever).
    request_resync("gap");
    if (live)
      held_.push_back(std::move(m));
    return;
  }
  oe::KvEventBatch batch;
  if (!batch.ParseFromString(m.batch)) {
    request_resync("malformed");
    return;
  }
  position_ = m.position;
  deliver(static_cast<int>(batch.data_parallel_rank()), false, batch);
}

void kv_follower::deliver(int rank, bool reset, const oe::KvEventBatch& batch) {
  auto& bad = runtime::global_metrics().get_counter(
    "outrider_router_events_rejected_total",
    "Malformed KV events from sidecars");
  auto ev = std::make_shared<worker_events>();
  ev->worker_id = record_.worker_id;
  ev->rank = rank;
  ev->reset = reset;
  for (const auto& e : batch.events()) {
    if (auto k = kv::from_proto(e))
      ev->events.push_back(std::move(*k));
    else
      bad.inc();
  }
  if (auto r = router_->get())
    caf::anon_send(r, kv_events_atom::value,
                   std::shared_ptr<const worker_events>{std::move(ev)});
}

bool kv_follower::take_snapshot(snapshot_result& out) {
  auto stub = oe::Control::NewStub(
    cluster::relay_channel(record_.relay_endpoint, creds_, server_name_));
  auto ctx = std::make_shared<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + snapshot_deadline);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_)
      return false;
    call_ = ctx;
  }
  oe::SubscribeKvEventsRequest req;
  req.set_include_snapshot(true);
  auto reader = stub->SubscribeKvEvents(ctx.get(), req);
  reader->WaitForInitialMetadata();
  const auto& md = ctx->GetServerInitialMetadata();
  auto epoch = metadata_number(md, kv::kv_epoch_key);
  auto position = metadata_number(md, kv::kv_position_key);
  auto count = metadata_number(md, kv::kv_batches_key);
  bool ok =
    epoch && position && count && *count <= cluster::max_data_parallel_size;
  oe::SubscribeKvEventsResponse resp;
  for (uint64_t i = 0; ok && i < *count; ++i) {
    ok = reader->Read(&resp) && resp.has_batch();
    if (ok)
      out.batches.push_back(std::move(*resp.mutable_batch()));
  }
  ctx->TryCancel();
  auto st = reader->Finish();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    call_.reset();
  }
  if (!ok)
    spdlog::warn("router: no snapshot from {} at {}: {}", record_.worker_id,
                 record_.relay_endpoint,
                 st.ok() || st.error_code() == grpc::StatusCode::CANCELLED
                   ? std::string{"no snapshot position in its answer"}
                   : st.error_message());
  out.epoch = epoch.value_or(0);
  out.position = position.value_or(0);
  return ok;
}

void kv_follower::run() {
  auto backoff = std::chrono::milliseconds{200};
  for (;;) {
    std::string reason;
    {
      std::unique_lock<std::mutex> lock{mtx_};
      wake_.wait(lock, [this] { return stopping_ || !resync_reason_.empty(); });
      if (stopping_)
        return;
      reason.swap(resync_reason_);
    }
    resyncs(reason).inc();
    snapshot_result snap;
    if (!take_snapshot(snap)) {
      std::unique_lock<std::mutex> lock{mtx_};
      if (resync_reason_.empty())
        resync_reason_ = reason;
      wake_.wait_for(lock, backoff, [this] { return stopping_; });
      backoff = std::min(backoff * 2, std::chrono::milliseconds{5000});
      continue;
    }
    backoff = std::chrono::milliseconds{200};
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
    if (!resync_reason_.empty())
      continue; // asked again meanwhile (a reconnect, an overflow)
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
}

} // namespace outrider::router
