// Chebyshev interpolation on pieces of the log axis, for the Stieltjes transforms
//   F(y) = sum_k mu_k / (y + s_k)^p,   mu_k >= 0, s_k >= 0, y > 0, p = 1 or 2,
// by which the implicit full-size terms of the Global Resolution objectives are summed without
// enumerating them (pair_sums.hpp), with an error bound relative to F that needs no knowledge of
// the s_k. Ours, not in [GR] (whose Appendix K enumerates every term): the derivation and the
// bound are in docs/design/summation.md, "Chebyshev pieces".
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include <Eigen/Dense>

#include "multidraft/detail/radix_sort.hpp"
#include "multidraft/detail/sum_kernels.hpp"  // four_reciprocals, log_positive, logs_with_range, the kernels below

namespace multidraft {

using RowMajorMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Row-major matrix storage that only grows, for the node x variable tables a reused workspace
// keeps: Eigen's resize reallocates on every change of size, and fresh blocks of this size are
// mapped page by page (docs/benchmarks/summation-internals.md, "Tables that only grow").
class GrowingMatrix {
 public:
  void resize(int rows, int cols) {
    rows_ = rows, cols_ = cols;
    if (data_.size() < static_cast<std::size_t>(rows) * cols) data_.resize(static_cast<std::size_t>(rows) * cols);
  }
  double* row(int r) { return data_.data() + static_cast<std::size_t>(r) * cols_; }
  Eigen::Map<RowMajorMatrix> matrix() { return {data_.data(), rows_, cols_}; }
  Eigen::Map<const RowMajorMatrix> matrix() const { return {data_.data(), rows_, cols_}; }

  // The two products of a wide table (nodes x points) with a narrow matrix (2 to 10 columns) that
  // LaplaceInterpolation takes several times per pass, each reading the table once. Eigen's
  // blocked product first packs the whole table, a copy as costly as the product itself here
  // (docs/benchmarks/summation-internals.md, "Products with wide tables").
  // out = this table times `right` (cols() x F): per row, F dot products side by side in
  // kDotLanes partial sums each (independent chains, not one latency-bound accumulator).
  template <int F>
  void times(const RowMajorMatrix& right, RowMajorMatrix& out) const {
    constexpr int kDotLanes = 8;
    const Eigen::Matrix<double, Eigen::Dynamic, F> columns = right;  // column-major: each contiguous
    const int whole = cols_ / kDotLanes * kDotLanes;
    out.resize(rows_, F);
    for (int r = 0; r < rows_; ++r) {
      const double* __restrict row = data_.data() + static_cast<std::size_t>(r) * cols_;
      double partial[F][kDotLanes] = {};
      for (int c = 0; c < whole; c += kDotLanes)
        for (int f = 0; f < F; ++f) add_lane_products<kDotLanes>(row + c, columns.col(f).data() + c, partial[f]);
      for (int f = 0; f < F; ++f) {
        double sum = 0.0;
        for (int l = 0; l < kDotLanes; ++l) sum += partial[f][l];
        for (int c = whole; c < cols_; ++c) sum += row[c] * columns(c, f);
        out(r, f) = sum;
      }
    }
  }
  // out[k * stride + c] += sum_r table(r, c) right(r, k) for every column k of `right` (rows() x
  // K): the transposed table times `right`, added to K column-major columns. Four rows at a time,
  // each output column read and written once per four (the rows and the K columns stay in L1);
  // all-zero columns of `right` are skipped.
  void add_transposed_times(const RowMajorMatrix& right, double* out, int stride) const {
    constexpr int kRowsAtOnce = 4, kMostColumns = 32;
    if (right.cols() > kMostColumns) throw std::logic_error("internal: add_transposed_times takes at most 32 columns");
    int used[kMostColumns], count = 0;
    for (int k = 0; k < right.cols(); ++k)
      if (!right.col(k).isZero(0.0)) used[count++] = k;
    for (int r0 = 0; r0 < rows_; r0 += kRowsAtOnce) {
      const double* __restrict rows[kRowsAtOnce];
      int at[kRowsAtOnce];
      for (int i = 0; i < kRowsAtOnce; ++i) {  // past the last row: row r0 again, with weight 0
        at[i] = r0 + i < rows_ ? r0 + i : -1;
        rows[i] = data_.data() + static_cast<std::size_t>(at[i] < 0 ? r0 : at[i]) * cols_;
      }
      const double *__restrict t0 = rows[0], *__restrict t1 = rows[1], *__restrict t2 = rows[2], *__restrict t3 = rows[3];
      for (int u = 0; u < count; ++u) {
        const int k = used[u];
        double weights[kRowsAtOnce];
        for (int i = 0; i < kRowsAtOnce; ++i) weights[i] = at[i] < 0 ? 0.0 : right(at[i], k);
        const double w0 = weights[0], w1 = weights[1], w2 = weights[2], w3 = weights[3];
        add_four_weighted_rows(out + static_cast<std::size_t>(k) * stride, cols_, w0, t0, w1, t1, w2, t2, w3, t3);
      }
    }
  }

