// Grouped LogSumExp objectives of Global Resolution and their damped Newton minimiser
// ([GR] Theorems 6.4 and 6.5, Eqs. 12 and 15, in the grouped form of Appendix K):
//   outer  Phi_T(a)   = sum_U w_U log(sum_{u in U} e^{a_u})      - sum_i t_i a_i
//   inner  Theta_T(a) = sum_U c_U log(1 + sum_{u in U} e^{a_u})  - sum_i t_i a_i
// Gradient: (mass allocated to i) - t_i; Hessian: softmax Jacobians scattered into |U| x |U|
// blocks (spec §2.6). Every log-sum-exp is shifted by its maximum (including the slack's 0).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/core/draft_scheme.hpp"  // count_small_subsets, exponential_base
#include "multidraft/global_resolution/sums/full_subsets.hpp"
#include "multidraft/global_resolution/sums/laplace_interpolation.hpp"
#include "multidraft/global_resolution/sums/laplace_sums.hpp"
#include "multidraft/global_resolution/sums/pair_sums.hpp"

namespace multidraft {

// Explicit terms over variables 0..m-1 in CSR form: term k has members[offsets[k] .. offsets[k+1])
// and weight[k]; extra_weight[b][k] are the weights of further EGF bases (not in the objective).
struct GroupedTerms {
  int variables = 0;
  std::vector<std::int64_t> offsets{0};
  std::vector<int> members;
  std::vector<double> weight;
  std::vector<std::vector<double>> extra_weight;

  std::size_t size() const { return weight.size(); }
  void append(const int* term, int size, double w, double extra) {
    members.insert(members.end(), term, term + size);
    offsets.push_back(static_cast<std::int64_t>(members.size()));
    weight.push_back(w);
    for (auto& e : extra_weight) e.push_back(extra);
  }
};

// Second-order information at a point: the dense Hessian (small problems) or, matrix-free,
// every explicit member's softmax share, e^{a} (for the implicit terms) and the Hessian diagonal.
struct Curvature {
  bool dense = true;
  Eigen::MatrixXd hessian;
  std::vector<double> share;  // aligned with GroupedTerms::members
  Eigen::VectorXd power;      // e^{a}, when the point allowed unshifted passes
  bool four_reciprocals = false;  // every |a| <= kFourReciprocalsLimit (full_subsets.hpp)
  Eigen::VectorXd diagonal;
  // sum_U extra_weight[0]_U * (share of U's tokens) (the weight itself without a second base):
  // with the slack token (inner problem), the mass of the tuples the plan accepts, counted with
  // the second EGF base.
  double accepted = 0.0;
  std::vector<double> leaf_scratch;  // working row of the implicit pass (dense Hessian only)
  // The terms were summed, not enumerated: n = 2's implicit pairs by interpolation (pair_sums.hpp)
  // or, with `laplace`, every term of any size (laplace_sums.hpp, or laplace_interpolation.hpp
  // `on_grid`); then the gradient carries an
  // error of at most gradient_error in L1 norm.
  bool interpolated = false;
  bool laplace = false;
  bool coarse = false;  // laplace with LaplaceSums::kCoarse: gradient_error is that rule's, not certified rows
  bool on_grid = false;  // laplace with the variables interpolated (grid_subsets, for many variables)
  SortedPoints sorted;
  PairSums pairs;
  LaplaceSums subsets;
  LaplaceInterpolation grid_subsets;
  double gradient_error = 0.0;
  std::size_t explicit_terms = 0;  // the explicit terms evaluated (the rest were interpolated)
};

// While every |a_i| <= this, e^{a_i} is computed once per variable instead of once per term
// member (no overflow or underflow is possible); beyond, explicit terms are shifted by their
// own maximum, and implicit ones are first stored explicitly.
constexpr double kUnshiftedLimit = 600.0;
// The outer problem's unshifted passes take 1 / X_U^2 for X_U >= e^{-spread of a}: in range up
// to a spread of about 354 (measured: a peaked V = 32000, n = 2 solve reached a spread of 429,
// and the pass's Hessian diagonal became NaN).
constexpr double kOuterSpreadLimit = 300.0;
// n = 2 takes Laplace sums on the grid (LaplaceInterpolation) rather than pair interpolation
// (PairSums) from this many variables, where the grid pays: measured at full vocabulary (flat
// V = 32000: 14 -> 5.6 ms per token); below, pair interpolation keeps the truncated plans' times.
constexpr int kPairGridFrom = 2000;

// When Laplace sums interpolate their variables on a grid (LaplaceInterpolation): where that pays
// (the default), or, for tests, never (LaplaceSums alone) or always (on vocabularies small enough
// to enumerate, n = 2 included).
enum class GridUse { kNever, kWherePays, kAlways };

struct ConvexObjective {
  GroupedTerms terms;      // explicit terms (those smaller than n when `full` is used)
  FullSubsetTerms full;    // implicit terms: every n-subset (full_subsets.hpp)
  Eigen::VectorXd target;  // t_i: outer row targets p_i, or inner p(i)
  bool slack = false;      // inner problem: a slack token with a = 0 in every term
  double total_weight = 0.0;  // sum_U w_U (set with the terms; used by level_shift)
  double unshifted_limit = kUnshiftedLimit;  // lowered only by tests, to check the shifted path
  bool interpolation = true;  // PairSums / LaplaceSums when they pay (tests compare with enumeration)
  GridUse grid = GridUse::kWherePays;  // LaplaceSums on the grid (tests: never, to compare; always, at small m)
  // Most terms a pass may enumerate (GlobalResolutionOptions::max_terms): the plan may hold more,
  // to be summed (PairSums, LaplaceSums); a point where they cannot be is refused.
  double enumeration_budget = std::numeric_limits<double>::infinity();

