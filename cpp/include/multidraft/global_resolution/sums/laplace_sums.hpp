// Every grouped term of the Global Resolution objectives ([GR] Eqs. 12 and 15, grouped as in
// Appendix K, with the EGF weights w_U = n! [λ^n] e^{b λ} prod_{u in U} (e^{q_u λ} - 1) of
// docs/design/summation.md, "EGF weights"), of every size 1..n, summed without enumerating a
// single subset, through the Laplace transform 1/s = ∫_0^∞ e^{-t s} dt: at each node t, the sum
// over the terms holding l is one coefficient of a product over all variables, one pass sums the
// logs of its factors and a second divides each variable's own factor out. The integral is the
// trapezoidal rule in log t ([TW] Theorem 5.1), whose relative error is independent of s, so the
// gradient's L1 error is certified for any spread of a. Ours, not in [GR]: derivation and bounds
// in docs/design/summation.md, "Laplace sums".
// [TW]: L. N. Trefethen and J. A. C. Weideman, The exponentially convergent trapezoidal rule,
// SIAM Review 56 (2014).
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/detail/sum_kernels.hpp"  // exp_negative, sum_row, exp_of_series

namespace multidraft {

// z_u g_u(λ) = z_u (e^{q_u λ} - 1) by degree: phi[d] = z q_u^d / d! (d = 1..N) from the
// variable's column of the power table (column[(d - 1) stride] = q_u^d / d!).
template <int N>
[[gnu::always_inline]] inline void factor_coefficients(double z, const double* column, int stride, double (&phi)[N + 1]) {
#pragma GCC unroll 16
  for (int d = 1; d <= N; ++d) phi[d] = z * column[(d - 1) * stride];
}

// At node t: r = t x_u (clamped where e^{-r} leaves the normal range), z = e^{-r} and z g_u.
template <int N>
[[gnu::always_inline]] inline void node_factor(double t, double x, const double* column, int stride, double& r,
                                               double& z, double (&phi)[N + 1]) {
  r = std::min(t * x, 708.0);
  z = exp_negative(r);
  factor_coefficients<N>(z, column, stride, phi);
}

// Degrees 0..N-1 of numerator / (1 + phi(λ)) (phi has no constant term): out_k = numerator_k -
// sum_{d=1..k} phi_d out_{k-d}. Divides a variable's own factor out of the product; a null
// numerator stands for 1 (the factor's inverse, 1 - D_u). Both helpers are inlined into the
// per-variable loops, which GCC 12 vectorises only with the local arrays passed by reference and
// the 1 known at compile time (a pointer to a local array, or to a table 1, 0, 0, ..., stops it).
template <int N>
[[gnu::always_inline]] inline void divide_by_factor(const double (&phi)[N + 1], const double* numerator, double (&out)[N]) {
  out[0] = numerator ? numerator[0] : 1.0;
#pragma GCC unroll 16
  for (int k = 1; k < N; ++k) {
    double acc = numerator ? numerator[k] : 0.0;
#pragma GCC unroll 16
    for (int d = 1; d <= k; ++d) acc -= phi[d] * out[k - d];
    out[k] = acc;
  }
}

// One variable l's terms at one node, its own factor divided out: M = numerator / (1 + phi)
// (degrees 0..N-1: the product over the other variables), E_k = sums_k + own (1 / (1 + phi))_k
// (sums_k over every variable of r_u D_u, or of r_u v_u D_u, minus l's own, D = 1 - 1/(1 + phi)),
// G = sum_d q^d / d! M_{N-d} and H = sum_d q^d / d! (M * E)_{N-d}, with column[(d - 1) stride] =
// q^d / d!. Shared by LaplaceSums' per-variable loops and LaplaceInterpolation's variables summed
// per node. Sums: any array indexed 1..N-1. (LaplaceSums' Hessian products keep their own loop:
// through this one, G unused, GCC 12 vectorised them worse; docs/benchmarks/summation-internals.md,
// "Own-factor sums in the Hessian products".)
template <int N, class Sums>
[[gnu::always_inline]] inline void own_factor_sums(const double (&phi)[N + 1], const double* numerator, const Sums& sums,
                                                   double own, const double* column, int stride, double& G, double& H) {
  double M[N], inverse[N], E[N];
  divide_by_factor<N>(phi, numerator, M);
  divide_by_factor<N>(phi, nullptr, inverse);
  E[0] = 0.0;
#pragma GCC unroll 16
  for (int k = 1; k < N; ++k) E[k] = sums[k] + own * inverse[k];
  G = H = 0.0;
#pragma GCC unroll 16
  for (int d = 1; d <= N; ++d) {
    G += column[(d - 1) * stride] * M[N - d];
    double F = 0.0;
#pragma GCC unroll 16
    for (int i = 1; i <= N - d; ++i) F += E[i] * M[N - d - i];
    H += column[(d - 1) * stride] * F;
  }
}

class LaplaceSums {
 public:
  static constexpr int kMaxSize = 6;           // n handled (compile-time series lengths)

