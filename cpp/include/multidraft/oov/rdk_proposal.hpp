// RDK proposals of [OOV]: the full redistribution p' = M^T q' (Algorithm 1) with its exact
// two-stage sampler, and the first-order linear-time form of Eq. (3).
#pragma once
#include <algorithm>
#include <cstdint>

#include "multidraft/core/rng.hpp"

namespace multidraft {

// A read-only CSR view of a row-stochastic V x V matrix M (validated by the caller).
struct CsrView {
  std::int64_t V;
  const std::int64_t* indptr;
  const std::int32_t* indices;
  const double* values;
};

// Algorithm 1 step 2, p' = M^T q' as Algorithm 1 writes it (the proof of Theorem 5.3 writes M q',
// the same for its symmetric M): p'_j = sum_i q'_i M_ij. Only rows with
// q'_i > 0 are visited, so the cost is O(V + nnz of those rows).
inline void rdk_proposal(const CsrView& M, const double* q_prime, double* out) {
  std::fill(out, out + M.V, 0.0);
  for (std::int64_t i = 0; i < M.V; ++i) {
    const double w = q_prime[i];
    if (w <= 0.0) continue;
    for (std::int64_t e = M.indptr[i]; e < M.indptr[i + 1]; ++e) out[M.indices[e]] += w * M.values[e];
  }
}

// Two-stage sampling (of [OOV] Algorithm 1's p' = M^T q'): i ~ q', then j ~ M[i, :]. The marginal
// law of j is exactly p' = M^T q'; verification must use that marginal p'(j), never M_ij or q'(i).
inline std::int64_t rdk_sample(const CsrView& M, const double* q_prime, Rng& rng) {
  const std::int64_t i = sample_index(q_prime, static_cast<int>(M.V), rng);
  const std::int64_t begin = M.indptr[i];
  const int offset = sample_index(M.values + begin, static_cast<int>(M.indptr[i + 1] - begin), rng);
  return M.indices[begin + offset];
}

// [OOV] Eq. (3), verbatim: theta = pi^T q', ptilde_t = (N q'_t + theta pi_t) / (N + pi_t),
// p_Taylor = ptilde / sum(ptilde). `prior` plays the role of the paper's p (a context-free prior:
// the live target is known only after the verifying forward pass) and n_eff the role of N
// (= |T| in the paper). O(V), no matrix.
// ||p_Taylor - q'||_1 <= 2 / n_eff (ours: |ptilde_t - q'_t| = pi_t |theta - q'_t| / (N + pi_t)
// <= pi_t / N), so at n_eff = |T| it barely differs from TLI.
inline void taylor_proposal(const double* q_prime, const double* prior, std::int64_t V, double n_eff, double* out) {
  double theta = 0.0;
  for (std::int64_t t = 0; t < V; ++t) theta += prior[t] * q_prime[t];
  double total = 0.0;
  for (std::int64_t t = 0; t < V; ++t) {
    out[t] = (n_eff * q_prime[t] + theta * prior[t]) / (n_eff + prior[t]);
    total += out[t];
  }
  for (std::int64_t t = 0; t < V; ++t) out[t] /= total;
}

}  // namespace multidraft
