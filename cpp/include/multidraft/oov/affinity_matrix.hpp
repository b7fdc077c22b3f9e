// The token-affinity matrix M of [OOV] (Section 4, Eq. (2), Assumption 4.1), stored sparse.
//
// M_ij = exp(Omega_ij / tau) / sum_k exp(Omega_ik / tau) for rows i in I and columns j in T, with
// Omega the sample covariance of the target's logit vectors across calibration contexts (the
// meaning Omega has in [OOV] Section 5, Eq. 4, z ~ N(mu, Omega); Eq. 2 leaves it open). A dense |I|
// x |T| matrix does not fit at 128k, so each row keeps its top-k entries and is renormalised,
// keeping Assumption 4.1 (ours; [OOV] calls M "highly sparse", Appendix C.3). Renormalising the
// top-k entries of a softmax row equals the softmax over those k entries alone (the full-row
// normaliser cancels), so the top-k set of Omega's row (softmax is monotone, independent of tau) is
// found once and the softmax over it is taken per tau. Rows outside I are identity rows e_i (ours:
// q' is 0 there, so they never matter, and M stays row-stochastic).
#pragma once
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include "multidraft/detail/thread_pool.hpp"

namespace multidraft {

// Compressed sparse rows: row r holds columns indices[indptr[r] .. indptr[r+1]) ascending.
struct SparseRows {
  std::int64_t cols = 0;
  std::vector<std::int64_t> indptr{0};
  std::vector<std::int32_t> indices;
  std::vector<double> values;
  std::int64_t rows() const { return static_cast<std::int64_t>(indptr.size()) - 1; }
};

// For each requested row i (rows[0..R)), the k largest entries of row i of the sample covariance
// of `samples` (K contexts x V tokens, row-major), ties broken by the smaller column id. Omega is
// computed a block of rows at a time (block x V doubles), never as a V x V matrix, the blocks
// spread over the thread pool: O(K * R * V) time, O(K * V + threads * block * V + R * k) memory.
// The k best entries of one covariance row (V entries), by column into indices / values: one scan
// with a heap whose top is the worst kept entry, O(V) comparisons plus O(log k) per replacement
// (few, for rows in random order). "Better" is the larger value, then the smaller column; the
// ascending scan never lets a later equal value in. `heap`: the caller's scratch.
using CovarianceEntry = std::pair<double, std::int32_t>;
inline void top_k_of_row(const double* row, std::int64_t V, std::int64_t k, std::vector<CovarianceEntry>& heap,
                         std::int32_t* indices, double* values) {
  using Entry = CovarianceEntry;
  const auto better = [](const Entry& a, const Entry& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  heap.clear();
  for (std::int32_t j = 0; j < static_cast<std::int32_t>(V); ++j) {
    if (static_cast<std::int64_t>(heap.size()) < k) {
      heap.emplace_back(row[j], j);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (row[j] > heap.front().first) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = Entry(row[j], j);
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), [](const Entry& a, const Entry& c) { return a.second < c.second; });
  for (std::int64_t e = 0; e < k; ++e) {
    indices[e] = heap[e].second;
    values[e] = heap[e].first;
  }
}

// [OOV] Eq. (2), Omega.
inline SparseRows covariance_top_k(const double* samples, std::int64_t K, std::int64_t V, const std::int64_t* rows,
                                   std::int64_t R, std::int64_t k) {
  if (K < 2) throw std::invalid_argument("covariance_top_k: need at least 2 calibration samples");
  if (k < 1 || k > V) throw std::invalid_argument("covariance_top_k: k out of range");
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMajor> Z(samples, K, V);
  const RowMajor centred = Z.rowwise() - Z.colwise().mean();
  const double scale = 1.0 / static_cast<double>(K - 1);

  // Every row keeps exactly k entries (k <= V), so each block writes its own slots.
  SparseRows out;
  out.cols = V;
  out.indptr.resize(static_cast<std::size_t>(R + 1));
  for (std::int64_t r = 0; r <= R; ++r) out.indptr[r] = r * k;
  out.indices.resize(static_cast<std::size_t>(R * k));
  out.values.resize(static_cast<std::size_t>(R * k));
  // ~32 MB of covariance rows per block whatever V is. The blocks depend on R and V only, so each
  // row comes from the same product, bit for bit, whatever the thread count.
  const std::int64_t block = std::max<std::int64_t>(1, std::min<std::int64_t>(R, (std::int64_t{1} << 22) / V));
  const std::int64_t blocks = (R + block - 1) / block;
  ThreadPool::global().parallel_for(blocks, [&](std::int64_t first_block, std::int64_t end_block) {
    RowMajor gathered(K, block);
    RowMajor omega(block, V);
    std::vector<CovarianceEntry> heap;
    heap.reserve(static_cast<std::size_t>(k));
    for (std::int64_t start = first_block * block; start < std::min(R, end_block * block); start += block) {
      const std::int64_t size = std::min(block, R - start);
      for (std::int64_t b = 0; b < size; ++b) gathered.col(b) = centred.col(rows[start + b]);
      omega.topRows(size).noalias() = scale * gathered.leftCols(size).transpose() * centred;
      for (std::int64_t b = 0; b < size; ++b) {
        const std::int64_t slot = (start + b) * k;
        top_k_of_row(omega.row(b).data(), V, k, heap, out.indices.data() + slot, out.values.data() + slot);
      }
    }
  });
  return out;
}

// M from Eq. (2) over the kept scores of each row in I (`scores` row r belongs to token rows[r]):
// a max-subtracted softmax of score / tau over the row's entries; every other row of the V x V
// result is e_i. tau -> 0 tends to the hard argmax with ties split evenly.
inline SparseRows affinity_softmax(const SparseRows& scores, const std::int64_t* rows, std::int64_t V, double tau) {
  if (!(tau > 0.0) || !std::isfinite(tau)) throw std::invalid_argument("affinity_softmax: tau must be positive and finite");
  std::vector<std::int64_t> row_of(static_cast<std::size_t>(V), -1);
  for (std::int64_t r = 0; r < scores.rows(); ++r) row_of[rows[r]] = r;
  SparseRows M;
  M.cols = V;
  M.indptr.reserve(static_cast<std::size_t>(V + 1));
  M.indices.reserve(scores.indices.size() + static_cast<std::size_t>(V));
  M.values.reserve(scores.indices.size() + static_cast<std::size_t>(V));
  for (std::int64_t i = 0; i < V; ++i) {
    const std::int64_t r = row_of[i];
    if (r < 0) {  // identity row outside I (see the header)
      M.indices.push_back(static_cast<std::int32_t>(i));
      M.values.push_back(1.0);
    } else {
      const std::int64_t begin = scores.indptr[r], end = scores.indptr[r + 1];
      const double top = *std::max_element(scores.values.begin() + begin, scores.values.begin() + end);
      double total = 0.0;
      const std::size_t first = M.values.size();
      for (std::int64_t e = begin; e < end; ++e) {
        const double w = std::exp((scores.values[e] - top) / tau);
        M.indices.push_back(scores.indices[e]);
        M.values.push_back(w);
        total += w;
      }
      for (std::size_t e = first; e < M.values.size(); ++e) M.values[e] /= total;  // row sums to 1
    }
    M.indptr.push_back(static_cast<std::int64_t>(M.indices.size()));
  }
  return M;
}

}  // namespace multidraft
