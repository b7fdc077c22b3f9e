// Canonical decomposition (Khisti et al., [CD] Theorem 1, Appendix I for two non-identical drafts,
// Remark 3 for K > 2; this project's notation p = target, q = draft, swapped from the paper's):
// step 1 selects one draft token by importance weights beta_y(set of drafts); step 2 runs
// single-draft speculative sampling of the selected token Y against Y's own marginal p_I, never
// against q: accept with min(1, p(y) / p_I(y)), else draw from (p - p_I)^+ normalised. Optimal
// weights come from the relaxed-OTLP max-flow ([GR] Theorem 4.1, Eq. 5): beta_y(U) = S_{y,U} /
// sum_j S_{j,U}, uniform over U where no flow passes. For K > 2 drafts the selection is successive
// and pairwise (Remark 3): Y_1 from (X_1, X_2), then Y_k from (Y_{k-1}, X_{k+1}) as two
// independent, non-identical drafts with laws p_{Y_{k-1}} and q_{k+1}.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/otlp/network_builders.hpp"
#include "multidraft/otlp/relaxed_network.hpp"

namespace multidraft {

// A law over a few tokens (the selected draft token): (token, probability) pairs.
using SparseLaw = std::vector<std::pair<int, double>>;

inline void add_mass(SparseLaw& law, int token, double mass) {
  for (auto& entry : law)
    if (entry.first == token) {
      entry.second += mass;
      return;
    }
  law.emplace_back(token, mass);
}

// A selection stage: picks one token of a draft set; knows the selected token's law p_I.
class Selection {
 public:
  virtual ~Selection() = default;
  virtual const std::vector<double>& selected_law() const = 0;
  // Adds `mass` times the selection law over the distinct tokens `tokens` to `out`.
  virtual void select(const std::vector<int>& tokens, double mass, SparseLaw& out) const = 0;
};

// One optimal pairwise (or K-wise) selection: weights per set node, and the selected token's law.
class CanonicalSelection : public Selection {
 public:
  CanonicalSelection(const double* p, const DraftScheme& scheme) : V_(scheme.vocabulary_size()) {
    nodes_ = set_nodes(scheme, index_);
    const RelaxedFlow flow = max_relaxed_flow(p, V_, nodes_);
    weight_.resize(nodes_.members.size());
    selected_law_.assign(V_, 0.0);
    for (std::size_t r = 0; r < nodes_.size(); ++r) {
      const std::int64_t begin = nodes_.offsets[r], end = nodes_.offsets[r + 1];
      double routed = 0.0;
      for (std::int64_t k = begin; k < end; ++k) routed += flow.member_flow[k];
      for (std::int64_t k = begin; k < end; ++k) {
        weight_[k] = routed > 0.0 ? flow.member_flow[k] / routed : 1.0 / static_cast<double>(end - begin);
        selected_law_[nodes_.members[k]] += nodes_.capacity[r] * weight_[k];  // p_I = sum_U c_U beta(U)
      }
    }
  }

  const std::vector<double>& selected_law() const override { return selected_law_; }

  void select(const std::vector<int>& tokens, double mass, SparseLaw& out) const override {
    const auto it = index_.find(tokens);
    if (it == index_.end()) {  // drawable, but its set mass underflowed to 0 (no node): uniform, as a node without flow
      for (int t : tokens) add_mass(out, t, mass / static_cast<double>(tokens.size()));
      return;
    }
    for (std::int64_t k = nodes_.offsets[it->second]; k < nodes_.offsets[it->second + 1]; ++k)
      if (weight_[k] > 0.0) add_mass(out, nodes_.members[k], mass * weight_[k]);
  }