  // A trapezoidal rule in u = log t: step h, node range [t_min, t_max] with t_min s_max = low_tail
  // (the part below, relative) and t_max s_min = high_tail (above: relative <= 2 h T^p e^{-T}), and
  // the Hessian products' node stride (hessian_times).
  struct Rule {
    double step, low_tail, high_tail;
    int product_stride;
  };
  // Certified: relative error 2.4e-11 (relative_error(1)), the rows a plan keeps. Coarse: about
  // 5e-6 with a third of the nodes (under half for any spread of a), for Newton iterates, which only need a descent direction and
  // a gradient norm (with its own bound) to compare with a stopping threshold of 5 tau - 3 eps_T;
  // its products take every node (step 0.6: 3e-5 relative, as good as the certified rule's
  // every other node).
  static constexpr Rule kCertified{1.0 / 3.0, 1e-11, 36.0, 2};
  static constexpr Rule kCoarse{0.6, 1e-6, 20.0, 1};

  static bool handles(int n) { return n >= 2 && n <= kMaxSize; }
  // Nodes for terms with s in [s_min, s_max], log_ratio = log(s_max / s_min).
  static int nodes_for(double log_ratio, const Rule& rule = kCertified) {
    return static_cast<int>(std::ceil((log_ratio + std::log(rule.high_tail / rule.low_tail)) / rule.step)) + 1;
  }
  // Worth it against enumerating `terms` grouped terms: a node costs about five enumerated terms
  // per variable (docs/benchmarks/summation-internals.md, "Laplace sums against enumeration").
  static bool pays(int m, double log_ratio, double terms) {
    return 10.0 * nodes_for(log_ratio) * static_cast<double>(m) < 2.0 * terms;
  }

  // Bound on |rule - 1/s^p| s^p for every s in [s_min, s_max] (p = 1: gradients, p = 2: the
  // Hessian's second part): the infinite rule's 2 / (cos(d)^p (e^{2 pi d / h} - 1)) ([TW] Theorem
  // 5.1, minimised over d < pi / 2), the two truncated tails and 1e-13 for rounding
  // (docs/design/summation.md, "Laplace sums").
  static double relative_error(int p, const Rule& rule = kCertified) {
    double best = 1.0;
    for (double delta = 1e-3; delta < 1.5; delta += 1e-3) {
      const double d = M_PI / 2 - delta;
      best = std::min(best, 2.0 / (std::pow(std::cos(d), p) * std::expm1(2.0 * M_PI * d / rule.step)));
    }
    return best + std::pow(rule.low_tail, p) + 2.0 * rule.step * std::pow(rule.high_tail, p) * std::exp(-rule.high_tail) +
           1e-13;
  }

  // Adds every term's contribution to the gradient (sum_{U ∋ l} w_U x_l / s_U) and the Hessian
  // diagonal (sum_{U ∋ l} w_U x_l (c + X_{U \ l}) / s_U^2, summed as such: a share near 1 leaves
  // no difference to cancel; X_{U \ l} is the first-order part of the dual product of
  // hessian_times with v = 1) at x = e^a, weights w_U with base
  // bases[0]; returns the accepted mass sum_U w'_U X_U / s_U with base bases[1] (bases[0] when
  // there is one base). `coarse`: kCoarse instead of kCertified (gradient_error follows).
  double evaluate(const Eigen::VectorXd& x, const std::vector<double>& q, int n, const std::vector<double>& bases,
                  double c, Eigen::VectorXd& gradient, Eigen::VectorXd& diagonal, bool coarse = false) {
    rule_ = coarse ? kCoarse : kCertified;
    static const double certified_error = relative_error(1, kCertified), coarse_error = relative_error(1, kCoarse);
    const double eps = coarse ? coarse_error : certified_error;
    switch (n) {
      case 2: return evaluate_sized<2>(x, q, bases, c, eps, gradient, diagonal);
      case 3: return evaluate_sized<3>(x, q, bases, c, eps, gradient, diagonal);
      case 4: return evaluate_sized<4>(x, q, bases, c, eps, gradient, diagonal);
      case 5: return evaluate_sized<5>(x, q, bases, c, eps, gradient, diagonal);
      default: return evaluate_sized<6>(x, q, bases, c, eps, gradient, diagonal);
    }
  }

