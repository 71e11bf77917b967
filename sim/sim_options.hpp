#pragma once

#include <string>
#include <vector>

#include "sim/sim_server.hpp"

namespace outrider::sim {

struct sim_parse_result {
  enum kind { ok, help, error };
  kind what = ok;
  sim_config cfg;
  std::string message;
};

/// Parses outrider-sim's command line (vLLM's spelling where vLLM has one).
sim_parse_result parse_sim_options(const std::vector<std::string>& args);

std::string sim_help_text();

} // namespace outrider::sim
