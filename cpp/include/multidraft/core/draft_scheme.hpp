// Draft schemes: how the n draft tokens are drawn, with exact tuple and set probabilities.
// [GR] Section 3.1: p_draft(w) = prod_j q(w_j) (i.i.d.) or prod_j q_j(w_j) (independent models);
// draws without replacement use the sequential law prod_j q(w_j) / (Q - sum_{l<j} q(w_l)).
// Degenerate draft laws stay drawable, so that every verifier degrades losslessly instead of
// refusing them: without replacement from a support of k < n tokens, the first k draws exhaust
// the support (sequential law above) and draws k+1..n repeat draw k; the hub scheme with a
// one-token support {a} draws (a, a); the top-n drafts of a support of k < n tokens are its k
// tokens padded by repeats of the k-th, as without replacement.
#pragma once
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "multidraft/detail/bits.hpp"
#include "multidraft/core/distribution.hpp"
#include "multidraft/core/rng.hpp"

namespace multidraft {

// hub: SpecHub's sparse pair design ([HUB] Section 4): with hub a = argmax q (smallest index on
// ties), x1 ~ q, and x2 = a unless x1 = a, in which case x2 ~ q restricted to V \ {a} (x2 = a when
// q has no other token). n = 2 only.
// topk: the n most probable tokens of q, deterministic (top_drafts below): the token trees of EAGLE
// and SGLang, whose drafts are no sample of q.
enum class SchemeKind { iid, without_replacement, independent, hub, topk };

// Truncated exponential generating functions (ours, in place of the inclusion-exclusion sums of
// [GR] Appendix K, Eqs. 117-120, which cancel catastrophically: every EGF term is nonnegative;
// docs/design/summation.md). A polynomial is stored as its
// coefficients a_0 .. a_n; tuples of length n are counted by n! a_n.
//
// Multiplies `in` by one token's factor (e^{q x} - 1) = sum_{d >= 1} q^d x^d / d!.
inline void multiply_by_token_factor(const double* in, double q, int n, double* out) {
  for (int m = 0; m <= n; ++m) {
    double acc = 0.0, term = 1.0;  // term = q^(m-j) / (m-j)!
    for (int j = m - 1; j >= 0; --j) {
      term *= q / (m - j);
      acc += in[j] * term;
    }
    out[m] = acc;
  }
}

// The tokens with q > 0, in increasing id (the one support scan: schemes, plans, checks). Blocks
// of 64 tokens: a vector compare gives each block's bit mask of kept tokens (positive_mask64),
// an empty block is skipped, a full one written without looking at its bits, and the others walked
// bit by bit: a branch per block, not per token, which a draft top-k would mispredict at nearly
// every kept token.
inline std::vector<int> draft_support(const double* q, int V) {
  constexpr int kBlock = 64;
  std::vector<int> support(kBlock);
  int count = 0;
  for (int begin = 0; begin < V; begin += kBlock) {
    std::uint64_t mask = 0;
    if (V - begin >= kBlock) {
      mask = positive_mask64(q + begin);
    } else {
      for (int j = 0; j < V - begin; ++j) mask |= static_cast<std::uint64_t>(q[begin + j] > 0.0) << j;
    }
    if (mask == 0) continue;
    if (count + kBlock > static_cast<int>(support.size())) support.resize(2 * support.size());
    if (mask == ~std::uint64_t{0}) {
      int* __restrict out = support.data() + count;
#pragma omp simd
      for (int j = 0; j < kBlock; ++j) out[j] = begin + j;
      count += kBlock;
      continue;
    }
    for (; mask != 0; mask &= mask - 1) support[count++] = begin + lowest_set_bit(mask);
  }
  support.resize(count);
  return support;
}

// The topk scheme's drafts: the n most probable tokens of q, most probable first, ties by lowest id;
// a support of k < n tokens gives its k tokens in that order, then n - k repeats of the k-th (so a
// zero-mass token is never a draft). Row: `const double*` or ScaledRow (distribution.hpp), so that
// drafts drawn from a normalised copy and a row read in place with its scale rank the same values.
// O(k log n) after the support scan.
template <class Row>
std::vector<int> top_drafts(const Row& q, int V, int n) {
  std::vector<int> tokens = draft_support(stored(q), V);
  if (tokens.empty()) throw std::invalid_argument("'q' has no token of positive probability");
  const int k = std::min(n, static_cast<int>(tokens.size()));
  std::partial_sort(tokens.begin(), tokens.begin() + k, tokens.end(), [&q](int a, int b) {
    const double qa = q[a], qb = q[b];
    return qa > qb || (qa == qb && a < b);
  });
  tokens.resize(k);
  tokens.resize(n, tokens[k - 1]);
  return tokens;
}

// Coefficients of e^{base x} truncated at degree n.
inline void exponential_base(double base_mass, int n, double* out) {
  out[0] = 1.0;
  for (int m = 1; m <= n; ++m) out[m] = out[m - 1] * base_mass / m;
}

inline double tuples_of_length(const double* coefficients, int n) {
  double n_factorial = 1.0;
  for (int m = 2; m <= n; ++m) n_factorial *= m;
  return coefficients[n] * n_factorial;
}

// Mass of the i.i.d. tuples in (B ∪ U)^n whose tokens outside B are exactly U, where B is a
// disjoint block of draft mass base_mass (base_mass = 0: tuples whose set is exactly U):
// n! [x^n] e^{base x} prod_{u in U} (e^{q_u x} - 1). Every term is non-negative, so there is no
// cancellation (unlike the PIE form of Eq. 117).
inline double egf_set_mass(double base_mass, const double* member_mass, int size, int n) {
  if (size > n) return 0.0;
  std::vector<double> coeff(n + 1), next(n + 1);
  exponential_base(base_mass, n, coeff.data());
  for (int k = 0; k < size; ++k) {
    multiply_by_token_factor(coeff.data(), member_mass[k], n, next.data());
    std::swap(coeff, next);
  }
  return tuples_of_length(coeff.data(), n);
}

// A view of a draft scheme over caller-owned probabilities:
// q has V entries (iid, without_replacement, hub, topk) or n rows of V entries (independent,
// row-major).
class DraftScheme {
 public:
  DraftScheme(SchemeKind kind, int n, int V, const double* q) : kind_(kind), n_(n), V_(V), q_(q) {
    if (n < 1) throw std::invalid_argument("'n' must be >= 1");
    const int rows = kind == SchemeKind::independent ? n : 1;
    total_.assign(rows, 0.0);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < V; ++i) total_[r] += q[r * static_cast<std::int64_t>(V) + i];
    if (kind == SchemeKind::without_replacement) distinct_draws_ = std::min(n, static_cast<int>(support().size()));
    if (kind == SchemeKind::topk) {
      top_ = top_drafts(q, V, n);
      top_set_ = top_;
      std::sort(top_set_.begin(), top_set_.end());
      top_set_.erase(std::unique(top_set_.begin(), top_set_.end()), top_set_.end());
    }
    if (kind == SchemeKind::hub) {
      if (n != 2) throw std::invalid_argument("hub drafts (SpecHub) take 'n' = 2, got " + std::to_string(n));
      hub_ = static_cast<int>(std::max_element(q, q + V) - q);  // first maximum: smallest index
      for (int i = 0; i < V; ++i)
        if (i != hub_) off_hub_ += q[i];  // summed, not 1 - q(a): no cancellation when q(a) ~ 1
    }
  }

