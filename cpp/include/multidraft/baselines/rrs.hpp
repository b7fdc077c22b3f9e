// Recursive rejection sampling (SpecInfer; [HUB] Section 2, "Recursive Rejection Sampling",
// with and without replacement; p = target, q = draft): the drafts
// are tried in order, each by single-draft speculative sampling against the current residual
// p_i, with p_{i+1} = norm((p_i - q_i)^+). With replacement q_i = q; without replacement q_i is
// q with the earlier drafts removed and renormalised. Output law and exact acceptance.
#pragma once
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace multidraft {

// One rejection step: replaces p by norm((p - q)^+). When that residual vanishes, p = q and the
// acceptance probability was 1, so the residual is never used; p is left as it is (0/0 guard).
inline void rrs_residual(std::vector<double>& p, const std::vector<double>& q) {
  double mass = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) mass += std::max(p[i] - q[i], 0.0);
  if (!(mass > 0.0)) return;
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = std::max(p[i] - q[i], 0.0) / mass;
}

// Removes a drafted token from q and renormalises (draws without replacement).
inline void remove_draft(std::vector<double>& q, int token) {
  q[token] = 0.0;
  double mass = 0.0;
  for (double x : q) mass += x;
  if (mass > 0.0)
    for (double& x : q) x /= mass;
}

// Output law given the ordered drafts: sum_i P(reach i) a_i delta_{x_i} + P(reject all) p_{n+1},
// a_i = min(1, p_i(x_i) / q_i(x_i)). Requires drawable drafts (check_drawable); without replacement
// the drafts after an exhausted support (q_i = 0) are padding and are not tested.
inline void rrs_transport(const double* p, const double* q, int V, const int* drafts, int n, bool without_replacement,
                          double* out) {
  std::vector<double> current_p(p, p + V), current_q(q, q + V);
  double total = 0.0;
  for (double x : current_p) total += x;
  for (double& x : current_p) x /= total;  // p within 1e-6 of mass 1: the law is p over its mass
  std::fill(out, out + V, 0.0);
  double reach = 1.0;
  for (int i = 0; i < n && reach > 0.0; ++i) {
    const int x = drafts[i];
    if (!(current_q[x] > 0.0)) break;  // padding of an exhausted support
    const double accept = std::min(1.0, current_p[x] / current_q[x]);
    out[x] += reach * accept;
    reach *= 1.0 - accept;
    if (reach <= 0.0) break;
    rrs_residual(current_p, current_q);
    if (without_replacement) remove_draft(current_q, x);
  }
  for (int i = 0; i < V; ++i) out[i] += reach * current_p[i];
}

// Exact acceptance with replacement: 1 - prod_i (1 - beta_i), beta_i = sum min(p_i, q).
inline double rrs_acceptance(const double* p, const double* q, int V, int n) {
  std::vector<double> current_p(p, p + V), draft(q, q + V);
  double reject_all = 1.0;
  for (int i = 0; i < n; ++i) {
    double beta = 0.0;
    for (int t = 0; t < V; ++t) beta += std::min(current_p[t], draft[t]);
    reject_all *= std::max(1.0 - beta, 0.0);
    if (reject_all <= 0.0) break;
    rrs_residual(current_p, draft);
  }
  return 1.0 - reject_all;
}

// Exact acceptance without replacement: the residual depends on the order of the rejected
// drafts, so the expectation runs over draft prefixes (depth-first, about k^n prefixes of O(k)
// work each for a draft support of k); refused when prefixes times k exceed `max_work`.
inline double rrs_without_replacement_acceptance(const double* p, const double* q, int V, int n, double max_work) {
  int support = 0;
  for (int t = 0; t < V; ++t) support += q[t] > 0.0;
  double states = 1.0;
  for (int i = 0; i < n; ++i) states *= std::max(support - i, 1);
  if (states * (support + 1) > max_work)
    throw std::invalid_argument("request too large: the exact acceptance of 'rrs_without_replacement' needs about " +
                                std::to_string(states) + " draft prefixes; reduce the draft support of 'q' or 'n'");
  // Only the draft support and the target mass outside it (one merged token, never drafted)
  // matter: residuals of tokens the draft cannot propose are never accepted.
  std::vector<double> start_p, start_q;
  double total = 0.0, outside = 0.0;
  for (int t = 0; t < V; ++t) {
    total += p[t];
    if (q[t] > 0.0) {
      start_p.push_back(p[t]);
      start_q.push_back(q[t]);
    } else {
      outside += p[t];
    }
  }
  start_p.push_back(outside);
  start_q.push_back(0.0);
  for (double& x : start_p) x /= total;
  V = static_cast<int>(start_p.size());
  // acceptance(p_i, q_i, depth) = sum_x q_i(x) [a_x + (1 - a_x) acceptance(p_{i+1}, q_{i+1} \ x)]
  auto recurse = [&](auto&& self, const std::vector<double>& cur_p, const std::vector<double>& cur_q, int depth) -> double {
    if (depth == n) return 0.0;
    std::vector<double> next_p = cur_p;
    rrs_residual(next_p, cur_q);  // the same for every rejected x (only q loses x afterwards)
    double value = 0.0;
    for (int x = 0; x < V; ++x) {
      if (!(cur_q[x] > 0.0)) continue;
      const double accept = std::min(1.0, cur_p[x] / cur_q[x]);
      double later = 0.0;
      if (accept < 1.0 && depth + 1 < n) {
        std::vector<double> next_q = cur_q;
        remove_draft(next_q, x);
        bool any = false;
        for (double v : next_q) any = any || v > 0.0;
        if (any) later = self(self, next_p, next_q, depth + 1);
      }
      value += cur_q[x] * (accept + (1.0 - accept) * later);
    }
    return value;
  };
  return recurse(recurse, start_p, start_q, 0);
}

}  // namespace multidraft
