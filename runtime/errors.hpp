#pragma once

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/fwd.hpp>

namespace outrider {

/// outrider's error codes, carried as `caf::error` values with category
/// `outrider` and, as context, a sentence saying what failed. A caller
/// decides on the code (retry, rebuild, give up) and shows the sentence.
/// Library statuses (RocksDB, gRPC, errno) are mapped to these at the edge
/// where they occur.
enum class errc : uint8_t {
  /// The supervisor has no child of that name.
  unknown_child = 1,
  /// The child exists but is being restarted: ask again shortly.
  child_unavailable,
  /// The engine could not be reached (connection refused, gRPC UNAVAILABLE
  /// or DEADLINE_EXCEEDED): it may come back; retry with backoff.
  engine_unreachable,
  /// The engine did not serve within `--engine-startup-deadline`.
  startup_deadline,
  /// The engine answered with an error (UNIMPLEMENTED, INVALID_ARGUMENT,
  /// ...): the same call will fail again.
  engine_refused,
  /// The engine's answer is incomplete or inconsistent.
  engine_malformed,
  /// A file, directory or socket operation failed (permissions, a full
  /// disk, a missing path): the operator must look.
  io_error,
  /// Stored data failed its checks (a corrupt RocksDB file, a record that
  /// does not parse): the data is not trustworthy and must be rebuilt.
  corrupt_data,
  /// A listener could not bind its address (in use, not allowed).
  bind_failed,
  /// A child process could not be started, or exited at once.
  spawn_failed,
  /// The caller passed a value that cannot be used (e.g. a worker id with
  /// a slash in it).
  invalid_argument,
  /// A path is not safe to trust (another user's, or writable by anyone):
  /// refused rather than read.
  permission_denied,
};

/// The error without context (lets `caf::error e = errc::io_error;` and
/// `e == errc::io_error` work).
caf::error make_error(errc x);

/// The error with a sentence about what failed.
caf::error make_error(errc x, std::string what);

/// Name of a code, e.g. "io_error".
std::string to_string(errc x);

/// "io_error: cannot create /data: Permission denied" for outrider errors,
/// CAF's rendering for others, "" for no error.
std::string describe(const caf::error& e);

/// Registers the `outrider` category so `actor_system::render` shows our
/// errors as `describe` does.
void add_error_category(caf::actor_system_config& cfg);

/// True when `e` means "stopped normally" (no error, or exit_reason::normal).
bool is_normal_exit(const caf::error& e);

} // namespace outrider
