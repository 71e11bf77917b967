// End-to-end tests of outrider-sim: the real binary, real gRPC clients and
// real ZMQ sockets on loopback.
#include <csignal>
#include <map>
#include <thread>
#include <zmq.hpp>

#include <catch2/catch.hpp>

#include "cluster/kv/kv_decoder.hpp"
#include "cluster/kv/seq_frame.hpp"
#include "grpc/health/v1/health.grpc.pb.h"
#include "openengine.grpc.pb.h"
#include "sim/engine_core.hpp"
#include "tests/e2e/sim_process.hpp"
#include "vllm.grpc.pb.h"

using namespace outrider;
using namespace outrider::test;
using namespace std::chrono_literals;
namespace oe = openengine::v1;
using grpc::StatusCode;

namespace {

std::vector<uint32_t> prompt_of(uint32_t first, size_t n) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(first + static_cast<uint32_t>(i));
  return out;
}

void deadline(grpc::ClientContext& ctx, std::chrono::seconds s = 20s) {
  ctx.set_deadline(std::chrono::system_clock::now() + s);
}

struct stream_result {
  grpc::Status status;
  std::vector<uint32_t> tokens;
  vllm::FinishReason finish = vllm::NOT_FINISHED;
  uint32_t prompt_tokens = 0;
  google::protobuf::Struct transfer;
};

stream_result vllm_stream(vllm::Inference::Stub& stub,
                          const std::vector<uint32_t>& prompt,
                          uint32_t max_tokens, int rank = -1,
                          std::string id = {}) {
  grpc::ClientContext ctx;
  deadline(ctx);
  if (rank >= 0)
    ctx.AddMetadata("x-data-parallel-rank", std::to_string(rank));
  vllm::GenerateRequest req;
  req.set_request_id(id);
  req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  req.mutable_stopping()->set_max_new_tokens(max_tokens);
  auto reader = stub.GenerateStream(&ctx, req);
  vllm::GenerateResponse resp;
  stream_result out;
  while (reader->Read(&resp)) {
    if (resp.has_prompt_info())
      out.prompt_tokens = resp.prompt_info().num_prompt_tokens();
    for (auto t : resp.outputs().token_ids())
      out.tokens.push_back(t);
    if (resp.outputs().has_finish_info()) {
      out.finish = resp.outputs().finish_info().finish_reason();
      out.transfer = resp.outputs().finish_info().kv_transfer_params();
    }
  }
  out.status = reader->Finish();
  return out;
}

struct replayed {
  std::vector<std::pair<uint64_t, std::string>> batches;
  bool end_marker = false;
};

// Asks a replay socket for everything from `start` (DEALER, as docs/wire.md
// says).
replayed replay(zmq::context_t& zctx, const std::string& endpoint,
                uint64_t start, bool topic_frame) {
  zmq::socket_t dealer{zctx, zmq::socket_type::dealer};
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  dealer.send(zmq::message_t{}, zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(kv::encode_seq(start)), zmq::send_flags::none);
  replayed out;
  for (int i = 0; i < 100000; ++i) {
    std::vector<zmq::message_t> frames;
    for (;;) {
      zmq::message_t m;
      if (!dealer.recv(m))
        return out; // timeout
      bool more = m.more();
      frames.push_back(std::move(m));
      if (!more)
        break;
    }
    size_t want = topic_frame ? 4 : 3;
    REQUIRE(frames.size() == want);
    REQUIRE(frames[0].size() == 0);
    if (topic_frame)
      CHECK((frames[1].to_string() == "kv-events" || frames[1].size() == 0));
    const auto& seq = frames[want - 2];
    REQUIRE(seq.size() == 8);
    auto s = kv::decode_seq(seq.data());
    if (s == kv::replay_end_seq) {
      CHECK(frames[want - 1].size() == 0);
      out.end_marker = true;
      return out;
    }
    out.batches.emplace_back(s, frames[want - 1].to_string());
  }
  return out;
}

struct model_block {
  std::optional<uint64_t> parent;
  std::vector<uint32_t> tokens;
};
using cache_model = std::map<uint64_t, model_block>;

