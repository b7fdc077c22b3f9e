// A start for the inner Global Resolution system of a flat draft over a large support, from the law
// of a member's partners' worth (not in [GR]; a Newton start only: the solve certifies its answer;
// docs/design/warm-starts.md, "Partner law").
//
// Member i's terms hold the tuples of n i.i.d. draws (mass q_j / Q each, the base b drawing tokens
// of worth 0) that contain it. On a flat draft nearly every such tuple holds i once and n - 1
// other draws, so the mass the terms give i is about
//   m_i E[x_i / (1 + x_i + Z)],   m_i = Q^n - (Q - q_i)^n,
// Z the worth of n - 1 partners, each x_j with probability q_j / Q (0 with b / Q), and the
// rejected mass (the slack's share) about Q^n E[1 / (1 + Z_n)] - b^n, Z_n that of n draws (the
// tuples of the base alone are no term). Given the law of Z, the x that meet the targets t_i are
// x_i = h^-1(t_i / m_i), h(x) = E[x / (1 + x + L Z)], with the level L that leaves the rejected
// mass the system needs. So x_i is one increasing function of u_i = logit(t_i / m_i), and a round
// maps that function to the next: the law of the members' u is binned once, and each round
// pushes it through the current map (no pass over the members until the last round's lookups).
// The first map is x = e^u, the shape of the mean field of GlobalResolutionPlan::warm_start.
//
// That mean field replaces Z by its mean, which on a flat draft misses by Jensen's gap
// (1 / (1 + x + z) is convex in z) and often has no level at all; the rounds close most of that
// gap on flat drafts (docs/benchmarks/core-internals.md, "Partner-law rounds"). On peaked drafts,
// whose tuples draw a heavy member twice, the model errs far more: callers keep it to flat ones.
//
// The laws are weights on grids: the members' u on kMembers points, the worths' log x on kBins
// points (spacing delta). A mass is split between its two neighbouring grid points (linear in the
// coordinate), and so is the mass of a sum of two worths, whose logarithm is the larger one's plus
// log1p(e^{-|k - j| delta}): the same split for all pairs d points apart, no logarithm per pair.
// Zero worth (the base) is an atom of its own, and so is the worth of the members the tuples cannot
// cover. h^-1 is tabulated at uniform logits: a lookup per member.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>


namespace multidraft {

class PartnerMeanField {
 public:
  // Rewrites the covered members' entries of a (m members) from log(odds_j) + offset, odds_j =
  // t_j / (m_j - t_j), to their log x after `rounds` rounds (the header), clamped to
  // [-limit, limit]. A member is covered where odds_j > 0; the others' entries are left as they are
  // (their worth counts as e^5 times the largest other). mass: q_j; base: b; aim: the rejected mass
  // to leave.
  void refine(const double* mass, const double* odds, int m, int n, double base, double aim, int rounds, double limit,
              double offset, double* a) {
    if (m == 0 || n < 2 || rounds < 1) return;
    constexpr double kInfinity = std::numeric_limits<double>::infinity();
    double total = 0.0, uncovered = 0.0, low = kInfinity, high = -kInfinity;
#pragma omp simd reduction(+ : total, uncovered) reduction(min : low) reduction(max : high)
    for (int j = 0; j < m; ++j) {  // by value, branch-free: the loop vectorises
      const bool covered = odds[j] > 0.0;
      total += mass[j];
      uncovered += covered ? 0.0 : mass[j];
      const double below = covered ? a[j] : kInfinity, above = covered ? a[j] : -kInfinity;
      low = below < low ? below : low;
      high = above > high ? above : high;
    }
    if (!(low <= high) || !std::isfinite(high - low)) return;  // none covered (the a are finite logs)
    const double Q = base + total;
    // The members' law in u = log odds (a - offset): on a flat draft u follows the ratio order the
    // members come in, so the grid point changes rarely from one to the next, and a run's mass is
    // summed in registers (a store per member to the same point would wait on the one before).
    u_low_ = low - offset, u_step_ = std::max(high - low, 1e-9) / (kMembers - 1);
    members_.assign(kMembers + 1, 0.0);
    const double inverse_step = 1.0 / u_step_;
    int point = 0;
    double below = 0.0, above = 0.0;
    for (int j = 0; j < m; ++j) {
      if (!(odds[j] > 0.0)) continue;
      const double position = within((a[j] - low) * inverse_step, kMembers - 1.0), w = mass[j] / Q;
      const int k = static_cast<int>(position);
      if (k != point) {
        members_[point] += below, members_[point + 1] += above;
        point = k, below = above = 0.0;
      }
      const double upper = position - k;
      below += (1.0 - upper) * w, above += upper * w;
    }
    members_[point] += below, members_[point + 1] += above;
    members_[kMembers - 1] += members_[kMembers];  // u at the top lands on the last point
    members_.resize(kMembers);
    map_.resize(kMembers);
    for (int k = 0; k < kMembers; ++k) map_[k] = u_low_ + k * u_step_;  // x = e^u
    for (int round = 0; round < rounds; ++round) {
      partner_laws(n, base / Q, uncovered / Q);
      tabulate_inverse(level(n, Q, base, aim), limit);
      for (int k = 0; k < kMembers; ++k) map_[k] = inverse(u_low_ + k * u_step_);
    }
    const double *__restrict log_x = log_x_.data();
    const double logit_low = logit_low_ + offset, inverse_logit_step = inverse_step_;
#pragma omp simd
    for (int j = 0; j < m; ++j) {  // inverse(a_j - offset), by value (std::clamp's reference kept loops scalar)
      const double position = within((a[j] - logit_low) * inverse_logit_step, kInverse - 1.0);
      const int whole = static_cast<int>(position), k = whole < kInverse - 2 ? whole : kInverse - 2;
      const double value = log_x[k] + (position - k) * (log_x[k + 1] - log_x[k]);
      a[j] = odds[j] > 0.0 ? value : a[j];
    }
  }

