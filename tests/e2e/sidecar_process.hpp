#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/process.hpp"

namespace outrider::test {

/// A fresh directory, removed with everything in it at the end.
struct temp_dir {
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::string str() const { return path.string(); }
  std::filesystem::path path;
};

/// Where a sidecar keeps its index and registers; shared by its restarts.
struct sidecar_dirs {
  temp_dir data;
  temp_dir discovery;
};

/// `outrider --role sidecar` on free ports with its own directories.
struct sidecar_process {
  sidecar_process(const std::string& engine_endpoint,
                  std::shared_ptr<sidecar_dirs> dirs = nullptr,
                  std::vector<std::string> extra = {});

  int get(const std::string& path, std::string* body = nullptr) const {
    return http_get(port, path, body);
  }
  /// The worker records in the discovery directory.
  std::vector<nlohmann::json> records() const;
  /// The value of a metric line, e.g. `outrider_registered`, with labels as
  /// written in the exposition; nullopt when absent.
  std::optional<double> metric(const std::string& series) const;
  /// The blocks of `rank` in its /debug/index (an array; empty when the
  /// rank or the page is missing).
  nlohmann::json index_blocks(int rank = 0) const;

  std::shared_ptr<sidecar_dirs> dirs;
  uint16_t port = 0;
  uint16_t relay_port = 0;
  std::string relay_endpoint() const {
    return "127.0.0.1:" + std::to_string(relay_port);
  }
  std::unique_ptr<child_process> proc;
};

} // namespace outrider::test