// Applies decoded batches the way an indexer would.
void apply(cache_model& m, const std::string& payload,
           std::optional<int64_t> expect_rank = std::nullopt) {
  auto r = kv::decode_kv_batch(payload.data(), payload.size());
  REQUIRE(r.ok);
  REQUIRE(r.batch.rejected.empty());
  if (expect_rank)
    CHECK(r.batch.dp_rank == expect_rank);
  for (const auto& ev : r.batch.events) {
    if (auto* s = std::get_if<kv::block_stored>(&ev)) {
      auto parent = s->parent_block_hash;
      for (size_t i = 0; i < s->block_hashes.size(); ++i) {
        auto first =
          s->token_ids.begin() + static_cast<ptrdiff_t>(i * s->block_size);
        m[s->block_hashes[i]] = {parent, {first, first + s->block_size}};
        parent = s->block_hashes[i];
      }
    } else if (auto* rm = std::get_if<kv::block_removed>(&ev)) {
      for (auto h : rm->block_hashes)
        CHECK(m.erase(h) == 1);
    } else {
      m.clear();
    }
  }
}

cache_model truth(const nlohmann::json& doc) {
  cache_model m;
  for (const auto& b : doc["blocks"]) {
    model_block mb;
    if (!b["parent"].is_null())
      mb.parent = b["parent"].get<uint64_t>();
    mb.tokens = b["token_ids"].get<std::vector<uint32_t>>();
    m[b["hash"].get<uint64_t>()] = mb;
  }
  return m;
}

bool same(const cache_model& a, const cache_model& b) {
  if (a.size() != b.size())
    return false;
  for (const auto& [h, blk] : a) {
    auto i = b.find(h);
    if (i == b.end() || i->second.parent != blk.parent ||
        i->second.tokens != blk.tokens)
      return false;
  }
  return true;
}

} // namespace

TEST_CASE("sim health follows loading, pause and resume") {
  sim_process sim{{.startup_delay = "1s"}};
  auto health = grpc::health::v1::Health::NewStub(sim.channel());
  auto control = vllm::Control::NewStub(sim.channel());
  grpc::ClientContext ctx;
  deadline(ctx, 30s);
  ctx.set_wait_for_ready(true);
  grpc::health::v1::HealthCheckRequest req;
  auto watch = health->Watch(&ctx, req);
  grpc::health::v1::HealthCheckResponse resp;
  using hs = grpc::health::v1::HealthCheckResponse;
  REQUIRE(watch->Read(&resp));
  CHECK(resp.status() == hs::NOT_SERVING); // still loading
  REQUIRE(watch->Read(&resp));
  CHECK(resp.status() == hs::SERVING);
  for (const char* name :
       {"vllm.Inference", "vllm.Control", "openengine.v1.Inference",
        "openengine.v1.Control"}) {
    grpc::ClientContext c;
    deadline(c);
    grpc::health::v1::HealthCheckRequest creq;
    creq.set_service(name);
    grpc::health::v1::HealthCheckResponse cresp;
    REQUIRE(health->Check(&c, creq, &cresp).ok());
    CHECK(cresp.status() == hs::SERVING);
  }
  {
    grpc::ClientContext c;
    deadline(c);
    vllm::PauseGenerationRequest p;
    vllm::PauseGenerationResponse r;
    REQUIRE(control->PauseGeneration(&c, p, &r).ok());
  }
  REQUIRE(watch->Read(&resp));
  CHECK(resp.status() == hs::NOT_SERVING);
  {
    grpc::ClientContext c;
    deadline(c);
    vllm::IsPausedRequest p;
    vllm::IsPausedResponse r;
    REQUIRE(control->IsPaused(&c, p, &r).ok());
    CHECK(r.paused());
  }
  {
    grpc::ClientContext c;
    deadline(c);
    vllm::ResumeGenerationRequest p;
    vllm::ResumeGenerationResponse r;
    REQUIRE(control->ResumeGeneration(&c, p, &r).ok());
  }
  REQUIRE(watch->Read(&resp));
  CHECK(resp.status() == hs::SERVING);
  ctx.TryCancel();
}

