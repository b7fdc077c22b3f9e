// The pair terms (|U| = 2) of the Global Resolution objectives ([GR] Eqs. 12 and 15) without
// enumerating the m^2 / 2 pairs: the full-size terms of n = 2 (weight 2 q_k q_l) and the stored
// pairs of n = 3 (weight 6 b q_k q_l + 3 q_k^2 q_l + 3 q_k q_l^2, Appendix K's EGF coefficient
// for the base b). Both weights are sums of products, w_kl = sum_r own_r(l) partner_r(k)
// (PairWeights), so every quantity a pass needs is a sum over partners k of a kernel in
// s_lk = c + x_l + x_k (c = 1 with the slack token, 0 without):
//   A_l^r = sum_{k != l} partner_r(k) / s_lk,   B_l^r = sum_{k != l} partner_r(k) / s_lk^2,
//   C_l^r = sum_{k != l} partner_r(k) x_k v_k / s_lk^2           (Hessian-vector products),
// that is a Stieltjes transform F(y) = sum_k mu_k / (y + x_k)^p at y_l = c + x_l, minus the
// k = l term, interpolated from its values at the nodes of a log-axis Chebyshev grid
// (chebyshev_pieces.hpp). Then gradient_l += x_l sum_r own_r(l) A_l^r, Hessian_ll +=
// x_l sum_r own_r(l) (A_l^r - x_l B_l^r). A pass costs about (nodes + N) m operations instead of
// m^2 / 2 divisions (m = 1000: 22 to 130 nodes). The gradient's error is bounded and reported
// (gradient_error) so that the stopping rule and the Lemma 6.6 bounds stay certified.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/chebyshev_pieces.hpp"

namespace multidraft {

// Pair weights w_kl = sum_r own[r][l] partner[r][k] (symmetric in k and l), and the same form
// for the weights that count accepted mass (another EGF base); at most two ranks.
struct PairWeights {
  std::vector<std::vector<double>> partner, own, accepted;
  int ranks() const { return static_cast<int>(partner.size()); }
};

class PairSums {
 public:
  // Worth it when interpolation beats the enumerated pass. Measured (Intel Xeon, m = 40 to 4000):
  // an evaluate costs about m (25 + 0.25 nodes) ns interpolated against 0.18 m^2 ns enumerated,
  // a Hessian-vector product m (3 + 0.1 nodes) against 0.17 m^2; with two products per evaluate
  // the two break even near m = 30 + nodes / 2.
  static bool pays(int m, double u_span) {
    return m > 30 + ChebyshevPieces::pieces_for(u_span) * ChebyshevPieces::kNodes / 2;
  }

  // Adds the pair terms to the gradient and Hessian diagonal at the sorted points' x = e^a;
  // returns their accepted mass sum_U w'_U X_U / (c + X_U) = sum_l x_l sum_r accepted_r(l) A_l^r.
  double evaluate(const SortedPoints& sorted, const PairWeights& weights, double c, Eigen::VectorXd& gradient,
                  Eigen::VectorXd& diagonal) {
    const int m = sorted.size(), R = weights.ranks();
    const std::vector<int>& order = sorted.order;
    const double* __restrict xs = sorted.x.data();
    partner_.resize(R, m);
    own_.resize(R, m);
    for (int j = 0; j < m; ++j)
      for (int r = 0; r < R; ++r) partner_(r, j) = weights.partner[r][order[j]], own_(r, j) = weights.own[r][order[j]];
    // F_r(y) = sum_k partner_r(k) / (y + x_k) and F2_r with the squares, at the nodes.
    Eigen::VectorXd first, second;
    const Eigen::VectorXd partner0 = partner_.row(0).transpose();
    stieltjes_at_nodes(sorted.grid, sorted.active, xs, partner0.data(), m, first, second, inverse_squares_,
                       R > 1 ? &inverses_ : nullptr);
    diagonal_.setZero(m);
    self_.resize(m);
    for (int j = 0; j < m; ++j) self_[j] = 1.0 / (c + 2.0 * xs[j]);  // the k = l term, not a pair
    double accepted = 0.0, bound_base = 0.0;
    Eigen::VectorXd F, F2;
    for (int r = 0; r < R; ++r) {
      if (r > 0) {
        const Eigen::VectorXd partner = partner_.row(r).transpose();
        scatter_active(sorted.active, inverses_.matrix() * partner, sorted.grid.nodes(), first);
        scatter_active(sorted.active, inverse_squares_.matrix() * partner, sorted.grid.nodes(), second);
      }
      sorted.points.interpolate(sorted.grid.coefficients(first), sorted.grid.coefficients(second), F, &F2);
      for (int j = 0; j < m; ++j) {
        const double A = F[j] - partner_(r, j) * self_[j], B = F2[j] - partner_(r, j) * self_[j] * self_[j];
        const double own = own_(r, j) * xs[j];
        gradient[order[j]] += own * A;
        diagonal_[j] += own * (A - xs[j] * B);
        accepted += weights.accepted[r][order[j]] * xs[j] * A;
        bound_base += std::abs(own) * F[j];
      }
    }
    for (int j = 0; j < m; ++j) diagonal[order[j]] += diagonal_[j];
    // |error of A_l^r| <= eps F_r(y_l)(true) <= eps / (1 - eps) F_r(y_l)(interpolated).
    static const double eps = ChebyshevPieces::relative_error(1);
    gradient_error_ = eps / (1.0 - eps) * bound_base;
    return accepted;
  }

  // out += (pair terms' Hessian) v at the points of the last evaluate: out_l += diagonal_l v_l -
  // x_l sum_r own_r(l) C_l^r, C_l^r = G_r(y_l) - partner_r(l) x_l v_l / (c + 2 x_l)^2,
  // G_r(y) = sum_k partner_r(k) x_k v_k / (y + x_k)^2.
  void hessian_times(const SortedPoints& sorted, const Eigen::VectorXd& v, Eigen::VectorXd& out) const {
    const int m = sorted.size(), R = static_cast<int>(partner_.rows());
    const std::vector<int>& order = sorted.order;
    Eigen::VectorXd z(m), moments(m), node_values, G;
    for (int j = 0; j < m; ++j) z[j] = sorted.x[j] * v[order[j]];
    for (int j = 0; j < m; ++j) out[order[j]] += diagonal_[j] * v[order[j]];
    for (int r = 0; r < R; ++r) {
      moments = partner_.row(r).transpose().cwiseProduct(z);
      scatter_active(sorted.active, inverse_squares_.matrix() * moments, sorted.grid.nodes(), node_values);
      sorted.points.interpolate(sorted.grid.coefficients(node_values), G);
      for (int j = 0; j < m; ++j)
        out[order[j]] -= own_(r, j) * sorted.x[j] * (G[j] - moments[j] * self_[j] * self_[j]);
    }
  }

  // Bound on the L1 error of the gradient the last evaluate added.
  double gradient_error() const { return gradient_error_; }

 private:
  // All in the order of SortedPoints::order.
  Eigen::VectorXd diagonal_, self_;  // the pairs' Hessian diagonal; 1 / (c + 2 x)
  RowMajorMatrix partner_, own_;     // ranks x variables
  GrowingMatrix inverse_squares_, inverses_;  // active node x variable: 1 / (y + x)^2, 1 / (y + x)
  double gradient_error_ = 0.0;
};

}  // namespace multidraft
