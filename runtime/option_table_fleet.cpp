// The fleet's options: how routers learn the sidecars' KV events (the
// event plane), NATS (servers, credentials, subjects, shared bookings) and
// discovery's records. Part of the one table of options (option_table.cpp
// keeps them in this place in `--help`).
#include <cstdlib>
#include <unistd.h>

#include "runtime/option_table_parts.hpp"

namespace outrider::runtime {

namespace {

// Private to this user: $XDG_RUNTIME_DIR (0700 by definition), else a
// directory named for the uid under $TMPDIR or /tmp, created 0700 and
// refused if another user owns it (file_discovery::open).
std::string default_discovery_dir() {
  if (const char* run = std::getenv("XDG_RUNTIME_DIR"); run && *run)
    return std::string{run} + "/outrider/discovery";
  const char* tmp = std::getenv("TMPDIR");
  return std::string{tmp && *tmp ? tmp : "/tmp"} + "/outrider-" +
         std::to_string(::geteuid()) + "/discovery";
}

} // namespace

std::vector<option_spec> fleet_option_specs() {
  using ot = option_type;
  return {
    make_option("event-plane", ot::string, "grpc",
                "how routers learn the sidecars' KV events: grpc (each router "
                "subscribes to each sidecar) or nats (sidecars publish once on "
                "<--nats-kv-subject>.<worker id>; routers resynchronise from a "
                "sidecar's snapshot on a gap)",
                "--event-plane nats", {"grpc", "nats"}),
    make_option("nats-kv-subject", ot::string, "outrider.kv",
                "event plane nats: the subject prefix of the KV batches",
                "--nats-kv-subject prod.kv"),
    make_option(
      "share-bookings", ot::boolean, "false",
      "router: tell the other routers over NATS what this one booked "
      "where (request placed, prefilled, done) and count theirs in the "
      "load, so replicas under a burst spread requests as one router "
      "would",
      "--share-bookings"),
    make_option("nats-booking-subject", ot::string, "outrider.bookings",
                "share-bookings: the subject the routers' booking notes go to",
                "--nats-booking-subject prod.bookings"),
    make_option("nats-url", ot::string, "nats://127.0.0.1:4222",
                "discovery and event plane nats: the servers, comma-separated",
                "--nats-url nats://nats-0:4222,nats://nats-1:4222"),
    make_option("nats-bucket", ot::string, "outrider-workers",
                "discovery nats: the key-value bucket of worker records",
                "--nats-bucket prod-workers"),
    make_option("nats-creds", ot::string, "",
                "discovery nats: a credentials file (JWT and NKey seed)",
                "--nats-creds /etc/outrider/nats.creds"),
    make_option("nats-token", ot::string, "",
                "discovery nats: an authentication token (prefer "
                "OUTRIDER_NATS_TOKEN to a flag; never logged)",
                "OUTRIDER_NATS_TOKEN=s3cr3t"),
    make_option("nats-user", ot::string, "", "discovery nats: user name",
                "--nats-user outrider"),
    make_option("nats-password", ot::string, "",
                "discovery nats: the user's password (prefer "
                "OUTRIDER_NATS_PASSWORD; never logged)",
                "OUTRIDER_NATS_PASSWORD=s3cr3t"),
    make_option("discovery-dir", ot::string, default_discovery_dir(),
                "the file backend's directory of worker records",
                "--discovery-dir /run/outrider/discovery"),
    make_option("discovery-ttl", ot::duration, "10s",
                "a record not refreshed for this long is stale",
                "--discovery-ttl 30s")};
}

} // namespace outrider::runtime