TEST_CASE("streamed tokens are the deterministic continuation") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = vllm::Inference::NewStub(sim.channel());
  auto prompt = prompt_of(1000, 37);
  auto r = vllm_stream(*stub, prompt, 25);
  REQUIRE(r.status.ok());
  CHECK(r.prompt_tokens == 37);
  CHECK(r.finish == vllm::LENGTH);
  CHECK(r.tokens == sim::continuation(prompt, 25));

  // The unary call and OpenEngine give the same tokens.
  grpc::ClientContext ctx;
  deadline(ctx);
  vllm::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  req.mutable_stopping()->set_max_new_tokens(25);
  vllm::GenerateResponse resp;
  REQUIRE(stub->Generate(&ctx, req, &resp).ok());
  CHECK(std::vector<uint32_t>(resp.outputs().token_ids().begin(),
                              resp.outputs().token_ids().end()) ==
        sim::continuation(prompt, 25));

  auto oe_stub = oe::Inference::NewStub(sim.channel());
  grpc::ClientContext octx;
  deadline(octx);
  oe::GenerateRequest oreq;
  oreq.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  oreq.mutable_stopping()->set_max_tokens(25);
  auto reader = oe_stub->Generate(&octx, oreq);
  oe::GenerateResponse oresp;
  std::vector<uint32_t> tokens;
  bool finished = false;
  while (reader->Read(&oresp)) {
    if (oresp.has_token())
      for (const auto& t : oresp.token().tokens())
        tokens.push_back(t.token_id());
    if (oresp.has_finished()) {
      finished = true;
      CHECK(oresp.finished().reason() == oe::FINISH_REASON_LENGTH);
      CHECK(oresp.usage().completion_tokens() == 25);
      CHECK(oresp.usage().prompt_tokens() == 37);
      // The first two requests cached the prompt's 9 full blocks.
      CHECK(oresp.usage().cached_prompt_tokens() == 36);
    }
  }
  REQUIRE(reader->Finish().ok());
  CHECK(finished);
  CHECK(tokens == sim::continuation(prompt, 25));
}

TEST_CASE("KV events in both encodings rebuild the engine's true cache") {
  auto encoding = GENERATE(std::string{"map"}, std::string{"array"});
  // A small cache so that evictions (BlockRemoved) happen too.
  sim_process sim{{.encoding = encoding, .num_blocks = 40}};
  REQUIRE(sim.wait_serving(10s));
  zmq::context_t zctx;
  zmq::socket_t sub{zctx, zmq::socket_type::sub};
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  sub.connect(sim.pub_endpoint(0));
  auto stub = vllm::Inference::NewStub(sim.channel());
  // Until the subscription is up, send small requests (slow joiner).
  zmq::message_t first;
  bool joined = false;
  for (int i = 0; i < 50 && !joined; ++i) {
    REQUIRE(
      vllm_stream(*stub, prompt_of(20000 + 10 * static_cast<uint32_t>(i), 9), 1)
        .status.ok());
    sub.set(zmq::sockopt::rcvtimeo, 100);
    joined = static_cast<bool>(sub.recv(first, zmq::recv_flags::none));
  }
  REQUIRE(joined);
  // Drop the rest of that first message; whole messages follow.
  for (bool more = first.more(); more;) {
    zmq::message_t rest;
    REQUIRE(sub.recv(rest));
    more = rest.more();
  }
  for (int i = 0; i < 12; ++i)
    REQUIRE(vllm_stream(
              *stub, prompt_of(100 * static_cast<uint32_t>(i % 5), 30 + i), 6)
              .status.ok());
  // Live: every message has 3 frames and consecutive sequence numbers.
  sub.set(zmq::sockopt::rcvtimeo, 1000);
  uint64_t last_seq = 0;
  int live = 0;
  for (int i = 0; i < 10000; ++i) {
    zmq::message_t topic, seq, payload;
    if (!sub.recv(topic))
      break;
    REQUIRE(topic.more());
    REQUIRE(sub.recv(seq));
    REQUIRE(seq.size() == 8);
    REQUIRE(sub.recv(payload));
    CHECK_FALSE(payload.more());
    CHECK(topic.to_string() == "kv-events");
    auto s = kv::decode_seq(seq.data());
    if (live > 0)
      CHECK(s == last_seq + 1);
    last_seq = s;
    ++live;
  }
  CHECK(live > 5);
  // Replay from 0 returns every batch; applying them gives the true cache.
  auto all = replay(zctx, sim.replay_endpoint(0), 0, true);
  REQUIRE(all.end_marker);
  REQUIRE_FALSE(all.batches.empty());
  CHECK(all.batches.front().first == 0);
  CHECK(all.batches.back().first == last_seq);
  cache_model m;
  bool removed_seen = false;
  for (const auto& [s, payload] : all.batches) {
    auto r = kv::decode_kv_batch(payload.data(), payload.size());
    for (const auto& ev : r.batch.events)
      removed_seen |= std::holds_alternative<kv::block_removed>(ev);
    apply(m, payload, 0);
  }
  CHECK(removed_seen);
  auto t = truth(sim.cache(0));
  CHECK(t.size() > 5);
  CHECK(same(m, t));
}

