// Outer row targets p_i for i.i.d. drafts by the polymatroid greedy formula
// ([GR] Theorem 6.2 with Lemma 6.3; the cumulative-minimum pass of spec §2.5), O(V) after
// the ratio sort. Feeding the outer network row capacities p_i makes every outer row saturate
// exactly at p_i (Theorem 6.1), so the rejection residual p(i) - p_i is known before any flow.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "multidraft/subset_selection.hpp"

namespace multidraft {

// order: tokens with q > 0 by decreasing q/p; its first h tokens are H* (H: the subset scan's
// prefix, with P(H*) and Q(H*)). Returns p_i for the outer tokens with q > 0, aligned with
// order[h], order[h + 1], ... Tokens with q = 0 come first
// in the increasing-ratio order and get p_i = 0: removing one from H_j only lowers psi by p(v),
// so the cumulative minimum moves with psi and p(v) + m_{i+1} - m_i = 0. The pass therefore
// starts at H* ∪ (outer support), O(k) not O(V).
template <class Row>
std::vector<double> outer_row_targets(const Row& p, const Row& q, int n, const std::vector<int>& order,
                                      const IidPrefix& H) {
  // v_0 .. v_{K-1}: the outer tokens with q > 0 by increasing q/p.
  const std::vector<int> outer(order.rbegin(), order.rend() - H.length);
  const double PH = H.target_mass, QH = H.draft_mass;
  const int K = static_cast<int>(outer.size());
  // psi(H_j) for H_j = H* ∪ {v_j .. v_{K-1}}; j = K is H* itself.
  std::vector<double> suffix_p(K + 1, 0.0), suffix_q(K + 1, 0.0), cumulative_min(K + 1);
  for (int j = K - 1; j >= 0; --j) {
    suffix_p[j] = suffix_p[j + 1] + p[outer[j]];
    suffix_q[j] = suffix_q[j + 1] + q[outer[j]];
  }
  for (int j = 0; j <= K; ++j) {
    const double psi_Hj = PH + suffix_p[j] - integer_power(QH + suffix_q[j], n);
    cumulative_min[j] = j == 0 ? psi_Hj : std::min(cumulative_min[j - 1], psi_Hj);
  }
  std::vector<double> targets(K);  // targets[j] belongs to order[h + j] = outer[K - 1 - j]
  for (int i = 0; i < K; ++i) {  // p_{v_i} = p(v_i) + m_{i+1} - m_i, clamped against round-off
    const int v = outer[i];
    targets[K - 1 - i] = std::clamp(p[v] + cumulative_min[i + 1] - cumulative_min[i], 0.0, p[v]);
  }
  return targets;
}

// Normalised rejection law (p - rows)^+ / sum.
inline std::vector<double> residual_law(const double* p, const double* rows, int V) {
  std::vector<double> residual(V);
#pragma omp simd
  for (int i = 0; i < V; ++i) residual[i] = std::max(p[i] - rows[i], 0.0);
  return normalised_law(std::move(residual));
}

// Everything the complementary-slackness split of i.i.d. drafts knows before any flow or convex
// solve: the draft support, its ratio order, H* (its first h tokens), the outer row targets p_i, and the rejection
// law rho(i) = (p(i) - p_i) / sum_j (p(j) - p_j) on V \ H* (inner rows saturate at p on H*).
// Only the law and subset.in_H are V long: the rows are kept for the outer tokens with q > 0
// (p_i = 0 elsewhere). Callers that need neither (exact Global Resolution: H* is the first h
// tokens of `order`, and the plan builds its own residual) skip both.
struct IidSplit {
  std::vector<int> support;  // the tokens with q > 0, increasing
  std::vector<int> order_positions;  // order[k] = support[order_positions[k]]
  std::vector<int> order;            // the support by decreasing q/p (decreasing_ratio_positions)
  int h = 0;
  double draft_mass_H = 0.0, draft_mass = 0.0;  // Q(H*), Q(support)
  SubsetSolution subset;
  std::vector<double> outer_rows;  // p_i of order[h + j] at j
  std::vector<double> law;

  template <class Row>
  IidSplit(const Row& p, const Row& q, int V, int n, bool with_law = true)
      : support(draft_support(stored(q), V)), order_positions(decreasing_ratio_positions(p, q, support)) {
    order.resize(order_positions.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = support[order_positions[k]];
    IidPrefix H;
    subset = iid_optimal_subset(p, q, V, n, order, &H, with_law);
    h = H.length;
    draft_mass_H = H.draft_mass;
    draft_mass = H.total_draft_mass;
    outer_rows = outer_row_targets(p, q, n, order, H);
    if (!with_law) return;
    std::vector<double> residual(V);
    for (int i = 0; i < V; ++i) residual[i] = p[i];
    for (int k = 0; k < h; ++k) residual[order[k]] = 0.0;  // inner rows saturate at p on H*
    for (std::size_t j = 0; j < outer_rows.size(); ++j) {
      const int v = order[h + j];
      residual[v] = std::max(p[v] - outer_rows[j], 0.0);
    }
    law = normalised_law(std::move(residual));
  }
};

}  // namespace multidraft