  // SpecHub's hub token (hub scheme only).
  int hub() const { return hub_; }
  // Draft mass off the hub, sum_{x != a} q(x) (hub scheme only); 0 when the hub is the only token.
  double off_hub_mass() const { return off_hub_; }
  // Number of distinct tokens a without-replacement draw takes: min(n, |support|).
  int distinct_draws() const { return distinct_draws_; }

  SchemeKind kind() const { return kind_; }
  int n() const { return n_; }
  int vocabulary_size() const { return V_; }
  // Probability row of draft j (the same row for every j unless the drafts are independent).
  const double* row(int j) const {
    return kind_ == SchemeKind::independent ? q_ + static_cast<std::int64_t>(j) * V_ : q_;
  }

  // Tokens that some draft can take, ascending (topk: the distinct top-n drafts).
  std::vector<int> support() const {
    if (kind_ == SchemeKind::topk) return top_set_;
    std::vector<int> tokens = draft_support(row(0), V_);
    for (int r = 1; r < (kind_ == SchemeKind::independent ? n_ : 1); ++r) {
      const std::vector<int> more = draft_support(row(r), V_);
      std::vector<int> both;
      std::set_union(tokens.begin(), tokens.end(), more.begin(), more.end(), std::back_inserter(both));
      tokens.swap(both);
    }
    return tokens;
  }

