#pragma once

// Cluster types that travel in actor messages (local only: CAF needs the
// declaration before any actor interface names them).

#include <caf/allowed_unsafe_message_type.hpp>

#include "cluster/discovery.hpp"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(outrider::cluster::worker_record)
