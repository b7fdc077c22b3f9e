// The vectorised kernels of the summation machinery (global_resolution/sums/) and of the
// verifiers' passes over rows, kept apart from the algorithms that call them, as plain functions over raw pointers: the elementary functions
// in a form loops vectorise, and the loops taken out of their callers with the same bodies,
// `__restrict` on their pointer parameters and `#pragma omp simd`, forced inline where the
// callers' generated loops and roundings depend on it. The design they serve is
// docs/design/summation.md.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

namespace multidraft {

// ---------------------------------------------------------------------------------------------
// Elementary functions in a form loops vectorise (std::exp and std::log do not, short of
// -ffast-math).

// e^{-r} for r >= 0: r = k log 2 - f with |f| <= log(2) / 2, e^{-f} by its Taylor series to
// degree 13 (the rest is below 1e-17 relative), 2^{-k} by the exponent bits. r is clamped to 708
// (e^{-708} ~ 3e-308, a normal number): within a few ulps of std::exp below that.
inline double exp_negative(double r) {
  constexpr double kLog2e = 1.4426950408889634, kLn2High = 6.93147180369123816490e-01,
                   kLn2Low = 1.90821492927058770002e-10, kShifter = 6755399441055744.0;  // 1.5 * 2^52
  r = std::min(r, 708.0);
  const double shifted = r * kLog2e + kShifter;  // rounds r / log 2 to the integer k in the low bits
  const double k = shifted - kShifter;
  const double f = (k * kLn2High - r) + k * kLn2Low;  // -r + k log 2, |f| <= 0.35
  double series = 1.0 / 6227020800.0;                 // 1 / 13!
  double inverse_factorial = 1.0 / 6227020800.0;
  for (int d = 13; d >= 1; --d) {
    inverse_factorial *= d;  // 1 / (d - 1)!
    series = series * f + inverse_factorial;
  }
  std::uint64_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const std::uint64_t scale_bits = (1023ULL - (bits & 0x7ffULL)) << 52;  // 2^{-k}, 0 <= k <= 1022
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return series * scale;
}

// log y for normal y > 0: y = 2^e r with r in [sqrt(1/2), sqrt(2)), log r = 2 atanh(s),
// s = (r - 1) / (r + 1), |s| <= 0.172, by its series to s^21 (the rest is below 1e-17 relative),
// e log 2 in two parts. Within a few ulps of std::log: a coordinate error delta changes an
// interpolated F by at most p F delta.
inline double log_positive(double y) {
  std::uint64_t bits;
  std::memcpy(&bits, &y, sizeof bits);
  // The unbiased exponent as a double without an integer conversion (AVX2 has none for 64-bit
  // lanes: GCC emulates it at twice the instructions): the 11 exponent bits become the low
  // mantissa bits of 2^52, exactly 2^52 + biased exponent.
  const std::uint64_t exponent_bits = 0x4330000000000000ULL | ((bits >> 52) & 0x7ff);
  double exponent;
  std::memcpy(&exponent, &exponent_bits, sizeof exponent);
  exponent -= 4503599627370496.0 + 1023.0;  // 2^52 + the bias: exact
  bits = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
  double r;
  std::memcpy(&r, &bits, sizeof r);
  const bool high = r > 1.4142135623730951;
  r = high ? 0.5 * r : r;
  exponent += high ? 1.0 : 0.0;
  const double s = (r - 1.0) / (r + 1.0), s2 = s * s;
  double series = 1.0 / 21.0;
  for (int k = 19; k >= 1; k -= 2) series = series * s2 + 1.0 / k;
  constexpr double kLog2High = 6.93147180369123816490e-01, kLog2Low = 1.90821492927058770002e-10;
  return exponent * kLog2High + (2.0 * s * series + exponent * kLog2Low);
}

// logs[k] = log(c + x[k]) for k < m, and their range [low, high]. The range is taken from the
// value, not read back from logs: GCC 12 left the loop scalar when it read logs[k] ("no vectype"
// for the load; checked in the object code).
inline void logs_with_range(const double* __restrict x, int m, double c, double* __restrict logs, double& low,
                            double& high) {
  double lowest = std::numeric_limits<double>::infinity(), highest = -lowest;
#pragma omp simd reduction(min : lowest) reduction(max : highest)
  for (int k = 0; k < m; ++k) {
    const double value = log_positive(c + x[k]);
    logs[k] = value;
    lowest = std::min(lowest, value);
    highest = std::max(highest, value);
  }
  low = lowest, high = highest;
}

// 1 / d_b for four positive d_b by one division, 1 / d_0 = d_1 d_2 d_3 / (d_0 d_1 d_2 d_3), to
// within a few ulps: the division, not the arithmetic around it, bounds the loops that use it.
// The product of the four must stay in range (callers keep |log d| <= 150).
[[gnu::always_inline]] inline void four_reciprocals(double d0, double d1, double d2, double d3, double& i0, double& i1,
                                                    double& i2, double& i3) {
  const double p01 = d0 * d1, p23 = d2 * d3;
  const double inverse = 1.0 / (p01 * p23);
  const double h01 = p23 * inverse, h23 = p01 * inverse;  // 1 / (d0 d1), 1 / (d2 d3)
  i0 = d1 * h01;
  i1 = d0 * h01;
  i2 = d3 * h23;
  i3 = d2 * h23;
}

// ---------------------------------------------------------------------------------------------
// Sums and products over rows.

// sum_i min(p[i], q[i]) for rows `const double*` or ScaledRow (core/distribution.hpp), in eight
// fixed lanes (i mod 8) added in a fixed order: vectorised, with the same rounding wherever the
// rows lie in memory (a vectorised reduction may peel for alignment, changing the order).
template <class Row>
double sum_of_minima(const Row& p, const Row& q, int V) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= V; i += 8)
#pragma omp simd
    for (int l = 0; l < 8; ++l) lanes[l] += std::min(p[i + l], q[i + l]);
  for (int l = 0; i < V; ++i, ++l) lanes[l] += std::min(p[i], q[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// sum_{u < m} row[u]. (GCC 12 does not vectorise loops with array reductions: per-variable terms
// are stored, then summed by this.)
inline double sum_row(const double* __restrict row, int m) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int u = 0; u < m; ++u) sum += row[u];
  return sum;
}

