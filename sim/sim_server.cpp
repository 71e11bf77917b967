#include "sim/sim_server.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <xxhash.h>

#include <grpcpp/health_check_service_interface.h>

namespace outrider::sim {

namespace {

std::string random_hex(size_t words) {
  std::random_device rd;
  std::mt19937_64 gen{(static_cast<uint64_t>(rd()) << 32) ^ rd()};
  std::string out;
  for (size_t i = 0; i < words; ++i) {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx",
                  static_cast<unsigned long long>(gen()));
    out += buf;
  }
  return out;
}

} // namespace

grpc::Status take_identity(const sim_config& cfg, const std::string& lora,
                           const std::string& cache_salt, engine_request& req) {
  if (!lora.empty() &&
      std::find(cfg.lora_adapters.begin(), cfg.lora_adapters.end(), lora) ==
        cfg.lora_adapters.end())
    return {grpc::StatusCode::NOT_FOUND,
            "LoRA adapter '" + lora.substr(0, 128) + "' is not loaded"};
  if (cache_salt.size() > 1024)
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "cache_salt is over 1024 bytes"};
  req.lora = lora;
  req.cache_salt = cache_salt;
  return grpc::Status::OK;
}

grpc::Status take_media(const openengine::v1::GenerateRequest& in,
                        uint32_t item_tokens, engine_request& req) {
  if (in.media_size() > 64)
    return {grpc::StatusCode::INVALID_ARGUMENT, "more than 64 media items"};
  for (const auto& m : in.media()) {
    if (m.url().empty() || m.offset() > req.prompt.size())
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "a media item needs a url and an offset within the prompt"};
    char id[24];
    std::snprintf(id, sizeof id, "url-%016llx",
                  static_cast<unsigned long long>(
                    XXH3_64bits(m.url().data(), m.url().size())));
    req.media.push_back(kv::media_span{
      m.uuid().empty() ? std::string{id} : m.uuid(), m.offset(), item_tokens});
  }
  return grpc::Status::OK;
}

void sim_engine::note_trace(const grpc::ServerContext& ctx) {
  auto it = ctx.client_metadata().find("traceparent");
  std::string tp = it == ctx.client_metadata().end()
                     ? std::string{}
                     : std::string(it->second.data(), it->second.size());
  std::lock_guard<std::mutex> guard{mtx_};
  traces_.push_back(std::move(tp));
  if (traces_.size() > 64)
    traces_.pop_front();
}

std::vector<std::string> sim_engine::traces() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return {traces_.begin(), traces_.end()};
}

grpc::Status rank_from_metadata(const grpc::ServerContext& ctx,
                                const std::string& key, int ranks, int* rank) {
  *rank = -1;
  auto [first, last] = ctx.client_metadata().equal_range(key);
  if (first == last)
    return grpc::Status::OK;
  if (std::next(first) != last)
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "metadata '" + key + "' is repeated"};
  std::string v(first->second.data(), first->second.size());
  if (v.empty() || v.size() > 9 ||
      v.find_first_not_of("0123456789") != std::string::npos)
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "metadata '" + key + "' must be a base-10 integer, got '" + v +
              "'"};
  int r = std::stoi(v);
  if (r >= ranks)
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "metadata '" + key + "': rank " + v +
              " does not exist (ranks: " + std::to_string(ranks) + ")"};
  *rank = r;
  return grpc::Status::OK;
}

sim_engine::sim_engine(sim_config cfg)
  : cfg_(std::move(cfg)), instance_id_(random_hex(2)), zmq_(1) {
  // Engine hashes are salted per process, like vLLM's random seed.
  cfg_.engine.hash_salt = std::stoull(random_hex(1), nullptr, 16);
}

sim_engine::~sim_engine() {
  runners_.clear();
  publishers_.clear();
}

