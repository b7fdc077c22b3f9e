// The acceptance of the exact Global Resolution plan: the probability that its output is one of
// the drafts. Not in [GR]: the derivation, the cost and the bound of the regime where it is not
// enumerated are in docs/design/output-correction.md, "Acceptance".
//
// Given a tuple w the exact plan outputs a kept candidate (a draft) with probability
// K(w) = sum_y c(y | w) kappa(y), else draws from the residual rho = (p - r)^+ / sum, which may
// land on a draft too:
//   P(out in drafts) = E[K(w)] + E[f(w) rho(set(w))],    f(w) = 1 - K(w).
// The tuples fall in four cases (plan.hpp): (a) outer truncated, (b) inner truncated, proposing
// their first draft outside T: closed form; (c) outer tuples inside T, (d) inner tuples inside
// T ∪ Z, proposing the Eq. (18) softmax: sums over the subsets U of T, enumerated (as the
// system's grouped terms, [GR] Appendix K) when there are at most kAcceptanceEnumeration of
// them; else the inner slack's part exactly (a closed form in the rows) and the rest, pairs of an
// over-proposed and a residual token, bounded (value at the middle, half the width in `error`).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "multidraft/otlp/subset_selection.hpp"  // integer_power, count_small_subsets

namespace multidraft {

// The work, subsets times (n + 1)^2, that the acceptance enumerates in one truncation set (a subset
// costs ~1.5 ns per unit: ~50 us in all, against plans built in 30 us to 30 ms); past it the
// acceptance carries a certified bound instead. GlobalResolutionOptions::acceptance_enumeration
// caps the subsets further (tests: 0).
constexpr double kAcceptanceWork = 3.0e4;
constexpr double kAcceptanceEnumeration = 1e300;

// One token of the draft support as the acceptance sees it.
struct AcceptanceToken {
  double q;      // draft mass
  double alpha;  // its solution (tokens of T)
  double row;    // the candidate law r (solver row on T, closed form elsewhere)
  double p;      // target mass
  double loss;   // 1 - kappa: the probability that the candidate is rejected
  double rho;    // the residual law at it
};

// The masses the plan's closed forms use (plan.hpp, assemble_exact_plan).
struct AcceptanceMasses {
  int n;
  double Q, Q_H, Q_Z;      // the support, H*, Z
  double outer_rest;       // Q_R: outer tokens outside T
  double inner_rest;       // Q_Ri: H* \ (T ∪ Z)
};

struct AcceptanceResult {
  double value = 0.0;
  double error = 0.0;  // |value - P(out in drafts)| <= error (0 when every part was enumerated)
  bool enumerated = true;
  double inner_row_weight = 0.0;  // bounded inner case: max rho_x e^{-alpha_x}, what a row's error weighs in it
};

class DraftAcceptance {
 public:
  // The tokens of each class: outer in T, outer outside T, inner in T, inner outside T, Z.
  enum Class { kOuterT, kOuterRest, kInnerT, kInnerRest, kZ, kClasses };

  // The tokens by class and a copy of the candidate law, per thread: a plan per call, up to a
  // vocabulary each, and fresh vectors of that size cost more in page faults than the sums.
  struct Workspace {
    std::vector<AcceptanceToken> tokens[kClasses];
    std::vector<double> law;
    static Workspace& of_this_thread() {
      thread_local Workspace workspace;
      return workspace;
    }
  };

  // `tokens`: kClasses lists (viewed); `limits`: the most subsets enumerated in the outer and the
  // inner T.
  DraftAcceptance(const AcceptanceMasses& masses, const std::vector<AcceptanceToken>* tokens, double outer_limit,
                  double inner_limit)
      : m_(masses), tokens_(tokens), limits_{outer_limit, inner_limit} {}

  AcceptanceResult compute() const {
    AcceptanceResult out;
    out.value = kept_outside_T() + first_draft_cases();
    add_subset_case(out, /*outer=*/true);
    add_subset_case(out, /*outer=*/false);
    return out;
  }

