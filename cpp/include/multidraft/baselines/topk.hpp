// Deterministic top-n drafts (the token trees of EAGLE and SGLang: the n most probable draft
// tokens, core/draft_scheme.hpp's topk scheme) verified by naive rejection ([NH]): Z ~ p is the
// output whatever the drafts, accepted iff it is one of them. The output law is p (the registry
// uses naive rejection's plan); only the acceptance is the scheme's own.
#pragma once
#include <vector>

#include "multidraft/core/draft_scheme.hpp"

namespace multidraft {

// P(Z in T) = p(T), T the set of the top-n drafts: the drafts are fixed, so the i.i.d. formula of
// naive_acceptance does not apply. It is also the optimum of this scheme (one tuple, so [GR] Eq. 4
// gives alpha* = 1 + min_H psi(H) = p(T) at H = T). The drafts are k distinct tokens, then repeats
// of the k-th: the sum stops at the first repeat.
inline double topk_acceptance(const double* p, const double* q, int V, int n) {
  const std::vector<int> drafts = top_drafts(q, V, n);
  double acceptance = p[drafts[0]];
  for (int j = 1; j < n && drafts[j] != drafts[j - 1]; ++j) acceptance += p[drafts[j]];
  return acceptance;
}

}  // namespace multidraft
