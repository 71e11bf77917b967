#pragma once

#include <string>

namespace outrider::runtime {

/// Sends logs to stderr at `level` (trace..off) as `text` or `json` lines.
/// Both arguments were validated by option parsing.
void setup_logging(const std::string& level, const std::string& format);

} // namespace outrider::runtime
