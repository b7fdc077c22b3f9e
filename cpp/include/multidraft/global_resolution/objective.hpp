// The grouped LogSumExp objectives of Global Resolution ([GR] Theorems 6.4 and 6.5, Eqs. 12 and
// 15, grouped by the sets of their tokens as in Appendix K, Eqs. 117 to 121):
//   outer  Phi_T(a)   = sum_U w_U log(sum_{u in U} e^{a_u})      - sum_i t_i a_i
//   inner  Theta_T(a) = sum_U c_U log(1 + sum_{u in U} e^{a_u})  - sum_i t_i a_i
// Gradient: (mass allocated to i) - t_i (the rows of Eqs. 14 and 17 minus their targets);
// Hessian: softmax Jacobians scattered into |U| x |U| blocks (derived from Eqs. 12 and 15; not
// written in [GR]). Every log-sum-exp is shifted by its maximum (including the slack's 0).
// The weights w_U, c_U are Eqs. 118 and 120 in exponential-generating-function form (no
// cancellation): n! [x^n] e^{b x} prod_{u in U} (e^{q_u x} - 1), b = Q(H*) (outer) or the mass of
// the inner tokens with p = 0 (inner). The terms are summed as docs/design/summation.md writes.
// Minimised by newton.hpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/core/draft_scheme.hpp"  // count_small_subsets, exponential_base
#include "multidraft/detail/gr_kernels.hpp"
#include "multidraft/global_resolution/sums/full_subsets.hpp"
#include "multidraft/global_resolution/sums/laplace_interpolation.hpp"
#include "multidraft/global_resolution/sums/laplace_sums.hpp"
#include "multidraft/global_resolution/sums/pair_sums.hpp"
#include "multidraft/otlp/subset_selection.hpp"  // integer_power

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
// to a spread of about 354, and solves do reach beyond it (docs/benchmarks/global-resolution-internals.md,
// "Outer spread limit").
constexpr double kOuterSpreadLimit = 300.0;
// n = 2 takes Laplace sums on the grid (LaplaceInterpolation) rather than pair interpolation
// (PairSums) from this many variables, where the grid pays (full vocabularies:
// docs/benchmarks/global-resolution-internals.md, "Pair grid"); below, pair interpolation keeps the
// truncated plans' times.
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

  // What the stored terms are built from (build_grouped_terms, below): the EGF
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
  // every term R(a + s 1) is about R e^{-s}: the jump aims at R = threshold / 4 (without it Newton
  // crawls along the level: docs/benchmarks/global-resolution-internals.md, "Level shift").
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
    double low, high;
    detail::value_range(a.data(), m, low, high);
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
    bool unshifted;
    double offset;
    if (!prepare_pass(a, gradient, curvature, coarse, unshifted, offset)) return false;
    add_explicit_terms(a, unshifted, gradient, curvature);
    if (full.empty()) return true;
    add_implicit_terms(a, offset, gradient, curvature, coarse, level);
    return true;
  }

  // A pass's set-up at a: the powers e^{a - offset} when unshifted (|a - offset| <= unshifted_limit),
  // the summation, the stored terms it needs, and zeroed sums. Returns false (the budget refuses
  // the point) as evaluate.
  bool prepare_pass(const Eigen::VectorXd& a, Eigen::VectorXd& gradient, Curvature& curvature, bool coarse,
                    bool& unshifted_out, double& offset_out) {
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
    unshifted_out = unshifted;
    offset_out = offset;
    return true;
  }

  // The stored terms' softmax shares at a, added to the gradient, the Hessian diagonal (and the
  // dense Hessian) and the accepted mass; each term shifted by its maximum unless unshifted.
  void add_explicit_terms(const Eigen::VectorXd& a, bool unshifted, Eigen::VectorXd& gradient, Curvature& curvature) {
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
  }

  // The implicit n-subsets' terms (full_subsets.hpp), summed as the pass chose: on the grid
  // (LaplaceInterpolation, which also moves the point to its level), by LaplaceSums, by pair
  // interpolation (PairSums), or enumerated.
  void add_implicit_terms(const Eigen::VectorXd& a, double offset, Eigen::VectorXd& gradient, Curvature& curvature,
                          bool coarse, LaplaceInterpolation::Level* level) {
    const int m = terms.variables;
    const Eigen::VectorXd& power = curvature.power;
    const double constant = slack ? 1.0 : 0.0;
    if (curvature.on_grid) {
      curvature.accepted += curvature.grid_subsets.evaluate(power, a, offset, full.mass, full.size, bases, constant,
                                                            target, gradient, curvature.diagonal, coarse,
                                                            slack ? level : nullptr);
      curvature.gradient_error = curvature.grid_subsets.gradient_error();
      if (level && level->shift != 0.0) curvature.power *= std::exp(level->shift);  // as the grid scaled its copy
      return;
    }
    if (curvature.laplace) {
      curvature.accepted += curvature.subsets.evaluate(power, full.mass, full.size, bases, constant, gradient,
                                                       curvature.diagonal, coarse);
      curvature.gradient_error = curvature.subsets.gradient_error();
      return;
    }
    if (curvature.interpolated) {
      curvature.sorted.place(power, constant);
      curvature.accepted +=
          curvature.pairs.evaluate(curvature.sorted, full.mass, constant, gradient, curvature.diagonal);
      curvature.gradient_error = curvature.pairs.gradient_error();
      return;
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

  // Hessian-vector product from stored shares: each term adds w (s ∘ v - s (s · v)) (the softmax
  // Jacobian of the term's log-sum-exp, as in the header).
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

// The single terms {u} (n >= 2) in closed form: n! [x^n] e^{b x} (e^{q_u x} - 1)
// = sum_{j<n} n! (b^j / j!) (q_u^{n-j} / (n-j)!), the sum ConvexObjective::append_stored_terms'
// subset search forms (a positive sum, no cancellation), without the search's per-subset set-up:
// flat drafts keep ~1000 singles per plan, a full vocabulary ~32000. A single is stored when a
// base gives it a positive weight. Every member's weights are written in place first, in one
// vectorised pass per base (n a compile-time constant for n <= 4), then compacted only if a
// member has none positive (q_u = 0). They become the first terms of `terms`, whatever it held
// (its extra_weight sized for the bases): its vectors are resized to them in place, not emptied
// and regrown, which would value-initialise each (a plan's workspace keeps them at ~32000 entries
// from plan to plan, and each spills out of L2).
inline void write_single_terms(const std::vector<double>& member_mass, int n, const std::vector<double>& bases,
                               GroupedTerms& terms) {
  const int m = static_cast<int>(member_mass.size()), B = static_cast<int>(bases.size());
  double n_factorial = 1.0;
  for (int d = 2; d <= n; ++d) n_factorial *= d;
  constexpr int kMaxBases = 2;  // the objective's and the inner acceptance's
  if (B > kMaxBases) throw std::invalid_argument("internal: at most two EGF bases");
  double base_coefficients[kMaxBases][kMaxTermSize + 1];  // [base][j] = b^j / j!
  for (int b = 0; b < B; ++b) exponential_base(bases[b], n, base_coefficients[b]);
  terms.offsets.resize(m + 1);
  terms.offsets[0] = 0;
  terms.members.resize(m);
  terms.weight.resize(m);
  for (auto& w : terms.extra_weight) w.resize(m);
  auto weights = [&](auto degree) {  // degree 0: n at run time
    constexpr int kDegree = decltype(degree)::value;
    const int N = kDegree > 0 ? kDegree : n;
    const double* mass = member_mass.data();
    for (int b = 0; b < B; ++b) {
      double* out = (b == 0 ? terms.weight : terms.extra_weight[b - 1]).data();
      const double* c = base_coefficients[b];
#pragma omp simd
      for (int k = 0; k < m; ++k) {
        double factor[kMaxTermSize + 1];  // q^d / d!
        factor[0] = 1.0;
        for (int d = 1; d <= N; ++d) factor[d] = factor[d - 1] * (mass[k] / d);
        double acc = 0.0;
        for (int j = 0; j < N; ++j) acc += c[j] * factor[N - j];
        out[k] = acc * n_factorial;
      }
    }
  };
  if (n == 2) weights(std::integral_constant<int, 2>());
  else if (n == 3) weights(std::integral_constant<int, 3>());
  else if (n == 4) weights(std::integral_constant<int, 4>());
  else weights(std::integral_constant<int, 0>());
  double* column[kMaxBases];  // each base's weights
  for (int b = 0; b < B; ++b) column[b] = (b == 0 ? terms.weight : terms.extra_weight[b - 1]).data();
  auto positive = [&](std::size_t t) {
    for (int b = 0; b < B; ++b)
      if (column[b][t] > 0.0) return true;
    return false;
  };
  std::size_t written = 0;
  for (int k = 0; k < m; ++k) {
    if (!positive(k)) continue;
    if (written != static_cast<std::size_t>(k))  // an earlier member had no positive weight: move this one down
      for (int b = 0; b < B; ++b) column[b][written] = column[b][k];
    terms.members[written] = k;
    ++written;
    terms.offsets[written] = static_cast<std::int64_t>(written);
  }
  terms.offsets.resize(written + 1);
  terms.members.resize(written);
  terms.weight.resize(written);
  for (auto& w : terms.extra_weight) w.resize(written);
}

// The grouped terms over the subsets U of T (|U| <= n) with EGF weights for one or more bases
// ([GR] Appendix K, Eqs. 118 and 120 in the EGF form of the header): the n-subsets implicitly (full_subsets.hpp: weight n! prod q_u for every base), the
// smaller ones stored (singles in closed form, write_single_terms; sizes 2..n-1 by
// ConvexObjective::append_stored_terms). bases[0] gives the objective's
// weights, each further base an `extra_weight` vector. Returns false when the terms to
// enumerate would exceed max_terms (the work budget): all of them, unless LaplaceSums may sum
// them (then only the singles, and ConvexObjective::evaluate refuses any point where it cannot).
inline bool build_grouped_terms(const std::vector<double>& member_mass, int n, const std::vector<double>& bases,
                                double max_terms, ConvexObjective& objective) {
  double count, members;
  const bool summable = objective.interpolation && LaplaceSums::handles(n);
  count_small_subsets(static_cast<std::int64_t>(member_mass.size()), summable ? 1 : n, count, members);
  if (count > max_terms) return false;
  objective.enumeration_budget = max_terms;
  GroupedTerms& terms = objective.terms;
  terms.variables = static_cast<int>(member_mass.size());
  terms.extra_weight.resize(bases.size() - 1);
  if (n < 2) {  // no singles (write_single_terms resizes the vectors in place otherwise)
    terms.offsets.assign(1, 0);
    terms.members.clear();
    terms.weight.clear();
    for (auto& w : terms.extra_weight) w.clear();
  }
  objective.full.assign(member_mass, n);
  objective.bases = bases;
  // sum over U != {} of n! [x^n] e^{b x} prod_U (e^{q_u x} - 1) = n! [x^n] e^{b x} (e^{Q_T x} - 1)
  double mass_T = 0.0;
  for (double q : member_mass) mass_T += q;
  objective.total_weight = integer_power(bases[0] + mass_T, n) - integer_power(bases[0], n);
  if (n >= 2) write_single_terms(member_mass, n, bases, terms);
  // Sizes 2..n-1 are built only when a pass enumerates them (LaplaceSums takes them otherwise).
  objective.stored_deferred = summable;
  for (int size = 2; size <= n - 1 && !objective.stored_deferred; ++size) objective.append_stored_terms(size);
  return true;
}

}  // namespace multidraft
