#include "sim/engine_core.hpp"

#include <algorithm>
#include <utility>
#include <xxhash.h>

#include "cluster/kv/block_hash.hpp"
#include "sim/kv_encoding.hpp"

namespace outrider::sim {

struct engine_core::request_state {
  engine_request req;
  std::vector<uint32_t> tokens; // prompt, then output
  uint32_t prompt_len = 0;
  uint32_t outputs = 0;
  size_t computed = 0;  // tokens whose KV exists
  size_t committed = 0; // leading blocks known to the cache
  std::vector<int32_t> blocks;
  std::vector<uint64_t> hashes; // of leading full blocks, as far as known
  uint64_t context = context_seed;
  uint32_t cached_tokens = 0;
  bool admitted_once = false;
};

engine_core::engine_core(engine_config cfg)
  : cfg_(cfg), blocks_(cfg.num_blocks, cfg.block_size),
    offload_({cfg.offload_blocks, cfg.offload_placeholders,
              cfg.offload_locality, cfg.offload_store_only}) {}

engine_core::~engine_core() = default;

bool engine_core::submit(engine_request req, std::string* why) {
  auto fail = [&](std::string msg) {
    if (why)
      *why = std::move(msg);
    return false;
  };
  if (req.prompt.empty())
    return fail("the prompt is empty");
  if (req.max_tokens == 0)
    return fail("max_tokens must be at least 1");
  uint64_t total = req.prompt.size() + uint64_t{req.max_tokens};
  if (total > cfg_.max_model_len)
    return fail("prompt (" + std::to_string(req.prompt.size()) +
                " tokens) plus max_tokens (" + std::to_string(req.max_tokens) +
                ") exceeds the context length " +
                std::to_string(cfg_.max_model_len));
  if ((total + cfg_.block_size - 1) / cfg_.block_size > cfg_.num_blocks)
    return fail("the request needs more KV blocks than the engine has");
  for (auto t : req.prompt)
    if (t >= cfg_.vocab_size)
      return fail("token id " + std::to_string(t) +
                  " is outside the vocabulary"
                  " of " +
                  std::to_string(cfg_.vocab_size));
  if (by_id_.count(req.id))
    return fail("duplicate request id '" + req.id + "'");
  auto r = std::make_shared<request_state>();
  r->tokens = req.prompt;
  r->prompt_len = static_cast<uint32_t>(req.prompt.size());
  for (auto t : r->tokens)
    r->context = fold_token(r->context, t);
  r->req = std::move(req);
  by_id_.emplace(r->req.id, r);
  // Behind every waiting request of the same or a lower priority value.
  auto at = waiting_.end();
  if (cfg_.priority_scheduling)
    at = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) {
      return w->req.priority > r->req.priority;
    });
  waiting_.insert(at, r);
  return true;
}

bool engine_core::has_request(const std::string& id) const {
  return by_id_.count(id) > 0;
}

bool engine_core::abort(const std::string& id) {
  auto i = by_id_.find(id);
  if (i == by_id_.end())
    return false;
  auto r = i->second;
  by_id_.erase(i);
  free_blocks(*r);
  std::erase(running_, r);
  std::erase(waiting_, r);
  return true;
}

// Tail first, as vLLM frees them: the LRU then evicts a prompt's last
// blocks before its first, so a partly evicted prefix still hits.
void engine_core::free_blocks(request_state& r) {
  for (auto b = r.blocks.rbegin(); b != r.blocks.rend(); ++b)
    blocks_.release(*b);
  r.blocks.clear();
  r.computed = 0;
  r.committed = 0;
}

namespace {

// vLLM's extra keys of a block (docs/wire.md, "extra_keys"): the adapter's
// name on every block, each media item overlapping it with its start
// relative to the block, the salt on the first.
kv::block_extra extra_keys_of(const engine_request& req, size_t block,
                              size_t block_size) {
  kv::block_extra ex;
  if (!req.lora.empty())
    ex.push_back({kv::extra_key::kind::text, req.lora, 0});
  auto start = block * block_size;
  for (const auto& m : req.media)
    if (m.offset < start + block_size && m.offset + m.length > start)
      ex.push_back(
        {kv::extra_key::kind::media, m.identifier,
         static_cast<int64_t>(m.offset) - static_cast<int64_t>(start)});
  if (block == 0 && !req.cache_salt.empty())
    ex.push_back({kv::extra_key::kind::text, req.cache_salt, 0});
  return ex;
}

} // namespace

