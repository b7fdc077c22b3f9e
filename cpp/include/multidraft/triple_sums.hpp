// The triple terms of n = 3 ([GR] Eqs. 12 and 15, |U| = 3, weight w_U = 6 q_j q_k q_l)
// without enumerating the m^3 / 6 triples, by the Stieltjes transforms of pair_sums.hpp one level
// up. With s_U = c + X_U, y_l = c + x_l and the transforms (p = 1, 2)
//   F1_p(y) = sum_k q_k / (y + x_k)^p,   F2_p(y) = sum_{j < k} q_j q_k / (y + x_j + x_k)^p,
// the pairs {j, k} not containing l are all pairs minus those with l:
//   A_l = sum_{U ∋ l} q_{U \ l} / s_U   = F2_1(y_l) - q_l F1_1(c + 2 x_l) + q_l^2 / (c + 3 x_l),
//   B_l = sum_{U ∋ l} q_{U \ l} / s_U^2 = the same with p = 2,
// so gradient_l += w_l A_l, Hessian_ll += w_l (A_l - x_l B_l) with w_l = 6 q_l x_l. F2 is itself a
// Stieltjes transform (masses q_j q_k at x_j + x_k), interpolated on its own grid from node values
//   F2_p(xi) = 1/2 sum_k q_k (F1_p(xi + x_k) - q_k / (xi + 2 x_k)^p),
// where F1_p is interpolated on a second grid at the points xi + x_k. A pass costs about
// (nodes of F2) m interpolations instead of m^3 / 6 divisions.
// Hessian-vector products (z = x ∘ v): out_l += w_l (v_l (A_l - x_l B_l) - C_l), with
//   C_l = sum_{U ∋ l} q_{U \ l} (sum_{j in U \ l} z_j) / s_U^2
//       = Z2(y_l) - q_l z_l F1_2(c + 2 x_l) - q_l Z1(c + 2 x_l) + 2 q_l^2 z_l / (c + 3 x_l)^2,
//   Z1(y) = sum_k q_k z_k / (y + x_k)^2,  Z2(xi) = sum_j q_j z_j (F1_2(xi + x_j) - q_j / (xi + 2 x_j)^2),
// two matrix-vector products with what the evaluation kept.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/chebyshev_pieces.hpp"

namespace multidraft {

class TripleSums {
 public:
  // Worth it against the enumerated dense evaluation (about 1.9 ns per triple, m^3 / 6 triples)
  // when the interpolations at the shifted points cost less: measured about 12 ns per shifted
  // point (nodes of F2 times m) all included (Intel Xeon, m = 60 to 200).
  static bool pays(int m, double u_span) {
    const double shifted = static_cast<double>(ChebyshevPieces::pieces_for(u_span)) * ChebyshevPieces::kNodes * m;
    return 12.0 * shifted < 1.9 * m * static_cast<double>(m) * m / 6.0;
  }

