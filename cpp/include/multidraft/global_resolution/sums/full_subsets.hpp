// The full-size terms (|U| = n) of the grouped Global Resolution objectives ([GR] Eqs. 12 and
// 15, grouped as in Appendix K), kept implicit: every n-subset of T, weight n! prod_{u in U} q_u,
// enumerated by every pass instead of stored (docs/design/summation.md, "Full-size terms").
// All passes use x_u = e^{a_u} unshifted; callers keep |a| <= 600 (ConvexObjective materialises
// the terms otherwise).
#pragma once
#include <cstdint>
#include <vector>

#include "multidraft/detail/sum_kernels.hpp"  // four_reciprocals, the leaf loops

namespace multidraft {

// Largest term (number of drafts n) the objectives handle; bounded so prefixes live on the stack.
constexpr int kMaxTermSize = 16;

// Every `size`-subset of variables 0..m-1, term U weighted by size! * prod_{u in U} mass[u].
struct FullSubsetTerms {
  int size = 0;  // 0: no implicit terms
  std::vector<double> mass;
  double scale = 1.0;  // size!

  void assign(const std::vector<double>& member_mass, int n) {
    size = n;
    mass = member_mass;
    scale = 1.0;
    for (int d = 2; d <= n; ++d) scale *= d;
  }
  int variables() const { return static_cast<int>(mass.size()); }
  bool empty() const { return size == 0 || variables() < size; }
  double count() const {
    double binomial = 1.0;
    for (int j = 1; j <= size; ++j) binomial = binomial * static_cast<double>(variables() - size + j) / j;
    return empty() ? 0.0 : binomial;
  }
};

// The prefix of the current subset: its members, sum of x and weight, and (for Hessian-vector
// products) sum of x * v.
struct SubsetPrefix {
  int depth = 0;
  int members[kMaxTermSize];
  double power = 0.0;    // sum_{u in prefix} x_u
  double weight = 1.0;   // scale * prod_{u in prefix} mass_u
  double weighted = 0.0; // sum_{u in prefix} x_u v_u
};

// n = 2 passes: kLeafBlock sibling prefixes (first members k .. k + 3) share one pass over their
// common leaves l >= k + 4 (see visit_full_subsets).
constexpr int kLeafBlock = 4;
// The shared pass takes the four reciprocals by one division (four_reciprocals), which needs the
// product of four denominators in range: every |a| <= this keeps it within [1e-261, 1e262].
constexpr double kFourReciprocalsLimit = 150.0;

template <class Policy>
SubsetPrefix extended(const SubsetPrefix& prefix, int k, const FullSubsetTerms& terms, const Policy& policy) {
  SubsetPrefix child = prefix;
  child.members[child.depth++] = k;
  child.power = prefix.power + policy.x[k];
  child.weight = prefix.weight * terms.mass[k];
  child.weighted = prefix.weighted + policy.x[k] * policy.v_at(k);
  return child;
}

// Depth-first enumeration of the n-subsets: `policy.leaves(prefix, begin, end)` handles every
// subset prefix ∪ {l}, l in [begin, end), and returns the sums of that range; after a prefix
// member k's subtree is done, `policy.member(prefix, k, sums)` (prefix excluding k) pushes the
// subtree's sums to k. Returns the sums of the whole subtree.
// For n = 2 with `policy.blocked()`, siblings k .. k + 3 first take their small triangle
// l < k + 4 by `leaves`, then `policy.leaf_block(siblings, k + 4, m, sums)` makes one pass over
// the rest for all four: each leaf's data is loaded and stored once, not four times, and one
// division serves four terms. For n >= 3 the leaf ranges are short and the triangles cost more
// than that saves (docs/benchmarks/summation-internals.md, "Sibling blocks of full-size terms").
template <class Policy>
typename Policy::Sums visit_full_subsets(const FullSubsetTerms& terms, Policy& policy, const SubsetPrefix& prefix,
                                         int start) {
  const int m = terms.variables();
  if (prefix.depth + 1 == terms.size) return policy.leaves(prefix, start, m);
  typename Policy::Sums total{};
  const int last_start = m - (terms.size - prefix.depth) + 1;  // room for the remaining members
  int k = start;
  if (terms.size == 2 && policy.blocked())
    for (; k + kLeafBlock <= last_start; k += kLeafBlock) {
      SubsetPrefix siblings[kLeafBlock];
      typename Policy::Sums sums[kLeafBlock];
      for (int b = 0; b < kLeafBlock; ++b) {
        siblings[b] = extended(prefix, k + b, terms, policy);
        sums[b] = policy.leaves(siblings[b], k + b + 1, k + kLeafBlock);
      }
      policy.leaf_block(siblings, k + kLeafBlock, m, sums);
      for (int b = 0; b < kLeafBlock; ++b) {
        policy.member(prefix, k + b, sums[b]);
        total += sums[b];
      }
    }
  for (; k < last_start; ++k) {
    const typename Policy::Sums sums = visit_full_subsets(terms, policy, extended(prefix, k, terms, policy), k + 1);
    policy.member(prefix, k, sums);
    total += sums;
  }
  return total;
}

template <class Policy>
void for_each_full_subset(const FullSubsetTerms& terms, Policy& policy) {
  if (terms.empty()) return;
  SubsetPrefix root;
  root.weight = terms.scale;
  visit_full_subsets(terms, policy, root, 0);
}

// Gradient, Hessian diagonal, optionally the dense Hessian's strict lower triangle (column-major
// m x m as Eigen stores it, entry (larger, smaller index); its diagonal is `diagonal`) and
// the accepted mass sum_U w_U X_U / (c + X_U), where c = 1 with the slack token and 0 without.
// With share s_u = x_u / (c + X_U) and r_U = w_U / (c + X_U): gradient_u += x_u r_U,
// Hessian_uu += w s_u (1 - s_u) = x_u r_U - x_u^2 r_U / total, Hessian_uv -= x_u x_v r_U / total.
struct FullSubsetGradient {
  struct Sums {
    double r = 0.0, r_over_total = 0.0;
    Sums& operator+=(const Sums& other) {
      r += other.r;
      r_over_total += other.r_over_total;
      return *this;
    }
  };
  const double* x;
  const double* mass;
  double constant;  // c
  double* gradient;
  double* diagonal;
  double* hessian;   // may be null; column-major m x m
  int m;
  double accepted = 0.0;
  double* scratch = nullptr;  // m entries when `hessian` is set: r / total per leaf, for the Hessian rows