  double tuple_probability(const int* drafts) const {
    if (kind_ == SchemeKind::topk) return std::equal(top_.begin(), top_.end(), drafts) ? 1.0 : 0.0;
    if (kind_ == SchemeKind::hub) {  // Q(x, a) = q(x), Q(a, x) = q(a) q(x) / (1 - q(a)), x != a
      const int x1 = drafts[0], x2 = drafts[1];
      if (!(off_hub_ > 0.0)) return x1 == hub_ && x2 == hub_ ? 1.0 : 0.0;  // one-token support: (a, a)
      if (x1 != hub_ && x2 == hub_) return q_[x1];
      if (x1 == hub_ && x2 != hub_) return q_[hub_] * q_[x2] / off_hub_;
      return 0.0;
    }
    double probability = 1.0, drawn = 0.0;
    for (int j = 0; j < n_; ++j) {
      const double mass = row(j)[drafts[j]];
      if (kind_ == SchemeKind::without_replacement) {
        if (j >= distinct_draws_) {  // the support is exhausted: draw j repeats the last distinct one
          if (drafts[j] != drafts[distinct_draws_ - 1]) return 0.0;
          continue;
        }
        for (int l = 0; l < j; ++l)
          if (drafts[l] == drafts[j]) return 0.0;
        const double remaining = remaining_mass(drafts, j, drawn);
        if (!(remaining > 0.0)) return 0.0;
        probability *= mass / remaining;
        drawn += mass;
      } else {
        probability *= mass;
      }
    }
    return probability;
  }

  // Mass of the tuples whose set of distinct tokens is exactly U (sorted, distinct tokens).
  double set_mass(const int* U, int size) const {
    if (size < 1 || size > n_) return 0.0;
    switch (kind_) {
      case SchemeKind::iid: {
        std::vector<double> mass(size);
        for (int k = 0; k < size; ++k) mass[k] = q_[U[k]];
        return egf_set_mass(0.0, mass.data(), size, n_);
      }
      case SchemeKind::without_replacement:
        return size == distinct_draws_ ? ordered_without_replacement_mass(U, size) : 0.0;
      case SchemeKind::independent:
        return covering_mass(U, size);
      case SchemeKind::hub: {  // {x, a}: Q(x, a) + Q(a, x) = q(x) / (1 - q(a))
        if (!(off_hub_ > 0.0)) return size == 1 && U[0] == hub_ ? 1.0 : 0.0;  // only (a, a)
        if (size != 2 || (U[0] != hub_ && U[1] != hub_)) return 0.0;
        const int x = U[0] == hub_ ? U[1] : U[0];
        return q_[x] + q_[hub_] * q_[x] / off_hub_;
      }
      case SchemeKind::topk:  // the one tuple's set
        return std::equal(U, U + size, top_set_.begin(), top_set_.end()) ? 1.0 : 0.0;
    }
    return 0.0;
  }

