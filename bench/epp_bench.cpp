// The endpoint picker's decision latency at fleet sizes, in one process:
// the router actor (kv mode) told of N simulated workers and their KV
// events, the dispatcher's queue, the endpoint picker on loopback, and a
// client playing the gateway (Envoy ext_proc, buffered body). Per request:
// from the body written to the answer naming the endpoint read back (one
// gRPC round trip on loopback included), p50 and p99; then the response
// leg, which releases the booking. Every worker holds a 2,048-token system
// prompt (128 blocks of 16) and a prefix of its own; each request is the
// system prompt and a suffix of its own, so every worker is a candidate.
// The baseline is the same run with one worker; the ratios are against it.
//
//   build/bench/epp_bench [requests per size, default 2000] [sizes...]
//   build/bench/epp_bench 2000 1 100 1000
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/router/brain/kv_router.hpp"
#include "actors/router/dispatch/dispatch_queue.hpp"
#include "actors/router/frontend/epp_server.hpp"
#include "cluster/grpc_process.hpp"
#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"
#include "runtime/errors.hpp"

using namespace outrider;
using namespace outrider::router;
using clock_type = std::chrono::steady_clock;
namespace pb = envoy::service::ext_proc::v3;

namespace {

constexpr uint32_t block_size = 16;
constexpr uint32_t system_blocks = 128;

struct config : caf::actor_system_config {
  config() {
    outrider::add_error_category(*this);
    set("logger.verbosity", caf::atom("quiet"));
    // The scheduler as the outrider binary sets it (runtime/app.cpp): an
    // idle worker polls briefly, then waits to be woken.
    set("work-stealing.aggressive-poll-attempts", size_t{20});
    set("work-stealing.moderate-poll-attempts", size_t{0});
  }
};

std::vector<uint32_t> span(uint32_t first, size_t n) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = first + static_cast<uint32_t>(i);
  return v;
}

// A worker's stores: the system prompt, then a prefix of its own.
std::shared_ptr<const worker_events> stores_of(const std::string& id,
                                               uint64_t w) {
  auto ev = std::make_shared<worker_events>();
  ev->worker_id = id;
  auto chain = [&](const std::vector<uint32_t>& toks, uint64_t first_hash) {
    kv::block_stored s;
    s.block_size = block_size;
    s.token_ids = toks;
    for (size_t b = 0; b < toks.size() / block_size; ++b)
      s.block_hashes.push_back(first_hash + b);
    return s;
  };
  auto sys = chain(span(1, system_blocks * block_size), (w + 1) << 32);
  auto own = chain(span(100000 + static_cast<uint32_t>(w) * 256, 256),
                   ((w + 1) << 32) + 1000);
  own.parent_block_hash = sys.block_hashes.back();
  ev->events.emplace_back(std::move(sys));
  ev->events.emplace_back(std::move(own));
  return ev;
}

double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * double(v.size() - 1))];
}

void add(pb::HttpHeaders* h, const char* k, const std::string& v) {
  auto* hv = h->mutable_headers()->add_headers();
  hv->set_key(k);
  hv->set_raw_value(v);
}

struct result {
  std::vector<double> us;
  size_t failed = 0;
  double server_mean_us = 0; // outrider_epp_decision_seconds, this run's
};

runtime::histogram& decisions() {
  return runtime::global_metrics().get_histogram(
    "outrider_epp_decision_seconds", "", {});
}

