#pragma once

// Router replicas in step (`--share-bookings`, with NATS): every router
// tells the others, on one subject, what it booked where (a request
// placed, its prompt computed, the request done), tagged with its own id,
// and hears theirs; and once a second that it is alive. Best effort: a
// lost note skews a load figure for a while; a router not heard from for
// a few seconds loses its bookings everywhere. JSON, validated on receipt.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cluster/booking_note.hpp"
#include "cluster/nats_link.hpp"

namespace outrider::cluster {

std::string to_json(const booking_note& n);
/// nullopt (and `why`) when the text is not a valid note.
std::optional<booking_note> booking_from_json(const std::string& text,
                                              std::string* why = nullptr);

class nats_bookings {
 public:
  using handler = std::function<void(booking_note)>;
  explicit nats_bookings(nats_config cfg);
  ~nats_bookings();
  nats_bookings(const nats_bookings&) = delete;
  nats_bookings& operator=(const nats_bookings&) = delete;

  caf::error open();
  bool publish(const booking_note& n);
  /// Every router's notes (ours included), on NATS's delivery thread.
  caf::error subscribe(handler h);
  bool connected() const { return link_.connected(); }

 private:
  nats_config cfg_;
  nats_link link_;
  handler on_note_;
};

} // namespace outrider::cluster