  // out += (the terms' Hessian) v at the point of the last evaluate: out_l += v_l diagonal_l -
  // sum_{U ∋ l} w_U x_l (sum_{i in U \ l} x_i v_i) / s_U^2. The inner sum is the first-order part
  // in mu of the same product with z_u (1 + mu t x_u v_u) for z_u (a dual number). That part
  // takes every product_stride-th node of the rule (certified: step 2 h, about 1e-4 relative,
  // relative_error at that step): conjugate gradients need a direction, not certified digits, and
  // the products are much of a Newton iteration's work (docs/benchmarks/summation-internals.md,
  // "Coarser Hessian products"). For the
  // same reason they start at t s_max = kProductLowTail: the inner sum weighs 1 / s_U^2, whose
  // integrand t e^{-t s} leaves at most (t_min s)^2 / 2 <= 5e-5 below (a third of the coarse
  // rule's nodes, half of the certified rule's product nodes).
  static constexpr double kProductLowTail = 1e-2;
  // `scratch` holds the per-node working rows (resized to (n + 1) m, so a reused one allocates
  // nothing): the caller's, since a plan's objects may be shared by threads.
  void hessian_times(const Eigen::VectorXd& v, Eigen::VectorXd& out, std::vector<double>& scratch) const {
    switch (n_) {
      case 2: return hessian_times_sized<2>(v, out, scratch);
      case 3: return hessian_times_sized<3>(v, out, scratch);
      case 4: return hessian_times_sized<4>(v, out, scratch);
      case 5: return hessian_times_sized<5>(v, out, scratch);
      default: return hessian_times_sized<6>(v, out, scratch);
    }
  }

  // Bound on the L1 error of the gradient the last evaluate added (and of its accepted mass), for
  // the rule it used.
  double gradient_error() const { return gradient_error_; }

 private:
  // The node range for the last point: t_j = e^{u_0 + j h}.
  void place_nodes(const Eigen::VectorXd& x, double c) {
    const double s_min = c + x.minCoeff(), s_max = c + n_ * x.maxCoeff();
    u0_ = std::log(rule_.low_tail / s_max);
    nodes_ = nodes_for(std::log(s_max / s_min), rule_);
  }

  // One pass of log(1 + z_u g_u) summed over u (series degrees 1..N) at t, and of r_u D_u with
  // D_u = 1 - 1 / (1 + z_u g_u) (degrees 1..N-1); stores r_u = t x_u and z_u = e^{-r_u} for the
  // second pass.
  template <int N>
  void log_product(double t, std::array<double, N + 1>& L, std::array<double, N>& S) {
    const int m = m_;
    const double* __restrict xs = x_.data();
    const double* __restrict powers = powers_.data();  // [d][u] = q_u^d / d!
    double* __restrict rs = r_.data();
    double* __restrict zs = z_.data();
    terms_.resize(static_cast<std::size_t>(2 * N) * m);
    double* __restrict terms = terms_.data();  // per-variable terms, summed after the loop
#pragma omp simd
    for (int u = 0; u < m; ++u) {
      double phi[N + 1], ell[N + 1], inverse[N];
      node_factor<N>(t, xs[u], powers + u, m, rs[u], zs[u], phi);
      const double r = rs[u];
      // log(1 + phi): ell_k = phi_k - (1/k) sum_{i<k} i ell_i phi_{k-i}
#pragma GCC unroll 16
      for (int k = 1; k <= N; ++k) {
        double acc = 0.0;
#pragma GCC unroll 16
        for (int i = 1; i < k; ++i) acc += i * ell[i] * phi[k - i];
        ell[k] = phi[k] - acc / k;
        terms[(k - 1) * m + u] = ell[k];
      }
      divide_by_factor<N>(phi, nullptr, inverse);  // 1 / (1 + phi) = 1 - D
#pragma GCC unroll 16
      for (int k = 1; k < N; ++k) terms[(N + k - 1) * m + u] = -r * inverse[k];
    }
    L[0] = S[0] = 0.0;
    for (int k = 1; k <= N; ++k) L[k] = sum_row(terms + (k - 1) * m, m);
    for (int k = 1; k < N; ++k) S[k] = sum_row(terms + (N + k - 1) * m, m);
  }