  // What the stored terms are built from (build_grouped_terms in global_resolution.hpp): the EGF
  // bases (bases[0] weights the objective, the others extra_weight) and the variables' masses
  // (full.mass). When LaplaceSums can sum every term, the sizes 2..n-1 are stored only once a
  // pass enumerates them.
  std::vector<double> bases;
  bool stored_deferred = false;

  // Stored terms not built yet (sizes 2..n-1 while stored_deferred).
  double deferred_count() const {
    if (!stored_deferred) return 0.0;
    double through, members, singles;
    count_small_subsets(terms.variables, full.size - 1, through, members);
    count_small_subsets(terms.variables, 1, singles, members);
    return through - singles;
  }
  double term_count() const { return static_cast<double>(terms.size()) + deferred_count() + full.count(); }

  // Appends the stored terms of one size (size-major order: the n = 3 pairs follow all the
  // singles, so interpolation can take them over), built by depth-first search sharing each
  // parent's polynomial, O(n^2) per subset, with each variable's factor coefficients q^d / d!
  // computed once; a term is stored when a base gives it a positive weight. Storage is resized,
  // not reallocated, so a reused workspace touches no new memory.
  void append_stored_terms(int size) {
    const std::vector<double>& mass = full.mass;
    const int n = full.size, m = static_cast<int>(mass.size()), B = static_cast<int>(bases.size());
    const int width = n + 1;
    double through, before, members_through, members_before;
    count_small_subsets(m, size, through, members_through);
    count_small_subsets(m, size - 1, before, members_before);
    std::size_t written = terms.size(), member_end = terms.members.size();
    const std::size_t capacity = written + static_cast<std::size_t>(through - before);
    terms.offsets.resize(capacity + 1);
    terms.members.resize(member_end + static_cast<std::size_t>(members_through - members_before));
    terms.weight.resize(capacity);
    for (auto& w : terms.extra_weight) w.resize(capacity);

    std::vector<double> factor(static_cast<std::size_t>(m) * width, 0.0);  // q^d / d!, d = 0..n
    for (int k = 0; k < m; ++k) {
      double term = 1.0;
      for (int d = 1; d <= n; ++d) factor[k * width + d] = term *= mass[k] / d;
    }
    double n_factorial = 1.0;
    for (int d = 2; d <= n; ++d) n_factorial *= d;
    std::vector<double> polynomial(static_cast<std::size_t>(n + 1) * B * width);  // [depth][base][degree]
    for (int b = 0; b < B; ++b) exponential_base(bases[b], n, &polynomial[b * width]);
    std::vector<int> current;
    std::vector<double> top(B);
    auto recurse = [&](auto&& self, int start, int depth) -> void {
      const bool leaf = depth + 1 == size;  // leaves need only the degree-n coefficient
      for (int k = start; k < m; ++k) {
        current.push_back(k);
        const double* f = &factor[k * width];
        bool positive = false;
        for (int b = 0; b < B; ++b) {  // child = parent * (e^{q_k x} - 1), truncated at degree n
          const double* in = &polynomial[(depth * B + b) * width];
          double* out = &polynomial[((depth + 1) * B + b) * width];
          for (int degree = leaf ? n : 1; degree <= n; ++degree) {
            double acc = 0.0;
            for (int j = 0; j < degree; ++j) acc += in[j] * f[degree - j];
            out[degree] = acc;
          }
          top[b] = out[n] * n_factorial;
          positive = positive || top[b] > 0.0;
        }
        if (leaf && positive) {
          for (int member : current) terms.members[member_end++] = member;
          terms.offsets[written + 1] = static_cast<std::int64_t>(member_end);
          for (int b = 1; b < B; ++b) terms.extra_weight[b - 1][written] = top[b];
          terms.weight[written++] = top[0];
        }
        if (!leaf) self(self, k + 1, depth + 1);
        current.pop_back();
      }
    };
    recurse(recurse, 0, 0);
    terms.offsets.resize(written + 1);
    terms.members.resize(member_end);
    terms.weight.resize(written);
    for (auto& w : terms.extra_weight) w.resize(written);
  }

  // The rejected mass the inner problem's optimum leaves (the slack's share): delta, or with no
  // slack needed a quarter of the stopping threshold (its a then heads for infinity).
  double level_aim(double threshold) const {
    const double delta = total_weight - target.sum();
    return delta > 1e-12 * total_weight ? delta : 0.25 * threshold;
  }

