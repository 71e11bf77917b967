#include "runtime/options.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

using namespace outrider::runtime;

namespace {

struct temp_yaml {
  std::filesystem::path path;
  explicit temp_yaml(const std::string& text) {
    static int n = 0;
    path = std::filesystem::temp_directory_path() /
           ("outrider-opts-" + std::to_string(::getpid()) + "-" +
            std::to_string(n++) + ".yaml");
    std::ofstream(path) << text;
  }
  ~temp_yaml() { std::filesystem::remove(path); }
};

parse_outcome parse(std::vector<std::string> args,
                    std::map<std::string, std::string> env = {}) {
  return parse_options(args, env);
}

} // namespace

TEST_CASE("defaults apply when nothing is given") {
  auto r = parse({"--role", "sidecar"});
  REQUIRE(r.what == parse_outcome::ok);
  CHECK(r.opts.get_int("system-port") == 9090);
  CHECK(r.opts.get_string("system-host") == "127.0.0.1");
  CHECK(r.opts.source("system-port") == option_source::default_value);
  CHECK(r.opts.get_duration("shutdown-timeout") == std::chrono::seconds{5});
}

TEST_CASE("precedence is flag > env > file > default") {
  temp_yaml f{"system-port: 7001\nlog-level: debug\nlog-format: json\n"};
  auto path = f.path.string();
  auto r = parse({"--role=sidecar", "--config", path, "--system-port", "7003"},
                 {{"OUTRIDER_SYSTEM_PORT", "7002"},
                  {"OUTRIDER_LOG_LEVEL", "warn"},
                  {"HOME", "/root"}});
  REQUIRE(r.what == parse_outcome::ok);
  CHECK(r.opts.get_int("system-port") == 7003);
  CHECK(r.opts.source("system-port") == option_source::flag);
  CHECK(r.opts.get_string("log-level") == "warn");
  CHECK(r.opts.source("log-level") == option_source::env);
  CHECK(r.opts.get_string("log-format") == "json");
  CHECK(r.opts.source("log-format") == option_source::file);
}

TEST_CASE("the config file may come from the environment") {
  temp_yaml f{"role: sidecar\n"};
  auto r = parse({}, {{"OUTRIDER_CONFIG", f.path.string()}});
  REQUIRE(r.what == parse_outcome::ok);
  CHECK(r.opts.get_string("role") == "sidecar");
}

TEST_CASE("boolean flags take a bare form or a value") {
  auto a = parse({"--role", "sidecar", "--debug-hang-on-shutdown"});
  REQUIRE(a.what == parse_outcome::ok);
  CHECK(a.opts.get_bool("debug-hang-on-shutdown"));
  auto b = parse({"--debug-hang-on-shutdown", "false", "--role", "sidecar"});
  REQUIRE(b.what == parse_outcome::ok);
  CHECK_FALSE(b.opts.get_bool("debug-hang-on-shutdown"));
}

