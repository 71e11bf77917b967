// The span recorder and its OTLP/HTTP exporter (one thread, bounded queue).
// outrider's own: no OpenTelemetry C++ SDK is packaged in Debian bookworm.
#include "cluster/trace/tracer.hpp"

#include <spdlog/spdlog.h>

#include "cluster/trace/otlp_encode.hpp"
#include "runtime/http/client.hpp"

namespace outrider::trace {

namespace {

// A span's attributes and events at most, and an attribute's text: values
// can come from clients (a model name), so a span's size is bounded.
constexpr size_t max_attributes = 32;
constexpr size_t max_events = 32;
constexpr size_t max_value_bytes = 256;

runtime::counter& dropped_counter(runtime::metrics_registry& m,
                                  const char* reason) {
  return m.get_counter("outrider_trace_spans_dropped_total",
                       "Spans not exported: the queue was full, the export "
                       "failed, or the process stopped first",
                       {{"reason", reason}});
}

} // namespace

span& span::operator=(span&& other) noexcept {
  if (this != &other) {
    end();
    owner_ = std::move(other.owner_);
    rec_ = std::move(other.rec_);
    under_ = std::move(other.under_);
  }
  return *this;
}

span::~span() {
  end();
}

span& span::set(std::string key, attr_value v) {
  if (!rec_ || rec_->attributes.size() >= max_attributes)
    return *this;
  if (auto* s = std::get_if<std::string>(&v); s && s->size() > max_value_bytes)
    s->resize(max_value_bytes);
  for (auto& [k, old] : rec_->attributes)
    if (k == key) {
      old = std::move(v);
      return *this;
    }
  rec_->attributes.emplace_back(std::move(key), std::move(v));
  return *this;
}

void span::event(std::string name, wall_time at) {
  if (rec_ && rec_->events.size() < max_events)
    rec_->events.push_back({at, std::move(name)});
}

void span::fail(std::string message) {
  if (!rec_)
    return;
  rec_->error = true;
  if (message.size() > max_value_bytes)
    message.resize(max_value_bytes);
  rec_->status_message = std::move(message);
}

void span::end(wall_time at) {
  if (!rec_)
    return;
  under_ = rec_->self; // children started after the end still hang here
  rec_->end = std::max(at, rec_->start);
  auto owner = std::move(owner_);
  owner->finish(std::move(rec_));
}

std::optional<otlp_endpoint> parse_otlp_endpoint(const std::string& url,
                                                 std::string* why) {
  auto e = runtime::parse_http_url(url, "/v1/traces", why);
  if (!e)
    *why += " (OTLP over HTTP, port 4318 by convention; TLS is not spoken: "
            "run the collector beside outrider)";
  return e;
}

std::shared_ptr<tracer> tracer::make(tracer_settings s,
                                     runtime::metrics_registry& m) {
  std::shared_ptr<tracer> t{new tracer(std::move(s), m)};
  if (t->enabled())
    t->thread_ = std::thread([raw = t.get()] { raw->run(); });
  return t;
}

tracer::tracer(tracer_settings s, runtime::metrics_registry& m)
  : cfg_(std::move(s)),
    exported_(&m.get_counter("outrider_trace_spans_exported_total",
                             "Spans a collector accepted (OTLP/HTTP)")),
    dropped_full_(&dropped_counter(m, "queue_full")),
    dropped_failed_(&dropped_counter(m, "export_failed")),
    dropped_shutdown_(&dropped_counter(m, "shutdown")),
    export_failures_(&m.get_counter(
      "outrider_trace_export_failures_total",
      "Export requests the collector did not accept (unreachable, timed "
      "out, not 2xx)")),
    queued_(
      &m.get_gauge("outrider_trace_queue_spans", "Spans waiting for export")) {}

tracer::~tracer() {
  stop();
}

span tracer::recording(std::string name, const trace_context& self,
                       const span_id& parent, span_kind kind, wall_time at) {
  span s;
  s.owner_ = shared_from_this();
  s.rec_ = std::make_unique<span_record>();
  s.rec_->self = self;
  s.rec_->parent = parent;
  s.rec_->name = std::move(name);
  s.rec_->kind = kind;
  s.rec_->start = at;
  return s;
}

span tracer::start_entry(std::string name,
                         const std::optional<trace_context>& in, span_kind kind,
                         wall_time at) {
  if (in && in->valid())
    return start_child(std::move(name), *in, kind, at);
  if (!enabled())
    return {};
  trace_context self;
  self.trace = new_trace_id();
  if (!sampled_at(self.trace, cfg_.sample_ratio))
    return {}; // not sampled: nothing to pass on either
  self.span = new_span_id();
  self.flags = 1;
  return recording(std::move(name), self, span_id{}, kind, at);
}

span tracer::start_child(std::string name, const trace_context& parent,
                         span_kind kind, wall_time at) {
  if (!enabled() || !parent.valid() || !parent.sampled()) {
    span s;
    s.under_ = parent; // passed on as it came
    return s;
  }
  trace_context self = parent;
  self.span = new_span_id();
  return recording(std::move(name), self, parent.span, kind, at);
}

span tracer::start_event(std::string name, wall_time at) {
  if (!enabled())
    return {};
  trace_context self;
  self.trace = new_trace_id();
  self.span = new_span_id();
  self.flags = 1;
  return recording(std::move(name), self, span_id{}, span_kind::internal, at);
}

void tracer::finish(std::unique_ptr<span_record> rec) {
  bool stopped = false;
  {
    std::lock_guard lk{mtx_};
    stopped = stopping_;
    if (!stopped && queue_.size() < cfg_.queue_cap) {
      queue_.push_back(std::move(rec));
      queued_->set(static_cast<double>(queue_.size()));
      if (queue_.size() >= cfg_.batch)
        wake_.notify_one();
      return;
    }
  }
  (stopped ? dropped_shutdown_ : dropped_full_)->inc();
}

void tracer::run() {
  std::vector<std::unique_ptr<span_record>> batch;
  for (;;) {
    bool last = false;
    {
      std::unique_lock lk{mtx_};
      wake_.wait_for(lk, cfg_.interval,
                     [&] { return stopping_ || queue_.size() >= cfg_.batch; });
      last = stopping_;
      while (!queue_.empty() && batch.size() < cfg_.batch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_->set(static_cast<double>(queue_.size()));
    }
    if (!batch.empty())
      export_batch(batch);
    if (last) {
      // What did not fit the last batch goes with the process: counted.
      std::lock_guard lk{mtx_};
      dropped_shutdown_->inc(queue_.size());
      queue_.clear();
      queued_->set(0);
      return;
    }
  }
}

void tracer::export_batch(std::vector<std::unique_ptr<span_record>>& batch) {
  auto body = encode_export(cfg_, batch);
  auto n = batch.size();
  batch.clear();
  const auto& e = *cfg_.endpoint;
  auto got = runtime::http_post(e.host, e.port, e.target, body,
                                "application/x-protobuf", cfg_.timeout, 65536);
  if (got.error.empty() && got.status >= 200 && got.status < 300) {
    exported_->inc(n);
    return;
  }
  dropped_failed_->inc(n);
  export_failures_->inc();
  // One line a minute at most: a collector that is down must not flood.
  auto now = std::chrono::steady_clock::now();
  if (now - last_log_ >= std::chrono::minutes{1}) {
    last_log_ = now;
    spdlog::warn("tracing: {} spans dropped, the collector at {}:{}{} did "
                 "not take them ({}); counted in "
                 "outrider_trace_spans_dropped_total",
                 n, e.host, e.port, e.target,
                 got.error.empty() ? "HTTP " + std::to_string(got.status)
                                   : got.error);
  }
}

void tracer::stop() {
  {
    std::lock_guard lk{mtx_};
    if (stopping_)
      return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable())
    thread_.join();
}

} // namespace outrider::trace