 private:
  int V_;
  RightNodes nodes_;
  NodeIndex index_;
  std::vector<double> weight_;
  std::vector<double> selected_law_;
};

// Algorithm 2 of Khisti et al. ([CD] Section 4, Appendix G), two identical drafts: tokens ranked by
// p(y) - q(y)^2 (decreasing, ties by id); the top s (Omega_1) keep free pairwise weights, solved at
// run time as a small max-flow in place of [CD]'s LP over them (ours: the LP maximises
// sum_k min(p_k, p_I(k)) over pair splits, a transportation problem: pairs {i, j} of Omega_1 with
// mass 2 q_i q_j, sink capacities (p_k - q_k^2 - 2 q_k Q(Omega_2))^+); an Omega_1 token beats any
// Omega_2 token, and inside Omega_2 the better-ranked token wins. Guarantee (eq. 12):
// acceptance >= P* - sum_{y in Omega_2} (p(y) - q(y)^2)^+.
class TruncatedPairSelection : public Selection {
 public:
  TruncatedPairSelection(const double* p, const double* q, int V, int s) : rank_(V), selected_law_(V, 0.0) {
    std::vector<int> order(V);
    for (int i = 0; i < V; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return p[a] - q[a] * q[a] > p[b] - q[b] * q[b]; });
    for (int r = 0; r < V; ++r) rank_[order[r]] = r;
    s_ = std::min(std::max(s, 0), V);
    double mass_omega2 = 0.0, below = 0.0;  // below: draft mass of worse-ranked Omega_2 tokens
    for (int r = s_; r < V; ++r) mass_omega2 += q[order[r]];
    for (int r = V - 1; r >= s_; --r) {  // eq. 11, Omega_2
      const int k = order[r];
      selected_law_[k] = q[k] * q[k] + 2.0 * q[k] * below;
      below += q[k];
    }
    // Omega_1: the free weights, by max-flow over its pairs.
    std::vector<double> capacity(V, 0.0);
    RightNodes pairs;
    for (int a = 0; a < s_; ++a) {
      const int i = order[a];
      capacity[i] = std::max(p[i] - q[i] * q[i] - 2.0 * q[i] * mass_omega2, 0.0);
      selected_law_[i] = q[i] * q[i] + 2.0 * q[i] * mass_omega2;
      for (int b = a + 1; b < s_; ++b) {
        const int j = order[b];
        if (q[i] * q[j] <= 0.0) continue;
        const int members[2] = {std::min(i, j), std::max(i, j)};
        index_.emplace(std::vector<int>(members, members + 2), static_cast<std::int64_t>(pairs.size()));
        pairs.add(members, 2, 2.0 * q[i] * q[j]);
      }
    }
    const RelaxedFlow flow = max_relaxed_flow(capacity.data(), V, pairs);
    weight_.resize(pairs.members.size());
    for (std::size_t r = 0; r < pairs.size(); ++r) {
      const std::int64_t begin = pairs.offsets[r];
      const double routed = flow.member_flow[begin] + flow.member_flow[begin + 1];
      for (std::int64_t k = begin; k < begin + 2; ++k) {  // unrouted mass only meets saturated sinks
        weight_[k] = routed > 0.0 ? flow.member_flow[k] / routed : 0.5;
        selected_law_[pairs.members[k]] += pairs.capacity[r] * weight_[k];
      }
    }
    pairs_ = std::move(pairs);
  }

  const std::vector<double>& selected_law() const override { return selected_law_; }

  void select(const std::vector<int>& tokens, double mass, SparseLaw& out) const override {
    if (tokens.size() == 1) {
      add_mass(out, tokens[0], mass);
      return;
    }
    const int i = tokens[0], j = tokens[1];
    const bool i_free = rank_[i] < s_, j_free = rank_[j] < s_;
    if (i_free && j_free) {
      const auto it = index_.find(tokens);
      if (it == index_.end()) {  // 2 q_i q_j underflowed to 0 (no pair node): even, as an unrouted pair
        for (int t : tokens) add_mass(out, t, 0.5 * mass);
        return;
      }
      for (std::int64_t k = pairs_.offsets[it->second]; k < pairs_.offsets[it->second + 1]; ++k)
        if (weight_[k] > 0.0) add_mass(out, pairs_.members[k], mass * weight_[k]);
      return;
    }
    // Omega_1 beats Omega_2; inside Omega_2 the better rank wins.
    const int winner = i_free ? i : (j_free ? j : (rank_[i] < rank_[j] ? i : j));
    add_mass(out, winner, mass);
  }

 private:
  std::vector<int> rank_;
  int s_ = 0;
  RightNodes pairs_;
  NodeIndex index_;
  std::vector<double> weight_;
  std::vector<double> selected_law_;
};

