// The damped Newton minimiser of Global Resolution's convex systems (objective.hpp), in place of
// the L-BFGS-B of [GR] Appendix K: Newton's direction with the exact Hessian (dense Cholesky for
// small systems, conjugate gradients otherwise), a line search that needs gradients only, and a
// stopping test on the certified L1 norm of the gradient, the norm [GR] Theorems 6.4 and 6.5 and
// Lemma 6.6 bound the rows' deviation with (docs/design/certified-bounds.md).
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/global_resolution/objective.hpp"
#include "multidraft/global_resolution/workspace.hpp"  // ConvexWorkspace

namespace multidraft {

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
// system instead of a dense Cholesky factorisation (O(m^3)).
constexpr int kDenseNewtonLimit = 250;
// Below that limit, the dense Hessian and its factorisation (m^3 / 3 flops) are used only when a
// pass over the terms costs about as much (m^3 <= this ratio times the term count): n >= 3, where
// the terms grow like m^n / n!, or tiny m. For n = 2 (about m^2 / 2 terms) two or three
// Hessian-vector passes per iteration are cheaper from m ~ 20
// (docs/benchmarks/global-resolution-internals.md, "Dense or matrix-free Newton").
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
// direction's sums; the preconditioned residual z is never stored): with m = 32000 the vectors
// spill out of L2, and one Eigen expression per update (nine passes) cost more than the Hessian
// products (docs/benchmarks/global-resolution-internals.md, "Fused conjugate gradients"). The
// projections onto the zero-mean subspace enter through the sums: (x - mean x).y = x.y - mean x sum y.
// The loops stay here: moved into detail/gr_kernels.hpp, loops that round may compile to other
// vector code and change the last bits.
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

// One damped Newton solve (minimise_newton below), its steps as member functions over the
// solve's state: the current point and gradient (report.solution, g), the direction d, the
// trial point's gradient and the two curvatures (the workspace's: swapped, never copied).
class DampedNewton {
 public:
  DampedNewton(ConvexObjective& objective, double threshold, int max_iterations, bool gauge,
               ConvexWorkspace& workspace, double reach)
      : objective_(objective),
        threshold_(threshold),
        max_iterations_(max_iterations),
        gauge_(gauge),
        workspace_(workspace),
        reach_(reach),
        m_(objective.terms.variables),
        curvature_(workspace.curvature),
        trial_curvature_(workspace.trial_curvature) {}

  NewtonReport run(Eigen::VectorXd start) {
    report_.solution = std::move(start);
    if (m_ == 0) {
      report_.converged = true;
      return std::move(report_);
    }
    g_.resize(m_);
    d_.resize(m_);
    trial_gradient_.resize(m_);
    curvature_.dense = trial_curvature_.dense = use_dense_newton(objective_, report_.solution);
    // A start the budget refuses (ConvexObjective::evaluate) ends the solve (no gradient known).
    if (!evaluate_leveled(report_.solution, g_, curvature_, coarse_)) {
      report_.over_budget = true;
      report_.gradient_l1 = std::numeric_limits<double>::infinity();
      return std::move(report_);
    }
    stay_in_range_ = objective_.pass_bounds(report_.solution).largest <= reach_;
    for (;; ++report_.iterations) {
      if (stops()) return std::move(report_);
      if (level_jump()) continue;  // counts as an iteration
      if (!newton_direction()) return std::move(report_);
      if (!line_search()) return std::move(report_);
    }
  }

