// Right nodes of the relaxed OTLP networks built from a draft scheme:
// the full network (tuples, or sets of tuples), and the outer / inner networks of the
// complementary-slackness split ([GR] Theorem 5.1, Eq. 6a-6c) under set compression.
#pragma once
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/otlp/relaxed_network.hpp"

namespace multidraft {

struct TokenListHash {
  std::size_t operator()(const std::vector<int>& tokens) const {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a over the token ids
    for (int t : tokens) h = (h ^ static_cast<std::uint32_t>(t)) * 1099511628211ULL;
    return static_cast<std::size_t>(h);
  }
};
using NodeIndex = std::unordered_map<std::vector<int>, std::int64_t, TokenListHash>;

// Sorted distinct tokens of a draft tuple: set(w).
inline std::vector<int> distinct_tokens(const int* drafts, int n) {
  std::vector<int> tokens(drafts, drafts + n);
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  return tokens;
}

inline void check_set_network(const DraftScheme& scheme, std::size_t tokens, const char* what) {
  double subsets, members;
  count_small_subsets(static_cast<std::int64_t>(tokens), scheme.n(), subsets, members);
  check_network_size(scheme.vocabulary_size(), subsets, members, what);
}

// One right node per set U ⊆ supp(q), |U| <= n, with capacity c_U = mass of tuples whose set is U.
inline RightNodes set_nodes(const DraftScheme& scheme, NodeIndex& index) {
  const std::vector<int> support = scheme.support();
  check_set_network(scheme, support.size(), "the set-compressed relaxed OTLP network");
  RightNodes nodes;
  for_each_small_subset(support, scheme.n(), [&](const int* U, int size) {
    const double mass = scheme.set_mass(U, size);
    if (mass <= 0.0) return;
    index.emplace(std::vector<int>(U, U + size), static_cast<std::int64_t>(nodes.size()));
    nodes.add(U, size, mass);
  });
  return nodes;
}

// One right node per tuple with positive probability: [GR]'s network Omega, V^n nodes.
inline RightNodes tuple_nodes(const DraftScheme& scheme, NodeIndex& index) {
  const std::vector<int> support = scheme.support();
  const int n = scheme.n();
  double tuples = 1.0;
  for (int j = 0; j < n; ++j) tuples *= static_cast<double>(support.size());
  check_network_size(scheme.vocabulary_size(), tuples, tuples * n, "the tuple relaxed OTLP network");
  RightNodes nodes;
  std::vector<int> position(n, 0), tuple(n);
  const int k = static_cast<int>(support.size());
  while (true) {
    for (int j = 0; j < n; ++j) tuple[j] = support[position[j]];
    const double mass = scheme.tuple_probability(tuple.data());
    if (mass > 0.0) {
      index.emplace(tuple, static_cast<std::int64_t>(nodes.size()));
      const std::vector<int> members = distinct_tokens(tuple.data(), n);
      nodes.add(members.data(), static_cast<int>(members.size()), mass);
    }
    int j = n - 1;  // odometer over support^n
    while (j >= 0 && ++position[j] == k) position[j--] = 0;
    if (j < 0) break;
  }
  return nodes;
}

// Complementary slackness (Theorem 5.1) under set compression. Outer right nodes are the sets
// U' = set(w) \ H for tuples w not in H^n, with capacity w_{U'} (draft mass whose non-H part is
// exactly U'); inner right nodes are the sets U ⊆ H with capacity c_U.
struct SlacknessNodes {
  RightNodes outer, inner;
  NodeIndex outer_index, inner_index;
};

inline SlacknessNodes slackness_nodes(const DraftScheme& scheme, const std::vector<char>& in_H,
                                      bool build_outer, bool build_inner) {
  SlacknessNodes result;
  const std::vector<int> support = scheme.support();
  std::vector<int> outer_tokens, inner_tokens;
  for (int t : support) (in_H[t] ? inner_tokens : outer_tokens).push_back(t);
  const int n = scheme.n();

  if (build_inner) {
    check_set_network(scheme, inner_tokens.size(), "the inner network");
    for_each_small_subset(inner_tokens, n, [&](const int* U, int size) {
      const double mass = scheme.set_mass(U, size);
      if (mass <= 0.0) return;
      result.inner_index.emplace(std::vector<int>(U, U + size), result.inner.size());
      result.inner.add(U, size, mass);
    });
  }
  if (!build_outer) return result;

  if (scheme.kind() == SchemeKind::iid) {
    // w_{U'} by the EGF with base Q(H) (core/draft_scheme.hpp; docs/design/summation.md): only
    // subsets of the outer support are visited.
    check_set_network(scheme, outer_tokens.size(), "the outer network");
    double mass_H = 0.0;
    for (int t : inner_tokens) mass_H += scheme.row(0)[t];
    std::vector<double> member_mass(n);
    for_each_small_subset(outer_tokens, n, [&](const int* U, int size) {
      for (int k = 0; k < size; ++k) member_mass[k] = scheme.row(0)[U[k]];
      const double mass = egf_set_mass(mass_H, member_mass.data(), size, n);
      if (mass <= 0.0) return;
      result.outer_index.emplace(std::vector<int>(U, U + size), result.outer.size());
      result.outer.add(U, size, mass);
    });
    return result;
  }
  // Other schemes: aggregate c_U over all sets U of the support by their outer part U \ H.
  check_set_network(scheme, support.size(), "the outer network");
  std::vector<double> capacity;
  std::vector<std::vector<int>> parts;
  std::vector<int> outer_part;
  for_each_small_subset(support, n, [&](const int* U, int size) {
    outer_part.clear();
    for (int k = 0; k < size; ++k)
      if (!in_H[U[k]]) outer_part.push_back(U[k]);
    if (outer_part.empty()) return;
    const double mass = scheme.set_mass(U, size);
    if (mass <= 0.0) return;
    auto [it, inserted] = result.outer_index.emplace(outer_part, static_cast<std::int64_t>(parts.size()));
    if (inserted) {
      parts.push_back(outer_part);
      capacity.push_back(0.0);
    }
    capacity[it->second] += mass;
  });
  for (std::size_t r = 0; r < parts.size(); ++r)
    result.outer.add(parts[r].data(), static_cast<int>(parts[r].size()), capacity[r]);
  return result;
}

}  // namespace multidraft
