// The pair terms of n = 2 (seed 000 Eqs. 12 and 15, |U| = 2, weight w_kl = 2 q_k q_l) without
// enumerating the m^2 / 2 pairs. Every quantity a pass needs is a sum over partners k of a
// kernel in s_lk = c + x_l + x_k (c = 1 with the slack token, 0 without):
//   A_l = sum_{k != l} q_k / s_lk,   B_l = sum_{k != l} q_k / s_lk^2,
//   C_l = sum_{k != l} q_k x_k v_k / s_lk^2                      (Hessian-vector products),
// that is F(y) = sum_k mu_k / (y + x_k)^p (a Stieltjes transform of the point masses mu_k at
// x_k) evaluated at y_l = c + x_l, minus the k = l term. F is analytic in y off the negative
// axis, so in u = log y it is analytic in the strip |Im u| < pi whatever the x_k are, and
// Chebyshev interpolation on pieces of the u axis of width 2 converges geometrically with a
// bound that needs no knowledge of the x_k (ChebyshevPieces::relative_error). A pass then costs
// (nodes + N) m operations: F at every node directly, then interpolation at the m points,
// instead of m^2 / 2 divisions (m = 1000: about 60 nodes instead of 500 pairs per variable).
// The gradient's error is bounded and reported (PairSums::gradient_error) so that the
// stopping rule and the Lemma 6.6 bounds stay certified.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/full_subsets.hpp"  // four_reciprocals

namespace multidraft {

// Chebyshev interpolation on pieces [u_0 + 2 j W, u_0 + 2 (j + 1) W] of the log axis, kNodes
// first-kind points each (degree kNodes - 1).
class ChebyshevPieces {
 public:
  static constexpr int kNodes = 22;
  static constexpr double kHalfWidth = 1.0;  // W, in units of log y

  // Pieces covering [u_low, u_high]; the nodes in y = e^u, piece by piece.
  void cover(double u_low, double u_high) {
    u_low_ = u_low;
    pieces_ = std::max(1, static_cast<int>(std::ceil((u_high - u_low) / (2.0 * kHalfWidth))));
    node_y_.resize(static_cast<std::size_t>(pieces_) * kNodes);
    const Eigen::VectorXd& t = reference().nodes;
    for (int p = 0; p < pieces_; ++p)
      for (int i = 0; i < kNodes; ++i) node_y_[p * kNodes + i] = std::exp(centre(p) + kHalfWidth * t[i]);
  }
  int pieces() const { return pieces_; }
  int nodes() const { return pieces_ * kNodes; }
  const std::vector<double>& node_y() const { return node_y_; }

  // Places the points u_l: each gets its piece and the Chebyshev polynomials T_0..T_{N-1} at its
  // local coordinate t_l in [-1, 1]. Points are kept grouped by piece (a counting sort), so that
  // interpolation runs over contiguous ranges with one set of coefficients.
  void place(const std::vector<double>& u) {
    const int m = static_cast<int>(u.size());
    std::vector<int>& piece = point_piece_;
    piece.resize(m);
    piece_start_.assign(pieces_ + 1, 0);
    for (int l = 0; l < m; ++l) {
      piece[l] = std::clamp(static_cast<int>((u[l] - u_low_) / (2.0 * kHalfWidth)), 0, pieces_ - 1);
      ++piece_start_[piece[l] + 1];
    }
    for (int p = 0; p < pieces_; ++p) piece_start_[p + 1] += piece_start_[p];
    order_.resize(m);
    std::vector<int> next(piece_start_.begin(), piece_start_.end() - 1);
    for (int l = 0; l < m; ++l) order_[next[piece[l]]++] = l;
    basis_.resize(kNodes, m);  // row i: T_i at every point, in grouped order
    for (int j = 0; j < m; ++j) {
      const int p = piece[order_[j]];
      basis_(1, j) = std::clamp((u[order_[j]] - centre(p)) / kHalfWidth, -1.0, 1.0);
    }
    basis_.row(0).setOnes();
    for (int i = 2; i < kNodes; ++i)
      basis_.row(i) = 2.0 * basis_.row(1).cwiseProduct(basis_.row(i - 1)) - basis_.row(i - 2);
  }

  // The interpolants of one function, given at the nodes, evaluated at the placed points.
  void interpolate(const Eigen::VectorXd& node_values, Eigen::VectorXd& out) const {
    const Eigen::Map<const Eigen::MatrixXd> values(node_values.data(), kNodes, pieces_);
    const Eigen::MatrixXd coefficients = reference().transform * values;  // Chebyshev, per piece
    const int m = static_cast<int>(order_.size());
    Eigen::VectorXd grouped(m);
    for (int p = 0; p < pieces_; ++p) {
      const int begin = piece_start_[p], count = piece_start_[p + 1] - begin;
      grouped.segment(begin, count).noalias() =
          basis_.middleCols(begin, count).transpose() * coefficients.col(p);
    }
    out.resize(m);
    for (int j = 0; j < m; ++j) out[order_[j]] = grouped[j];
  }