// partial[l] += row[l] * column[l] for l < Lanes: one step of Lanes independent dot products.
template <int Lanes>
[[gnu::always_inline]] inline void add_lane_products(const double* __restrict row, const double* __restrict column,
                                                     double* partial) {
#pragma omp simd
  for (int l = 0; l < Lanes; ++l) partial[l] += row[l] * column[l];
}

// column[c] += w0 t0[c] + w1 t1[c] + w2 t2[c] + w3 t3[c] for c < count: four table rows, weighted,
// added to one output column.
[[gnu::always_inline]] inline void add_four_weighted_rows(double* __restrict column, int count, double w0,
                                                          const double* __restrict t0, double w1,
                                                          const double* __restrict t1, double w2,
                                                          const double* __restrict t2, double w3,
                                                          const double* __restrict t3) {
#pragma omp simd
  for (int c = 0; c < count; ++c) column[c] += w0 * t0[c] + w1 * t1[c] + w2 * t2[c] + w3 * t3[c];
}

// ---------------------------------------------------------------------------------------------
// Stieltjes transforms at grid nodes (ChebyshevPieces; docs/design/summation.md, "Chebyshev
// pieces").

// At four nodes y0..y3 at once (one division per point, four_reciprocals): row_b[k] =
// 1 / (y_b + x_k)^2 and, returned, f_b = sum_k q_k / (y_b + x_k), s_b = sum_k q_k / (y_b + x_k)^2.
[[gnu::always_inline]] inline void stieltjes_four_nodes(const double* __restrict xs, const double* __restrict qs, int m,
                                                        double y0, double y1, double y2, double y3,
                                                        double* __restrict row0, double* __restrict row1,
                                                        double* __restrict row2, double* __restrict row3, double (&f)[4],
                                                        double (&s)[4]) {
  double f0 = 0, f1 = 0, f2 = 0, f3 = 0, s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : f0, f1, f2, f3, s0, s1, s2, s3)
  for (int k = 0; k < m; ++k) {
    double i0, i1, i2, i3;
    four_reciprocals(y0 + xs[k], y1 + xs[k], y2 + xs[k], y3 + xs[k], i0, i1, i2, i3);
    row0[k] = i0 * i0, row1[k] = i1 * i1, row2[k] = i2 * i2, row3[k] = i3 * i3;
    f0 += qs[k] * i0, f1 += qs[k] * i1, f2 += qs[k] * i2, f3 += qs[k] * i3;
    s0 += qs[k] * row0[k], s1 += qs[k] * row1[k], s2 += qs[k] * row2[k], s3 += qs[k] * row3[k];
  }
  f[0] = f0, f[1] = f1, f[2] = f2, f[3] = f3;
  s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3;
}