TEST_CASE("replay from a sequence number returns exactly the rest") {
  auto topic_frame = GENERATE(true, false);
  sim_process sim{{.replay_topic_frame = topic_frame}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = vllm::Inference::NewStub(sim.channel());
  for (int i = 0; i < 6; ++i)
    REQUIRE(
      vllm_stream(*stub, prompt_of(1000 * static_cast<uint32_t>(i + 1), 12), 2)
        .status.ok());
  zmq::context_t zctx;
  auto all = replay(zctx, sim.replay_endpoint(0), 0, topic_frame);
  REQUIRE(all.end_marker);
  REQUIRE(all.batches.size() >= 6);
  auto from3 = replay(zctx, sim.replay_endpoint(0), 3, topic_frame);
  REQUIRE(from3.end_marker);
  REQUIRE(from3.batches.size() == all.batches.size() - 3);
  for (size_t i = 0; i < from3.batches.size(); ++i)
    CHECK(from3.batches[i] == all.batches[i + 3]);
  auto beyond = replay(zctx, sim.replay_endpoint(0), 1u << 30, topic_frame);
  CHECK(beyond.end_marker);
  CHECK(beyond.batches.empty());
}

TEST_CASE("a replay gap is detectable") {
  sim_process sim{{.buffer_steps = 3}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = vllm::Inference::NewStub(sim.channel());
  for (int i = 0; i < 8; ++i)
    REQUIRE(
      vllm_stream(*stub, prompt_of(1000 * static_cast<uint32_t>(i + 1), 8), 1)
        .status.ok());
  zmq::context_t zctx;
  auto r = replay(zctx, sim.replay_endpoint(0), 0, true);
  REQUIRE(r.end_marker);
  REQUIRE(r.batches.size() == 3);
  // History before the first replayed batch is gone: a gap.
  CHECK(r.batches.front().first > 0);
}

TEST_CASE("data-parallel ranks have their own ports, caches and sequences") {
  sim_process sim{{.ranks = 2}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = vllm::Inference::NewStub(sim.channel());
  auto prompt = prompt_of(7000, 20);
  for (int i = 0; i < 3; ++i)
    REQUIRE(vllm_stream(*stub, prompt, 3, 1).status.ok());
  zmq::context_t zctx;
  auto r1 = replay(zctx, sim.replay_endpoint(1), 0, true);
  auto r0 = replay(zctx, sim.replay_endpoint(0), 0, true);
  REQUIRE(r1.end_marker);
  REQUIRE(r0.end_marker);
  CHECK(r0.batches.empty());
  REQUIRE_FALSE(r1.batches.empty());
  CHECK(r1.batches.front().first == 0);
  cache_model m;
  for (const auto& [s, p] : r1.batches)
    apply(m, p, 1);
  CHECK(same(m, truth(sim.cache(1))));
  CHECK(sim.cache(0)["blocks"].empty());
  // Rank 0 starts its own sequence at 0.
  REQUIRE(vllm_stream(*stub, prompt, 1, 0).status.ok());
  auto again = replay(zctx, sim.replay_endpoint(0), 0, true);
  REQUIRE_FALSE(again.batches.empty());
  CHECK(again.batches.front().first == 0);
}

TEST_CASE("a prefix-cache reset publishes AllBlocksCleared") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = vllm::Inference::NewStub(sim.channel());
  REQUIRE(vllm_stream(*stub, prompt_of(5, 16), 1).status.ok());
  REQUIRE_FALSE(sim.cache(0)["blocks"].empty());
  // POST through the debug server (vLLM's /reset_prefix_cache).
  std::string body;
  int fd = 0;
  (void)fd;
  zmq::context_t zctx;
  auto before = replay(zctx, sim.replay_endpoint(0), 0, true).batches.size();
  auto post = [&] {
    child_process curl{{"/usr/bin/curl", "-s", "-X", "POST",
                        "http://127.0.0.1:" + std::to_string(sim.debug) +
                          "/reset_prefix_cache"}};
    return curl.wait(10s);
  };
  REQUIRE(post() == 0);
  REQUIRE(eventually(
    [&] {
      return replay(zctx, sim.replay_endpoint(0), 0, true).batches.size() >
             before;
    },
    5s));
  auto all = replay(zctx, sim.replay_endpoint(0), 0, true);
  auto r = kv::decode_kv_batch(all.batches.back().second.data(),
                               all.batches.back().second.size());
  REQUIRE(r.ok);
  REQUIRE(r.batch.events.size() == 1);
  CHECK(std::holds_alternative<kv::all_blocks_cleared>(r.batch.events[0]));
  CHECK(sim.cache(0)["blocks"].empty());
}

TEST_CASE("bad requests get the right status, never a crash") {
  sim_process sim{{.ranks = 2}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = vllm::Inference::NewStub(sim.channel());
  auto call = [&](vllm::GenerateRequest req,
                  std::vector<std::pair<std::string, std::string>> md = {}) {
    grpc::ClientContext ctx;
    deadline(ctx);
    for (auto& [k, v] : md)
      ctx.AddMetadata(k, v);
    vllm::GenerateResponse resp;
    return stub->Generate(&ctx, req, &resp);
  };
  vllm::GenerateRequest good;
  good.mutable_token_ids()->add_ids(5);
  good.mutable_stopping()->set_max_new_tokens(2);
  REQUIRE(call(good).ok());

  auto empty = good;
  empty.mutable_token_ids()->clear_ids();
  CHECK(call(empty).error_code() == StatusCode::INVALID_ARGUMENT);
  auto text = good;
  text.set_text("hello");
  CHECK(call(text).error_code() == StatusCode::INVALID_ARGUMENT);
  auto zero = good;
  zero.mutable_stopping()->set_max_new_tokens(0);
  CHECK(call(zero).error_code() == StatusCode::INVALID_ARGUMENT);
  auto huge = good;
  huge.mutable_stopping()->set_max_new_tokens(4000000000u);
  auto st = call(huge);
  CHECK(st.error_code() == StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(st.error_message(), Catch::Matchers::Contains("context length"));
  auto model = good;
  model.set_model("no-such-model");
  CHECK(call(model).error_code() == StatusCode::NOT_FOUND);
  auto vocab = good;
  vocab.mutable_token_ids()->add_ids(4000000);
  CHECK(call(vocab).error_code() == StatusCode::INVALID_ARGUMENT);
  CHECK(call(good, {{"x-data-parallel-rank", "one"}}).error_code() ==
        StatusCode::INVALID_ARGUMENT);
  CHECK(call(good, {{"x-data-parallel-rank", "7"}}).error_code() ==
        StatusCode::INVALID_ARGUMENT);
  CHECK(
    call(good, {{"x-data-parallel-rank", "0"}, {"x-data-parallel-rank", "1"}})
      .error_code() == StatusCode::INVALID_ARGUMENT);

  auto control = vllm::Control::NewStub(sim.channel());
  grpc::ClientContext actx;
  deadline(actx);
  vllm::AbortRequest abort;
  abort.add_request_ids("never-seen");
  vllm::AbortResponse aresp;
  CHECK(control->Abort(&actx, abort, &aresp).error_code() ==
        StatusCode::NOT_FOUND);

  auto oe_stub = oe::Inference::NewStub(sim.channel());
  auto oe_call = [&](std::vector<std::pair<std::string, std::string>> md) {
    grpc::ClientContext ctx;
    deadline(ctx);
    for (auto& [k, v] : md)
      ctx.AddMetadata(k, v);
    oe::GenerateRequest req;
    req.mutable_token_ids()->add_ids(5);
    auto reader = oe_stub->Generate(&ctx, req);
    oe::GenerateResponse resp;
    while (reader->Read(&resp)) {
    }
    return reader->Finish();
  };
  CHECK(oe_call({}).ok());
  CHECK(oe_call({{"openengine-target-dp-rank", "x"}}).error_code() ==
        StatusCode::INVALID_ARGUMENT);
  CHECK(oe_call({{"openengine-priority", "high"}}).error_code() ==
        StatusCode::INVALID_ARGUMENT);
  CHECK(
    oe_call({{"openengine-routing-key", "a"}, {"openengine-routing-key", "b"}})
      .error_code() == StatusCode::INVALID_ARGUMENT);
  // Still healthy after all that.
  CHECK(sim.wait_serving(1s));
}

TEST_CASE("a dropped stream does not abort the request but Abort does") {
  sim_process sim{{.extra = {"--speedup", "1"}}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = vllm::Inference::NewStub(sim.channel());
  auto control = vllm::Control::NewStub(sim.channel());
  grpc::ClientContext ctx;
  deadline(ctx);
  vllm::GenerateRequest req;
  req.set_request_id("long-one");
  req.mutable_token_ids()->add_ids(5);
  req.mutable_stopping()->set_max_new_tokens(800);
  auto reader = stub->GenerateStream(&ctx, req);
  vllm::GenerateResponse resp;
  REQUIRE(reader->Read(&resp));
  ctx.TryCancel();
  reader->Finish();
  auto running = [&] {
    std::string body;
    http_get(sim.debug, "/debug/load?rank=0", &body);
    return nlohmann::json::parse(body)["running"].get<int>();
  };
  CHECK(running() == 1); // still generating
  grpc::ClientContext actx;
  deadline(actx);
  vllm::AbortRequest abort;
  abort.add_request_ids("long-one");
  vllm::AbortResponse aresp;
  REQUIRE(control->Abort(&actx, abort, &aresp).ok());
  CHECK(eventually([&] { return running() == 0; }, 2s));
}

TEST_CASE("prefill and decode engines hand KV over through a session") {
  sim_process prefill{{.role = "prefill"}};
  sim_process decode{{.role = "decode"}};
  REQUIRE(prefill.wait_serving(10s));
  REQUIRE(decode.wait_serving(10s));
  auto prompt = prompt_of(300, 26); // 6 full blocks of 4
  oe::KvSessionRef session;
  {
    auto stub = oe::Inference::NewStub(prefill.channel());
    grpc::ClientContext ctx;
    deadline(ctx);
    oe::GenerateRequest req;
    req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
    req.mutable_stopping()->set_max_tokens(8);
    auto reader = stub->Generate(&ctx, req);
    oe::GenerateResponse resp;
    int tokens = 0;
    while (reader->Read(&resp)) {
      tokens += resp.has_token() ? 1 : 0;
      if (resp.has_prefill_ready())
        session = resp.prefill_ready().kv_session();
    }
    REQUIRE(reader->Finish().ok());
    CHECK(tokens == 0);
    REQUIRE_FALSE(session.session_id().empty());
    REQUIRE(session.endpoints_size() == 1);
    CHECK(session.endpoints(0).port() == prefill.grpc);
  }
  CHECK(prefill.cache(0)["blocks"].size() == 6);
  auto stub = oe::Inference::NewStub(decode.channel());
  grpc::ClientContext ctx;
  deadline(ctx);
  oe::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  req.mutable_stopping()->set_max_tokens(8);
  *req.mutable_kv()->mutable_session() = session;
  auto reader = stub->Generate(&ctx, req);
  oe::GenerateResponse resp;
  std::vector<uint32_t> tokens;
  while (reader->Read(&resp))
    if (resp.has_token())
      tokens.push_back(resp.token().tokens(0).token_id());
  REQUIRE(reader->Finish().ok());
  CHECK(tokens == sim::continuation(prompt, 8));
  // The decode engine stored the transferred blocks (and more as it went).
  CHECK(decode.cache(0)["blocks"].size() >= 6);

  // A KV session sent to a prefill engine is a role mismatch.
  auto pstub = oe::Inference::NewStub(prefill.channel());
  grpc::ClientContext mctx;
  deadline(mctx);
  auto bad = pstub->Generate(&mctx, req);
  while (bad->Read(&resp)) {
  }
  CHECK(bad->Finish().error_code() == StatusCode::FAILED_PRECONDITION);
}

TEST_CASE("SubscribeKvEvents streams a snapshot, then live batches") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  auto stub = vllm::Inference::NewStub(sim.channel());
  REQUIRE(vllm_stream(*stub, prompt_of(10, 17), 1).status.ok());
  auto control = oe::Control::NewStub(sim.channel());
  grpc::ClientContext ctx;
  deadline(ctx);
  oe::SubscribeKvEventsRequest req;
  req.set_include_snapshot(true);
  auto reader = control->SubscribeKvEvents(&ctx, req);
  oe::SubscribeKvEventsResponse resp;
  REQUIRE(reader->Read(&resp));
  REQUIRE(resp.has_batch());
  CHECK(resp.batch().events_size() == 4); // 17 tokens: 4 full blocks
  std::thread later([&] { vllm_stream(*stub, prompt_of(900, 9), 1); });
  REQUIRE(reader->Read(&resp));
  later.join();
  REQUIRE(resp.has_batch());
  CHECK(resp.batch().events(0).has_block_stored());
  ctx.TryCancel();
}

TEST_CASE("SIGTERM: NOT_SERVING, then a clean exit") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sim.proc->signal(SIGTERM);
  auto code = sim.proc->wait(10s);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK_THAT(sim.proc->output(), Catch::Matchers::Contains("stopped"));
}
