#include "runtime/io_batch.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/http/server.hpp"
#include "tests/raw_client.hpp"

using namespace outrider::runtime;
using namespace std::chrono_literals;

namespace {

// What each gathered item did, in order.
struct log_target {
  std::vector<std::string> seen;
};

void note(const std::shared_ptr<void>& t, std::string& d) {
  static_cast<log_target*>(t.get())->seen.push_back(d);
}

} // namespace

TEST_CASE("io_batch: without one open, nothing is gathered") {
  boost::asio::io_context ctx;
  auto log = std::make_shared<log_target>();
  std::string data = "kept";
  CHECK(io_batch::depth() == 0);
  CHECK_FALSE(io_batch::add(ctx.get_executor(), note, log, std::move(data)));
  CHECK(data == "kept"); // the caller posts it itself
  CHECK(ctx.poll() == 0);
}

TEST_CASE("io_batch: one post an executor when the outermost scope ends, in "
          "order") {
  boost::asio::io_context a;
  boost::asio::io_context b;
  auto log_a = std::make_shared<log_target>();
  auto log_b = std::make_shared<log_target>();
  {
    io_batch outer;
    {
      io_batch inner;
      for (int i = 0; i < 100; ++i) {
        REQUIRE(io_batch::add(a.get_executor(), note, log_a,
                              "a" + std::to_string(i)));
        REQUIRE(io_batch::add(b.get_executor(), note, log_b,
                              "b" + std::to_string(i)));
      }
    }
    CHECK(io_batch::depth() == 1);
    CHECK(a.poll() == 0); // the inner scope's end posts nothing
    CHECK(b.poll() == 0);
  }
  CHECK(io_batch::depth() == 0);
  a.restart(); // a poll that found nothing stopped them
  b.restart();
  CHECK(a.poll() == 1); // a hundred items, one handler
  CHECK(b.poll() == 1);
  REQUIRE(log_a->seen.size() == 100);
  REQUIRE(log_b->seen.size() == 100);
  for (int i = 0; i < 100; ++i) {
    CHECK(log_a->seen[i] == "a" + std::to_string(i));
    CHECK(log_b->seen[i] == "b" + std::to_string(i));
  }
}

TEST_CASE("io_batch: flush posts what gathered for one executor, ahead of "
          "work posted after it") {
  boost::asio::io_context a;
  boost::asio::io_context b;
  auto log_a = std::make_shared<log_target>();
  auto log_b = std::make_shared<log_target>();
  {
    io_batch batch;
    REQUIRE(io_batch::add(a.get_executor(), note, log_a, "data"));
    REQUIRE(io_batch::add(b.get_executor(), note, log_b, "other"));
    io_batch::flush(a.get_executor());
    boost::asio::post(a, [log_a] { log_a->seen.push_back("end"); });
    REQUIRE(io_batch::add(a.get_executor(), note, log_a, "later"));
    CHECK(a.poll() == 2); // the data, then the end
    CHECK(b.poll() == 0); // b's waits for the scope
  }
  a.restart(); // a poll that found nothing stopped them
  b.restart();
  CHECK(a.poll() == 1);
  CHECK(b.poll() == 1);
  CHECK(log_a->seen == std::vector<std::string>{"data", "end", "later"});
  CHECK(log_b->seen == std::vector<std::string>{"other"});
}

TEST_CASE("io_batch: a stream written in a batch and ended in it arrives "
          "whole and in order") {
  http_server server{
    "io-batch-test",
    http_server::async_handler{[](std::shared_ptr<http_exchange> ex) {
      io_batch batch; // as the relay mux's reader does for a step
      ex->begin_stream(200, "text/event-stream");
      for (int i = 0; i < 50; ++i)
        ex->send("data: " + std::to_string(i) + "\n\n");
      ex->end();
    }}};
  REQUIRE_FALSE(server.start("127.0.0.1", 0));
  outrider::test::raw_client c{server.port()};
  c.send("GET /s HTTP/1.1\r\n\r\n");
  auto out = c.read_until([](const std::string& t) {
    return t.find("\r\n0\r\n\r\n") != std::string::npos;
  });
  REQUIRE(out.find("\r\n0\r\n\r\n") != std::string::npos);
  size_t at = 0;
  for (int i = 0; i < 50; ++i) {
    auto next = out.find("data: " + std::to_string(i) + "\n\n", at);
    REQUIRE(next != std::string::npos);
    at = next;
  }
}