 private:
  std::vector<double> data_;
  int rows_ = 0, cols_ = 0;
};

// The map from values at the first-kind points t_i = cos(pi (i + 1/2) / N) to the Chebyshev
// coefficients of their interpolant: c_j = (2 - [j = 0]) / N sum_i f_i T_j(t_i) (N x N).
inline Eigen::MatrixXd chebyshev_transform(int points) {
  Eigen::MatrixXd transform(points, points);
  for (int j = 0; j < points; ++j)
    for (int i = 0; i < points; ++i)
      transform(j, i) = (j == 0 ? 1.0 : 2.0) / points * std::cos(M_PI * j * (i + 0.5) / points);
  return transform;
}

// Pieces [u_0 + 2 j W, u_0 + 2 (j + 1) W] of the log axis, kNodes first-kind Chebyshev points
// each (interpolants of degree kNodes - 1). Pieces holding no point (ChebyshevPoints::place)
// stay unoccupied: their nodes need no values.
class ChebyshevPieces {
 public:
  static constexpr int kNodes = 22;
  static constexpr double kHalfWidth = 1.5;  // W, in units of log y
  static constexpr double kLebesgue = 3.0;   // Lebesgue constant of kNodes first-kind points (< 2.97)

  static int pieces_for(double u_span) {
    return std::max(1, static_cast<int>(std::ceil(u_span / (2.0 * kHalfWidth))));
  }

  // Pieces covering [u_low, u_high], none occupied; the nodes in y = e^u, piece by piece.
  void cover(double u_low, double u_high) {
    u_low_ = u_low;
    pieces_ = pieces_for(u_high - u_low);
    occupied_.assign(pieces_, 0);
    node_y_.resize(static_cast<std::size_t>(pieces_) * kNodes);
    const Eigen::VectorXd& t = reference().nodes;
    for (int p = 0; p < pieces_; ++p)
      for (int i = 0; i < kNodes; ++i) node_y_[p * kNodes + i] = std::exp(centre(p) + kHalfWidth * t[i]);
  }
  void occupy_all() { occupied_.assign(pieces_, 1); }
  int pieces() const { return pieces_; }
  int nodes() const { return pieces_ * kNodes; }
  double node_y(int j) const { return node_y_[j]; }
  // Nodes of the occupied pieces, in order.
  std::vector<int> active_nodes() const {
    std::vector<int> active;
    for (int p = 0; p < pieces_; ++p)
      if (occupied_[p])
        for (int i = 0; i < kNodes; ++i) active.push_back(p * kNodes + i);
    return active;
  }

  int piece_of(double u) const {
    return std::clamp(static_cast<int>((u - u_low_) / (2.0 * kHalfWidth)), 0, pieces_ - 1);
  }
  double local(double u, int piece) const { return std::clamp((u - centre(piece)) / kHalfWidth, -1.0, 1.0); }
  void occupy(int piece) { occupied_[piece] = 1; }

  // Chebyshev coefficients (kNodes x pieces) of the interpolants of values given at the nodes.
  Eigen::MatrixXd coefficients(const Eigen::VectorXd& node_values) const {
    const Eigen::Map<const Eigen::MatrixXd> values(node_values.data(), kNodes, pieces_);
    return reference().transform * values;
  }

  // Bound on |interpolant - F| / F at any point of a piece, for F(y) = sum_k mu_k / (y + s_k)^p
  // with mu_k >= 0, s_k >= 0, y = e^u > 0 and exact node values: 4 rho^{1-N} / (rho - 1) times
  // F's growth over the Bernstein ellipse E_rho, minimised over rho, plus p 1e-12 for the points'
  // coordinate error (derived in docs/design/summation.md, "Chebyshev pieces"). Other grids
  // (laplace_interpolation.hpp) give their half-width and number of points.
  static double relative_error(int p, double half_width = kHalfWidth, int points = kNodes) {
    double best = 1.0;
    for (double rho = 1.01; rho < 40.0; rho += 0.01) {
      const double theta = half_width * (rho - 1.0 / rho) / 2.0;
      if (theta >= 3.14159) break;
      const double growth = p * half_width * ((rho + 1.0 / rho) / 2.0 + 1.0);
      const double bound = 4.0 * std::pow(rho, 1 - points) / (rho - 1.0) * std::exp(growth) /
                           std::pow(std::cos(theta / 2.0), p);
      best = std::min(best, bound);
    }
    return best + p * 1e-12;
  }

