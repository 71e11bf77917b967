#include "tests/e2e/sim_process.hpp"

#include <unistd.h>

#include "grpc/health/v1/health.grpc.pb.h"

namespace outrider::test {

sim_process::sim_process(options o) : opts(std::move(o)) {
  grpc = free_port();
  debug = free_port();
  pub = free_port_block(opts.ranks);
  replay = free_port_block(opts.ranks);
  if (opts.start_now)
    start();
}

void sim_process::start() {
  proc.reset(); // a running one is killed first
  nlohmann::json kv = {
    {"enable_kv_cache_events", true},
    {"publisher", "zmq"},
    {"endpoint", "tcp://*:" + std::to_string(pub)},
    {"topic", "kv-events"},
    {"buffer_steps", opts.buffer_steps},
  };
  if (opts.replay)
    kv["replay_endpoint"] = "tcp://*:" + std::to_string(replay);
  std::vector<std::string> args{OUTRIDER_SIM_BIN,
                                "--grpc-port",
                                std::to_string(grpc),
                                "--debug-port",
                                std::to_string(debug),
                                "--kv-events-config",
                                kv.dump(),
                                "--kv-event-encoding",
                                opts.encoding,
                                "--replay-topic-frame",
                                opts.replay_topic_frame ? "true" : "false",
                                "--data-parallel-size",
                                std::to_string(opts.ranks),
                                "--disaggregation-mode",
                                opts.role,
                                "--startup-delay",
                                opts.startup_delay,
                                "--block-size",
                                std::to_string(opts.block_size),
                                "--num-gpu-blocks-override",
                                std::to_string(opts.num_blocks),
                                "--speedup",
                                "100"};
  args.insert(args.end(), opts.extra.begin(), opts.extra.end());
  proc = std::make_unique<child_process>(args);
}

std::shared_ptr<grpc::Channel> sim_process::channel() const {
  // Short reconnect backoff: the engine may still be starting. Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC takes it as the minimum time
  // a connection attempt is given (20 s by default), and at 50 ms a
  // sanitized engine on a busy machine once missed it ("connection attempt
  // timed out before receiving SETTINGS frame": a direct Generate failed).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 250);
  return grpc::CreateCustomChannel(endpoint(),
                                   grpc::InsecureChannelCredentials(), args);
}

bool sim_process::wait_serving(std::chrono::milliseconds timeout) const {
  auto stub = grpc::health::v1::Health::NewStub(channel());
  return eventually(
    [&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds{500});
      ctx.set_wait_for_ready(true);
      grpc::health::v1::HealthCheckRequest req;
      grpc::health::v1::HealthCheckResponse resp;
      return stub->Check(&ctx, req, &resp).ok() &&
             resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    },
    timeout);
}

nlohmann::json sim_process::cache(int rank) const {
  std::string body;
  if (http_get(debug, "/debug/cache?rank=" + std::to_string(rank), &body) !=
      200)
    return nullptr;
  return nlohmann::json::parse(body, nullptr, false);
}

int sim_process::running(int rank) const {
  std::string body;
  if (http_get(debug, "/debug/load?rank=" + std::to_string(rank), &body) != 200)
    return -1;
  auto doc = nlohmann::json::parse(body, nullptr, false);
  return doc.is_object() && doc["running"].is_number_integer()
           ? doc["running"].get<int>()
           : -1;
}

bool sim_process::post_debug(const std::string& path,
                             const std::string& body) const {
  std::vector<std::string> args{"/usr/bin/curl", "-s", "-f", "-X", "POST"};
  if (!body.empty()) {
    args.push_back("-d");
    args.push_back(body);
  }
  args.push_back("http://127.0.0.1:" + std::to_string(debug) + path);
  child_process curl{args};
  return curl.wait(std::chrono::seconds{10}) == 0;
}

} // namespace outrider::test