 private:
  // Iterates take LaplaceSums' coarse rule (a third of its nodes); the point whose gradient the
  // report returns (its rows, gradient_error) is evaluated with the certified rule (again, unless
  // its trial already was: kCertifyAhead). The stopping test uses the bound of the rule that
  // evaluated the point: a coarse pass's bound holds for the true gradient too, and the certified
  // pass confirms it (or, within twice its own error of the threshold, Newton goes on with
  // certified passes only). docs/design/certified-bounds.md writes the bounds up.
  //
  // Inner problems on the grid: each new point first moves to its level (ConvexObjective::evaluate),
  // within kLevelTolerance of the threshold and inside `reach`. The terms couple the variables
  // mostly through that one mode, which Newton's quadratic model handles worst (x = e^a) and
  // conjugate gradients last (docs/benchmarks/global-resolution-internals.md, "Leveled passes").
  // Exact line minimisation along 1 only lowers the convex objective: the descent tests below
  // still hold.
  static constexpr double kLevelCap = 30.0, kLevelTolerance = 0.02;
  bool evaluate_leveled(Eigen::VectorXd& x, Eigen::VectorXd& gradient, Curvature& at, bool rule_coarse) {
    LaplaceInterpolation::Level* request = nullptr;
    if (objective_.slack) {
      level_.aim = objective_.level_aim(threshold_);
      level_.tolerance = kLevelTolerance * threshold_;
      level_.low = std::max(-kLevelCap, -reach_ - x.minCoeff());
      level_.high = std::min(kLevelCap, reach_ - x.maxCoeff());
      if (level_.low <= 0.0 && level_.high >= 0.0) request = &level_;
    }
    if (!objective_.evaluate(x, gradient, at, rule_coarse, request)) return false;
    if (request) x.array() += request->shift;
    return true;
  }

  // A point beyond the unshifted range (ConvexObjective::unshifted_at) turns the implicit terms
  // into stored, shifted ones for the rest of the solve (ConvexObjective::evaluate), several times
  // slower. While the iterates are inside it, a trial point outside is backtracked like one the
  // budget refuses: a stopping threshold of 5 tau never needs |a| near 600, only an overlong
  // Newton or CG step gets there. (Tests that lower objective.unshifted_limit to force the stored
  // path are not affected.)
  bool evaluate_trial(Eigen::VectorXd& x, Eigen::VectorXd& gradient, Curvature& at, bool last = false) {
    if (stay_in_range_ && objective_.pass_bounds(x).largest > reach_) return false;
    return evaluate_leveled(x, gradient, at, coarse_ && !last);
  }

  // A trial from a point within kCertifyAhead times the threshold is likely the last: it takes the
  // certified rule at once, which then spares the coarse pass at the final point. A certified pass
  // costs more than a coarse one (twice the nodes, 16 Chebyshev points for 10), so this pays only
  // where enough such trials end the solve (docs/benchmarks/global-resolution-internals.md,
  // "Certifying ahead").
  static constexpr double kCertifyAhead = 60.0;
  bool likely_last() const { return report_.gradient_l1 <= kCertifyAhead * threshold_; }

  void record() {  // the gradient itself is copied once, at the end (certify)
    report_.gradient_l1 = g_.lpNorm<1>() + curvature_.gradient_error;  // a bound on the true one
    report_.gradient_error = curvature_.gradient_error;
    report_.accepted = curvature_.accepted;
    report_.interpolated = curvature_.interpolated;
  }

  // Same point, same summation (it depends on the point only), so the budget accepts it again.
  // Every return after the first evaluation passes here.
  void certify() {
    if (curvature_.coarse) {
      objective_.evaluate(report_.solution, g_, curvature_);
      record();
    }
    report_.gradient = g_;
  }

  // The certified stopping test ||g||_1 <= threshold (the L1 norm the theory needs, not the
  // max-norm of SciPy's early termination in [GR] Appendix K), then the iteration cap and
  // stagnation. Returns true when the solve ends (report certified).
  // Stagnation: damped Newton on a convex objective keeps lowering ||g||_1, near the solution
  // quadratically; when kStagnationWindow iterations lowered it by less than 10% the iterates are
  // crawling (a warm start deep in a flat region, one a heading for infinity by at most
  // kLongestStep per step), and more iterations only cost time: the caller restarts cold.
  static constexpr int kStagnationWindow = 2;
  bool stops() {
    record();
    if (report_.gradient_l1 <= threshold_) {
      certify();
      if (report_.gradient_l1 <= threshold_) {
        report_.converged = true;
        return true;
      }
      coarse_ = false;
    }
    if (report_.iterations >= max_iterations_) {
      certify();
      return true;
    }
    history_.push_back(report_.gradient_l1);
    if (history_.size() > kStagnationWindow &&
        report_.gradient_l1 > 0.9 * history_[history_.size() - 1 - kStagnationWindow]) {
      certify();
      return true;
    }
    return false;
  }

