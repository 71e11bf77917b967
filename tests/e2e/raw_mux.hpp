#pragma once

// A raw RelayMux client (proto/relay_mux.proto) for end-to-end tests: what
// a buggy or hostile router could send to a relay, or to the fleet
// simulator's.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "relay_mux.grpc.pb.h"
#include "tests/e2e/process.hpp"

namespace outrider::test {

namespace mx = outrider::relaymux::v1;

struct raw_mux {
  grpc::ClientContext ctx;
  std::unique_ptr<mx::RelayMux::Stub> stub;
  std::unique_ptr<grpc::ClientReaderWriter<mx::MuxRequest, mx::MuxResponse>> rw;
  raw_mux(const std::string& endpoint, const std::string& worker) {
    stub = mx::RelayMux::NewStub(
      grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
    ctx.AddMetadata("x-outrider-worker", worker);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     allowed(std::chrono::seconds{60}));
    rw = stub->Relay(&ctx);
  }
  bool open(uint64_t id, const std::vector<uint32_t>& prompt,
            uint32_t max_tokens) {
    mx::MuxRequest r;
    auto* o = r.add_open();
    o->set_id(id);
    o->mutable_request()->mutable_token_ids()->mutable_ids()->Add(
      prompt.begin(), prompt.end());
    o->mutable_request()->mutable_stopping()->set_max_tokens(max_tokens);
    o->set_timeout_ms(60000);
    return rw->Write(r);
  }
  bool cancel(uint64_t id) {
    mx::MuxRequest r;
    r.add_cancel(id);
    return rw->Write(r);
  }
  // Reads until `id` is done: its tokens and its final status code.
  std::pair<std::vector<uint32_t>, int> until_done(uint64_t id) {
    std::vector<uint32_t> toks;
    mx::MuxResponse m;
    while (rw->Read(&m))
      for (const auto& u : m.updates()) {
        if (u.id() != id)
          continue;
        for (const auto& resp : u.responses())
          for (const auto& t : resp.token().tokens())
            toks.push_back(t.token_id());
        if (u.done())
          return {toks, u.code()};
      }
    return {toks, -1};
  }
};

} // namespace outrider::test