  // A safe step along 1 for the inner problem, where Newton crawls. The gradient sums to
  // delta - R(a), with delta = sum_U w_U - sum_i t_i fixed and R(a) = sum_U w_U / (1 + X_U) the
  // slack's mass. Along a + s 1, |d log R / ds| <= 1 (each term's X e^s / (1 + X e^s) <= 1), so
  // R(a + s 1) >= R(a) e^{-s}: the directional derivative delta - R stays <= 0 up to
  // s = log(R / delta), and Theta_T decreases all the way there. Newton itself moves at most about
  // 1 per iteration along 1 while the slack share is small (its step is (R - delta) / R' with
  // |R'| <= R), so on peaked inputs, where delta is tiny, this saves most iterations.
  // With delta <= 0 (the targets take every term's whole weight, as on full vocabularies, where
  // gamma_T is tiny) the minimiser lies at infinity and Theta_T decreases all along 1; the
  // gradient norm only needs R below the threshold, and once the tokens outweigh the slack in
  // every term R(a + s 1) is about R e^{-s}: the jump aims at R = threshold / 4 (measured: flat
  // V = 32000, n = 3, and peaked tau = 1e-4 inner problems crawled 6 to 9 Newton iterations, the
  // gradient falling by e per iteration, all of it in the level).
  // Returns 0 (no jump) unless the level dominates the gradient (-sum g >= ||g||_1 / 2: otherwise
  // the shape is what is wrong, and a jump only costs a pass) and R > 2 delta > 0, or delta <= 0
  // and R > threshold / 2; capped at kLevelShiftCap.
  // Passes on the grid find the exact level themselves (ConvexObjective::evaluate's `level`), which
  // leaves no level part here.
  double level_shift(const Eigen::VectorXd& gradient, double threshold) const {
    constexpr double kLevelShiftCap = 30.0;
    if (!slack) return 0.0;
    const double level_part = -gradient.sum(), rejected = total_weight - target.sum() + level_part;
    if (level_part < 0.5 * gradient.lpNorm<1>()) return 0.0;
    const double aim = level_aim(threshold);
    if (!(rejected > 2.0 * aim)) return 0.0;
    return std::min(std::log(rejected / aim), kLevelShiftCap);
  }

  // What a pass at a needs of a's extent, from one pass over it. The offset: the outer objective's
  // passes work at a - max a (its gauge: gradient and Hessian are the same at a + const), so
  // x <= 1; its enumerated terms have no slack, and their 1 / X^2 must stay in range
  // (kOuterSpreadLimit). The inner ones keep a: the slack's 1 bounds every 1 / (1 + X). The
  // largest |a - offset| (evaluate keeps the implicit terms up to unshifted_limit), and the
  // powers x = e^{a - offset} at the smallest and largest a (the summation's choice; exp is monotone).
  struct PassBounds {
    double offset = 0.0, largest = 0.0, power_low = 1.0, power_high = 1.0;
  };
  PassBounds pass_bounds(const Eigen::VectorXd& a) const {
    PassBounds out;
    const int m = static_cast<int>(a.size());
    if (m == 0) return out;
    const double* __restrict values = a.data();
    double low = values[0], high = values[0];
#pragma omp simd reduction(min : low) reduction(max : high)
    for (int i = 0; i < m; ++i) {  // by value: std::min and max return references, which GCC leaves scalar
      low = values[i] < low ? values[i] : low;
      high = values[i] > high ? values[i] : high;
    }
    out.offset = slack ? 0.0 : high;
    out.largest = std::max(std::abs(low - out.offset), std::abs(high - out.offset));
    out.power_low = std::exp(low - out.offset);
    out.power_high = std::exp(high - out.offset);
    return out;
  }

