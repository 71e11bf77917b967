#pragma once

// A Hugging Face tokenizer, written here from the format's description:
// tokenizer.json's BPE model with its normalizer, pre-tokenizer, added
// tokens, post-processor and decoder, for byte-level BPE (GPT-2, Llama 3,
// Qwen 2/3) and BPE with byte fallback (Llama 2, Mistral). Loaded once;
// encode and decode are const and safe to call from many threads. No C++
// library does this (Hugging Face's own is Rust), so it is hand-written;
// PCRE2 runs the patterns and utf8proc the Unicode normal forms.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cluster/text/added_tokens.hpp"
#include "cluster/text/bpe_model.hpp"
#include "cluster/text/normalizer.hpp"
#include "cluster/text/pre_tokenizer.hpp"

namespace outrider::text {

class tokenizer {
 public:
  /// `dir`/tokenizer.json (with `dir`/tokenizer_config.json when there),
  /// or GPT-2's own encoder.json + vocab.bpe. nullptr and `*why` (one line:
  /// the file and what is wrong or unsupported) otherwise.
  /// `segment_cache`: off only to measure the tokenizer itself.
  static std::shared_ptr<const tokenizer>
  load(const std::string& dir, std::string* why, bool segment_cache = true);
  /// From the texts of tokenizer.json and tokenizer_config.json (may be
  /// empty).
  static std::shared_ptr<const tokenizer>
  from_json(const std::string& tokenizer_json, const std::string& config_json,
            std::string* why);
  static std::shared_ptr<const tokenizer>
  from_gpt2(const std::string& encoder_json, const std::string& vocab_bpe,
            std::string* why);

  /// Token ids of well-formed UTF-8 `text` (ill-formed bytes are replaced
  /// by U+FFFD first). `add_special`: the post-processor's BOS/EOS.
  std::vector<uint32_t> encode(std::string_view text,
                               bool add_special = true) const;
  /// Text of `ids`; ill-formed byte sequences become U+FFFD. With the
  /// config's clean_up_tokenization_spaces, " ." becomes "." and the like,
  /// as transformers' decode does (streamed text is not cleaned up, as
  /// vLLM's incremental detokenizer does not).
  std::string decode(const std::vector<uint32_t>& ids,
                     bool skip_special = false) const;
  /// The bytes one token stands for (before UTF-8 is checked), and
  /// whether the decoder drops a leading space of the first token.
  const std::string& token_bytes(uint32_t id) const;
  bool strips_leading_space() const { return strip_first_space_; }
  bool is_special(uint32_t id) const;
  size_t vocab_size() const { return bytes_.size(); }
  std::optional<uint32_t> token_id(std::string_view token) const;

  /// From tokenizer_config.json (empty when it is absent).
  const std::string& chat_template() const { return chat_template_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }
  /// The ids that end a generation (eos_token).
  const std::vector<uint32_t>& eos_ids() const { return eos_ids_; }

 private:
  tokenizer() = default;
  static std::shared_ptr<const tokenizer>
  parse(const std::string& tj, const std::string& cj, std::string* why);
  bool load_config(const std::string& config_json, std::string* why);
  bool load_post_processor(const nlohmann::json& j, std::string* why);
  void finish_tables(bool metaspace_decoder);
  bool cached_segment(std::string_view text, bool first,
                      std::vector<uint32_t>& ids) const;
  void keep_segment(std::string_view text, bool first,
                    const std::vector<uint32_t>& ids, size_t from) const;

  static constexpr size_t segment_cache_min = 1024;        // bytes of text
  static constexpr size_t segment_cache_bytes = 32u << 20; // in all

  std::unique_ptr<normalizer> normalizer_;
  std::unique_ptr<pre_tokenizer> pre_;
  std::unique_ptr<bpe_model> model_;
  added_token_matcher added_;
  std::vector<uint32_t> prefix_ids_, suffix_ids_; // TemplateProcessing
  std::vector<std::string> bytes_;                // per id
  std::vector<bool> special_;
  bool strip_first_space_ = false;
  bool clean_up_spaces_ = false;
  bool segment_cache_ = true;
  std::string chat_template_, bos_, eos_;
  std::vector<uint32_t> eos_ids_;
  mutable std::mutex segments_mtx_;
  mutable std::unordered_map<std::string, std::vector<uint32_t>> segments_;
  mutable size_t segment_bytes_ = 0;
};

} // namespace outrider::text
