#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace outrider::test {

/// A child process for end-to-end tests. Its stderr and stdout go to a log
/// file; the destructor kills it (SIGKILL) if it is still running.
class child_process {
 public:
  explicit child_process(std::vector<std::string> argv,
                         std::vector<std::string> env = {});
  ~child_process();

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  /// Waits up to `timeout` for exit; returns the exit code (128+signal when
  /// killed by a signal), or nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  /// Everything the process printed so far.
  std::string output() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_path_;
};

/// A TCP port on 127.0.0.1 that was free a moment ago and stays this
/// test's: no other test process on the machine is handed it while this
/// one lives (nor is this one again).
uint16_t free_port();
/// `n` consecutive such ports; returns the first.
uint16_t free_port_block(int n);
/// Something accepts connections on 127.0.0.1:`port` now.
bool accepting(uint16_t port);

/// The binaries under test: this build's own, or those in the build
/// directory `E2E_BIN_DIR` names (scripts/test runs the tests of
/// the Release build against the sanitized binaries: the test programs
/// themselves need no sanitizer, and building them twice cost CI about
/// seven minutes).
std::string outrider_bin();
std::string outrider_sim_bin();
#define OUTRIDER_BIN ::outrider::test::outrider_bin()
#define OUTRIDER_SIM_BIN ::outrider::test::outrider_sim_bin()

/// The binaries under test are sanitized: this test program is (a
/// sanitizer build), or `E2E_SANITIZED=1` says so.
bool sanitized_binaries();

/// While alive, sanitized children started from this test skip UBSan's
/// vptr check. That check reads an object's vtable through a pipe it
/// opens, so in a process with no free descriptor it reports sound objects
/// as "invalid vptr" (a sanitizer false positive, seen in the sidecar's
/// relay under descriptor exhaustion: 1 of 14 sanitized runs). For tests
/// that take every descriptor a child has; the suppressions already in
/// UBSAN_OPTIONS stay, and UBSAN_OPTIONS is restored after.
class vptr_check_off {
 public:
  vptr_check_off();
  ~vptr_check_off();
  vptr_check_off(const vptr_check_off&) = delete;
  vptr_check_off& operator=(const vptr_check_off&) = delete;

 private:
  std::optional<std::string> saved_;
  std::string file_;
};

/// ASan's shadow memory and quarantine raise a process's RSS; the memory
/// bounds of the tests allow for that with sanitized binaries, and only
/// there: twice the bound, plus the quarantine, where ASan holds freed
/// blocks (256 MB by default, its `quarantine_size_mb`) before reuse. A
/// router streaming an engine's tokens as fast as it makes them fills it
/// within seconds: 354 -> 567 MB while a stalled SSE reader was cut off,
/// 43 MB in the Release build, and 623 MB in one CI run.
inline double rss_bound_mb(double release_mb) {
  return sanitized_binaries() ? 2 * release_mb + 256 : release_mb;
}
/// rss_bound_mb for a growth in KiB, as /proc's VmRSS counts.
inline double rss_growth_kb(double release_mb) {
  return rss_bound_mb(release_mb) * 1024;
}

/// Sanitizers run code several times slower: latency bounds measured on a
/// real build are multiplied by this with sanitized binaries.
inline const double time_allowance = sanitized_binaries() ? 3.0 : 1.0;
/// `base` times time_allowance, as a timeout.
inline std::chrono::milliseconds allowed(std::chrono::milliseconds base) {
  return std::chrono::milliseconds{
    static_cast<long>(static_cast<double>(base.count()) * time_allowance)};
}

/// A field of /proc/PID/status as a number (Threads; VmRSS in kB), or -1.
long proc_status(pid_t pid, const std::string& field);

/// What a shell command prints on stdout (its stderr is left alone), and
/// its exit status in `*status` (-1 when it could not run).
std::string command_output(const std::string& cmd, int* status);

/// The whole of a (small) file, e.g. under /proc; empty when unreadable.
std::string read_all(const std::string& path);
/// The children of `pid` (from every thread's /proc/PID/task/TID/children).
std::vector<pid_t> children_of(pid_t pid);
/// Gone, or a zombie nobody reaped yet.
bool dead(pid_t pid);

/// Lifts this process's open-file limit to its hard limit (tests that hold
/// thousands of sockets).
void raise_fd_limit();

/// One HTTP/1.1 GET on 127.0.0.1; returns the status code, or -1 when the
/// connection failed. `body` receives the response body.
int http_get(uint16_t port, const std::string& path,
             std::string* body = nullptr);
/// The value of a series (name and labels as exposed) on `port`'s
/// /metrics, or 0 when absent.
double metric_value(uint16_t port, const std::string& series);

/// The same with another method (and an empty body).
int http_call(uint16_t port, const std::string& method, const std::string& path,
              std::string* body = nullptr);

/// Polls `pred` every 20 ms until it holds or `timeout` passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred())
      return true;
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    struct timespec ts {
      0, 20'000'000
    };
    nanosleep(&ts, nullptr);
  }
}

} // namespace outrider::test
