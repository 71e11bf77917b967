#include "runtime/io_batch.hpp"

#include <boost/asio/post.hpp>
#include <utility>
#include <vector>

namespace outrider::runtime {

namespace {

struct item {
  io_batch::apply_fn fn;
  std::shared_ptr<void> target;
  std::string data;
};

struct group {
  boost::asio::any_io_executor ex;
  std::vector<item> items;
};

// This thread's open batches: their depth and what they gathered, per
// executor (a process has a handful of I/O threads).
struct thread_batch {
  int depth = 0;
  std::vector<group> groups;
};

thread_local thread_batch current;

void post_group(group& g) {
  if (g.items.empty())
    return;
  boost::asio::post(g.ex, [items = std::move(g.items)]() mutable {
    for (auto& i : items)
      i.fn(i.target, i.data);
  });
  g.items = {};
}

} // namespace

io_batch::io_batch() {
  ++current.depth;
}

io_batch::~io_batch() {
  if (--current.depth > 0)
    return;
  for (auto& g : current.groups)
    post_group(g);
  current.groups.clear();
}

bool io_batch::add(const boost::asio::any_io_executor& ex, apply_fn fn,
                   std::shared_ptr<void> target, std::string&& data) {
  if (current.depth == 0)
    return false;
  group* g = nullptr;
  for (auto& x : current.groups)
    if (x.ex == ex)
      g = &x;
  if (g == nullptr)
    g = &current.groups.emplace_back(group{ex, {}});
  g->items.push_back({fn, std::move(target), std::move(data)});
  return true;
}

void io_batch::flush(const boost::asio::any_io_executor& ex) {
  for (auto& g : current.groups)
    if (g.ex == ex)
      post_group(g);
}

int io_batch::depth() {
  return current.depth;
}

} // namespace outrider::runtime
