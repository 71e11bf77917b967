#include "cluster/local_cluster.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace outrider::cluster {

namespace fs = std::filesystem;

// Every socket stays bound until all are, so the kernel cannot hand out one
// port twice (bound and closed one at a time, it did: an engine's gRPC port
// was another engine's replay port, and that engine never started).
std::vector<uint16_t> free_loopback_ports(size_t n) {
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
      break;
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      break;
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds)
    close(fd);
  if (ports.size() != n)
    ports.clear();
  return ports;
}

std::string self_path() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string{"outrider"} : p.string();
}

local_cluster::local_cluster(local_cluster_config cfg) : cfg_(std::move(cfg)) {}

local_cluster::~local_cluster() {
  stop();
}

pid_t local_cluster::spawn(const std::vector<std::string>& argv,
                           const std::string& log) {
  std::vector<char*> args;
  std::vector<std::string> copy = argv;
  for (auto& a : copy)
    args.push_back(a.data());
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // The child dies with us, even when we are killed -9: no orphaned
    // engines or sidecars. (The signal follows the thread that forked;
    // `start` runs on the main thread, which lives as long as the process.)
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
      _exit(1); // we died before prctl took effect
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

bool local_cluster::add(std::string name, std::vector<std::string> argv,
                        std::string log) {
  child c;
  c.pid = spawn(argv, log);
  if (c.pid <= 0)
    return false;
  c.name = std::move(name);
  c.argv = std::move(argv);
  c.log = std::move(log);
  c.started = std::chrono::steady_clock::now();
  c.backoff = cfg_.restart_backoff;
  std::lock_guard<std::mutex> lock{mu_};
  children_.push_back(std::move(c));
  return true;
}

std::vector<pid_t> local_cluster::pids() const {
  std::lock_guard<std::mutex> lock{mu_};
  std::vector<pid_t> out;
  for (const auto& c : children_)
    out.push_back(c.pid);
  return out;
}

// One child: reaped when it has exited, started again when its back-off is
// over. Called with mu_ held.
void local_cluster::reap(child& c, std::chrono::steady_clock::time_point now) {
  using namespace std::chrono;
  if (c.pid > 0) {
    int status = 0;
    if (waitpid(c.pid, &status, WNOHANG) != c.pid)
      return;
    if (now - c.started > minutes{1})
      c.backoff = cfg_.restart_backoff; // it had been well for a while
    c.pid = -1;
    c.restart_at = now + c.backoff;
    if (cfg_.on_exit)
      cfg_.on_exit(c.name, status, c.backoff);
    c.backoff = std::min(c.backoff * 2, cfg_.max_restart_backoff);
    return;
  }
  if (now < c.restart_at)
    return;
  c.pid = spawn(c.argv, c.log);
  c.started = now;
  if (c.pid <= 0)
    c.restart_at = now + c.backoff; // fork failed: try again later
}

void local_cluster::monitor() {
  // Bounded: one pass per 100 ms until stop(). The children started here
  // get their PR_SET_PDEATHSIG from this thread, which lives until stop().
  while (!stopping_.load()) {
    {
      std::lock_guard<std::mutex> lock{mu_};
      auto now = std::chrono::steady_clock::now();
      for (auto& c : children_)
        reap(c, now);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
}

caf::error local_cluster::start() {
  std::error_code ec;
  fs::create_directories(cfg_.log_dir, ec);
  fs::create_directories(cfg_.discovery_dir, ec);
  if (!fs::exists(cfg_.sim_binary))
    return make_error(errc::spawn_failed,
                      "the simulated engine '" + cfg_.sim_binary +
                        "' does not exist (see --sim-binary)");
  // Three ports an engine: gRPC, KV events, replay.
  auto ports = free_loopback_ports(3 * static_cast<size_t>(cfg_.engines));
  if (ports.empty() && cfg_.engines > 0)
    return make_error(errc::spawn_failed, "no free loopback ports");
  for (int i = 0; i < cfg_.engines; ++i) {
    auto n = std::to_string(i);
    auto port = [&](int k) { return ports[static_cast<size_t>(3 * i + k)]; };
    auto engine_port = port(0);
    nlohmann::json kv{
      {"enable_kv_cache_events", true},
      {"publisher", "zmq"},
      // Loopback only: the events carry prompt token ids.
      {"endpoint", "tcp://127.0.0.1:" + std::to_string(port(1))},
      {"replay_endpoint", "tcp://127.0.0.1:" + std::to_string(port(2))},
      {"topic", "kv-events"}};
    std::vector<std::string> sim{cfg_.sim_binary, "--grpc-port",
                                 std::to_string(engine_port),
                                 "--kv-events-config", kv.dump()};
    sim.insert(sim.end(), cfg_.sim_args.begin(), cfg_.sim_args.end());
    if (!add("engine-" + n, sim, cfg_.log_dir + "/engine-" + n + ".log"))
      return make_error(errc::spawn_failed, "cannot start " + cfg_.sim_binary);
    std::vector<std::string> side{
      cfg_.outrider_binary, "--role", "sidecar", "--engine-endpoint",
      "127.0.0.1:" + std::to_string(engine_port),
      // Ports the sidecar picks itself: no race
      // with other processes for them.
      "--system-port", "0", "--relay-port", "0", "--data-dir",
      cfg_.data_dir + "/worker-" + n, "--discovery-dir", cfg_.discovery_dir,
      "--worker-id", "worker-" + n};
    side.insert(side.end(), cfg_.sidecar_args.begin(), cfg_.sidecar_args.end());
    if (!add("sidecar-" + n, side, cfg_.log_dir + "/sidecar-" + n + ".log"))
      return make_error(errc::spawn_failed, "cannot start a sidecar");
  }
  monitor_ = std::thread([this] { monitor(); });
  return {};
}

void local_cluster::stop() {
  stopping_ = true;
  if (monitor_.joinable())
    monitor_.join();
  std::lock_guard<std::mutex> lock{mu_};
  // Sidecars first (they deregister), then engines: reverse start order.
  for (auto i = children_.rbegin(); i != children_.rend(); ++i)
    if (i->pid > 0)
      kill(i->pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  for (const auto& c : children_) {
    auto pid = c.pid;
    if (pid <= 0)
      continue;
    while (waitpid(pid, nullptr, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
  }
  children_.clear();
}

} // namespace outrider::cluster
