#pragma once

// Internal to the option table (option_table*.cpp): how an entry is made,
// and the parts kept in files of their own.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/options.hpp"

namespace outrider::runtime {

/// One entry of the table.
option_spec make_option(std::string key, option_type type, std::string def,
                        std::string help, std::string example,
                        std::vector<std::string> choices = {}, int64_t min = 0,
                        int64_t max = 0, bool hidden = false);

/// The fleet's options: event plane, NATS, discovery records.
std::vector<option_spec> fleet_option_specs();

/// The router's routing, queue, flow-control and session options.
std::vector<option_spec> routing_option_specs();

} // namespace outrider::runtime
