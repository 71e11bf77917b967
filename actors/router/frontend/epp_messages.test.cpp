// The endpoint picker protocol's messages, and the ranks' HTTP endpoints
// and the subset hint over them.

#include "actors/router/frontend/epp_messages.hpp"

#include <catch2/catch.hpp>

#include "actors/router/core/endpoint_subset.hpp"

using namespace outrider::router;
namespace core = envoy::config::core::v3;

namespace {

core::Metadata subset_hint(const google::protobuf::Value& v) {
  core::Metadata m;
  auto& ns = (*m.mutable_filter_metadata())[std::string{epp::subset_namespace}];
  (*ns.mutable_fields())[std::string{epp::subset_key}] = v;
  return m;
}

} // namespace

TEST_CASE("epp: headers by lower-cased name, raw_value first, repeats "
          "joined") {
  core::HeaderMap m;
  auto add = [&](const char* k, const char* v, const char* raw) {
    auto* h = m.add_headers();
    h->set_key(k);
    h->set_value(v);
    h->set_raw_value(raw);
  };
  add(":path", "", "/v1/completions");
  add("X-Session-ID", "s1", "");
  add("accept", "a", "");
  add("Accept", "", "b");
  auto h = epp::headers_of(m);
  CHECK(h.at(":path") == "/v1/completions");
  CHECK(h.at("x-session-id") == "s1");
  CHECK(h.at("accept") == "a, b");
}

// [protobuf-map]: protobuf's Map code, inlined from Debian's headers into a
// ThreadSanitizer build against the uninstrumented libprotobuf, crashes
// (SIGSEGV in InnerMap::FindHelper); scripts/test leaves these out of the
// TSan run only (they run in the plain and ASan builds).
TEST_CASE("epp: the subset hint as a list, a comma string, absent, empty",
          "[protobuf-map]") {
  google::protobuf::Value list;
  list.mutable_list_value()->add_values()->set_string_value("10.0.0.1:8000");
  list.mutable_list_value()->add_values()->set_string_value(
    " 10.0.0.2:8000 ,10.0.0.3:8001");
  list.mutable_list_value()->add_values()->set_number_value(7); // ignored
  CHECK(*epp::subset_of(subset_hint(list)) ==
        std::vector<std::string>{"10.0.0.1:8000", "10.0.0.2:8000",
                                 "10.0.0.3:8001"});
  google::protobuf::Value str;
  str.set_string_value("10.0.0.1:8000,,10.0.0.2:8000 ");
  CHECK(*epp::subset_of(subset_hint(str)) ==
        std::vector<std::string>{"10.0.0.1:8000", "10.0.0.2:8000"});
  CHECK_FALSE(epp::subset_of(core::Metadata{}).has_value());
  google::protobuf::Value empty;
  empty.mutable_list_value();
  auto none = epp::subset_of(subset_hint(empty));
  REQUIRE(none.has_value());
  CHECK(none->empty());
}

TEST_CASE("epp: the picked endpoint as a header that replaces, the same in "
          "dynamic metadata, reserved headers removed",
          "[protobuf-map]") {
  auto c = epp::picked("10.0.0.7:8001");
  CHECK(c.clear_route_cache());
  REQUIRE(c.header_mutation().set_headers_size() == 1);
  const auto& set = c.header_mutation().set_headers(0);
  CHECK(set.header().key() == "x-gateway-destination-endpoint");
  CHECK(set.header().raw_value() == "10.0.0.7:8001");
  CHECK(set.append_action() ==
        core::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
  CHECK(c.header_mutation().remove_headers_size() == 4);
  // With P/D the prefiller is set too, and so not removed.
  auto pd = epp::picked("10.0.0.7:8001", "10.0.0.9:8000");
  REQUIRE(pd.header_mutation().set_headers_size() == 2);
  CHECK(pd.header_mutation().set_headers(1).header().key() ==
        "x-prefiller-host-port");
  CHECK(pd.header_mutation().set_headers(1).header().raw_value() ==
        "10.0.0.9:8000");
  CHECK(pd.header_mutation().remove_headers_size() == 3);
  auto md = epp::picked_metadata("10.0.0.7:8001");
  CHECK(md.fields()
          .at(std::string{"envoy.lb"})
          .struct_value()
          .fields()
          .at(std::string{"x-gateway-destination-endpoint"})
          .string_value() == "10.0.0.7:8001");
  core::Metadata served;
  auto& ns = (*served.mutable_filter_metadata())[std::string{"envoy.lb"}];
  (*ns.mutable_fields())[std::string{epp::served_key}].set_string_value(
    "10.0.0.8:8000");
  CHECK(epp::served_of(served) == "10.0.0.8:8000");
  CHECK(epp::served_of(core::Metadata{}).empty());
}

TEST_CASE("epp: an immediate response keeps the status, headers "
          "(lower-cased) and body") {
  outrider::runtime::http_response r;
  r.status = 429;
  r.content_type = "application/json";
  r.body = "{}";
  r.headers["Retry-After"] = "1";
  auto out = epp::immediate(r, "outrider_shed");
  const auto& im = out.immediate_response();
  CHECK(im.status().code() == envoy::type::v3::TooManyRequests);
  CHECK(im.body() == "{}");
  CHECK(im.details() == "outrider_shed");
  std::map<std::string, std::string> h;
  for (const auto& s : im.headers().set_headers())
    h[s.header().key()] = s.header().raw_value();
  CHECK(h.at("retry-after") == "1");
  CHECK(h.at("content-type") == "application/json");
}

TEST_CASE("endpoint subset: a rank's port, and which ranks a hint names") {
  CHECK(rank_endpoint("10.0.0.7:8000", 0) == "10.0.0.7:8000");
  CHECK(rank_endpoint("10.0.0.7:8000", 3) == "10.0.0.7:8003");
  CHECK(rank_endpoint("10.0.0.7:65535", 1).empty());
  CHECK(rank_endpoint("", 0).empty());
  CHECK(rank_endpoint("nohost", 0).empty());
  CHECK(rank_endpoint("[::1]:8000", 2) == "[::1]:8002");
  std::vector<std::string> hint{"10.0.0.7:8001", "10.0.0.9"};
  CHECK(in_subset(hint, "10.0.0.7:8001"));
  CHECK_FALSE(in_subset(hint, "10.0.0.7:8000"));
  CHECK(in_subset(hint, "10.0.0.9:8005")); // a bare host: every rank
  CHECK_FALSE(in_subset(hint, ""));
  CHECK_FALSE(in_subset({}, "10.0.0.7:8001"));
}