uint64_t engine_core::block_hash(const request_state& r, size_t block,
                                 std::optional<uint64_t> parent,
                                 const uint32_t* tokens) const {
  auto seed = cfg_.hash_salt ^ splitmix(parent.value_or(0));
  auto ex = extra_keys_of(r.req, block, cfg_.block_size);
  if (!ex.empty())
    seed ^= splitmix(kv::extra_digest(ex));
  return XXH3_64bits_withSeed(tokens, cfg_.block_size * sizeof(uint32_t), seed);
}

std::vector<uint64_t>
engine_core::full_block_hashes(const request_state& r) const {
  auto out = r.hashes;
  size_t full = r.tokens.size() / cfg_.block_size;
  for (size_t b = out.size(); b < full; ++b) {
    std::optional<uint64_t> parent;
    if (b > 0)
      parent = out[b - 1];
    out.push_back(
      block_hash(r, b, parent, r.tokens.data() + b * cfg_.block_size));
  }
  return out;
}

bool engine_core::ensure_blocks(request_state& r, size_t tokens) {
  size_t need = (tokens + cfg_.block_size - 1) / cfg_.block_size;
  while (r.blocks.size() < need) {
    auto b = blocks_.allocate();
    if (!b)
      return false;
    r.blocks.push_back(*b);
  }
  return true;
}

void engine_core::preempt(const request_ptr& r) {
  free_blocks(*r);
  std::erase(running_, r);
  waiting_.push_front(r);
  ++preemptions_;
}

bool engine_core::admit(
  const request_ptr& r, uint32_t& budget,
  std::vector<std::pair<request_ptr, uint32_t>>& scheduled) {
  r->hashes = full_block_hashes(*r);
  size_t len = r->tokens.size();
  size_t hit = blocks_.match_prefix(r->hashes);
  // At least one token is computed, to produce the next one.
  if (hit * cfg_.block_size >= len)
    hit = (len - 1) / cfg_.block_size;
  std::vector<uint64_t> prefix(r->hashes.begin(), r->hashes.begin() + hit);
  r->blocks = blocks_.acquire(prefix);
  r->computed = hit * cfg_.block_size;
  r->committed = hit;
  // Blocks after the GPU prefix that the offload tier holds are loaded
  // back, not computed (at least one token is still computed).
  size_t loaded = offload_.hits(r->hashes, hit);
  size_t most = (len - 1) / cfg_.block_size;
  if (hit + loaded > most)
    loaded = most > hit ? most - hit : 0;
  if (loaded > 0) {
    if (!ensure_blocks(*r, (hit + loaded) * cfg_.block_size)) {
      free_blocks(*r);
      return false;
    }
    r->computed = (hit + loaded) * cfg_.block_size;
    commit_full_blocks(*r);
    load_ms_ += static_cast<double>(loaded) * cfg_.offload_load_ms;
  }
  if (r->req.kv_preloaded && !r->admitted_once) {
    // Transferred KV: the prompt's full blocks count as computed.
    auto full = (len - 1) / cfg_.block_size * cfg_.block_size;
    if (!ensure_blocks(*r, full)) {
      free_blocks(*r);
      return false;
    }
    r->computed = std::max(r->computed, full);
    commit_full_blocks(*r);
  }
  auto n = static_cast<uint32_t>(std::min<size_t>(len - r->computed, budget));
  if (!ensure_blocks(*r, r->computed + n)) {
    free_blocks(*r);
    return false;
  }
  if (!r->admitted_once) {
    r->admitted_once = true;
    r->cached_tokens = static_cast<uint32_t>(r->computed);
  }
  running_.push_back(r);
  scheduled.emplace_back(r, n);
  budget -= n;
  return true;
}

void engine_core::commit_full_blocks(request_state& r) {
  size_t full = r.computed / cfg_.block_size;
  auto fresh_run = [&] {
    block_stored s;
    s.block_size = cfg_.block_size;
    s.lora_name = r.req.lora;
    return s;
  };
  block_stored run = fresh_run();
  bool extras = false;
  auto flush = [&] {
    if (!extras)
      run.extra_keys.clear();
    if (!run.block_hashes.empty()) {
      block_stored copy;
      if (cfg_.offload_blocks)
        copy = run;
      blocks_.record(std::move(run));
      if (cfg_.offload_blocks) // written through, after the GPU's store
        offload_.write_through(
          copy, [&](kv_event ev) { blocks_.record(std::move(ev)); });
    }
    run = fresh_run();
    extras = false;
  };
  for (size_t b = r.committed; b < full; ++b) {
    std::optional<uint64_t> parent;
    if (b > 0)
      parent = r.hashes[b - 1];
    if (r.hashes.size() <= b)
      r.hashes.push_back(
        block_hash(r, b, parent, r.tokens.data() + b * cfg_.block_size));
    auto first = r.tokens.begin() + static_cast<ptrdiff_t>(b * cfg_.block_size);
    std::vector<uint32_t> toks(first, first + cfg_.block_size);
    auto ex = extra_keys_of(r.req, b, cfg_.block_size);
    kv::block_identity id{r.req.lora, {}};
    if (!ex.empty() && !r.req.lora.empty())
      id.extra.assign(ex.begin() + 1, ex.end());
    else
      id.extra = ex;
    if (blocks_.commit(r.blocks[b], r.hashes[b], parent, toks, id)) {
      if (run.block_hashes.empty())
        run.parent_block_hash = parent;
      run.block_hashes.push_back(r.hashes[b]);
      extras |= !ex.empty();
      run.extra_keys.push_back(std::move(ex));
      run.token_ids.insert(run.token_ids.end(), toks.begin(), toks.end());
    } else {
      flush();
    }
  }
  flush();
  r.committed = full;
}

