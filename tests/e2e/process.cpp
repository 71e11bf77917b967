#include "tests/e2e/process.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <netinet/in.h>
#include <random>
#include <set>
#include <sstream>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace outrider::test {

child_process::child_process(std::vector<std::string> argv,
                             std::vector<std::string> env) {
  // Atomic: tests start children from several threads at once (a plain
  // counter gave two concurrent curls one log file, each truncating and
  // removing the other's output: the SGLang disaggregation test's flake).
  static std::atomic<int> counter{0};
  log_path_ = "/tmp/outrider-e2e-" + std::to_string(::getpid()) + "-" +
              std::to_string(counter.fetch_add(1)) + ".log";
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  // A child started on the test's main thread dies with the test process
  // however that ends (killed, aborted): the destructor below is not the
  // only way out. Not for children of other threads: the signal comes when
  // the thread that forked exits, which may be before the child should.
  const pid_t parent = ::getpid();
  const bool main_thread = ::gettid() == parent;
  pid_ = fork();
  if (pid_ == 0) {
    if (main_thread) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        _exit(127); // the test process went before the line above
    }
    int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    for (auto& e : env)
      putenv(e.data());
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

child_process::~child_process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    wait(std::chrono::seconds{5});
  }
  std::remove(log_path_.c_str());
}

void child_process::signal(int sig) {
  if (pid_ > 0 && !status_)
    ::kill(pid_, sig);
}

std::optional<int> child_process::wait(std::chrono::milliseconds timeout) {
  if (status_)
    return status_;
  eventually(
    [&] {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return true;
      }
      return false;
    },
    timeout);
  return status_;
}

std::string child_process::output() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

bool can_bind(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

} // namespace

bool accepting(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Below Linux's ephemeral range (32768-60999): a port handed out here is
// not taken by the next outgoing connection of a busy parallel test, as a
// port the kernel picks for bind(0) can be. Random, never twice per process.
namespace {

std::string from_env_dir(const char* built, const char* relative) {
  const char* dir = std::getenv("E2E_BIN_DIR");
  if (!dir || !*dir)
    return built;
  return std::string(dir) + "/" + relative;
}

} // namespace

std::string outrider_bin() {
  return from_env_dir(OUTRIDER_BIN_BUILT, "outrider");
}

std::string outrider_sim_bin() {
  return from_env_dir(OUTRIDER_SIM_BIN_BUILT, "sim/outrider-sim");
}

bool sanitized_binaries() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  const char* v = std::getenv("E2E_SANITIZED");
  return v && std::string(v) == "1";
#endif
}

vptr_check_off::vptr_check_off() {
  const char* now = std::getenv("UBSAN_OPTIONS");
  if (!now)
    return; // no sanitizer options: nothing reads them
  saved_ = now;
  // UBSAN_OPTIONS names one suppressions file: a copy of it with every
  // vptr check suppressed takes its place.
  std::string opts = now, kept;
  std::istringstream in{opts};
  std::string item, supp_path;
  while (std::getline(in, item, ':')) {
    if (item.rfind("suppressions=", 0) == 0)
      supp_path = item.substr(13);
    else
      kept += item + ":";
  }
  file_ = "/tmp/outrider-e2e-ubsan-" + std::to_string(::getpid()) + ".supp";
  std::ofstream out{file_};
  if (!supp_path.empty())
    out << read_all(supp_path) << "\n";
  out << "vptr:*\n"; // the check's kind (vptr_check matches only sound types)
  out.close();
  ::setenv("UBSAN_OPTIONS", (kept + "suppressions=" + file_).c_str(), 1);
}

vptr_check_off::~vptr_check_off() {
  if (!saved_)
    return;
  ::setenv("UBSAN_OPTIONS", saved_->c_str(), 1);
  std::remove(file_.c_str());
}