  // The inner problem's jump along 1 (ConvexObjective::level_shift), within `reach` (beyond,
  // evaluate_trial refuses it and the pass is repeated). Returns true when the jumped-to point
  // was taken.
  bool level_jump() {
    double shift = objective_.level_shift(g_, threshold_);
    if (stay_in_range_) shift = std::min(shift, reach_ - report_.solution.maxCoeff());
    if (!(shift > 0.0)) return false;
    report_.solution.array() += shift;
    if (evaluate_trial(report_.solution, g_, curvature_, likely_last())) return true;
    report_.solution.array() -= shift;  // refused by the budget: a Newton step from where we were
    objective_.evaluate(report_.solution, g_, curvature_, coarse_);  // accepted before, so accepted again
    return false;
  }

  // Within kJacobiAhead times the threshold, an inner problem on the grid takes the Jacobi step
  // -g / diagonal instead of conjugate gradients: with its level found by every pass what is left
  // is nearly diagonal, and the step cuts the gradient norm about tenfold, enough for the last
  // one and without Hessian products; wider, the Jacobi trial misses the threshold more often than
  // it saves (docs/benchmarks/global-resolution-internals.md, "Jacobi steps").
  static constexpr double kJacobiAhead = 5.0;
  // Newton's direction d: solve (H + lambda I) d = -g, lambda raised tenfold until the Cholesky
  // factorisation succeeds (large problems: conjugate gradients, or the Jacobi step). With `gauge`
  // (outer problem) the objective is linear along 1, so g and d are centred: the 1-component of
  // the gradient is -delta_T whatever a is. Returns false when no descent is left (report certified).
  bool newton_direction() {
    Eigen::VectorXd descent = g_;
    if (gauge_) descent.array() -= descent.mean();
    double lambda = 1e-12 * std::max(1.0, curvature_.diagonal.sum() / m_);
    if (curvature_.dense) {
      Eigen::LLT<Eigen::MatrixXd> factor;
      for (int attempt = 0; attempt < 40; ++attempt, lambda *= 10.0) {
        factor.compute(curvature_.hessian + lambda * Eigen::MatrixXd::Identity(m_, m_));
        if (factor.info() == Eigen::Success) break;
      }
      d_ = -factor.solve(descent);
    } else if (objective_.slack && curvature_.on_grid && report_.gradient_l1 <= kJacobiAhead * threshold_) {
      d_ = -(curvature_.diagonal.array() + lambda).inverse().matrix().cwiseProduct(descent);
    } else {
      d_ = newton_direction_cg(objective_, curvature_, g_, lambda, gauge_, workspace_.product_scratch);
    }
    if (gauge_) d_.array() -= d_.mean();
    clip_step();
    if (!curvature_.dense && !(g_.dot(d_) < 0.0)) {
      // Conjugate gradients on a Hessian whose diagonal spans hundreds of orders of magnitude
      // (tokens pushed to a = -390 on the way to a minimiser at infinity) can end without
      // descent: the preconditioned gradient step still descends.
      d_ = -(curvature_.diagonal.array() + lambda).inverse().matrix().cwiseProduct(descent);
      if (gauge_) d_.array() -= d_.mean();
    }
    slope_ = g_.dot(d_);
    if (!(slope_ < 0.0)) {  // no descent left at machine precision
      certify();
      return false;
    }
    return true;
  }