std::vector<cached_block> engine_core::cache_snapshot() const {
  auto out = blocks_.snapshot();
  offload_.snapshot(out);
  return out;
}

step_result engine_core::step() {
  step_result out;
  uint32_t budget = cfg_.max_batched_tokens;
  std::vector<std::pair<request_ptr, uint32_t>> scheduled;
  // Running requests first, oldest first.
  auto running = running_;
  for (const auto& r : running) {
    if (budget == 0)
      break;
    if (std::find(running_.begin(), running_.end(), r) == running_.end())
      continue; // preempted in this step
    size_t len = r->tokens.size();
    auto n = static_cast<uint32_t>(std::min<size_t>(len - r->computed, budget));
    if (n == 0)
      continue;
    bool ok = true;
    while (!ensure_blocks(*r, r->computed + n)) {
      auto victim = running_.back();
      preempt(victim);
      if (victim == r) {
        ok = false;
        break;
      }
    }
    if (ok) {
      scheduled.emplace_back(r, n);
      budget -= n;
    }
  }
  // Then waiting requests, in order, while there is room.
  while (!waiting_.empty() && budget > 0 &&
         running_.size() < cfg_.max_num_seqs) {
    auto r = waiting_.front();
    if (!admit(r, budget, scheduled))
      break;
    waiting_.pop_front();
  }
  // Run the step.
  for (auto& [r, n] : scheduled) {
    bool decode =
      r->outputs > 0 && n == 1 && r->computed + 1 == r->tokens.size();
    if (decode)
      out.decode_tokens += 1;
    else
      out.prefill_tokens += n;
    r->computed += n;
    commit_full_blocks(*r);
    if (r->computed < r->tokens.size())
      continue; // prefill continues in a later step
    auto tok = next_token(r->context, r->req.seed, cfg_.vocab_size);
    r->tokens.push_back(tok);
    r->context = fold_token(r->context, tok);
    r->outputs += 1;
    token_output o;
    o.request_id = r->req.id;
    o.token = tok;
    o.has_token = true;
    o.prompt_tokens = r->prompt_len;
    o.cached_tokens = r->cached_tokens;
    o.output_index = r->outputs - 1;
    const auto& stops = r->req.stop_token_ids;
    if (std::find(stops.begin(), stops.end(), tok) != stops.end())
      o.finished = finish_reason::stop;
    else if (r->outputs >= r->req.max_tokens)
      o.finished = finish_reason::length;
    if (o.finished != finish_reason::none) {
      free_blocks(*r);
      std::erase(running_, r);
      by_id_.erase(r->req.id);
    }
    out.outputs.push_back(std::move(o));
  }
  if (out.prefill_tokens > 0)
    out.duration_ms += cfg_.timing.prefill_ms(out.prefill_tokens);
  if (out.decode_tokens > 0)
    out.duration_ms += cfg_.timing.decode_ms(
      static_cast<double>(blocks_.used_blocks()) / cfg_.num_blocks);
  out.duration_ms += std::exchange(load_ms_, 0.0);
  out.events = blocks_.take_events();
  if (cfg_.hybrid_groups)
    out.events = as_hybrid_groups(std::move(out.events), cfg_.block_size);
  return out;
}

void engine_core::reset_prefix_cache() {
  blocks_.clear();
}

engine_load engine_core::load() const {
  engine_load l;
  l.running = static_cast<uint32_t>(running_.size());
  l.waiting = static_cast<uint32_t>(waiting_.size());
  l.used_blocks = blocks_.used_blocks();
  l.total_blocks = blocks_.num_blocks();
  for (const auto& r : running_)
    l.running_tokens += r->tokens.size();
  for (const auto& r : waiting_)
    l.waiting_tokens += r->tokens.size();
  return l;
}

} // namespace outrider::sim