result run(size_t workers, size_t requests) {
  config cfg;
  caf::actor_system sys{cfg};
  auto slot = std::make_shared<runtime::actor_slot<kv_router_actor>>();
  router_config rc;
  auto brain = spawn_kv_router(sys, rc);
  slot->set(brain);
  for (size_t w = 0; w < workers; ++w) {
    cluster::worker_record r;
    r.worker_id = "w" + std::to_string(w);
    r.instance_id = "i" + std::to_string(w);
    r.model = "m";
    r.relay_endpoint = "127.0.0.1:1";
    r.engine_endpoint = "127.0.0.1:1";
    r.protocol = "vllm";
    r.kv_block_size = block_size;
    r.total_kv_blocks = 100000;
    r.http_endpoint = "10." + std::to_string(w / 65536 % 256) + "." +
                      std::to_string(w / 256 % 256) + "." +
                      std::to_string(w % 256) + ":8000";
    caf::anon_send(brain, worker_up_atom::value, r);
    caf::anon_send(brain, kv_events_atom::value, stores_of(r.worker_id, w));
  }
  { // Everything above is applied once this is answered (mailbox order).
    caf::scoped_actor self{sys};
    self->request(brain, std::chrono::seconds{60}, status_atom::value)
      .receive([](const std::string&) {}, [](caf::error&) {});
  }
  auto& depth = runtime::global_metrics().get_gauge("bench_epp_queue", "");
  dispatch_queue queue{sys, slot, depth};
  epp_config ec;
  ec.ready = [] { return true; };
  epp_server epp{queue, [] { return std::vector<std::string>{}; }, ec};
  if (auto err = epp.start("127.0.0.1", 0); !err.empty()) {
    std::fprintf(stderr, "epp_bench: %s\n", err.c_str());
    std::exit(1);
  }
  auto stub = pb::ExternalProcessor::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(epp.port()),
                        grpc::InsecureChannelCredentials()));
  auto prompt = span(1, system_blocks * block_size);
  result out;
  double sum0 = 0;
  uint64_t n0 = 0;
  for (size_t i = 0; i < requests + 50; ++i) { // the first 50 warm up
    grpc::ClientContext ctx;
    auto rw = stub->Process(&ctx);
    pb::ProcessingRequest h;
    add(h.mutable_request_headers(), ":path", "/v1/completions");
    add(h.mutable_request_headers(), ":method", "POST");
    pb::ProcessingResponse resp;
    auto body = nlohmann::json{
      {"prompt",
       [&] {
         auto p = prompt;
         auto s = span(200000 + static_cast<uint32_t>(i) * 64, 64);
         p.insert(p.end(), s.begin(), s.end());
         return p;
       }()},
      {"max_tokens",
       1}}.dump();
    pb::ProcessingRequest b;
    b.mutable_request_body()->set_body(body);
    b.mutable_request_body()->set_end_of_stream(true);
    bool ok = rw->Write(h) && rw->Read(&resp);
    auto t0 = clock_type::now();
    ok = ok && rw->Write(b) && rw->Read(&resp);
    auto took =
      std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
    ok = ok && resp.has_request_body();
    pb::ProcessingRequest rh, rb;
    rh.mutable_response_headers();
    rb.mutable_response_body()->set_end_of_stream(true);
    ok = ok && rw->Write(rh) && rw->Read(&resp) && rw->Write(rb) &&
         rw->Read(&resp);
    rw->WritesDone();
    ok = ok && rw->Finish().ok();
    if (i < 50) {
      sum0 = decisions().sum();
      n0 = decisions().count();
      continue;
    }
    out.failed += !ok;
    out.us.push_back(took);
  }
  out.server_mean_us = (decisions().sum() - sum0) * 1e6 /
                       static_cast<double>(decisions().count() - n0);
  epp.stop();
  caf::anon_send_exit(brain, caf::exit_reason::user_shutdown);
  return out;
}

} // namespace

int main(int argc, char** argv) {
  outrider::cluster::skip_abseil_deadlock_detection(); // as outrider does
  spdlog::set_level(spdlog::level::warn);
  size_t requests = argc > 1 ? std::stoul(argv[1]) : 2000;
  std::vector<size_t> sizes;
  for (int i = 2; i < argc; ++i)
    sizes.push_back(std::stoul(argv[i]));
  if (sizes.empty())
    sizes = {1, 100, 1000};
  auto base = run(1, requests);
  double b50 = pct(base.us, 0.5), b99 = pct(base.us, 0.99);
  std::printf("workers,requests,failed,p50_us,p99_us,p50_vs_1,p99_vs_1,"
              "server_mean_us\n");
  std::printf("1,%zu,%zu,%.1f,%.1f,1.00,1.00,%.1f\n", base.us.size(),
              base.failed, b50, b99, base.server_mean_us);
  for (auto n : sizes) {
    if (n == 1)
      continue;
    auto r = run(n, requests);
    double p50 = pct(r.us, 0.5), p99 = pct(r.us, 0.99);
    std::printf("%zu,%zu,%zu,%.1f,%.1f,%.2f,%.2f,%.1f\n", n, r.us.size(),
                r.failed, p50, p99, p50 / b50, p99 / b99, r.server_mean_us);
    std::fflush(stdout);
  }
  return 0;
}