 private:
  // Cases (a) and (b) keep their candidate with probability r kappa = min(r, p), token by token.
  double kept_outside_T() const {
    double kept = 0.0;
    for (int c : {kOuterRest, kInnerRest})
      for (const AcceptanceToken& t : tokens_[c]) kept += t.row * (1.0 - t.loss);
    return kept;
  }

  // E[f rho(set(w))] over the truncated tuples: the candidate y (first draft outside T) is never in
  // R (r(y) > p(y) where it can be rejected), so x != y and the sum factors into (the rejected
  // candidate mass) times (the residual mass a draft of such a tuple carries).
  double first_draft_cases() const {
    const int n = m_.n;
    double total = 0.0;
    // (a) outer: the first k draws miss the outer rest (mass A = Q - Q_R), then y, then n-1-k free.
    double rejected = 0.0;
    for (const AcceptanceToken& t : tokens_[kOuterRest]) rejected += t.q * t.loss;
    if (rejected > 0.0) {
      const double Q = m_.Q, A = std::max(Q - m_.outer_rest, 0.0);
      double drafts = 0.0;
      for (int c = 0; c < kClasses; ++c)
        for (const AcceptanceToken& x : tokens_[c])
          if (x.rho > 0.0) drafts += x.rho * contained(A, Q, x.q, n, c != kOuterRest);
      total += rejected * drafts;
    }
    // (b) inner: every draw in H*; the first k draws in T ∪ Z (mass Q_H - Q_Ri).
    rejected = 0.0;
    for (const AcceptanceToken& t : tokens_[kInnerRest]) rejected += t.q * t.loss;
    if (rejected > 0.0) {
      const double Q = m_.Q_H, A = std::max(Q - m_.inner_rest, 0.0);
      double drafts = 0.0;
      for (int c : {kInnerT, kInnerRest, kZ})
        for (const AcceptanceToken& x : tokens_[c])
          if (x.rho > 0.0) drafts += x.rho * contained(A, Q, x.q, n, c != kInnerRest);
      total += rejected * drafts;
    }
    return total;
  }

  // sum_k [mass of the tuples whose first k draws lie in a block of mass A, the last n-1-k in one
  // of mass Q, and which contain x (of mass q)]: all such tuples, F(A, Q), less those without x,
  // F(A - q, Q - q) when x may be in the first block (`in_prefix`), else F(A, Q - q), with
  // F(a, b) = sum_k a^k b^(n-1-k). The difference is taken directly: its rounding is that of F
  // (1e-16 absolute), which rho_x <= 1 weights.
  static double contained(double A, double Q, double q, int n, bool in_prefix) {
    return homogeneous_sum(A, Q, n) -
           homogeneous_sum(in_prefix ? std::max(A - q, 0.0) : A, std::max(Q - q, 0.0), n);
  }

  // sum_{k<n} a^k b^(n-1-k), Horner's rule.
  static double homogeneous_sum(double a, double b, int n) {
    double sum = 0.0, a_power = 1.0;
    for (int k = 0; k < n; ++k) {
      sum = sum * b + a_power;
      a_power *= a;
    }
    return sum;
  }

  // Cases (c) (outer) and (d) (inner): E[K] + E[f rho(set(w))] over the tuples inside T,
  // enumerated or bounded.
  void add_subset_case(AcceptanceResult& out, bool outer) const {
    const std::vector<AcceptanceToken>& T = tokens_[outer ? kOuterT : kInnerT];
    if (T.empty()) return;
    double count, members;
    count_small_subsets(static_cast<int>(T.size()), m_.n, count, members);
    if (count <= limits_[outer ? 0 : 1]) {
      out.value += enumerate_subsets(T, outer);
      return;
    }
    double value, error;
    bound_subsets(T, outer, value, error, out.inner_row_weight);
    out.value += value;
    out.error += error;
    out.enumerated = false;
  }

