// Exact optimal transport plans for the OTLP ([GR] Eq. 1), from max-flows of the relaxed OTLP.
//   RelaxedPlan:   one network for everything, completed by the residual formula Eq. (3).
//   SlacknessPlan: the outer and inner networks of Theorem 5.1, each solved only when a draft
//                  tuple of its kind is asked for, completed by Eq. (8).
// Plans are immutable once built, apart from SlacknessPlan's networks, which are solved once
// (std::call_once) whichever thread asks first, so one plan may be shared across threads.
// Both return the normalised slice pi(. | w) = C_{., w} / p_draft(w); p_draft(w) cancels, because
// per-tuple flows are proportional to p_draft(w) within a set node (set compression,
// relaxed_network.hpp).
#pragma once
#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/otlp/network_builders.hpp"
#include "multidraft/otlp/polymatroid.hpp"
#include "multidraft/otlp/relaxed_network.hpp"
#include "multidraft/otlp/subset_selection.hpp"

namespace multidraft {

enum class NetworkKind { sets, tuples };

// Slice of a tuple whose node carries no flow: a node below the flow tolerance, or a drawable
// tuple with no node (its mass underflowed to 0; set_nodes keeps masses > 0). With a rejection
// law everything is rejected to it (Eq. 3 / Eq. 8 with no flow). Without one (alpha = 1 up to
// round-off, or an outer node) it accepts uniformly among its tokens of p > 0, and outputs p
// itself when it has none: a token of p = 0 is never output.
inline void no_flow_slice(const int* tokens, std::int64_t count, const std::vector<double>& law,
                          const std::vector<double>& p, double* out, int V) {
  if (!law.empty()) {
    std::copy(law.begin(), law.end(), out);
    return;
  }
  std::fill(out, out + V, 0.0);
  const double kept = static_cast<double>(std::count_if(tokens, tokens + count, [&](int t) { return p[t] > 0.0; }));
  if (kept > 0.0) {
    for (std::int64_t k = 0; k < count; ++k)
      if (p[tokens[k]] > 0.0) out[tokens[k]] += 1.0 / kept;
    return;
  }
  std::copy(p.begin(), p.end(), out);
}

// Slice of one right node r: its flows over its capacity, plus the column deficit sent to the
// rejection law (Eq. 3 / Eq. 8). With no law the deficit is round-off (alpha = 1, or an outer
// node, which Theorem 5.1 saturates), and the flows are renormalised instead. r < 0: the tuple
// `tokens` has no node (no_flow_slice). Flows are divided, not scaled by a reciprocal, which
// overflows for a subnormal capacity.
inline void assemble_slice(const RightNodes& nodes, const RelaxedFlow& flow, std::int64_t r,
                           const std::vector<int>& tokens, const std::vector<double>& law,
                           const std::vector<double>& p, double* out, int V) {
  if (r < 0) return no_flow_slice(tokens.data(), static_cast<std::int64_t>(tokens.size()), law, p, out, V);
  const double capacity = nodes.capacity[r];
  const double carried = std::min(flow.column_flow[r], capacity);
  if (!(carried > 0.0)) {
    const std::int64_t begin = nodes.offsets[r];
    return no_flow_slice(nodes.members.data() + begin, nodes.offsets[r + 1] - begin, law, p, out, V);
  }
  std::fill(out, out + V, 0.0);
  const bool renormalise = law.empty();
  // Round-off can push a column's flow a hair above its capacity: never let a slice exceed 1.
  const double denominator = renormalise ? flow.column_flow[r] : std::max(capacity, flow.column_flow[r]);
  for (std::int64_t k = nodes.offsets[r]; k < nodes.offsets[r + 1]; ++k)
    out[nodes.members[k]] += flow.member_flow[k] / denominator;
  if (!renormalise) {
    const double deficit = (capacity - carried) / capacity;
    for (int i = 0; i < V; ++i) out[i] += deficit * law[i];
  }
}

// Owns copies of p and q, so a plan outlives the caller's arrays.
class PlanInputs {
 public:
  PlanInputs(const double* p, const double* q, int V, SchemeKind kind, int n)
      : p_(p, p + V), q_(q, q + static_cast<std::int64_t>(kind == SchemeKind::independent ? n : 1) * V),
        scheme_(kind, n, V, q_.data()) {}
  PlanInputs(const PlanInputs&) = delete;
  PlanInputs& operator=(const PlanInputs&) = delete;

  const std::vector<double>& p() const { return p_; }
  const DraftScheme& scheme() const { return scheme_; }
  int V() const { return scheme_.vocabulary_size(); }

  // Refuses tuples the scheme cannot produce: their slice is undefined.
  void check_drafts(const int* drafts) const {
    check_drawable(scheme_.kind(), q_.data(), V(), drafts, scheme_.n());
  }

 private:
  std::vector<double> p_, q_;
  DraftScheme scheme_;
};

// -1 when the key has no node: the tuple passed check_drafts, so its mass underflowed to 0.
inline std::int64_t find_node(const NodeIndex& index, const std::vector<int>& key) {
  const auto it = index.find(key);
  return it == index.end() ? -1 : it->second;
}

class RelaxedPlan {
 public:
  RelaxedPlan(const double* p, const double* q, int V, SchemeKind kind, int n, NetworkKind network)
      : inputs_(p, q, V, kind, n), network_(network) {
    nodes_ = network == NetworkKind::sets ? set_nodes(inputs_.scheme(), index_) : tuple_nodes(inputs_.scheme(), index_);
    flow_ = max_relaxed_flow(inputs_.p().data(), V, nodes_);
    law_ = residual_law(inputs_.p().data(), flow_.row_flow.data(), inputs_.V());
  }

