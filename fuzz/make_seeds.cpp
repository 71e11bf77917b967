// Writes the binary seeds of fuzz/corpus (run once, output committed): KV
// batches in both encodings and every hash form, store records, a
// discovery record. Text seeds (options, completions) are written by hand.
//
//   build-fuzz/fuzz/make_seeds fuzz/corpus
#include <filesystem>
#include <fstream>

#include "actors/indexer/index_records.hpp"
#include "cluster/discovery.hpp"
#include "sim/kv_encoding.hpp"

using namespace outrider;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& dir, const std::string& name,
           const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::vector<kv::kv_event> events() {
  kv::block_stored s;
  s.block_hashes = {11, 12};
  s.parent_block_hash = 10;
  s.block_size = 4;
  s.token_ids = {1, 2, 3, 4, 5, 6, 7, 8};
  kv::block_stored root;
  root.block_hashes = {20};
  root.block_size = 4;
  root.token_ids = {9, 9, 9, 9};
  return {s, root, kv::block_removed{{12}}, kv::all_blocks_cleared{}};
}

// Today's engines' shapes: an adapter's blocks with extra keys (salt,
// media, digest), an offloaded copy, a placeholder, a sliding-window group,
// removals by medium, locality and owner.
std::vector<kv::kv_event> rich_events() {
  kv::block_stored s;
  s.block_hashes = {11, 12};
  s.block_size = 4;
  s.token_ids = {1, 2, 3, 4, 5, 6, 7, 8};
  s.lora_name = "sql";
  s.lora_id = 2;
  s.extra_keys = {{{kv::extra_key::kind::text, "sql", 0},
                   {kv::extra_key::kind::text, "tenant-a", 0}},
                  {{kv::extra_key::kind::text, "sql", 0},
                   {kv::extra_key::kind::media, "img", -2},
                   {kv::extra_key::kind::digest, std::string(32, 'd'), 0}}};
  s.group_idx = 0;
  s.spec_kind = "full_attention";
  s.session_id = "s";
  auto cpu = s;
  cpu.medium = kv::medium::cpu;
  cpu.locality = kv::locality::local;
  kv::block_stored placeholder;
  placeholder.block_hashes = {11, 99};
  placeholder.medium = kv::medium::storage;
  placeholder.locality = kv::locality::remote;
  placeholder.ownership = "kvcr";
  auto window = s;
  window.group_idx = 1;
  window.spec_kind = "sliding_window";
  window.sliding_window = 16;
  kv::block_removed gone;
  gone.block_hashes = {11};
  gone.medium = kv::medium::cpu;
  gone.locality = kv::locality::local;
  gone.group_idx = 0;
  return {s, cpu, placeholder, window, gone};
}

} // namespace

int main(int argc, char** argv) {
  fs::path out = argc > 1 ? argv[1] : "fuzz/corpus";
  int n = 0;
  for (auto enc : {sim::event_encoding::map, sim::event_encoding::array})
    for (auto h : {sim::hash_format::uint64, sim::hash_format::int64,
                   sim::hash_format::bytes})
      for (std::optional<int> rank : {std::optional<int>{}, std::optional{3}})
        write(out / "fuzz_kv_decoder", "seed-" + std::to_string(n++),
              sim::encode_batch(1700000000.5, events(), rank, enc, h));
  for (auto enc : {sim::event_encoding::map, sim::event_encoding::array})
    write(out / "fuzz_kv_decoder", "rich-" + std::to_string(n++),
          sim::encode_batch(1700000000.5, rich_events(), 0, enc));
  write(out / "fuzz_index_records", "log",
        indexer::records::encode_events(events()));
  write(out / "fuzz_index_records", "log-rich",
        indexer::records::encode_events(rich_events()));
  indexer::local_index rich;
  rich.apply(0, rich_events());
  write(out / "fuzz_index_records", "snapshot-rich",
        indexer::records::encode_snapshot(rich.ranks().at(0)));
  indexer::local_index::rank_map blocks;
  indexer::residency gpu;
  gpu.copies = 1;
  blocks[11] = indexer::block_info{10, {1, 2, 3, 4}, {}, {gpu}};
  blocks[20] = indexer::block_info{std::nullopt, {9, 9, 9, 9}, {}, {gpu}};
  write(out / "fuzz_index_records", "snapshot",
        indexer::records::encode_snapshot(blocks));
  cluster::worker_record r;
  r.worker_id = "gpu0-vllm";
  r.instance_id = "engine-1";
  r.model = "sim-model";
  r.relay_endpoint = "127.0.0.1:9100";
  r.engine_endpoint = "127.0.0.1:50051";
  r.protocol = "vllm";
  r.kv_block_size = 16;
  r.total_kv_blocks = 16384;
  r.data_parallel_size = 2;
  r.version = "1";
  write(out / "fuzz_discovery_record", "record", cluster::to_json(r));
  return 0;
}
