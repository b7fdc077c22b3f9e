// SpecHub ([HUB] Section 4, Appendix C.1; p = target, q = draft): two drafts from the hub scheme
// (see draft_scheme.hpp), four ordered acceptance tests, and one residual. Float64 throughout;
// every ratio u * S < m is taken as min(1, m / S) with S = 0 meaning the branch never happens. A
// one-token draft support {a} (the scheme then draws (a, a)) is single-draft speculative sampling
// of a: accept with probability p(a), else draw from p off a, normalised.
#pragma once
#include <algorithm>
#include <vector>

#include "multidraft/core/distribution.hpp"
#include "multidraft/core/draft_scheme.hpp"

namespace multidraft {

struct SpecHub {
  int hub = -1;
  double off_hub = 0.0;           // sum_{x != a} q(x) = 1 - q(a), summed
  std::vector<double> residual;   // r: p2 off the hub, pa3 on it, normalised (p itself if r vanishes)
  double leftover_x_a = 0.0;      // S_ia = sum_{x != a} (q(x) - p(x))^+: rejected mass of pairs (x, a)
  double leftover_a_x = 0.0;      // S_ai = sum_{x != a} (Q(a,x) - p1(x))^+: rejected mass of pairs (a, x)
  double hub_after_a_x = 0.0;     // pa2 = (p(a) - S_ai)^+
};

// r as a law; a vanishing r (the rejection has probability 0 up to round-off) becomes p
// normalised, so the law stays well defined.
inline std::vector<double> residual_or_target(std::vector<double> r, const double* p, int V) {
  r = normalised_law(std::move(r));
  return r.empty() ? normalised_law(std::vector<double>(p, p + V)) : r;
}

// Precomputation, O(V) (the paper's GetResidual applied to Q(., a), then to Q(a, .)).
inline SpecHub spechub_prepare(const double* p, const double* q, int V) {
  const DraftScheme scheme(SchemeKind::hub, 2, V, q);
  SpecHub h;
  h.hub = scheme.hub();
  h.off_hub = scheme.off_hub_mass();
  const int a = h.hub;
  h.residual.assign(V, 0.0);
  if (!(h.off_hub > 0.0)) {  // one-token support: the residual of speculative sampling, (p - q)^+ = p off a
    for (int x = 0; x < V; ++x) h.residual[x] = x == a ? 0.0 : p[x];
    h.residual = residual_or_target(std::move(h.residual), p, V);
    return h;
  }
  for (int x = 0; x < V; ++x) {
    if (x == a) continue;
    const double p1 = std::max(p[x] - q[x], 0.0);
    h.leftover_x_a += std::max(q[x] - p[x], 0.0);
    const double q_ax = q[a] * q[x] / h.off_hub;
    h.leftover_a_x += std::max(q_ax - p1, 0.0);
    h.residual[x] = std::max(p1 - q_ax, 0.0);
  }
  h.hub_after_a_x = std::max(p[a] - h.leftover_a_x, 0.0);
  h.residual[a] = std::max(h.hub_after_a_x - h.leftover_x_a, 0.0);  // 0 exactly (Corollary 1)
  h.residual = residual_or_target(std::move(h.residual), p, V);
  return h;
}

inline double accept_ratio(double mass, double leftover) { return leftover > 0.0 ? std::min(1.0, mass / leftover) : 0.0; }

// Output law given the ordered pair (x1, x2) of the hub scheme.
inline void spechub_transport(const SpecHub& h, const double* p, const double* q, int V, const int* drafts,
                              double* out) {
  const int a = h.hub, x1 = drafts[0], x2 = drafts[1];
  std::fill(out, out + V, 0.0);
  double first, second;  // acceptance of the draft tested first, then of the hub
  int first_token;
  if (x2 == a) {  // (x, a): test x against q, then the hub against S_ia
    first_token = x1;
    first = std::min(1.0, p[x1] / q[x1]);
    second = accept_ratio(h.hub_after_a_x, h.leftover_x_a);
  } else {        // (a, x): test the second draft x first, against Q(a, x), then the hub against S_ai
    first_token = x2;
    const double q_ax = q[a] * q[x2] / h.off_hub;
    first = std::min(1.0, std::max(p[x2] - q[x2], 0.0) / q_ax);
    second = accept_ratio(p[a], h.leftover_a_x);
  }
  out[first_token] += first;
  out[a] += (1.0 - first) * second;
  // (a, a), the one-token support: S_ia = 0, so the hub is not tested twice (second = 0).
  const double rejected = (1.0 - first) * (1.0 - second);
  for (int y = 0; y < V; ++y) out[y] += rejected * h.residual[y];
}

// Closed form (the acceptance of [HUB] Section 4's transport plan, summed): alpha_hub = p(a) +
// sum_{x != a} min(p(x), q(x) / (1 - q(a))); p(a) for a one-token support.
inline double spechub_acceptance(const double* p, const double* q, int V) {
  const DraftScheme scheme(SchemeKind::hub, 2, V, q);
  const int a = scheme.hub();
  double acceptance = p[a];
  if (!(scheme.off_hub_mass() > 0.0)) return acceptance;
  for (int x = 0; x < V; ++x)
    if (x != a) acceptance += std::min(p[x], q[x] / scheme.off_hub_mass());
  return std::min(acceptance, 1.0);
}

}  // namespace multidraft