  // Bound on |interpolant - F| / F at any point of a piece, for F(y) = sum_k mu_k / (y + x_k)^p
  // with mu_k >= 0, any x_k >= 0, y = e^u > 0. With f analytic and |f| <= M in the Bernstein
  // ellipse E_rho of the piece, the interpolant in N first-kind points errs by at most
  // 4 M rho^{1-N} / (rho - 1) (truncation and aliasing of the Chebyshev series, each at most
  // sum_{k >= N} 2 M rho^{-k}). On E_rho, u = r + i theta with |theta| <= W (rho - 1/rho) / 2 < pi
  // and r >= u_a - W ((rho + 1/rho) / 2 - 1), u_a the piece's left end; there
  // |e^u + x| >= (e^r + x) cos(theta / 2) (expand |e^u + x|^2), and F(e^r) <= F(e^{u_a})
  // e^{p (u_a - r)} (each term's ratio), while on the piece F >= F(e^{u_a}) e^{-2 p W}. Minimised
  // over rho.
  static double relative_error(int p) {
    double best = 1.0;
    for (double rho = 1.01; rho < 20.0; rho += 0.01) {
      const double theta = kHalfWidth * (rho - 1.0 / rho) / 2.0;
      if (theta >= 3.14159) break;
      const double growth = p * kHalfWidth * ((rho + 1.0 / rho) / 2.0 + 1.0);
      const double bound = 4.0 * std::pow(rho, 1 - kNodes) / (rho - 1.0) * std::exp(growth) /
                           std::pow(std::cos(theta / 2.0), p);
      best = std::min(best, bound);
    }
    return best;
  }

 private:
  // Points t_i = cos(pi (i + 1/2) / N) and the map from values at them to Chebyshev
  // coefficients, c_j = (2 - [j = 0]) / N sum_i f_i T_j(t_i).
  struct Reference {
    Eigen::VectorXd nodes;
    Eigen::MatrixXd transform;
    Reference() : nodes(kNodes), transform(kNodes, kNodes) {
      for (int i = 0; i < kNodes; ++i) nodes[i] = std::cos(M_PI * (i + 0.5) / kNodes);
      for (int j = 0; j < kNodes; ++j)
        for (int i = 0; i < kNodes; ++i)
          transform(j, i) = (j == 0 ? 1.0 : 2.0) / kNodes * std::cos(M_PI * j * (i + 0.5) / kNodes);
    }
  };
  static const Reference& reference() {
    static const Reference instance;
    return instance;
  }
  double centre(int p) const { return u_low_ + (2 * p + 1) * kHalfWidth; }

  double u_low_ = 0.0;
  int pieces_ = 1;
  std::vector<double> node_y_;
  std::vector<int> point_piece_, piece_start_, order_;
  Eigen::Matrix<double, kNodes, Eigen::Dynamic, Eigen::RowMajor> basis_;
};

// The pair terms' contributions at one point, and what Hessian-vector products need from it.
class PairSums {
 public:
  // Worth it when interpolation beats the direct pass. Measured (Intel Xeon, m = 40 to 4000): an
  // evaluate costs about m (25 + 0.25 nodes) ns interpolated against 0.18 m^2 ns enumerated, a
  // Hessian-vector product m (3 + 0.1 nodes) against 0.17 m^2; with two products per evaluate the
  // two break even near m = 30 + nodes / 2.
  static bool pays(int m, double u_span) {
    const int pieces = std::max(1, static_cast<int>(std::ceil(u_span / (2.0 * ChebyshevPieces::kHalfWidth))));
    return m > 30 + pieces * ChebyshevPieces::kNodes / 2;
  }
  static double log_span(const Eigen::VectorXd& x, double c) {
    return std::log((c + x.maxCoeff()) / (c + x.minCoeff()));
  }

