#include "actors/sidecar/kv_publisher.hpp"

#include <spdlog/spdlog.h>

#include "cluster/kv/kv_proto.hpp"
#include "runtime/metrics.hpp"

namespace outrider::sidecar {

namespace {

// Batches the publisher may fall behind the hub before it starts again.
constexpr size_t backlog = 100000;
constexpr auto heartbeat_every = std::chrono::seconds{1};

} // namespace

void batch_to_proto(const indexer::kv_batch& b,
                    openengine::v1::KvEventBatch* out) {
  out->set_sequence_number(b.seq);
  out->set_timestamp_unix_nanos(b.unix_nanos);
  out->set_data_parallel_rank(static_cast<uint32_t>(b.rank));
  for (const auto& ev : b.events)
    kv::to_proto(ev, out->add_events());
}

kv_publisher::kv_publisher(std::shared_ptr<event_hub> hub,
                           std::shared_ptr<cluster::nats_kv_plane> plane,
                           std::string worker_id,
                           std::shared_ptr<trace::tracer> tracer)
  : hub_(std::move(hub)), plane_(std::move(plane)),
    worker_id_(std::move(worker_id)), tracer_(std::move(tracer)) {
  resubscribe();
  thread_ = std::thread([this] { run(); });
}

kv_publisher::~kv_publisher() {
  {
    std::lock_guard<std::mutex> guard{wake_->mtx};
    wake_->stopping = true;
  }
  wake_->cv.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void kv_publisher::resubscribe() {
  sub_ = std::make_shared<kv_subscription>(std::set<int>{}, backlog);
  hub_->subscribe(sub_, std::nullopt);
}

void kv_publisher::run() {
  auto& m = runtime::global_metrics();
  auto& published = m.get_counter("outrider_kv_plane_published_total",
                                  "KV batches published on the NATS plane");
  auto& failed = m.get_counter(
    "outrider_kv_plane_publish_failures_total",
    "KV batches NATS refused (too big, closed) or the publisher fell behind "
    "on: routers see the gap and resynchronise");
  uint64_t last = 0;
  auto beat = std::chrono::steady_clock::now() + heartbeat_every;
  for (;;) {
    {
      auto& w = *wake_;
      std::unique_lock<std::mutex> lock{w.mtx};
      if (w.stopping)
        return;
      if (!w.pending) {
        bool armed = sub_->notify_once([weak = std::weak_ptr<wake>{wake_}] {
          if (auto s = weak.lock()) {
            std::lock_guard<std::mutex> guard{s->mtx};
            s->pending = true;
            s->cv.notify_all();
          }
        });
        if (armed)
          w.cv.wait_until(lock, beat, [&] { return w.pending || w.stopping; });
      }
      w.pending = false;
    }
    if (sub_->overflowed()) {
      failed.inc();
      spdlog::warn("sidecar: the NATS event plane fell {} batches behind; "
                   "starting again from the live end",
                   backlog);
      resubscribe();
    }
    for (const auto& b : sub_->take()) {
      cluster::kv_plane_message msg;
      msg.worker_id = worker_id_;
      msg.epoch = hub_->epoch();
      msg.position = b->position;
      openengine::v1::KvEventBatch proto;
      batch_to_proto(*b, &proto);
      proto.SerializeToString(&msg.batch);
      // A new trace at the sample ratio (a batch has no caller).
      std::optional<trace::span> span;
      if (tracer_ && tracer_->enabled()) {
        span.emplace(tracer_->start_entry("sidecar.kv_publish", std::nullopt,
                                          trace::span_kind::producer));
        if (span->recording()) {
          span->set("outrider.worker_id", worker_id_)
            .set("messaging.system", "nats")
            .set("messaging.destination.name", plane_->subject_of(worker_id_))
            .set("outrider.kv.epoch", static_cast<int64_t>(msg.epoch))
            .set("outrider.kv.position", static_cast<int64_t>(msg.position))
            .set("outrider.kv.rank", static_cast<int64_t>(b->rank))
            .set("outrider.kv.events", static_cast<int64_t>(b->events.size()));
          msg.traceparent = trace::traceparent_of(span->context());
        }
      }
      bool ok = plane_->publish(msg);
      if (ok)
        published.inc();
      else
        failed.inc();
      if (span) {
        if (!ok)
          span->fail("NATS refused the message");
        span->end();
      }
      last = b->position;
    }
    if (auto now = std::chrono::steady_clock::now(); now >= beat) {
      beat = now + heartbeat_every;
      cluster::kv_plane_message hb;
      hb.worker_id = worker_id_;
      hb.epoch = hub_->epoch();
      hb.position = last;
      hb.heartbeat = true;
      plane_->publish(hb);
    }
  }
}

} // namespace outrider::sidecar
