#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace outrider::router {

/// Conditional disaggregation (DESIGN.md, Router): whether a request is
/// prefilled on a prefill worker and handed to a decode worker (`remote`),
/// or sent straight to a decode worker that prefills it itself (`local`).
struct disagg_config {
  enum class policy_kind { isl_bounding, prefill_load, isl_or_load };
  policy_kind policy = policy_kind::isl_bounding;
  uint32_t eff_isl_threshold = 2048;
  double eff_isl_ratio_threshold = 0.7;
  /// Queued prefill tokens on the chosen prefill worker above which it counts
  /// as busy; unset: the router queue threshold is used.
  std::optional<double> prefill_busy_threshold;
  /// Held decode blocks on the chosen decode worker above which local
  /// prefill is vetoed.
  std::optional<double> decode_busy_threshold;
  bool operator==(const disagg_config&) const = default;
};

/// Parses the JSON of `--router-conditional-disagg-config`, e.g.
/// `{"policy":"isl_or_load","eff_isl_threshold":4096,
///   "eff_isl_ratio_threshold":0.6}`. Unknown fields, wrong types, unknown
/// policies and ratios outside [0, 1] are refused with `why`.
std::optional<disagg_config> parse_disagg_config(const std::string& json,
                                                 std::string* why);
/// The same JSON back (every field; thresholds left unset are absent).
std::string disagg_json(const disagg_config& c);

struct disagg_inputs {
  uint32_t isl = 0;              // prompt tokens
  uint32_t cached_on_decode = 0; // of those, cached on the decode worker
  double prefill_queue = 0;      // queued prefill tokens, prefill worker
  double decode_blocks = 0;      // held decode blocks, decode worker
};

enum class disagg_decision { remote_prefill, local_prefill };

/// The decision. Effective ISL = isl - cached_on_decode.
/// - isl_bounding: local when the effective ISL is below eff_isl_threshold
///   and effective / raw below eff_isl_ratio_threshold;
/// - prefill_load: local when the prefill worker is busy (above
///   prefill_busy_threshold, else `queue_threshold`);
/// - isl_or_load: local when either holds;
/// then a decode worker above decode_busy_threshold vetoes local prefill.
disagg_decision decide(const disagg_config& cfg, const disagg_inputs& in,
                       std::optional<double> queue_threshold);

const char* to_string(disagg_decision d);

/// What the prefill leg of a disaggregated request does, once a decode
/// worker was chosen and a prefill worker asked for.
enum class prefill_plan {
  no_pool,      // no prefill worker could be placed on: decode prefills
  incompatible, // a bootstrap room for a non-SGLang decode engine, or an
                // OpenEngine session for an SGLang one: decode prefills
  local,        // the policy says the decode worker prefills it itself
  remote,       // prefill there, hand the KV session to the decode worker
  bootstrap,    // SGLang: both legs at once, meeting in a bootstrap room
};

struct prefill_facts {
  bool prefill_placed = false;    // a prefill worker was placed on
  bool prefill_bootstrap = false; // it has a bootstrap server (SGLang)
  bool decode_sglang = false;     // the decode worker is an SGLang decode
                                  // engine (it cannot prefill: always a room)
  disagg_inputs load;             // for the policy
};

/// The plan; the policy is consulted only where the decode worker could
/// prefill itself.
prefill_plan plan_prefill(const disagg_config& cfg, const prefill_facts& f,
                          std::optional<double> queue_threshold);

/// The outcome label of `outrider_router_disagg_decisions_total`.
const char* to_string(prefill_plan p);

} // namespace outrider::router
