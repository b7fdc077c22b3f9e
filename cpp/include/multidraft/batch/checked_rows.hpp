// Probability rows as users pass them (float32 or float64, any strides) made the core's BatchRows
// in one checked read per row: a float64 row of unit stride is read in place with its scale, any
// other row is normalised into a buffer of the call (distribution.hpp: the law is x / sum(x) in
// float64 either way, entry by entry the same numbers). A refused row (not finite, negative, or a
// sum beyond the tolerance) or a draft out of range makes the call return false, for the caller
// to say what is wrong; nothing is computed then.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

#include "multidraft/batch/batch_rows.hpp"
#include "multidraft/batch/parallel_rows.hpp"
#include "multidraft/core/distribution.hpp"

namespace multidraft {

// A (B, V) array of the caller's, strides in elements: float32 when `single`, else float64.
struct UserRows {
  const void* data = nullptr;
  bool single = false;
  std::int64_t B = 0, V = 0, row_stride = 0, stride = 1;
  double tolerance = 0.0;  // how far from 1 a row may sum (python/multidraft/_validation.py)

  bool in_place() const { return !single && stride == 1; }
};

// The rows a plan reads: BatchRows over the caller's memory or over `buffer`, with their scales.
class CheckedRows {
 public:
  // Checks p and q (same B and V) and prepares them; `scaled`: whether the plans read float64
  // rows in place with their scales (transport, verify), else every row is a normalised copy.
  bool check(const UserRows& p, const UserRows& q, bool scaled) {
    if (p.B != q.B || p.V != q.V) return false;
    const std::int64_t B = p.B, V = p.V;
    const bool p_copied = !(scaled && p.in_place() && p.row_stride == V);
    const bool q_copied = !(scaled && q.in_place() && q.row_stride == V);
    buffer_.reset(p_copied || q_copied ? new double[(p_copied + q_copied) * B * V] : nullptr);  // no zeroing pass
    scales_.reset(new double[2 * B]);
    double* p_rows = p_copied ? buffer_.get() : nullptr;
    double* q_rows = q_copied ? buffer_.get() + (p_copied ? B * V : 0) : nullptr;
    std::atomic<bool> valid{true};
    parallel_rows(B, light_rows(2 * V), [&](std::int64_t r) {
      const bool ok = prepare_row(p, r, p_rows, scales_[r]) && prepare_row(q, r, q_rows, scales_[B + r]);
      if (!ok) valid.store(false, std::memory_order_relaxed);
    });
    rows_.B = B, rows_.V = V, rows_.q_stride = V;
    rows_.p = p_copied ? p_rows : static_cast<const double*>(p.data);
    rows_.q = q_copied ? q_rows : static_cast<const double*>(q.data);
    rows_.p_scale = scales_.get(), rows_.q_scale = scales_.get() + B;
    return valid.load();
  }

  const BatchRows& rows() const { return rows_; }

 private:
  // Row r checked; written normalised into out + r V (scale 1) unless read in place (out null).
  static bool prepare_row(const UserRows& x, std::int64_t r, double* out, double& scale) {
    scale = 1.0;
    if (x.single) {
      const float* data = static_cast<const float*>(x.data) + r * x.row_stride;
      return normalise_row(StridedRow<float>{data, x.V, x.stride}, x.tolerance, out + r * x.V);
    }
    const StridedRow<double> row{static_cast<const double*>(x.data) + r * x.row_stride, x.V, x.stride};
    return out == nullptr ? row_scale(row, x.tolerance, scale) : normalise_row(row, x.tolerance, out + r * x.V);
  }

  std::unique_ptr<double[]> buffer_, scales_;
  BatchRows rows_;
};

// Whether every draft id (size entries) lies in [0, V).
inline bool drafts_in_range(const std::int64_t* drafts, std::int64_t size, std::int64_t V) {
  bool inside = true;
  for (std::int64_t i = 0; i < size; ++i) inside &= drafts[i] >= 0 && drafts[i] < V;
  return inside;
}

}  // namespace multidraft
