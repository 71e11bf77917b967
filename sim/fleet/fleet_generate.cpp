// The fleet's Inference.Generate: one engine core for every worker, paced
// by the fleet's timer (no thread per request).
#include "openengine.grpc.pb.h"
#include "sim/fleet/fleet_server.hpp"

namespace outrider::sim {

namespace oe = openengine::v1;
using grpc::Status;
using grpc::StatusCode;

std::optional<fleet_generation>
fleet_generation::admit(fleet_state& f, fleet_worker& w,
                        const oe::GenerateRequest& in, Status* refuse) {
  if (!in.has_token_ids() || in.token_ids().ids_size() == 0) {
    *refuse = {StatusCode::INVALID_ARGUMENT, "send token_ids"};
    return std::nullopt;
  }
  std::vector<uint32_t> prompt(in.token_ids().ids().begin(),
                               in.token_ids().ids().end());
  size_t full = prompt.size() / f.cfg.block_size;
  size_t hit = w.run(prompt);
  // At least one token is computed, as an engine does.
  if (hit * f.cfg.block_size >= prompt.size() && hit > 0)
    --hit;
  ++f.requests;
  f.prompt_blocks += full;
  f.cached_blocks += hit;
  fleet_generation g;
  g.worker_ = w.index();
  g.max_tokens_ = in.stopping().has_max_tokens()
                    ? std::max<uint32_t>(1, in.stopping().max_tokens())
                    : 16;
  g.id_ = in.request_id().empty() ? "fleet-" + std::to_string(f.requests.load())
                                  : in.request_id();
  g.prompt_ = static_cast<uint32_t>(prompt.size());
  g.cached_ = static_cast<uint32_t>(hit) * f.cfg.block_size;
  g.prefill_blocks_ = full - hit;
  return g;
}

double fleet_generation::wait_ms(const fleet_config& c) const {
  if (step_ == 1) // the prompt's size sent: its prefill
    return c.prefill_ms_per_block * static_cast<double>(prefill_blocks_);
  if (step_ >= 2 && step_ <= max_tokens_) // between tokens
    return c.token_ms;
  return 0; // the prompt's size, and the finish after the last token
}

oe::GenerateResponse fleet_generation::next(fleet_state& f) {
  oe::GenerateResponse r;
  r.set_request_id(id_);
  if (step_ == 0) {
    r.mutable_prompt()->set_num_prompt_tokens(prompt_);
  } else if (step_ <= max_tokens_) {
    auto* t = r.mutable_token();
    t->set_output_index(0);
    // Any ids do: the fleet measures routing, not text.
    t->add_tokens()->set_token_id(1000 + ((step_ - 1) % 1000));
    ++f.tokens;
  } else {
    r.mutable_finished()->set_reason(oe::FINISH_REASON_LENGTH);
    auto* u = r.mutable_usage();
    u->set_prompt_tokens(prompt_);
    u->set_completion_tokens(max_tokens_);
    u->set_total_tokens(prompt_ + max_tokens_);
    u->set_cached_prompt_tokens(cached_);
  }
  ++step_;
  return r;
}

namespace {

class gen_call;

struct gen_state {
  std::mutex mtx;
  gen_call* call = nullptr; // guarded by mtx; null once gRPC is done
};

// One request's stream: each message written after the one before and the
// engine's pause between them.
class gen_call final : public grpc::ServerWriteReactor<oe::GenerateResponse> {
 public:
  gen_call(fleet_state& f, fleet_generation g)
    : f_(f), g_(std::move(g)), st_(std::make_shared<gen_state>()) {
    st_->call = this;
    ++f_.running[g_.worker()];
    std::lock_guard<std::mutex> guard{st_->mtx};
    write(g_.next(f_));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> guard{st_->mtx};
    writing_ = false;
    if (!ok || cancelled_)
      return finish({StatusCode::CANCELLED, "the client went away"});
    if (!g_.more())
      return finish(Status::OK);
    double ms = g_.wait_ms(f_.cfg);
    if (ms <= 0)
      return write(g_.next(f_));
    waiting_ = true;
    f_.timer.at(fleet_timer::clock::now() +
                  std::chrono::duration_cast<fleet_timer::clock::duration>(
                    std::chrono::duration<double, std::milli>(ms)),
                [st = st_] {
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
    --f_.running[g_.worker()];
    delete this;
  }

 private:
  // Under st_->mtx: the pause is over.
  void resume() {
    waiting_ = false;
    if (cancelled_)
      return finish({StatusCode::CANCELLED, "the client went away"});
    write(g_.next(f_));
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
  fleet_generation g_;
  std::shared_ptr<gen_state> st_;
  oe::GenerateResponse current_;
  bool writing_ = false, waiting_ = false, cancelled_ = false,
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
    Status refuse;
    auto g = fleet_generation::admit(f_, *w, *in, &refuse);
    if (!g)
      return new refusal<oe::GenerateResponse>(std::move(refuse));
    return new gen_call(f_, std::move(*g));
  }

 private:
  fleet_state& f_;
};

} // namespace

std::unique_ptr<grpc::Service> make_fleet_inference(fleet_state& fleet) {
  return std::make_unique<inference>(fleet);
}

} // namespace outrider::sim
