// LaplaceSums (laplace_sums.hpp) for many variables: the same quadrature in t, with the
// per-variable work moved off the nodes. LaplaceSums visits every variable at every node
// (O(nodes m) exponentials and series); here every quantity is a smooth function of one
// variable's x (a Stieltjes transform of a nonnegative measure, expanded in the Stirling-number
// coefficients c_ik), interpolated on a Chebyshev grid over log x, and the node sums K(t) come
// from moments of q^k anterpolated onto the grid's points: a pass costs O(m P) for P points per
// piece plus O(nodes x grid points) at the nodes. The gradient's error stays certified: the
// rule's, amplified by interpolation, the interpolants' own and the anterpolation's perturbation
// of K. Ours, not in [GR] (Appendix K enumerates the terms): the expansion, the coefficients and
// the bounds are derived in docs/design/summation.md, "Laplace interpolation".
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/detail/sum_kernels.hpp"                      // exp_negative, log_positive, exp_of_series
#include "multidraft/global_resolution/sums/chebyshev_pieces.hpp"  // relative_error of Stieltjes interpolants
#include "multidraft/global_resolution/sums/laplace_sums.hpp"      // the trapezoidal rules and their errors

namespace multidraft {

class LaplaceInterpolation {
 public:
  // W, in units of log x, and the points per piece: the interpolation errors (ChebyshevPieces::
  // relative_error, and the anterpolation's below) are 1e-12 and 5e-13 certified, 2e-8 and 4e-8
  // coarse; a wider half-width needs more points for the same
  // (docs/benchmarks/summation-internals.md, "Half-width of the interpolation pieces").
  static constexpr double kHalfWidth = 0.5;
  static constexpr int kCertifiedPoints = 16, kCoarsePoints = 10;
  // The rules in t: 7.9e-13 (certified) and 3.3e-8 (coarse) relative, amplified by Lambda e^{2W}
  // (7.6 and 6.9) through interpolation: far finer than LaplaceSums' (2.4e-11 and 5e-6), since
  // a node costs O(grid points) here, not O(m).
  static constexpr LaplaceSums::Rule kCertified{0.3, 1e-13, 38.0, 1};
  static constexpr LaplaceSums::Rule kCoarse{0.45, 1e-8, 24.0, 1};

  // Worth it against LaplaceSums, which visits m variables at each of its nodes: here a variable
  // costs about 30 such visits and a (node, grid point, size) one
  // (docs/benchmarks/summation-internals.md, "Laplace interpolation against Laplace sums").
  static bool pays(int m, double log_spread, int n) {
    const double nodes = LaplaceSums::nodes_for(log_spread, kCertified);
    const double grid = (std::ceil(log_spread / (2.0 * kHalfWidth)) + 1.0) * kCertifiedPoints;
    return 2.0 * LaplaceSums::nodes_for(log_spread) * m > 60.0 * m + 2.0 * n * nodes * grid;
  }

  // The level of an inner problem (c > 0): the shift s of every log x (x -> x e^s) at which the
  // rejected mass sum_{U != ∅} w_U c / (c + X_U e^s) equals `aim` (within `tolerance`), with s in
  // [low, high]. Newton steps leave mostly this mode behind (the terms couple the variables
  // through K, a level first of all), and a pass finds it at the nodes alone: the moments of a
  // placed point are those of every shifted one (same local coordinates), only the grid's points
  // scale, and with G(t) = sum_U w_U e^{-t X_U} = N! K_N(t) (∅ contributes b^N),
  //   rejected(s) = c ∫ e^{-tc} (G(t) - b^N) dt
  // on the nodes of the shifted points (docs/design/summation.md, "Level of an inner problem").
  struct Level {
    double aim = 0.0, tolerance = 0.0, low = 0.0, high = 0.0;
    double shift = 0.0;  // the shift found and applied (evaluate's gradient is at x e^shift)
  };