  double v_at(int) const { return 0.0; }
  bool four_reciprocals_allowed = false;  // every |a| <= kFourReciprocalsLimit
  // The dense Hessian's rows are fused into the per-prefix leaf loop instead.
  bool blocked() const { return hessian == nullptr && four_reciprocals_allowed; }

  // The leaves shared by the 4 siblings (see visit_full_subsets); adds to their sums. Written
  // out for 4: GCC does not vectorise array reductions well.
  void leaf_block(const SubsetPrefix* siblings, int begin, int end, Sums* sums) {
    static_assert(kLeafBlock == 4, "leaf_block is written out for 4 siblings");
    const double c0 = constant + siblings[0].power, c1 = constant + siblings[1].power,
                 c2 = constant + siblings[2].power, c3 = constant + siblings[3].power;
    const double w0 = siblings[0].weight, w1 = siblings[1].weight, w2 = siblings[2].weight, w3 = siblings[3].weight;
    double r[4], t[4], rx;
    full_subset_gradient_leaf_block(x, mass, gradient, diagonal, c0, c1, c2, c3, w0, w1, w2, w3, begin, end, r, t, rx);
    const double r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3], t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3];
    // accepted: sum of r (X + x_l) = sum_b X_b sum r_b + sum r x_l
    accepted += rx + siblings[0].power * r0 + siblings[1].power * r1 + siblings[2].power * r2 + siblings[3].power * r3;
    sums[0] += Sums{r0, t0};
    sums[1] += Sums{r1, t1};
    sums[2] += Sums{r2, t2};
    sums[3] += Sums{r3, t3};
  }

  Sums leaves(const SubsetPrefix& prefix, int begin, int end) {
    if (!hessian) return leaf_range<0>(prefix, begin, end);
    switch (prefix.depth) {  // n <= 4: the prefix's Hessian rows are updated in the leaf loop itself
      case 0: return leaf_range<0>(prefix, begin, end);
      case 1: return leaf_range<1>(prefix, begin, end);
      case 2: return leaf_range<2>(prefix, begin, end);
      case 3: return leaf_range<3>(prefix, begin, end);
    }
    const Sums sums = leaf_range<kStoreShares>(prefix, begin, end);
    for (int e = 0; e < prefix.depth; ++e) {
      const int u = prefix.members[e];
      subtract_hessian_row(hessian + static_cast<std::int64_t>(u) * m, x, scratch, x[u], begin, end);
    }
    return sums;
  }

  // The leaf loop (full_subset_gradient_leaves: the arrays as restrict parameters; read through
  // the members, every store could alias them and the loop would gather and scatter). kRows > 0:
  // also subtract x_u x_l r / total from the dense Hessian rows of the kRows prefix members;
  // kStoreShares: store r / total in `scratch` for the caller to do so. The dense Hessian's
  // diagonal is not written here: it equals `diagonal` (ConvexObjective::evaluate).
  static constexpr int kStoreShares = -1;
  template <int kRows>
  Sums leaf_range(const SubsetPrefix& prefix, int begin, int end) {
    constexpr int kFused = kRows > 0 ? kRows : 1;
    double* rows[kFused];
    double row_x[kFused];
    for (int e = 0; e < kRows; ++e) {
      rows[e] = hessian + static_cast<std::int64_t>(prefix.members[e]) * m;
      row_x[e] = x[prefix.members[e]];
    }
    double r_sum, rt_sum, accepted_sum;
    full_subset_gradient_leaves<kRows>(x, mass, gradient, diagonal, scratch, rows, row_x, prefix.power, prefix.weight,
                                       constant, begin, end, r_sum, rt_sum, accepted_sum);
    accepted += accepted_sum;
    return {r_sum, rt_sum};
  }

  void member(const SubsetPrefix& prefix, int k, const Sums& sums) {
    const double xk = x[k];
    gradient[k] += xk * sums.r;
    const double curvature = xk * sums.r - xk * xk * sums.r_over_total;
    diagonal[k] += curvature;
    if (!hessian) return;
    for (int e = 0; e < prefix.depth; ++e) {
      const int u = prefix.members[e];
      hessian[static_cast<std::int64_t>(u) * m + k] -= x[u] * xk * sums.r_over_total;
    }
  }
};

