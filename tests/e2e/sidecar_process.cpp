#include "tests/e2e/sidecar_process.hpp"

#include <atomic>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace outrider::test {

namespace fs = std::filesystem;

temp_dir::temp_dir() {
  static std::atomic<int> n{0}; // made from several threads at once
  path =
    fs::temp_directory_path() / ("outrider-e2e-" + std::to_string(::getpid()) +
                                 "-" + std::to_string(n.fetch_add(1)));
  fs::create_directories(path);
}

temp_dir::~temp_dir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

sidecar_process::sidecar_process(const std::string& engine_endpoint,
                                 std::shared_ptr<sidecar_dirs> d,
                                 std::vector<std::string> extra)
  : dirs(d ? std::move(d) : std::make_shared<sidecar_dirs>()),
    port(free_port()), relay_port(free_port()) {
  std::vector<std::string> args{OUTRIDER_BIN,
                                "--role",
                                "sidecar",
                                "--engine-endpoint",
                                engine_endpoint,
                                "--system-port",
                                std::to_string(port),
                                "--scheduler-threads",
                                "2",
                                "--data-dir",
                                dirs->data.str(),
                                "--discovery-dir",
                                dirs->discovery.str(),
                                "--worker-id",
                                "worker-under-test",
                                "--relay-port",
                                std::to_string(relay_port)};
  args.insert(args.end(), extra.begin(), extra.end());
  proc = std::make_unique<child_process>(args);
}

nlohmann::json sidecar_process::index_blocks(int rank) const {
  std::string body;
  if (get("/debug/index", &body) != 200)
    return nlohmann::json::array();
  auto doc = nlohmann::json::parse(body, nullptr, false);
  auto key = std::to_string(rank);
  if (!doc.is_object() || !doc["ranks"].contains(key))
    return nlohmann::json::array();
  return doc["ranks"][key]["blocks"];
}

std::vector<nlohmann::json> sidecar_process::records() const {
  std::vector<nlohmann::json> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dirs->discovery.path, ec)) {
    if (e.path().extension() != ".json")
      continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (!j.is_discarded())
      out.push_back(std::move(j));
  }
  return out;
}

std::optional<double> sidecar_process::metric(const std::string& series) const {
  std::string body;
  if (get("/metrics", &body) != 200)
    return std::nullopt;
  std::istringstream in{body};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0)
      return std::stod(line.substr(series.size() + 1));
  return std::nullopt;
}

} // namespace outrider::test