 private:
  // Points t_i = cos(pi (i + 1/2) / N) and the map from values at them to Chebyshev
  // coefficients (chebyshev_transform).
  struct Reference {
    Eigen::VectorXd nodes;
    Eigen::MatrixXd transform;
    Reference() : nodes(kNodes), transform(chebyshev_transform(kNodes)) {
      for (int i = 0; i < kNodes; ++i) nodes[i] = std::cos(M_PI * (i + 0.5) / kNodes);
    }
  };
  static const Reference& reference() {
    static const Reference instance;
    return instance;
  }
  double centre(int p) const { return u_low_ + (2 * p + 1) * kHalfWidth; }

  double u_low_ = 0.0;
  int pieces_ = 1;
  std::vector<char> occupied_;
  std::vector<double> node_y_;
};

// Points placed on a ChebyshevPieces grid, given grouped by piece so that each piece's
// points are a contiguous range: interpolation is then Clenshaw's recurrence with one set of
// coefficients per range, vectorised across points, with no sorting or gathering.
class ChebyshevPoints {
 public:
  // Places the points u[0..count) (log coordinates, grouped by piece in increasing piece order:
  // SortedPoints::place) and marks their pieces occupied.
  void place(ChebyshevPieces& grid, const double* u, int count) {
    const int pieces = grid.pieces();
    piece_.resize(count);
    local_.resize(count);
    for (int j = 0; j < count; ++j) {
      piece_[j] = grid.piece_of(u[j]);
      local_[j] = grid.local(u[j], piece_[j]);
    }
    start_.resize(pieces + 1);
    int p = 0;
    start_[0] = 0;
    for (int j = 0; j < count; ++j)
      while (p < piece_[j]) start_[++p] = j;
    while (p < pieces) start_[++p] = count;
    for (p = 0; p < pieces; ++p)
      if (start_[p + 1] > start_[p]) grid.occupy(p);
  }
  int size() const { return static_cast<int>(piece_.size()); }
  int piece(int j) const { return piece_[j]; }

  // The interpolants with these coefficients (ChebyshevPieces::coefficients) at every point, in
  // the order given to place; two functions at once share the recurrence's loads.
  void interpolate(const Eigen::MatrixXd& coefficients, Eigen::VectorXd& out) const {
    interpolate(coefficients, coefficients, out, nullptr);
  }
  void interpolate(const Eigen::MatrixXd& first, const Eigen::MatrixXd& second, Eigen::VectorXd& first_out,
                   Eigen::VectorXd* second_out) const {
    constexpr int N = ChebyshevPieces::kNodes;
    const int count = size();
    first_out.resize(count);
    if (second_out) second_out->resize(count);
    double* __restrict out1 = first_out.data();
    double* __restrict out2 = second_out ? second_out->data() : nullptr;
    const double* __restrict t = local_.data();
    for (int p = 0; p + 1 < static_cast<int>(start_.size()); ++p) {
      const double* __restrict c1 = first.col(p).data();
      const double* __restrict c2 = second.col(p).data();
      // Blocks of kLanes points, the recurrence's steps outside and the lanes inside: each
      // point's recurrence is a chain of dependent steps, so only lanes fill the vector units.
      for (int j0 = start_[p]; j0 < start_[p + 1]; j0 += kLanes) {
        const int lanes = std::min(kLanes, start_[p + 1] - j0);
        double twice[kLanes], a1[kLanes] = {}, a2[kLanes] = {}, b1[kLanes] = {}, b2[kLanes] = {};
        for (int lane = 0; lane < kLanes; ++lane) twice[lane] = lane < lanes ? 2.0 * t[j0 + lane] : 0.0;
        for (int i = N - 1; i >= 1; --i) {
#pragma omp simd
          for (int lane = 0; lane < kLanes; ++lane) {
            const double next1 = twice[lane] * a1[lane] - a2[lane] + c1[i];
            const double next2 = twice[lane] * b1[lane] - b2[lane] + c2[i];
            a2[lane] = a1[lane], a1[lane] = next1, b2[lane] = b1[lane], b1[lane] = next2;
          }
        }
        for (int lane = 0; lane < lanes; ++lane) {
          out1[j0 + lane] = 0.5 * twice[lane] * a1[lane] - a2[lane] + c1[0];
          if (out2) out2[j0 + lane] = 0.5 * twice[lane] * b1[lane] - b2[lane] + c2[0];
        }
      }
    }
  }

