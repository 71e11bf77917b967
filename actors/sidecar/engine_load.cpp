#include "actors/sidecar/engine_load.hpp"

#include <algorithm>
#include <optional>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "openengine.grpc.pb.h"
#include "runtime/metrics.hpp"

namespace outrider::sidecar {

namespace oe = openengine::v1;

namespace {

constexpr uint32_t max_ranks = 64;
constexpr auto unimplemented_retry = std::chrono::minutes{1};

runtime::gauge& engine_gauge(const char* name, const char* help,
                             const char* state, const std::string& rank) {
  runtime::label_set labels{{"state", state}};
  if (!rank.empty())
    labels.emplace_back("dp_rank", rank);
  return runtime::global_metrics().get_gauge(name, help, labels);
}

runtime::counter& reports(const char* outcome) {
  return runtime::global_metrics().get_counter(
    "outrider_engine_load_reports_total",
    "The engine's load reports (OpenEngine GetLoad) asked for, by outcome",
    {{"outcome", outcome}});
}

} // namespace

struct engine_load_gauges::impl {
  std::chrono::milliseconds interval;
  std::unique_ptr<oe::Control::Stub> stub;
  std::optional<std::chrono::steady_clock::time_point> last_ok; // none yet
  runtime::gauge* age = nullptr;

  // One report into the gauges.
  void take(const oe::LoadInfo& l) {
    static constexpr const char* requests_help =
      "Requests the engine reports, running or queued (OpenEngine GetLoad)";
    static constexpr const char* blocks_help =
      "KV cache blocks the engine reports, used and total (OpenEngine "
      "GetLoad)";
    auto per_rank = [&](const std::string& rank, uint64_t running,
                        uint64_t queued, uint64_t used, uint64_t total) {
      engine_gauge("outrider_engine_requests", requests_help, "running", rank)
        .set(static_cast<double>(running));
      engine_gauge("outrider_engine_requests", requests_help, "queued", rank)
        .set(static_cast<double>(queued));
      engine_gauge("outrider_engine_kv_blocks", blocks_help, "used", rank)
        .set(static_cast<double>(used));
      engine_gauge("outrider_engine_kv_blocks", blocks_help, "total", rank)
        .set(static_cast<double>(total));
    };
    if (l.ranks_size() == 0)
      per_rank("0", l.running_requests(), l.queued_requests(),
               l.used_kv_blocks(), l.total_kv_blocks());
    for (const auto& r : l.ranks())
      if (r.data_parallel_rank() < max_ranks)
        per_rank(std::to_string(r.data_parallel_rank()), r.running_requests(),
                 r.queued_requests(), r.used_kv_blocks(), r.total_kv_blocks());
    static constexpr const char* tokens_help =
      "Tokens of the engine's running and waiting requests (OpenEngine "
      "GetLoad)";
    engine_gauge("outrider_engine_tokens", tokens_help, "running", "")
      .set(static_cast<double>(l.running_tokens()));
    engine_gauge("outrider_engine_tokens", tokens_help, "waiting", "")
      .set(static_cast<double>(l.waiting_tokens()));
  }
};

engine_load_gauges::engine_load_gauges(std::string engine_endpoint,
                                       std::chrono::milliseconds interval)
  : impl_(std::make_unique<impl>()) {
  impl_->interval = std::max(interval, std::chrono::milliseconds{100});
  impl_->stub = oe::Control::NewStub(
    grpc::CreateChannel(engine_endpoint, grpc::InsecureChannelCredentials()));
  impl_->age = &runtime::global_metrics().get_gauge(
    "outrider_engine_load_age_seconds",
    "Seconds since the engine last reported its load (-1: never)");
  impl_->age->set(-1);
  thread_ = std::thread([this] { run(); });
}

engine_load_gauges::~engine_load_gauges() {
  stop();
}

void engine_load_gauges::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void engine_load_gauges::run() {
  auto& p = *impl_;
  bool warned = false;
  for (;;) {
    auto wait = p.interval;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::min(p.interval, std::chrono::milliseconds{2000}));
    oe::GetLoadRequest req;
    req.set_include_per_rank(true);
    oe::LoadInfo out;
    auto st = p.stub->GetLoad(&ctx, req, &out);
    auto now = std::chrono::steady_clock::now();
    if (st.ok()) {
      reports("ok").inc();
      p.take(out);
      p.last_ok = now;
      warned = false;
    } else if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      reports("unimplemented").inc();
      if (!warned)
        spdlog::info("sidecar: the engine reports no load (OpenEngine "
                     "GetLoad: {}); asking again in a minute",
                     st.error_message());
      warned = true;
      wait = unimplemented_retry;
    } else {
      reports("failed").inc();
    }
    if (p.last_ok)
      p.age->set(std::chrono::duration<double>(now - *p.last_ok).count());
    std::unique_lock<std::mutex> lock{mtx_};
    if (wake_.wait_for(lock, wait, [&] { return stopping_; }))
      return;
  }
}

} // namespace outrider::sidecar
