// The fleet's Inference.Generate: one engine core for every worker, paced
// by the fleet's timer (no thread per request).
#include "openengine.grpc.pb.h"
#include "sim/fleet/fleet_server.hpp"

namespace outrider::sim {

namespace oe = openengine::v1;
using grpc::Status;
using grpc::StatusCode;

namespace {

class gen_call;

struct gen_state {
  std::mutex mtx;
  gen_call* call = nullptr; // guarded by mtx; null once gRPC is done
};

// One request on the shared engine core: the prompt's size, the first
// token after the uncached blocks' prefill time, then one token per
// `token_ms`, then the finish with usage.
class gen_call final : public grpc::ServerWriteReactor<oe::GenerateResponse> {
 public:
  gen_call(fleet_state& f, size_t worker, std::string id, uint32_t prompt,
           size_t hit_blocks, size_t full_blocks, uint32_t max_tokens)
    : f_(f), worker_(worker), id_(std::move(id)), prompt_(prompt),
      cached_(static_cast<uint32_t>(hit_blocks) * f.cfg.block_size),
      prefill_blocks_(full_blocks - hit_blocks), max_tokens_(max_tokens),
      st_(std::make_shared<gen_state>()) {
    st_->call = this;
    ++f_.running[worker_];
    std::lock_guard<std::mutex> guard{st_->mtx};
    oe::GenerateResponse r;
    r.set_request_id(id_);
    r.mutable_prompt()->set_num_prompt_tokens(prompt_);
    write(std::move(r));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    writing_ = false;
    if (!ok || cancelled_)
      return finish({StatusCode::CANCELLED, "the client went away"});
    if (done_)
      return finish(Status::OK);
    double ms = sent_ == 0 ? f_.cfg.prefill_ms_per_block *
                               static_cast<double>(prefill_blocks_)
                           : f_.cfg.token_ms;
    if (ms <= 0 || sent_ >= max_tokens_)
      return next();
    waiting_ = true;
    auto when = fleet_timer::clock::now() +
                std::chrono::duration_cast<fleet_timer::clock::duration>(
                  std::chrono::duration<double, std::milli>(ms));
    f_.timer.at(when, [st = st_] {
      std::lock_guard<std::mutex> guard{st->mtx};
      if (st->call)
        st->call->resume();
    });
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    cancelled_ = true;
    if (!writing_ && !waiting_)
      finish({StatusCode::CANCELLED, "the client went away"});
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> guard{st_->mtx};
      st_->call = nullptr;
    }
    --f_.running[worker_];
    delete this;
  }

 private:
  // Under st_->mtx: the pause is over.
  void resume() {
    waiting_ = false;
    if (cancelled_)
      return finish({StatusCode::CANCELLED, "the client went away"});
    next();
  }

  // Under st_->mtx: the next token, or the finish.
  void next() {
    oe::GenerateResponse r;
    r.set_request_id(id_);
    if (sent_ < max_tokens_) {
      auto* t = r.mutable_token();
      t->set_output_index(0);
      // Any ids do: the fleet measures routing, not text.
      t->add_tokens()->set_token_id(1000 + (sent_ % 1000));
      ++sent_;
      ++f_.tokens;
    } else {
      r.mutable_finished()->set_reason(oe::FINISH_REASON_LENGTH);
      auto* u = r.mutable_usage();
      u->set_prompt_tokens(prompt_);
      u->set_completion_tokens(sent_);
      u->set_total_tokens(prompt_ + sent_);
      u->set_cached_prompt_tokens(cached_);
      done_ = true;
    }
    write(std::move(r));
  }

  void write(oe::GenerateResponse r) {
    current_ = std::move(r);
    writing_ = true;
    StartWrite(&current_);
  }

  void finish(Status st) {
    if (finished_)
      return;
    finished_ = true;
    Finish(std::move(st));
  }

  fleet_state& f_;
  size_t worker_;
  std::string id_;
  uint32_t prompt_, cached_;
  size_t prefill_blocks_;
  uint32_t max_tokens_, sent_ = 0;
  std::shared_ptr<gen_state> st_;
  oe::GenerateResponse current_;
  bool writing_ = false, waiting_ = false, cancelled_ = false, done_ = false,
       finished_ = false;
};

class inference final : public oe::Inference::CallbackService {
 public:
  explicit inference(fleet_state& f) : f_(f) {}

  grpc::ServerWriteReactor<oe::GenerateResponse>*
  Generate(grpc::CallbackServerContext* ctx,
           const oe::GenerateRequest* in) override {
    std::string why;
    auto* w = f_.worker_of(*ctx, &why);
    if (!w)
      return new refusal<oe::GenerateResponse>(
        {StatusCode::FAILED_PRECONDITION, why});
    if (!in->has_token_ids() || in->token_ids().ids_size() == 0)
      return new refusal<oe::GenerateResponse>(
        {StatusCode::INVALID_ARGUMENT, "send token_ids"});
    std::vector<uint32_t> prompt(in->token_ids().ids().begin(),
                                 in->token_ids().ids().end());
    size_t full = prompt.size() / f_.cfg.block_size;
    size_t hit = w->run(prompt);
    // At least one token is computed, as an engine does.
    if (hit * f_.cfg.block_size >= prompt.size() && hit > 0)
      --hit;
    ++f_.requests;
    f_.prompt_blocks += full;
    f_.cached_blocks += hit;
    uint32_t max = in->stopping().has_max_tokens()
                     ? std::max<uint32_t>(1, in->stopping().max_tokens())
                     : 16;
    auto id = in->request_id().empty()
                ? "fleet-" + std::to_string(f_.requests.load())
                : in->request_id();
    return new gen_call(f_, w->index(), std::move(id),
                        static_cast<uint32_t>(prompt.size()), hit, full, max);
  }

 private:
  fleet_state& f_;
};

} // namespace

std::unique_ptr<grpc::Service> make_fleet_inference(fleet_state& fleet) {
  return std::make_unique<inference>(fleet);
}

} // namespace outrider::sim
