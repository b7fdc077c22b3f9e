// Vocabulary maps of [OOV] (RDK): frequency-ranked pruning of a drafter vocabulary
// (Algorithm 3, after FR-Spec) and the projection of a drafter distribution onto the target
// vocabulary through a partial id map (TLI, Eq. (1), and the un-renormalised "masked" baseline).
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace multidraft {

// The `size` most frequent token ids, most frequent first. [OOV] Algorithm 3 sorts by
// frequency only; ties are broken by ascending token id (ours) so the result is
// deterministic. O(V log size) with a partial sort.
inline std::vector<std::int64_t> frequency_ranked(const std::int64_t* counts, std::int64_t V, std::int64_t size) {
  if (size < 0 || size > V) throw std::invalid_argument("frequency_ranked: size out of range");
  std::vector<std::int64_t> ids(static_cast<std::size_t>(V));
  std::iota(ids.begin(), ids.end(), std::int64_t{0});
  std::partial_sort(ids.begin(), ids.begin() + size, ids.end(), [counts](std::int64_t a, std::int64_t b) {
    return counts[a] != counts[b] ? counts[a] > counts[b] : a < b;
  });
  ids.resize(static_cast<std::size_t>(size));
  return ids;
}

// Moves drafter mass onto target ids: out[t] = q[d] for draft_to_target[d] = t >= 0, and 0 on
// target ids no drafter token maps to. Drafter tokens without a target image (the set F = D \ I)
// are dropped. Returns the shared mass q(I). With the map injective (checked by the caller),
// `out` is the masked baseline q * 1[I] ([OOV] Section 3, OOV mass zeroed, not renormalised;
// sums to q(I) <= 1).
inline double masked_projection(const double* q, std::int64_t draft_size, const std::int64_t* draft_to_target,
                                std::int64_t target_size, double* out) {
  std::fill(out, out + target_size, 0.0);
  double shared = 0.0;
  for (std::int64_t d = 0; d < draft_size; ++d) {
    const std::int64_t t = draft_to_target[d];
    if (t < 0) continue;
    out[t] = q[d];
    shared += q[d];
  }
  return shared;
}

// TLI, [OOV] Eq. (1): the masked projection renormalised over I. Returns q(I); when it is 0
// TLI is undefined at this position (no draft; the caller reports it) and `out` is left all zero.
inline double tli_projection(const double* q, std::int64_t draft_size, const std::int64_t* draft_to_target,
                             std::int64_t target_size, double* out) {
  const double shared = masked_projection(q, draft_size, draft_to_target, target_size, out);
  if (shared > 0.0)
    for (std::int64_t t = 0; t < target_size; ++t) out[t] /= shared;
  return shared;
}

}  // namespace multidraft
