#include "actors/router/router_service.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include "actors/router/dispatch/dispatcher.hpp"
#include "cluster/discovery.hpp"
#include "runtime/embedded_env.hpp"
#include "runtime/errors.hpp"
#include "tests/raw_client.hpp"

using namespace outrider;

namespace {

// Nothing is generated here: the fields' own defaults do, but for where
// it listens.
router::router_settings defaults() {
  router::router_settings s;
  s.http_host = "127.0.0.1";
  s.http_port = 0; // a free one
  s.grpc_port = 0; // no gRPC frontend
  return s;
}

// CAF's test scheduler: no actor runs here (none is needed), and no CAF
// thread either (CAF comes uninstrumented: TSan would report its own
// shutdown against us).
struct caf_config : caf::actor_system_config {
  caf_config() {
    outrider::add_error_category(*this);
    set("scheduler.policy", caf::atom("testing"));
    set("logger.verbosity", caf::atom("quiet"));
  }
};

} // namespace

TEST_CASE("router service: listens and is ready at once without a worker "
          "count, and stop ends admission and closes the frontend, once") {
  caf_config cfg;
  caf::actor_system sys{cfg};
  runtime::embedded_env host{sys, "router"};
  auto disc = std::make_shared<cluster::memory_discovery>();
  router::service svc{host.env(), defaults(), disc};
  REQUIRE(host.exit_requested() == -1);
  CHECK(svc.ready());
  auto port = svc.http_port();
  REQUIRE(port != 0);
  CHECK(test::raw_client{port}.connected());
  REQUIRE(svc.dispatch() != nullptr);

  svc.stop(std::chrono::milliseconds{100});
  CHECK_FALSE(svc.ready());
  CHECK(svc.dispatch() == nullptr);
  CHECK_FALSE(test::raw_client{port}.connected());
  svc.stop(std::chrono::milliseconds{100}); // a second time: nothing
  host.begin_stop();                        // its hook: stopped already
  host.finish();
}

TEST_CASE("router service: with a worker count it is not ready until that "
          "many can be placed on") {
  caf_config cfg;
  caf::actor_system sys{cfg};
  runtime::embedded_env host{sys, "router"};
  auto disc = std::make_shared<cluster::memory_discovery>();
  auto s = defaults();
  s.ready_workers = 1;
  router::service svc{host.env(), s, disc};
  CHECK_FALSE(svc.ready()); // no router actor, no worker: nothing placeable
  CHECK(svc.children().size() == 1);
  host.begin_stop();
  CHECK_FALSE(svc.ready());
  host.finish();
}
