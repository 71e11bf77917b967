#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace outrider::indexer {

/// A vector that grows by fixed chunks of 2^ChunkBits elements: appending
/// never moves what is held. The router's index keeps a sparse slot set
/// per block in one (a few million at fleet size); as a std::vector its
/// doubling moved them all at once, on the decision path. Indexing costs a
/// shift, a mask and one more load. Elements are default-constructed a
/// chunk at a time. Not thread-safe.
template <class T, unsigned ChunkBits = 12>
class chunked_vector {
  static constexpr size_t chunk = size_t{1} << ChunkBits;

 public:
  explicit chunked_vector(size_t n = 0) {
    for (size_t i = 0; i < n; ++i)
      emplace_back();
  }
  chunked_vector(const chunked_vector& o) : size_(o.size_) {
    for (const auto& c : o.chunks_) {
      chunks_.push_back(std::make_unique<T[]>(chunk));
      std::copy(c.get(), c.get() + chunk, chunks_.back().get());
    }
  }
  chunked_vector& operator=(const chunked_vector& o) {
    if (this != &o)
      *this = chunked_vector(o);
    return *this;
  }
  chunked_vector(chunked_vector&&) noexcept = default;
  chunked_vector& operator=(chunked_vector&&) noexcept = default;

  size_t size() const { return size_; }

  T& operator[](size_t i) { return chunks_[i >> ChunkBits][i & (chunk - 1)]; }
  const T& operator[](size_t i) const {
    return chunks_[i >> ChunkBits][i & (chunk - 1)];
  }

  T& emplace_back() {
    if (size_ == chunks_.size() * chunk)
      chunks_.push_back(std::make_unique<T[]>(chunk));
    return (*this)[size_++];
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

} // namespace outrider::indexer