class CanonicalDecomposition {
 public:
  // q: (V,) for identical drafts, (n, V) rows for independent drafts of different models.
  // truncation < 0: optimal weights; truncation = s >= 0: Algorithm 2 with s free tokens for the
  // first pair (identical drafts only).
  CanonicalDecomposition(const double* p, const double* q, int V, int n, SchemeKind kind, int truncation = -1)
      : V_(V), n_(n), kind_(kind), p_(p, p + V) {
    if (kind != SchemeKind::iid && kind != SchemeKind::independent)
      throw std::invalid_argument("'scheme' of the canonical decomposition must be 'iid' or 'independent'");
    const int rows = kind == SchemeKind::independent ? n : 1;
    q_.assign(q, q + static_cast<std::int64_t>(rows) * V);
    auto row = [&](int j) { return q_.data() + static_cast<std::int64_t>(kind == SchemeKind::independent ? j : 0) * V; };
    double mass = 0.0;
    for (double x : p_) mass += x;
    for (double& x : p_) x /= mass;
    if (n == 1) {  // no selection: the draft itself
      selected_.assign(row(0), row(0) + V);
    } else {
      // Stage 1: X_1, X_2 (identical or not); stage k: (Y_{k-1}, X_{k+1}), independent.
      std::vector<double> pair(2 * static_cast<std::size_t>(V));
      std::copy(row(0), row(0) + V, pair.begin());
      std::copy(row(1), row(1) + V, pair.begin() + V);
      const bool identical = kind == SchemeKind::iid;
      if (truncation >= 0 && !identical)
        throw std::invalid_argument("'truncation' (Algorithm 2) applies to identical drafts only");
      if (truncation >= 0)
        stages_.push_back(std::make_unique<TruncatedPairSelection>(p_.data(), row(0), V, truncation));
      else
        stages_.push_back(std::make_unique<CanonicalSelection>(
            p_.data(), DraftScheme(identical ? SchemeKind::iid : SchemeKind::independent, 2, V, identical ? row(0) : pair.data())));
      for (int j = 2; j < n; ++j) {
        const std::vector<double>& previous = stages_.back()->selected_law();
        std::copy(previous.begin(), previous.end(), pair.begin());
        std::copy(row(j), row(j) + V, pair.begin() + V);
        stages_.push_back(std::make_unique<CanonicalSelection>(p_.data(), DraftScheme(SchemeKind::independent, 2, V, pair.data())));
      }
      selected_ = stages_.back()->selected_law();
    }
    // Step 2: speculative sampling of Y against its own law p_I.
    accept_.resize(V);
    residual_.assign(V, 0.0);
    double residual_mass = 0.0;
    for (int y = 0; y < V; ++y) {
      // p_I(y) = 0 (y selected only through mass that underflowed): keep y iff p(y) > 0, never a token of p = 0.
      accept_[y] = selected_[y] > 0.0 ? std::min(1.0, p_[y] / selected_[y]) : (p_[y] > 0.0 ? 1.0 : 0.0);
      residual_mass += residual_[y] = std::max(p_[y] - selected_[y], 0.0);
    }
    if (residual_mass > 0.0) {
      for (double& r : residual_) r /= residual_mass;
    } else {  // p_I = p: step 2 always accepts (0/0 guard)
      residual_ = p_;
    }
  }

  const std::vector<double>& selected_law() const { return selected_; }

  // Law of the selected token Y given the ordered drafts (successive pairwise selection).
  SparseLaw selection(const int* drafts) const {
    SparseLaw law;
    if (n_ == 1) {
      law.emplace_back(drafts[0], 1.0);
      return law;
    }
    stages_[0]->select(distinct_tokens(drafts, 2), 1.0, law);
    for (int j = 2; j < n_; ++j) {
      SparseLaw next;
      for (const auto& [y, mass] : law) {
        const int pair[2] = {y, drafts[j]};
        stages_[j - 1]->select(distinct_tokens(pair, 2), mass, next);
      }
      law.swap(next);
    }
    return law;
  }

  // Output law: sum_y P(Y = y) [a(y) delta_y + (1 - a(y)) r].
  void transport(const int* drafts, double* out) const {
    double rejected = 0.0;
    std::fill(out, out + V_, 0.0);
    for (const auto& [y, mass] : selection(drafts)) {
      out[y] += mass * accept_[y];
      rejected += mass * (1.0 - accept_[y]);
    }
    for (int y = 0; y < V_; ++y) out[y] += rejected * residual_[y];
  }

  // Exact P(output is one of the drafts), by enumerating the draft tuples (refused beyond
  // max_work, counted as tuples times n^2): the two-step acceptance sum_y min(p, p_I) plus
  // residual draws that hit a draft.
  double acceptance(double max_work) const {
    const DraftScheme scheme(kind_, n_, V_, q_.data());
    const std::vector<int> support = scheme.support();
    double tuples = 1.0;
    for (int j = 0; j < n_; ++j) tuples *= static_cast<double>(support.size());
    if (tuples * n_ * n_ > max_work)
      throw std::invalid_argument("request too large: the exact acceptance of 'khisti' enumerates about " +
                                  std::to_string(tuples) + " draft tuples; reduce the draft support of 'q' or 'n'");
    std::vector<int> position(n_, 0), drafts(n_);
    const int k = static_cast<int>(support.size());
    double total = 0.0;
    while (true) {
      for (int j = 0; j < n_; ++j) drafts[j] = support[position[j]];
      const double probability = scheme.tuple_probability(drafts.data());
      if (probability > 0.0) {
        double accepted = 0.0, rejected = 0.0;
        for (const auto& [y, mass] : selection(drafts.data())) {
          accepted += mass * accept_[y];
          rejected += mass * (1.0 - accept_[y]);
        }
        for (int t : distinct_tokens(drafts.data(), n_)) accepted += rejected * residual_[t];
        total += probability * accepted;
      }
      int j = n_ - 1;  // odometer over support^n
      while (j >= 0 && ++position[j] == k) position[j--] = 0;
      if (j < 0) break;
    }
    return std::min(total, 1.0);
  }

 private:
  int V_, n_;
  SchemeKind kind_;
  std::vector<double> p_, q_;
  std::vector<std::unique_ptr<Selection>> stages_;
  std::vector<double> selected_, accept_, residual_;
};

}  // namespace multidraft