 private:
  static constexpr int kMembers = 1024;  // grid points of the members' u
  static constexpr int kBins = 128;      // grid points of the worths' log x
  static constexpr int kTable = 257;     // h tabulated at log x = -limit - 2 .. limit + 2
  static constexpr int kInverse = 1024;  // log h^-1 tabulated at uniform logits

  // A law of worths: weight[k] at x = e^{grid_low_ + k delta_}, and `zero` at x = 0.
  struct Law {
    std::vector<double> weight;
    double zero = 0.0;
  };

  // u within [0, top], NaN to 0 (a grid index is read from it), by value.
  static double within(double u, double top) {
    u = u > 0.0 ? u : 0.0;
    return u < top ? u : top;
  }

  // Adds w at fractional grid position u (within the grid), split between its two neighbours.
  static void deposit(std::vector<double>& weight, double u, double w) {
    const int size = static_cast<int>(weight.size());
    u = within(u, size - 1.0);
    const int k = std::min(static_cast<int>(u), size - 2);
    const double upper = u - k;
    weight[k] += (1.0 - upper) * w;
    weight[k + 1] += upper * w;
  }

  // The laws of the worth of 1 .. n draws (laws_[k - 1]) under the current map.
  void partner_laws(int n, double zero_weight, double uncovered_weight) {
    double lowest = map_[0], highest = map_[0];
    for (double log_x : map_) lowest = std::min(lowest, log_x), highest = std::max(highest, log_x);
    const double uncovered_at = highest + 5.0;  // as GlobalResolutionPlan::warm_start places them
    if (uncovered_weight > 0.0) highest = uncovered_at;
    // The grid reaches past the largest worth by the log n a sum of n draws can add.
    delta_ = (std::max(highest - lowest, 1e-6) + std::log(static_cast<double>(n))) / (kBins - 1);
    grid_low_ = lowest;
    laws_.resize(n);
    Law& single = laws_[0];
    single.weight.assign(kBins, 0.0);
    single.zero = zero_weight;
    for (int k = 0; k < kMembers; ++k)
      if (members_[k] > 0.0) deposit(single.weight, (map_[k] - grid_low_) / delta_, members_[k]);
    if (uncovered_weight > 0.0) deposit(single.weight, (uncovered_at - grid_low_) / delta_, uncovered_weight);
    // log(1 + e^{-d delta}) / delta: where the sum of worths d points apart lands above the larger.
    lift_.resize(kBins);
    for (int d = 0; d < kBins; ++d) lift_[d] = std::log1p(std::exp(-d * delta_)) / delta_;
    for (int k = 1; k < n; ++k) convolve(laws_[k - 1], single, laws_[k]);
  }

  // out = the law of X + Y, X ~ x, Y ~ y independent. Grid points d apart sum to a worth
  // lift_[d] points above the larger one, the same split for every pair: one vectorised pass per d
  // (into padding past the grid, folded into its last point).
  void convolve(const Law& x, const Law& y, Law& out) {
    const int padding = static_cast<int>(lift_[0]) + 2;
    padded_.assign(kBins + padding, 0.0);
    double* sums = padded_.data();  // not restrict: below and above (each pass's own) overlap it
    const double *__restrict xw = x.weight.data(), *__restrict yw = y.weight.data();
    const double x_zero = x.zero, y_zero = y.zero;
#pragma omp simd
    for (int i = 0; i < kBins; ++i) sums[i] = xw[i] * y_zero + x_zero * yw[i];
    pairs_.resize(kBins);
    double* __restrict pair = pairs_.data();
    for (int d = 0; d < kBins; ++d) {
      const int whole = static_cast<int>(lift_[d]);
      const double upper = lift_[d] - whole, lower = 1.0 - upper;
      // the pairs (i, i - d) and (i - d, i) (once for d = 0), landing at i + lift_[d]
#pragma omp simd
      for (int i = d; i < kBins; ++i) pair[i] = d == 0 ? xw[i] * yw[i] : xw[i] * yw[i - d] + xw[i - d] * yw[i];
      double* below = sums + whole;  // two passes: the points overlap from one i to the next
#pragma omp simd
      for (int i = d; i < kBins; ++i) below[i] += lower * pair[i];
      double* above = sums + whole + 1;
#pragma omp simd
      for (int i = d; i < kBins; ++i) above[i] += upper * pair[i];
    }
    out.weight.assign(padded_.begin(), padded_.begin() + kBins);
    for (int i = kBins; i < kBins + padding; ++i) out.weight[kBins - 1] += padded_[i];
    out.zero = x.zero * y.zero;
  }

