// outrider-sim's options: one table of option_spec, parsed by the runtime's
// flag layer (CLI11) like outrider's own, with vLLM's spelling where vLLM
// has one. Flags only: a simulator needs no environment or config file.
#include "sim/sim_options.hpp"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/options.hpp"

namespace outrider::sim {

namespace {

using runtime::option_key;
using runtime::option_spec;
using ot = runtime::option_type;
using engine::to_string;
using engine::worker_role;

namespace key {
constexpr option_key<std::string> host{"host"};
constexpr option_key<int64_t> grpc_port{"grpc-port"};
constexpr option_key<int64_t> debug_port{"debug-port"};
constexpr option_key<int64_t> http_port{"http-port"};
constexpr option_key<std::string> tokenizer{"tokenizer"};
constexpr option_key<std::string> model{"served-model-name"};
constexpr option_key<int64_t> dp_size{"data-parallel-size"};
constexpr option_key<int64_t> block_size{"block-size"};
constexpr option_key<int64_t> num_blocks{"num-gpu-blocks-override"};
constexpr option_key<int64_t> max_num_seqs{"max-num-seqs"};
constexpr option_key<int64_t> max_waiting{"max-waiting-requests"};
constexpr option_key<int64_t> max_batched{"max-num-batched-tokens"};
constexpr option_key<int64_t> max_model_len{"max-model-len"};
constexpr option_key<int64_t> vocab_size{"vocab-size"};
constexpr option_key<std::string> scheduling{"scheduling-policy"};
constexpr option_key<std::string> lora_modules{"lora-modules"};
constexpr option_key<int64_t> offload_blocks{"kv-offload-blocks"};
constexpr option_key<std::string> offload_events{"kv-offload-events"};
constexpr option_key<std::string> offload_locality{"kv-offload-locality"};
constexpr option_key<bool> offload_store_only{"kv-offload-store-only"};
constexpr option_key<int64_t> media_item_tokens{"media-item-tokens"};
constexpr option_key<double> offload_load_ms{"kv-offload-load-ms"};
constexpr option_key<bool> hybrid_groups{"kv-hybrid-groups"};
constexpr option_key<std::string> vllm_services{"vllm-services"};
constexpr option_key<double> speedup{"speedup"};
constexpr option_key<bool> no_sleep{"no-sleep"};
constexpr option_key<std::chrono::milliseconds> startup_delay{"startup-delay"};
constexpr option_key<std::chrono::milliseconds> drain_timeout{"drain-timeout"};
constexpr option_key<std::string> kv_events{"kv-events-config"};
constexpr option_key<std::string> kv_encoding{"kv-event-encoding"};
constexpr option_key<std::string> kv_hashes{"kv-hash-format"};
constexpr option_key<bool> replay_topic{"replay-topic-frame"};
constexpr option_key<bool> sglang_cumulative{"sglang-cumulative-output"};
constexpr option_key<std::string> protocol{"protocol"};
constexpr option_key<std::string> role{"disaggregation-mode"};
constexpr option_key<double> transfer_ms{"kv-transfer-ms-per-block"};
constexpr option_key<std::chrono::milliseconds> bootstrap_timeout{
  "bootstrap-timeout"};
} // namespace key

option_spec spec(const char* name, ot type, std::string def, std::string help,
                 std::string example, std::vector<std::string> choices = {}) {
  option_spec s;
  s.key = name;
  s.type = type;
  s.default_value = std::move(def);
  s.help = std::move(help);
  s.example = std::move(example);
  s.choices = std::move(choices);
  return s;
}

option_spec integer(const char* name, uint64_t def, std::string help,
                    std::string example, int64_t min, int64_t max) {
  auto s = spec(name, ot::integer, std::to_string(def), std::move(help),
                std::move(example));
  s.min = min;
  s.max = max;
  return s;
}

option_spec number(const char* name, double def, std::string help,
                   std::string example, double lowest, double highest) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", def);
  auto s = spec(name, ot::number, text, std::move(help), std::move(example));
  s.lowest = lowest;
  s.highest = highest;
  return s;
}

// The defaults are those of sim_config and engine_config, so the help text
// cannot drift from what runs.
std::vector<option_spec> make_specs() {
  const sim_config c;
  const engine_config& e = c.engine;
  return {
    spec("host", ot::string, c.host, "address to listen on", "--host 0.0.0.0"),
    integer("grpc-port", c.grpc_port, "gRPC port: health, vLLM and OpenEngine",
            "--grpc-port 50052", 1, 65535),
    integer("debug-port", c.debug_port,
            "HTTP port for ground truth and /reset_prefix_cache (0: off)",
            "--debug-port 8101", 0, 65535),
    integer("http-port", c.http_port,
            "OpenAI HTTP (/v1/completions, /v1/chat/completions, streaming) "
            "as vLLM serves beside its gRPC: rank r on this port + r (0: "
            "off)",
            "--http-port 8000", 0, 65535),
    spec("tokenizer", ot::string, "",
         "a Hugging Face tokenizer directory: text prompts and chat on the "
         "OpenAI HTTP (without: token-id prompts only)",
         "--tokenizer /models/qwen3"),
    spec("served-model-name", ot::string, c.model, "model name",
         "--served-model-name llama"),
    integer("data-parallel-size", c.data_parallel_size, "independent ranks",
            "--data-parallel-size 2", 1, 64),
    integer("block-size", e.block_size, "tokens per KV block",
            "--block-size 16", 1, 4096),
    integer("num-gpu-blocks-override", e.num_blocks, "KV blocks per rank",
            "--num-gpu-blocks-override 2048", 1, 100000000),
    integer("max-waiting-requests", c.max_waiting,
            "requests a rank lets wait before it refuses more with "
            "RESOURCE_EXHAUSTED (0: no limit)",
            "--max-waiting-requests 64", 0, 1000000),
    integer("max-num-seqs", e.max_num_seqs, "running requests per rank",
            "--max-num-seqs 64", 1, 100000),
    integer("max-num-batched-tokens", e.max_batched_tokens,
            "token budget per step", "--max-num-batched-tokens 4096", 1,
            10000000),
    integer("max-model-len", e.max_model_len, "context length",
            "--max-model-len 32768", 1, 100000000),
    integer("vocab-size", e.vocab_size,
            "token ids accepted and generated (the model's vocabulary)",
            "--vocab-size 151669", 2, 10000000),
    spec("lora-modules", ot::string, "",
         "LoRA adapters served besides the base model, comma separated "
         "(names only: the simulated KV of each is keyed apart, as vLLM's)",
         "--lora-modules sql,chat"),
    integer("kv-offload-blocks", e.offload_blocks,
            "a CPU offload tier of this many blocks (0: none): computed "
            "blocks are written through to it, and blocks found there after "
            "a prompt's GPU prefix are loaded back instead of computed",
            "--kv-offload-blocks 65536", 0, 100000000),
    spec("kv-offload-events", ot::string, "self-describing",
         "the offload tier's KV events: one store per block with its tokens "
         "and parent, or vLLM's tokenless placeholders (one per hash)",
         "--kv-offload-events placeholder", {"self-describing", "placeholder"}),
    spec("kv-offload-locality", ot::string, "none",
         "the locality the offload tier's events carry (remote: a tier "
         "another node holds)",
         "--kv-offload-locality remote", {"none", "local", "remote"}),
    spec("kv-offload-store-only", ot::boolean, "false",
         "publish no removals of the offload tier (as LMCache's connector)",
         "--kv-offload-store-only"),
    integer("media-item-tokens", e.media_item_tokens,
            "prompt tokens a media item stands for from its offset: the "
            "blocks they overlap are keyed by the item, as vLLM keys them",
            "--media-item-tokens 64", 1, 1000000),
    number("kv-offload-load-ms", e.offload_load_ms,
           "model time to load one block back from the offload tier",
           "--kv-offload-load-ms 2", 0, 1e6),
    spec("kv-hybrid-groups", ot::boolean, "false",
         "publish each GPU event also for group 1, a sliding-window layer "
         "(same hashes, as vLLM's hybrid models)",
         "--kv-hybrid-groups"),
    spec("vllm-services", ot::string, "both",
         "where vLLM's KV event discovery is served: Control only (old), "
         "KvTransfer and Control (both), or KvTransfer with Control's "
         "answering UNIMPLEMENTED (split, vLLM PR #56364), or neither "
         "(none: only HTTP GET /kv_event_sources on the debug port)",
         "--vllm-services old", {"old", "both", "split", "none"}),
    spec("scheduling-policy", ot::string, "fcfs",
         "admit waiting requests by arrival, or by (priority, arrival) "
         "as vLLM's priority policy: lower first",
         "--scheduling-policy priority", {"fcfs", "priority"}),
    number("speedup", c.speedup, "divide every modelled step time by this",
           "--speedup 10", 0.001, 1e9),
    spec("no-sleep", ot::boolean, "false",
         "run steps back to back, no modelled time", "--no-sleep"),
    spec("startup-delay", ot::duration, "0", "NOT_SERVING for this long first",
         "--startup-delay 2s"),
    spec("drain-timeout", ot::duration, "5s",
         "on SIGTERM, wait this long for requests", "--drain-timeout 1s"),
    spec("kv-events-config", ot::string, "", "vLLM's KV event JSON",
         "--kv-events-config '{\"enable_kv_cache_events\":true,"
         "\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:5557\","
         "\"replay_endpoint\":\"tcp://*:5600\"}'"),
    spec("kv-event-encoding", ot::string, "map",
         "KV events as maps (current engines) or arrays (older)",
         "--kv-event-encoding array", {"map", "array"}),
    spec("kv-hash-format", ot::string, "uint64",
         "block hashes as vLLM (uint64), SGLang (int64) or bytes",
         "--kv-hash-format int64", {"uint64", "int64", "bytes"}),
    spec("replay-topic-frame", ot::boolean, "true",
         "replay replies carry the topic frame (current vLLM); false: older "
         "vLLM and SGLang",
         "--replay-topic-frame false"),
    spec("protocol", ot::string, "all",
         "the engine services served beside grpc.health.v1: every one, or "
         "only one engine's (as a real vLLM, OpenEngine or SGLang engine "
         "offers)",
         "--protocol sglang", {"all", "vllm", "openengine", "sglang"}),
    spec("sglang-cumulative-output", ot::boolean, "false",
         "SGLang's Generate sends all output ids so far in every message "
         "(SGLang without --incremental-streaming-output)",
         "--sglang-cumulative-output"),
    spec("disaggregation-mode", ot::string, to_string(worker_role::aggregated),
         "the engine's part in disaggregated serving",
         "--disaggregation-mode prefill",
         {to_string(worker_role::aggregated), to_string(worker_role::prefill),
          to_string(worker_role::decode)}),
    number("kv-transfer-ms-per-block", c.transfer_ms_per_block,
           "simulated KV transfer time per block on a decode engine",
           "--kv-transfer-ms-per-block 0.1", 0, 1e6),
    spec("bootstrap-timeout", ot::duration, "10s",
         "SGLang disaggregation: how long a prefill leg waits for its decode "
         "engine to fetch the KV under the bootstrap room, and a decode leg "
         "for the prefill",
         "--bootstrap-timeout 2s"),
  };
}

const std::vector<option_spec>& sim_specs() {
  static const auto specs = make_specs();
  return specs;
}

std::string parse_kv_events(sim_config& c, const std::string& text) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return "--kv-events-config must be a JSON object";
  try {
    for (auto& [k, v] : doc.items()) {
      if (k == "enable_kv_cache_events")
        c.kv_events = v.get<bool>();
      else if (k == "publisher") {
        auto p = v.get<std::string>();
        if (p != "zmq" && p != "null")
          return "--kv-events-config: publisher must be \"zmq\", got \"" + p +
                 "\"";
        if (p == "null")
          c.kv_events = false;
      } else if (k == "endpoint")
        c.kv_endpoint = v.get<std::string>();
      else if (k == "replay_endpoint")
        c.kv_replay_endpoint = v.is_null() ? "" : v.get<std::string>();
      else if (k == "topic")
        c.kv_topic = v.get<std::string>();
      else if (k == "buffer_steps")
        c.kv_buffer_steps = v.get<size_t>();
      else if (k == "hwm")
        c.kv_hwm = v.get<int>();
      else if (k == "max_queue_size")
        c.kv_max_queue_size = v.get<int>();
      else
        return "--kv-events-config: unknown field '" + k + "'";
    }
  } catch (const nlohmann::json::exception& e) {
    return std::string{"--kv-events-config: wrong type: "} + e.what();
  }
  if (c.kv_buffer_steps == 0)
    return "--kv-events-config: buffer_steps must be at least 1";
  return {};
}

