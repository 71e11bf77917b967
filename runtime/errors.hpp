#pragma once

#include <cstdint>
#include <string>

#include <caf/error.hpp>

namespace outrider {

/// outrider's error codes, carried as `caf::error` values with category
/// `outrider`.
enum class errc : uint8_t {
  unknown_child = 1,
  child_unavailable,
  engine_unreachable,
  startup_deadline,
};

caf::error make_error(errc x);

/// Human-readable text of an outrider error code.
std::string to_string(errc x);

/// True when `e` means "stopped normally" (no error, or exit_reason::normal).
bool is_normal_exit(const caf::error& e);

} // namespace outrider