TEST_CASE("bad input gives one clear error line") {
  using Catch::Matchers::Contains;
  SECTION("unknown flag, with a suggestion") {
    auto r = parse({"--role", "sidecar", "--sytem-port", "1"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("unknown flag '--sytem-port'") &&
                            Contains("did you mean 'system-port'"));
  }
  SECTION("unknown role") {
    auto r = parse({"--role", "banana"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message,
               Contains("'role' must be one of sidecar, router, all"));
  }
  SECTION("missing role") {
    auto r = parse({});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("no role given"));
  }
  SECTION("a control character in a name (a newline in a host)") {
    auto r = parse({"--role", "sidecar", "--relay-host", "10.0.0.5\nevil"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("'relay-host' has a control character"));
    // JSON documents may hold JSON's whitespace.
    auto doc = parse({"--role", "router", "--router-conditional-disagg-config",
                      "{\n  \"policy\": \"isl_or_load\"\n}"});
    CHECK(doc.what != parse_outcome::error);
  }
  SECTION("wrong type") {
    auto r = parse({"--role", "sidecar", "--system-port", "abc"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("'system-port' must be an integer"));
  }
  SECTION("infinite numbers and overlong durations") {
    auto inf = parse({"--role", "router", "--router-temperature", "inf"});
    REQUIRE(inf.what == parse_outcome::error);
    CHECK_THAT(inf.message, Contains("finite non-negative number"));
    auto nan = parse({"--role", "router", "--router-temperature", "nan"});
    CHECK(nan.what == parse_outcome::error);
    auto forever =
      parse({"--role", "sidecar", "--engine-startup-deadline", "9999999999h"});
    REQUIRE(forever.what == parse_outcome::error);
    CHECK_THAT(forever.message, Contains("at most a year"));
    CHECK(
      parse({"--role", "sidecar", "--engine-startup-deadline", "8760h"}).what !=
      parse_outcome::error);
  }
  SECTION("a key set twice in the config file") {
    temp_yaml y{"role: sidecar\nsystem-port: 1\nlog-level: info\n"
                "system-port: 2\n"};
    auto r = parse({"--config", y.path.string()});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message,
               Contains(":4: 'system-port' is set twice (first on line 2)"));
  }
  SECTION("out of range") {
    auto r = parse({"--role", "sidecar", "--system-port", "70000"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("between 0 and 65535"));
  }
  SECTION("bad duration") {
    auto r = parse({"--role", "sidecar", "--shutdown-timeout", "5 parsecs"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("must be a duration"));
  }
  SECTION("flag without value") {
    auto r = parse({"--role"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("needs a value"));
  }
  SECTION("positional argument") {
    auto r = parse({"sidecar"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("unexpected argument 'sidecar'"));
  }
  SECTION("unknown environment variable is a warning with a suggestion") {
    auto r = parse({"--role", "sidecar"}, {{"OUTRIDER_SYSTEM_PROT", "1"}});
    REQUIRE(r.what == parse_outcome::ok);
    REQUIRE(r.warnings.size() == 1);
    CHECK_THAT(r.warnings[0], Contains("ignoring unknown environment variable "
                                       "OUTRIDER_SYSTEM_PROT"));
    CHECK_THAT(r.warnings[0], Contains("system-port"));
  }
  SECTION("Kubernetes service-link variables are ignored") {
    auto r = parse({"--role", "sidecar"},
                   {{"OUTRIDER_PORT", "tcp://10.0.0.1:80"},
                    {"OUTRIDER_SERVICE_HOST", "10.0.0.1"},
                    {"OUTRIDER_SERVICE_PORT", "80"},
                    {"OUTRIDER_SERVICE_PORT_HTTP", "80"},
                    {"OUTRIDER_PORT_8000_TCP", "tcp://10.0.0.1:8000"},
                    {"OUTRIDER_PORT_8000_TCP_ADDR", "10.0.0.1"},
                    {"OUTRIDER_PORT_8000_TCP_PORT", "8000"},
                    {"OUTRIDER_PORT_8000_TCP_PROTO", "tcp"},
                    // A Service named outrider-http shadows an option.
                    {"OUTRIDER_HTTP_PORT", "tcp://10.0.0.2:8000"},
                    {"OUTRIDER_HTTP_SERVICE_HOST", "10.0.0.2"}});
    REQUIRE(r.what == parse_outcome::ok);
    CHECK(r.warnings.empty());
    CHECK(r.opts.get_int("http-port") == 8000);
  }
  SECTION("a real option set badly in the environment is still an error") {
    auto r = parse({"--role", "sidecar"}, {{"OUTRIDER_HTTP_PORT", "eighty"}});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("OUTRIDER_HTTP_PORT"));
  }
  SECTION("unknown key in the file names its line") {
    temp_yaml f{"role: sidecar\n# comment\nsistem-port: 1\n"};
    auto r = parse({"--config", f.path.string()});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains(f.path.string() + ":3: unknown key "
                                                     "'sistem-port'"));
  }
  SECTION("wrong type in the file names its line") {
    temp_yaml f{"role: sidecar\nsystem-port: lots\n"};
    auto r = parse({"--config", f.path.string()});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains(":2: 'system-port' must be an integer"));
  }
  SECTION("invalid YAML names its line") {
    temp_yaml f{"role: sidecar\nsystem-port: [1, 2\n"};
    auto r = parse({"--config", f.path.string()});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("invalid YAML"));
  }
  SECTION("nested value") {
    temp_yaml f{"role:\n  - sidecar\n"};
    auto r = parse({"--config", f.path.string()});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains(":1: 'role' must be a single value"));
  }
  SECTION("a config file over 1 MiB is refused before it is parsed") {
    std::string big = "role: sidecar\n";
    for (int i = 0; big.size() <= (1 << 20); ++i)
      big += "k" + std::to_string(i) + ": 1\n";
    temp_yaml f{big};
    auto r = parse({"--config", f.path.string()});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("the limit is 1 MiB"));
  }
  SECTION("unreadable file") {
    auto r = parse({"--role", "sidecar", "--config", "/nonexistent/x.yaml"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message,
               Contains("cannot read config file '/nonexistent/x.yaml'"));
  }
  SECTION("inconsistent backoff") {
    auto r = parse({"--role", "sidecar", "--supervisor-initial-backoff", "2s",
                    "--supervisor-max-backoff", "1s"});
    REQUIRE(r.what == parse_outcome::error);
    CHECK_THAT(r.message, Contains("must not exceed"));
  }
}

TEST_CASE("durations") {
  using namespace std::chrono;
  CHECK(parse_duration("250ms") == milliseconds{250});
  CHECK(parse_duration("250") == milliseconds{250});
  CHECK(parse_duration("3s") == seconds{3});
  CHECK(parse_duration("2m") == minutes{2});
  CHECK_FALSE(parse_duration("-1s"));
  CHECK_FALSE(parse_duration("s"));
  CHECK_FALSE(parse_duration("1y"));
}

TEST_CASE("help lists every visible option with an example") {
  auto text = help_text();
  for (const auto& s : option_specs()) {
    CHECK(text.find("--" + s.key) != std::string::npos);
    CHECK(text.find(s.example) != std::string::npos);
  }
}

TEST_CASE("every option of the table has a typed key of its type, and no key "
          "is missing from the table") {
  std::map<std::string, option_type> keys;
#define OUTRIDER_TEST_KEY(ident, key, type) keys[key] = option_type::type;
  OUTRIDER_OPTION_KEYS(OUTRIDER_TEST_KEY)
#undef OUTRIDER_TEST_KEY
  std::map<std::string, option_type> table;
  for (const auto& spec : option_specs())
    table[spec.key] = spec.type;
  CHECK(keys == table);
  // The typed accessors read what the parser stored.
  auto r =
    parse({"--role", "router", "--http-port", "8123", "--router-temperature",
           "0.5", "--shutdown-timeout", "2s", "--router-conditional-disagg"});
  REQUIRE(r.what == parse_outcome::ok);
  CHECK(r.opts.get(opt::role) == "router");
  CHECK(r.opts.get(opt::http_port) == 8123);
  CHECK(r.opts.get(opt::router_temperature) == 0.5);
  CHECK(r.opts.get(opt::shutdown_timeout) == std::chrono::seconds{2});
  CHECK(r.opts.get(opt::router_conditional_disagg));
  CHECK(r.opts.source(opt::http_port) == option_source::flag);
  CHECK(r.opts.source(opt::grpc_port) == option_source::default_value);
}

TEST_CASE("the flag layer: = form, repeated flags, --version, empty values") {
  using Catch::Matchers::Contains;
  auto eq = parse({"--role=router", "--http-port=8124"});
  REQUIRE(eq.what == parse_outcome::ok);
  CHECK(eq.opts.get(opt::http_port) == 8124);
  auto twice =
    parse({"--role", "router", "--http-port", "1", "--http-port", "2"});
  REQUIRE(twice.what == parse_outcome::ok);
  CHECK(twice.opts.get(opt::http_port) == 2);
  CHECK(parse({"--version"}).what == parse_outcome::version);
  CHECK(parse({"--role", "router", "--help"}).what == parse_outcome::help);
  auto empty = parse({"--role=router", "--http-host="});
  REQUIRE(empty.what == parse_outcome::error);
  CHECK_THAT(empty.message, Contains("'--http-host' needs a value"));
  auto next = parse({"--role", "--http-port", "1"});
  REQUIRE(next.what == parse_outcome::error);
  CHECK_THAT(next.message, Contains("'--role' needs a value"));
  auto bare = parse({"--router-conditional-disagg", "--role", "router"});
  REQUIRE(bare.what == parse_outcome::ok);
  CHECK(bare.opts.get(opt::router_conditional_disagg));
  CHECK(bare.opts.get(opt::role) == "router");
}

TEST_CASE("a table of one's own: parse_flags with number ranges") {
  using Catch::Matchers::Contains;
  option_spec speed;
  speed.key = "speed";
  speed.type = option_type::number;
  speed.default_value = "1";
  speed.lowest = 0.5;
  speed.highest = 4;
  option_spec fast;
  fast.key = "fast";
  fast.type = option_type::boolean;
  fast.default_value = "false";
  std::vector<option_spec> specs{speed, fast};
  auto ok = parse_flags(specs, {"--speed", "2.5", "--fast"});
  REQUIRE(ok.what == parse_outcome::ok);
  CHECK(ok.opts.get_number("speed") == 2.5);
  CHECK(ok.opts.get_bool("fast"));
  auto d = parse_flags(specs, {});
  REQUIRE(d.what == parse_outcome::ok);
  CHECK(d.opts.get_number("speed") == 1);
  CHECK(d.opts.source("speed") == option_source::default_value);
  auto low = parse_flags(specs, {"--speed", "0.1"});
  REQUIRE(low.what == parse_outcome::error);
  CHECK_THAT(low.message, Contains("between 0.5 and 4"));
  auto typo = parse_flags(specs, {"--sped", "1"});
  REQUIRE(typo.what == parse_outcome::error);
  CHECK_THAT(typo.message, Contains("did you mean 'speed'"));
}

TEST_CASE("check-config lists what differs from the defaults, secrets "
          "masked") {
  auto r = parse({"--role", "router", "--check-config", "--router-mode",
                  "random", "--nats-token", "s3cr3t"},
                 {{"OUTRIDER_NATS_PASSWORD", "hunter2"}});
  INFO(r.message);
  REQUIRE(r.what == parse_outcome::ok);
  auto text = describe_settings(r.opts);
  CHECK_THAT(text,
             Catch::Matchers::Contains("router-mode = random (from flag)"));
  CHECK_THAT(text, Catch::Matchers::Contains("nats-token = *** (from flag)"));
  CHECK_THAT(
    text, Catch::Matchers::Contains("nats-password = *** (from environment)"));
  CHECK(text.find("s3cr3t") == std::string::npos);
  CHECK(text.find("hunter2") == std::string::npos);
  CHECK(text.find("http-port") == std::string::npos); // a default
}