  // As LaplaceSums::evaluate, but for every term (no other adds to them): writes the gradient
  // (the terms' minus `target`) and the Hessian diagonal at x = e^{a - offset} (the caller's x,
  // whose exponent gives log x without a logarithm per variable: exp errs by an ulp or two of
  // |a - offset| <= 600, inside the 1e-12 ChebyshevPieces::relative_error keeps for coordinates)
  // and returns the accepted mass; gradient_error() bounds the L1 error of both. With `level`,
  // the point first moves to its level (Level), and everything is at x e^{level->shift}: x itself
  // is left to the caller to scale.
  double evaluate(const Eigen::VectorXd& x, const Eigen::VectorXd& a, double offset, const std::vector<double>& q,
                  int n, const std::vector<double>& bases, double c, const Eigen::VectorXd& target,
                  Eigen::VectorXd& gradient, Eigen::VectorXd& diagonal, bool coarse = false, Level* level = nullptr) {
    coarse_ = coarse;
    switch (n) {
      case 2: return coarse ? evaluate_sized<2, kCoarsePoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level)
                            : evaluate_sized<2, kCertifiedPoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level);
      case 3: return coarse ? evaluate_sized<3, kCoarsePoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level)
                            : evaluate_sized<3, kCertifiedPoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level);
      case 4: return coarse ? evaluate_sized<4, kCoarsePoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level)
                            : evaluate_sized<4, kCertifiedPoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level);
      case 5: return coarse ? evaluate_sized<5, kCoarsePoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level)
                            : evaluate_sized<5, kCertifiedPoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level);
      default:
        return coarse ? evaluate_sized<6, kCoarsePoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level)
                      : evaluate_sized<6, kCertifiedPoints>(x, a, offset, q, bases, c, target, gradient, diagonal, level);
    }
  }

  // out = (the terms' Hessian) v at the point of the last evaluate (written, as evaluate's
  // gradient). `scratch`: the caller's working rows (a plan's objects may be shared by threads).
  void hessian_times(const Eigen::VectorXd& v, Eigen::VectorXd& out, std::vector<double>& scratch) const {
    switch (n_) {
      case 2: return coarse_ ? hessian_times_sized<2, kCoarsePoints>(v, out, scratch)
                             : hessian_times_sized<2, kCertifiedPoints>(v, out, scratch);
      case 3: return coarse_ ? hessian_times_sized<3, kCoarsePoints>(v, out, scratch)
                             : hessian_times_sized<3, kCertifiedPoints>(v, out, scratch);
      case 4: return coarse_ ? hessian_times_sized<4, kCoarsePoints>(v, out, scratch)
                             : hessian_times_sized<4, kCertifiedPoints>(v, out, scratch);
      case 5: return coarse_ ? hessian_times_sized<5, kCoarsePoints>(v, out, scratch)
                             : hessian_times_sized<5, kCertifiedPoints>(v, out, scratch);
      default: return coarse_ ? hessian_times_sized<6, kCoarsePoints>(v, out, scratch)
                              : hessian_times_sized<6, kCertifiedPoints>(v, out, scratch);
    }
  }

  double gradient_error() const { return gradient_error_; }

 private:
  static constexpr int kLanes = 8;   // positions per block of the interpolation passes
  static constexpr int kChunk = 64;  // positions per anterpolation product (its Chebyshev basis stays in L1)
  // The anterpolation's partial sums: kSumLanes wide (one AVX2 register), at most kSumRegisters of
  // them live at once (AVX2 has 16 vector registers; the row group's w and basis values need the rest).
  static constexpr int kSumLanes = 4, kSumRegisters = 12;
  static constexpr int kCurvatureTerms = 7;  // Chebyshev terms of the Hessian diagonal's functions
  // An interpolated diagonal |D1 + x D2| below this fraction of |D1| + |x D2| lost too many digits
  // (7 Chebyshev terms: about 2e-8 of each part): the variable's Hessian terms are summed per node.
  static constexpr double kCancellation = 1e-2;
  static constexpr double kExpLimit = 708.0;  // e^{-r} is taken as 0 beyond (exp_negative clamps there)
  // Chebyshev coefficients below this are taken as 0: subnormal operands cost a hundred cycles
  // each (docs/benchmarks/summation-internals.md, "Negligible coefficients").
  static constexpr double kNegligible = 1e-290;
  using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  // The expansion's coefficients for series length N (see the header comment).
  struct Coefficients {
    double c[7][7] = {};    // c[i][k]
    double log[7][7] = {};  // l_ki as log[k][i]
    double s[7][7] = {};    // s_ki = (-1)^{i+1} S(k, i) i! / k! as s[k][i]: S_k(t) = t sum_i s_ki Phi_k(i t)
    double ratio[7][7] = {};  // ratio[k][e] = max_i |c_ik| / |c_{i,k-e}| (c_{i,k-e} != 0 wherever c_ik is)
    explicit Coefficients(int N) {
      double stirling[7][7] = {}, factorial[8] = {1.0};
      for (int k = 1; k < 8; ++k) factorial[k] = factorial[k - 1] * k;
      stirling[0][0] = 1.0;
      for (int e = 1; e <= N; ++e)
        for (int i = 1; i <= e; ++i) stirling[e][i] = i * stirling[e - 1][i] + stirling[e - 1][i - 1];
      for (int k = 0; k < N; ++k)
        for (int i = 0; i <= N - 1 - k; ++i) {
          double sum = 0.0;
          for (int e = i; e <= N - k - 1; ++e) sum += stirling[e][i] / (factorial[N - k - e] * factorial[e]);
          c[i][k] = (i % 2 ? -1.0 : 1.0) * factorial[i] * sum;
        }
      for (int k = 0; k < N; ++k)
        for (int e = 0; e <= k; ++e)
          for (int i = 0; i <= N - 1 - k; ++i) ratio[k][e] = std::max(ratio[k][e], std::abs(c[i][k] / c[i][k - e]));
      for (int k = 1; k <= N; ++k)
        for (int i = 1; i <= k; ++i) {
          const double sign = i % 2 ? 1.0 : -1.0;
          log[k][i] = sign * factorial[i - 1] * stirling[k][i] / factorial[k];
          s[k][i] = sign * stirling[k][i] * factorial[i] / factorial[k];
        }
    }
  };

  // The grid over v = log x: occupied pieces of width 2W, P points per piece, and the variables
  // in a sequence cut into runs of one piece each. The sequence is the caller's order where that
  // leaves few runs (the GR plan's ratio order keeps x monotone or nearly so: one run per piece
  // for n = 2, a few more for n = 3 and 4), so nothing is gathered or scattered per pass;
  // otherwise the variables are sorted by piece (one run each). The placement is kept when x and
  // q are those of the last call (a coarse pass's point certified: minimise_newton).
  template <int P>
  void place(const Eigen::VectorXd& x, const Eigen::VectorXd& a, double offset, const std::vector<double>& q) {
    // Compared with the placed copies (x first: it differs at once unless the point is certified),
    // not with copies of their own: every array of m doubles read or written costs about as much
    // as an arithmetic pass (m = 32000 spills out of L2).
    const int m = static_cast<int>(x.size());
    auto placed = [&](const double* values, const std::vector<double>& sequence) {
      for (int slot = 0; slot < m; ++slot)
        if (values[variable(slot)] != sequence[slot]) return false;
      return true;
    };
    const bool same = m == m_ && static_cast<int>(q.size()) == m && placed(x.data(), xs_) && placed(q.data(), qs_);
    if (!same) place_variables(x, a, offset, q);
    set_points<P>(0.0);
  }

  // The points of the pieces shifted by `shift`: x = e^{centre + shift + W cos(pi (i + 1/2) / P)}.
  template <int P>
  void set_points(double shift) {
    const int occupied = static_cast<int>(centres_.size());
    points_.resize(static_cast<std::size_t>(occupied) * P);
    for (int o = 0; o < occupied; ++o)
      for (int i = 0; i < P; ++i)
        points_[o * P + i] = std::exp(centres_[o] + shift + kHalfWidth * std::cos(M_PI * (i + 0.5) / P));
    point_low_ = std::exp(centres_.front() + shift - kHalfWidth);
    point_high_ = std::exp(centres_.back() + shift + kHalfWidth);
  }

  // Moves the placed point to x e^shift: the local coordinates stay (up to the rounding of
  // log x + shift, a few ulps, far inside every bound), the pieces, points and x scale.
  template <int P>
  void shift_placement(double shift) {
    for (double& centre : centres_) centre += shift;
    set_points<P>(0.0);
    const double factor = std::exp(shift);
    for (double& x : xs_) x *= factor;  // as the caller scales its x: the next pass at that point keeps the placement
  }

  // The nodes in t covering every s = c + X_W + (i + 1) x of the grid's points (X_W <= (N - 1) x),
  // and the exponential tables at them.
  template <int N>
  void set_nodes(const LaplaceSums::Rule& rule, double c) {
    const double s_min = c + point_low_, s_max = c + N * point_high_;
    nodes_ = LaplaceSums::nodes_for(std::log(s_max / s_min), rule);
    const double u0 = std::log(rule.low_tail / s_max);
    t_.resize(nodes_);
    for (int j = 0; j < nodes_; ++j) t_[j] = std::exp(u0 + j * rule.step);
    tabulate_exponentials<N>();
  }

  // K(t_j) (degrees 0..N) from the sums Psi_k(i t_j) by [i - 1](j, k - 1).
  template <int N>
  static void node_series(const std::vector<Matrix>& sums, int j, double b, double (&K)[N + 1]) {
    const Coefficients& coefficient = coefficients_for<N>();
    double A[N + 1] = {};
    for (int k = 1; k <= N; ++k)
      for (int i = 1; i <= k; ++i) A[k] += coefficient.log[k][i] * sums[i - 1](j, k - 1);
    A[1] += b;
    exp_of_series<N>(A, K);
  }

  // Level: the secant method on log rejected(s), which falls with s (slope -1 where every
  // X_U >> c), kept inside a bracket once one is known; each trial costs the node tables alone,
  // on the coarse rule's nodes (its 3.3e-8 relative error only moves the point found, whose
  // gradient the pass then computes with the call's own rule).
  template <int N, int P>
  void solve_level(const Matrix& moments, double b, double c, Level& level) {
    constexpr const LaplaceSums::Rule& rule = kCoarse;
    double n_factorial = 1.0;
    for (int d = 2; d <= N; ++d) n_factorial *= d;
    const double empty = std::pow(b, N);
    std::vector<Matrix> sums(N);
    auto rejected = [&](double s) {
      set_points<P>(s);
      set_nodes<N>(rule, c);
      for (int i = 1; i <= N; ++i) exponentials_[i - 1].times<N>(moments, sums[i - 1]);
      double total = 0.0;
      for (int j = 0; j < nodes_; ++j) {
        double K[N + 1];
        node_series<N>(sums, j, b, K);
        total += rule.step * t_[j] * std::exp(-t_[j] * c) * (n_factorial * K[N] - empty);
      }
      return c * total;
    };
    constexpr int kTrials = 12;
    double s0 = 0.0, r0 = rejected(0.0), best = 0.0, best_miss = std::abs(r0 - level.aim);
    if (!std::isfinite(r0)) best_miss = 0.0;  // no level to find from here: the point stays
    double below = level.low, above = level.high;  // rejected(below) > aim > rejected(above), once seen
    double s1 = std::clamp(std::log(r0 / level.aim), level.low, level.high);  // slope -1
    for (int trial = 0; trial < kTrials && best_miss > level.tolerance && s1 != s0; ++trial) {
      const double r1 = rejected(s1);
      if (std::abs(r1 - level.aim) < best_miss) best = s1, best_miss = std::abs(r1 - level.aim);
      (r1 > level.aim ? below : above) = s1;
      const double f0 = std::log(r0 / level.aim), f1 = std::log(r1 / level.aim);
      double next = f1 != f0 && std::isfinite(f1) ? s1 - f1 * (s1 - s0) / (f1 - f0) : 0.5 * (below + above);
      if (!(next > below && next < above)) next = 0.5 * (below + above);
      s0 = s1, r0 = r1, s1 = next;
    }
    level.shift = best;
    shift_placement<P>(best);
  }

  // runs_ (and order_): runs in the caller's order; beyond pieces + m / kChunk of them (runs
  // shorter than a chunk on average) the variables are sorted by piece instead (a stable
  // counting sort).
  void cut_runs(const int* piece, int pieces, int m) {
    const int most_runs = pieces + m / kChunk;
    runs_.clear();
    for (int begin = 0, u = 1; u <= m && static_cast<int>(runs_.size()) <= most_runs; ++u)
      if (u == m || piece[u] != piece[begin]) runs_.push_back({piece[begin], begin, u}), begin = u;
    order_.clear();
    if (static_cast<int>(runs_.size()) > most_runs) {
      std::vector<int> fill(pieces + 1, 0);
      for (int u = 0; u < m; ++u) ++fill[piece[u] + 1];
      runs_.clear();
      for (int p = 0; p < pieces; ++p) {
        if (fill[p + 1] > 0) runs_.push_back({p, fill[p], fill[p] + fill[p + 1]});
        fill[p + 1] += fill[p];
      }
      order_.resize(m);
      for (int u = 0; u < m; ++u) order_[fill[piece[u]]++] = u;
    }
  }

  // Places the variables on a new grid: each one's piece, the runs, the occupied pieces' centres,
  // and per slot the local coordinate xi, x and q.
  void place_variables(const Eigen::VectorXd& x, const Eigen::VectorXd& a, double offset,
                       const std::vector<double>& q) {
    const int m = m_ = static_cast<int>(x.size());
    piece_.resize(m);
    const double* __restrict exponent = a.data();
    double low = std::numeric_limits<double>::infinity(), high = -low;
#pragma omp simd reduction(min : low) reduction(max : high)
    for (int u = 0; u < m; ++u) {  // by value: std::min and max return references, which GCC left scalar
      const double log_x = exponent[u] - offset;
      low = log_x < low ? log_x : low;
      high = log_x > high ? log_x : high;
    }
    const int pieces = std::max(1, static_cast<int>(std::ceil((high - low) / (2.0 * kHalfWidth))));
    const double centre0 = 0.5 * (low + high) - (pieces - 1) * kHalfWidth;  // the grid centred on the points
    // (log x - centre0 + W) / 2W >= 0: truncation is the floor.
    const double to_grid = kHalfWidth - centre0, inverse_width = 0.5 / kHalfWidth;
    int* __restrict piece = piece_.data();
#pragma omp simd
    for (int u = 0; u < m; ++u) piece[u] = std::min(static_cast<int>((exponent[u] - offset + to_grid) * inverse_width), pieces - 1);

    cut_runs(piece, pieces, m);
    // Occupied pieces, numbered in increasing x.
    std::vector<int> occupied_index(pieces, -1);
    for (const Run& run : runs_) occupied_index[run.piece] = 0;
    centres_.clear();
    for (int p = 0; p < pieces; ++p)
      if (occupied_index[p] == 0) occupied_index[p] = static_cast<int>(centres_.size()), centres_.push_back(centre0 + 2.0 * kHalfWidth * p);
    for (Run& run : runs_) run.piece = occupied_index[run.piece];

    // In sequence order, padded by a block (x = q = 0) for the last run's partial block: each
    // variable's local coordinate in its piece, x and q.
    for (std::vector<double>* row : {&xi_, &xs_, &qs_}) {
      row->resize(m + kLanes);
      std::fill(row->begin() + m, row->end(), 0.0);
    }
    double* __restrict xi = xi_.data();
    const double* __restrict xv = x.data();
    const double inverse_half_width = 1.0 / kHalfWidth;
    auto local = [&](int u) {  // clamped by value (std::clamp's references kept the loop scalar)
      const double coordinate = (exponent[u] - offset - (centre0 + 2.0 * kHalfWidth * piece[u])) * inverse_half_width;
      return coordinate < -1.0 ? -1.0 : coordinate > 1.0 ? 1.0 : coordinate;
    };
    if (order_.empty()) {
#pragma omp simd
      for (int u = 0; u < m; ++u) xi[u] = local(u);
      std::copy(xv, xv + m, xs_.begin());
      std::copy(q.begin(), q.end(), qs_.begin());
    } else {
      for (int s = 0; s < m; ++s) {
        const int u = order_[s];
        xi[s] = local(u), xs_[s] = xv[u], qs_[s] = q[u];
      }
    }
  }

  // Values at a piece's P points -> Chebyshev coefficients (chebyshev_transform).
  template <int P>
  static const Eigen::MatrixXd& transform() {
    static const Eigen::MatrixXd instance = chebyshev_transform(P);
    return instance;
  }

  // Calls body(o, s0, count, basis) for every chunk of at most kChunk positions of a run (piece
  // o), with basis (P x kChunk, row-major): row p holds T_p(xi) at the chunk's positions, its
  // count columns rounded up to whole kSumLanes (the padding's xi: later positions or 0).
  template <int P, class Body>
  void for_each_chunk(Body&& body) const {
    Matrix basis(P, kChunk);
    for (const Run& run : runs_)
      for (int s0 = run.begin; s0 < run.end; s0 += kChunk) {
        const int o = run.piece, count = std::min(kChunk, run.end - s0);
        const int columns = (count + kSumLanes - 1) / kSumLanes * kSumLanes;  // inside xi_'s kLanes of padding
        const double* __restrict xi = xi_.data() + s0;
        double* __restrict row0 = basis.row(0).data();
        double* __restrict row1 = basis.row(1).data();
#pragma omp simd
        for (int c = 0; c < columns; ++c) row0[c] = 1.0, row1[c] = xi[c];
        for (int p = 2; p < P; ++p) {
          const double* __restrict before = basis.row(p - 2).data();
          const double* __restrict last = basis.row(p - 1).data();
          double* __restrict row = basis.row(p).data();
#pragma omp simd
          for (int c = 0; c < columns; ++c) row[c] = 2.0 * xi[c] * last[c] - before[c];
        }
        body(o, s0, count, basis);
      }
  }

  // Anterpolation: moments (points x F, row o P + i) of F weight columns given per chunk by
  // weights(s0, count, w) (w: kChunk x F, column f over the chunk's positions), such that
  // sum_u w_f(u) phi(x_u) ~ sum_i moments(i, f) phi(X_i) for any phi smooth on each piece.
  template <int P, int F, class Weights>
  void anterpolate(Weights&& weights, Matrix& moments) const {
    const int occupied = static_cast<int>(centres_.size());
    // sum_u w_f(u) T_p(xi_u) per piece, in kSumLanes partial sums: [o][p][f][lane]
    std::vector<double> partial(static_cast<std::size_t>(occupied) * P * F * kSumLanes, 0.0);
    Eigen::Matrix<double, Eigen::Dynamic, F> w(kChunk, F);
    for_each_chunk<P>([&](int o, int s0, int count, const Matrix& basis) {
      weights(s0, count, w);
      const int columns = (count + kSumLanes - 1) / kSumLanes * kSumLanes;
      for (int c = count; c < columns; ++c) w.row(c).setZero();  // the basis's padding columns add 0
      double* sums = &partial[static_cast<std::size_t>(o) * P * F * kSumLanes];
      constexpr int kRows = std::max(1, kSumRegisters / F), kWhole = P / kRows * kRows;
      for (int p = 0; p < kWhole; p += kRows)
        sum_products<kRows, F>(basis.row(p).data(), w.data(), columns, sums + p * F * kSumLanes);
      if constexpr (kWhole < P)
        sum_products<P - kWhole, F>(basis.row(kWhole).data(), w.data(), columns, sums + kWhole * F * kSumLanes);
    });
    Eigen::Matrix<double, P, F> chebyshev;
    moments.resize(occupied * P, F);
    for (int o = 0; o < occupied; ++o) {
      for (int p = 0; p < P; ++p)
        for (int f = 0; f < F; ++f) {
          const double* lanes = &partial[((static_cast<std::size_t>(o) * P + p) * F + f) * kSumLanes];
          double sum = 0.0;
          for (int l = 0; l < kSumLanes; ++l) sum += lanes[l];
          chebyshev(p, f) = sum;
        }
      moments.middleRows(o * P, P).noalias() = transform<P>().transpose() * chebyshev;
    }
  }

  // sums[r][f][lane] += sum over the columns c = lane (mod kSumLanes) of basis[r][c] w[f][c]
  // (basis rows kChunk apart, w's columns kChunk apart), for Rows rows at once: the Rows x F
  // partial sums stay in registers across the chunk and each basis and w value is loaded once per
  // row group (dot products one by one loaded both for every product and reduced each one).
  template <int Rows, int F>
  static void sum_products(const double* __restrict basis, const double* __restrict w, int columns,
                           double* __restrict sums) {
    double sum[Rows][F][kSumLanes];
    for (int r = 0; r < Rows; ++r)
      for (int f = 0; f < F; ++f)
#pragma omp simd
        for (int l = 0; l < kSumLanes; ++l) sum[r][f][l] = sums[(r * F + f) * kSumLanes + l];
    for (int c = 0; c < columns; c += kSumLanes)
#pragma GCC unroll 16
      for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 16
        for (int f = 0; f < F; ++f)
#pragma omp simd
          for (int l = 0; l < kSumLanes; ++l) sum[r][f][l] += basis[r * kChunk + c + l] * w[f * kChunk + c + l];
    for (int r = 0; r < Rows; ++r)
      for (int f = 0; f < F; ++f)
#pragma omp simd
        for (int l = 0; l < kSumLanes; ++l) sums[(r * F + f) * kSumLanes + l] = sum[r][f][l];
  }

  // Calls body(o, s0, count) for every block of kLanes positions of a run (piece o), its first
  // `count` in the run. The lanes past a run's end hold later positions (or the padding): the
  // body computes them branch-free with piece o's functions and discards them (later runs then
  // write their own values there).
  template <class Body>
  void for_each_block(Body&& body) const {
    for (const Run& run : runs_)
      for (int s0 = run.begin; s0 < run.end; s0 += kLanes) body(run.piece, s0, std::min(kLanes, run.end - s0));
  }

  // value[g][lane] = sum_{p < Terms} coefficient[g P + p] T_p(xi[lane]), the recurrence
  // T_p = 2 xi T_{p-1} - T_{p-2} run alongside (every value stays in registers).
  template <int P, int Terms, int G>
  [[gnu::always_inline]] static void interpolate_lanes(const double* __restrict coefficient,
                                                      const double* __restrict xi, double (&value)[G][kLanes]) {
    double before[kLanes], last[kLanes];
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) before[l] = 1.0, last[l] = xi[l];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g)
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) value[g][l] = coefficient[g * P] + coefficient[g * P + 1] * xi[l];
#pragma GCC unroll 4
    for (int p = 2; p < Terms; ++p) {
      double next[kLanes];
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) next[l] = 2.0 * xi[l] * last[l] - before[l], before[l] = last[l], last[l] = next[l];
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g)
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) value[g][l] += coefficient[g * P + p] * next[l];
    }
  }

  // Chebyshev coefficients [o][g][p] of G functions given by their values (points x G), into out
  // from `start` on.
  template <int P, class Values>
  void coefficients(const Values& values, std::vector<double>& out, std::size_t start = 0) const {
    const int occupied = static_cast<int>(centres_.size()), G = static_cast<int>(values.cols());
    // Only grows: hessian_times keeps a pointer into the rows before `start` across this call.
    if (out.size() < start + static_cast<std::size_t>(occupied) * G * P) out.resize(start + static_cast<std::size_t>(occupied) * G * P);
    const Eigen::MatrixXd& t = transform<P>();
    for (int o = 0; o < occupied; ++o)
      for (int g = 0; g < G; ++g)
        for (int p = 0; p < P; ++p) {
          double sum = 0.0;
          for (int i = 0; i < P; ++i) sum += t(p, i) * values(o * P + i, g);
          out[start + (static_cast<std::size_t>(o) * G + g) * P + p] = std::abs(sum) < kNegligible ? 0.0 : sum;
        }
  }

  // exponentials_[i - 1](j, point) = e^{-i t_j X_point} and scaled_[i - 1](j, point) = t_j X_point
  // e^{-i t_j X_point} (at most 1 / (e i): the t-weighted sums in this form never overflow, where
  // t_j alone reaches 1e175 for x = e^-400), i = 1..N: one exponential per (node, point), its
  // powers for i > 1 (a few ulps more, far inside every bound).
  template <int N>
  void tabulate_exponentials() {
    const int points = static_cast<int>(points_.size());
    exponentials_.resize(N);
    scaled_.resize(N);
    for (int i = 0; i < N; ++i) exponentials_[i].resize(nodes_, points), scaled_[i].resize(nodes_, points);
    for (int j = 0; j < nodes_; ++j) {
      const double t = t_[j];
      double* __restrict rows[N];
      double* __restrict scaled_rows[N];
      for (int i = 0; i < N; ++i) rows[i] = exponentials_[i].row(j), scaled_rows[i] = scaled_[i].row(j);
      const double* __restrict xs = points_.data();
#pragma omp simd
      for (int a = 0; a < points; ++a) {
        const double r = t * xs[a], first = r < kExpLimit ? exp_negative(r) : 0.0;
        double power = 1.0;
        for (int i = 0; i < N; ++i) {
          power *= first;
          const double value = (i + 1) * r < kExpLimit ? power : 0.0;  // t reaches 1e175: no clamped e^-708 times t
          rows[i][a] = value;
          scaled_rows[i][a] = r * value;
        }
      }
    }
  }

  template <int N>
  static const Coefficients& coefficients_for() {
    static const Coefficients instance(N);
    return instance;
  }

  // evaluate for n = N, P points per piece, in the steps of docs/design/summation.md, "Laplace
  // interpolation" (marked below). One body, longer than a screen, on purpose: split into
  // functions, GCC inlined and fused the pass's multiply-adds differently and the accepted mass
  // and error bound moved by an ulp (the results must stay bit-identical).
  template <int N, int P>
  double evaluate_sized(const Eigen::VectorXd& x, const Eigen::VectorXd& a, double offset, const std::vector<double>& q,
                        const std::vector<double>& bases, double c, const Eigen::VectorXd& target,
                        Eigen::VectorXd& gradient, Eigen::VectorXd& diagonal, Level* level) {
    const Coefficients& coefficient = coefficients_for<N>();
    constexpr const LaplaceSums::Rule& rule = P == kCoarsePoints ? kCoarse : kCertified;  // coarse_ chose P
    n_ = N, c_ = c;
    place<P>(x, a, offset, q);
    const int points = static_cast<int>(points_.size());
    double n_factorial = 1.0;
    for (int d = 2; d <= N; ++d) n_factorial *= d;

    // Moments of q^k (k = 1..N): Psi_k(s) = sum_u q_u^k e^{-s x_u} ~ sum_i moments(i, k - 1) e^{-s X_i}.
    // S needs t Phi_k(i t) = sum_u q_u^k t x_u e^{-i t x_u}, from the same moments at t X_i e^{-i t X_i}
    // (the interpolant's derivative in s; S only enters the Hessian, which needs no certificate).
    constexpr int F = N;
    Matrix moments;
    double mass[N + 1] = {};  // sum_u q_u^k, summed with the weights
    anterpolate<P, F>(
        [&](int s0, int count, auto& w) {
          const double* __restrict qs = qs_.data() + s0;
          double* __restrict first = w.col(0).data();
#pragma omp simd
          for (int c = 0; c < count; ++c) first[c] = qs[c];
          for (int k = 2; k <= N; ++k) {
            const double* __restrict lower = w.col(k - 2).data();
            double* __restrict column = w.col(k - 1).data();
#pragma omp simd
            for (int c = 0; c < count; ++c) column[c] = lower[c] * qs[c];
          }
          for (int k = 1; k <= N; ++k) {
            const double* __restrict column = w.col(k - 1).data();
            double sum = 0.0;
#pragma omp simd reduction(+ : sum)
            for (int c = 0; c < count; ++c) sum += column[c];
            mass[k] += sum;
          }
        },
        moments);

    if (level) solve_level<N, P>(moments, bases[0], c, *level);
    set_nodes<N>(rule, c);

    // Per node: K (degrees 0..N), S (1..N-1); the columns of the measures on t whose transforms
    // at (i + 1) x are interpolated: h t e^{-tc} K_k, the same times t (with c > 0 only: bounded by
    // e^{-tc} there), and h t e^{-tc} (K S)_k.
    std::vector<Matrix> sums(N), scaled_sums(N);  // Psi_k(i t_j) and t_j Phi_k(i t_j) by [i - 1](j, k - 1)
    for (int i = 1; i <= N; ++i) {
      exponentials_[i - 1].times<F>(moments, sums[i - 1]);
      scaled_[i - 1].times<F>(moments, scaled_sums[i - 1]);
    }
    K_.resize(static_cast<std::size_t>(nodes_) * (N + 1));
    S_.resize(static_cast<std::size_t>(nodes_) * (N + 1));
    weight_.resize(nodes_);
    Matrix measures(nodes_, 3 * N);
    measures.setZero();
    for (int j = 0; j < nodes_; ++j) {
      const double t = t_[j];
      double S[N + 1] = {}, K[N + 1];
      node_series<N>(sums, j, bases[0], K);
      for (int k = 1; k < N; ++k)
        for (int i = 1; i <= k; ++i) S[k] += coefficient.s[k][i] * scaled_sums[i - 1](j, k - 1);
      std::copy(K, K + N + 1, &K_[static_cast<std::size_t>(j) * (N + 1)]);
      std::copy(S, S + N + 1, &S_[static_cast<std::size_t>(j) * (N + 1)]);
      weight_[j] = rule.step * t * std::exp(-t * c);  // h t e^{-tc}: dt = t du
      for (int k = 0; k < N; ++k) {
        double KS = 0.0;
        for (int d = 1; d <= k; ++d) KS += S[d] * K[k - d];
        measures(j, k) = weight_[j] * K[k];
        measures(j, N + k) = c > 0.0 ? weight_[j] * t * K[k] : 0.0;
        measures(j, 2 * N + k) = weight_[j] * KS;
      }
    }
    // The accepted mass's base: K' = e^{(b1 - b0) λ} K, beta_d = (b1 - b0)^d / d!.
    double beta[N + 1];
    beta[0] = 1.0;
    for (int d = 1; d <= N; ++d) beta[d] = beta[d - 1] * ((bases.size() > 1 ? bases[1] : bases[0]) - bases[0]) / d;
    const bool two_bases = beta[1] != 0.0;
    // The interpolated functions' values at the points (k = 0..N-1): Fhat_k, Fabs_k =
    // sum_i |c_ik| F_ki (the error bound's), D1_k, x D2_k (the diagonal's) and, with two bases,
    // Ahat_k = sum_i c_ik sum_d beta_d F_{k-d,i} (the accepted mass's).
    // Transforms at (i + 1) x are linear in the measures: each i's columns are combined first,
    // then added in one product per table (column-major values, a column per function).
    Eigen::MatrixXd values = Eigen::MatrixXd::Zero(points, two_bases ? 5 * N : 4 * N);
    Matrix combined(nodes_, values.cols()), scaled_combined(nodes_, N);
    for (int i = 0; i < N; ++i) {
      combined.setZero();
      scaled_combined.setZero();
      for (int k = 0; k + i < N; ++k) {
        const double cik = coefficient.c[i][k];
        combined.col(k) = cik * measures.col(k);
        combined.col(N + k) = std::abs(cik) * measures.col(k);
        combined.col(2 * N + k) = cik * (c * measures.col(N + k) + measures.col(2 * N + k));
        scaled_combined.col(k) = i * cik * measures.col(k);  // x F_ki^t, with the factor i
        if (two_bases)
          for (int d = 0; d <= k; ++d) combined.col(4 * N + k) += cik * beta[d] * measures.col(k - d);
      }
      exponentials_[i].add_transposed_times(combined, values.data(), points);
      if (i > 0) scaled_[i].add_transposed_times(scaled_combined, values.col(3 * N).data(), points);
    }
    // Interpolated per slot: Fhat_k and, with two bases, Ahat_k with every Chebyshev term; the
    // diagonal's D1_k, D2_k with the first kCurvatureTerms (the Hessian needs no certificate:
    // the terms of these analytic functions decay like rho^-p, rho ~ 12.6 at W = 0.5, so 2e-8 of
    // their size is left). Fabs only bounds errors, without interpolation: in a piece,
    // Fabs(x) <= Fabs(X_low) max(1, X_low / x), X_low its lowest point (a Stieltjes transform
    // decreases; x times it increases).
    Matrix exact(points, two_bases ? 2 * N : N);
    exact.leftCols(N) = values.leftCols(N);
    if (two_bases) exact.rightCols(N) = values.rightCols(N);
    coefficients<P>(exact, coefficients_);
    coefficients<P>(values.middleCols(2 * N, 2 * N), curvature_coefficients_);

    // Errors. Per function, the quadrature's at the points, amplified by interpolation
    // (Lambda e^{2W}), plus the Stieltjes interpolant's own: interpolation_error relative to
    // sum_i |c_ik| F_ki. The anterpolated sums perturb K_k by at most sum_{j >= 1} e_j K_{k-j},
    // e = exp(eta) - 1 with eta_k = eps_a mass_k sum_i |l_ki|. Both are bounded through Fabs:
    // sum_i |c_ik| F_{k-e,i} <= ratio_ke Fabs_{k-e}, ratio_ke = max_i |c_ik| / |c_{i,k-e}|.
    static const double lebesgue = 2.0 / M_PI * std::log(P + 1.0) + 1.0;
    static const double interpolation_error =
        lebesgue * std::exp(2.0 * kHalfWidth) * LaplaceSums::relative_error(1, rule) +
        ChebyshevPieces::relative_error(1, kHalfWidth, P);
    static const double anterpolation_error = [] {  // 4 rho^{1-P} / (rho - 1), e^{-s e^v} <= 1 for |Im v| <= pi / 2
      const double b = M_PI / (2.0 * kHalfWidth), rho = b + std::sqrt(1.0 + b * b);
      return 4.0 * std::pow(rho, 1 - P) / (rho - 1.0) + 1e-15;
    }();
    double eta[N + 1] = {}, E[N + 1];
    for (int k = 1; k <= N; ++k) {
      double l1 = 0.0;
      for (int i = 1; i <= k; ++i) l1 += std::abs(coefficient.log[k][i]);
      eta[k] = anterpolation_error * mass[k] * l1;
    }
    exp_of_series<N>(eta, E);
    E[0] = 0.0;
    double gradient_gamma[N], accepted_gamma[N];  // bound_k = sum_e gamma_e ratio_ke Fabs_{k-e}
    for (int e = 0; e < N; ++e) {
      gradient_gamma[e] = (e == 0 ? interpolation_error : 0.0) + E[e];
      accepted_gamma[e] = interpolation_error * std::abs(beta[e]);
      for (int j = 1; j <= e; ++j) accepted_gamma[e] += std::abs(beta[e - j]) * E[j];
    }

    const int m = m_;
    d1_.resize(m + kLanes);
    first_.resize(m + kLanes);
    curvature_.resize(m + kLanes);
    cancelled_.resize(m + kLanes);
    exact_slots_.clear();
    // Per lane: accepted mass and the two bounds, summed over the positions of the runs.
    double accepted_lanes[kLanes] = {}, gradient_bound_lanes[kLanes] = {}, accepted_bound_lanes[kLanes] = {};
    const double* __restrict qs = qs_.data();
    auto pass = [&](auto functions) {
      constexpr int GE = decltype(functions)::value;
      constexpr int kAccepted = GE == 2 * N ? N : 0;  // Ahat's columns, or Fhat's with one base
      constexpr int PC = std::min(P, kCurvatureTerms);
      int piece = -1;
      double low = 1.0, gradient_envelope[N], accepted_envelope[N];  // per piece: sum_e gamma_e ratio_ke Fabs_{k-e}(X_low)
      for_each_block([&](int o, int slot0, int count) {
        if (o != piece) {
          piece = o;
          low = points_[o * P + P - 1];
          for (int k = 0; k < N; ++k) {
            gradient_envelope[k] = accepted_envelope[k] = 0.0;
            for (int e = 0; e <= k; ++e) {
              const double fabs = coefficient.ratio[k][e] * values(o * P + P - 1, N + k - e);
              gradient_envelope[k] += gradient_gamma[e] * fabs;
              accepted_envelope[k] += accepted_gamma[e] * fabs;
            }
          }
        }
        double value[GE][kLanes], curvature_value[2 * N][kLanes];
        interpolate_lanes<P, P, GE>(&coefficients_[static_cast<std::size_t>(o) * GE * P], xi_.data() + slot0, value);
        interpolate_lanes<P, PC, 2 * N>(&curvature_coefficients_[static_cast<std::size_t>(o) * 2 * N * P],
                                        xi_.data() + slot0, curvature_value);
        double power[kLanes], g[kLanes] = {}, a[kLanes] = {}, d1[kLanes] = {}, d2[kLanes] = {}, g_bound[kLanes] = {},
                              a_bound[kLanes] = {};
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) power[l] = 1.0;
        for (int k = N - 1; k >= 0; --k) {  // power = q^{N-k}
          const double* __restrict fhat = value[k];
          const double* __restrict ahat = value[kAccepted + k];
          const double* __restrict first_part = curvature_value[k];
          const double* __restrict own_part = curvature_value[N + k];
          const double eg = gradient_envelope[k], ea = accepted_envelope[k];
#pragma omp simd
          for (int l = 0; l < kLanes; ++l) {
            power[l] *= qs[slot0 + l];
            g[l] += power[l] * fhat[l];
            a[l] += power[l] * ahat[l];
            d1[l] += power[l] * first_part[l];
            d2[l] += power[l] * own_part[l];
            g_bound[l] += power[l] * eg;
            a_bound[l] += power[l] * ea;
          }
        }
        // Local restrict pointers: through the lambda's captures GCC assumed the stores alias and
        // left this loop scalar (docs/benchmarks/summation-internals.md, "Restrict pointers in lambdas").
        const double* __restrict xs = xs_.data() + slot0;
        double* __restrict firsts = first_.data() + slot0;
        double* __restrict d1s = d1_.data() + slot0;
        double* __restrict curvatures = curvature_.data() + slot0;
        double* __restrict cancelled_at = cancelled_.data() + slot0;
        double* __restrict accepted_sum = accepted_lanes;
        double* __restrict gradient_bound_sum = gradient_bound_lanes;
        double* __restrict accepted_bound_sum = accepted_bound_lanes;
        const double piece_low = low;  // a value: std::max's reference to the captured `low` was a load GCC could not vectorise
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          const double x = xs[l], scale = n_factorial * x, envelope = n_factorial * (x > piece_low ? x : piece_low);
          const bool cancelled = std::abs(d1[l] + d2[l]) < kCancellation * (std::abs(d1[l]) + std::abs(d2[l]));
          const bool in_run = l < count;  // the sums take the run's lanes (selected: the others are discarded)
          firsts[l] = scale * g[l];
          d1s[l] = scale * d1[l];
          curvatures[l] = cancelled ? 0.0 : scale * (d1[l] + d2[l]);  // summed per node instead
          cancelled_at[l] = cancelled ? 1.0 : 0.0;
          accepted_sum[l] += in_run ? scale * a[l] : 0.0;
          gradient_bound_sum[l] += in_run ? envelope * g_bound[l] : 0.0;
          accepted_bound_sum[l] += in_run ? envelope * a_bound[l] : 0.0;
        }
      });
    };
    if (two_bases)
      pass(std::integral_constant<int, 2 * N>{});
    else
      pass(std::integral_constant<int, N>{});
    // Into the caller's order, after the pass (its blocks then stay branch-free), in one pass with
    // the target (the caller's vectors are written, not zeroed and added to: each spills out of L2).
    gradient.resize(m);
    diagonal.resize(m);
    if (order_.empty()) {
      gradient = Eigen::Map<const Eigen::VectorXd>(first_.data(), m) - target;
      diagonal = Eigen::Map<const Eigen::VectorXd>(curvature_.data(), m);
    } else {
      for (int slot = 0; slot < m; ++slot) {
        gradient[order_[slot]] = first_[slot] - target[order_[slot]];
        diagonal[order_[slot]] = curvature_[slot];
      }
    }
    for (int slot = 0; slot < m; ++slot)
      if (cancelled_[slot] != 0.0) exact_slots_.push_back(slot);
    exact_diagonal_.resize(exact_slots_.size());
    for (std::size_t e = 0; e < exact_slots_.size(); ++e)
      diagonal[variable(exact_slots_[e])] += exact_diagonal_[e] = exact_terms<N>(exact_slots_[e], nullptr, 0.0);
    double accepted = 0.0, gradient_bound = 0.0, accepted_bound = 0.0;
    for (int l = 0; l < kLanes; ++l)
      accepted += accepted_lanes[l], gradient_bound += gradient_bound_lanes[l], accepted_bound += accepted_bound_lanes[l];
    // The bounds use Fabs from the quadrature and the perturbed K, within interpolation_error + E_N of the true one.
    gradient_error_ = std::max(gradient_bound, accepted_bound) / (1.0 - interpolation_error - E[N]);
    return accepted;
  }

  template <int N, int P>
  void hessian_times_sized(const Eigen::VectorXd& v, Eigen::VectorXd& out, std::vector<double>& scratch) const {
    const Coefficients& coefficient = coefficients_for<N>();
    if (N < 2) return;
    const int points = static_cast<int>(points_.size());
    // The caller's working rows: v in sequence order (when sorted), then the coefficients.
    const int m = m_;
    out.resize(m);
    const std::size_t coefficient_start = order_.empty() ? 0 : m;
    scratch.resize(coefficient_start + static_cast<std::size_t>(centres_.size()) * N * P);
    for (std::size_t slot = 0; slot < coefficient_start; ++slot) scratch[slot] = v[order_[slot]];
    const double* __restrict vs = order_.empty() ? v.data() : scratch.data();
    Matrix moments;
    anterpolate_products<N, P>(vs, moments);
    Matrix measures(nodes_, N);
    std::vector<double> node_sums(exact_slots_.empty() ? 0 : static_cast<std::size_t>(nodes_) * (N + 1), 0.0);
    product_measures<N>(moments, measures, node_sums);
    Eigen::MatrixXd values = Eigen::MatrixXd::Zero(points, N);  // column-major, as in evaluate_sized
    Matrix combined(nodes_, N);
    for (int i = 0; i + 1 < N; ++i) {
      combined.setZero();
      for (int k = 1; k + i < N; ++k) combined.col(k) = coefficient.c[i][k] * measures.col(k);
      exponentials_[i].add_transposed_times(combined, values.data(), points);
    }
    coefficients<P>(values, scratch, coefficient_start);
    product_rows<N, P>(scratch.data() + coefficient_start, vs, out);
    for (std::size_t e = 0; e < exact_slots_.size(); ++e) {  // per node instead
      const int slot = exact_slots_[e];
      out[variable(slot)] += vs[slot] * exact_diagonal_[e] - exact_terms<N>(slot, node_sums.data(), vs[slot]);
    }
  }

  // Moments of v q^k (k = 1..N-1), at t X e^{-i t X}: the sums R of LaplaceSums::hessian_times.
  template <int N, int P>
  void anterpolate_products(const double* __restrict vs, Matrix& moments) const {
    constexpr int F = N - 1;
    anterpolate<P, F>(
        [&](int s0, int count, auto& w) {
          const double* __restrict qs = qs_.data() + s0;
          double* __restrict first = w.col(0).data();
#pragma omp simd
          for (int c = 0; c < count; ++c) first[c] = vs[s0 + c] * qs[c];
          for (int f = 1; f < F; ++f) {
            const double* __restrict lower = w.col(f - 1).data();
            double* __restrict column = w.col(f).data();
#pragma omp simd
            for (int c = 0; c < count; ++c) column[c] = lower[c] * qs[c];
          }
        },
        moments);
  }

  // Per node: R (the dual-number sums, degrees 1..N-1; copied to node_sums when non-empty, for
  // exact_terms) and the measures h t e^{-tc} (K R)_k whose transforms are interpolated.
  template <int N>
  void product_measures(const Matrix& moments, Matrix& measures, std::vector<double>& node_sums) const {
    const Coefficients& coefficient = coefficients_for<N>();
    constexpr int F = N - 1;
    measures.setZero();
    std::vector<Matrix> sums(N);
    for (int i = 1; i < N; ++i) scaled_[i - 1].times<F>(moments, sums[i - 1]);
    for (int j = 0; j < nodes_; ++j) {
      double R[N + 1] = {};
      for (int k = 1; k < N; ++k)
        for (int i = 1; i <= k; ++i) R[k] += coefficient.s[k][i] * sums[i - 1](j, k - 1);
      if (!node_sums.empty()) std::copy(R, R + N + 1, &node_sums[static_cast<std::size_t>(j) * (N + 1)]);
      const double* K = &K_[static_cast<std::size_t>(j) * (N + 1)];
      for (int k = 1; k < N; ++k) {
        double KR = 0.0;
        for (int d = 1; d <= k; ++d) KR += R[d] * K[k - d];
        measures(j, k) = weight_[j] * KR;
      }
    }
  }

  // out's rows of the product, block by block (cancelled slots: 0 here, exact_terms after).
  template <int N, int P>
  void product_rows(const double* coefficient_rows, const double* __restrict vs, Eigen::VectorXd& out) const {
    double n_factorial = 1.0;
    for (int d = 2; d <= N; ++d) n_factorial *= d;
    constexpr int PC = std::min(P, kCurvatureTerms);  // products, like the diagonal, need no certificate
    double product[kLanes];
    for_each_block([&](int o, int s0, int count) {
      double value[N][kLanes], power[kLanes], h[kLanes] = {};  // h = sum_k q^{N-k} Fhat^{K R}_k
      interpolate_lanes<P, PC, N>(&coefficient_rows[static_cast<std::size_t>(o) * N * P], xi_.data() + s0, value);
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) power[l] = 1.0;
      for (int k = N - 1; k >= 1; --k)
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) power[l] *= qs_[s0 + l], h[l] += power[l] * value[k][l];
      // The block's rows of the product (cancelled slots: exact_terms below). v is the caller's
      // vector when the order is: a run's last block reads only its own lanes of it.
      const double *__restrict v_block = vs + s0, *__restrict d1 = d1_.data() + s0, *__restrict x = xs_.data() + s0,
                              *__restrict cancelled = cancelled_.data() + s0;
      if (count == kLanes) {
        double* __restrict row = product;
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) row[l] = cancelled[l] != 0.0 ? 0.0 : v_block[l] * d1[l] - n_factorial * x[l] * h[l];
        if (order_.empty()) {
          double* __restrict rows_out = out.data() + s0;
#pragma omp simd
          for (int l = 0; l < kLanes; ++l) rows_out[l] = row[l];
        } else {
          for (int l = 0; l < kLanes; ++l) out[order_[s0 + l]] = row[l];
        }
      } else {
        for (int l = 0; l < count; ++l)
          out[variable(s0 + l)] = cancelled[l] != 0.0 ? 0.0 : v_block[l] * d1[l] - n_factorial * x[l] * h[l];
      }
    });
  }

  // One variable's Hessian terms by LaplaceSums' per-node formulas, for the slots whose
  // interpolated diagonal cancelled (a variable dominating its terms: its diagonal, and its rows
  // of the products, are small differences of large interpolated parts). With the product's
  // per-node sums R (degrees 1..N-1, [node][N + 1]) and v at the slot it returns
  // sum_j share_j H_j(R + the slot's own term), else the Hessian diagonal.
  template <int N>
  double exact_terms(int slot, const double* sums, double v) const {
    const double x = xs_[slot], q = qs_[slot];
    double powers[N + 1], n_factorial = 1.0;  // q^d / d!
    powers[0] = 1.0;
    for (int d = 1; d <= N; ++d) powers[d] = powers[d - 1] * q / d, n_factorial *= d;
    double total = 0.0;
    for (int j = 0; j < nodes_; ++j) {
      const double t = t_[j], r = t * x, z = r < kExpLimit ? exp_negative(r) : 0.0;
      const double* K = &K_[static_cast<std::size_t>(j) * (N + 1)];
      const double* S = sums ? sums + static_cast<std::size_t>(j) * (N + 1) : &S_[static_cast<std::size_t>(j) * (N + 1)];
      double phi[N + 1], G, H;
      factor_coefficients<N>(z, powers + 1, 1, phi);
      own_factor_sums<N>(phi, K, S, sums ? r * v : r, powers + 1, 1, G, H);  // the slot's own term out of S (or R)
      const double share = weight_[j] * n_factorial * x * z;  // h e^{-tc} N! t x e^{-tx}
      total += share * (sums ? H : t * c_ * G + H);
    }
    return total;
  }

  // The variable at a position of the sequence.
  int variable(int slot) const { return order_.empty() ? slot : order_[slot]; }

  struct Run {
    int piece, begin, end;  // positions [begin, end) of the sequence, all in piece `piece`
  };

  int n_ = 2, nodes_ = 0;
  bool coarse_ = false;
  double c_ = 0.0;
  // The grid, and the variables in sequence order (the caller's, or order_ when sorted by piece);
  // a slot is a position of the sequence.
  int m_ = -1;  // the variables placed (-1: none yet)
  std::vector<double> centres_, points_, xi_, xs_, qs_;
  std::vector<int> piece_, order_;
  std::vector<Run> runs_;
  double point_low_ = 1.0, point_high_ = 1.0;
  // The nodes in t and what products reuse: t_j, h t_j e^{-t_j c}, K per node, e^{-i t_j X}.
  std::vector<double> t_, weight_, K_, S_;
  // Only grow (GrowingMatrix): fresh blocks of this size are mapped page by page, and their size
  // changes with every point's spread (docs/benchmarks/summation-internals.md, "Tables that only grow").
  std::vector<GrowingMatrix> exponentials_, scaled_;
  // Slots whose diagonal cancelled (summed per node: exact_terms), flagged per slot, and their
  // exact diagonal.
  std::vector<int> exact_slots_;
  std::vector<double> cancelled_;  // 1 or 0 (a double: the pass's lanes stay one vector type)
  std::vector<double> exact_diagonal_;
  std::vector<double> coefficients_, curvature_coefficients_;  // [piece][function][term]
  std::vector<double> d1_;  // per slot, N! x sum_k q^{N-k} D1_k: the products' v_l part
  std::vector<double> first_, curvature_;  // per slot, the gradient and (not cancelled) diagonal terms
  double gradient_error_ = 0.0;
};

}  // namespace multidraft
