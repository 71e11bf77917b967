#include "runtime/logging.hpp"

#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace outrider::runtime {

namespace {

// One JSON object per line: ts (RFC 3339, UTC), level, thread, msg.
class json_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg,
              spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    auto t = system_clock::to_time_t(msg.time);
    auto ms = duration_cast<milliseconds>(msg.time.time_since_epoch()) % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[64];
    std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                  tm.tm_min, tm.tm_sec, static_cast<int>(ms.count()));
    auto level = spdlog::level::to_string_view(msg.level);
    nlohmann::ordered_json line{
      {"ts", ts},
      {"level", std::string(level.data(), level.size())},
      {"thread", msg.thread_id},
      {"msg", std::string(msg.payload.data(), msg.payload.size())}};
    // Invalid UTF-8 in a message becomes U+FFFD rather than an exception.
    auto text = line.dump(-1, ' ', false,
                          nlohmann::ordered_json::error_handler_t::replace) +
                "\n";
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_formatter>();
  }
};

} // namespace

void setup_logging(const std::string& level, const std::string& format) {
  auto logger = spdlog::stderr_logger_mt("outrider");
  if (format == "json")
    logger->set_formatter(std::make_unique<json_formatter>());
  else
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

} // namespace outrider::runtime
