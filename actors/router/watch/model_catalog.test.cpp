#include "actors/router/watch/model_catalog.hpp"

#include <catch2/catch.hpp>

using outrider::cluster::worker_record;
using outrider::router::model_catalog;

namespace {

worker_record record(std::string model, std::vector<std::string> adapters) {
  worker_record r;
  r.model = std::move(model);
  r.lora_adapters = std::move(adapters);
  return r;
}

} // namespace

TEST_CASE("the model catalog lists what the watcher last read: base models, "
          "then adapters") {
  model_catalog any{""};
  CHECK(any.models().empty()); // nothing read yet: every model is accepted
  any.update(
    {record("m2", {"sql"}), record("m1", {"chat", "sql"}), record("m1", {})});
  CHECK(any.models() == std::vector<std::string>{"m1", "m2", "chat", "sql"});
  CHECK(any.is_adapter("sql"));
  CHECK_FALSE(any.is_adapter("m1"));
  // A later listing replaces the earlier: the adapter's worker left.
  any.update({record("m1", {})});
  CHECK(any.models() == std::vector<std::string>{"m1"});
  CHECK_FALSE(any.is_adapter("sql"));

  // A configured model: listed from the start, other models' workers and
  // their adapters left out.
  model_catalog one{"m1"};
  CHECK(one.models() == std::vector<std::string>{"m1"});
  one.update({record("m2", {"sql"}), record("m1", {"chat"})});
  CHECK(one.models() == std::vector<std::string>{"m1", "chat"});
  CHECK(one.is_adapter("chat"));
  CHECK_FALSE(one.is_adapter("sql"));
  one.update({});
  CHECK(one.models() == std::vector<std::string>{"m1"});
}
