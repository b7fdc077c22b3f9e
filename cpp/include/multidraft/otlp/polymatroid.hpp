// Outer row targets p_i for i.i.d. drafts by the polymatroid greedy formula ([GR] Theorem 6.2 with
// Lemma 6.3, Appendix H), O(V) after the ratio sort: ordered by increasing q/p, Lemma 6.3's
// candidate supersets of H_i are H_1 .. H_i, so m_i = min_{j <= i} psi(H_j) is a cumulative minimum
// (the O(V log V) total of [GR] Section 6.1, spelled out). Feeding the outer network row capacities
// p_i makes every outer row saturate exactly at p_i (Theorem 6.1), so the rejection residual p(i) -
// p_i is known before any flow.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "multidraft/otlp/subset_selection.hpp"

namespace multidraft {

// order: tokens with q > 0 by decreasing q/p, their masses p_order[k] = p(order[k]) and
// q_order[k] = q(order[k]) (count of them); its first h tokens are H* (H: the subset scan's
// prefix, with P(H*) and Q(H*)). Returns p_i for the outer tokens with q > 0, aligned with
// order[h], order[h + 1], ... Tokens with q = 0 come first
// in the increasing-ratio order and get p_i = 0: removing one from H_j only lowers psi by p(v),
// so the cumulative minimum moves with psi and p(v) + m_{i+1} - m_i = 0. The pass therefore
// starts at H* ∪ (outer support), O(k) not O(V).
inline std::vector<double> outer_row_targets(const double* p_order, const double* q_order, int count, int n,
                                             const IidPrefix& H) {
  // v_0 .. v_{K-1}: the outer tokens with q > 0 by increasing q/p, v_j = order[count - 1 - j].
  const double PH = H.target_mass, QH = H.draft_mass;
  const int K = count - H.length;
  // psi(H_j) for H_j = H* ∪ {v_j .. v_{K-1}}; j = K is H* itself. One array, from suffix sums
  // run alongside (the same sums, in the same order, as two suffix arrays would hold).
  std::vector<double> psi(K + 1);
  psi[K] = PH - integer_power(QH, n);
  double suffix_p = 0.0, suffix_q = 0.0;
  for (int j = K - 1; j >= 0; --j) {
    suffix_p += p_order[count - 1 - j];
    suffix_q += q_order[count - 1 - j];
    psi[j] = PH + suffix_p - integer_power(QH + suffix_q, n);
  }
  std::vector<double> targets(K);  // targets[j] belongs to order[h + j] = v_{K - 1 - j}
  double minimum = psi[0];         // m_i, the cumulative minimum of psi(H_0 .. H_i)
  for (int i = 0; i < K; ++i) {  // p_{v_i} = p(v_i) + m_{i+1} - m_i, clamped against round-off
    const double p_v = p_order[count - 1 - i], next = std::min(minimum, psi[i + 1]);
    targets[K - 1 - i] = std::clamp(p_v + next - minimum, 0.0, p_v);
    minimum = next;
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
// solve: the draft support, its ratio order, H* (its first h tokens), the outer row targets p_i,
// and the rejection law rho(i) = (p(i) - p_i) / sum_j (p(j) - p_j) on V \ H* (inner rows saturate
// at p on H*). Only the law and subset.in_H are V long, the other arrays as long as the draft
// support: the rows are kept for the outer tokens with q > 0 (p_i = 0 elsewhere). Callers that need
// neither (exact Global Resolution: H* is the first h tokens of `order`, and the plan builds its
// own residual) skip both.
struct IidSplit {
  std::vector<int> support;  // the tokens with q > 0, increasing
  std::vector<int> order_positions;  // order[k] = support[order_positions[k]]
  std::vector<int> order;            // the support by decreasing q/p (decreasing_ratio_key)
  // p(order[k]) and q(order[k]): read once, in the order, for the passes over it (the subset scan,
  // the row targets, Global Resolution's truncation sets and systems)
  std::vector<double> p_order, q_order;
  int h = 0;
  double draft_mass_H = 0.0, draft_mass = 0.0;  // Q(H*), Q(support)
  SubsetSolution subset;
  std::vector<double> outer_rows;  // p_i of order[h + j] at j
  std::vector<double> law;

  // The (p, q) pairs of the draft support, in its order: a per-thread workspace (a plan per call,
  // up to a vocabulary each), resized and rewritten by every IidSplit.
  struct Masses {
    double p, q;
    static std::vector<Masses>& of_this_thread() {
      thread_local std::vector<Masses> workspace;
      return workspace;
    }
  };

  template <class Row>
  IidSplit(const Row& p, const Row& q, int V, int n, bool with_law = true) : support(draft_support(stored(q), V)) {
    // The masses are read once, in the support's order, into (p, q) pairs (Masses): the sort's keys
    // read them in order, and the ratio order gathers one pair per token where it read p and q at
    // random in two rows (docs/benchmarks/core-internals.md, "Mass pairs").
    const int count = static_cast<int>(support.size());
    // A reference: a thread_local named in a lambda is looked up at every use.
    std::vector<Masses>& masses = Masses::of_this_thread();
    masses.resize(count);
    for (int i = 0; i < count; ++i) masses[i] = {p[support[i]], q[support[i]]};
    positions_by_key(count, [&](int i) { return decreasing_ratio_key(masses[i].p, masses[i].q); }, order_positions);
    order.resize(count);
    p_order.resize(count);
    q_order.resize(count);
    const int* __restrict position = order_positions.data();
    const int* __restrict token = support.data();
    const Masses* __restrict mass = masses.data();
    int* __restrict ordered_token = order.data();
    double *__restrict ordered_p = p_order.data(), *__restrict ordered_q = q_order.data();
    for (int k = 0; k < count; ++k) {
      const int i = position[k];
      ordered_token[k] = token[i];
      ordered_p[k] = mass[i].p;
      ordered_q[k] = mass[i].q;
    }
    IidPrefix H;
    const double best = iid_minimal_prefix(
        count, n, [&](int m) { return p_order[m]; }, [&](int m) { return q_order[m]; }, H);
    subset.alpha = std::clamp(1.0 + best, 0.0, 1.0);
    h = H.length;
    draft_mass_H = H.draft_mass;
    draft_mass = H.total_draft_mass;
    outer_rows = outer_row_targets(p_order.data(), q_order.data(), count, n, H);
    if (!with_law) return;
    subset.in_H.assign(V, 0);
    for (int k = 0; k < h; ++k) subset.in_H[order[k]] = 1;
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