  // evaluate for n = N: the tables, then the rule's nodes one by one (add_node), then the sums
  // into the caller's vectors and the error bound.
  template <int N>
  double evaluate_sized(const Eigen::VectorXd& x, const std::vector<double>& q, const std::vector<double>& bases,
                        double c, double eps, Eigen::VectorXd& gradient, Eigen::VectorXd& diagonal) {
    const int m = static_cast<int>(x.size());
    prepare<N>(x, q, c);
    double n_factorial = 1.0;
    for (int d = 2; d <= N; ++d) n_factorial *= d;
    double accepted = 0.0, allocated = 0.0;
    for (int j = 0; j < nodes_; ++j) add_node<N>(j, bases, c, n_factorial, accepted);
    for (int l = 0; l < m; ++l) {
      gradient[l] += first_[l];
      diagonal[l] += diagonal_[l];
      allocated += std::abs(first_[l]);
    }
    gradient_error_ = eps / (1.0 - eps) * std::max(allocated, std::abs(accepted));
    return accepted;
  }

  // The point x, the power table q^d / d!, zeroed sums and the rule's nodes for it.
  template <int N>
  void prepare(const Eigen::VectorXd& x, const std::vector<double>& q, double c) {
    const int m = static_cast<int>(x.size());
    m_ = m, n_ = N, c_ = c;
    x_ = x;
    powers_.resize(static_cast<std::size_t>(N) * m);
    for (int u = 0; u < m; ++u) {
      double power = 1.0;
      for (int d = 1; d <= N; ++d) powers_[(d - 1) * m + u] = power *= q[u] / d;
    }
    r_.resize(m);
    z_.resize(m);
    first_.setZero(m);
    diagonal_.setZero(m);
    place_nodes(x, c);
    products_.resize(static_cast<std::size_t>(nodes_) * (N + 1));
  }

  // Node j of the rule: the product K over all variables (kept for hessian_times), then every
  // variable's terms at t_j added to first_ and diagonal_, and their accepted mass to `accepted`.
  template <int N>
  void add_node(int j, const std::vector<double>& bases, double c, double n_factorial, double& accepted) {
    const int m = m_;
    const bool two_bases = bases.size() > 1;
    const double t = std::exp(u0_ + j * rule_.step), weight = rule_.step * std::exp(-t * c);
    std::array<double, N + 1> L, A;
    std::array<double, N> S;
    log_product<N>(t, L, S);
    A = L;
    A[1] += bases[0];
    double* K = &products_[static_cast<std::size_t>(j) * (N + 1)];  // e^{b λ} prod_u (1 + z_u g_u)
    exp_of_series<N>(A.data(), K);
    double K_accepted[N + 1];
    A[1] += (two_bases ? bases[1] : bases[0]) - bases[0];
    exp_of_series<N>(A.data(), K_accepted);
    if (weight == 0.0) return;
    const double* __restrict powers = powers_.data();
    const double* __restrict rs = r_.data();
    const double* __restrict zs = z_.data();
    double* __restrict first = first_.data();
    double* __restrict curvature = diagonal_.data();
    const double tc = t * c;
    double accepted_sum = 0.0;
#pragma omp simd reduction(+ : accepted_sum)
    for (int l = 0; l < m; ++l) {
      const double z = zs[l], r = rs[l];
      double phi[N + 1], Ma[N];  // K' / (1 + z_l g_l), degrees 0..N-1 (the accepted mass's base)
      factor_coefficients<N>(z, powers + l, m, phi);
      double G, H;  // H: sum_{U ∋ l} w_U e^{-t X_U} (t X_{U \ l}) / z_l
      own_factor_sums<N>(phi, K, S, r, powers + l, m, G, H);
      divide_by_factor<N>(phi, K_accepted, Ma);
      double Ga = 0.0;
#pragma GCC unroll 16
      for (int d = 1; d <= N; ++d) Ga += powers[(d - 1) * m + l] * Ma[N - d];
      const double share = weight * n_factorial * r * z;  // h t x_l e^{-t c} e^{-t x_l}
      first[l] += share * G;
      curvature[l] += share * (tc * G + H);  // x_l (c + X_{U \ l}) / s_U^2: no cancellation
      accepted_sum += share * Ga;
    }
    accepted += accepted_sum;
  }