  // Gradient and curvature at a (the Newton loop never needs the value, a logarithm per term;
  // see minimise_newton). A point outside the unshifted range first turns the implicit terms
  // into explicit ones (rare: Newton iterates stay small). Returns false, computing nothing, when
  // the implicit terms would have to be enumerated (not interpolated) beyond enumeration_budget.
  // `coarse`: terms summed by LaplaceSums take its coarse rule (Newton iterates, minimise_newton).
  // `level` (inner problem): where the terms are summed on the grid, the point first moves along 1
  // to its level (LaplaceInterpolation::Level; curvature.power follows, a is the caller's to
  // shift); elsewhere its shift is 0.
  bool evaluate(const Eigen::VectorXd& a, Eigen::VectorXd& gradient, Curvature& curvature, bool coarse = false,
                LaplaceInterpolation::Level* level = nullptr) {
    if (level) level->shift = 0.0;
    const int m = terms.variables;
    const PassBounds bounds = pass_bounds(a);
    const double offset = bounds.offset, largest = bounds.largest;
    const bool unshifted = largest <= unshifted_limit;
    curvature.four_reciprocals = unshifted && largest <= kFourReciprocalsLimit;
    if (unshifted) curvature.power = (a.array() - offset).exp();
    const double power_low = bounds.power_low, power_high = bounds.power_high;
    Summation how =
        !curvature.dense && unshifted ? summation(power_low, power_high) : Summation::kEnumerated;
    // Beyond kOuterSpreadLimit the outer terms are summed (LaplaceSums takes any spread) or stored.
    const bool enumerable = slack || largest <= kOuterSpreadLimit;
    if (how == Summation::kEnumerated && !enumerable && unshifted && !curvature.dense && interpolation &&
        LaplaceSums::handles(full.size))
      how = Summation::kLaplace;
    curvature.interpolated = how != Summation::kEnumerated;
    curvature.laplace = how == Summation::kLaplace;
    curvature.coarse = curvature.laplace && coarse;
    curvature.on_grid =
        curvature.laplace && (grid == GridUse::kAlways ||
                              (grid == GridUse::kWherePays &&
                               LaplaceInterpolation::pays(
                                   m, std::log(power_high / power_low), full.size)));
    if (!curvature.interpolated && full.count() + deferred_count() > enumeration_budget) return false;
    if (!curvature.interpolated && stored_deferred) {
      for (int size = 2; size < full.size; ++size) append_stored_terms(size);
      stored_deferred = false;
    }
    if (!unshifted || (!curvature.interpolated && !enumerable)) materialise_full_subsets();
    if (!curvature.on_grid) {  // on the grid, LaplaceInterpolation takes every term and writes both
      gradient = -target;
      curvature.diagonal.setZero(m);
    }
    if (curvature.dense) curvature.hessian.setZero(m, m);
    curvature.share.resize(terms.members.size());
    curvature.accepted = 0.0;
    curvature.gradient_error = 0.0;
    const Eigen::VectorXd& power = curvature.power;
    // LaplaceSums takes every term, the stored ones too.
    curvature.explicit_terms = curvature.laplace ? 0 : terms.size();
    double local[kMaxTermSize];
    for (std::size_t k = 0; k < curvature.explicit_terms; ++k) {
      const std::int64_t begin = terms.offsets[k], end = terms.offsets[k + 1];
      const double w = terms.weight[k];
      double total = 0.0;
      if (unshifted) {
        for (std::int64_t j = begin; j < end; ++j) total += local[j - begin] = power[terms.members[j]];
        if (slack) total += 1.0;
      } else {
        double shift = slack ? 0.0 : -std::numeric_limits<double>::infinity();
        for (std::int64_t j = begin; j < end; ++j) shift = std::max(shift, a[terms.members[j]]);
        total = slack ? std::exp(-shift) : 0.0;
        for (std::int64_t j = begin; j < end; ++j) total += local[j - begin] = std::exp(a[terms.members[j]] - shift);
      }
      const double inverse_total = 1.0 / total;
      double accepted_share = 0.0;
      for (std::int64_t j = 0; j < end - begin; ++j) accepted_share += local[j] *= inverse_total;  // softmax shares
      curvature.accepted += (terms.extra_weight.empty() ? w : terms.extra_weight[0][k]) * accepted_share;
      for (std::int64_t j = begin; j < end; ++j) {
        const int u = terms.members[j];
        const double su = local[j - begin];
        gradient[u] += w * su;
        curvature.share[j] = su;
        curvature.diagonal[u] += w * su * (1.0 - su);
        if (!curvature.dense) continue;
        curvature.hessian(u, u) += w * su;
        for (std::int64_t l = begin; l < end; ++l) curvature.hessian(u, terms.members[l]) -= w * su * local[l - begin];
      }
    }
    if (full.empty()) return true;
    const double constant = slack ? 1.0 : 0.0;
    if (curvature.on_grid) {
      curvature.accepted += curvature.grid_subsets.evaluate(power, a, offset, full.mass, full.size, bases, constant,
                                                            target, gradient, curvature.diagonal, coarse,
                                                            slack ? level : nullptr);
      curvature.gradient_error = curvature.grid_subsets.gradient_error();
      if (level && level->shift != 0.0) curvature.power *= std::exp(level->shift);  // as the grid scaled its copy
      return true;
    }
    if (curvature.laplace) {
      curvature.accepted += curvature.subsets.evaluate(power, full.mass, full.size, bases, constant, gradient,
                                                       curvature.diagonal, coarse);
      curvature.gradient_error = curvature.subsets.gradient_error();
      return true;
    }
    if (curvature.interpolated) {
      curvature.sorted.place(power, constant);
      curvature.accepted +=
          curvature.pairs.evaluate(curvature.sorted, full.mass, constant, gradient, curvature.diagonal);
      curvature.gradient_error = curvature.pairs.gradient_error();
      return true;
    }
    FullSubsetGradient pass{power.data(), full.mass.data(), slack ? 1.0 : 0.0, gradient.data(),
                            curvature.diagonal.data(), curvature.dense ? curvature.hessian.data() : nullptr, m};
    pass.four_reciprocals_allowed = curvature.four_reciprocals;
    if (pass.hessian) {
      curvature.leaf_scratch.resize(m);  // kept with the curvature: no allocation per pass
      pass.scratch = curvature.leaf_scratch.data();
    }
    for_each_full_subset(full, pass);
    curvature.accepted += pass.accepted;  // full-size weights are the same for every base
    if (pass.hessian) {  // the implicit pass wrote the strict lower triangle only
      curvature.hessian.triangularView<Eigen::StrictlyUpper>() = curvature.hessian.transpose();
      curvature.hessian.diagonal() = curvature.diagonal;  // w s (1 - s) summed over every term
    }
    return true;
  }

  // How a pass sums the terms at x = e^a (|a| <= unshifted_limit): n = 2's implicit pairs by
  // interpolation where it pays and |a| <= kFourReciprocalsLimit (x^2 and 1 / x^2 in range) and
  // m < kPairGridFrom, else every term by LaplaceSums where that pays or enumerating would exceed
  // the budget (on the grid, LaplaceInterpolation, where that pays: ConvexObjective::evaluate),
  // else enumerated. Callers check that the Newton system is matrix-free.
  enum class Summation { kEnumerated, kPairInterpolation, kLaplace };
  // low, high: the smallest and largest x (PassBounds::power_low, power_high).
  Summation summation(double low, double high) const {
    if (!interpolation || full.empty()) return Summation::kEnumerated;
    const int m = terms.variables;
    const double constant = slack ? 1.0 : 0.0;
    if (full.size == 2 && high <= std::exp(kFourReciprocalsLimit) && low >= std::exp(-kFourReciprocalsLimit) &&
        PairSums::pays(m, std::log((constant + high) / (constant + low))) && grid != GridUse::kAlways &&
        !(grid == GridUse::kWherePays && m >= kPairGridFrom && LaplaceInterpolation::pays(m, std::log(high / low), 2)))
      return Summation::kPairInterpolation;
    if (!LaplaceSums::handles(full.size)) return Summation::kEnumerated;
    if (grid == GridUse::kAlways) return Summation::kLaplace;
    const double log_ratio = std::log((constant + full.size * high) / (constant + low));
    if (full.count() + deferred_count() > enumeration_budget || LaplaceSums::pays(m, log_ratio, term_count()))
      return Summation::kLaplace;
    return Summation::kEnumerated;
  }