// Builds the config from checked values (ranges were checked by the table).
std::string to_config(const runtime::options& o, sim_config& c) {
  c.host = o.get(key::host);
  c.grpc_port = static_cast<int>(o.get(key::grpc_port));
  c.debug_port = static_cast<int>(o.get(key::debug_port));
  c.http_port = static_cast<int>(o.get(key::http_port));
  c.tokenizer_dir = o.get(key::tokenizer);
  c.model = o.get(key::model);
  c.data_parallel_size = static_cast<int>(o.get(key::dp_size));
  c.engine.block_size = static_cast<uint32_t>(o.get(key::block_size));
  c.engine.media_item_tokens =
    static_cast<uint32_t>(o.get(key::media_item_tokens));
  c.engine.num_blocks = static_cast<uint32_t>(o.get(key::num_blocks));
  c.engine.max_num_seqs = static_cast<uint32_t>(o.get(key::max_num_seqs));
  c.max_waiting = static_cast<uint32_t>(o.get(key::max_waiting));
  c.engine.max_batched_tokens = static_cast<uint32_t>(o.get(key::max_batched));
  c.engine.max_model_len = static_cast<uint32_t>(o.get(key::max_model_len));
  c.engine.vocab_size = static_cast<uint32_t>(o.get(key::vocab_size));
  c.engine.priority_scheduling = o.get(key::scheduling) == "priority";
  c.engine.offload_blocks = static_cast<uint32_t>(o.get(key::offload_blocks));
  c.engine.offload_placeholders = o.get(key::offload_events) == "placeholder";
  const auto& loc = o.get(key::offload_locality);
  c.engine.offload_locality = loc == "remote"  ? kv::locality::remote
                              : loc == "local" ? kv::locality::local
                                               : kv::locality::unspecified;
  c.engine.offload_store_only = o.get(key::offload_store_only);
  c.engine.offload_load_ms = o.get(key::offload_load_ms);
  c.engine.hybrid_groups = o.get(key::hybrid_groups);
  c.vllm_kv_transfer =
    o.get(key::vllm_services) != "old" && o.get(key::vllm_services) != "none";
  c.vllm_grpc_discovery = o.get(key::vllm_services) != "none";
  c.vllm_split_services = o.get(key::vllm_services) == "split";
  c.lora_adapters.clear();
  std::string mods = o.get(key::lora_modules);
  for (size_t at = 0; at <= mods.size();) {
    auto comma = std::min(mods.find(',', at), mods.size());
    auto name = mods.substr(at, comma - at);
    if (name.empty() && !mods.empty())
      return "--lora-modules: an empty adapter name";
    if (name.size() > 128)
      return "--lora-modules: an adapter name over 128 bytes";
    if (!name.empty())
      c.lora_adapters.push_back(name);
    at = comma + 1;
  }
  c.speedup = o.get(key::speedup);
  c.no_sleep = o.get(key::no_sleep);
  c.startup_delay_ms = o.get(key::startup_delay).count();
  c.drain_timeout_ms = o.get(key::drain_timeout).count();
  const auto& encoding = o.get(key::kv_encoding);
  c.kv_encoding =
    encoding == "array" ? event_encoding::array : event_encoding::map;
  const auto& hashes = o.get(key::kv_hashes);
  c.kv_hashes = hashes == "int64"   ? hash_format::int64
                : hashes == "bytes" ? hash_format::bytes
                                    : hash_format::uint64;
  c.replay_topic_frame = o.get(key::replay_topic);
  c.sglang_cumulative_output = o.get(key::sglang_cumulative);
  c.protocol = o.get(key::protocol);
  c.role =
    engine::worker_role_of(o.get(key::role)).value_or(engine_role::aggregated);
  c.transfer_ms_per_block = o.get(key::transfer_ms);
  c.bootstrap_timeout_ms = o.get(key::bootstrap_timeout).count();
  const auto& kv = o.get(key::kv_events);
  return kv.empty() ? std::string{} : parse_kv_events(c, kv);
}

} // namespace

