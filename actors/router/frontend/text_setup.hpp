#pragma once

// The router's text settings at start: --tokenizer (loaded once per
// process: --role all asks for it twice) and the chat template.

#include <memory>
#include <string>

#include "actors/router/frontend/http_frontend.hpp"
#include "actors/router/router_settings.hpp"
#include "runtime/app.hpp"

namespace outrider::router {

/// The tokenizer of `dir`, loaded once per process; nullptr and `*why`
/// when it cannot be.
std::shared_ptr<const text::tokenizer> process_tokenizer(const std::string& dir,
                                                         std::string* why);

/// Fills `fc`'s tokenizer and chat template from `s`; false (the process asked
/// to exit 2) when they cannot be used.
bool load_text(runtime::role_env& ctx, const router_settings& s,
               frontend_config& fc);

} // namespace outrider::router
