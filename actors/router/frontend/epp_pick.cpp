#include "actors/router/dispatch/prefill_leg.hpp"
#include "actors/router/frontend/epp_flow.hpp"
#include "actors/router/frontend/epp_messages.hpp"
#include "actors/router/frontend/epp_stream.hpp"

namespace outrider::router {

namespace {

using clock_type = std::chrono::steady_clock;

// Picking is over: write what is owed (or finish).
void answered(const std::shared_ptr<epp_flow>& flow,
              std::unique_lock<std::mutex>& lk) {
  flow->picking = false;
  if (flow->reactor)
    flow->reactor->settle(lk);
}

void answered(const std::shared_ptr<epp_flow>& flow) {
  std::unique_lock lk(flow->mtx);
  answered(flow, lk);
}

// Where the request goes (and, with P/D, where it is prefilled).
void placed(const std::shared_ptr<epp_flow>& flow, clock_type::time_point t0,
            route_decision d, std::optional<route_decision> prefill) {
  std::unique_lock lk(flow->mtx);
  auto& f = *flow;
  if (!f.reactor || f.broken) {
    if (d.ok)
      f.st->queue.unbook(d.key, true);
    if (prefill)
      f.st->queue.unbook(prefill->key, true);
    return answered(flow, lk);
  }
  if (!d.ok) {
    if (d.shed != shed_reason::none)
      f.refuse(shed_response(d.shed, d.error), "shed");
    else
      f.refuse(api_error(503,
                         d.error.empty() ? "no endpoint can take the request"
                                         : d.error,
                         "no_worker", "server_error"),
               "no_endpoint");
    return answered(flow, lk);
  }
  f.booking = d.key;
  f.picked = d.http_endpoint;
  std::string prefiller;
  if (prefill) {
    f.prefill_booking = prefill->key;
    prefiller = prefill->http_endpoint;
  }
  f.st->outcome("picked").inc();
  f.st->decision->observe(
    std::chrono::duration<double>(clock_type::now() - t0).count());
  // The endpoint travels on the first answer owed; a later one continues.
  bool said = false;
  auto with_endpoint = [&](epp::pb::ProcessingResponse& r,
                           epp::pb::CommonResponse* c) {
    if (said)
      return;
    *c = epp::picked(d.http_endpoint, prefiller);
    *r.mutable_dynamic_metadata() = epp::picked_metadata(d.http_endpoint);
    said = true;
  };
  if (f.headers_owed) {
    epp::pb::ProcessingResponse r;
    with_endpoint(r, r.mutable_request_headers()->mutable_response());
    f.send(std::move(r));
  }
  for (; f.chunks_owed > 0; --f.chunks_owed)
    f.send(body_continue());
  if (f.body_owed) {
    epp::pb::ProcessingResponse r;
    with_endpoint(r, r.mutable_request_body()->mutable_response());
    f.send(std::move(r));
  }
  f.headers_owed = f.body_owed = false;
  answered(flow, lk);
}

// P/D: a prefill worker for decode worker `d`, and the policy's word on
// using it; the answer names it where the plan is to prefill remotely.
void prefill_for(const std::shared_ptr<epp_flow>& flow,
                 clock_type::time_point t0,
                 const std::shared_ptr<route_request>& req, route_decision d) {
  auto preq = std::make_shared<route_request>();
  preq->tokens = req->tokens;
  preq->identity = req->identity;
  preq->role = engine::worker_role::prefill;
  preq->needs_http_endpoint = true;
  auto& st = *flow->st;
  st.queue.place(preq, false, [flow, t0, preq, d](route_decision p) {
    auto& st = *flow->st;
    auto plan = plan_prefill(*st.cfg.disagg->get(),
                             prefill_facts_of(preq->tokens.size(), d, p),
                             st.cfg.queue_threshold);
    // SGLang's bootstrap rooms have no header contract with a gateway:
    // such a decode worker prefills itself.
    bool remote = plan == prefill_plan::remote;
    runtime::global_metrics()
      .get_counter(
        "outrider_router_disagg_decisions_total",
        "Conditional disaggregation decisions, by outcome",
        {{"outcome", remote                            ? "remote_prefill"
                     : plan == prefill_plan::bootstrap ? "incompatible_prefill"
                                                       : to_string(plan)}})
      .inc();
    if (!remote) {
      if (p.ok)
        st.queue.unbook(p.key, true);
      return placed(flow, t0, d, {});
    }
    placed(flow, t0, d, std::move(p));
  });
}

// On the pool: what the request is, then where it goes.
void pick(const std::shared_ptr<epp_flow>& flow, clock_type::time_point t0) {
  std::map<std::string, std::string> headers;
  std::string body;
  std::optional<std::vector<std::string>> subset;
  {
    std::lock_guard lk(flow->mtx);
    if (!flow->reactor || flow->broken)
      return answered(flow);
    headers = flow->headers;
    body = std::move(flow->body);
    flow->body.clear();
    subset = flow->subset;
  }
  auto req = std::make_shared<route_request>();
  auto& st = *flow->st;
  if (auto bad = epp_route_request(st, headers, body, *req)) {
    std::unique_lock lk(flow->mtx);
    flow->refuse(*bad, bad->status == 429 ? "shed" : "bad_request");
    return answered(flow, lk);
  }
  req->http_subset = std::move(subset);
  req->needs_http_endpoint = true;
  // With disaggregation a decode worker (any worker that decodes when
  // there is no decode pool), then maybe a prefill worker for it.
  if (st.cfg.disagg)
    req->role = engine::worker_role::decode;
  st.queue.place(req, true, [flow, t0, req](route_decision d) {
    auto& st = *flow->st;
    if (!d.ok && !d.busy && d.shed == shed_reason::none && req->role) {
      req->role.reset();
      return st.queue.place(req, true, [flow, t0](route_decision any) {
        placed(flow, t0, std::move(any), {});
      });
    }
    if (!d.ok || !st.cfg.disagg || d.role != engine::worker_role::decode)
      return placed(flow, t0, std::move(d), {});
    prefill_for(flow, t0, req, std::move(d));
  });
}

} // namespace

void epp_flow::refuse(const runtime::http_response& r,
                      const std::string& outcome) {
  st->outcome(outcome).inc();
  headers_owed = body_owed = false;
  chunks_owed = 0;
  send(epp::immediate(r, "outrider_" + outcome));
}

void epp_flow::release_prefill() {
  if (prefill_booking)
    st->queue.unbook(*prefill_booking, true);
  prefill_booking.reset();
}

void epp_flow::release_booking() {
  release_prefill();
  if (booking)
    st->queue.unbook(*booking, true);
  booking.reset();
}

epp_flow::response body_continue() {
  epp_flow::response r;
  r.mutable_request_body();
  return r;
}

void start_pick(const std::shared_ptr<epp_flow>& flow) {
  flow->picking = true;
  auto t0 = clock_type::now();
  if (!flow->st->pool.try_run([flow, t0] { pick(flow, t0); })) {
    flow->picking = false;
    flow->refuse(shed_response(shed_reason::saturated,
                               "too many prompts waiting to be tokenized"),
                 "shed");
  }
}

} // namespace outrider::router