std::string sim_engine::start() {
  for (int r = 0; r < cfg_.data_parallel_size; ++r) {
    kv_publisher* pub = nullptr;
    if (cfg_.kv_events) {
      publisher_config pc;
      pc.endpoint = rank_endpoint(cfg_.kv_endpoint, r);
      if (!cfg_.kv_replay_endpoint.empty())
        pc.replay_endpoint = rank_endpoint(cfg_.kv_replay_endpoint, r);
      pc.topic = cfg_.kv_topic;
      pc.buffer_steps = cfg_.kv_buffer_steps;
      pc.hwm = cfg_.kv_hwm;
      pc.replay_topic_frame = cfg_.replay_topic_frame;
      publishers_.push_back(std::make_unique<kv_publisher>(zmq_, pc));
      if (!publishers_.back()->error().empty())
        return publishers_.back()->error();
      pub = publishers_.back().get();
    }
    runner_options ro;
    ro.rank = r;
    ro.speedup = cfg_.speedup;
    ro.no_sleep = cfg_.no_sleep;
    ro.encoding = cfg_.kv_encoding;
    ro.hashes = cfg_.kv_hashes;
    runners_.push_back(std::make_unique<engine_runner>(cfg_.engine, ro, pub));
  }
  return {};
}

int sim_engine::pick_rank() const {
  int best = 0;
  uint64_t best_load = UINT64_MAX;
  for (size_t r = 0; r < runners_.size(); ++r) {
    auto l = runners_[r]->load();
    uint64_t score = l.running_tokens + l.waiting_tokens;
    if (score < best_load) {
      best_load = score;
      best = static_cast<int>(r);
    }
  }
  return best;
}

void sim_engine::update_health() {
  if (!server_)
    return;
  bool serving = loaded_ && !(paused_ && pause_in_health_) && !draining_;
  auto* health = server_->GetHealthCheckService();
  // The server as a whole ("") and every service by name. Turning serving,
  // "" goes last, turning not serving first: a client that watches "" and
  // sees SERVING finds every service serving (set the other way round, a
  // Check right after the watch's SERVING could still read NOT_SERVING).
  const char* named[] = {"vllm.Inference", "vllm.Control",
                         "openengine.v1.Inference", "openengine.v1.Control"};
  if (!serving)
    health->SetServingStatus("", false);
  for (const char* name : named)
    health->SetServingStatus(name, serving);
  if (serving)
    health->SetServingStatus("", true);
}

void sim_engine::set_loaded(bool loaded) {
  loaded_ = loaded;
  update_health();
}

void sim_engine::set_paused(bool paused, bool in_health) {
  pause_in_health_ = in_health;
  paused_ = paused;
  for (auto& r : runners_)
    r->set_paused(paused);
  update_health();
}

void sim_engine::begin_drain() {
  draining_ = true;
  update_health();
}

std::string sim_engine::new_request_id() {
  return "sim-" + std::to_string(next_id_.fetch_add(1));
}

kv_session sim_engine::open_session(int rank, size_t prompt_tokens) {
  kv_session s{"kv-" + random_hex(1), rank, prompt_tokens};
  std::lock_guard<std::mutex> guard{mtx_};
  sessions_[s.id] = s;
  return s;
}

std::optional<kv_session>
sim_engine::find_session(const std::string& id) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = sessions_.find(id);
  if (i == sessions_.end())
    return std::nullopt;
  return i->second;
}

grpc::Status sim_engine::generate(
  const std::function<bool()>& cancelled, int rank, engine_request req,
  const std::function<bool(std::vector<token_output>&)>& write) {
  if (draining_)
    return {grpc::StatusCode::UNAVAILABLE, "the engine is shutting down"};
  if (cfg_.max_waiting > 0 && runner(rank).load().waiting >= cfg_.max_waiting)
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            "the waiting queue is full (--max-waiting-requests)"};
  std::string why;
  auto id = req.id;
  auto stream = runner(rank).submit(std::move(req), &why);
  if (!stream)
    return {why.rfind("duplicate", 0) == 0 ? grpc::StatusCode::ALREADY_EXISTS
                                           : grpc::StatusCode::INVALID_ARGUMENT,
            why};
  for (;;) {
    auto outs = stream->wait(std::chrono::milliseconds{50});
    if (cancelled())
      return {grpc::StatusCode::CANCELLED, "cancelled by the client"};
    bool done = false;
    for (const auto& o : outs)
      done |= o.finished != finish_reason::none;
    if (!outs.empty() && !write(outs))
      return {grpc::StatusCode::CANCELLED, "the client went away"};
    if (done)
      return grpc::Status::OK;
  }
}

} // namespace outrider::sim
