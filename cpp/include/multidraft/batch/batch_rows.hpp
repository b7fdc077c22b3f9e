// A batch of (p, q) rows as plain views of the caller's arrays, and the shell of every per-row
// computation over it: rows spread over the thread pool (parallel_rows.hpp), each computed from
// its own inputs only, so a batch gives what a loop over its rows gives, bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "multidraft/batch/parallel_rows.hpp"
#include "multidraft/registry/verifier_registry.hpp"

namespace multidraft {

// The (p, q) rows of a batched call: p (B, V) and q (B, q_stride), row-major, where q_stride is V,
// or n V for independent drafts (n rows of V per batch row). The plan calls (transport, verify)
// may take the rows unnormalised with their scales (distribution.hpp's row_scale), read in place.
struct BatchRows {
  const double* p = nullptr;
  const double* q = nullptr;
  std::int64_t B = 0, V = 0;
  std::int64_t q_stride = 0;        // doubles between consecutive batch rows of q
  const double* p_scale = nullptr;  // (B,), or null: the rows are normalised
  const double* q_scale = nullptr;  // (B,), given with p_scale
};

// The caller's int64 draft tokens as the core's ints.
inline std::vector<int> to_int(const std::int64_t* data, std::size_t size) { return std::vector<int>(data, data + size); }

// The fewest rows worth a thread: one heavy row, or enough light rows to pay for a wake-up.
inline std::int64_t min_rows(const BatchRows& b, RowWork work) {
  return work == RowWork::light ? light_rows(b.V + b.q_stride) : 1;
}

// row(r, p_row, q_row, V) for the B rows; heavy rows go one at a time to whichever thread is free.
template <class Row>
void for_each_row(const BatchRows& b, RowWork work, Row row) {
  const double *pp = b.p, *qq = b.q;
  parallel_rows(
      b.B, min_rows(b, work), [&](std::int64_t r) { row(r, pp + r * b.V, qq + r * b.q_stride, static_cast<int>(b.V)); },
      work == RowWork::heavy);
}

// One value per row: out[r] = value(p_row, q_row, V), out (B,).
template <class Value>
void values_per_row(const BatchRows& b, RowWork work, Value value, double* out) {
  for_each_row(b, work, [&](std::int64_t r, const double* pr, const double* qr, int V) { out[r] = value(pr, qr, V); });
}

}  // namespace multidraft
