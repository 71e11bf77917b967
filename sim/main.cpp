// outrider-sim: a stand-in for a vLLM engine. This first cut serves
// grpc.health.v1 and vllm.Control (server info, pause/resume); the engine core,
// generation and KV events are still to come.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "vllm.grpc.pb.h"

namespace {

std::string random_instance_id() {
  std::random_device rd;
  std::mt19937_64 gen{(static_cast<uint64_t>(rd()) << 32) ^ rd()};
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                static_cast<unsigned long long>(gen()),
                static_cast<unsigned long long>(gen()));
  return buf;
}

class control_service final : public vllm::Control::Service {
 public:
  control_service(std::string instance_id, grpc::Server** server)
    : instance_id_(std::move(instance_id)), server_(server) {}

  grpc::Status GetServerInfo(grpc::ServerContext*,
                             const vllm::GetServerInfoRequest*,
                             vllm::ServerInfo* out) override {
    out->set_engine_version("outrider-sim 0.1.0");
    out->set_api_version("v1");
    out->set_instance_id(instance_id_);
    out->mutable_parallelism()->set_data_parallel_size(1);
    out->set_kv_block_size(64);
    out->set_total_kv_blocks(16384);
    out->set_max_running_requests(256);
    out->set_max_batched_tokens(8192);
    return grpc::Status::OK;
  }

  grpc::Status PauseGeneration(grpc::ServerContext*,
                               const vllm::PauseGenerationRequest*,
                               vllm::PauseGenerationResponse*) override {
    paused_ = true;
    set_serving(false);
    return grpc::Status::OK;
  }

  grpc::Status ResumeGeneration(grpc::ServerContext*,
                                const vllm::ResumeGenerationRequest*,
                                vllm::ResumeGenerationResponse*) override {
    paused_ = false;
    set_serving(loaded_.load());
    return grpc::Status::OK;
  }

  grpc::Status IsPaused(grpc::ServerContext*, const vllm::IsPausedRequest*,
                        vllm::IsPausedResponse* out) override {
    out->set_paused(paused_.load());
    return grpc::Status::OK;
  }

  void set_loaded() {
    loaded_ = true;
    set_serving(!paused_.load());
  }

  void set_serving(bool serving) {
    if (*server_)
      (*server_)->GetHealthCheckService()->SetServingStatus(serving);
  }

 private:
  std::string instance_id_;
  grpc::Server** server_;
  std::atomic<bool> paused_{false};
  std::atomic<bool> loaded_{false};
};

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "outrider-sim: error: %s\n", msg.c_str());
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  int port = 50051;
  long startup_delay_ms = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    if (a == "--help" || a == "-h") {
      std::puts("Usage: outrider-sim [--grpc-port N] [--startup-delay-ms N]\n"
                "A simulated vLLM engine: grpc.health.v1 and vllm.Control.");
      return 0;
    } else if (a == "--grpc-port") {
      auto v = value();
      if (!v)
        return usage_error("--grpc-port needs a value");
      port = std::atoi(v);
    } else if (a == "--startup-delay-ms") {
      auto v = value();
      if (!v)
        return usage_error("--startup-delay-ms needs a value");
      startup_delay_ms = std::atol(v);
    } else {
      return usage_error("unknown flag '" + a + "'");
    }
  }
  if (port <= 0 || port > 65535)
    return usage_error("--grpc-port must be between 1 and 65535");

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::Server* server_ptr = nullptr;
  control_service control{random_instance_id(), &server_ptr};
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&control);
  auto server = builder.BuildAndStart();
  if (!server)
    return usage_error("cannot listen on 127.0.0.1:" + std::to_string(port));
  server_ptr = server.get();
  control.set_serving(false);
  std::fprintf(stderr, "outrider-sim: listening on 127.0.0.1:%d\n", port);

  auto loaded_at = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds{startup_delay_ms};
  bool loaded = false;
  timespec tick{0, 20'000'000};
  for (;;) {
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT)
      break;
    if (!loaded && std::chrono::steady_clock::now() >= loaded_at) {
      loaded = true;
      control.set_loaded();
      std::fprintf(stderr, "outrider-sim: SERVING\n");
    }
  }
  control.set_serving(false);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds{2});
  return 0;
}
