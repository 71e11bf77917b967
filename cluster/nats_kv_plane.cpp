#include "cluster/nats_kv_plane.hpp"

#include <charconv>
#include <cstring>
#include <nats/nats.h>

#include "runtime/metrics.hpp"

namespace outrider::cluster {

namespace {

constexpr const char* epoch_header = "Outrider-Epoch";
constexpr const char* position_header = "Outrider-Position";
constexpr const char* heartbeat_header = "Outrider-Heartbeat";
constexpr const char* trace_header = "traceparent"; // W3C, as over HTTP
// A longer header is no traceparent (version 00 is 55 characters; later
// versions may add a little): not kept.
constexpr size_t max_traceparent = 256;
// What a router holds for a slow delivery thread before NATS drops (and
// the positions show the loss).
constexpr int pending_messages = 100000;

std::optional<uint64_t> number(const char* text) {
  if (!text)
    return std::nullopt;
  uint64_t v = 0;
  auto end = text + std::strlen(text);
  auto [p, ec] = std::from_chars(text, end, v);
  if (ec != std::errc{} || p != end || p == text)
    return std::nullopt;
  return v;
}

runtime::counter& malformed() {
  return runtime::global_metrics().get_counter(
    "outrider_kv_plane_malformed_total",
    "NATS event-plane messages dropped: headers missing or malformed");
}

} // namespace

std::optional<kv_plane_message> kv_plane_decode(const std::string& subject,
                                                const char* epoch,
                                                const char* position,
                                                const char* heartbeat) {
  auto dot = subject.find('.');
  auto e = number(epoch);
  auto p = number(position);
  if (!e || !p || *e == 0 || dot == std::string::npos)
    return std::nullopt;
  kv_plane_message m;
  m.epoch = *e;
  m.position = *p;
  m.heartbeat = heartbeat && std::strcmp(heartbeat, "1") == 0;
  return m;
}

nats_kv_plane::nats_kv_plane(nats_config cfg) : cfg_(std::move(cfg)) {}

nats_kv_plane::~nats_kv_plane() = default;

caf::error nats_kv_plane::open() {
  auto err = link_.connect(cfg_, [this](bool up) {
    if (up)
      ++connections_;
    if (cfg_.on_connection)
      cfg_.on_connection(up);
  });
  if (!err && link_.connected())
    ++connections_;
  return err;
}

bool nats_kv_plane::publish(const kv_plane_message& m) {
  natsMsg* msg = nullptr;
  auto subject = subject_of(m.worker_id);
  if (natsMsg_Create(&msg, subject.c_str(), nullptr, m.batch.data(),
                     static_cast<int>(m.batch.size())) != NATS_OK)
    return false;
  auto epoch = std::to_string(m.epoch);
  auto position = std::to_string(m.position);
  bool ok =
    natsMsgHeader_Set(msg, epoch_header, epoch.c_str()) == NATS_OK &&
    natsMsgHeader_Set(msg, position_header, position.c_str()) == NATS_OK &&
    (!m.heartbeat ||
     natsMsgHeader_Set(msg, heartbeat_header, "1") == NATS_OK) &&
    (m.traceparent.empty() ||
     natsMsgHeader_Set(msg, trace_header, m.traceparent.c_str()) == NATS_OK) &&
    natsConnection_PublishMsg(link_.get(), msg) == NATS_OK;
  natsMsg_Destroy(msg);
  return ok;
}

caf::error nats_kv_plane::subscribe(handler on_message) {
  on_message_ = std::move(on_message);
  auto deliver = [plane = this](natsMsg* msg) {
    std::string subject = natsMsg_GetSubject(msg);
    const char *e = nullptr, *p = nullptr, *h = nullptr;
    natsMsgHeader_Get(msg, epoch_header, &e);
    natsMsgHeader_Get(msg, position_header, &p);
    natsMsgHeader_Get(msg, heartbeat_header, &h);
    auto m = kv_plane_decode(subject, e, p, h);
    auto prefix = plane->cfg_.kv_subject + ".";
    if (!m || subject.compare(0, prefix.size(), prefix) != 0 ||
        subject.size() == prefix.size()) {
      malformed().inc();
    } else {
      m->worker_id = subject.substr(prefix.size());
      const char* tp = nullptr;
      if (natsMsgHeader_Get(msg, trace_header, &tp) == NATS_OK && tp &&
          std::strlen(tp) <= max_traceparent)
        m->traceparent = tp;
      if (auto n = natsMsg_GetDataLength(msg); n > 0)
        m->batch.assign(natsMsg_GetData(msg), static_cast<size_t>(n));
      plane->on_message_(std::move(*m));
    }
  };
  return link_.subscribe(cfg_.kv_subject + ".>", deliver, pending_messages);
}

} // namespace outrider::cluster