  template <int N>
  void hessian_times_sized(const Eigen::VectorXd& v, Eigen::VectorXd& out, std::vector<double>& scratch) const {
    const int m = m_;
    double n_factorial = 1.0;
    for (int d = 2; d <= N; ++d) n_factorial *= d;
    for (int l = 0; l < m; ++l) out[l] += v[l] * diagonal_[l];
    scratch.resize(static_cast<std::size_t>(N + 1) * m);  // rows: r_u, z_u, then r_u v_u D_u by degree 1..N-1
    const double* __restrict xs = x_.data();
    const double* __restrict vs = v.data();
    const double* __restrict powers = powers_.data();
    double* __restrict product = out.data();
    const int stride = rule_.product_stride;
    const int first = static_cast<int>(std::floor(std::log(kProductLowTail / rule_.low_tail) / rule_.step));
    for (int j = first; j < nodes_; j += stride) {
      const double t = std::exp(u0_ + j * rule_.step), weight = stride * rule_.step * std::exp(-t * c_);
      if (weight == 0.0) continue;
      // Lr = sum_u r_u v_u D_u, D_u = 1 - 1 / (1 + z_u g_u) (degrees 1..N-1)
      double* __restrict r_out = scratch.data();
      double* __restrict z_out = r_out + m;
      double* __restrict terms = z_out + m;
#pragma omp simd
      for (int u = 0; u < m; ++u) {
        double phi[N + 1], inverse[N];
        node_factor<N>(t, xs[u], powers + u, m, r_out[u], z_out[u], phi);
        const double r = r_out[u];
        divide_by_factor<N>(phi, nullptr, inverse);
#pragma GCC unroll 16
        for (int k = 1; k < N; ++k) terms[(k - 1) * m + u] = -r * vs[u] * inverse[k];
      }
      double sums[N];
      for (int k = 1; k < N; ++k) sums[k] = sum_row(terms + (k - 1) * m, m);
      const double* K = &products_[static_cast<std::size_t>(j) * (N + 1)];
#pragma omp simd
      for (int l = 0; l < m; ++l) {
        const double z = z_out[l], r = r_out[l], moved_l = r * vs[l];
        double phi[N + 1], M[N], inverse[N], E[N];
        factor_coefficients<N>(z, powers + l, m, phi);
        divide_by_factor<N>(phi, K, M);
        divide_by_factor<N>(phi, nullptr, inverse);
        E[0] = 0.0;
#pragma GCC unroll 16
        for (int k = 1; k < N; ++k) E[k] = sums[k] + moved_l * inverse[k];  // Lr minus l's own r v D_l (D_l = -inverse)
        double H = 0.0;  // sum_d q^d / d! (M * E)_{N-d}
#pragma GCC unroll 16
        for (int d = 1; d < N; ++d) {
          double F = 0.0;
#pragma GCC unroll 16
          for (int i = 1; i <= N - d; ++i) F += E[i] * M[N - d - i];
          H += powers[(d - 1) * m + l] * F;
        }
        product[l] -= weight * n_factorial * r * z * H;
      }
    }
  }

  int m_ = 0, n_ = 2, nodes_ = 0;
  Rule rule_ = kCertified;  // of the last evaluate
  double c_ = 0.0, u0_ = 0.0;
  Eigen::VectorXd x_, first_, diagonal_;  // per variable: sum_U w x / s, sum_U w x (s - x) / s^2 (rule)
  std::vector<double> powers_, r_, z_;  // q^d / d! ([d - 1][u]); t x and e^{-t x} at one node
  std::vector<double> terms_;           // the log pass's per-variable terms (2 n rows)
  std::vector<double> products_;        // per node, e^{b λ} prod_u (1 + z_u g_u), degrees 0..n
  double gradient_error_ = 0.0;
};

}  // namespace multidraft
