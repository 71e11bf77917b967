#pragma once

// Runs a parsed template: Jinja's scoping (a for loop's body starts each
// iteration from the enclosing scope; `set` inside it does not leak out;
// a namespace is shared), the loop variable, break and continue, and
// bounds on output size and loop iterations.

#include <string>

#include "cluster/text/jinja/ast.hpp"

namespace outrider::text::jinja {

struct render_limits {
  size_t max_output = 16u << 20;     // bytes
  size_t max_iterations = 1'000'000; // loop turns, all loops together
};

/// Throws template_error.
std::string render(const body& b, const dict& vars,
                   const render_limits& lim = {});

} // namespace outrider::text::jinja
