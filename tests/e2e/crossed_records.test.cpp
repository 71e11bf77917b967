// A discovery record whose relay serves another worker (a stale record
// after a sidecar moved ports, a copy-paste in a hand-written record, a
// record planted by someone): the router names the worker it means on
// every call to a relay (`x-outrider-worker`, docs/wire.md), and the relay
// refuses a call meant for another. Before, the router took the other
// sidecar's events and requests for the record's worker: one engine's
// cache indexed twice under two names, and placements on a phantom.

#include <filesystem>
#include <fstream>

#include "openengine.grpc.pb.h"
#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/sidecar_process.hpp"

using namespace outrider::test;
using Catch::Matchers::Contains;
namespace oe = openengine::v1;

TEST_CASE("a record whose relay serves another worker is never placed on, "
          "and that relay says why") {
  cluster c{2};
  REQUIRE(c.router_metric("outrider_router_workers") == 2);
  auto& other = *c.sides[1];
  plant_record(c, "phantom", other.relay_endpoint());
  const std::string refused = "outrider_relay_misaddressed_total";
  // The router's subscription for "phantom" reaches worker-1's relay,
  // which refuses it (and again at each of the router's retries).
  CHECK(eventually([&] { return other.metric(refused).value_or(0) >= 1; },
                   allowed(10s)));
  // Never announced: a worker is placed on only once its relay answered.
  CHECK(c.router_metric("outrider_router_workers") == 2);
  for (uint32_t i = 0; i < 6; ++i)
    CHECK(c.complete(tokens(100 * i + 1, 16), 2)["choices"].size() == 1);
  CHECK(c.router_metric("outrider_router_workers") == 2);
  CHECK(c.router_metric(
          "outrider_router_placed_total{worker=\"phantom\",rank=\"0\"}") <= 0);
  // The relay's own answers: another worker's name is refused and said;
  // its own name, or none (an older router, a tool), is served.
  auto st = generate_on(other.relay_endpoint(), "worker-0");
  CHECK(st.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(st.error_message(),
             Contains("serves worker 'worker-1', not 'worker-0'"));
  for (std::string own : {"worker-1", ""}) {
    st = generate_on(other.relay_endpoint(), own);
    INFO("naming '" << own << "': " << st.error_message());
    CHECK(st.ok());
  }
  // A caller's name of any length comes back cut to 64 bytes.
  st = generate_on(other.relay_endpoint(), std::string(5000, 'x'));
  CHECK(st.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(st.error_message().size() < 300);
  // Control calls too: GetLoad naming another worker is refused.
  auto control = oe::Control::NewStub(grpc::CreateChannel(
    other.relay_endpoint(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + allowed(10s));
  ctx.AddMetadata("x-outrider-worker", "phantom");
  oe::LoadInfo load;
  CHECK(control->GetLoad(&ctx, {}, &load).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  // Each refusal counted.
  CHECK(other.metric(refused).value_or(0) >= 3);
}
