// Bit tricks the core uses, portable across GCC, Clang and MSVC (the wheels are built by all
// three).
#pragma once
#include <cstdint>
#include <type_traits>
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#endif
#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace multidraft {

// Index of the lowest set bit of x != 0 (32- or 64-bit unsigned).
template <class Unsigned>
int lowest_set_bit(Unsigned x) {
  static_assert(std::is_same_v<Unsigned, std::uint32_t> || std::is_same_v<Unsigned, std::uint64_t>);
#if defined(_MSC_VER) && !defined(__clang__)
  unsigned long index;
  if constexpr (sizeof(Unsigned) == 8)
    _BitScanForward64(&index, x);
  else
    _BitScanForward(&index, x);
  return static_cast<int>(index);
#else
  if constexpr (sizeof(Unsigned) == 8) return __builtin_ctzll(x);
  return __builtin_ctz(x);
#endif
}

// Bit j set when x[j] > 0 (not for NaN), j < 64: a vector compare and its sign mask per 8, 4 or 2
// entries on the core's instruction set (the cores are compiled for x86-64, -v3 and -v4). Written
// with intrinsics because compilers vectorise the portable `mask |= (x[j] > 0) << j` loop into
// shifts that cost more than reading the row (docs/benchmarks/core-internals.md, "Positive masks").
inline std::uint64_t positive_mask64(const double* x) {
  std::uint64_t mask = 0;
#if defined(__AVX512F__)
  for (int j = 0; j < 64; j += 8)
    mask |= static_cast<std::uint64_t>(_mm512_cmp_pd_mask(_mm512_loadu_pd(x + j), _mm512_setzero_pd(), _CMP_GT_OQ)) << j;
#elif defined(__AVX__)
  for (int j = 0; j < 64; j += 4)
    mask |= static_cast<std::uint64_t>(
                _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(x + j), _mm256_setzero_pd(), _CMP_GT_OQ)))
            << j;
#elif defined(__SSE2__) || defined(_M_X64)
  for (int j = 0; j < 64; j += 2)
    mask |= static_cast<std::uint64_t>(_mm_movemask_pd(_mm_cmpgt_pd(_mm_loadu_pd(x + j), _mm_setzero_pd()))) << j;
#else
  for (int j = 0; j < 64; ++j) mask |= static_cast<std::uint64_t>(x[j] > 0.0) << j;
#endif
  return mask;
}

}  // namespace multidraft
