#include "actors/router/core/migration.hpp"

#include <grpcpp/support/status_code_enum.h>

namespace outrider::router {

namespace {

// One request's way through placements and attempts; each step's callback
// holds it alive until the next.
class migration_run : public std::enable_shared_from_this<migration_run> {
 public:
  migration_run(generate_params p, int limit,
                std::shared_ptr<attempt_seams> seams, token_sink on_tokens,
                std::function<void(generate_outcome)> done)
    : p_(std::move(p)), limit_(limit), seams_(std::move(seams)),
      on_tokens_(std::move(on_tokens)), done_(std::move(done)) {
    out_.prompt_tokens = static_cast<uint32_t>(p_.prompt.size());
  }

  void next() {
    req_ = std::make_shared<route_request>();
    req_->tokens = p_.prompt;
    req_->tokens.insert(req_->tokens.end(), out_.tokens.begin(),
                        out_.tokens.end());
    req_->exclude = exclude_;
    req_->flow = p_.flow;
    req_->band = p_.band;
    req_->session = p_.session;
    seams_->place(req_, [self = shared_from_this()](route_decision d) {
      self->placed(std::move(d));
    });
  }

 private:
  void placed(route_decision d) {
    if (!d.ok) {
      out_.kind = d.shed != shed_reason::none ? outcome_kind::shed
                                              : outcome_kind::no_worker;
      out_.shed = d.shed;
      out_.error = d.error;
      return finish();
    }
    out_.worker_id = d.worker_id;
    auto left = p_.max_tokens - static_cast<uint32_t>(out_.tokens.size());
    auto self = shared_from_this();
    seams_->stream(d, req_->tokens, left, attempt_, out_, on_tokens_,
                   [self, d](attempt_result r) { self->ended(d, r); });
  }

  void ended(const route_decision& d, const attempt_result& r) {
    seams_->release(d);
    switch (r.end) {
    case attempt_end::finished:
      out_.ok = true;
      return finish();
    case attempt_end::cancelled:
      out_.kind = outcome_kind::cancelled;
      out_.error = "cancelled by the client";
      return finish();
    case attempt_end::timed_out:
      out_.kind = outcome_kind::timed_out;
      out_.error = "the request ran past its deadline (--request-timeout)";
      return finish();
    case attempt_end::overloaded:
      out_.kind = outcome_kind::overloaded;
      out_.error = "the engine is overloaded: " + r.message;
      return finish();
    case attempt_end::unavailable:
      if (out_.tokens.size() < p_.max_tokens && attempt_ < limit_ &&
          seams_->may_migrate()) {
        seams_->migrating(d, out_);
        ++out_.migrations;
        ++attempt_;
        exclude_.push_back(d.worker_id);
        return next();
      }
      [[fallthrough]];
    case attempt_end::invalid:
    case attempt_end::failed:
      // The client hears what the engine said, not which worker (ids are
      // the operator's: logged and in the decision log).
      out_.kind = r.end == attempt_end::invalid ? outcome_kind::refused
                                                : outcome_kind::failed;
      out_.error =
        (r.end == attempt_end::invalid ? "the engine refused the request: "
                                       : "the engine failed: ") +
        r.message;
      return finish();
    }
  }

  void finish() {
    auto done = std::move(done_);
    done(std::move(out_));
  }

  generate_params p_;
  int limit_;
  std::shared_ptr<attempt_seams> seams_;
  token_sink on_tokens_;
  std::function<void(generate_outcome)> done_;
  generate_outcome out_;
  std::vector<std::string> exclude_;
  std::shared_ptr<route_request> req_;
  int attempt_ = 0;
};

} // namespace

void run_with_migration(generate_params p, int migration_limit,
                        std::shared_ptr<attempt_seams> seams,
                        token_sink on_tokens,
                        std::function<void(generate_outcome)> done) {
  std::make_shared<migration_run>(std::move(p), migration_limit,
                                  std::move(seams), std::move(on_tokens),
                                  std::move(done))
    ->next();
}

attempt_end end_for_status(int grpc_code, bool broke) {
  using grpc::StatusCode;
  if (broke)
    return attempt_end::unavailable;
  switch (static_cast<StatusCode>(grpc_code)) {
  case StatusCode::OK:
    return attempt_end::finished;
  case StatusCode::DEADLINE_EXCEEDED:
    return attempt_end::timed_out;
  case StatusCode::RESOURCE_EXHAUSTED:
    return attempt_end::overloaded;
  case StatusCode::INVALID_ARGUMENT:
  case StatusCode::NOT_FOUND:
  case StatusCode::FAILED_PRECONDITION:
  case StatusCode::OUT_OF_RANGE:
    return attempt_end::invalid;
  default:
    return attempt_end::failed;
  }
}

} // namespace outrider::router
