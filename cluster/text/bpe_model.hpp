#pragma once

// The BPE model of a Hugging Face tokenizer: a vocabulary and ranked
// merges, applied to one pre-tokenized piece at a time. Symbols are byte
// strings. With the byte-level alphabet (GPT-2, Llama 3, Qwen) the loader
// turns vocabulary and merges back into raw bytes, so a piece starts as
// one symbol per byte; otherwise (Llama 2, Mistral) a piece starts as one
// symbol per character, and with byte fallback a character missing from
// the vocabulary becomes its <0xAB> byte tokens.

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace outrider::text {

class bpe_model {
 public:
  /// `vocab` and `merges` in the model's own alphabet; with `byte_level`
  /// each is mapped back to raw bytes first.
  bpe_model(const std::vector<std::pair<std::string, uint32_t>>& vocab,
            const std::vector<std::pair<std::string, std::string>>& merges,
            bool byte_level, bool byte_fallback, bool ignore_merges,
            std::optional<uint32_t> unk);

  /// The ids of one piece, appended to `out`.
  void encode(std::string_view piece, std::vector<uint32_t>& out) const;
  std::optional<uint32_t> id_of(std::string_view symbol) const;
  /// Every id's symbol (raw bytes with the byte-level alphabet).
  const std::vector<std::string>& symbols() const { return symbols_; }
  bool byte_level() const { return byte_level_; }

 private:
  void merge_all(std::vector<uint32_t>& ids) const;
  void initial_symbols(std::string_view piece,
                       std::vector<uint32_t>& ids) const;

  bool byte_level_;
  bool byte_fallback_;
  bool ignore_merges_; // a piece that is a token is that token (Llama 3)
  std::optional<uint32_t> unk_;
  std::unordered_map<std::string, uint32_t> vocab_;
  std::vector<std::string> symbols_;
  struct merge {
    uint32_t rank;
    uint32_t result;
  };
  std::unordered_map<uint64_t, merge> merges_; // (left << 32 | right)
  uint32_t byte_ids_[256]; // the byte-level alphabet, or <0xAB> tokens
  bool have_byte_ids_ = false;
  // Pieces seen before (words recur): bounded, cleared when full.
  mutable std::mutex cache_mtx_;
  mutable std::unordered_map<std::string, std::vector<uint32_t>> cache_;
};

/// GPT-2's byte-to-character table: the byte-level alphabet.
char32_t byte_to_char(unsigned char b);
/// The byte of a byte-level character, or -1.
int char_to_byte(char32_t c);
/// A byte-level string back to raw bytes; nullopt when a character is not
/// in the alphabet.
std::optional<std::string> from_byte_level(std::string_view s);

} // namespace outrider::text
