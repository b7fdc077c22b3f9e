// The driver of every batched plan call (transport, verify): a plan per (p, q) row from the
// verifier registry (registry/verifier_registry.hpp), used at that row's drafts. Consecutive equal
// rows (many draft tuples for one context, row_runs.hpp) share one plan, built at the run's first
// row once its drafts are checked drawable, so an exact plan is solved once per context.
#pragma once
#include <cstdint>
#include <type_traits>
#include <vector>

#include "multidraft/batch/batch_rows.hpp"
#include "multidraft/batch/row_runs.hpp"
#include "multidraft/core/distribution.hpp"
#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/registry/verifier_registry.hpp"

namespace multidraft {

// A plan of one (p, q) row from a registry maker, given the rows as it takes them
// (verifier_registry.hpp): in place with their scales, or as pointers to normalised rows, which
// are the caller's own when their scales are 1 and else copies written into `rows` (q_size
// entries of q: n rows for independent drafts, all of one scale).
template <class Make>
auto make_plan(const Make& make, const ScaledRow& p, const ScaledRow& q, int V, std::int64_t q_size, int n,
               std::vector<double>& rows) {
  if constexpr (std::is_invocable_v<const Make&, const ScaledRow&, const ScaledRow&, int, int>) {
    return make(p, q, V, n);
  } else {
    if (p.scale == 1.0 && q.scale == 1.0) return make(p.data, q.data, V, n);
    rows.resize(V + q_size);
    for (int i = 0; i < V; ++i) rows[i] = p[i];
    for (std::int64_t i = 0; i < q_size; ++i) rows[V + i] = q[i];
    return make(rows.data(), rows.data() + V, V, n);
  }
}

// For the B rows of `b` with drafts (B, n): `make(p_row, q_row, V, n)` builds a plan for one
// (p, q) row (make_plan) and `act(plan, r, drafts_r, scratch)` uses it for row r, after checking
// that the row's drafts are drawable under `kind` (check_drawable). Runs of equal rows share one
// plan and are spread over the threads (heavy ones one at a time to whichever thread is free).
// Plans are deterministic, so results do not depend on the threads.
template <class Make, class Act>
void plan_rows(const BatchRows& b, const std::int64_t* drafts, int n, SchemeKind kind, RowWork work, Make make, Act act) {
  const int V = static_cast<int>(b.V);
  const std::vector<int> tuples = to_int(drafts, static_cast<std::size_t>(b.B * n));
  const double *pp = b.p, *qq = b.q;
  const std::vector<std::int64_t> run_begin = equal_row_runs(pp, qq, b.B, b.V, b.q_stride);
  const std::int64_t runs = static_cast<std::int64_t>(run_begin.size()) - 1;
  parallel_chunks(
      runs, min_rows(b, work),
      [&](std::int64_t first, std::int64_t last) {
        std::vector<double> scratch, rows;
        for (std::int64_t run = first; run < last; ++run) {
          const std::int64_t r0 = run_begin[run];
          const ScaledRow pr{pp + r0 * b.V, b.p_scale ? b.p_scale[r0] : 1.0};
          const ScaledRow qr{qq + r0 * b.q_stride, b.q_scale ? b.q_scale[r0] : 1.0};
          decltype(make_plan(make, pr, qr, V, b.q_stride, n, rows)) plan;
          for (std::int64_t r = r0; r < run_begin[run + 1]; ++r) {
            check_drawable(kind, qr, V, tuples.data() + r * n, n);
            if (!plan) plan = make_plan(make, pr, qr, V, b.q_stride, n, rows);
            act(*plan, r, tuples.data() + r * n, scratch);
          }
        }
      },
      work == RowWork::heavy);
}

}  // namespace multidraft
