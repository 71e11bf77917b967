#include "runtime/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/message.hpp>

namespace outrider {

namespace {

constexpr auto category = caf::atom("outrider");

std::string render(uint8_t code, const caf::message& ctx) {
  auto text = to_string(static_cast<errc>(code));
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    text += ": " + ctx.get_as<std::string>(0);
  return text;
}

} // namespace

caf::error make_error(errc x) {
  return caf::error{static_cast<uint8_t>(x), category};
}

caf::error make_error(errc x, std::string what) {
  return caf::error{static_cast<uint8_t>(x), category,
                    caf::make_message(std::move(what))};
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
  case errc::engine_refused:
    return "engine_refused";
  case errc::engine_malformed:
    return "engine_malformed";
  case errc::io_error:
    return "io_error";
  case errc::corrupt_data:
    return "corrupt_data";
  case errc::bind_failed:
    return "bind_failed";
  case errc::spawn_failed:
    return "spawn_failed";
  case errc::invalid_argument:
    return "invalid_argument";
  case errc::permission_denied:
    return "permission_denied";
  }
  return "unknown";
}

std::string describe(const caf::error& e) {
  if (!e)
    return {};
  if (e.category() == category)
    return render(e.code(), e.context());
  return caf::to_string(e);
}

void add_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(
    category, [](uint8_t code, caf::atom_value, const caf::message& ctx) {
      return render(code, ctx);
    });
}

bool is_normal_exit(const caf::error& e) {
  return !e || (e.category() == caf::atom("exit") && e.code() == 0);
}

} // namespace outrider
