#pragma once

// The one place options become settings: every role's settings are read
// from the parsed options here, once, and checked before anything listens.
// A program that embeds a role takes its defaults from here too:
// `router_settings_from(default_options(), &why)`.

#include <string>

#include "actors/router/router_settings.hpp"
#include "actors/sidecar/sidecar_settings.hpp"
#include "runtime/options.hpp"

namespace outrider::app {

/// Every option at its default (the option table's, `outrider --help`).
runtime::options default_options();

cluster::discovery_settings discovery_settings_from(const runtime::options& o);

/// The router's settings; `*why` (and nullopt) when they cannot be used
/// together (exit 2).
std::optional<router::router_settings>
router_settings_from(const runtime::options& o, std::string* why);

sidecar::sidecar_settings sidecar_settings_from(const runtime::options& o);

/// Tracing (--otlp-endpoint, --trace-sample-ratio) for a process whose
/// spans name `service`; `*why` (and nullopt) when unusable (exit 2).
std::optional<trace::tracer_settings>
tracing_settings_from(const runtime::options& o, const std::string& service,
                      std::string* why);

} // namespace outrider::app
