// Exact output correction of an approximate verifier whose candidate law is known exactly.
//
// A plan proposes, given the drafts, at most one candidate token y (always a draft) with shares
// c(y | w) summing to at most 1; the rest of the mass proposes nothing. If r(y) = sum_w P(w)
// c(y | w) is known exactly, keeping y with probability min(1, p(y) / r(y)) and otherwise
// drawing from (p - r)^+ normalised outputs p exactly, whatever r is:
//   P(out = z) = min(r, p)(z) + [1 - sum min(r, p)] (p - r)^+(z) / sum (p - r)^+ = p(z),
// since 1 - sum min(r, p) = sum (p - r)^+ when sum p = 1. The probability that a candidate is
// kept is sum_y min(r(y), p(y)). Used by Global Resolution (global_resolution.hpp) to make
// [GR]'s near-optimal plan exactly lossless; not in [GR] itself.
#pragma once
#include <algorithm>
#include <memory>

#include "multidraft/distribution.hpp"
#include "multidraft/rng.hpp"

namespace multidraft {

// What a plan proposes for one draft tuple: distinct tokens (drafts) with shares summing to at
// most 1. `fallback` is a draft of the tuple, output only when round-off left nothing else.
struct Candidates {
  static constexpr int kMax = 16;  // drafts per tuple (Global Resolution: kMaxTermSize)
  int count = 0;
  int token[kMax];
  double share[kMax];
  int fallback = 0;
  void add(int t, double s) {
    token[count] = t;
    share[count++] = s;
  }
};

class OutputCorrection {
 public:
  OutputCorrection() = default;

  // p (V,) and the exact candidate law r, which is 0 except at the tokens that
  // `candidate_law(propose)` passes to propose(y, r(y)) (a later r for the same y replaces the
  // earlier). One V-long array serves both uses: s(y) = p(y) - r(y) >= 0 where r(y) <= p(y) (the
  // residual; y is always kept), else s(y) = p(y) / r(y) - 1 in [-1, 0) (keep probability
  // 1 + s(y); no residual).
  // p is read in place with its scale (distribution.hpp's ScaledRow).
  template <class CandidateLaw>
  OutputCorrection(const ScaledRow& p, int V, CandidateLaw candidate_law) : V_(V), surplus_(new double[V]) {
    const double *in = p.data, scale = p.scale;
    double* surplus = surplus_.get();  // uninitialised: the first pass writes every entry
    double total = 0.0;
#pragma omp simd reduction(+ : total)
    for (int y = 0; y < V; ++y) total += surplus[y] = in[y] * scale;
    candidate_law([&](int y, double r) { surplus_[y] = r <= p[y] ? p[y] - r : p[y] / r - 1.0; });
    double residual = 0.0;
    // max by value: std::max(surplus_[y], 0.0) returns a reference, which compilers have turned
    // into a masked gather from the constant's address (a third of a small plan's time)
#pragma omp simd reduction(+ : residual)
    for (int y = 0; y < V; ++y) {
      const double s = surplus[y];
      residual += s > 0.0 ? s : 0.0;
    }
    residual_ = residual;
    kept_ = std::max(total - residual, 0.0);  // sum min(r, p) = sum p - sum (p - r)^+
  }

  // Probability that the candidate is kept: sum_y min(r(y), p(y)).
  double kept() const { return kept_; }

  double keep_probability(int y) const { return surplus_[y] >= 0.0 ? 1.0 : 1.0 + surplus_[y]; }

  // The output law given one tuple's candidates.
  void write_law(const Candidates& c, double* out) const {
    const int V = V_;
    double kept_share = 0.0;
    for (int k = 0; k < c.count; ++k) kept_share += c.share[k] * keep_probability(c.token[k]);
    std::fill(out, out + V, 0.0);
    if (residual_ > 0.0) {
      const double scale = std::max(1.0 - kept_share, 0.0) / residual_;
      const double* surplus = surplus_.get();
#pragma omp simd
      for (int y = 0; y < V; ++y) out[y] = (surplus[y] > 0.0 ? surplus[y] : 0.0) * scale;  // by value, as above
      for (int k = 0; k < c.count; ++k) out[c.token[k]] += c.share[k] * keep_probability(c.token[k]);
      return;
    }
    // No residual: r = p up to round-off, so only round-off is rejected; keep the candidates in
    // proportion (the fallback draft when the tuple proposed nothing).
    if (!(kept_share > 0.0)) {
      out[c.fallback] = 1.0;
      return;
    }
    for (int k = 0; k < c.count; ++k) out[c.token[k]] += c.share[k] * keep_probability(c.token[k]) / kept_share;
  }

  // One draw from write_law's law without building it: the candidate, its keep test, and only on
  // rejection one pass over the residual.
  int sample(const Candidates& c, Rng& rng) const {
    double u = rng.uniform(), kept_share = 0.0;
    for (int k = 0; k < c.count; ++k) {
      const double kept = c.share[k] * keep_probability(c.token[k]);
      if (u < kept) return c.token[k];
      u -= kept;
      kept_share += kept;
    }
    if (residual_ > 0.0) return sample_index(surplus_.get(), V_, rng);
    if (!(kept_share > 0.0)) return c.fallback;
    u = rng.uniform() * kept_share;  // round-off rejection without a residual: as write_law
    for (int k = 0; k < c.count; ++k) {
      const double kept = c.share[k] * keep_probability(c.token[k]);
      if (u < kept) return c.token[k];
      u -= kept;
    }
    return c.token[c.count - 1];
  }

 private:
  int V_ = 0;
  std::unique_ptr<double[]> surplus_;
  double kept_ = 0.0, residual_ = 0.0;
};

}  // namespace multidraft
