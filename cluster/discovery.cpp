#include "cluster/discovery.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/metrics.hpp"

namespace outrider::cluster {

namespace fs = std::filesystem;

// Reads a record file without ever blocking: only a regular file (a FIFO
// or device named *.json would block the reader, and with it every
// listing), at most max_record_bytes.
static bool read_record_file(int dir_fd, const char* name, std::string& out) {
  int fd = ::openat(dir_fd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat st {};
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_size <= static_cast<off_t>(max_record_bytes);
  if (ok) {
    out.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (ok && got < out.size()) {
      auto n = ::read(fd, out.data() + got, out.size() - got);
      ok = n > 0;
      if (ok)
        got += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  return ok;
}

file_discovery::file_discovery(std::string dir, std::chrono::milliseconds ttl)
  : dir_(std::move(dir)), ttl_(ttl),
    wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

caf::error file_discovery::open() {
  std::error_code ec;
  auto parent = fs::path(dir_).parent_path();
  if (!parent.empty())
    fs::create_directories(parent, ec);
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    return make_error(errc::io_error, "cannot create the discovery directory " +
                                        dir_ + ": " + std::strerror(errno));
  struct stat st {};
  if (::lstat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error(errc::io_error, "the discovery directory " + dir_ +
                                        " is not a directory");
  if (st.st_uid != ::geteuid())
    return make_error(errc::permission_denied,
                      "the discovery directory " + dir_ +
                        " belongs to another user (uid " +
                        std::to_string(st.st_uid) + "); refusing its records");
  if (st.st_mode & S_IWOTH)
    return make_error(errc::permission_denied,
                      "the discovery directory " + dir_ +
                        " is writable by anyone; refusing its records (chmod "
                        "o-w, or choose another --discovery-dir)");
  return {};
}

file_discovery::~file_discovery() {
  if (inotify_fd_ >= 0)
    close(inotify_fd_);
  if (wake_fd_ >= 0)
    close(wake_fd_);
}

std::string file_discovery::path_of(const std::string& worker_id) const {
  return dir_ + "/" + worker_id + ".json";
}

caf::error file_discovery::put(const worker_record& r) {
  if (!valid_worker_id(r.worker_id))
    return make_error(errc::invalid_argument,
                      "invalid worker id '" + r.worker_id + "'");
  std::error_code ec;
  auto final_path = path_of(r.worker_id);
  auto tmp = final_path + ".tmp." + std::to_string(::getpid());
  // Exclusive and never through a link: a file planted at the temporary
  // name is not written through. A leftover of ours is removed first.
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error(errc::io_error,
                      "cannot create " + tmp + ": " + std::strerror(errno));
  auto text = to_json(r) + "\n";
  size_t off = 0;
  while (off < text.size()) {
    auto n = ::write(fd, text.data() + off, text.size() - off);
    if (n <= 0)
      break;
    off += static_cast<size_t>(n);
  }
  bool ok = off == text.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return make_error(errc::io_error, "cannot write " + tmp);
  }
  fs::rename(tmp, final_path, ec);
  if (ec)
    return make_error(errc::io_error,
                      "cannot rename to " + final_path + ": " + ec.message());
  return {};
}

caf::error file_discovery::keep_alive(const std::string& worker_id) {
  std::error_code ec;
  fs::last_write_time(path_of(worker_id), fs::file_time_type::clock::now(), ec);
  return ec ? make_error(errc::io_error, "cannot touch " + path_of(worker_id) +
                                           ": " + ec.message())
            : caf::error{};
}

caf::error file_discovery::remove(const std::string& worker_id) {
  std::error_code ec;
  fs::remove(path_of(worker_id), ec);
  return ec ? make_error(errc::io_error, "cannot remove " + path_of(worker_id) +
                                           ": " + ec.message())
            : caf::error{};
}

std::vector<worker_record> file_discovery::list(size_t* invalid) {
  static auto& read_errors = runtime::global_metrics().get_counter(
    "outrider_discovery_read_errors_total",
    "Discovery listings or records that could not be read (the last good "
    "listing stood in)");
  std::vector<worker_record> out;
  size_t bad = 0;
  timespec now_ts{};
  clock_gettime(CLOCK_REALTIME, &now_ts);
  auto ns = [](const timespec& t) {
    return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
  };
  const int64_t now = ns(now_ts);
  const int64_t ttl_ns =
    std::chrono::duration_cast<std::chrono::nanoseconds>(ttl_).count();
  std::lock_guard<std::mutex> guard{last_mtx_};
  auto steady_now = std::chrono::steady_clock::now();
  // Out of descriptors or memory: nothing is known about the file.
  auto transient = [](int e) {
    return e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS;
  };
  // Read with readdir and looked at relative to the directory's descriptor
  // (fstatat, openat): at 10,000 record files a listing is 10,000 of each,
  // and a path walked from the root for every one, with a path object
  // built for it, was most of a fleet router's discovery thread.
  ++listing_;
  DIR* dir = ::opendir(dir_.c_str());
  bool failed = dir == nullptr;
  if (dir) {
    int dfd = ::dirfd(dir);
    constexpr std::string_view ext = ".json";
    for (;;) {
      errno = 0; // readdir's end and its failure differ only by errno
      auto* e = ::readdir(dir);
      if (!e) {
        failed = errno != 0;
        break;
      }
      std::string_view file{e->d_name};
      if (file.size() <= ext.size() ||
          file.substr(file.size() - ext.size()) != ext)
        continue;
      struct stat st {};
      if (::fstatat(dfd, e->d_name, &st, 0) != 0)
        continue; // vanished meanwhile
      if (now - ns(st.st_mtim) > ttl_ns) {
        ::unlinkat(dfd, e->d_name, 0); // stale: anyone may remove it
        continue;
      }
      std::string name{file.substr(0, file.size() - ext.size())};
      auto k = parsed_.find(name);
      if (k != parsed_.end() && k->second.inode == st.st_ino &&
          k->second.size == st.st_size &&
          k->second.ctime_ns == ns(st.st_ctim)) {
        k->second.listing = listing_;
        continue;
      }
      std::string text;
      errno = 0;
      if (!read_record_file(dfd, e->d_name, text)) {
        if (transient(errno)) {
          read_errors.inc(); // what was read before stands, read again next
          if (k != parsed_.end())
            k->second.listing = listing_;
        } else {
          ++bad;
        }
        continue;
      }
      auto seen = parsed_file{static_cast<uint64_t>(st.st_ino),
                              static_cast<int64_t>(st.st_size),
                              ns(st.st_ctim),
                              listing_,
                              {},
                              {}};
      if (k != parsed_.end() && k->second.text == text) {
        // A lease's touch (a new ctime, the same bytes): not parsed again.
        seen.text = std::move(k->second.text);
        seen.record = std::move(k->second.record);
        k->second = std::move(seen);
        continue;
      }
      std::string why;
      auto r = record_from_json(text, &why);
      if (!r || r->worker_id != name) {
        ++bad;
        continue;
      }
      seen.text = std::move(text);
      seen.record = std::move(*r);
      parsed_.insert_or_assign(std::move(name), std::move(seen));
    }
    ::closedir(dir);
  }
  if (invalid)
    *invalid = bad;
  if (failed) {
    // The listing itself failed: the last good one stands for a lease.
    read_errors.inc();
    if (steady_now - last_ok_ >= ttl_)
      return out;
    for (const auto& [_, f] : parsed_)
      out.push_back(f.record);
    return out;
  }
  // Files gone (or unreadable now) are forgotten: the cache holds what the
  // directory does. In the order of worker ids (the map's).
  last_ok_ = steady_now;
  out.reserve(parsed_.size());
  for (auto k = parsed_.begin(); k != parsed_.end();)
    if (k->second.listing != listing_) {
      k = parsed_.erase(k);
    } else {
      out.push_back(k->second.record);
      ++k;
    }
  return out;
}

void file_discovery::wait_for_change(std::chrono::milliseconds timeout) {
  if (inotify_fd_ < 0) {
    inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd_ >= 0)
      // Not IN_ATTRIB: a lease's touch changes no record (10,000 workers
      // touch their files every few seconds); a record that went stale and
      // came back is seen by the next listing, at most `timeout` later.
      inotify_add_watch(inotify_fd_, dir_.c_str(),
                        IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM |
                          IN_CLOSE_WRITE);
  }
  // Without inotify (no descriptor left) the wait is the timeout, still
  // ended by `wake`.
  pollfd p[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  if (poll(p, 2, static_cast<int>(timeout.count())) <= 0)
    return;
  char buf[4096];
  if (p[0].revents & POLLIN)
    while (read(inotify_fd_, buf, sizeof(buf)) > 0) {
    }
  if (p[1].revents & POLLIN) {
    uint64_t n = 0;
    [[maybe_unused]] auto r = read(wake_fd_, &n, sizeof(n));
  }
}

void file_discovery::wake() {
  if (wake_fd_ < 0)
    return;
  uint64_t one = 1;
  [[maybe_unused]] auto r = write(wake_fd_, &one, sizeof(one));
}

caf::error memory_discovery::put(const worker_record& r) {
  if (!valid_worker_id(r.worker_id))
    return make_error(errc::invalid_argument,
                      "invalid worker id '" + r.worker_id + "'");
  std::lock_guard<std::mutex> guard{mtx_};
  std::erase_if(records_,
                [&](const auto& x) { return x.worker_id == r.worker_id; });
  records_.push_back(r);
  ++version_;
  changed_.notify_all();
  return {};
}

caf::error memory_discovery::keep_alive(const std::string&) {
  return {};
}

caf::error memory_discovery::remove(const std::string& worker_id) {
  std::lock_guard<std::mutex> guard{mtx_};
  std::erase_if(records_,
                [&](const auto& x) { return x.worker_id == worker_id; });
  ++version_;
  changed_.notify_all();
  return {};
}

std::vector<worker_record> memory_discovery::list(size_t* invalid) {
  if (invalid)
    *invalid = 0;
  std::lock_guard<std::mutex> guard{mtx_};
  listed_ = version_;
  return records_;
}

void memory_discovery::wait_for_change(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock{mtx_};
  changed_.wait_for(lock, timeout,
                    [this] { return version_ != listed_ || woken_; });
  woken_ = false;
}

void memory_discovery::wake() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    woken_ = true;
  }
  changed_.notify_all();
}

} // namespace outrider::cluster
