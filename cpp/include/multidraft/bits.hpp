// Bit tricks the core uses, portable across GCC, Clang and MSVC (the wheels are built by all three).
#pragma once
#include <cstdint>
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#endif

namespace multidraft {

// Index of the lowest set bit of x != 0.
inline int lowest_set_bit(std::uint32_t x) {
#if defined(_MSC_VER) && !defined(__clang__)
  unsigned long index;
  _BitScanForward(&index, x);
  return static_cast<int>(index);
#else
  return __builtin_ctz(x);
#endif
}

}  // namespace multidraft
