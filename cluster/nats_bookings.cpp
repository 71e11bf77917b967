#include "cluster/nats_bookings.hpp"

#include <nats/nats.h>

#include <nlohmann/json.hpp>

#include "runtime/metrics.hpp"

namespace outrider::cluster {

namespace {

constexpr const char* op_names[] = {"add", "prefilled", "release", "alive"};
constexpr size_t max_note_bytes = 256 * 1024;

} // namespace

std::string to_json(const booking_note& n) {
  nlohmann::json j;
  j["op"] = op_names[static_cast<int>(n.what)];
  j["router"] = n.router_id;
  j["key"] = n.key;
  if (n.what == booking_note::op::add) {
    j["worker"] = n.worker_id;
    j["rank"] = n.rank;
    j["prefill_tokens"] = n.prefill_tokens;
    j["decode_blocks"] = n.decode_blocks;
    j["blocks"] =
      n.blocks.size() <= max_note_blocks ? n.blocks : std::vector<uint64_t>{};
    if (!n.session.empty() && n.session.size() <= max_note_session_bytes)
      j["session"] = n.session;
  }
  return j.dump();
}

std::optional<booking_note> booking_from_json(const std::string& text,
                                              std::string* why) {
  auto fail = [&](const char* what) -> std::optional<booking_note> {
    if (why)
      *why = what;
    return std::nullopt;
  };
  if (text.size() > max_note_bytes)
    return fail("too large");
  // Flat objects only: a depth limit is not needed past the type checks.
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j["op"].is_string() || !j["router"].is_string() ||
      !j["key"].is_number_unsigned())
    return fail("not a booking note");
  booking_note n;
  auto op = j["op"].get<std::string>();
  size_t i = 0;
  while (i < 4 && op != op_names[i])
    ++i;
  if (i == 4)
    return fail("unknown op");
  n.what = static_cast<booking_note::op>(i);
  n.router_id = j["router"].get<std::string>();
  n.key = j["key"].get<uint64_t>();
  if (n.router_id.empty())
    return fail("no router id");
  if (n.what != booking_note::op::add)
    return n;
  const auto& rank = j["rank"];
  if (!j["worker"].is_string() || !rank.is_number_integer() ||
      rank.get<int64_t>() < 0 || rank.get<int64_t>() >= 1024 ||
      !j["prefill_tokens"].is_number_unsigned() ||
      !j["decode_blocks"].is_number_unsigned() || !j["blocks"].is_array() ||
      j["blocks"].size() > max_note_blocks)
    return fail("malformed add");
  n.worker_id = j["worker"].get<std::string>();
  n.rank = static_cast<int>(rank.get<int64_t>());
  n.prefill_tokens = j["prefill_tokens"].get<uint64_t>();
  n.decode_blocks = j["decode_blocks"].get<uint64_t>();
  for (const auto& b : j["blocks"]) {
    if (!b.is_number_unsigned())
      return fail("malformed block hash");
    n.blocks.push_back(b.get<uint64_t>());
  }
  if (auto s = j.find("session"); s != j.end()) {
    if (!s->is_string() ||
        s->get_ref<const std::string&>().size() > max_note_session_bytes)
      return fail("malformed session");
    n.session = s->get<std::string>();
  }
  return n;
}

nats_bookings::nats_bookings(nats_config cfg) : cfg_(std::move(cfg)) {}

nats_bookings::~nats_bookings() = default;

caf::error nats_bookings::open() {
  return link_.connect(cfg_, cfg_.on_connection);
}

bool nats_bookings::publish(const booking_note& n) {
  auto text = to_json(n);
  return natsConnection_Publish(link_.get(), cfg_.booking_subject.c_str(),
                                text.data(),
                                static_cast<int>(text.size())) == NATS_OK;
}

caf::error nats_bookings::subscribe(handler h) {
  on_note_ = std::move(h);
  auto deliver = [this](natsMsg* msg) {
    std::string text(natsMsg_GetData(msg),
                     static_cast<size_t>(natsMsg_GetDataLength(msg)));
    if (auto n = booking_from_json(text))
      on_note_(std::move(*n));
    else
      runtime::global_metrics()
        .get_counter("outrider_router_booking_notes_malformed_total",
                     "Booking notes from other routers that were not valid")
        .inc();
  };
  return link_.subscribe(cfg_.booking_subject, deliver);
}

} // namespace outrider::cluster
