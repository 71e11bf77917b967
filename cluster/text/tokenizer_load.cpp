// Loading a tokenizer: tokenizer.json (and tokenizer_config.json), or
// GPT-2's encoder.json + vocab.bpe.

#include <fstream>
#include <sstream>

#include "cluster/text/tokenizer.hpp"

namespace outrider::text {

namespace {

using json = nlohmann::json;

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

// A token as tokenizer_config.json writes it: "..." or {"content": "..."}.
std::string token_text(const json& j) {
  if (j.is_string())
    return j.get<std::string>();
  if (j.is_object())
    return j.value("content", std::string{});
  return {};
}

bool has_type(const json& j, const std::string& type) {
  if (!j.is_object())
    return false;
  if (j.value("type", std::string{}) == type)
    return true;
  for (const char* list : {"pretokenizers", "decoders", "processors"})
    if (j.contains(list))
      for (const auto& p : j[list])
        if (has_type(p, type))
          return true;
  return false;
}

// The merges: "a b" strings (older files) or ["a", "b"] pairs.
bool merges_of(const json& m,
               std::vector<std::pair<std::string, std::string>>* out) {
  for (const auto& e : m) {
    if (e.is_string()) {
      auto s = e.get<std::string>();
      auto sp = s.find(' ', 1);
      if (sp == std::string::npos)
        return false;
      out->emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() &&
               e[1].is_string()) {
      out->emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      return false;
    }
  }
  return true;
}

// Decoders this tokenizer reproduces: ByteLevel, Metaspace, and Llama 2's
// Sequence of Replace, ByteFallback, Fuse and Strip.
bool decoder_supported(const json& d, std::string* why) {
  if (d.is_null())
    return true;
  auto type = d.value("type", std::string{});
  if (type == "Sequence") {
    for (const auto& p : d.value("decoders", json::array()))
      if (!decoder_supported(p, why))
        return false;
    return true;
  }
  for (const char* ok :
       {"ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip"})
    if (type == ok)
      return true;
  *why = "decoder '" + type + "' is not supported";
  return false;
}

bool strips_first_space(const json& d) {
  if (!d.is_object())
    return false;
  auto type = d.value("type", std::string{});
  if (type == "Strip")
    return d.value("start", 0) >= 1;
  if (type == "Metaspace")
    return d.value("prepend_scheme", std::string{"always"}) != "never" &&
           d.value("add_prefix_space", true);
  for (const auto& p : d.value("decoders", json::array()))
    if (strips_first_space(p))
      return true;
  return false;
}

} // namespace

std::shared_ptr<const tokenizer>
tokenizer::load(const std::string& dir, std::string* why, bool segment_cache) {
  std::string tj, cj, enc, bpe;
  std::shared_ptr<const tokenizer> t;
  bool found = true;
  if (read_file(dir + "/tokenizer.json", &tj)) {
    read_file(dir + "/tokenizer_config.json", &cj);
    t = from_json(tj, cj, why);
    if (!t)
      *why = dir + "/tokenizer.json: " + *why;
  } else if (read_file(dir + "/encoder.json", &enc) &&
             read_file(dir + "/vocab.bpe", &bpe)) {
    t = from_gpt2(enc, bpe, why);
    if (!t)
      *why = dir + ": " + *why;
  } else {
    found = false;
  }
  if (t) {
    // Not yet shared with anyone: the one setting made after parsing.
    const_cast<tokenizer&>(*t).segment_cache_ = segment_cache;
    return t;
  }
  if (found)
    return nullptr;
  *why = dir + ": neither tokenizer.json nor encoder.json + vocab.bpe "
               "can be read";
  return nullptr;
}

std::shared_ptr<const tokenizer>
tokenizer::from_json(const std::string& tokenizer_json,
                     const std::string& config_json, std::string* why) {
  try {
    return parse(tokenizer_json, config_json, why);
  } catch (const json::exception& e) { // a value of the wrong type
    *why = e.what();
    return nullptr;
  }
}

std::shared_ptr<const tokenizer>
tokenizer::parse(const std::string& tokenizer_json,
                 const std::string& config_json, std::string* why) {
  json j = json::parse(tokenizer_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *why = "not JSON";
    return nullptr;
  }
  const auto& m = j.value("model", json::object());
  auto type = m.value("type", std::string{});
  if (type != "BPE") {
    *why = "model '" + type + "' is not supported (BPE only)";
    return nullptr;
  }
  if (!m.contains("vocab") || !m["vocab"].is_object() ||
      !m.contains("merges") || !m["merges"].is_array()) {
    *why = "the BPE model needs a vocab object and a merges list";
    return nullptr;
  }
  std::shared_ptr<tokenizer> t{new tokenizer};
  std::vector<std::pair<std::string, uint32_t>> vocab;
  for (const auto& [tok, id] : m["vocab"].items()) {
    if (!id.is_number_unsigned()) {
      *why = "vocab entry '" + tok + "' has no id";
      return nullptr;
    }
    vocab.emplace_back(tok, id.get<uint32_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (!merges_of(m["merges"], &merges)) {
    *why = "a merge is neither \"a b\" nor [\"a\", \"b\"]";
    return nullptr;
  }
  const auto& dec = j.value("decoder", json{});
  if (!decoder_supported(dec, why))
    return nullptr;
  bool byte_level = has_type(dec, "ByteLevel") ||
                    has_type(j.value("pre_tokenizer", json{}), "ByteLevel");
  std::optional<uint32_t> unk;
  if (m.contains("unk_token") && m["unk_token"].is_string())
    if (auto it = m["vocab"].find(m["unk_token"].get<std::string>());
        it != m["vocab"].end())
      unk = it->get<uint32_t>();
  t->model_ = std::make_unique<bpe_model>(vocab, merges, byte_level,
                                          m.value("byte_fallback", false),
                                          m.value("ignore_merges", false), unk);
  why->clear();
  t->normalizer_ = make_normalizer(j.value("normalizer", json{}), why);
  if (!why->empty())
    return nullptr;
  t->pre_ = make_pre_tokenizer(j.value("pre_tokenizer", json{}), why);
  if (!why->empty())
    return nullptr;
  for (const auto& a : j.value("added_tokens", json::array()))
    t->added_.add({a.value("id", 0u), a.value("content", std::string{}),
                   a.value("special", false), a.value("lstrip", false),
                   a.value("rstrip", false), a.value("single_word", false)});
  if (!t->load_post_processor(j.value("post_processor", json{}), why) ||
      !t->load_config(config_json, why))
    return nullptr;
  t->strip_first_space_ = strips_first_space(dec);
  t->finish_tables(!byte_level);
  return t;
}

std::shared_ptr<const tokenizer>
tokenizer::from_gpt2(const std::string& encoder_json,
                     const std::string& vocab_bpe, std::string* why) {
  json enc = json::parse(encoder_json, nullptr, false);
  if (enc.is_discarded() || !enc.is_object()) {
    *why = "encoder.json is not a JSON object";
    return nullptr;
  }
  json j = {
    {"model", {{"type", "BPE"}, {"vocab", enc}}},
    {"pre_tokenizer",
     {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
    {"decoder", {{"type", "ByteLevel"}}}};
  json merges = json::array();
  std::istringstream lines{vocab_bpe};
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0)
      continue;
    merges.push_back(line);
  }
  j["model"]["merges"] = std::move(merges);
  // As Hugging Face's GPT-2 tokenizer.json has it.
  if (enc.contains("<|endoftext|>"))
    j["added_tokens"] = {{{"id", enc["<|endoftext|>"]},
                          {"content", "<|endoftext|>"},
                          {"special", true}}};
  return from_json(j.dump(), "", why);
}

bool tokenizer::load_post_processor(const json& p, std::string* why) {
  if (p.is_null())
    return true;
  auto type = p.value("type", std::string{});
  if (type == "ByteLevel")
    return true; // offsets only
  if (type == "Sequence") {
    for (const auto& q : p.value("processors", json::array()))
      if (!load_post_processor(q, why))
        return false;
    return true;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix_ids_.push_back(p["cls"][1].get<uint32_t>());
    suffix_ids_.push_back(p["sep"][1].get<uint32_t>());
    return true;
  }
  if (type != "TemplateProcessing") {
    *why = "post-processor '" + type + "' is not supported";
    return false;
  }
  const auto& specials = p.value("special_tokens", json::object());
  bool after = false;
  for (const auto& item : p.value("single", json::array())) {
    if (item.contains("Sequence")) {
      after = true;
      continue;
    }
    auto name = item["SpecialToken"].value("id", std::string{});
    if (!specials.contains(name)) {
      *why = "post-processor names '" + name + "' without its ids";
      return false;
    }
    auto& to = after ? suffix_ids_ : prefix_ids_;
    for (const auto& id : specials[name].value("ids", json::array()))
      to.push_back(id.get<uint32_t>());
  }
  return true;
}

bool tokenizer::load_config(const std::string& config_json, std::string* why) {
  if (config_json.empty())
    return true;
  json c = json::parse(config_json, nullptr, false);
  if (c.is_discarded() || !c.is_object()) {
    *why = "tokenizer_config.json is not a JSON object";
    return false;
  }
  bos_ = token_text(c.value("bos_token", json{}));
  eos_ = token_text(c.value("eos_token", json{}));
  clean_up_spaces_ = c.value("clean_up_tokenization_spaces", false);
  const auto& ct = c.value("chat_template", json{});
  if (ct.is_string()) {
    chat_template_ = ct.get<std::string>();
  } else if (ct.is_array()) { // named templates: the default one
    for (const auto& named : ct)
      if (named.value("name", std::string{}) == "default")
        chat_template_ = named.value("template", std::string{});
  }
  return true;
}

} // namespace outrider::text
