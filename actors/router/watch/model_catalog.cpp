#include "actors/router/watch/model_catalog.hpp"

namespace outrider::router {

void model_catalog::refresh() {
  auto now = std::chrono::steady_clock::now();
  if (now - at_ <= std::chrono::seconds{1})
    return;
  at_ = now;
  std::set<std::string> bases;
  adapters_.clear();
  for (const auto& r : disc_->list()) {
    if (!served_.empty() && r.model != served_)
      continue;
    bases.insert(r.model);
    adapters_.insert(r.lora_adapters.begin(), r.lora_adapters.end());
  }
  if (!served_.empty())
    bases = {served_};
  models_.assign(bases.begin(), bases.end());
  for (const auto& a : adapters_)
    if (!bases.count(a))
      models_.push_back(a);
}

std::vector<std::string> model_catalog::models() {
  std::lock_guard<std::mutex> guard{mtx_};
  refresh();
  return models_;
}

bool model_catalog::is_adapter(const std::string& name) {
  std::lock_guard<std::mutex> guard{mtx_};
  refresh();
  return adapters_.count(name) != 0;
}

} // namespace outrider::router