  // Adds the pair terms (weight scale * q_k q_l) to the gradient and Hessian diagonal at
  // x = e^a; returns their accepted mass sum_U w_U X_U / (c + X_U) = sum_l w_l A_l.
  double evaluate(const Eigen::VectorXd& x, const std::vector<double>& q, double scale, double c,
                  Eigen::VectorXd& gradient, Eigen::VectorXd& diagonal) {
    const int m = static_cast<int>(x.size());
    std::vector<double>& u = log_points_;
    u.resize(m);
    for (int l = 0; l < m; ++l) u[l] = std::log(c + x[l]);
    grid_.cover(*std::min_element(u.begin(), u.end()), *std::max_element(u.begin(), u.end()));
    grid_.place(u);
    // F(y) = sum_k q_k / (y + x_k) and F2(y) = sum_k q_k / (y + x_k)^2 at every node; the
    // squared reciprocals are kept for C_l.
    const int nodes = grid_.nodes();
    inverse_squares_.resize(nodes, m);
    Eigen::VectorXd first(nodes), second(nodes);
    const double* __restrict xs = x.data();
    const double* __restrict qs = q.data();
    const double* y = grid_.node_y().data();
    int j = 0;
    for (; j + 4 <= nodes; j += 4) {  // four nodes per division (x and 1/x^2 stay in range: |a| <= 150)
      double* __restrict row0 = inverse_squares_.row(j).data();
      double* __restrict row1 = inverse_squares_.row(j + 1).data();
      double* __restrict row2 = inverse_squares_.row(j + 2).data();
      double* __restrict row3 = inverse_squares_.row(j + 3).data();
      double a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, b0, b1, b2, b3)
      for (int k = 0; k < m; ++k) {
        double i0, i1, i2, i3;
        four_reciprocals(y[j] + xs[k], y[j + 1] + xs[k], y[j + 2] + xs[k], y[j + 3] + xs[k], i0, i1, i2, i3);
        row0[k] = i0 * i0, row1[k] = i1 * i1, row2[k] = i2 * i2, row3[k] = i3 * i3;
        a0 += qs[k] * i0, a1 += qs[k] * i1, a2 += qs[k] * i2, a3 += qs[k] * i3;
        b0 += qs[k] * row0[k], b1 += qs[k] * row1[k], b2 += qs[k] * row2[k], b3 += qs[k] * row3[k];
      }
      first.segment<4>(j) << a0, a1, a2, a3;
      second.segment<4>(j) << b0, b1, b2, b3;
    }
    for (; j < nodes; ++j) {
      double* __restrict row = inverse_squares_.row(j).data();
      double f1 = 0.0, f2 = 0.0;
#pragma omp simd reduction(+ : f1, f2)
      for (int k = 0; k < m; ++k) {
        const double inverse = 1.0 / (y[j] + xs[k]);
        row[k] = inverse * inverse;
        f1 += qs[k] * inverse;
        f2 += qs[k] * row[k];
      }
      first[j] = f1;
      second[j] = f2;
    }
    Eigen::VectorXd F, F2;
    grid_.interpolate(first, F);
    grid_.interpolate(second, F2);
    weight_.resize(m);
    self_square_.resize(m);
    pair_diagonal_.resize(m);
    double accepted = 0.0, bound_base = 0.0;
    for (int l = 0; l < m; ++l) {
      const double self = 1.0 / (c + 2.0 * x[l]);  // the k = l term, not a pair
      self_square_[l] = self * self;
      const double A = F[l] - q[l] * self, B = F2[l] - q[l] * self_square_[l];
      weight_[l] = scale * q[l] * x[l];
      gradient[l] += weight_[l] * A;
      pair_diagonal_[l] = weight_[l] * (A - x[l] * B);
      diagonal[l] += pair_diagonal_[l];
      accepted += weight_[l] * A;
      bound_base += weight_[l] * F[l];
    }
    // |error of A_l| <= eps F_l(true) <= eps / (1 - eps) F_l(interpolated), for every l.
    static const double eps = ChebyshevPieces::relative_error(1);
    gradient_error_ = eps / (1.0 - eps) * bound_base;
    return accepted;
  }

  // out += (pair terms' Hessian) v: out_l += w_l (v_l (A_l - x_l B_l) - C_l), with
  // C_l = G(y_l) - q_l x_l v_l / (c + 2 x_l)^2, G(y) = sum_k q_k x_k v_k / (y + x_k)^2.
  void hessian_times(const Eigen::VectorXd& x, const std::vector<double>& q, const Eigen::VectorXd& v,
                     Eigen::VectorXd& out) const {
    const int m = static_cast<int>(x.size());
    Eigen::VectorXd moments(m);
    for (int k = 0; k < m; ++k) moments[k] = q[k] * x[k] * v[k];
    const Eigen::VectorXd node_values = inverse_squares_ * moments;
    Eigen::VectorXd G;
    grid_.interpolate(node_values, G);
    for (int l = 0; l < m; ++l)
      out[l] += pair_diagonal_[l] * v[l] - weight_[l] * (G[l] - moments[l] * self_square_[l]);
  }

  // Bound on the L1 error of the gradient the last evaluate added.
  double gradient_error() const { return gradient_error_; }

 private:
  ChebyshevPieces grid_;
  std::vector<double> log_points_;
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> inverse_squares_;
  Eigen::VectorXd weight_, self_square_, pair_diagonal_;
  double gradient_error_ = 0.0;
};

}  // namespace multidraft