  // Hessian-vector product from stored shares: each term adds w (s ∘ v - s (s · v)) (spec §2.6).
  // `scratch`: working rows of the Laplace-transform products (LaplaceSums::hessian_times).
  void hessian_times(const Curvature& curvature, const Eigen::VectorXd& v, Eigen::VectorXd& out,
                     std::vector<double>& scratch) const {
    if (curvature.on_grid) {  // every term (no explicit ones), written
      curvature.grid_subsets.hessian_times(v, out, scratch);
      return;
    }
    out.setZero(terms.variables);
    for (std::size_t k = 0; k < curvature.explicit_terms; ++k) {
      const std::int64_t begin = terms.offsets[k], end = terms.offsets[k + 1];
      double dot = 0.0;
      for (std::int64_t j = begin; j < end; ++j) dot += curvature.share[j] * v[terms.members[j]];
      const double w = terms.weight[k];
      for (std::int64_t j = begin; j < end; ++j) {
        const int u = terms.members[j];
        out[u] += w * curvature.share[j] * (v[u] - dot);
      }
    }
    if (curvature.laplace) {
      curvature.subsets.hessian_times(v, out, scratch);
      return;
    }
    if (curvature.interpolated) {
      curvature.pairs.hessian_times(curvature.sorted, v, out);
      return;
    }
    FullSubsetHessianTimes pass{curvature.power.data(), full.mass.data(), slack ? 1.0 : 0.0, v.data(), out.data()};
    pass.four_reciprocals_allowed = curvature.four_reciprocals;
    for_each_full_subset(full, pass);
  }

  // One product with scratch rows of its own (test hooks; solves pass their workspace's).
  void hessian_times(const Curvature& curvature, const Eigen::VectorXd& v, Eigen::VectorXd& out) const {
    std::vector<double> scratch;
    hessian_times(curvature, v, out, scratch);
  }