std::string sim_help_text() {
  return "outrider-sim: a simulated engine speaking the real protocols "
         "(grpc.health.v1,\nvllm.Inference/Control, "
         "openengine.v1.Inference/Control, sglang.runtime.v1.SglangService,"
         "\nZMQ KV events).\n\nWith --fleet N: N simulated workers in one "
         "process, for "
         "routers at fleet\nsize (outrider-sim --fleet 1 --help lists its "
         "options).\n\nOptions:\n" +
         runtime::option_list_text(sim_specs(), false) +
         "  -h, --help     this text\n";
}

sim_parse_result parse_sim_options(const std::vector<std::string>& args) {
  sim_parse_result out;
  auto parsed = runtime::parse_flags(sim_specs(), args);
  switch (parsed.what) {
  case runtime::parse_outcome::help:
    out.what = sim_parse_result::help;
    out.message = sim_help_text();
    return out;
  case runtime::parse_outcome::version:
    out.what = sim_parse_result::error;
    out.message = "outrider-sim has no --version";
    return out;
  case runtime::parse_outcome::error:
    out.what = sim_parse_result::error;
    out.message = parsed.message;
    return out;
  case runtime::parse_outcome::ok:
    break;
  }
  if (auto err = to_config(parsed.opts, out.cfg); !err.empty()) {
    out.what = sim_parse_result::error;
    out.message = err;
  }
  return out;
}

} // namespace outrider::sim