namespace {

// Ports this process handed out, and a claim on each that other test
// processes see: a one-byte POSIX record lock at offset `port` in one file
// shared by every test process on the machine. ctest runs two e2e tests at
// once, and a port one picked could be picked by the other before its
// child bound it (seen in CI: a router that never turned ready). Record
// locks go with their process, also when it is killed, so a claim never
// outlives its test; the lock's descriptor stays open for the process's
// life (closing any descriptor of the file would drop every claim).
std::mutex port_mtx;
std::set<uint16_t> ports_given;

int port_lock_fd() {
  static const int fd = [] {
    auto path =
      std::filesystem::temp_directory_path() / "outrider-test-ports.lock";
    return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  }();
  return fd;
}

bool lock_port(uint16_t port, short type) {
  int fd = port_lock_fd();
  if (fd < 0) // no shared file: the bind check alone, as before
    return true;
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = port;
  fl.l_len = 1;
  return fcntl(fd, F_SETLK, &fl) == 0;
}

// Holds port_mtx.
bool claim_locked(uint16_t port) {
  if (port == 0 || ports_given.count(port) || !lock_port(port, F_WRLCK))
    return false;
  if (!can_bind(port)) { // bound by something outside the tests
    lock_port(port, F_UNLCK);
    return false;
  }
  ports_given.insert(port);
  return true;
}

uint16_t random_port() {
  static std::mt19937 rng{static_cast<unsigned>(
    ::getpid() ^ std::chrono::steady_clock::now().time_since_epoch().count())};
  // Below the kernel's ephemeral range (32768 up): no outgoing connection
  // takes one of these as its local port.
  std::uniform_int_distribution<int> pick{15000, 32000};
  return static_cast<uint16_t>(pick(rng));
}

} // namespace

uint16_t free_port() {
  return free_port_block(1);
}

uint16_t free_port_block(int n) {
  std::lock_guard<std::mutex> guard{port_mtx};
  for (int attempt = 0; attempt < 1000; ++attempt) {
    auto base = random_port();
    int got = 0;
    while (got < n && claim_locked(static_cast<uint16_t>(base + got)))
      ++got;
    if (got == n)
      return base;
    for (int i = 0; i < got; ++i) { // a partial block goes back
      auto port = static_cast<uint16_t>(base + i);
      ports_given.erase(port);
      lock_port(port, F_UNLCK);
    }
  }
  return 0;
}

double metric_value(uint16_t port, const std::string& series) {
  std::string body;
  http_get(port, "/metrics", &body);
  std::istringstream in{body};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0)
      return std::stod(line.substr(series.size() + 1));
  return 0;
}

int http_get(uint16_t port, const std::string& path, std::string* body) {
  return http_call(port, "GET", path, body);
}

int http_call(uint16_t port, const std::string& method, const std::string& path,
              std::string* body) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  auto req = method + " " + path +
             " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
             "Connection: close\r\n\r\n";
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string resp;
  char buf[4096];
  for (;;) {
    auto n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      break;
    resp.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (resp.compare(0, 9, "HTTP/1.1 ") != 0 || resp.size() < 12)
    return -1;
  if (body) {
    auto p = resp.find("\r\n\r\n");
    *body = p == std::string::npos ? "" : resp.substr(p + 4);
  }
  return std::atoi(resp.substr(9, 3).c_str());
}

long proc_status(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0)
      return std::atol(line.c_str() + field.size() + 1);
  return -1;
}

void raise_fd_limit() {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

std::string command_output(const std::string& cmd, int* status) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return {};
  }
  std::string out;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>{in}, {}};
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  auto task = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator(task, ec)) {
    std::istringstream in{read_all(t.path().string() + "/children")};
    for (pid_t c; in >> c;)
      out.push_back(c);
  }
  return out;
}

bool dead(pid_t pid) {
  auto stat = read_all("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return stat.empty() || close == std::string::npos ||
         stat.compare(close + 2, 1, "Z") == 0;
}

} // namespace outrider::test
