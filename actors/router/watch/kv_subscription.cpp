#include "actors/router/watch/kv_subscription.hpp"

#include <spdlog/spdlog.h>

#include "actors/router/watch/jitter.hpp"
#include "cluster/kv/kv_proto.hpp"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace oe = openengine::v1;

namespace {

// Subscriptions that ended, by their gRPC status code (a number: 0 OK,
// 1 CANCELLED, 4 DEADLINE_EXCEEDED, 8 RESOURCE_EXHAUSTED, 14 UNAVAILABLE).
runtime::counter& closures(grpc::StatusCode code) {
  return runtime::global_metrics().get_counter(
    "outrider_router_kv_streams_closed_total",
    "KV event subscriptions to relays that ended (each is opened again "
    "after a pause), by gRPC status code",
    {{"code", std::to_string(static_cast<int>(code))}});
}

} // namespace

void kv_subscription::open() {
  uint64_t attempt = 0;
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (stopping)
      return;
    attempt = ++attempts;
    pending.add();
  }
  seen.clear(); // no read of the last call is left
  auto self = shared_from_this();
  auto ctx = open_kv_stream(
    channel, worker_id, std::chrono::system_clock::time_point::max(),
    {[self](const kv_metadata& md) { return self->answered(md); },
     [self](oe::SubscribeKvEventsResponse& r) { return self->on(r); },
     [self](const grpc::Status& st) { self->closed(st); }});
  std::lock_guard<std::mutex> guard{mtx};
  if (attempt == attempts) // else it is over, and another may be open
    call = std::move(ctx);
  if (stopping)
    call->TryCancel();
}

bool kv_subscription::answered(const kv_metadata&) {
  announce();
  answered_once = true;
  std::lock_guard<std::mutex> guard{mtx};
  backoff = std::chrono::milliseconds{200};
  return true;
}

void kv_subscription::announce() {
  if (announced)
    return;
  if (auto r = router->get()) {
    caf::anon_send(r, worker_up_atom::value, record);
    announced = true;
  }
}

bool kv_subscription::on(oe::SubscribeKvEventsResponse& resp) {
  if (resp.has_error()) {
    spdlog::warn("router: {} event plane: {}", worker_id,
                 resp.error().message());
    return false;
  }
  auto& bad = runtime::global_metrics().get_counter(
    "outrider_router_events_rejected_total",
    "Malformed KV events from sidecars");
  auto ev = std::make_shared<worker_events>();
  ev->worker_id = worker_id;
  ev->rank = static_cast<int>(resp.batch().data_parallel_rank());
  ev->reset = seen.insert(ev->rank).second;
  ev->sent_unix_nanos = resp.batch().timestamp_unix_nanos();
  ev->received = std::chrono::steady_clock::now();
  for (const auto& e : resp.batch().events()) {
    if (auto k = kv::from_proto(e))
      ev->events.push_back(std::move(*k));
    else
      bad.inc();
  }
  announce();
  if (auto r = router->get())
    caf::anon_send(r, kv_events_atom::value,
                   std::shared_ptr<const worker_events>{std::move(ev)});
  return true;
}

void kv_subscription::closed(const grpc::Status& st) {
  closures(st.error_code()).inc();
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (!stopping) {
      pending.add();
      auto wait = jittered(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds{30000});
      pause.arm(std::chrono::system_clock::now() + wait,
                [self = shared_from_this()](bool fired) {
                  if (fired)
                    self->open();
                  self->pending.release();
                });
    }
  }
  pending.release();
}

void kv_subscription::stop() {
  stop_stream(mtx, stopping, call, pause, pending);
  std::lock_guard<std::mutex> guard{mtx};
  pause.reset(); // its callback holds this subscription
}

} // namespace outrider::router
