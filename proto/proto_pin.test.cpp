// The protos copied from upstream are pinned to one revision each: SGLang's
// (field numbers move between SGLang versions) and Envoy's external
// processing subset (the endpoint picker), the OTLP trace subset (the
// trace exporter). Each file's sha256, and the
// field numbers docs/wire.md gives for the fields that moved or matter
// most, read back from the generated descriptors.

#include <fstream>
#include <iomanip>
#include <openssl/sha.h>
#include <sstream>

#include <catch2/catch.hpp>

#include "envoy/service/ext_proc/v3/external_processor.pb.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
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

TEST_CASE("the OTLP trace subset is the pinned revision") {
  // Changing a file is changing the pin: update these with the revision.
  const std::string root = OUTRIDER_SOURCE_DIR "/proto/opentelemetry/proto/";
  CHECK(sha256_of(root + "common/v1/common.proto") ==
        "c8a8da3f4a483de40e54f2d3b3ffc16f677eded5a42be003781a6332e9cf5b82");
  CHECK(sha256_of(root + "resource/v1/resource.proto") ==
        "4b97756e667671494a006dd218053435e30fd64308c7ec2a086b9a9336de7e4c");
  CHECK(sha256_of(root + "trace/v1/trace.proto") ==
        "ecad96b8866dbba16f38bb8835bda5406a5a8b3ba3032f9a61aa3d48ebc47840");
  CHECK(sha256_of(root + "collector/trace/v1/trace_service.proto") ==
        "ae33b790ab9c0d8c85973df405635d6ebc2c0dbc826694b67a0c06bbb11f8251");
  namespace ot = opentelemetry::proto::trace::v1;
  auto* span = ot::Span::descriptor();
  CHECK(span->full_name() == "opentelemetry.proto.trace.v1.Span");
  CHECK(field(span, "trace_id") == 1);
  CHECK(field(span, "span_id") == 2);
  CHECK(field(span, "trace_state") == 3);
  CHECK(field(span, "parent_span_id") == 4);
  CHECK(field(span, "name") == 5);
  CHECK(field(span, "kind") == 6);
  CHECK(field(span, "start_time_unix_nano") == 7);
  CHECK(field(span, "end_time_unix_nano") == 8);
  CHECK(field(span, "attributes") == 9);
  CHECK(field(span, "events") == 11);
  CHECK(field(span, "status") == 15);
  CHECK(field(span, "flags") == 16);
  CHECK(span->FindFieldByName("start_time_unix_nano")->type() ==
        google::protobuf::FieldDescriptor::TYPE_FIXED64);
  CHECK(field(ot::Status::descriptor(), "code") == 3);
  CHECK(field(ot::ResourceSpans::descriptor(), "scope_spans") == 2);
  namespace oc = opentelemetry::proto::common::v1;
  CHECK(field(oc::AnyValue::descriptor(), "int_value") == 3);
  CHECK(field(oc::KeyValue::descriptor(), "value") == 2);
  namespace col = opentelemetry::proto::collector::trace::v1;
  CHECK(field(col::ExportTraceServiceRequest::descriptor(), "resource_spans") ==
        1);
}
