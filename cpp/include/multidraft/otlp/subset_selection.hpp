// Subset selection ([GR] Theorem 3.1, Eq. 4): alpha* = 1 + min_H psi(H),
// psi(H) = P(H) - p_draft(H^n). Returns the smallest minimiser H*.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <lemon/preflow.h>
#include <lemon/smart_graph.h>
#include <lemon/tolerance.h>

#include "multidraft/detail/compensated_sum.hpp"
#include "multidraft/core/distribution.hpp"
#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/otlp/min_cut.hpp"
#include "multidraft/otlp/network_builders.hpp"
#include "multidraft/detail/radix_sort.hpp"
#include "multidraft/otlp/relaxed_network.hpp"

namespace multidraft {

struct SubsetSolution {
  double alpha = 1.0;
  std::vector<char> in_H;  // length V
};

// x^n for a small n >= 0 by repeated squaring: the scans below take one per draft-support token,
// and std::pow costs several times more (within an ulp or two of it).
inline double integer_power(double x, int n) {
  double result = 1.0;
  for (; n > 0; n >>= 1, x *= x)
    if (n & 1) result *= x;
  return result;
}

// The radix key (radix_sort.hpp) of a token's place in the decreasing-q/p order, p = 0 as +inf.
inline std::uint64_t decreasing_ratio_key(double p, double q) {
  return decreasing_key(p > 0.0 ? q / p : std::numeric_limits<double>::infinity());
}

// The draft support (draft_support: the tokens with q > 0, increasing) sorted by decreasing q/p
// (p = 0 counts as +inf), ties by token id, as positions in `support`. The
// ratios are keys of a radix sort (radix_sort.hpp): division rounds monotonically, so the order
// never inverts two ratios, it can only tie ratios within an ulp (which then go by token id).
template <class Row>
std::vector<int> decreasing_ratio_positions(const Row& p, const Row& q, const std::vector<int>& support) {
  return positions_by_key(static_cast<int>(support.size()), [&](int i) {
    const int t = support[i];
    return decreasing_ratio_key(p[t], q[t]);
  });
}

// The same order as tokens.
template <class Row>
std::vector<int> decreasing_ratio_order(const Row& p, const Row& q, const std::vector<int>& support) {
  std::vector<int> order = decreasing_ratio_positions(p, q, support);
  for (int& i : order) i = support[i];
  return order;
}

// i.i.d. drafts ([GR] Section 5.1, after Hu et al.): some minimiser is a prefix of the
// decreasing-q/p order; the shortest prefix attaining the minimum (ties within 1e-15 resolved
// toward it) is H*. For n >= 2 minimisers never split a group of equal ratios, so the tie order is
// irrelevant (ours: docs/design/certified-bounds.md, "Subset selection round-off").
// The prefix H* the scan found: its length h, its target and draft masses, and the draft mass of
// the whole order (the scan's compensated sums, for the passes that follow).
struct IidPrefix {
  int length = 0;
  double target_mass = 0.0, draft_mass = 0.0;  // P(H*), Q(H*)
  double total_draft_mass = 0.0;               // Q of every token in the order
};

// The scan over the masses in the order: p_at(m), q_at(m) of its m-th token (the polymatroid
// pass reads them from arrays in that order). Returns min psi (0 when snapped to the empty set).
template <class TargetMass, class DraftMass>
double iid_minimal_prefix(int count, int n, TargetMass p_at, DraftMass q_at, IidPrefix& prefix) {
  CompensatedSum P, Q;
  double best = 0.0, best_P = 0.0, best_Q = 0.0;
  int best_length = 0;
  auto scan = [&](auto degree) {  // degree: n as a compile-time constant (the power unrolled), or 0
    constexpr int kDegree = decltype(degree)::value;
    for (int m = 0; m < count; ++m) {
      P.add(p_at(m));
      Q.add(q_at(m));
      const double psi = P.value() - integer_power(Q.value(), kDegree > 0 ? kDegree : n);
      if (psi < best - 1e-15) {
        best = psi;
        best_length = m + 1;
        best_P = P.value();
        best_Q = Q.value();
      }
    }
  };
  switch (n) {
    case 2: scan(std::integral_constant<int, 2>{}); break;
    case 3: scan(std::integral_constant<int, 3>{}); break;
    case 4: scan(std::integral_constant<int, 4>{}); break;
    default: scan(std::integral_constant<int, 0>{});
  }
  // Snap: H* = empty set and alpha* = 1, error at most 1e-13 (docs/design/certified-bounds.md,
  // "Subset selection round-off").
  if (-best < 1e-13) {
    best = best_P = best_Q = 0.0;
    best_length = 0;
  }
  prefix = {best_length, best_P, best_Q, Q.value()};
  return best;
}

template <class Row>
SubsetSolution iid_optimal_subset(const Row& p, const Row& q, int V, int n, const std::vector<int>& order) {
  IidPrefix H;
  const double best = iid_minimal_prefix(
      static_cast<int>(order.size()), n, [&](int m) { return p[order[m]]; }, [&](int m) { return q[order[m]]; }, H);
  SubsetSolution solution;
  solution.alpha = std::clamp(1.0 + best, 0.0, 1.0);
  solution.in_H.assign(V, 0);
  for (int m = 0; m < H.length; ++m) solution.in_H[order[m]] = 1;
  return solution;
}

// psi(H) evaluated exactly for a draft scheme: P(H) minus the draft mass of H^n.
inline double psi(const double* p, const DraftScheme& scheme, const std::vector<char>& in_H) {
  std::vector<int> H;
  double P = 0.0;
  for (int i = 0; i < scheme.vocabulary_size(); ++i)
    if (in_H[i]) {
      H.push_back(i);
      P += p[i];
    }
  if (scheme.kind() == SchemeKind::independent) {
    double mass = 1.0;
    for (int j = 0; j < scheme.n(); ++j) {
      double Qj = 0.0;
      for (int i : H) Qj += scheme.row(j)[i];
      mass *= Qj;
    }
    return P - mass;
  }
  double mass = 0.0;
  for_each_small_subset(H, scheme.n(), [&](const int* U, int size) { mass += scheme.set_mass(U, size); });
  return P - mass;
}

// The i.i.d. scan's snap (docs/design/certified-bounds.md, "Subset selection round-off") for
// cut-based minimisers: when psi(H) is within 1e-13 of psi(empty set) = 0, round-off decided
// between tied minimisers, and the smallest one is empty.
inline SubsetSolution snapped(const double* p, const DraftScheme& scheme, std::vector<char> in_H) {
  SubsetSolution solution;
  const double value = psi(p, scheme, in_H);
  if (-value < 1e-13) std::fill(in_H.begin(), in_H.end(), 0);
  solution.in_H = std::move(in_H);
  solution.alpha = -value < 1e-13 ? 1.0 : std::clamp(1.0 + value, 0.0, 1.0);
  return solution;
}

// Two independent drafts of different models ([GR] Appendix D, with the sign of Eq. 34 corrected to
// minus, since psi = P - Q1 Q2): psi(H) = P(H) - Q1(H) Q2(H) as an s-t cut. Token i on the source
// side <=> i in H. Pair arcs i <-> j carry w_ij / 2 each, w_ij = q1(i) q2(j) + q1(j) q2(i); unary
// a_i = p(i) - q1(i) q2(i) - sum_{j != i} w_ij / 2 becomes i -> t (a_i > 0) or s -> i. cut(H) =
// psi(H) - sum_i min(a_i, 0); H* = the tokens reachable from s in the residual graph.
inline SubsetSolution pairwise_optimal_subset(const double* p, const DraftScheme& scheme) {
  const int V = scheme.vocabulary_size();
  const double *q1 = scheme.row(0), *q2 = scheme.row(1);
  const std::vector<int> tokens = scheme.support();
  const int m = static_cast<int>(tokens.size());
  check_network_size(m, 0.0, static_cast<double>(m) * (m - 1), "the pairwise min-cut network (Appendix D)");

  using Graph = lemon::SmartDigraph;
  Graph graph;
  graph.reserveNode(m + 2);
  graph.reserveArc(m * (m - 1) + m);
  const Graph::Node source = graph.addNode(), sink = graph.addNode();
  std::vector<Graph::Node> node(m);
  for (int a = 0; a < m; ++a) node[a] = graph.addNode();
  Graph::ArcMap<double> capacity(graph);
  double Q1 = 0.0, Q2 = 0.0;
  for (int t : tokens) {
    Q1 += q1[t];
    Q2 += q2[t];
  }
  for (int a = 0; a < m; ++a) {
    const int i = tokens[a];
    for (int b = a + 1; b < m; ++b) {
      const int j = tokens[b];
      const double half = 0.5 * (q1[i] * q2[j] + q1[j] * q2[i]);
      if (half <= 0.0) continue;
      capacity[graph.addArc(node[a], node[b])] = half;
      capacity[graph.addArc(node[b], node[a])] = half;
    }
    // sum_{j != i} w_ij / 2 = (q1(i) (Q2 - q2(i)) + q2(i) (Q1 - q1(i))) / 2
    const double unary = p[i] - q1[i] * q2[i] - 0.5 * (q1[i] * (Q2 - q2[i]) + q2[i] * (Q1 - q1[i]));
    if (unary > 0.0) capacity[graph.addArc(node[a], sink)] = unary;
    if (unary < 0.0) capacity[graph.addArc(source, node[a])] = -unary;
  }
  lemon::Preflow<Graph, Graph::ArcMap<double>> preflow(graph, capacity, source, sink);
  preflow.tolerance(lemon::Tolerance<double>(kFlowTolerance));
  preflow.run();

  const std::vector<char> reached = cut_side(graph, capacity, preflow, source, CutSide::source, kCutTolerance);
  std::vector<char> in_H(V, 0);
  for (int a = 0; a < m; ++a) in_H[tokens[a]] = reached[graph.id(node[a])];
  return snapped(p, scheme, std::move(in_H));
}

// Any scheme: the minimum cut of the set-compressed relaxed network ([GR] Eq. 35-36).
inline SubsetSolution network_optimal_subset(const double* p, const DraftScheme& scheme) {
  NodeIndex index;
  const RightNodes nodes = set_nodes(scheme, index);
  const RelaxedFlow flow = max_relaxed_flow(p, scheme.vocabulary_size(), nodes);
  return snapped(p, scheme, flow.reaches_sink);
}

inline SubsetSolution optimal_subset(const double* p, const DraftScheme& scheme) {
  const int V = scheme.vocabulary_size();
  if (scheme.kind() == SchemeKind::iid) {
    const double* q = scheme.row(0);
    return iid_optimal_subset(p, q, V, scheme.n(), decreasing_ratio_order(p, q, draft_support(q, V)));
  }
  if (scheme.kind() == SchemeKind::independent && scheme.n() == 2) return pairwise_optimal_subset(p, scheme);
  return network_optimal_subset(p, scheme);
}

}  // namespace multidraft
