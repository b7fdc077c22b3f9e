// The batched calls of the Python module (_core.transport, verify, acceptance, ...) as plain C++:
// each takes views of the caller's arrays (batch_rows.hpp's BatchRows for p and q; drafts (B, n)
// int64; seeds (B,) uint64, one generator per row) and writes into buffers the caller provides.
// Rows run on the thread pool and each is computed from its own inputs and seed, so a batch gives
// what a loop over its rows gives, bit for bit, on any thread count. The bindings
// (cpp/bindings/module.cpp) convert arrays and release the GIL around these calls.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "multidraft/batch/batch_rows.hpp"
#include "multidraft/batch/parallel_rows.hpp"
#include "multidraft/batch/plan_rows.hpp"
#include "multidraft/core/distribution.hpp"
#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/core/rng.hpp"
#include "multidraft/otlp/subset_selection.hpp"
#include "multidraft/baselines/single_draft.hpp"
#include "multidraft/baselines/spectr.hpp"
#include "multidraft/registry/plan_sampling.hpp"
#include "multidraft/registry/verifier_registry.hpp"

namespace multidraft {

// The laws (B, V) of the rows' plans at their drafts.
inline void batched_transport(const std::string& method, const BatchRows& b, const std::int64_t* drafts, int n,
                              const VerifierOptions& options, double* out) {
  const std::int64_t V = b.V;
  with_verifier(method, options, [&](VerifierWork work, auto make, auto) {
    plan_rows(b, drafts, n, options.kind, work.plan, make,
              [&](const auto& plan, std::int64_t r, const int* d, std::vector<double>&) { plan.transport(d, out + r * V); });
  });
}

// One verified token per row (B,), from each row's seed, without writing laws where the plan can
// sample directly (sample_verified).
inline void batched_verify(const std::string& method, const BatchRows& b, const std::int64_t* drafts, int n,
                           const std::uint64_t* seeds, const VerifierOptions& options, std::int64_t* out) {
  const int V = static_cast<int>(b.V);
  with_verifier(method, options, [&](VerifierWork work, auto make, auto) {
    plan_rows(b, drafts, n, options.kind, work.plan, make,
              [&](const auto& plan, std::int64_t r, const int* d, std::vector<double>& scratch) {
      Rng rng(seeds[r]);
      out[r] = sample_verified(plan, d, V, rng, scratch);
    });
  });
}

// accepted[r]: whether row r's token is one of its n drafts (B, n).
inline void tokens_in_drafts(const std::int64_t* tokens, const std::int64_t* drafts, std::int64_t B, int n,
                             bool* accepted) {
  for (std::int64_t r = 0; r < B; ++r)
    accepted[r] = std::find(drafts + r * n, drafts + (r + 1) * n, tokens[r]) != drafts + (r + 1) * n;
}

// The single-draft acceptance sum_i min(p(i), q(i)) (B,) of rows read in place with their scales.
inline void batched_acceptance_rate(const BatchRows& b, double* out) {
  parallel_rows(b.B, light_rows(2 * b.V), [&](std::int64_t r) {
    out[r] = sps_acceptance(ScaledRow{b.p + r * b.V, b.p_scale[r]}, ScaledRow{b.q + r * b.q_stride, b.q_scale[r]},
                            static_cast<int>(b.V));
  });
}

// Exact acceptance (B,) of the rows under `method` (the registry's acceptance).
inline void batched_acceptance(const std::string& method, const BatchRows& b, int n, const VerifierOptions& options,
                               double* out) {
  with_verifier(method, options, [&](VerifierWork work, auto, auto acceptance) {
    values_per_row(b, work.acceptance, [&](const double* pr, const double* qr, int V) { return acceptance(pr, qr, V, n); },
                   out);
  });
}

// SpecTr's K-SEQ parameter rho* (B,) of the rows (spectr.hpp).
inline void batched_kseq_rho(const BatchRows& b, int n, double* out) {
  values_per_row(b, RowWork::heavy, [n](const double* pr, const double* qr, int V) { return kseq_prepare(pr, qr, V, n).rho; },
                 out);
}

// The optimal subset of every row (subset_selection.hpp): its acceptance alpha (B,) and
// membership in_H (B, V).
inline void batched_optimal_subset(const BatchRows& b, int n, SchemeKind kind, double* alpha, bool* in_H) {
  for_each_row(b, RowWork::heavy, [&](std::int64_t r, const double* pr, const double* qr, int V) {
    const SubsetSolution s = optimal_subset(pr, DraftScheme(kind, n, V, qr));
    alpha[r] = s.alpha;
    for (int i = 0; i < V; ++i) in_H[r * V + i] = s.in_H[i] != 0;
  });
}

// Probabilities (M,) of M tuples (M, n) under one scheme q (rows, V).
inline void batched_tuple_probability(const double* q, SchemeKind kind, int n, int V, const std::int64_t* drafts,
                                      std::int64_t M, double* out) {
  const DraftScheme scheme(kind, n, V, q);
  const std::vector<int> tuples = to_int(drafts, static_cast<std::size_t>(M * n));
  parallel_rows(M, light_rows(n), [&](std::int64_t m) { out[m] = scheme.tuple_probability(tuples.data() + m * n); });
}

// Checks that every tuple of drafts (M, n) is drawable under one scheme q (check_drawable).
inline void check_drawable_tuples(SchemeKind kind, const double* q, int V, const std::int64_t* drafts, std::int64_t M,
                                  int n) {
  const std::vector<int> tuples = to_int(drafts, static_cast<std::size_t>(M * n));
  for (std::int64_t m = 0; m < M; ++m) check_drawable(kind, q, V, tuples.data() + m * n, n);
}

// n drafts per row (B, n) from the rows of q (B, q_stride) with V tokens, one seed per row.
inline void batched_sample_drafts(const double* q, std::int64_t B, std::int64_t V, std::int64_t q_stride,
                                  SchemeKind kind, int n, const std::uint64_t* seeds, std::int64_t* out) {
  parallel_chunks(B, light_rows(q_stride), [&](std::int64_t begin, std::int64_t end) {
    std::vector<int> drafts(n);
    for (std::int64_t r = begin; r < end; ++r) {
      const DraftScheme scheme(kind, n, static_cast<int>(V), q + r * q_stride);
      Rng rng(seeds[r]);
      scheme.sample(rng, drafts.data());
      for (int j = 0; j < n; ++j) out[r * n + j] = drafts[j];
    }
  });
}

// One draw per row (B,) of a batch of laws (B, V), one seed per row.
inline void batched_sample_laws(const double* laws, std::int64_t B, std::int64_t V, const std::uint64_t* seeds,
                                std::int64_t* out) {
  parallel_rows(B, light_rows(V), [&](std::int64_t r) {
    Rng rng(seeds[r]);
    out[r] = sample_index(laws + r * V, static_cast<int>(V), rng);
  });
}

// One plan's laws at M tuples (M, n) -> out (M, V), the chunks sharing the plan.
template <class Plan>
void plan_transport(const Plan& plan, const std::int64_t* drafts, std::int64_t M, std::int64_t n, int V, double* out) {
  const std::vector<int> tuples = to_int(drafts, static_cast<std::size_t>(M * n));
  parallel_rows(M, light_rows(V), [&](std::int64_t m) { plan.transport(tuples.data() + m * n, out + m * V); });
}

// One plan's verified token per tuple (M, n) with one seed each -> out (M,) (sample_verified: no
// law written where the plan samples directly).
template <class Plan>
void plan_samples(const Plan& plan, const std::int64_t* drafts, std::int64_t M, std::int64_t n,
                  const std::uint64_t* seeds, int V, std::int64_t* out) {
  const std::vector<int> tuples = to_int(drafts, static_cast<std::size_t>(M * n));
  parallel_chunks(M, light_rows(V), [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> scratch;
    for (std::int64_t m = begin; m < end; ++m) {
      Rng rng(seeds[m]);
      out[m] = sample_verified(plan, tuples.data() + m * n, V, rng, scratch);
    }
  });
}

}  // namespace multidraft