  double alpha() const { return std::clamp(flow_.value, 0.0, 1.0); }

  void transport(const int* drafts, double* out) const {
    inputs_.check_drafts(drafts);
    const int n = inputs_.scheme().n();
    const std::vector<int> tokens = distinct_tokens(drafts, n);
    const std::int64_t r =
        find_node(index_, network_ == NetworkKind::sets ? tokens : std::vector<int>(drafts, drafts + n));
    assemble_slice(nodes_, flow_, r, tokens, law_, inputs_.p(), out, inputs_.V());
  }

 private:
  PlanInputs inputs_;
  NetworkKind network_;
  NodeIndex index_;
  RightNodes nodes_;
  RelaxedFlow flow_;
  std::vector<double> law_;
};

class SlacknessPlan {
 public:
  SlacknessPlan(const double* p, const double* q, int V, SchemeKind kind, int n) : inputs_(p, q, V, kind, n) {
    const DraftScheme& scheme = inputs_.scheme();
    if (kind == SchemeKind::iid) {
      // Theorem 6.2: outer rows are known in closed form, so the rejection law needs no flow.
      IidSplit split(p, q, V, n);
      subset_ = std::move(split.subset);
      outer_rows_.assign(V, 0.0);
      for (std::size_t j = 0; j < split.outer_rows.size(); ++j)
        outer_rows_[split.order[split.h + j]] = split.outer_rows[j];
      law_ = std::move(split.law);
    } else {
      subset_ = optimal_subset(p, scheme);
      outer_rows_.assign(V, 0.0);
      for (int i = 0; i < V; ++i)
        if (!subset_.in_H[i]) outer_rows_[i] = p[i];
    }
  }

  double alpha() const { return subset_.alpha; }

  void transport(const int* drafts, double* out) const {
    inputs_.check_drafts(drafts);
    const std::vector<int> tokens = distinct_tokens(drafts, inputs_.scheme().n());
    std::vector<int> outer_part;
    for (int t : tokens)
      if (!subset_.in_H[t]) outer_part.push_back(t);
    if (!outer_part.empty()) {  // Eq. (8), w not in (H*)^n: only the outer network is needed
      const Solved& outer = solve_outer();
      assemble_slice(outer.nodes, outer.flow, find_node(outer.index, outer_part), outer_part, {}, inputs_.p(), out,
                     inputs_.V());
      return;
    }
    const Solved& inner = solve_inner();
    assemble_slice(inner.nodes, inner.flow, find_node(inner.index, tokens), tokens, rejection_law(), inputs_.p(),
                   out, inputs_.V());
  }

 private:
  struct Solved {
    RightNodes nodes;
    NodeIndex index;
    RelaxedFlow flow;
  };

  // A solve that throws (e.g. a network over the size limit) leaves its flag unset: the next
  // caller tries again and gets the same error.
  const Solved& solve_outer() const {
    std::call_once(outer_once_, [&] {
      SlacknessNodes built = slackness_nodes(inputs_.scheme(), subset_.in_H, true, false);
      Solved solved{std::move(built.outer), std::move(built.outer_index), {}};
      solved.flow = max_relaxed_flow(outer_rows_.data(), inputs_.V(), solved.nodes);
      outer_.emplace(std::move(solved));
    });
    return *outer_;
  }

  const Solved& solve_inner() const {
    std::call_once(inner_once_, [&] {
      SlacknessNodes built = slackness_nodes(inputs_.scheme(), subset_.in_H, false, true);
      std::vector<double> rows(inputs_.V(), 0.0);
      for (int i = 0; i < inputs_.V(); ++i)
        if (subset_.in_H[i]) rows[i] = inputs_.p()[i];
      Solved solved{std::move(built.inner), std::move(built.inner_index), {}};
      solved.flow = max_relaxed_flow(rows.data(), inputs_.V(), solved.nodes);
      inner_.emplace(std::move(solved));
    });
    return *inner_;
  }

  // i.i.d. drafts: the closed form of the constructor. Otherwise the law comes from the rows of
  // both networks, so it is built when the first inner tuple is asked for.
  const std::vector<double>& rejection_law() const {
    if (inputs_.scheme().kind() == SchemeKind::iid) return law_;
    std::call_once(law_once_, [&] {
      std::vector<double> rows = solve_outer().flow.row_flow;
      const std::vector<double>& inner_rows = solve_inner().flow.row_flow;
      for (int i = 0; i < inputs_.V(); ++i) rows[i] += inner_rows[i];
      law_ = residual_law(inputs_.p().data(), rows.data(), inputs_.V());
    });
    return law_;
  }

  PlanInputs inputs_;
  SubsetSolution subset_;
  std::vector<double> outer_rows_;
  // Solved on first use (solving only the network a tuple needs is the point of this plan),
  // each exactly once: the flags make a concurrent first use wait for the one solve.
  mutable std::once_flag outer_once_, inner_once_, law_once_;
  mutable std::optional<Solved> outer_, inner_;
  mutable std::vector<double> law_;
};

}  // namespace multidraft