  // The residual mass a tuple's draws outside T carry, by their number j: outer tuples draw them
  // from H* (sum_x rho_x (Q_H^j - (Q_H - q_x)^j)); inner ones from Z, where rho = 0.
  std::vector<double> base_residual(bool outer) const {
    std::vector<double> h(m_.n + 1, 0.0);
    if (!outer) return h;
    for (int c : {kInnerT, kInnerRest, kZ})
      for (const AcceptanceToken& x : tokens_[c])
        if (x.rho > 0.0) {
          double with = 1.0, without = 1.0;  // Q_H^j, (Q_H - q_x)^j
          const double rest = std::max(m_.Q_H - x.q, 0.0);
          for (int j = 1; j <= m_.n; ++j) h[j] += x.rho * ((with *= m_.Q_H) - (without *= rest));
        }
    return h;
  }

  // Depth-first over the subsets U of T with |U| <= n, each with its EGF polynomial
  // prod_{u in U} (e^{q_u x} - 1) up to x^n (objective.hpp's weights): the tuples whose T-part is U
  // and whose j other draws come from the base (Q_H outer, Q_Z inner) weigh
  // n!/j! base^j [x^{n-j}] prod. Per U: the kept share K(U), and f(U) (rho(U) weight + the
  // residual of the other draws).
  double enumerate_subsets(const std::vector<AcceptanceToken>& T, bool outer) const {
    const int n = m_.n, m = static_cast<int>(T.size()), width = n + 1;
    const double base = outer ? m_.Q_H : m_.Q_Z;
    const std::vector<double> h = base_residual(outer);
    std::vector<double> base_terms(width), residual_terms(width);  // n!/j! base^j, n!/j! h_j
    double factorial_n = 1.0;
    for (int k = 2; k <= n; ++k) factorial_n *= k;
    double over_factorial = 1.0, base_power = 1.0;
    for (int j = 0; j <= n; ++j) {
      if (j > 0) over_factorial /= j, base_power *= base;
      base_terms[j] = factorial_n * over_factorial * base_power;
      residual_terms[j] = factorial_n * over_factorial * h[j];
    }
    std::vector<double> polynomial(static_cast<std::size_t>(width) * (n + 1), 0.0);  // one row per depth
    polynomial[0] = 1.0;
    std::vector<int> members(n);
    double total = 0.0;
    // Extends the subset members[0..depth) by each token from `next` on.
    auto visit = [&](auto&& self, int depth, int next) -> void {
      for (int u = next; u < m; ++u) {
        const double* parent = &polynomial[static_cast<std::size_t>(depth) * width];
        double* child = &polynomial[static_cast<std::size_t>(depth + 1) * width];
        multiply_by_factor(parent, T[u].q, n, child);
        members[depth] = u;
        total += subset_term(T, members.data(), depth + 1, child, base_terms, residual_terms, outer);
        if (depth + 1 < n) self(self, depth + 1, u + 1);
      }
    };
    visit(visit, 0, 0);
    return total;
  }

  // child = parent * (e^{q x} - 1), truncated at x^n.
  static void multiply_by_factor(const double* parent, double q, int n, double* child) {
    double factor[kMaxDraws + 1];
    factor[0] = 0.0;
    double term = 1.0;
    for (int d = 1; d <= n; ++d) factor[d] = term *= q / d;
    for (int e = 0; e <= n; ++e) {
      double sum = 0.0;
      for (int d = 1; d <= e; ++d) sum += factor[d] * parent[e - d];
      child[e] = sum;
    }
  }
  static constexpr int kMaxDraws = 16;  // kMaxTermSize (plan.hpp checks n against it)

  // One subset U: its weight W = sum_j n!/j! base^j [x^{n-j}] prod, the kept share K(U) (the
  // Eq. (18) softmax, with the slack for the inner system, times kappa) and f(U) = 1 - K(U), which
  // a residual draw turns into an accepted draft with probability rho(U) (+ the other draws').
  double subset_term(const std::vector<AcceptanceToken>& T, const int* U, int size, const double* polynomial,
                     const std::vector<double>& base_terms, const std::vector<double>& residual_terms,
                     bool outer) const {
    const int n = m_.n;
    double weight = 0.0, residual_weight = 0.0;
    for (int j = 0; j <= n - size; ++j) {
      weight += base_terms[j] * polynomial[n - j];
      residual_weight += residual_terms[j] * polynomial[n - j];
    }
    double shift = outer ? -INFINITY : 0.0;  // the slack has alpha = 0
    for (int k = 0; k < size; ++k) shift = std::max(shift, T[U[k]].alpha);
    double normaliser = outer ? 0.0 : std::exp(-shift), kept = 0.0, rho = 0.0;
    for (int k = 0; k < size; ++k) {
      const AcceptanceToken& t = T[U[k]];
      const double e = std::exp(t.alpha - shift);
      normaliser += e;
      kept += e * (1.0 - t.loss);
      rho += t.rho;
    }
    kept /= normaliser;
    const double rejected = std::max(1.0 - kept, 0.0);
    return weight * kept + rejected * (rho * weight + residual_weight);
  }