// The same at one node y.
[[gnu::always_inline]] inline void stieltjes_one_node(const double* __restrict xs, const double* __restrict qs, int m,
                                                      double y, double* __restrict row, double& first, double& second) {
  double f = 0.0, s = 0.0;
#pragma omp simd reduction(+ : f, s)
  for (int k = 0; k < m; ++k) {
    const double inverse = 1.0 / (y + xs[k]);
    row[k] = inverse * inverse;
    f += qs[k] * inverse;
    s += qs[k] * row[k];
  }
  first = f;
  second = s;
}

// ---------------------------------------------------------------------------------------------
// Full-size subsets (FullSubsetTerms; docs/design/summation.md, "Full-size terms"). A prefix of
// an n-subset has sum of x `X`, weight `W` and (Hessian products) sum of x v `Y`; its leaves are
// the subsets prefix + {l}, l in [begin, end), with s = c + X + x_l.

// Gradient and Hessian-diagonal leaf loop: r = W q_l / s, rt = r / s; grad_l += r x_l, diag_l +=
// r x_l - rt x_l^2; kRows > 0 also subtracts row_x[e] x_l rt from rows[e][l] (e < kRows);
// kRows == -1 stores rt in rt_out. Adds the sums of r, rt and r (X + x_l) to the outputs.
template <int kRows>
[[gnu::always_inline]] inline void full_subset_gradient_leaves(const double* __restrict xs, const double* __restrict qs,
                                                               double* __restrict grad, double* __restrict diag,
                                                               double* __restrict rt_out, double* const* rows,
                                                               const double* row_x, double X, double W, double c,
                                                               int begin, int end, double& r_total, double& rt_total,
                                                               double& accepted_total) {
  double r_sum = 0.0, rt_sum = 0.0, accepted_sum = 0.0;
#pragma omp simd reduction(+ : r_sum, rt_sum, accepted_sum)
  for (int l = begin; l < end; ++l) {
    const double inner = X + xs[l];
    const double inverse = 1.0 / (c + inner);
    const double r = W * qs[l] * inverse;
    const double rt = r * inverse;
    grad[l] += r * xs[l];
    diag[l] += r * xs[l] - rt * xs[l] * xs[l];
    if constexpr (kRows == -1) rt_out[l] = rt;
    for (int e = 0; e < kRows; ++e) rows[e][l] -= row_x[e] * xs[l] * rt;
    r_sum += r;
    rt_sum += rt;
    accepted_sum += r * inner;
  }
  r_total = r_sum, rt_total = rt_sum, accepted_total = accepted_sum;
}

// row[l] -= xu x_l rt_l for l in [begin, end): one prefix member's dense Hessian row.
[[gnu::always_inline]] inline void subtract_hessian_row(double* __restrict row, const double* __restrict xs,
                                                        const double* __restrict rt, double xu, int begin, int end) {
#pragma omp simd
  for (int l = begin; l < end; ++l) row[l] -= xu * xs[l] * rt[l];
}

// Four sibling prefixes (offsets c_b = c + X_b, weights w_b) over their shared leaves: the
// gradient/diagonal leaf loop for all four with one division per leaf. r[b], t[b]: the sums of
// r and r / s of sibling b; rx: sum of (sum_b r_b) x_l.
[[gnu::always_inline]] inline void full_subset_gradient_leaf_block(const double* __restrict xs,
                                                                   const double* __restrict qs,
                                                                   double* __restrict grad, double* __restrict diag,
                                                                   double c0, double c1, double c2, double c3,
                                                                   double w0, double w1, double w2, double w3,
                                                                   int begin, int end, double (&r)[4], double (&t)[4],
                                                                   double& rx_total) {
  double r0 = 0, r1 = 0, r2 = 0, r3 = 0, t0 = 0, t1 = 0, t2 = 0, t3 = 0, rx = 0;
#pragma omp simd reduction(+ : r0, r1, r2, r3, t0, t1, t2, t3, rx)
  for (int l = begin; l < end; ++l) {
    const double xl = xs[l], ql = qs[l];
    double i0, i1, i2, i3;
    four_reciprocals(c0 + xl, c1 + xl, c2 + xl, c3 + xl, i0, i1, i2, i3);
    const double a0 = w0 * ql * i0, a1 = w1 * ql * i1, a2 = w2 * ql * i2, a3 = w3 * ql * i3;
    const double b0 = a0 * i0, b1 = a1 * i1, b2 = a2 * i2, b3 = a3 * i3;
    const double r = (a0 + a1) + (a2 + a3), rt = (b0 + b1) + (b2 + b3);
    grad[l] += r * xl;
    diag[l] += r * xl - rt * xl * xl;
    rx += r * xl;
    r0 += a0, r1 += a1, r2 += a2, r3 += a3;
    t0 += b0, t1 += b1, t2 += b2, t3 += b3;
  }
  r[0] = r0, r[1] = r1, r[2] = r2, r[3] = r3;
  t[0] = t0, t[1] = t1, t[2] = t2, t[3] = t3;
  rx_total = rx;
}

