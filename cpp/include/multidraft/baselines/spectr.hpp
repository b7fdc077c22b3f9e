// SpecTr's K-sequential selection (K-SEQ; Sun et al., NeurIPS 2023, a baseline of [CD] Section 5),
// rewritten in this project's notation p = target, q = draft. With a parameter rho in [1, n]:
//   beta(rho) = sum_x min(q(x), p(x) / rho);
//   draft x_i (i.i.d. from q) is accepted with probability min(1, p(x_i) / (rho q(x_i)));
//   if all n are rejected, the output is drawn from
//   p_res(y) = [p(y) - min(q(y), p(y)/rho) (1 - (1 - beta)^n) / beta] / (1 - beta)^n.
// p_res >= 0 needs 1 - (1 - beta)^n <= rho beta; the left side decreases and the right side
// increases in rho, so the smallest valid rho* is found by bisection (rho = n is always valid).
// Acceptance 1 - (1 - beta(rho*))^n.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

namespace multidraft {

struct KSequential {
  double rho = 1.0;
  double beta = 0.0;
  double acceptance = 0.0;
  std::vector<double> residual;  // p_res, normalised (empty when nothing is ever rejected)
};

// beta(rho) over the draft support (tokens with q = 0 add nothing), O(k) per evaluation.
inline double kseq_beta(const double* p, const double* q, const std::vector<int>& support, double rho) {
  double beta = 0.0;
  for (int x : support) beta += std::min(q[x], p[x] / rho);
  return beta;
}

// 1 - (1 - beta)^n, accurate for small beta.
inline double any_accepted(double beta, int n) { return beta >= 1.0 ? 1.0 : -std::expm1(n * std::log1p(-beta)); }

inline KSequential kseq_prepare(const double* p, const double* q, int V, int n) {
  KSequential k;
  std::vector<int> support;
  for (int x = 0; x < V; ++x)
    if (q[x] > 0.0) support.push_back(x);
  auto valid = [&](double rho) {
    const double beta = kseq_beta(p, q, support, rho);
    return any_accepted(beta, n) <= rho * beta;
  };
  double lo = 1.0, hi = static_cast<double>(n);
  if (valid(lo)) {
    hi = lo;
  } else {
    for (int step = 0; step < 100 && hi - lo > 1e-15 * hi; ++step) {
      const double mid = 0.5 * (lo + hi);
      (valid(mid) ? hi : lo) = mid;
    }
  }
  k.rho = hi;  // the valid end of the bracket: p_res is non-negative up to round-off
  k.beta = kseq_beta(p, q, support, k.rho);
  k.acceptance = any_accepted(k.beta, n);
  const double rejected = 1.0 - k.acceptance;
  if (!(rejected > 0.0)) return k;
  // (1 - (1-beta)^n) / beta -> n as beta -> 0
  const double per_unit = k.beta > 0.0 ? k.acceptance / k.beta : static_cast<double>(n);
  k.residual.resize(V);
  double mass = 0.0;
  for (int y = 0; y < V; ++y) mass += k.residual[y] = std::max(p[y] - std::min(q[y], p[y] / k.rho) * per_unit, 0.0);
  if (!(mass > 0.0)) {  // p_res cancels to 0 (0/0): kseq_transport rejects to p instead
    k.residual.clear();
    return k;
  }
  for (double& r : k.residual) r /= mass;
  return k;
}

// Output law given the ordered drafts (each with q > 0); p normalised.
inline void kseq_transport(const KSequential& k, const double* p, const double* q, int V, const int* drafts, int n,
                           double* out) {
  std::fill(out, out + V, 0.0);
  double reach = 1.0;
  for (int i = 0; i < n && reach > 0.0; ++i) {
    const int x = drafts[i];
    const double accept = std::min(1.0, p[x] / (k.rho * q[x]));
    out[x] += reach * accept;
    reach *= 1.0 - accept;
  }
  // No p_res: the rejection has probability 0 up to round-off, and p keeps the law on supp(p).
  const double* rejected_to = k.residual.empty() ? p : k.residual.data();
  if (reach > 0.0)
    for (int y = 0; y < V; ++y) out[y] += reach * rejected_to[y];
  double total = 0.0;  // renormalise the round-off of a vanishing residual
  for (int y = 0; y < V; ++y) total += out[y];
  for (int y = 0; y < V; ++y) out[y] /= total;
}

}  // namespace multidraft