  // log L: Q^n E[1 / (1 + L Z_n)] - b^n = aim, by bisection (the rejected mass falls with L).
  // Leaves the grid's worths e^{grid_low_ + k delta_} in worth_ (tabulate_inverse scales them).
  double level(int n, double Q, double base, double aim) {
    const Law& full = laws_[n - 1];
    worth_.resize(kBins);
    for (int k = 0; k < kBins; ++k) worth_[k] = std::exp(grid_low_ + k * delta_);
    const double Q_n = std::pow(Q, n), b_n = std::pow(base, n);
    double low = -60.0, high = 60.0;
    for (int step = 0; step < 60; ++step) {
      const double middle = 0.5 * (low + high), L = std::exp(middle);
      double expected = full.zero;
      const double *__restrict weight = full.weight.data(), *__restrict worth = worth_.data();
#pragma omp simd reduction(+ : expected)
      for (int k = 0; k < kBins; ++k) expected += weight[k] / (1.0 + L * worth[k]);
      (Q_n * expected - b_n > aim ? low : high) = middle;
    }
    return 0.5 * (low + high);
  }

  // log h^-1 at kInverse uniform logits (h in logit form increases with log x: from a table of it
  // at kTable points of log x, walked once), for `inverse`; the worths at level e^log_level.
  void tabulate_inverse(double log_level, double limit) {
    const Law& partners = laws_[laws_.size() - 2];  // n - 1 draws
    const double level = std::exp(log_level);
    for (double& worth : worth_) worth *= level;
    logit_.resize(kTable);
    table_low_ = -limit - 2.0, table_step_ = (2.0 * limit + 4.0) / (kTable - 1);
    for (int g = 0; g < kTable; ++g) {
      const double x = std::exp(table_low_ + g * table_step_);
      double share = partners.zero * x / (1.0 + x), rest = partners.zero / (1.0 + x);  // h and 1 - h
      const double *__restrict weight = partners.weight.data(), *__restrict worth = worth_.data();
#pragma omp simd reduction(+ : share, rest)
      for (int k = 0; k < kBins; ++k) {
        const double inverse_denominator = 1.0 / (1.0 + x + worth[k]);
        share += weight[k] * x * inverse_denominator;
        rest += weight[k] * (1.0 + worth[k]) * inverse_denominator;
      }
      logit_[g] = std::log(share / rest);
    }
    logit_low_ = logit_.front();
    const double logit_step = (logit_.back() - logit_low_) / (kInverse - 1);
    inverse_step_ = logit_step > 0.0 ? 1.0 / logit_step : 0.0;
    log_x_.resize(kInverse);
    int g = 0;
    for (int k = 0; k < kInverse; ++k) {
      const double u = logit_low_ + k * logit_step;
      while (g + 2 < kTable && logit_[g + 1] <= u) ++g;
      const double span = logit_[g + 1] - logit_[g];
      const double fraction = span > 0.0 ? std::clamp((u - logit_[g]) / span, 0.0, 1.0) : 0.0;
      log_x_[k] = std::clamp(table_low_ + (g + fraction) * table_step_, -limit, limit);
    }
  }

  // log x with logit h(x) = u, within the tabulated range.
  double inverse(double u) const {
    const double position = within((u - logit_low_) * inverse_step_, kInverse - 1.0);
    const int k = std::min(static_cast<int>(position), kInverse - 2);
    return log_x_[k] + (position - k) * (log_x_[k + 1] - log_x_[k]);
  }

  std::vector<double> members_, map_;  // the members' law in u, and log x at its grid points
  std::vector<Law> laws_;
  std::vector<double> lift_, padded_, pairs_, worth_, logit_, log_x_;
  double u_low_ = 0.0, u_step_ = 1.0, grid_low_ = 0.0, delta_ = 1.0;
  double table_low_ = 0.0, table_step_ = 1.0, logit_low_ = 0.0, inverse_step_ = 0.0;
};

}  // namespace multidraft