  // Stores the implicit terms explicitly (every base gets the same full-size weight).
  void materialise_full_subsets() {
    enumerate_full_subsets(full, [&](const int* members, int size, double w) { terms.append(members, size, w, w); });
    full.size = 0;
  }
};

// Storage reused from one solve to the next on the same thread (see convex_workspace).
struct ConvexWorkspace {
  ConvexObjective objective;
  Curvature curvature, trial_curvature;
  std::vector<double> product_scratch;  // ConvexObjective::hessian_times' working rows
};

// One per system (0, 1: a plan's outer and inner systems), since their sizes differ a hundredfold
// (flat V = 32000: ~300 and ~32000 variables): each keeps its buffers at its own size from plan to
// plan, where one shared workspace shrank and regrew (value-initialised) tens of 256 KB buffers
// per plan (measured: 0.3 ms of a 6 ms flat n = 2 verify in memset).
inline ConvexWorkspace& convex_workspace(int system) {
  thread_local ConvexWorkspace workspaces[2];
  return workspaces[system];
}

struct NewtonReport {
  Eigen::VectorXd solution;
  double gradient_l1 = 0.0;  // L1 norm of the true gradient at `solution`
  // The gradient at `solution`, (mass allocated to i) - t_i, empty when no point was evaluated;
  // gradient_error bounds its L1 error (interpolated sums; 0 when enumerated).
  Eigen::VectorXd gradient;
  double gradient_error = 0.0;
  double accepted = 0.0;     // Curvature::accepted at `solution`
  bool interpolated = false;  // Curvature::interpolated at `solution`
  int iterations = 0;
  bool converged = false;
  bool over_budget = false;  // stopped at a point whose terms could not be interpolated (evaluate)
};

// Problems with more variables than this use matrix-free conjugate gradients for the Newton
// system instead of a dense Cholesky factorisation (O(m^3), tens of ms at m = 1000; spec §6.2).
constexpr int kDenseNewtonLimit = 250;
// Below that limit, the dense Hessian and its factorisation (m^3 / 3 flops) are used only when a
// pass over the terms costs about as much (m^3 <= this ratio times the term count): n >= 3, where
// the terms grow like m^n / n!, or tiny m. For n = 2 (about m^2 / 2 terms) two or three
// Hessian-vector passes per iteration are cheaper from m ~ 20 (measured: (100, 2) 0.2 -> 0.06 ms).
constexpr double kDenseWorkRatio = 20.0;

// Terms summed without enumeration (judged at the start point a) give cheap Hessian-vector
// products but no cheap dense Hessian: conjugate gradients then.
inline bool use_dense_newton(const ConvexObjective& objective, const Eigen::VectorXd& start) {
  const int m = objective.terms.variables;
  const ConvexObjective::PassBounds bounds = objective.pass_bounds(start);
  if (m > 0 && bounds.largest <= objective.unshifted_limit &&
      objective.summation(bounds.power_low, bounds.power_high) != ConvexObjective::Summation::kEnumerated)
    return false;
  const double size = m;
  return m <= kDenseNewtonLimit && size * size * size <= kDenseWorkRatio * objective.term_count();
}

// Solves (H + lambda I) d = -g approximately by Jacobi-preconditioned conjugate gradients,
// to the inexact-Newton forcing tolerance eta ||g||. `gauge`: work in the zero-mean subspace.
// Each iteration makes two fused passes over its vectors besides the product H p (the first adds
// lambda p to it and takes p.Hp, the second updates the step, the residual and the next
// direction's sums; the preconditioned residual z is never stored): with m = 32000 the vectors spill out of
// L2, and one Eigen expression per update (nine passes) cost twice the Hessian products
// (measured: flat V = 32000, n = 2, 1.8 ms of a 9 ms verify). The projections onto the zero-mean
// subspace enter through the sums: (x - mean x).y = x.y - mean x sum y.
inline Eigen::VectorXd newton_direction_cg(const ConvexObjective& objective, const Curvature& curvature,
                                           const Eigen::VectorXd& g, double lambda, bool gauge,
                                           std::vector<double>& scratch) {
  const int m = objective.terms.variables;
  auto project = [&](Eigen::VectorXd& x) {
    if (gauge) x.array() -= x.mean();
  };
  const Eigen::VectorXd preconditioner = (curvature.diagonal.array() + lambda).inverse().matrix();
  Eigen::VectorXd d = Eigen::VectorXd::Zero(m), r = -g, direction(m), Hd(m);
  project(r);
  double residual = r.norm();
  const double tolerance = std::min(0.1, std::sqrt(residual)) * residual;
  direction = preconditioner.cwiseProduct(r);
  project(direction);
  double rz = r.dot(direction);
  const double* __restrict pre = preconditioner.data();
  double *__restrict dv = d.data(), *__restrict rv = r.data(), *__restrict pv = direction.data(), *__restrict hv = Hd.data();
  const double inverse_m = 1.0 / m;
  for (int iteration = 0; iteration < 100 && residual > tolerance; ++iteration) {
    objective.hessian_times(curvature, direction, Hd, scratch);
    double curvature_along = 0.0, product_sum = 0.0, direction_sum = 0.0;
#pragma omp simd reduction(+ : curvature_along, product_sum, direction_sum)
    for (int i = 0; i < m; ++i) {
      hv[i] += lambda * pv[i];
      curvature_along += pv[i] * hv[i];
      product_sum += hv[i];
      direction_sum += pv[i];
    }
    const double product_mean = gauge ? product_sum * inverse_m : 0.0;  // project(Hd)
    curvature_along -= product_mean * direction_sum;
    if (!(curvature_along > 0.0)) break;
    const double step = rz / curvature_along;
    double rz_plain = 0.0, residual_sum = 0.0, z_sum = 0.0, squares = 0.0;
#pragma omp simd reduction(+ : rz_plain, residual_sum, z_sum, squares)
    for (int i = 0; i < m; ++i) {
      dv[i] += step * pv[i];
      rv[i] -= step * (hv[i] - product_mean);
      const double z = pre[i] * rv[i];
      rz_plain += rv[i] * z;
      residual_sum += rv[i];
      z_sum += z;
      squares += rv[i] * rv[i];
    }
    const double z_mean = gauge ? z_sum * inverse_m : 0.0;  // project(z)
    const double rz_next = rz_plain - z_mean * residual_sum, beta = rz_next / rz;
    residual = std::sqrt(squares);
#pragma omp simd
    for (int i = 0; i < m; ++i) pv[i] = (pre[i] * rv[i] - z_mean) + beta * pv[i];
    rz = rz_next;
  }
  return d.isZero(0.0) ? Eigen::VectorXd(-preconditioner.cwiseProduct(g)) : d;
}

// Damped Newton with the exact Hessian (spec §2.9), after a level jump where it pays
// (ConvexObjective::level_shift): solve (H + lambda I) d = -g, lambda raised
// tenfold until the Cholesky factorisation succeeds (large problems: conjugate gradients).
// The full step is taken when it lowers ||g||_1, which near the solution it always does;
// otherwise the step is halved until the directional derivative shows sufficient decrease:
// the objective is convex, so f(x + t d) - f(x) <= t g(x + t d)·d, and g(x + t d)·d <= c g·d
// implies Armijo's condition f(x + t d) <= f(x) + c t g·d without computing a value (which
// costs a logarithm per term). With `gauge` (outer problem) the objective is linear along 1, so
// g and d are centred: the 1-component of the gradient is -delta_T whatever a is. Stops when
// ||g||_1 <= threshold (the L1 norm the theory needs, not SciPy's max-norm; spec §8.4).
// `reach`: trial points whose pass range (ConvexObjective::PassBounds::largest) exceeds it are backtracked.
inline NewtonReport minimise_newton(ConvexObjective& objective, Eigen::VectorXd start, double threshold,
                                    int max_iterations, bool gauge, ConvexWorkspace& workspace,
                                    double reach = kUnshiftedLimit) {
  constexpr double kSufficientDecrease = 1e-4;
  NewtonReport report;
  const int m = objective.terms.variables;
  report.solution = std::move(start);
  if (m == 0) {
    report.converged = true;
    return report;
  }
  Eigen::VectorXd g(m), d(m), trial_gradient(m);
  Curvature& curvature = workspace.curvature;
  Curvature& trial_curvature = workspace.trial_curvature;
  curvature.dense = trial_curvature.dense = use_dense_newton(objective, report.solution);
  // Iterates take LaplaceSums' coarse rule (a third of its nodes); the point whose gradient the
  // report returns (its rows, gradient_error) is evaluated with the certified rule (again, unless
  // its trial already was: kCertifyAhead). The stopping test uses the bound of the rule that
  // evaluated the point: a coarse pass's bound holds for the true gradient too, and the certified
  // pass confirms it (or, within twice its own error of the threshold, Newton goes on with
  // certified passes only).
  bool coarse = true;
  // Inner problems on the grid: each new point first moves to its level (ConvexObjective::evaluate),
  // within kLevelTolerance of the threshold and inside `reach`. The terms couple the variables
  // mostly through that one mode, which Newton's quadratic model handles worst (x = e^a) and
  // conjugate gradients last (measured, flat V = 32000, n = 2 and 3: 4 Hessian products per
  // Newton step before, 1 or 2 after, and no separate level_shift pass; 25 to 45% less time).
  // Exact line minimisation along 1 only lowers the convex objective: the descent tests below
  // still hold.
  constexpr double kLevelCap = 30.0, kLevelTolerance = 0.02;
  LaplaceInterpolation::Level level;
  auto leveled_evaluate = [&](Eigen::VectorXd& x, Eigen::VectorXd& gradient, Curvature& at, bool rule_coarse) {
    LaplaceInterpolation::Level* request = nullptr;
    if (objective.slack) {
      level.aim = objective.level_aim(threshold);
      level.tolerance = kLevelTolerance * threshold;
      level.low = std::max(-kLevelCap, -reach - x.minCoeff());
      level.high = std::min(kLevelCap, reach - x.maxCoeff());
      if (level.low <= 0.0 && level.high >= 0.0) request = &level;
    }
    if (!objective.evaluate(x, gradient, at, rule_coarse, request)) return false;
    if (request) x.array() += request->shift;
    return true;
  };
  // A start the budget refuses (ConvexObjective::evaluate) ends the solve (no gradient known).
  if (!leveled_evaluate(report.solution, g, curvature, coarse)) {
    report.over_budget = true;
    report.gradient_l1 = std::numeric_limits<double>::infinity();
    return report;
  }
  // Stagnation: damped Newton on a convex objective keeps lowering ||g||_1, near the solution
  // quadratically; when kStagnationWindow iterations lowered it by less than 10% the iterates are
  // crawling (a warm start deep in a flat region, one a heading for infinity by at most
  // kLongestStep per step), and more iterations only cost time: the caller restarts cold.
  constexpr int kStagnationWindow = 2;
  std::vector<double> history;
  // A point beyond the unshifted range (ConvexObjective::unshifted_at) turns the implicit terms
  // into stored, shifted ones for the rest of the solve (ConvexObjective::evaluate), several times
  // slower. While the iterates are inside it, a trial point outside is backtracked like one the
  // budget refuses: a stopping threshold of 5 tau never needs |a| near 600, only an overlong
  // Newton or CG step gets there. (Tests that lower objective.unshifted_limit to force the stored
  // path are not affected.)
  const bool stay_in_range = objective.pass_bounds(report.solution).largest <= reach;
  auto evaluate_trial = [&](Eigen::VectorXd& x, Eigen::VectorXd& gradient, Curvature& at, bool last = false) {
    if (stay_in_range && objective.pass_bounds(x).largest > reach) return false;
    return leveled_evaluate(x, gradient, at, coarse && !last);
  };
  // Within kJacobiAhead times the threshold, an inner problem on the grid takes the Jacobi step
  // -g / diagonal instead of conjugate gradients: with its level found by every pass what is left
  // is nearly diagonal, and the step cuts the gradient norm about tenfold (measured, flat V = 32000,
  // n = 3: 1.5e-2, 1.7e-3, 2.1e-4, 2.4e-5 in successive leveled Jacobi steps), enough for the last
  // one and without Hessian products (flat n = 3, tau = 1e-4: 4 products fewer per token on most
  // tokens, 10% less time; wider, the Jacobi trial misses the threshold more often than it saves).
  constexpr double kJacobiAhead = 5.0;
  // A trial from a point within kCertifyAhead times the threshold is likely the last: it takes the
  // certified rule at once, which then spares the coarse pass at the final point. A certified pass
  // costs more than a coarse one (twice the nodes, 16 Chebyshev points for 10), so this pays only
  // where enough such trials end the solve. Measured (V = 32000, tau = 1e-4): from flat n = 4 starts
  // at 26 to 50 times the threshold every trial ended below it (0.15 to 0.9); from peaked n = 3 and
  // 4 points at 23 to 48, half did; from flat n = 3 starts at 54 to 106, two in ten. 60 took 19 to
  // 24% off flat n = 4 and 13% off peaked n = 3 against 20 (8 interleaved rounds).
  constexpr double kCertifyAhead = 60.0;
  auto record = [&] {  // the gradient itself is copied once, at the end (certify)
    report.gradient_l1 = g.lpNorm<1>() + curvature.gradient_error;  // a bound on the true one
    report.gradient_error = curvature.gradient_error;
    report.accepted = curvature.accepted;
    report.interpolated = curvature.interpolated;
  };
  // Same point, same summation (it depends on the point only), so the budget accepts it again.
  // Every return after the first evaluation passes here.
  auto certify = [&] {
    if (curvature.coarse) {
      objective.evaluate(report.solution, g, curvature);
      record();
    }
    report.gradient = g;
  };
  for (;; ++report.iterations) {
    record();
    if (report.gradient_l1 <= threshold) {
      certify();
      if (report.gradient_l1 <= threshold) {
        report.converged = true;
        return report;
      }
      coarse = false;
    }
    if (report.iterations >= max_iterations) {
      certify();
      return report;
    }
    history.push_back(report.gradient_l1);
    if (history.size() > kStagnationWindow &&
        report.gradient_l1 > 0.9 * history[history.size() - 1 - kStagnationWindow]) {
      certify();
      return report;
    }
    // A jump stays within `reach` (beyond, evaluate_trial refuses it and the pass is repeated).
    double shift = objective.level_shift(g, threshold);
    if (stay_in_range) shift = std::min(shift, reach - report.solution.maxCoeff());
    if (shift > 0.0) {  // counts as an iteration
      report.solution.array() += shift;
      if (evaluate_trial(report.solution, g, curvature, report.gradient_l1 <= kCertifyAhead * threshold)) continue;
      report.solution.array() -= shift;  // refused by the budget: a Newton step from where we were
      objective.evaluate(report.solution, g, curvature, coarse);  // accepted before, so accepted again
    }
    Eigen::VectorXd descent = g;
    if (gauge) descent.array() -= descent.mean();
    double lambda = 1e-12 * std::max(1.0, curvature.diagonal.sum() / m);
    if (curvature.dense) {
      Eigen::LLT<Eigen::MatrixXd> factor;
      for (int attempt = 0; attempt < 40; ++attempt, lambda *= 10.0) {
        factor.compute(curvature.hessian + lambda * Eigen::MatrixXd::Identity(m, m));
        if (factor.info() == Eigen::Success) break;
      }
      d = -factor.solve(descent);
    } else if (objective.slack && curvature.on_grid && report.gradient_l1 <= kJacobiAhead * threshold) {
      d = -(curvature.diagonal.array() + lambda).inverse().matrix().cwiseProduct(descent);
    } else {
      d = newton_direction_cg(objective, curvature, g, lambda, gauge, workspace.product_scratch);
    }
    if (gauge) d.array() -= d.mean();
    // No a moves by more than kLongestStep: beyond, the quadratic model means nothing (e^30 ~ 1e13),
    // and a pass's cost grows with the spread of a (LaplaceSums' nodes). Measured: a warm start's
    // first step sent one a of a flat V = 128000, n = 2 inner problem from 23 to 521 (0.4 s passes).
    // Each component is clipped, not the whole step scaled: a token whose minimiser lies at
    // -infinity (its target is exactly the mass of the terms it cannot share: a tight set of the
    // outer system) has a near-singular Hessian row and a Newton component of thousands, and
    // scaling by it froze the other tokens' useful moves (measured: peaked (100, 2), tau = 1e-4,
    // the outer gradient stuck at 7.5e-4 against a threshold of 2.6e-4, where the LP optimum over
    // the allocations is 3.3e-5). The clipped step must still descend; otherwise it is scaled.
    // With the gauge (outer system: the objective is linear along 1) the step is first shifted so
    // that its median component is 0: the tokens heading for -infinity are then the ones clipped.
    constexpr double kLongestStep = 30.0;
    if (const double longest = d.cwiseAbs().maxCoeff(); longest > kLongestStep) {
      Eigen::VectorXd clipped = d;
      if (gauge) {
        std::vector<double> sorted(d.data(), d.data() + m);
        std::nth_element(sorted.begin(), sorted.begin() + m / 2, sorted.end());
        clipped.array() -= sorted[m / 2];
      }
      clipped = clipped.cwiseMax(-kLongestStep).cwiseMin(kLongestStep);
      d = g.dot(clipped) < 0.0 ? clipped : Eigen::VectorXd(d * (kLongestStep / longest));
    }
    if (!curvature.dense && !(g.dot(d) < 0.0)) {
      // Conjugate gradients on a Hessian whose diagonal spans hundreds of orders of magnitude
      // (tokens pushed to a = -390 on the way to a minimiser at infinity) can end without
      // descent: the preconditioned gradient step still descends.
      d = -(curvature.diagonal.array() + lambda).inverse().matrix().cwiseProduct(descent);
      if (gauge) d.array() -= d.mean();
    }
    const double slope = g.dot(d);
    if (!(slope < 0.0)) {  // no descent left at machine precision
      certify();
      return report;
    }

    // A trial point the budget refuses (its terms cannot be interpolated) is backtracked like one
    // that does not decrease enough.
    Eigen::VectorXd trial = report.solution + d;
    bool evaluated =
        evaluate_trial(trial, trial_gradient, trial_curvature, report.gradient_l1 <= kCertifyAhead * threshold);
    for (double step = 0.5; !evaluated || (trial_gradient.lpNorm<1>() >= report.gradient_l1 &&
                                           trial_gradient.dot(d) > kSufficientDecrease * slope);
         step *= 0.5) {
      if (step < 1e-10) {
        report.over_budget = !evaluated;
        certify();
        return report;
      }
      trial = report.solution + step * d;
      evaluated = evaluate_trial(trial, trial_gradient, trial_curvature);
    }
    report.solution = std::move(trial);
    std::swap(g, trial_gradient);
    std::swap(curvature, trial_curvature);  // swaps storage, not contents: no copy
  }
}

}  // namespace multidraft
