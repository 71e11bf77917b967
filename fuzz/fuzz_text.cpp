// Any bytes as text to tokenize and as a chat template to run, never a
// crash, a hang or unbounded output. The tokenizer is a small byte-level
// BPE made here (every byte a token, a few merges, a Split pattern as
// Qwen's, special tokens); for it, decode(encode(x)) is x with ill-formed
// UTF-8 replaced, and streaming the ids one by one gives the same text.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/text/bpe_model.hpp"
#include "cluster/text/chat_template.hpp"
#include "cluster/text/text_stream.hpp"
#include "cluster/text/tokenizer.hpp"
#include "cluster/text/utf8.hpp"

namespace {

std::shared_ptr<const outrider::text::tokenizer> make_tokenizer() {
  using outrider::text::append_utf8;
  using outrider::text::byte_to_char;
  nlohmann::json vocab = nlohmann::json::object();
  auto sym = [](const std::string& raw) {
    std::string s;
    for (unsigned char b : raw)
      append_utf8(s, byte_to_char(b));
    return s;
  };
  for (int b = 0; b < 256; ++b)
    vocab[sym(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::json merges = nlohmann::json::array();
  int id = 256;
  for (const char* pair : {" t", "h e", "t h", "i n", " th", "e r"}) {
    std::string p = pair, l, r;
    auto sp = p.find(' ', 1);
    l = p.substr(0, sp);
    r = p.substr(sp + 1);
    if (p[0] == ' ') { // " t": space then t
      l = " ";
      r = p.substr(1);
    }
    merges.push_back(sym(l) + " " + sym(r));
    vocab[sym(l + r)] = id++;
  }
  nlohmann::json j = {
    {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
    {"pre_tokenizer",
     {{"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern",
          {{"Regex",
            R"((?i:'s|'t|'re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
         {"behavior", "Isolated"}},
        {{"type", "ByteLevel"},
         {"add_prefix_space", false},
         {"use_regex", false}}}}}},
    {"decoder", {{"type", "ByteLevel"}}},
    {"added_tokens",
     {{{"id", id}, {"content", "<|s|>"}, {"special", true}},
      {{"id", id + 1}, {"content", "<|e|>"}, {"special", true}}}}};
  std::string why;
  auto t = outrider::text::tokenizer::from_json(j.dump(), "", &why);
  if (!t)
    __builtin_trap();
  return t;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok = make_tokenizer();
  std::string in{reinterpret_cast<const char*>(data), size};
  auto ids = tok->encode(in, false);
  auto text = tok->decode(ids);
  if (text != outrider::text::lossy_utf8(in))
    __builtin_trap();
  outrider::text::text_stream s{tok, {"\n\n", "<|e"}, false, false};
  std::string streamed;
  for (auto id : ids)
    streamed += s.push(id);
  streamed += s.finish();
  if (!s.stopped() && streamed != text)
    __builtin_trap();
  if (!outrider::text::well_formed(streamed))
    __builtin_trap();

  std::string why;
  if (auto t = outrider::text::chat_template::compile(in, &why)) {
    nlohmann::ordered_json vars = {
      {"messages", {{{"role", "user"}, {"content", "hi"}}}},
      {"add_generation_prompt", true}};
    auto out = t->render(vars, &why);
    if (out && out->size() > (16u << 20))
      __builtin_trap();
  }
  return 0;
}
