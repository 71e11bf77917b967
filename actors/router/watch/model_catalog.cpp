#include "actors/router/watch/model_catalog.hpp"

namespace outrider::router {

void model_catalog::update(const std::vector<cluster::worker_record>& records) {
  std::set<std::string> bases, adapters;
  for (const auto& r : records) {
    if (!served_.empty() && r.model != served_)
      continue;
    bases.insert(r.model);
    adapters.insert(r.lora_adapters.begin(), r.lora_adapters.end());
  }
  if (!served_.empty())
    bases = {served_};
  std::vector<std::string> models(bases.begin(), bases.end());
  for (const auto& a : adapters)
    if (!bases.count(a))
      models.push_back(a);
  std::lock_guard<std::mutex> guard{mtx_};
  models_ = std::move(models);
  adapters_ = std::move(adapters);
}

std::vector<std::string> model_catalog::models() {
  std::lock_guard<std::mutex> guard{mtx_};
  return models_;
}

bool model_catalog::is_adapter(const std::string& name) {
  std::lock_guard<std::mutex> guard{mtx_};
  return adapters_.count(name) != 0;
}

} // namespace outrider::router
