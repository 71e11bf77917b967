#include "runtime/embedded_env.hpp"

namespace outrider::runtime {

embedded_env::embedded_env(caf::actor_system& sys, const std::string& role)
  : health_(std::make_shared<health_state>(role)),
    control_(std::make_shared<process_control>()),
    status_(health_, global_metrics()), env_{sys,          health_,
                                             control_,     status_,
                                             stop_hooks_,  pre_stop_hooks_,
                                             reload_hooks_} {}

embedded_env::~embedded_env() {
  begin_stop();
  finish();
}

void embedded_env::begin_stop() {
  if (begun_)
    return;
  begun_ = true;
  health_->begin_shutdown();
  for (auto& hook : pre_stop_hooks_)
    hook();
}

void embedded_env::finish() {
  if (finished_)
    return;
  finished_ = true;
  for (auto i = stop_hooks_.rbegin(); i != stop_hooks_.rend(); ++i)
    (*i)();
  status_.stop_added_routes();
  status_.stop();
}

} // namespace outrider::runtime
