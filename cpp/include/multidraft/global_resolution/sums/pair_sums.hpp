// The full-size pair terms of n = 2 in the Global Resolution objectives ([GR] Eqs. 12 and 15,
// |U| = 2, weight 2 q_k q_l for every EGF base) without enumerating the m^2 / 2 pairs: each
// variable's sums over its partners k,
//   A_l = sum_{k != l} q_k / s_lk,   B_l = sum_{k != l} q_k / s_lk^2,   s_lk = c + x_l + x_k,
// are Stieltjes transforms at y_l = c + x_l less the k = l term, interpolated on a log-axis
// Chebyshev grid (chebyshev_pieces.hpp): about (nodes + N) m operations instead of m^2 / 2
// divisions. The gradient's error is bounded and reported (gradient_error) so that the stopping
// rule and the [GR] Lemma 6.6 bounds stay certified (docs/design/summation.md, "Pair terms").
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/global_resolution/sums/chebyshev_pieces.hpp"

namespace multidraft {

class PairSums {
 public:
  // Worth it when interpolation beats the enumerated pass: the two break even near
  // m = 30 + nodes / 2 (docs/benchmarks/summation-internals.md, "Pair sums against enumeration").
  static bool pays(int m, double u_span) {
    return m > 30 + ChebyshevPieces::pieces_for(u_span) * ChebyshevPieces::kNodes / 2;
  }

  // Adds the pair terms (weight 2 q_k q_l) to the gradient and Hessian diagonal at the sorted
  // points' x = e^a; returns their accepted mass sum_U w_U X_U / (c + X_U) = sum_l 2 q_l x_l A_l.
  double evaluate(const SortedPoints& sorted, const std::vector<double>& q, double c, Eigen::VectorXd& gradient,
                  Eigen::VectorXd& diagonal) {
    const int m = sorted.size();
    const std::vector<int>& order = sorted.order;
    const double* __restrict xs = sorted.x.data();
    qs_.resize(m);
    for (int j = 0; j < m; ++j) qs_[j] = q[order[j]];
    // F(y) = sum_k q_k / (y + x_k) and F2 with the squares, at the nodes.
    Eigen::VectorXd first, second, F, F2;
    stieltjes_at_nodes(sorted.grid, sorted.active, xs, qs_.data(), m, first, second, inverse_squares_);
    sorted.points.interpolate(sorted.grid.coefficients(first), sorted.grid.coefficients(second), F, &F2);
    diagonal_.resize(m);
    self_.resize(m);
    double accepted = 0.0, bound_base = 0.0;
    for (int j = 0; j < m; ++j) {
      self_[j] = 1.0 / (c + 2.0 * xs[j]);  // the k = l term, not a pair
      const double A = F[j] - qs_[j] * self_[j], B = F2[j] - qs_[j] * self_[j] * self_[j];
      const double own = 2.0 * qs_[j] * xs[j];
      gradient[order[j]] += own * A;
      diagonal_[j] = own * (A - xs[j] * B);
      diagonal[order[j]] += diagonal_[j];
      accepted += own * A;
      bound_base += own * F[j];
    }
    // |error of A_l| <= eps F(y_l)(true) <= eps / (1 - eps) F(y_l)(interpolated)
    // (docs/design/summation.md, "Pair terms").
    static const double eps = ChebyshevPieces::relative_error(1);
    gradient_error_ = eps / (1.0 - eps) * bound_base;
    return accepted;
  }

  // out += (pair terms' Hessian) v at the points of the last evaluate: out_l += diagonal_l v_l -
  // 2 q_l x_l C_l, C_l = G(y_l) - q_l x_l v_l / (c + 2 x_l)^2, G(y) = sum_k q_k x_k v_k / (y + x_k)^2.
  void hessian_times(const SortedPoints& sorted, const Eigen::VectorXd& v, Eigen::VectorXd& out) const {
    const int m = sorted.size();
    const std::vector<int>& order = sorted.order;
    Eigen::VectorXd moments(m), node_values, G;
    for (int j = 0; j < m; ++j) moments[j] = qs_[j] * sorted.x[j] * v[order[j]];
    scatter_active(sorted.active, inverse_squares_.matrix() * moments, sorted.grid.nodes(), node_values);
    sorted.points.interpolate(sorted.grid.coefficients(node_values), G);
    for (int j = 0; j < m; ++j)
      out[order[j]] += diagonal_[j] * v[order[j]] -
                       2.0 * qs_[j] * sorted.x[j] * (G[j] - moments[j] * self_[j] * self_[j]);
  }

  // Bound on the L1 error of the gradient the last evaluate added.
  double gradient_error() const { return gradient_error_; }

 private:
  // All in the order of SortedPoints::order.
  Eigen::VectorXd qs_, diagonal_, self_;  // q; the pairs' Hessian diagonal; 1 / (c + 2 x)
  GrowingMatrix inverse_squares_;         // active node x variable: 1 / (y + x)^2
  double gradient_error_ = 0.0;
};

}  // namespace multidraft