// Hessian-vector product leaf loop: r = W q_l / s, dot = (Y + x_l v_l) / s; product_l +=
// r x_l (v_l - dot). Returns the sums of r and r dot.
[[gnu::always_inline]] inline void full_subset_hessian_leaves(const double* __restrict xs, const double* __restrict qs,
                                                              const double* __restrict vs, double* __restrict product,
                                                              double X, double Y, double W, double c, int begin,
                                                              int end, double& r_total, double& r_dot_total) {
  double r_sum = 0.0, r_dot_sum = 0.0;
#pragma omp simd reduction(+ : r_sum, r_dot_sum)
  for (int l = begin; l < end; ++l) {
    const double inverse = 1.0 / (c + X + xs[l]);
    const double r = W * qs[l] * inverse;
    const double dot = (Y + xs[l] * vs[l]) * inverse;
    product[l] += r * xs[l] * (vs[l] - dot);
    r_sum += r;
    r_dot_sum += r * dot;
  }
  r_total = r_sum, r_dot_total = r_dot_sum;
}

// The Hessian-vector leaf loop for four sibling prefixes (c_b = c + X_b, w_b, y_b = Y_b) over their
// shared leaves, one division per leaf. r[b], d[b]: the sums of r and r dot of sibling b.
[[gnu::always_inline]] inline void full_subset_hessian_leaf_block(const double* __restrict xs,
                                                                  const double* __restrict qs,
                                                                  const double* __restrict vs,
                                                                  double* __restrict product, double c0, double c1,
                                                                  double c2, double c3, double w0, double w1,
                                                                  double w2, double w3, double y0, double y1,
                                                                  double y2, double y3, int begin, int end,
                                                                  double (&r)[4], double (&d)[4]) {
  double r0 = 0, r1 = 0, r2 = 0, r3 = 0, d0 = 0, d1 = 0, d2 = 0, d3 = 0;
#pragma omp simd reduction(+ : r0, r1, r2, r3, d0, d1, d2, d3)
  for (int l = begin; l < end; ++l) {
    const double xl = xs[l], ql = qs[l], vl = vs[l], xv = xl * vl;
    double i0, i1, i2, i3;
    four_reciprocals(c0 + xl, c1 + xl, c2 + xl, c3 + xl, i0, i1, i2, i3);
    const double a0 = w0 * ql * i0, a1 = w1 * ql * i1, a2 = w2 * ql * i2, a3 = w3 * ql * i3;
    const double e0 = (y0 + xv) * i0, e1 = (y1 + xv) * i1, e2 = (y2 + xv) * i2, e3 = (y3 + xv) * i3;
    const double ad0 = a0 * e0, ad1 = a1 * e1, ad2 = a2 * e2, ad3 = a3 * e3;
    const double r = (a0 + a1) + (a2 + a3), rd = (ad0 + ad1) + (ad2 + ad3);
    product[l] += xl * (r * vl - rd);
    r0 += a0, r1 += a1, r2 += a2, r3 += a3;
    d0 += ad0, d1 += ad1, d2 += ad2, d3 += ad3;
  }
  r[0] = r0, r[1] = r1, r[2] = r2, r[3] = r3;
  d[0] = d0, d[1] = d1, d[2] = d2, d[3] = d3;
}

// ---------------------------------------------------------------------------------------------
// Power series.

// K = exp(A) as power series to degree N, for A with zero constant term (A[0] is not read), by
// the recurrence k K_k = sum_{i=1..k} i A_i K_{k-i} of K' = A' K.
template <int N>
inline void exp_of_series(const double* A, double* K) {
  K[0] = 1.0;
  for (int k = 1; k <= N; ++k) {
    double acc = 0.0;
    for (int i = 1; i <= k; ++i) acc += i * A[i] * K[k - i];
    K[k] = acc / k;
  }
}

}  // namespace multidraft