// Hessian-vector product (each term adds w (s ∘ v - s (s · v)), the Hessian of one term of
// [GR] Eqs. 12 and 15: docs/design/summation.md, "Term derivatives"): with
// dot_U = sum_{u in U} x_u v_u / (c + X_U), out_u += x_u r_U (v_u - dot_U).
struct FullSubsetHessianTimes {
  struct Sums {
    double r = 0.0, r_dot = 0.0;
    Sums& operator+=(const Sums& other) {
      r += other.r;
      r_dot += other.r_dot;
      return *this;
    }
  };
  const double* x;
  const double* mass;
  double constant;
  const double* v;
  double* out;

  double v_at(int k) const { return v[k]; }
  bool four_reciprocals_allowed = false;
  bool blocked() const { return four_reciprocals_allowed; }

  // The leaves shared by the 4 siblings (see visit_full_subsets); adds to their sums.
  void leaf_block(const SubsetPrefix* siblings, int begin, int end, Sums* sums) {
    static_assert(kLeafBlock == 4, "leaf_block is written out for 4 siblings");
    const double c0 = constant + siblings[0].power, c1 = constant + siblings[1].power,
                 c2 = constant + siblings[2].power, c3 = constant + siblings[3].power;
    const double w0 = siblings[0].weight, w1 = siblings[1].weight, w2 = siblings[2].weight, w3 = siblings[3].weight;
    const double y0 = siblings[0].weighted, y1 = siblings[1].weighted, y2 = siblings[2].weighted,
                 y3 = siblings[3].weighted;
    double r[4], d[4];
    full_subset_hessian_leaf_block(x, mass, v, out, c0, c1, c2, c3, w0, w1, w2, w3, y0, y1, y2, y3, begin, end, r, d);
    const double r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3], d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
    sums[0] += Sums{r0, d0};
    sums[1] += Sums{r1, d1};
    sums[2] += Sums{r2, d2};
    sums[3] += Sums{r3, d3};
  }

  Sums leaves(const SubsetPrefix& prefix, int begin, int end) {
    double r_sum, r_dot_sum;
    full_subset_hessian_leaves(x, mass, v, out, prefix.power, prefix.weighted, prefix.weight, constant, begin, end,
                               r_sum, r_dot_sum);
    return {r_sum, r_dot_sum};
  }

  void member(const SubsetPrefix&, int k, const Sums& sums) { out[k] += x[k] * (v[k] * sums.r - sums.r_dot); }
};

// Calls append(members, size, weight) for every implicit term, in the order of the passes (used
// to store them explicitly when the passes cannot run unshifted).
template <class AppendTerm>
void enumerate_full_subsets(const FullSubsetTerms& terms, AppendTerm&& append) {
  if (terms.empty()) return;
  int members[kMaxTermSize];
  auto recurse = [&](auto&& self, int depth, int start, double weight) -> void {
    for (int k = start; k <= terms.variables() - (terms.size - depth); ++k) {
      members[depth] = k;
      if (depth + 1 == terms.size) append(members, terms.size, weight * terms.mass[k]);
      else self(self, depth + 1, k + 1, weight * terms.mass[k]);
    }
  };
  recurse(recurse, 0, 0, terms.scale);
}

}  // namespace multidraft
