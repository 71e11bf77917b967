// The protos copied from upstream are pinned to one revision each: SGLang's
// (field numbers move between SGLang versions) and Envoy's external
// processing subset (the endpoint picker). Each file's sha256, and the
// field numbers docs/wire.md gives for the fields that moved or matter
// most, read back from the generated descriptors.

#include <fstream>
#include <iomanip>
#include <openssl/sha.h>
#include <sstream>

#include <catch2/catch.hpp>

#include "envoy/service/ext_proc/v3/external_processor.pb.h"
#include "sglang.pb.h"

namespace {

std::string sha256_of(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::string bytes{std::istreambuf_iterator<char>{in}, {}};
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d);
  std::ostringstream hex;
  for (auto b : d)
    hex << std::hex << std::setw(2) << std::setfill('0') << int(b);
  return hex.str();
}

int field(const google::protobuf::Descriptor* m, const char* name) {
  auto* f = m->FindFieldByName(name);
  return f ? f->number() : -1;
}

} // namespace

TEST_CASE("sglang.proto is the pinned revision") {
  // Changing the file is changing the pin: update this with the revision.
  CHECK(sha256_of(OUTRIDER_SOURCE_DIR "/proto/sglang.proto") ==
        "6477aa750db6f8358ec0e126f0132bd3441e70c0debfea9da995e94b36176cc5");
  using namespace sglang::runtime::v1;
  auto* req = GenerateRequest::descriptor();
  CHECK(field(req, "input_ids") == 1);
  CHECK(field(req, "sampling_params") == 2);
  CHECK(field(req, "rid") == 7);
  CHECK(field(req, "routed_dp_rank") == 10);
  CHECK(field(req, "session_id") == 12);
  CHECK(field(req, "disaggregated_params") == 13);
  auto* sp = SamplingParams::descriptor();
  CHECK(field(sp, "max_new_tokens") == 8);
  CHECK(field(sp, "stop_token_ids") == 11);
  CHECK(field(sp, "ignore_eos") == 12);
  auto* resp = GenerateResponse::descriptor();
  CHECK(field(resp, "output_ids") == 1);
  CHECK(field(resp, "meta_info") == 2);
  CHECK(field(resp, "finished") == 3);
  auto* snap = EngineStateSnapshot::descriptor();
  CHECK(field(snap, "instance_id") == 1);
  CHECK(field(snap, "is_pause") == 5);
  CHECK(field(snap, "server_info") == 7);
  auto* dp = DisaggregatedParams::descriptor();
  CHECK(field(dp, "bootstrap_room") == 3);
  auto* svc = req->file()->FindServiceByName("SglangService");
  REQUIRE(svc != nullptr);
  CHECK(svc->FindMethodByName("WatchEngineState")->server_streaming());
  CHECK(svc->FindMethodByName("Generate")->server_streaming());
}

TEST_CASE("the ext_proc subset is the pinned revision") {
  // Changing a file is changing the pin: update these with the revision.
  CHECK(
    sha256_of(OUTRIDER_SOURCE_DIR
              "/proto/envoy/service/ext_proc/v3/external_processor.proto") ==
    "c20c7cd17421eb8311537c5ed1cfcd21cb6bde133959eee4f37bd2d60ed03508");
  CHECK(
    sha256_of(OUTRIDER_SOURCE_DIR "/proto/envoy/config/core/v3/base.proto") ==
    "85c2a2fd097b1df959ffb1ef6bac97d75312cd36e4c57c08074d83a4a2aa9040");
  CHECK(
    sha256_of(OUTRIDER_SOURCE_DIR "/proto/envoy/type/v3/http_status.proto") ==
    "75706eb62e2c6529b8fb52aaed8ed3abfed090749eb9bfc1df03e0c7f73682bc");
  using namespace envoy::service::ext_proc::v3;
  auto* req = ProcessingRequest::descriptor();
  CHECK(req->full_name() == "envoy.service.ext_proc.v3.ProcessingRequest");
  CHECK(field(req, "request_headers") == 2);
  CHECK(field(req, "response_headers") == 3);
  CHECK(field(req, "request_body") == 4);
  CHECK(field(req, "response_body") == 5);
  CHECK(field(req, "metadata_context") == 8);
  auto* resp = ProcessingResponse::descriptor();
  CHECK(field(resp, "request_headers") == 1);
  CHECK(field(resp, "request_body") == 3);
  CHECK(field(resp, "immediate_response") == 7);
  CHECK(field(resp, "dynamic_metadata") == 8);
  CHECK(field(HttpHeaders::descriptor(), "end_of_stream") == 3);
  CHECK(field(CommonResponse::descriptor(), "clear_route_cache") == 5);
  CHECK(field(HeaderMutation::descriptor(), "remove_headers") == 2);
  CHECK(field(ImmediateResponse::descriptor(), "details") == 5);
  auto* hv = envoy::config::core::v3::HeaderValue::descriptor();
  CHECK(field(hv, "raw_value") == 3);
  auto* hvo = envoy::config::core::v3::HeaderValueOption::descriptor();
  CHECK(field(hvo, "append_action") == 3);
  CHECK(
    envoy::config::core::v3::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD ==
    2);
  CHECK(envoy::type::v3::TooManyRequests == 429);
  auto* svc = req->file()->FindServiceByName("ExternalProcessor");
  REQUIRE(svc != nullptr);
  auto* process = svc->FindMethodByName("Process");
  REQUIRE(process != nullptr);
  CHECK(process->client_streaming());
  CHECK(process->server_streaming());
}