  void sample(Rng& rng, int* out) const {
    if (kind_ == SchemeKind::topk) {  // deterministic: rng unused
      std::copy(top_.begin(), top_.end(), out);
      return;
    }
    if (kind_ == SchemeKind::hub) {
      out[0] = sample_index(q_, V_, rng);
      if (out[0] != hub_ || !(off_hub_ > 0.0)) {
        out[1] = hub_;
      } else {
        std::vector<double> off_hub(q_, q_ + V_);
        off_hub[hub_] = 0.0;
        out[1] = sample_index(off_hub.data(), V_, rng);
      }
      return;
    }
    if (kind_ != SchemeKind::without_replacement) {
      for (int j = 0; j < n_; ++j) out[j] = sample_index(row(j), V_, rng);
      return;
    }
    std::vector<double> remaining(q_, q_ + V_);
    for (int j = 0; j < n_; ++j) {
      if (j >= distinct_draws_) {
        out[j] = out[j - 1];
        continue;
      }
      out[j] = sample_index(remaining.data(), V_, rng);
      remaining[out[j]] = 0.0;
    }
  }

 private:
  // Draft mass left after drawing `count` distinct tokens of mass `drawn`. Q - drawn cancels
  // catastrophically when drawn is close to Q (a peaked draft), so then the rest is summed.
  double remaining_mass(const int* drawn_tokens, int count, double drawn) const {
    if (drawn <= 0.5 * total_[0]) return total_[0] - drawn;
    double rest = 0.0;
    for (int i = 0; i < V_; ++i) {
      if (q_[i] <= 0.0) continue;
      bool taken = false;
      for (int l = 0; l < count && !taken; ++l) taken = drawn_tokens[l] == i;
      if (!taken) rest += q_[i];
    }
    return rest;
  }

  // P(the n draws without replacement are U in some order), by a DP over the subsets of U
  // already drawn: f(A) = sum_{a in A} f(A \ a) q(a) / (Q - Q(A \ a)), where
  // Q - Q(A) = Q(V \ U) + Q(U \ A) is a sum of non-negative terms (no cancellation).
  double ordered_without_replacement_mass(const int* U, int size) const {
    if (size > 20) throw std::invalid_argument("'n' > 20 draws without replacement are not supported");
    const std::uint32_t full = (1u << size) - 1;
    std::vector<double> f(full + 1, 0.0), drawn_mass(full + 1, 0.0);
    f[0] = 1.0;
    for (std::uint32_t A = 1; A <= full; ++A) {
      const int low = lowest_set_bit(A);
      drawn_mass[A] = drawn_mass[A & (A - 1)] + q_[U[low]];
    }
    const double outside_U = remaining_mass(U, size, drawn_mass[full]);
    for (std::uint32_t A = 1; A <= full; ++A) {
      for (int k = 0; k < size; ++k) {
        if (!(A >> k & 1u)) continue;
        const std::uint32_t before = A & ~(1u << k);
        const double remaining = outside_U + drawn_mass[full & ~before];
        // The ratio first, as tuple_probability: f * q underflows for a subnormal q where the ratio is O(1).
        if (f[before] > 0.0 && remaining > 0.0) f[A] += f[before] * (q_[U[k]] / remaining);
      }
    }
    return f[full];
  }

  // P(independent draws cover exactly U): DP over draft positions with the covered subset as state.
  double covering_mass(const int* U, int size) const {
    if (size > 20) throw std::invalid_argument("'n' > 20 independent drafts are not supported");
    const std::uint32_t full = (1u << size) - 1;
    std::vector<double> g(full + 1, 0.0), next(full + 1);
    g[0] = 1.0;
    for (int j = 0; j < n_; ++j) {
      std::fill(next.begin(), next.end(), 0.0);
      const double* qj = row(j);
      for (std::uint32_t mask = 0; mask <= full; ++mask) {
        if (g[mask] == 0.0) continue;
        for (int k = 0; k < size; ++k) next[mask | (1u << k)] += g[mask] * qj[U[k]];
      }
      std::swap(g, next);
    }
    return g[full];
  }

  SchemeKind kind_;
  int n_;
  int V_;
  const double* q_;
  std::vector<double> total_;
  int hub_ = -1;
  double off_hub_ = 0.0;
  int distinct_draws_ = 0;
  std::vector<int> top_, top_set_;  // topk: the drafts, and their distinct tokens ascending
};