 private:
  static constexpr int kLanes = 8;
  std::vector<int> piece_, start_;
  std::vector<double> local_;
};

// The variables and their points y_j = c + x_j placed on a grid covering them, grouped by piece
// (ChebyshevPoints wants each piece's points contiguous, in any order within the piece): a
// counting sort by piece index, two passes over the variables, where sorting by x took a radix
// sort and its insertion fix-up on every evaluation. Where PairSums starts, computed once per
// evaluation (ConvexObjective::evaluate).
struct SortedPoints {
  std::vector<int> order;   // variables by piece (in no particular order within a piece)
  Eigen::VectorXd x, u;     // x in that order; log (c + x)
  ChebyshevPieces grid;
  ChebyshevPoints points;
  std::vector<int> active;  // nodes of the occupied pieces

  void place(const Eigen::VectorXd& power, double c) {
    const int m = static_cast<int>(power.size());
    logs_.resize(m);
    const double* __restrict powers = power.data();
    double* __restrict logs = logs_.data();
    double low, high;
    logs_with_range(powers, m, c, logs, low, high);
    grid.cover(low, high);
    piece_.resize(m);
    int* __restrict pieces = piece_.data();
#pragma omp simd
    for (int k = 0; k < m; ++k) pieces[k] = grid.piece_of(logs[k]);
    // Counted and placed in kLanes interleaved lanes (variable k in lane k % kLanes): with one
    // counter per piece, consecutive variables of a piece would each wait for the previous one's
    // increment to reach memory.
    fill_.assign(static_cast<std::size_t>(grid.pieces()) * kLanes, 0);  // [piece][lane]
    for (int k = 0; k < m; ++k) ++fill_[pieces[k] * kLanes + k % kLanes];
    int placed = 0;
    for (int& f : fill_) {  // each (piece, lane)'s first slot, pieces in order
      const int count = f;
      f = placed;
      placed += count;
    }
    order.resize(m);
    for (int k = 0; k < m; ++k) order[fill_[pieces[k] * kLanes + k % kLanes]++] = k;
    x.resize(m);
    u.resize(m);
    for (int j = 0; j < m; ++j) x[j] = powers[order[j]], u[j] = logs[order[j]];
    points.place(grid, u.data(), m);
    active = grid.active_nodes();
  }
  int size() const { return static_cast<int>(x.size()); }

 private:
  static constexpr int kLanes = 4;
  std::vector<double> logs_;        // log (c + x) by variable
  std::vector<int> piece_, fill_;   // each variable's piece; the (piece, lane) fill pointers
};

// The Stieltjes transforms of the point masses q_k at x_k at the nodes of the occupied pieces:
// first_j = sum_k q_k / (y_j + x_k), second_j = sum_k q_k / (y_j + x_k)^2 (0 at other nodes).
// Row a of inverse_squares holds 1 / (y_j + x_k)^2 for the a-th active node j, for transforms of
// other masses at the same points. Callers keep
// |log x| <= 150: products of four denominators stay in range for four_reciprocals.
inline void stieltjes_at_nodes(const ChebyshevPieces& grid, const std::vector<int>& active, const double* x,
                               const double* q, int m, Eigen::VectorXd& first, Eigen::VectorXd& second,
                               GrowingMatrix& inverse_squares) {
  first.setZero(grid.nodes());
  second.setZero(grid.nodes());
  const int count = static_cast<int>(active.size());
  inverse_squares.resize(count, m);
  for (int a = 0; a < count;) {
    if (a + 4 <= count && active[a + 3] == active[a] + 3) {  // four consecutive nodes: one division
      const int j = active[a];
      double f[4], s[4];
      stieltjes_four_nodes(x, q, m, grid.node_y(j), grid.node_y(j + 1), grid.node_y(j + 2), grid.node_y(j + 3),
                           inverse_squares.row(a), inverse_squares.row(a + 1), inverse_squares.row(a + 2),
                           inverse_squares.row(a + 3), f, s);
      first.segment<4>(j) << f[0], f[1], f[2], f[3];
      second.segment<4>(j) << s[0], s[1], s[2], s[3];
      a += 4;
      continue;
    }
    const int j = active[a];
    stieltjes_one_node(x, q, m, grid.node_y(j), inverse_squares.row(a), first[j], second[j]);
    ++a;
  }
}

// Node values from values at the active nodes (zero elsewhere).
inline void scatter_active(const std::vector<int>& active, const Eigen::VectorXd& values, int nodes,
                           Eigen::VectorXd& out) {
  out.setZero(nodes);
  for (std::size_t a = 0; a < active.size(); ++a) out[active[a]] = values[a];
}

}  // namespace multidraft
