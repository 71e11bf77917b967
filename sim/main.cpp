// outrider-sim: a stand-in for a vLLM engine that speaks the real protocols.
#include <csignal>
#include <cstdio>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <nlohmann/json.hpp>

#include "cluster/grpc_process.hpp"
#include "runtime/http/server.hpp"
#include "sim/fleet/fleet_config.hpp"
#include "sim/openai_http.hpp"
#include "sim/sim_options.hpp"
#include "sim/sim_server.hpp"

namespace {

using namespace outrider;
using namespace outrider::sim;

int fail(const std::string& msg, int code) {
  std::fprintf(stderr, "outrider-sim: error: %s\n", msg.c_str());
  return code;
}

runtime::http_response json_answer(int status, std::string body) {
  runtime::http_response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

// POST /debug/kv_inject: {"rank": 0, "payload_hex": "...", "repeat": 1} or
// {"rank": 0, "frames_hex": [...]}, published as if the engine had.
runtime::http_response inject_route(sim_engine& e,
                                    const runtime::http_request& req) {
  auto doc = nlohmann::json::parse(req.body, nullptr, false);
  auto rank = doc.is_object() ? doc.value("rank", 0) : -1;
  if (rank < 0 || rank >= e.ranks())
    return json_answer(
      400, "{\"error\":\"need a JSON object with a valid rank\"}\n");
  auto unhex = [](const std::string& h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2)
      out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
  };
  try {
    if (doc.contains("payload_hex")) {
      // "repeat": the same payload as that many sequenced batches.
      auto repeat = doc.value("repeat", 1);
      if (repeat < 1 || repeat > 100000)
        return json_answer(400, "{\"error\":\"repeat is 1 to 100000\"}\n");
      auto payload = unhex(doc["payload_hex"].get<std::string>());
      for (int i = 0; i < repeat; ++i)
        e.runner(rank).inject_payload(payload);
    } else {
      std::vector<std::string> frames;
      for (const auto& f : doc.at("frames_hex"))
        frames.push_back(unhex(f.get<std::string>()));
      e.runner(rank).inject_frames(std::move(frames));
    }
  } catch (const std::exception& ex) {
    return json_answer(400, nlohmann::json{{"error", ex.what()}}.dump() + "\n");
  }
  return json_answer(200, "{\"ok\":true}\n");
}

// GET /debug/cache?rank=N and /debug/load?rank=N: the engine's ground truth.
runtime::http_response truth_route(sim_engine& e,
                                   const runtime::http_request& req) {
  int rank = 0;
  auto q = req.target.find("rank=");
  if (q != std::string::npos)
    rank = std::atoi(req.target.c_str() + q + 5);
  if (rank < 0 || rank >= e.ranks())
    return json_answer(400, "{\"error\":\"no such rank\"}\n");
  nlohmann::json doc;
  doc["rank"] = rank;
  doc["instance_id"] = e.instance_id();
  if (req.path == "/debug/cache") {
    auto& blocks = doc["blocks"] = nlohmann::json::array();
    for (const auto& b : e.runner(rank).cache_snapshot()) {
      nlohmann::json j;
      j["hash"] = b.hash;
      j["parent"] = b.parent ? nlohmann::json(*b.parent) : nlohmann::json();
      j["token_ids"] = b.token_ids;
      j["medium"] = kv::to_string(b.medium);
      blocks.push_back(std::move(j));
    }
  } else if (req.path == "/debug/load") {
    auto l = e.runner(rank).load();
    doc["running"] = l.running;
    doc["waiting"] = l.waiting;
    doc["used_blocks"] = l.used_blocks;
    doc["total_blocks"] = l.total_blocks;
    doc["malformed_replay_requests"] = e.malformed_replay_requests(rank);
  } else {
    return json_answer(404,
                       "{\"error\":\"try /debug/cache?rank=N, "
                       "/debug/load?rank=N or POST /reset_prefix_cache\"}\n");
  }
  return json_answer(200, doc.dump() + "\n");
}

// The gauges vLLM (v1) exposes on its /metrics that planners read, named
// as vLLM names them, one series per data-parallel rank (`engine`).
std::string engine_metrics(sim_engine& e) {
  struct gauge {
    const char* name;
    const char* help;
    double (*of)(const engine_load&);
  };
  static const gauge gauges[] = {
    {"vllm:num_requests_running",
     "Number of requests in model execution batches.",
     [](const engine_load& l) { return static_cast<double>(l.running); }},
    {"vllm:num_requests_waiting", "Number of requests waiting to be processed.",
     [](const engine_load& l) { return static_cast<double>(l.waiting); }},
    {"vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
     [](const engine_load& l) {
       return l.total_blocks == 0 ? 0.0
                                  : static_cast<double>(l.used_blocks) /
                                      static_cast<double>(l.total_blocks);
     }},
  };
  std::string out;
  for (const auto& g : gauges) {
    out += std::string("# HELP ") + g.name + " " + g.help + "\n# TYPE " +
           g.name + " gauge\n";
    for (int r = 0; r < e.ranks(); ++r)
      out += std::string(g.name) + "{engine=\"" + std::to_string(r) +
             "\",model_name=\"" + e.config().model + "\"} " +
             std::to_string(g.of(e.runner(r).load())) + "\n";
  }
  return out;
}

// Ground truth and vLLM's /reset_prefix_cache, for tests and operators.
runtime::http_response debug_route(sim_engine& e,
                                   const runtime::http_request& req) {
  if (req.path == "/reset_prefix_cache" && req.method == "POST") {
    for (int k = 0; k < e.ranks(); ++k)
      e.runner(k).reset_prefix_cache();
    return json_answer(200, "{\"ok\":true}\n");
  }
  if (req.path == "/debug/kv_inject" && req.method == "POST")
    return inject_route(e, req);
  if (req.path == "/debug/kv_lose" && req.method == "POST") {
    // The next KV batch of every rank is lost on the wire (fault tests).
    for (int k = 0; k < e.ranks(); ++k)
      e.runner(k).lose_next_kv_message();
    return json_answer(200, "{\"ok\":true}\n");
  }
  if (req.path == "/debug/kv_renumber" && req.method == "POST") {
    // The KV publishers number from 0 again (a restarted publisher).
    for (int k = 0; k < e.ranks(); ++k)
      e.runner(k).renumber_kv_messages();
    return json_answer(200, "{\"ok\":true}\n");
  }
  if (req.path == "/debug/kv_replay_drip" && req.method == "POST") {
    // From now on replays get malformed frames dripped, never an end.
    for (int k = 0; k < e.ranks(); ++k)
      e.runner(k).drip_malformed_replays();
    return json_answer(200, "{\"ok\":true}\n");
  }
  if (req.method != "GET")
    return json_answer(405, "{\"error\":\"use GET\"}\n");
  if (req.path == "/kv_event_sources") // vLLM's HTTP KV event discovery
    return json_answer(200, vllm_kv_event_sources_json(e));
  if (req.path == "/metrics") // vLLM's own gauges, per rank
    return {200, "text/plain; version=0.0.4", engine_metrics(e), {}};
  if (req.path == "/debug/traces") // the traceparent of the last calls
    return json_answer(200, nlohmann::json(e.traces()).dump() + "\n");
  return truth_route(e, req);
}

// SERVING once the simulated loading time is over, until SIGTERM/SIGINT.
void serve_until_signal(sim_engine& engine, const sim_config& cfg,
                        const sigset_t& signals) {
  auto loaded_at = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds{cfg.startup_delay_ms};
  bool loaded = false;
  timespec tick{0, 10'000'000};
  for (;;) {
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT)
      return;
    if (!loaded && std::chrono::steady_clock::now() >= loaded_at) {
      loaded = true;
      engine.set_loaded(true);
      std::fprintf(stderr, "outrider-sim: SERVING\n");
    }
  }
}

