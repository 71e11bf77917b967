#include "actors/router/core/disagg_policy.hpp"

#include <nlohmann/json.hpp>

namespace outrider::router {

std::optional<disagg_config> parse_disagg_config(const std::string& text,
                                                 std::string* why) {
  auto fail = [&](std::string msg) -> std::optional<disagg_config> {
    if (why)
      *why = "router-conditional-disagg-config: " + std::move(msg);
    return std::nullopt;
  };
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return fail("not a JSON object");
  disagg_config c;
  for (const auto& [key, v] : doc.items()) {
    if (key == "policy") {
      if (!v.is_string())
        return fail("'policy' must be a string");
      auto p = v.get<std::string>();
      if (p == "isl_bounding")
        c.policy = disagg_config::policy_kind::isl_bounding;
      else if (p == "prefill_load")
        c.policy = disagg_config::policy_kind::prefill_load;
      else if (p == "isl_or_load")
        c.policy = disagg_config::policy_kind::isl_or_load;
      else
        return fail("unknown policy '" + p +
                    "' (isl_bounding, prefill_load, isl_or_load)");
    } else if (key == "eff_isl_threshold") {
      if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX)
        return fail("'eff_isl_threshold' must be a non-negative integer");
      c.eff_isl_threshold = v.get<uint32_t>();
    } else if (key == "eff_isl_ratio_threshold") {
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
        return fail("'eff_isl_ratio_threshold' must be a number in [0, 1]");
      c.eff_isl_ratio_threshold = v.get<double>();
    } else if (key == "prefill_busy_threshold" ||
               key == "decode_busy_threshold") {
      if (!v.is_number() || v.get<double>() < 0)
        return fail("'" + key + "' must be a non-negative number");
      (key == "prefill_busy_threshold" ? c.prefill_busy_threshold
                                       : c.decode_busy_threshold) =
        v.get<double>();
    } else {
      return fail("unknown field '" + key + "'");
    }
  }
  return c;
}

std::string disagg_json(const disagg_config& c) {
  using kind = disagg_config::policy_kind;
  nlohmann::json j{{"policy", c.policy == kind::isl_bounding   ? "isl_bounding"
                              : c.policy == kind::prefill_load ? "prefill_load"
                                                               : "isl_or_load"},
                   {"eff_isl_threshold", c.eff_isl_threshold},
                   {"eff_isl_ratio_threshold", c.eff_isl_ratio_threshold}};
  if (c.prefill_busy_threshold)
    j["prefill_busy_threshold"] = *c.prefill_busy_threshold;
  if (c.decode_busy_threshold)
    j["decode_busy_threshold"] = *c.decode_busy_threshold;
  return j.dump();
}

disagg_decision decide(const disagg_config& cfg, const disagg_inputs& in,
                       std::optional<double> queue_threshold) {
  uint32_t eff =
    in.isl > in.cached_on_decode ? in.isl - in.cached_on_decode : 0;
  double ratio = in.isl ? static_cast<double>(eff) / in.isl : 0.0;
  bool short_enough =
    eff < cfg.eff_isl_threshold && ratio < cfg.eff_isl_ratio_threshold;
  auto busy_at =
    cfg.prefill_busy_threshold ? cfg.prefill_busy_threshold : queue_threshold;
  bool prefill_busy = busy_at && in.prefill_queue > *busy_at;
  bool local = false;
  switch (cfg.policy) {
  case disagg_config::policy_kind::isl_bounding:
    local = short_enough;
    break;
  case disagg_config::policy_kind::prefill_load:
    local = prefill_busy;
    break;
  case disagg_config::policy_kind::isl_or_load:
    local = short_enough || prefill_busy;
    break;
  }
  if (local && cfg.decode_busy_threshold &&
      in.decode_blocks > *cfg.decode_busy_threshold)
    local = false; // the decode worker is too busy to prefill as well
  return local ? disagg_decision::local_prefill
               : disagg_decision::remote_prefill;
}

const char* to_string(disagg_decision d) {
  return d == disagg_decision::local_prefill ? "local_prefill"
                                             : "remote_prefill";
}

prefill_plan plan_prefill(const disagg_config& cfg, const prefill_facts& f,
                          std::optional<double> queue_threshold) {
  if (!f.prefill_placed)
    return prefill_plan::no_pool;
  if (f.prefill_bootstrap != f.decode_sglang)
    return prefill_plan::incompatible;
  if (f.decode_sglang)
    return prefill_plan::bootstrap;
  return decide(cfg, f.load, queue_threshold) == disagg_decision::local_prefill
           ? prefill_plan::local
           : prefill_plan::remote;
}

const char* to_string(prefill_plan p) {
  switch (p) {
  case prefill_plan::no_pool:
    return "no_prefill_pool";
  case prefill_plan::incompatible:
    return "incompatible_prefill";
  case prefill_plan::local:
    return "local_prefill";
  default:
    return "remote_prefill";
  }
}

} // namespace outrider::router