  // Adds the triple terms (weight scale * q_j q_k q_l) to the gradient and Hessian diagonal at
  // x = e^a; returns their accepted mass sum_U w_U X_U / (c + X_U) = sum_l w_l A_l. Works on
  // the variables sorted by x: every set of points (c + x_l, c + 2 x_l, xi + x_k) is then
  // increasing, as ChebyshevPoints needs.
  double evaluate(const SortedPoints& sorted, const std::vector<double>& q, double scale, double c,
                  Eigen::VectorXd& gradient, Eigen::VectorXd& diagonal) {
    const int m = sorted.size();
    const std::vector<int>& order = sorted.order;
    const std::vector<int>& pair_active = sorted.active;  // the points y_l on the pair grid
    qs_.resize(m);
    u_.resize(m);
    for (int j = 0; j < m; ++j) qs_[j] = q[order[j]];
    const double* __restrict xs = sorted.x.data();
    const double* __restrict qs = qs_.data();
    double* __restrict u = u_.data();
    // The occupied pair-grid nodes xi decide the shifted points xi + x_k.
    const int shifts = static_cast<int>(pair_active.size());
    double xi_low = sorted.grid.node_y(pair_active.front()), xi_high = xi_low;
    for (int j : pair_active) {
      xi_low = std::min(xi_low, sorted.grid.node_y(j));
      xi_high = std::max(xi_high, sorted.grid.node_y(j));
    }
    // The single grid covers c + 2 x_l and xi + x_k; all its nodes get values.
#pragma omp simd
    for (int j = 0; j < m; ++j) u[j] = log_positive(c + 2.0 * xs[j]);
    single_grid_.cover(std::min(u_[0], std::log(xi_low + xs[0])), std::max(u_[m - 1], std::log(xi_high + xs[m - 1])));
    double_points_.place(single_grid_, u_.data(), m);
    single_grid_.occupy_all();
    const std::vector<int> single_active = single_grid_.active_nodes();
    Eigen::VectorXd first, second;
    stieltjes_at_nodes(single_grid_, single_active, xs, qs, m, first, second, inverse_squares_);
    const Eigen::MatrixXd first_coefficients = single_grid_.coefficients(first);
    const Eigen::MatrixXd second_coefficients = single_grid_.coefficients(second);
    double_points_.interpolate(first_coefficients, second_coefficients, F1_double_, &F1_2_double_);

    // F2_p at the occupied pair nodes, one node's m shifted points at a time.
    Eigen::VectorXd pair_first = Eigen::VectorXd::Zero(sorted.grid.nodes()), pair_second = pair_first,
                    with_repeats = pair_first, shifted_first, shifted_second;
    partners_.resize(shifts, m);
    for (int a = 0; a < shifts; ++a) {
      const int j = pair_active[a];
      const double xi = sorted.grid.node_y(j);
#pragma omp simd
      for (int k = 0; k < m; ++k) u[k] = log_positive(xi + xs[k]);
      shifted_points_.place(single_grid_, u_.data(), m);
      shifted_points_.interpolate(first_coefficients, second_coefficients, shifted_first, &shifted_second);
      const double* __restrict f1 = shifted_first.data();
      const double* __restrict f2 = shifted_second.data();
      double* __restrict partner = partners_.row(a);
      double f = 0.0, s = 0.0, r = 0.0;
#pragma omp simd reduction(+ : f, s, r)
      for (int k = 0; k < m; ++k) {
        const double self = 1.0 / (xi + 2.0 * xs[k]);
        partner[k] = f2[k] - qs[k] * self * self;
        f += qs[k] * (f1[k] - qs[k] * self);
        s += qs[k] * partner[k];
        r += qs[k] * f1[k];
      }
      pair_first[j] = 0.5 * f;
      pair_second[j] = 0.5 * s;
      with_repeats[j] = 0.5 * r;
    }
    Eigen::VectorXd F2, F2_2;
    sorted.points.interpolate(sorted.grid.coefficients(pair_first), sorted.grid.coefficients(pair_second), F2, &F2_2);

    // Error bound. F1 at a point errs by at most eps F1 (relative_error), so a pair node value by
    // at most eps times with_repeats (the same sum without the subtracted k = k' terms), and the
    // interpolant of F2 at y_l by eps F2(y_l) + Lebesgue * eps * max of with_repeats on its piece.
    static const double eps = ChebyshevPieces::relative_error(1);
    std::vector<double> piece_noise(sorted.grid.pieces(), 0.0);
    for (int j : pair_active) {
      double& noise = piece_noise[j / ChebyshevPieces::kNodes];
      noise = std::max(noise, with_repeats[j]);
    }
    weight_.resize(m);
    self_square_.resize(m);
    triple_diagonal_.resize(m);
    double accepted = 0.0, bound = 0.0;
    for (int j = 0; j < m; ++j) {
      const double self = 1.0 / (c + 3.0 * xs[j]);  // the pair {l, l} among l's own partners
      self_square_[j] = self * self;
      const double q2 = qs[j] * qs[j];
      const double A = F2[j] - qs[j] * F1_double_[j] + q2 * self;
      const double B = F2_2[j] - qs[j] * F1_2_double_[j] + q2 * self_square_[j];
      weight_[j] = scale * qs[j] * xs[j];
      triple_diagonal_[j] = weight_[j] * (A - xs[j] * B);
      gradient[order[j]] += weight_[j] * A;
      diagonal[order[j]] += triple_diagonal_[j];
      accepted += weight_[j] * A;
      bound += weight_[j] * (std::abs(F2[j]) + ChebyshevPieces::kLebesgue * piece_noise[sorted.points.piece(j)] +
                             qs[j] * std::abs(F1_double_[j]));
    }
    gradient_error_ = 1.01 * eps * bound;  // 1.01: the bound uses interpolated, not exact, values
    return accepted;
  }

  // out += (triple terms' Hessian) v (see the header comment).
  void hessian_times(const SortedPoints& sorted, const Eigen::VectorXd& v, Eigen::VectorXd& out) const {
    const int m = sorted.size();
    const std::vector<int>& order = sorted.order;
    Eigen::VectorXd moments(m), node_values, Z1, Z2;
    for (int j = 0; j < m; ++j) moments[j] = qs_[j] * sorted.x[j] * v[order[j]];  // q_k z_k
    scatter_active(sorted.active, partners_.matrix() * moments, sorted.grid.nodes(), node_values);
    sorted.points.interpolate(sorted.grid.coefficients(node_values), Z2);
    node_values.noalias() = inverse_squares_.matrix() * moments;  // every single-grid node is active
    double_points_.interpolate(single_grid_.coefficients(node_values), Z1);
    for (int j = 0; j < m; ++j) {
      const double vl = v[order[j]], z = sorted.x[j] * vl;
      const double C = Z2[j] - qs_[j] * z * F1_2_double_[j] - qs_[j] * Z1[j] + 2.0 * qs_[j] * moments[j] * self_square_[j];
      out[order[j]] += triple_diagonal_[j] * vl - weight_[j] * C;
    }
  }

  double gradient_error() const { return gradient_error_; }

 private:
  // The pair grid is the SortedPoints' one; the single grid covers c + 2 x_l and xi + x_k.
  ChebyshevPieces single_grid_;
  ChebyshevPoints double_points_, shifted_points_;
  Eigen::VectorXd qs_, u_;  // q in the sorted order; log coordinates of points (scratch)
  GrowingMatrix inverse_squares_;  // single-grid node x variable: 1 / (eta + x_k)^2
  GrowingMatrix partners_;         // active pair node x variable: F1_2(xi + x_k) - q_k / (xi + 2 x_k)^2
  Eigen::VectorXd F1_double_, F1_2_double_;  // F1_1 and F1_2 at c + 2 x_l
  Eigen::VectorXd weight_, self_square_, triple_diagonal_;
  double gradient_error_ = 0.0;
};

}  // namespace multidraft
