// The core's own random generator: xoshiro256** seeded through SplitMix64.
// Python hands the core one 64-bit seed per row, so a batched call equals the loop over rows.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace multidraft {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    // SplitMix64 expands one seed into the four words of state (never all zero).
    for (auto& word : state_) {
      seed += 0x9E3779B97F4A7C15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      word = z ^ (z >> 31);
    }
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t state_[4];
};

// The per-thread workspace of the blocked inverse-CDF draws (sample_index_by below and
// OutputCorrection::sample_residual, output_correction.hpp): one sum per block of kSize weights,
// kept from draw to draw so that a draw allocates nothing. A draw binds it once to a reference
// (a thread_local named inside a loop or lambda may be looked up at every use), resizes it and
// writes every entry it reads; no draw runs inside another's weight callback.
struct SampleBlocks {
  static constexpr int kSize = 64;  // weights per block
  static std::vector<double>& of_this_thread() {
    thread_local std::vector<double> blocks;
    return blocks;
  }
};

// Inverse-CDF draw of an index from weights weight(0 .. size-1), read on the fly (they need not
// sum to 1; negative ones count as 0), so a law such as (p - q)^+ is drawn from without being
// written. -1 when no weight is positive; a NaN or infinite weight (a bug in the law's maker)
// throws. One pass sums blocks of kSampleBlock weights, each
// vectorised (one running sum over a vocabulary would be a dependency chain of V additions),
// into SampleBlocks; the draw then walks that list and reads the weights of one block only.
template <class Weight>
inline int sample_index_by(int size, Rng& rng, Weight weight) {
  constexpr int kSampleBlock = SampleBlocks::kSize;
  std::vector<double>& blocks = SampleBlocks::of_this_thread();
  const int count = (size + kSampleBlock - 1) / kSampleBlock;
  blocks.resize(count);
  double total = 0.0;
  for (int b = 0; b < count; ++b) {
    const int begin = b * kSampleBlock, end = std::min(size, begin + kSampleBlock);
    double block = 0.0;
#pragma omp simd reduction(+ : block)
    for (int i = begin; i < end; ++i) block += std::max(weight(i), 0.0);
    total += blocks[b] = block;
  }
  if (total == 0.0) return -1;
  if (!std::isfinite(total)) throw std::runtime_error("internal: a law to sample from is not finite");
  const double u = rng.uniform() * total;
  double cumulative = 0.0;
  for (int b = 0; b < count; ++b) {
    if (cumulative + blocks[b] <= u) {
      cumulative += blocks[b];
      continue;
    }
    for (int i = b * kSampleBlock, end = std::min(size, i + kSampleBlock); i < end; ++i) {
      const double w = weight(i);
      if (w <= 0.0) continue;
      cumulative += w;
      if (u < cumulative) return i;
    }
  }
  for (int i = size - 1; i >= 0; --i)  // round-off past the last cumulative value
    if (weight(i) > 0.0) return i;
  return -1;
}

// A draw from a law (a plan's transport, q): throws, never returns -1, on a law of no positive
// mass, which only a bug in its maker could give.
inline int sample_index(const double* weights, int size, Rng& rng) {
  const int index = sample_index_by(size, rng, [weights](int i) { return weights[i]; });
  if (index < 0) throw std::runtime_error("internal: a law to sample from has no positive mass");
  return index;
}

}  // namespace multidraft
