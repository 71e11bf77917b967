#pragma once

// Process-wide settings for a process that speaks gRPC.

namespace outrider::cluster {

/// Turns off Abseil's mutex deadlock detection. gRPC guards its channels
/// and calls with `absl::Mutex`; an Abseil built without NDEBUG (Debian's
/// is) checks every lock taken while another is held against a global
/// graph of lock orders. Measured here (2026-12-06): a nested lock pair
/// 0.50 µs with the check, 0.03 µs without; a router at 10,000 workers
/// spent about a quarter of its CPU in that graph
/// (`absl::...::GraphCycles::InsertEdge` under gRPC's subchannel pick).
/// The check is a debugging aid for Abseil's own users; outrider's code
/// uses the standard library's mutexes. Call it first in `main`, before
/// any thread; an embedder decides for its own process (examples/embed).
void skip_abseil_deadlock_detection();

} // namespace outrider::cluster
