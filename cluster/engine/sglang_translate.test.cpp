#include "cluster/engine/sglang_translate.hpp"

#include <catch2/catch.hpp>

using namespace outrider::engine;
namespace oe = openengine::v1;
namespace sg = sglang::runtime::v1;

namespace {

sg::GenerateResponse msg(std::vector<int32_t> ids, bool finished = false,
                         const char* reason = nullptr) {
  sg::GenerateResponse r;
  for (auto i : ids)
    r.add_output_ids(i);
  r.set_finished(finished);
  (*r.mutable_meta_info())["prompt_tokens"] = "12";
  (*r.mutable_meta_info())["cached_tokens"] = "8";
  if (reason)
    (*r.mutable_meta_info())["finish_reason"] = reason;
  return r;
}

struct collected {
  std::vector<uint32_t> tokens;
  std::vector<oe::GenerateResponse> events;
  sglang_translator::emit_fn emit() {
    return [this](oe::GenerateResponse&& r, uint32_t) {
      if (r.has_token())
        for (const auto& t : r.token().tokens())
          tokens.push_back(t.token_id());
      events.push_back(std::move(r));
      return true;
    };
  }
};

} // namespace

TEST_CASE("SGLang responses become OpenEngine events, incremental and "
          "cumulative alike") {
  for (bool cumulative : {false, true}) {
    sglang_translator t{"r1", cumulative};
    collected c;
    if (cumulative) {
      CHECK(t.translate(msg({5, 6}), c.emit()));
      CHECK(t.translate(msg({5, 6, 7}), c.emit()));
      CHECK(t.translate(msg({5, 6, 7, 8}, true, R"({"type": "length"})"),
                        c.emit()));
    } else {
      CHECK(t.translate(msg({5, 6}), c.emit()));
      CHECK(t.translate(msg({7}), c.emit()));
      CHECK(t.translate(msg({8}, true, R"({"type": "length"})"), c.emit()));
    }
    CHECK(c.tokens == std::vector<uint32_t>{5, 6, 7, 8});
    REQUIRE(c.events.front().has_prompt());
    CHECK(c.events.front().prompt().num_prompt_tokens() == 12);
    const auto& fin = c.events.back();
    REQUIRE(fin.has_finished());
    CHECK(fin.finished().reason() == oe::FINISH_REASON_LENGTH);
    CHECK(fin.usage().completion_tokens() == 4);
    CHECK(fin.usage().cached_prompt_tokens() == 8);
  }
}

TEST_CASE("SGLang finish reasons map, and malformed responses are refused") {
  auto reason_of = [](const char* json) {
    sglang_translator t{"r", false};
    collected c;
    t.translate(msg({1}, true, json), c.emit());
    return c.events.back().finished().reason();
  };
  CHECK(reason_of(R"({"type": "stop", "matched": 2})") ==
        oe::FINISH_REASON_STOP);
  CHECK(reason_of(R"({"type": "abort", "message": "x"})") ==
        oe::FINISH_REASON_CANCELLED);
  sglang_translator bad{"r", false};
  collected c;
  CHECK_FALSE(bad.translate(msg({1}, true, "not json"), c.emit()));
  sglang_translator shrink{"r", true};
  CHECK(shrink.translate(msg({1, 2}), c.emit()));
  CHECK_FALSE(shrink.translate(msg({1}), c.emit()));
}

TEST_CASE("an OpenEngine request becomes SGLang's, with the DP rank in the "
          "body") {
  oe::GenerateRequest in;
  in.set_request_id("req-7");
  for (uint32_t t : {3u, 4u, 5u})
    in.mutable_token_ids()->add_ids(t);
  in.mutable_stopping()->set_max_tokens(9);
  in.mutable_stopping()->add_conditions()->set_stop_token_id(2);
  auto out = to_sglang(in, 1);
  CHECK(out.input_ids_size() == 3);
  CHECK(out.rid() == "req-7");
  CHECK(out.routed_dp_rank() == 1);
  CHECK(out.sampling_params().max_new_tokens() == 9);
  CHECK(out.sampling_params().stop_token_ids(0) == 2);
  CHECK_FALSE(to_sglang(in, -1).has_routed_dp_rank());
}

TEST_CASE("a bootstrap-room KV session becomes SGLang's disaggregated_params, "
          "anything else does not") {
  auto s = bootstrap_session(4611686018427387904, "10.0.0.7:8998", 1);
  auto p = bootstrap_params(s);
  REQUIRE(p);
  CHECK(p->bootstrap_host() == "10.0.0.7");
  CHECK(p->bootstrap_port() == 8998);
  CHECK(p->bootstrap_room() == 4611686018427387904);
  oe::GenerateRequest in;
  in.mutable_token_ids()->add_ids(1);
  *in.mutable_kv()->mutable_session() = s;
  CHECK(to_sglang(in, -1).disaggregated_params().bootstrap_room() ==
        4611686018427387904);

  auto broken = [&](auto change) {
    auto b = s;
    change(b);
    return !bootstrap_params(b);
  };
  CHECK(broken([](auto& b) { b.set_transfer_backend("nixl"); }));
  CHECK(broken([](auto& b) { b.set_session_id("-3"); }));
  CHECK(broken([](auto& b) { b.set_session_id("12x"); }));
  CHECK(broken([](auto& b) { b.set_session_id("99999999999999999999"); }));
  CHECK(broken([](auto& b) { b.mutable_endpoints(0)->set_port(70000); }));
  CHECK(broken([](auto& b) { b.mutable_endpoints(0)->clear_host(); }));
  CHECK(broken([](auto& b) { b.clear_endpoints(); }));
}
