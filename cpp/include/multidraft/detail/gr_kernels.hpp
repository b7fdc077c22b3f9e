// Vectorised loops of Global Resolution (global_resolution/), kept apart from the algorithm so
// that it reads as the mathematics: each kernel is one loop over a system's members (up to a full
// vocabulary, ~32000), written so that it vectorises (`#pragma omp simd`, branch-free bodies,
// `__restrict` parameters: a store may otherwise alias every array read, and the compiler then
// reloads them per entry). Only loops whose results do not depend on the code they compile to
// (comparisons, selections, minima and maxima: no rounding) live here. Loops that round (sums,
// products) stay in their functions: moved here, the compiler vectorised them otherwise (another
// split into lanes, other fused multiply-adds), which changed results in the last bits.
#pragma once
#include <algorithm>


namespace multidraft {
namespace detail {

// min_{i < m} values[i] (m >= 1).
inline double smallest(const double* __restrict values, int m) {
  double lowest = values[0];
#pragma omp simd reduction(min : lowest)
  for (int i = 0; i < m; ++i) lowest = std::min(lowest, values[i]);
  return lowest;
}

// The smallest and largest of values[0 .. m) (m >= 1).
inline void value_range(const double* __restrict values, int m, double& low_out, double& high_out) {
  double low = values[0], high = values[0];
#pragma omp simd reduction(min : low) reduction(max : high)
  for (int i = 0; i < m; ++i) {  // by value: std::min and max return references, which GCC leaves scalar
    low = values[i] < low ? values[i] : low;
    high = values[i] > high ? values[i] : high;
  }
  low_out = low;
  high_out = high;
}

// a_i clamped to [-30, 30] where o_i >= 0, else -30 (NaN to -30); returns the largest result.
inline double clamp_covered(const double* __restrict o, int m, double* __restrict a) {
  double highest = -30.0;
#pragma omp simd reduction(max : highest)
  for (int i = 0; i < m; ++i) {  // as maxpd / minpd compare (NaN to -30): std::max and a chained ?: stayed scalar
    const double raised = a[i] > -30.0 ? a[i] : -30.0, clamped = raised < 30.0 ? raised : 30.0;
    a[i] = o[i] >= 0.0 ? clamped : -30.0;  // uncovered members are set below
    highest = highest > a[i] ? highest : a[i];
  }
  return highest;
}

// a_i = value where o_i < 0.
inline void set_uncovered(const double* __restrict o, int m, double value, double* __restrict a) {
#pragma omp simd
  for (int i = 0; i < m; ++i) a[i] = o[i] < 0.0 ? value : a[i];
}

}  // namespace detail
}  // namespace multidraft