  // Too many subsets to enumerate. E[K] = sum_{i in T} min(r_i, p_i) (the solver's rows). For
  // E[f rho(set(w))] write f(U) = slack(U) + sum_{i in U} sigma_i(U) l_i (l = 1 - kappa):
  //   - the slack part (inner only) is exact: sum_{U ∋ x} c_U / (1 + S_U) = e^{-alpha_x} r_x, as
  //     sigma_x(U) = e^{alpha_x} / (1 + S_U) on every U ∋ x; so it adds sum_x rho_x e^{-alpha_x} r_x;
  //   - the rest pairs an over-proposed i (l_i > 0, so rho_i = 0) with residual tokens x != i of
  //     its tuple: it lies in [0, sum_i l_i r_i * rho_top], rho_top the n - 1 largest rho of the
  //     support, and (inner) each x's part in [0, e^{-alpha_x} r_x sum_i l_i e^{alpha_i}] too,
  //     since sigma_i(U) <= e^{alpha_i} / (1 + S_U).
  // value: the middle of that interval; error: its half-width.
  void bound_subsets(const std::vector<AcceptanceToken>& T, bool outer, double& value, double& error,
                     double& row_weight) const {
    double kept = 0.0, over = 0.0, shift = -INFINITY;
    for (const AcceptanceToken& t : T) {
      kept += std::min(t.row, t.p);
      over += t.row * t.loss;
      if (t.loss > 0.0) shift = std::max(shift, t.alpha);
    }
    double pair_bound = std::min(over * largest_residuals(m_.n - 1), over);
    double slack = 0.0;
    if (!outer) {
      double losses = 0.0;  // sum_i l_i e^{alpha_i - shift}
      for (const AcceptanceToken& t : T)
        if (t.loss > 0.0) losses += t.loss * std::exp(t.alpha - shift);
      const double scale = losses > 0.0 ? std::exp(shift) * losses : 0.0;  // sum_i l_i e^{alpha_i}
      double per_token = 0.0;
      for (const AcceptanceToken& x : T) {
        if (!(x.rho > 0.0) || !(x.row > 0.0)) continue;
        const double inverse = std::exp(-x.alpha);  // one exp per token: T may hold a vocabulary
        const double rejected = std::isfinite(inverse) ? x.row * inverse : std::exp(std::log(x.row) - x.alpha);
        slack += x.rho * rejected;  // e^{-alpha_x} r_x
        row_weight = std::max(row_weight, x.rho * inverse);
        per_token += x.rho * std::min(over, scale > 0.0 ? rejected * scale : 0.0);
      }
      pair_bound = std::min(pair_bound, per_token);
    }
    value = kept + slack + 0.5 * pair_bound;
    error = 0.5 * pair_bound;
  }

  // The sum of the k largest rho over the draft support (k < n <= kMaxDraws: kept sorted in place).
  double largest_residuals(int k) const {
    double largest[kMaxDraws] = {};
    for (int c = 0; c < kClasses; ++c)
      for (const AcceptanceToken& x : tokens_[c]) {
        if (k == 0 || !(x.rho > largest[k - 1])) continue;
        int j = k - 1;
        for (; j > 0 && largest[j - 1] < x.rho; --j) largest[j] = largest[j - 1];
        largest[j] = x.rho;
      }
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += largest[j];
    return sum;
  }

  AcceptanceMasses m_;
  const std::vector<AcceptanceToken>* tokens_;
  double limits_[2];
};

}  // namespace multidraft
