#pragma once

#include <chrono>
#include <memory>

#include <caf/all.hpp>

#include "cluster/messages.hpp"

namespace outrider::registrar {

using register_atom = caf::atom_constant<caf::atom("register")>;
using deregister_atom = caf::atom_constant<caf::atom("deregister")>;
using keepalive_atom = caf::atom_constant<caf::atom("keepalive")>;

/// Publishes the worker's record in discovery and keeps its lease alive
/// (every TTL/3); withdraws it on `deregister` (also a record with our
/// worker id that a crashed predecessor left) and when the actor stops.
/// `register` answers whether the record was written.
using registrar_actor = caf::typed_actor<
  caf::replies_to<register_atom, cluster::worker_record>::with<bool>,
  caf::reacts_to<deregister_atom>, caf::reacts_to<keepalive_atom, uint64_t>>;

registrar_actor spawn_registrar(caf::actor_system& sys,
                                std::shared_ptr<cluster::discovery> disc,
                                std::chrono::milliseconds ttl,
                                std::string worker_id);

} // namespace outrider::registrar
