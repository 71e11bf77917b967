// SGLang's proto is pinned to one revision (field numbers move between
// SGLang versions): the file's sha256, and the field numbers docs/wire.md
// ("SGLang's gRPC") gives for the fields that moved or matter most, read back
// from the generated descriptors.

#include <fstream>
#include <iomanip>
#include <openssl/sha.h>
#include <sstream>

#include <catch2/catch.hpp>

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
