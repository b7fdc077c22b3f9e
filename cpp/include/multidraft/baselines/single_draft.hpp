// Single-draft verifiers ([NH], restated in [GR] notation: p = target, q = draft).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "multidraft/core/rng.hpp"
#include "multidraft/detail/sum_kernels.hpp"

namespace multidraft {

// Optimal single-draft acceptance beta = sum_i min(p(i), q(i)) ([NH], closed form). Rows:
// `const double*` or ScaledRow (distribution.hpp), summed alike (one vectorised pass).
template <class Row>
double sps_acceptance(const Row& p, const Row& q, int V) {
  return sum_of_minima(p, q, V);
}

// Output law of speculative sampling given the draft y (Leviathan et al., Chen et al.):
// accept y with probability min(1, p(y)/q(y)), else draw from (p - q)^+ / sum (p - q)^+.
// Requires q(y) > 0. The residual mass is summed directly (not taken as 1 - beta) and guarded:
// when it vanishes the acceptance probability is 1 up to round-off and the rejection branch
// falls back to p itself, which keeps the law a distribution. Rows: `const double*` or ScaledRow
// (distribution.hpp), as for every function below.
template <class Row>
void sps_transport(const Row& p, const Row& q, int V, int draft, double* out) {
  const double accept = std::min(1.0, p[draft] / q[draft]);
  double residual_mass = 0.0;
  for (int i = 0; i < V; ++i) residual_mass += std::max(p[i] - q[i], 0.0);
  const bool has_residual = residual_mass > 0.0;
  double p_mass = 0.0;
  if (!has_residual)
    for (int i = 0; i < V; ++i) p_mass += p[i];
  const double scale = (1.0 - accept) / (has_residual ? residual_mass : p_mass);
  for (int i = 0; i < V; ++i) out[i] = scale * (has_residual ? std::max(p[i] - q[i], 0.0) : p[i]);
  out[draft] += accept;
}

// One token of sps_transport's law without writing it: the acceptance test, and only on rejection
// one pass over (p - q)^+ (p itself when that vanishes, as above).
template <class Row>
int sps_sample(const Row& p, const Row& q, int V, int draft, Rng& rng) {
  if (rng.uniform() < std::min(1.0, p[draft] / q[draft])) return draft;
  // the rows by value: a copy's pointers and scales stay in registers, so the passes vectorise
  const int token = sample_index_by(V, rng, [p, q](int i) { return p[i] - q[i]; });
  return token >= 0 ? token : sample_index_by(V, rng, [p](int i) { return p[i]; });
}

// Naive rejection ([NH]): draw Z ~ p independently of the drafts and accept iff Z is one of
// them. Its output law is p whatever the drafts; with n i.i.d. drafts from q its acceptance is
// sum_i p(i) (1 - (1 - q(i))^n) (ours: [NH] states n = 1; as any lossless verifier's
// acceptance it is a lower bound on alpha*, [GR] Eq. 1).
// p is accepted within 1e-6 of mass 1; the law Z ~ p is p over its own mass.
template <class Row>
void naive_transport(const Row& p, int V, double* out) {
  double mass = 0.0;
  for (int i = 0; i < V; ++i) mass += p[i];
  for (int i = 0; i < V; ++i) out[i] = p[i] / mass;
}

inline double naive_acceptance(const double* p, const double* q, int V, int n) {
  double acceptance = 0.0;
  for (int i = 0; i < V; ++i) acceptance += p[i] * -std::expm1(n * std::log1p(-std::min(q[i], 1.0)));
  return acceptance;
}

}  // namespace multidraft
