#include "runtime/errors.hpp"

#include <caf/atom.hpp>

namespace outrider {

caf::error make_error(errc x) {
  return caf::error{static_cast<uint8_t>(x), caf::atom("outrider")};
}

std::string to_string(errc x) {
  switch (x) {
  case errc::unknown_child:
    return "unknown_child";
  case errc::child_unavailable:
    return "child_unavailable";
  case errc::engine_unreachable:
    return "engine_unreachable";
  case errc::startup_deadline:
    return "startup_deadline";
  }
  return "unknown";
}

bool is_normal_exit(const caf::error& e) {
  return !e || (e.category() == caf::atom("exit") && e.code() == 0);
}

} // namespace outrider