// Calls visit(U, size) for every nonempty U ⊆ tokens with |U| <= max_size, members ascending.
template <class Visit>
void for_each_small_subset(const std::vector<int>& tokens, int max_size, Visit&& visit) {
  std::vector<int> current;
  current.reserve(max_size);
  const int count = static_cast<int>(tokens.size());
  // Depth-first: extend the current subset only with later tokens.
  auto recurse = [&](auto&& self, int start) -> void {
    for (int k = start; k < count; ++k) {
      current.push_back(tokens[k]);
      visit(current.data(), static_cast<int>(current.size()));
      if (static_cast<int>(current.size()) < max_size) self(self, k + 1);
      current.pop_back();
    }
  };
  recurse(recurse, 0);
}

// Number of nonempty subsets of `count` tokens with at most max_size members, and their total
// member count (arcs of the set-compressed network), in double so that huge counts cannot overflow.
inline void count_small_subsets(std::int64_t count, int max_size, double& subsets, double& members) {
  subsets = 0.0;
  members = 0.0;
  double binomial = 1.0;
  for (int j = 1; j <= max_size && j <= count; ++j) {
    binomial = binomial * static_cast<double>(count - j + 1) / j;
    subsets += binomial;
    members += binomial * j;
  }
}

// The one check that a draft tuple has positive probability under its scheme (exactly when
// DraftScheme::tuple_probability > 0): verifiers' laws are defined for drawable tuples only, so
// every transport and sample refuses the others with this ValueError. O(n^2), plus one pass over
// q for hub tuples (two for a repeated hub draft), for without-replacement tuples that repeat
// a token, and for topk tuples (and their sort). q as in DraftScheme: `const double*`, or ScaledRow
// (distribution.hpp) for a row read in place with its scale.
[[noreturn]] inline void refuse_drafts(const char* why) {
  throw std::invalid_argument(std::string("'drafts' has probability zero under the draft scheme (") + why + ")");
}

template <class Row>
void check_drawable(SchemeKind kind, const Row& q, int V, const int* drafts, int n) {
  auto refuse = refuse_drafts;
  for (int j = 0; j < n; ++j)
    if (!(q[(kind == SchemeKind::independent ? static_cast<std::int64_t>(j) * V : 0) + drafts[j]] > 0.0))
      refuse("q = 0 at a draft");
  const double* entries = stored(q);  // positivity and the hub's argmax, as DraftScheme reads them
  auto support = [&] { return static_cast<int>(draft_support(entries, V).size()); };
  if (kind == SchemeKind::topk) {
    const std::vector<int> top = top_drafts(q, V, n);
    if (!std::equal(top.begin(), top.end(), drafts))
      refuse("the 'topk' drafts are the n most probable tokens of q, most probable first, ties by lowest id, "
             "a support smaller than 'n' padded by repeats of its last token");
    return;
  }
  if (kind == SchemeKind::hub) {
    // Two different drafts with q > 0 prove a support of two tokens or more: then exactly one of
    // them is the hub. Two equal drafts are drawable only from a one-token support (both q > 0).
    const int hub = static_cast<int>(std::max_element(entries, entries + V) - entries);
    if (drafts[0] != drafts[1] ? (drafts[0] == hub) == (drafts[1] == hub) : support() != 1)
      refuse("exactly one of the two drafts is the hub, unless the draft has a single token, drawn twice");
  }
  if (kind != SchemeKind::without_replacement) return;
  int distinct = n;  // drafts before the first repeat
  for (int j = 1; j < n && distinct == n; ++j)
    for (int l = 0; l < j; ++l)
      if (drafts[l] == drafts[j]) distinct = j;
  if (distinct == n) return;
  bool padding = distinct == support();
  for (int j = distinct; j < n && padding; ++j) padding = drafts[j] == drafts[distinct - 1];
  if (!padding)
    refuse("a token repeats, but drafts are drawn without replacement: only a support smaller than 'n' is padded, "
           "by repeats of the last distinct draft");
}

}  // namespace multidraft
