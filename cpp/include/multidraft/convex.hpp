// Grouped LogSumExp objectives of Global Resolution and their damped Newton minimiser
// (seed 000 Theorems 6.4 and 6.5, Eqs. 12 and 15, in the grouped form of Appendix K):
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

namespace multidraft {

// Terms over variables 0..m-1 in CSR form: term k has members[offsets[k] .. offsets[k+1]).
struct GroupedTerms {
  int variables = 0;
  std::vector<std::int64_t> offsets{0};
  std::vector<int> members;
  std::vector<double> weight;

  std::size_t size() const { return weight.size(); }
};

struct ConvexObjective {
  GroupedTerms terms;
  Eigen::VectorXd target;  // t_i: outer row targets p_i, or inner p(i)
  bool slack = false;      // inner problem: a slack token with a = 0 in every term

  // Value; gradient and Hessian when asked (nullptr skips them).
  double evaluate(const Eigen::VectorXd& a, Eigen::VectorXd* gradient, Eigen::MatrixXd* hessian) const {
    const int m = terms.variables;
    double value = -target.dot(a);
    if (gradient) *gradient = -target;
    if (hessian) hessian->setZero(m, m);
    std::vector<double> share;
    for (std::size_t k = 0; k < terms.size(); ++k) {
      const std::int64_t begin = terms.offsets[k], end = terms.offsets[k + 1];
      double shift = slack ? 0.0 : -std::numeric_limits<double>::infinity();
      for (std::int64_t j = begin; j < end; ++j) shift = std::max(shift, a[terms.members[j]]);
      double total = slack ? std::exp(-shift) : 0.0;
      share.assign(end - begin, 0.0);
      for (std::int64_t j = begin; j < end; ++j) total += share[j - begin] = std::exp(a[terms.members[j]] - shift);
      const double w = terms.weight[k];
      value += w * (shift + std::log(total));
      if (!gradient) continue;
      for (double& s : share) s /= total;
      for (std::int64_t j = begin; j < end; ++j) {
        const int u = terms.members[j];
        const double su = share[j - begin];
        (*gradient)[u] += w * su;
        if (!hessian) continue;
        (*hessian)(u, u) += w * su;
        for (std::int64_t l = begin; l < end; ++l) (*hessian)(u, terms.members[l]) -= w * su * share[l - begin];
      }
    }
    return value;
  }
};

struct NewtonReport {
  Eigen::VectorXd solution;
  double gradient_l1 = 0.0;  // L1 norm of the true gradient at `solution`
  int iterations = 0;
  bool converged = false;
};

// Damped Newton with the exact Hessian (spec §2.9): solve (H + lambda I) d = -g, lambda raised
// tenfold until the Cholesky factorisation succeeds; Armijo backtracking. With `gauge` (outer
// problem) the objective is linear along 1, so g and d are centred: the 1-component of the
// gradient is -delta_T whatever a is. Stops when ||g||_1 <= threshold (the L1 norm the theory
// needs, not SciPy's max-norm; spec §8.4).
inline NewtonReport minimise_newton(const ConvexObjective& objective, Eigen::VectorXd start, double threshold,
                                    int max_iterations, bool gauge) {
  NewtonReport report;
  const int m = objective.terms.variables;
  report.solution = std::move(start);
  if (m == 0) {
    report.converged = true;
    return report;
  }
  Eigen::VectorXd g(m), trial_gradient(m), d(m);
  Eigen::MatrixXd H(m, m);
  double f = objective.evaluate(report.solution, &g, &H);
  for (;; ++report.iterations) {
    report.gradient_l1 = g.lpNorm<1>();
    if (report.gradient_l1 <= threshold) {
      report.converged = true;
      return report;
    }
    if (report.iterations >= max_iterations) return report;
    Eigen::VectorXd descent = g;
    if (gauge) descent.array() -= descent.mean();
    double lambda = 1e-12 * std::max(1.0, H.trace() / m);
    Eigen::LLT<Eigen::MatrixXd> factor;
    for (int attempt = 0; attempt < 40; ++attempt, lambda *= 10.0) {
      factor.compute(H + lambda * Eigen::MatrixXd::Identity(m, m));
      if (factor.info() == Eigen::Success) break;
    }
    d = -factor.solve(descent);
    if (gauge) d.array() -= d.mean();
    const double slope = g.dot(d);
    if (!(slope < 0.0)) return report;  // no descent left at machine precision
    double step = 1.0;
    Eigen::VectorXd trial;
    double f_trial = f;
    for (; step >= 1e-10; step *= 0.5) {
      trial = report.solution + step * d;
      f_trial = objective.evaluate(trial, nullptr, nullptr);
      if (f_trial <= f + 1e-4 * step * slope) break;
    }
    if (step < 1e-10) return report;
    report.solution = std::move(trial);
    f = objective.evaluate(report.solution, &g, &H);
  }
}

}  // namespace multidraft
