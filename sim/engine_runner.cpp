#include "sim/engine_runner.hpp"

#include <algorithm>

namespace outrider::sim {

std::vector<token_output>
request_stream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> guard{mtx_};
  cv_.wait_for(guard, timeout,
               [this] { return !pending_.empty() || finished_; });
  std::vector<token_output> out;
  out.swap(pending_);
  return out;
}

void request_stream::push(token_output o) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (finished_)
      return;
    finished_ = o.finished != finish_reason::none;
    pending_.push_back(std::move(o));
  }
  cv_.notify_all();
}

bool request_stream::finished() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return finished_;
}

std::vector<std::pair<uint64_t, std::vector<kv_event>>>
event_subscription::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> guard{mtx_};
  cv_.wait_for(guard, timeout,
               [this] { return !pending_.empty() || overflowed_; });
  std::vector<std::pair<uint64_t, std::vector<kv_event>>> out;
  out.swap(pending_);
  return out;
}

bool event_subscription::push(uint64_t seq,
                              const std::vector<kv_event>& events) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (overflowed_)
      return false;
    if (pending_.size() >= capacity_) {
      overflowed_ = true;
    } else {
      pending_.emplace_back(seq, events);
    }
  }
  cv_.notify_all();
  return !overflowed();
}

bool event_subscription::overflowed() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return overflowed_;
}

std::shared_ptr<event_subscription>
engine_runner::subscribe(bool snapshot, std::vector<kv_event>* events,
                         uint64_t* seq) {
  auto sub = std::make_shared<event_subscription>(10000);
  std::lock_guard<std::mutex> guard{mtx_};
  if (snapshot && events)
    *events = kv::stores_parents_first(core_.cache_snapshot());
  if (seq)
    *seq = next_seq_;
  subscribers_.push_back(sub);
  return sub;
}

engine_runner::engine_runner(engine_config cfg, runner_options opts,
                             kv_publisher* pub)
  : cfg_(cfg), opts_(opts), pub_(pub), core_(cfg) {
  thread_ = std::thread([this] { run(); });
}

engine_runner::~engine_runner() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<request_stream> engine_runner::submit(engine_request req,
                                                      std::string* why) {
  auto stream = std::make_shared<request_stream>();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto id = req.id;
    if (!core_.submit(std::move(req), why))
      return nullptr;
    streams_[id] = stream;
  }
  cv_.notify_all();
  return stream;
}

bool engine_runner::abort(const std::string& id) {
  std::shared_ptr<request_stream> stream;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!core_.abort(id))
      return false;
    auto i = streams_.find(id);
    if (i != streams_.end()) {
      stream = i->second;
      streams_.erase(i);
    }
  }
  if (stream) {
    token_output o;
    o.request_id = id;
    o.finished = finish_reason::aborted;
    stream->push(std::move(o));
  }
  return true;
}

void engine_runner::abort_all() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (const auto& [id, s] : streams_)
      ids.push_back(id);
  }
  for (const auto& id : ids)
    abort(id);
}

void engine_runner::set_paused(bool paused) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    paused_ = paused;
  }
  cv_.notify_all();
}

void engine_runner::reset_prefix_cache() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    core_.reset_prefix_cache();
    kick_ = true;
  }
  cv_.notify_all();
}

void engine_runner::inject_payload(std::string payload) {
  std::lock_guard<std::mutex> guard{mtx_};
  ++next_seq_; // keeps SubscribeKvEvents numbering in step with ZMQ
  if (pub_)
    pub_->publish(std::move(payload));
}

void engine_runner::drip_malformed_replays() {
  if (pub_)
    pub_->drip_malformed_replies();
}

void engine_runner::lose_next_kv_message() {
  if (pub_)
    pub_->lose_next();
}

void engine_runner::renumber_kv_messages() {
  if (pub_)
    pub_->renumber();
}

void engine_runner::inject_frames(std::vector<std::string> frames) {
  if (pub_)
    pub_->publish_frames(std::move(frames));
}

std::vector<cached_block> engine_runner::cache_snapshot() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return core_.cache_snapshot();
}

engine_load engine_runner::load() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return core_.load();
}

bool engine_runner::idle() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return core_.idle();
}

void engine_runner::run() {
  using clock = std::chrono::steady_clock;
  auto next_step = clock::now();
  for (;;) {
    step_result s;
    std::vector<std::pair<std::shared_ptr<request_stream>, token_output>> out;
    {
      std::unique_lock<std::mutex> guard{mtx_};
      auto has_work = [this] {
        return stopping_ || kick_ || (!paused_ && !core_.idle());
      };
      if (!has_work()) {
        cv_.wait(guard, has_work);
        // Time restarts after idling; while busy, late steps are caught up
        // so that the wall clock follows the model.
        next_step = clock::now();
      }
      if (stopping_)
        return;
      kick_ = false;
      if (paused_) {
        s.events = core_.step().events; // nothing is scheduled while idle
      } else {
        s = core_.step();
      }
      // Subscribers see the batch under the same lock as the step, so a
      // snapshot taken under it covers exactly the batches before next_seq_.
      if (!s.events.empty()) {
        auto seq = next_seq_++;
        std::erase_if(subscribers_, [&](auto& weak) {
          auto sub = weak.lock();
          return !sub || !sub->push(seq, s.events);
        });
      }
      for (auto& o : s.outputs) {
        auto i = streams_.find(o.request_id);
        if (i == streams_.end())
          continue;
        auto stream = i->second;
        if (o.finished != finish_reason::none)
          streams_.erase(i);
        out.emplace_back(std::move(stream), std::move(o));
      }
    }
    // The step takes its modelled time; its results appear at its end.
    if (!opts_.no_sleep && s.duration_ms > 0) {
      next_step += std::chrono::duration_cast<clock::duration>(
        std::chrono::duration<double, std::milli>(s.duration_ms /
                                                  opts_.speedup));
      std::this_thread::sleep_until(next_step);
    }
    if (pub_ && !s.events.empty()) {
      auto ts = std::chrono::duration<double>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
      pub_->publish(
        encode_batch(ts, s.events, opts_.rank, opts_.encoding, opts_.hashes));
    }
    for (auto& [stream, o] : out)
      stream->push(std::move(o));
  }
}

} // namespace outrider::sim
