// Runs of equal rows in a batch: consecutive rows with the same target and draft (many draft
// tuples verified for one context) share one plan, so an exact plan is solved once per context.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace multidraft {

// Start of every run of consecutive equal (p, q) rows, then B: run k is [starts[k], starts[k+1]).
// p is (B, V) and q (B, q_stride) row-major. Distinct rows differ early, so telling them apart
// costs O(1) per row in practice.
inline std::vector<std::int64_t> equal_row_runs(const double* p, const double* q, std::int64_t B, std::int64_t V,
                                                std::int64_t q_stride) {
  std::vector<std::int64_t> starts{0};
  for (std::int64_t r = 1; r < B; ++r) {
    const double *pr = p + r * V, *qr = q + r * q_stride;
    if (!(std::equal(pr, pr + V, pr - V) && std::equal(qr, qr + q_stride, qr - q_stride))) starts.push_back(r);
  }
  if (B > 0) starts.push_back(B);
  return starts;
}

}  // namespace multidraft
