#include "cluster/grpc_process.hpp"

#include <absl/synchronization/mutex.h>

namespace outrider::cluster {

void skip_abseil_deadlock_detection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

} // namespace outrider::cluster
