#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/trace/span.hpp"
#include "cluster/trace/tracer.hpp"

namespace outrider::trace {

/// The body of OTLP/HTTP's `POST /v1/traces`: one `ExportTraceServiceRequest`
/// (binary protobuf) holding `spans` under one resource (the settings'
/// service name and attributes) and outrider's instrumentation scope.
std::string
encode_export(const tracer_settings& cfg,
              const std::vector<std::unique_ptr<span_record>>& spans);

} // namespace outrider::trace
