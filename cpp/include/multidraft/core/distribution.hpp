// Probability rows as users pass them (float32 or float64, any strides), checked and normalised
// in one read of the input: the law the core computes with is x / sum(x) in float64, whatever the
// input's rounding (the caller sets the sum tolerance from the input's dtype and V;
// python/multidraft/_validation.py derives it). The division is a multiplication by 1 / sum,
// within an ulp of dividing at a fraction of the cost (a vector division per 4 or 8 entries
// costs more than reading them).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace multidraft {

// A float64 row read in place with its scale (row_scale): entry i of the law is data[i] * scale,
// the product a normalised copy would hold, computed as it is read instead of written. Plans that
// take a row as a template parameter read `const double*` (normalised rows) and ScaledRow alike.
struct ScaledRow {
  const double* data;
  double scale = 1.0;
  double operator[](std::int64_t i) const { return data[i] * scale; }
};

// The stored entries, for passes that only ask which entries are positive (scale > 0).
inline const double* stored(const double* row) { return row; }
inline const double* stored(const ScaledRow& row) { return row.data; }

// A row of V entries `stride` elements apart.
template <class T>
struct StridedRow {
  const T* data;
  std::int64_t V, stride;
  double operator[](std::int64_t i) const { return static_cast<double>(data[i * stride]); }
};

// Sum of the row in float64, and whether every entry is finite and >= 0: a NaN or infinite entry
// makes the sum NaN or infinite, so the smallest entry and the sum tell, in one vectorised pass.
// Unit-stride rows are summed in eight fixed lanes (i mod 8) added in a fixed order, so the sum
// does not depend on where the row lies in memory (a vectorised reduction may peel for alignment).
template <class T>
inline bool row_sum_if_valid(const StridedRow<T>& row, double& sum) {
  double total = 0.0, lowest = 0.0;
  if (row.stride == 1) {
    const T* x = row.data;
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0}, low[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::int64_t i = 0;
    for (; i + 8 <= row.V; i += 8)
#pragma omp simd
      for (int l = 0; l < 8; ++l) {
        const double v = static_cast<double>(x[i + l]);
        lanes[l] += v;
        low[l] = std::min(low[l], v);
      }
    for (int l = 0; i < row.V; ++i, ++l) {
      lanes[l] += static_cast<double>(x[i]);
      low[l] = std::min(low[l], static_cast<double>(x[i]));
    }
    total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    lowest = *std::min_element(low, low + 8);
  } else {
    for (std::int64_t i = 0; i < row.V; ++i) {
      total += row[i];
      lowest = std::min(lowest, row[i]);
    }
  }
  sum = total;
  return std::isfinite(total) && lowest >= 0.0;
}

// scale = 1 / sum(row) when the row is valid and |sum - 1| <= tolerance; false otherwise, for the
// caller to say what is wrong. The law is then the row times `scale`, entry by entry.
template <class T>
inline bool row_scale(const StridedRow<T>& row, double tolerance, double& scale) {
  double sum;
  if (!row_sum_if_valid(row, sum) || !(std::fabs(sum - 1.0) <= tolerance)) return false;
  scale = 1.0 / sum;
  return true;
}

// out = row / sum(row) (row times row_scale) when the row is valid; false (out untouched) otherwise.
template <class T>
inline bool normalise_row(const StridedRow<T>& row, double tolerance, double* out) {
  double scale;
  if (!row_scale(row, tolerance, scale)) return false;
  if (row.stride == 1) {
    const T* x = row.data;
#pragma omp simd
    for (std::int64_t i = 0; i < row.V; ++i) out[i] = static_cast<double>(x[i]) * scale;
  } else {
    for (std::int64_t i = 0; i < row.V; ++i) out[i] = row[i] * scale;
  }
  return true;
}

// Scales residual masses to a law in place; empty when no residual mass is left (alpha = 1).
inline std::vector<double> normalised_law(std::vector<double> residual) {
  double total = 0.0;
#pragma omp simd reduction(+ : total)  // O(V) on every plan: keep it one vectorised pass
  for (std::size_t i = 0; i < residual.size(); ++i) total += residual[i];
  if (!(total > 0.0)) return {};
  const double scale = 1.0 / total;  // within an ulp of dividing, at a fraction of the cost
  if (!std::isfinite(scale)) {  // a subnormal total: its reciprocal overflows (inf * 0 = NaN), so divide
    for (double& x : residual) x /= total;
    return residual;
  }
  for (double& x : residual) x *= scale;
  return residual;
}

}  // namespace multidraft
