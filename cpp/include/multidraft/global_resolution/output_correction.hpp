// Exact output correction of an approximate verifier whose candidate law is known exactly.
//
// A plan proposes, given the drafts, at most one candidate token y (always a draft) with shares
// c(y | w) summing to at most 1; the rest of the mass proposes nothing. If r(y) = sum_w P(w)
// c(y | w) is known exactly, keeping y with probability min(1, p(y) / r(y)) and otherwise
// drawing from (p - r)^+ normalised outputs p exactly, whatever r is:
//   P(out = z) = min(r, p)(z) + [1 - sum min(r, p)] (p - r)^+(z) / sum (p - r)^+ = p(z),
// since 1 - sum min(r, p) = sum (p - r)^+ when sum p = 1. The probability that a candidate is
// kept is sum_y min(r(y), p(y)). Used by Global Resolution (plan.hpp) to make [GR]'s near-optimal
// plan exactly lossless; not in [GR] itself: the derivation, the candidate law and the cost are in
// docs/design/output-correction.md.
#pragma once
#include <algorithm>
#include <vector>

#include "multidraft/core/distribution.hpp"
#include "multidraft/core/rng.hpp"

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

  // p (V,) with its scale (distribution.hpp's ScaledRow), and the exact candidate law r: `law` at
  // `tokens` (increasing ids), 0 elsewhere. p and the tokens are viewed, not copied (they must
  // outlive the correction: the plan's own row and draft support). One number is stored per token
  // (O(draft support), no V-long array), in place of its r: s(y) = p(y) - r(y) >= 0 where
  // r(y) <= p(y) (the residual; y is always kept), else s(y) = p(y) / r(y) - 1 in [-1, 0) (keep
  // probability 1 + s(y); no residual). Elsewhere the residual is p itself. A token of p(y) = 0
  // gets s(y) = -1 (never kept), also where its r(y) underflowed to 0.
  OutputCorrection(const ScaledRow& p, int V, const std::vector<int>& tokens, std::vector<double> law)
      : p_(p), V_(V), tokens_(tokens.data()), count_(tokens.size()), surplus_(std::move(law)) {
    const int* t = tokens_;
    double* s = surplus_.data();
    double kept = 0.0;
    for (std::size_t e = 0; e < count_; ++e) kept += std::min(s[e], p[t[e]]);  // by increasing id
    const double *x = p.data, scale = p.scale;
#pragma omp simd
    for (std::size_t e = 0; e < count_; ++e) {
      const double py = x[t[e]] * scale, r = s[e];
      s[e] = !(py > 0.0) ? -1.0 : r <= py ? py - r : py / r - 1.0;
    }
    kept_ = kept;
  }

  // Probability that the candidate is kept: sum_y min(r(y), p(y)).
  double kept() const { return kept_; }

  // s at each token of the law (the constructor's), and the residual's total mass
  // sum_z (p - r)^+(z): p off the tokens, summed over the vocabulary once.
  const std::vector<double>& surplus() const { return surplus_; }
  double residual_mass() const {
    const double *x = p_.data, scale = p_.scale;
    double total = 0.0;
    int begin = 0;
    auto add_p = [&](int end) {  // p on the tokens [begin, end), none of them in the law
      double part = 0.0;
#pragma omp simd reduction(+ : part)
      for (int y = begin; y < end; ++y) part += x[y] * scale;
      total += part;
    };
    for (std::size_t e = 0; e < count_; ++e) {
      add_p(tokens_[e]);
      total += surplus_[e] > 0.0 ? surplus_[e] : 0.0;
      begin = tokens_[e] + 1;
    }
    add_p(V_);
    return total;
  }

  double keep_probability(int y) const {
    const int* found = std::lower_bound(tokens_, tokens_ + count_, y);
    if (found == tokens_ + count_ || *found != y) return 1.0;  // r(y) = 0
    const double s = surplus_[found - tokens_];
    return s >= 0.0 ? 1.0 : 1.0 + s;
  }

  // The output law given one tuple's candidates.
  void write_law(const Candidates& c, double* out) const {
    const int V = V_;
    double kept_share = 0.0;
    for (int k = 0; k < c.count; ++k) kept_share += c.share[k] * keep_probability(c.token[k]);
    const double *x = p_.data, scale = p_.scale;
#pragma omp simd
    for (int y = 0; y < V; ++y) out[y] = x[y] * scale;  // the residual (p - r)^+, then scaled
    for (std::size_t e = 0; e < count_; ++e) out[tokens_[e]] = surplus_[e] > 0.0 ? surplus_[e] : 0.0;
    double residual = 0.0;
#pragma omp simd reduction(+ : residual)
    for (int y = 0; y < V; ++y) residual += out[y];
    if (residual > 0.0) {
      const double factor = std::max(1.0 - kept_share, 0.0) / residual;
#pragma omp simd
      for (int y = 0; y < V; ++y) out[y] *= factor;
      for (int k = 0; k < c.count; ++k) out[c.token[k]] += c.share[k] * keep_probability(c.token[k]);
      return;
    }
    // No residual: r = p up to round-off, so only round-off is rejected; keep the candidates in
    // proportion (the fallback draft when the tuple proposed nothing, p itself if p(fallback) = 0).
    std::fill(out, out + V, 0.0);
    if (!(kept_share > 0.0)) {
      if (p_[c.fallback] > 0.0) {
        out[c.fallback] = 1.0;
      } else {
        for (int y = 0; y < V; ++y) out[y] = x[y] * scale;
      }
      return;
    }
    for (int k = 0; k < c.count; ++k) out[c.token[k]] += c.share[k] * keep_probability(c.token[k]) / kept_share;
  }

  // One draw from write_law's law without building it: the candidate, its keep test, and only on
  // rejection one pass over p for the residual.
  int sample(const Candidates& c, Rng& rng) const {
    double u = rng.uniform(), kept_share = 0.0;
    for (int k = 0; k < c.count; ++k) {
      const double kept = c.share[k] * keep_probability(c.token[k]);
      if (u < kept) return c.token[k];
      u -= kept;
      kept_share += kept;
    }
    const int token = sample_residual(rng);
    if (token >= 0) return token;
    if (!(kept_share > 0.0))  // as write_law: the fallback draft, or p itself where p(fallback) = 0
      return p_[c.fallback] > 0.0 ? c.fallback : sample_index_by(V_, rng, [this](int i) { return p_[i]; });
    u = rng.uniform() * kept_share;  // round-off rejection without a residual: as write_law
    for (int k = 0; k < c.count; ++k) {
      const double kept = c.share[k] * keep_probability(c.token[k]);
      if (u < kept) return c.token[k];
      u -= kept;
    }
    return c.token[c.count - 1];
  }

 private:
  // One draw from the residual (p - r)^+ (p off the stored tokens), -1 when it has no mass, as
  // sample_index_by (rng.hpp) draws: vectorised block sums of p into SampleBlocks, corrected at
  // the stored tokens (by increasing id, so block by block), then one block walked.
  int sample_residual(Rng& rng) const {
    constexpr int kBlock = SampleBlocks::kSize;
    std::vector<double>& blocks = SampleBlocks::of_this_thread();
    const int count = (V_ + kBlock - 1) / kBlock;
    blocks.resize(count);
    const double *x = p_.data, scale = p_.scale;
    for (int b = 0; b < count; ++b) {
      const int begin = b * kBlock, end = std::min(V_, begin + kBlock);
      double block = 0.0;
#pragma omp simd reduction(+ : block)
      for (int i = begin; i < end; ++i) block += x[i] * scale;
      blocks[b] = block;
    }
    auto residual_at = [&](std::size_t e) { return surplus_[e] > 0.0 ? surplus_[e] : 0.0; };
    for (std::size_t e = 0; e < count_; ++e) blocks[tokens_[e] / kBlock] += residual_at(e) - p_[tokens_[e]];
    double total = 0.0;
    for (double& block : blocks) total += block = std::max(block, 0.0);  // cancellation never leaves less
    if (!(total > 0.0)) return -1;
    const double u = rng.uniform() * total;
    double cumulative = 0.0;
    std::size_t e = 0;
    int last = -1;  // the last token of positive weight walked (round-off past the end)
    for (int b = 0; b < count; ++b) {
      const int begin = b * kBlock, end = std::min(V_, begin + kBlock);
      if (cumulative + blocks[b] <= u) {
        cumulative += blocks[b];
        continue;
      }
      e = std::lower_bound(tokens_ + e, tokens_ + count_, begin) - tokens_;
      for (int i = begin; i < end; ++i) {
        double w;
        if (e < count_ && tokens_[e] == i) {
          w = residual_at(e++);
        } else {
          w = p_[i];
        }
        if (w <= 0.0) continue;
        last = i;
        cumulative += w;
        if (u < cumulative) return i;
      }
    }
    if (last >= 0) return last;
    for (int i = V_ - 1; i >= 0; --i) {  // round-off past every walked block: the last token of positive weight
      const int* found = std::lower_bound(tokens_, tokens_ + count_, i);
      const double w = found != tokens_ + count_ && *found == i ? residual_at(found - tokens_) : p_[i];
      if (w > 0.0) return i;
    }
    return -1;
  }

  ScaledRow p_{nullptr};
  int V_ = 0;
  const int* tokens_ = nullptr;   // the tokens of the law, increasing (viewed)
  std::size_t count_ = 0;
  std::vector<double> surplus_;   // s at each of them
  double kept_ = 0.0;
};

}  // namespace multidraft