  // No a moves by more than kLongestStep: beyond, the quadratic model means nothing (e^30 ~ 1e13),
  // and a pass's cost grows with the spread of a (LaplaceSums' nodes); a warm start's first step
  // could otherwise send an a to hundreds. Each component is clipped, not the whole step scaled:
  // a token whose minimiser lies at -infinity (its target is exactly the mass of the terms it
  // cannot share: a tight set of the outer system) has a near-singular Hessian row and a Newton
  // component of thousands, and scaling by it froze the other tokens' useful moves
  // (docs/benchmarks/global-resolution-internals.md, "Clipped Newton steps"). The clipped step
  // must still descend; otherwise it is scaled. With the gauge (outer system: the objective is
  // linear along 1) the step is first shifted so that its median component is 0: the tokens
  // heading for -infinity are then the ones clipped.
  static constexpr double kLongestStep = 30.0;
  void clip_step() {
    const double longest = d_.cwiseAbs().maxCoeff();
    if (!(longest > kLongestStep)) return;
    Eigen::VectorXd clipped = d_;
    if (gauge_) {
      std::vector<double> sorted(d_.data(), d_.data() + m_);
      std::nth_element(sorted.begin(), sorted.begin() + m_ / 2, sorted.end());
      clipped.array() -= sorted[m_ / 2];
    }
    clipped = clipped.cwiseMax(-kLongestStep).cwiseMin(kLongestStep);
    d_ = g_.dot(clipped) < 0.0 ? clipped : Eigen::VectorXd(d_ * (kLongestStep / longest));
  }

  // The full step is taken when it lowers ||g||_1, which near the solution it always does;
  // otherwise the step is halved until the directional derivative shows sufficient decrease:
  // the objective is convex, so f(x + t d) - f(x) <= t g(x + t d)·d, and g(x + t d)·d <= c g·d
  // implies Armijo's condition f(x + t d) <= f(x) + c t g·d without computing a value (which
  // costs a logarithm per term). A trial point the budget refuses (its terms cannot be
  // interpolated) is backtracked like one that does not decrease enough. Returns false when the
  // step vanished (report certified); else the trial point becomes the current one.
  static constexpr double kSufficientDecrease = 1e-4;
  bool line_search() {
    Eigen::VectorXd trial = report_.solution + d_;
    bool evaluated = evaluate_trial(trial, trial_gradient_, trial_curvature_, likely_last());
    for (double step = 0.5; !evaluated || (trial_gradient_.lpNorm<1>() >= report_.gradient_l1 &&
                                           trial_gradient_.dot(d_) > kSufficientDecrease * slope_);
         step *= 0.5) {
      if (step < 1e-10) {
        report_.over_budget = !evaluated;
        certify();
        return false;
      }
      trial = report_.solution + step * d_;
      evaluated = evaluate_trial(trial, trial_gradient_, trial_curvature_);
    }
    report_.solution = std::move(trial);
    std::swap(g_, trial_gradient_);
    std::swap(curvature_, trial_curvature_);  // swaps storage, not contents: no copy
    return true;
  }

  ConvexObjective& objective_;
  const double threshold_;
  const int max_iterations_;
  const bool gauge_;
  ConvexWorkspace& workspace_;
  const double reach_;
  const int m_;
  Curvature& curvature_;
  Curvature& trial_curvature_;
  NewtonReport report_;
  Eigen::VectorXd g_, d_, trial_gradient_;
  double slope_ = 0.0;  // g.d of the current direction
  bool coarse_ = true;
  bool stay_in_range_ = false;
  LaplaceInterpolation::Level level_;
  std::vector<double> history_;
};

// Damped Newton with the exact Hessian (DampedNewton), after a level jump where it pays
// (ConvexObjective::level_shift), from `start` until ||g||_1 <= threshold. `gauge`: the outer
// problem (linear along 1). `reach`: trial points whose pass range
// (ConvexObjective::PassBounds::largest) exceeds it are backtracked. `workspace`: this system's
// storage (GlobalResolutionWorkspace).
inline NewtonReport minimise_newton(ConvexObjective& objective, Eigen::VectorXd start, double threshold,
                                    int max_iterations, bool gauge, ConvexWorkspace& workspace,
                                    double reach = kUnshiftedLimit) {
  return DampedNewton(objective, threshold, max_iterations, gauge, workspace, reach).run(std::move(start));
}

}  // namespace multidraft
