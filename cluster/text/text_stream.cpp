#include "cluster/text/text_stream.hpp"

#include <algorithm>

#include "cluster/text/utf8.hpp"

namespace outrider::text {

text_stream::text_stream(std::shared_ptr<const tokenizer> t,
                         std::vector<std::string> stops, bool skip_special,
                         bool stop_at_eos)
  : tok_(std::move(t)), skip_special_(skip_special), stop_at_eos_(stop_at_eos) {
  for (auto& s : stops)
    if (!s.empty())
      stops_.push_back(std::move(s));
}

std::string text_stream::push(uint32_t id) {
  if (stopped_)
    return {};
  ++used_;
  const auto& eos = tok_->eos_ids();
  if (stop_at_eos_ && std::find(eos.begin(), eos.end(), id) != eos.end()) {
    auto rest = finish(); // the model's end of sequence: a stop, left out
    stopped_ = true;
    return rest;
  }
  if (skip_special_ && tok_->is_special(id))
    return {};
  const auto& b = tok_->token_bytes(id);
  if (b.empty())
    return {};
  bytes_ += b;
  if (first_ && tok_->strips_leading_space() && bytes_[0] == ' ')
    bytes_.erase(0, 1);
  first_ = false;
  size_t n = complete_prefix(bytes_);
  if (n == 0)
    return {};
  auto chunk = lossy_utf8(std::string_view(bytes_).substr(0, n));
  bytes_.erase(0, n);
  return release(std::move(chunk), false);
}

std::string text_stream::finish() {
  if (stopped_)
    return {};
  auto chunk = lossy_utf8(bytes_);
  bytes_.clear();
  return release(std::move(chunk), true);
}

std::string text_stream::release(std::string chunk, bool last) {
  held_ += chunk;
  size_t first = std::string::npos;
  for (const auto& s : stops_)
    first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    auto out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold the longest end of the text that begins some stop string.
  size_t keep = 0;
  if (!last)
    for (const auto& s : stops_)
      for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
        if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
  auto out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

} // namespace outrider::text
