#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>

namespace outrider::router {

/// Session affinity (`--session-affinity`): the turns of a conversation
/// (requests with the same session header) go back to the worker that
/// served the last one. `hard`: always, while that worker can take it;
/// `soft`: while its cost is within `--session-margin` of the best
/// worker's (an overloaded worker lets the session go).
enum class session_mode { off, soft, hard };

constexpr const char* to_string(session_mode m) {
  switch (m) {
  case session_mode::soft:
    return "soft";
  case session_mode::hard:
    return "hard";
  default:
    return "off";
  }
}

struct session_config {
  session_mode mode = session_mode::off;
  /// soft: the session's worker is kept while its cost is at most the
  /// best's times (1 + margin), plus one block.
  double margin = 0.25;
  /// A session not seen for this long is forgotten.
  std::chrono::milliseconds ttl{std::chrono::minutes{10}};
  /// Sessions remembered at most (the least recently used go first).
  size_t cap = 100000;
};

/// Where each session went last: bounded in count (least recently used
/// out) and time (a TTL). Pure; the router actor's, one thread.
class session_table {
 public:
  using clock = std::chrono::steady_clock;
  struct where {
    std::string worker_id;
    uint32_t slot = 0;
  };

  explicit session_table(session_config cfg = {}) : cfg_(cfg) {}

  /// Where `session` went last, if it is remembered and not expired.
  std::optional<where> find(const std::string& session, clock::time_point now);
  /// Remembers (or refreshes) where `session` went.
  void remember(const std::string& session, where w, clock::time_point now);
  size_t size() const { return entries_.size(); }

 private:
  struct entry {
    where at;
    clock::time_point seen;
    std::list<std::string>::iterator lru;
  };
  session_config cfg_;
  std::unordered_map<std::string, entry> entries_;
  std::list<std::string> lru_; // most recent first
};

} // namespace outrider::router