// Drain: NOT_SERVING, new requests refused, running ones finish or are
// aborted at the deadline.
void drain(sim_engine& engine, const sim_config& cfg) {
  engine.begin_drain();
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds{cfg.drain_timeout_ms};
  auto all_idle = [&] {
    for (int r = 0; r < engine.ranks(); ++r)
      if (!engine.runner(r).idle())
        return false;
    return true;
  };
  while (!all_idle() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  for (int r = 0; r < engine.ranks(); ++r)
    engine.runner(r).abort_all();
}

int run(int argc, char** argv) {
  cluster::skip_abseil_deadlock_detection(); // cluster/grpc_process.hpp
  std::vector<std::string> args(argv + 1, argv + argc);
  // `--fleet N`: many simulated workers in one process (sim/fleet/).
  for (const auto& a : args)
    if (a == "--fleet" || a.rfind("--fleet=", 0) == 0) {
      auto fleet = parse_fleet_options(args);
      if (fleet.what == fleet_parse_result::help) {
        std::fputs(fleet.message.c_str(), stdout);
        return 0;
      }
      if (fleet.what == fleet_parse_result::error)
        return fail(fleet.message, 2);
      return run_fleet(fleet.cfg);
    }
  auto parsed = parse_sim_options(args);
  if (parsed.what == sim_parse_result::help) {
    std::fputs(parsed.message.c_str(), stdout);
    return 0;
  }
  if (parsed.what == sim_parse_result::error)
    return fail(parsed.message, 2);
  auto cfg = parsed.cfg;

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  sim_engine engine{cfg};
  if (auto err = engine.start(); !err.empty())
    return fail(err, 1);

  grpc::EnableDefaultHealthCheckService(true);
  auto vllm_inference = make_vllm_inference(engine);
  auto vllm_control = make_vllm_control(engine);
  auto vllm_kv_transfer = make_vllm_kv_transfer(engine);
  auto oe_inference = make_openengine_inference(engine);
  auto oe_control = make_openengine_control(engine);
  auto sglang = make_sglang_service(engine, cfg.sglang_cumulative_output);
  auto bootstrap = make_bootstrap_service(
    engine.rooms(), std::chrono::milliseconds{cfg.bootstrap_timeout_ms});
  grpc::ServerBuilder builder;
  auto address = cfg.host + ":" + std::to_string(cfg.grpc_port);
  int bound = 0;
  // Not gRPC's default SO_REUSEPORT: a port another process holds is an
  // error here, not a silent share of its connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound);
  if (cfg.serves("vllm")) {
    builder.RegisterService(vllm_inference.get());
    builder.RegisterService(vllm_control.get());
    if (cfg.vllm_kv_transfer)
      builder.RegisterService(vllm_kv_transfer.get());
  }
  if (cfg.serves("openengine")) {
    builder.RegisterService(oe_inference.get());
    builder.RegisterService(oe_control.get());
  }
  if (cfg.serves("sglang")) {
    builder.RegisterService(sglang.get());
    builder.RegisterService(bootstrap.get());
  }
  builder.SetMaxReceiveMessageSize(64 << 20);
  auto server = builder.BuildAndStart();
  if (!server || bound == 0)
    return fail("cannot listen on " + address, 1);
  engine.attach(server.get());
  engine.set_loaded(false); // NOT_SERVING while "loading"

  std::unique_ptr<runtime::http_server> debug;
  if (cfg.debug_port > 0) {
    debug = std::make_unique<runtime::http_server>(
      "sim_debug",
      runtime::http_server::handler{[&engine](const runtime::http_request& r) {
        return debug_route(engine, r);
      }});
    if (auto err =
          debug->start(cfg.host, static_cast<uint16_t>(cfg.debug_port)))
      return fail("debug server: " + outrider::describe(err), 1);
  }
  std::unique_ptr<openai_http> http;
  if (cfg.http_port > 0) {
    std::shared_ptr<const text::tokenizer> tok;
    std::shared_ptr<const text::chat_template> chat;
    if (!cfg.tokenizer_dir.empty()) {
      std::string why;
      tok = text::tokenizer::load(cfg.tokenizer_dir, &why);
      if (!tok)
        return fail("--tokenizer: " + why, 2);
      if (!tok->chat_template().empty())
        chat = text::chat_template::compile(tok->chat_template(), &why);
    }
    http = std::make_unique<openai_http>(engine, tok, chat);
    if (auto err = http->start(cfg.host, cfg.http_port); !err.empty())
      return fail(err, 1);
  }
  std::fprintf(stderr, "outrider-sim: instance %s on %s, %d rank(s), role %s\n",
               engine.instance_id().c_str(), address.c_str(), engine.ranks(),
               outrider::engine::to_string(cfg.role));

  serve_until_signal(engine, cfg, signals);
  drain(engine, cfg);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds{2});
  if (http)
    http->stop();
  if (debug)
    debug->stop();
  std::fprintf(stderr, "outrider-sim: stopped\n");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
}
