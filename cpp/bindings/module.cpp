// pybind11 bindings: the only C++ that knows about Python. They take C-contiguous float64 /
// int64 arrays already validated by python/multidraft/_validation.py, convert, and run every
// batched loop on the core's thread pool with the GIL released (parallel.hpp). Batched layout:
// p (B, V); q (B, rows, V) with rows = n for independent drafts and 1 otherwise; drafts (B, n);
// seeds (B,) uint64, one core generator per row; the plan calls (transport, verify) may take p and q
// unnormalised with their row scales (B,) (_validation.probability_scales), read in place. A call
// reads the caller's arrays with the GIL released: another thread writing them meanwhile races,
// as with NumPy's own GIL-free ufuncs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "arrays.hpp"
#include "parallel.hpp"
#include "multidraft/global_resolution/sums/chebyshev_pieces.hpp"  // logs_with_range (test hook)
#include "multidraft/core/distribution.hpp"
#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/global_resolution/plan.hpp"
#include "multidraft/otlp/otlp_plan.hpp"
#include "multidraft/plans/plan_sampling.hpp"
#include "multidraft/detail/radix_sort.hpp"
#include "multidraft/otlp/relaxed_network.hpp"
#include "multidraft/core/rng.hpp"
#include "multidraft/batch/row_runs.hpp"
#include "multidraft/baselines/single_draft.hpp"
#include "multidraft/baselines/spectr.hpp"
#include "multidraft/otlp/subset_selection.hpp"
#include "multidraft/batch/thread_pool.hpp"
#include "multidraft/plans/verifier_registry.hpp"

namespace py = pybind11;
using namespace multidraft;

namespace {

using multidraft_bindings::Doubles;
using multidraft_bindings::Ints;
using multidraft_bindings::Seeds;
using multidraft_bindings::light_rows;
using multidraft_bindings::parallel_chunks;
using multidraft_bindings::parallel_rows;

SchemeKind parse_kind(const std::string& kind) {
  if (kind == "iid") return SchemeKind::iid;
  if (kind == "without_replacement") return SchemeKind::without_replacement;
  if (kind == "independent") return SchemeKind::independent;
  if (kind == "hub") return SchemeKind::hub;
  throw std::invalid_argument("unknown draft scheme '" + kind + "'");
}

NetworkKind parse_network(const std::string& network) {
  if (network == "sets") return NetworkKind::sets;
  if (network == "tuples") return NetworkKind::tuples;
  throw std::invalid_argument("'network' must be 'sets' or 'tuples', got '" + network + "'");
}

std::vector<int> to_int(const std::int64_t* data, std::size_t size) { return std::vector<int>(data, data + size); }

// Shapes of a batched call: B rows of V, q rows per batch row, n drafts per row.
struct Batch {
  py::ssize_t B, V;
  py::ssize_t q_stride;  // doubles between consecutive batch rows of q
};

Batch batch_of(const Doubles& p, const Doubles& q) {
  if (p.ndim() != 2 || q.ndim() != 3 || q.shape(0) != p.shape(0) || q.shape(2) != p.shape(1))
    throw std::invalid_argument("internal: expected p (B, V) and q (B, rows, V)");
  return {p.shape(0), p.shape(1), q.shape(1) * q.shape(2)};
}

std::int64_t min_rows(const Batch& b, RowWork work) {
  return work == RowWork::light ? light_rows(b.V + b.q_stride) : 1;
}

// The shell of every batched per-(p, q)-row computation: calls row(r, p_row, q_row, V) for the
// B rows of p (B, V) and q (B, rows, V).
template <class Row>
void for_each_row(const Doubles& p, const Doubles& q, RowWork work, Row row) {
  const Batch b = batch_of(p, q);
  const double *pp = p.data(), *qq = q.data();
  parallel_rows(
      b.B, min_rows(b, work), [&](py::ssize_t r) { row(r, pp + r * b.V, qq + r * b.q_stride, static_cast<int>(b.V)); },
      work == RowWork::heavy);
}

// One value per row: value(p_row, q_row, V) -> (B,).
template <class Value>
py::array_t<double> values_per_row(const Doubles& p, const Doubles& q, RowWork work, Value value) {
  py::array_t<double> out(p.shape(0));
  double* o = out.mutable_data();
  for_each_row(p, q, work, [&](py::ssize_t r, const double* pr, const double* qr, int V) { o[r] = value(pr, qr, V); });
  return out;
}

py::tuple batched_optimal_subset(const Doubles& p, const Doubles& q, int n, const std::string& kind) {
  const SchemeKind k = parse_kind(kind);
  const py::ssize_t B = p.shape(0), V = p.shape(1);
  py::array_t<double> alpha(B);
  py::array_t<bool> in_H({B, V});
  double* a = alpha.mutable_data();
  bool* h = in_H.mutable_data();
  for_each_row(p, q, RowWork::heavy, [&](py::ssize_t r, const double* pr, const double* qr, int V) {
    const SubsetSolution s = multidraft::optimal_subset(pr, DraftScheme(k, n, V, qr));
    a[r] = s.alpha;
    for (int i = 0; i < V; ++i) h[r * V + i] = s.in_H[i] != 0;
  });
  return py::make_tuple(alpha, in_H);
}

// Probabilities of M tuples (M, n) under one scheme q (rows, V).
py::array_t<double> tuple_probability(const Doubles& q, const std::string& kind, int n, const Ints& drafts) {
  const int V = static_cast<int>(q.shape(q.ndim() - 1));
  const py::ssize_t M = drafts.shape(0);
  py::array_t<double> out(M);
  const DraftScheme scheme(parse_kind(kind), n, V, q.data());
  const std::vector<int> tuples = to_int(drafts.data(), static_cast<std::size_t>(M * n));
  double* o = out.mutable_data();
  parallel_rows(M, light_rows(n), [&](py::ssize_t m) { o[m] = scheme.tuple_probability(tuples.data() + m * n); });
  return out;
}

Ints sample_drafts(const Doubles& q, const std::string& kind, int n, const Seeds& seeds) {
  const py::ssize_t B = q.shape(0), V = q.shape(2), stride = q.shape(1) * V;
  const SchemeKind k = parse_kind(kind);
  Ints out({B, static_cast<py::ssize_t>(n)});
  std::int64_t* o = out.mutable_data();
  const double* qq = q.data();
  const std::uint64_t* s = seeds.data();
  parallel_chunks(B, light_rows(stride), [&](std::int64_t begin, std::int64_t end) {
    std::vector<int> drafts(n);
    for (std::int64_t r = begin; r < end; ++r) {
      const DraftScheme scheme(k, n, static_cast<int>(V), qq + r * stride);
      Rng rng(s[r]);
      scheme.sample(rng, drafts.data());
      for (int j = 0; j < n; ++j) o[r * n + j] = drafts[j];
    }
  });
  return out;
}

// One draw per row of a batch of laws (B, V): the verified token given that row's transport.
Ints sample_rows(const Doubles& laws, const Seeds& seeds) {
  const py::ssize_t B = laws.shape(0), V = laws.shape(1);
  Ints out(B);
  std::int64_t* o = out.mutable_data();
  const double* l = laws.data();
  const std::uint64_t* s = seeds.data();
  parallel_rows(B, light_rows(V), [&](py::ssize_t r) {
    Rng rng(s[r]);
    o[r] = sample_index(l + r * V, static_cast<int>(V), rng);
  });
  return out;
}

// Row scales (B,) of a batched plan call, or none (the rows are normalised).
struct Scales {
  const double *p = nullptr, *q = nullptr;
};

Scales scales_of(const Batch& b, const std::optional<Doubles>& p_scale, const std::optional<Doubles>& q_scale) {
  if (!p_scale != !q_scale) throw std::invalid_argument("internal: give the scales of both p and q, or neither");
  if (!p_scale) return {};
  if (p_scale->size() != b.B || q_scale->size() != b.B) throw std::invalid_argument("internal: one scale per row");
  return {p_scale->data(), q_scale->data()};
}

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

// The shell of every batched plan call: p (B, V), q (B, rows, V), drafts (B, n), with the rows'
// scales when the caller passes them unnormalised (see Scales).
// `make(p_row, q_row, V, n)` builds a plan for one (p, q) row (make_plan) and
// `act(plan, r, drafts_r, scratch)` uses it for row r, after checking that the row's drafts are
// drawable under `kind` (check_drawable). Consecutive rows with the same p and q (many draft
// tuples for one context) form a run that shares one plan, so exact plans are solved once per
// context; runs are spread over the threads (heavy ones one at a time to whichever thread is
// free). Plans are deterministic, so results do not depend on the threads.
template <class Make, class Act>
void plan_rows(const Doubles& p, const Doubles& q, const Ints& drafts, const Scales& scales, SchemeKind kind,
               RowWork work, Make make, Act act) {
  const Batch b = batch_of(p, q);
  const int n = static_cast<int>(drafts.shape(1));
  const int V = static_cast<int>(b.V);
  const std::vector<int> tuples = to_int(drafts.data(), static_cast<std::size_t>(b.B * n));
  const double *pp = p.data(), *qq = q.data();
  const std::vector<std::int64_t> run_begin = equal_row_runs(pp, qq, b.B, b.V, b.q_stride);
  const std::int64_t runs = static_cast<std::int64_t>(run_begin.size()) - 1;
  parallel_chunks(
      runs, min_rows(b, work),
      [&](std::int64_t first, std::int64_t last) {
        std::vector<double> scratch, rows;
        for (std::int64_t run = first; run < last; ++run) {
          const std::int64_t r0 = run_begin[run];
          const ScaledRow pr{pp + r0 * b.V, scales.p ? scales.p[r0] : 1.0};
          const ScaledRow qr{qq + r0 * b.q_stride, scales.q ? scales.q[r0] : 1.0};
          decltype(make_plan(make, pr, qr, V, b.q_stride, n, rows)) plan;
          for (std::int64_t r = r0; r < run_begin[run + 1]; ++r) {
            check_drawable(kind, qr.data, V, tuples.data() + r * n, n);
            if (!plan) plan = make_plan(make, pr, qr, V, b.q_stride, n, rows);
            act(*plan, r, tuples.data() + r * n, scratch);
          }
        }
      },
      work == RowWork::heavy);
}

// Laws (B, V) of the rows' plans at their drafts.
py::array_t<double> batched_transport(const std::string& method, const Doubles& p, const Doubles& q, const Ints& drafts,
                                      const VerifierOptions& options, const std::optional<Doubles>& p_scale,
                                      const std::optional<Doubles>& q_scale) {
  const Scales scales = scales_of(batch_of(p, q), p_scale, q_scale);
  py::array_t<double> out({p.shape(0), p.shape(1)});
  double* o = out.mutable_data();
  const py::ssize_t V = p.shape(1);
  with_verifier(method, options, [&](VerifierWork work, auto make, auto) {
    plan_rows(p, q, drafts, scales, options.kind, work.plan, make,
              [&](const auto& plan, std::int64_t r, const int* d, std::vector<double>&) { plan.transport(d, o + r * V); });
  });
  return out;
}

// One verified token per row (B,), from each row's seed, without writing laws where the plan can
// sample directly (sample_verified).
Ints batched_verify(const std::string& method, const Doubles& p, const Doubles& q, const Ints& drafts,
                    const Seeds& seeds, const VerifierOptions& options, const std::optional<Doubles>& p_scale,
                    const std::optional<Doubles>& q_scale) {
  const Scales scales = scales_of(batch_of(p, q), p_scale, q_scale);
  Ints out(p.shape(0));
  std::int64_t* o = out.mutable_data();
  const std::uint64_t* s = seeds.data();
  const int V = static_cast<int>(p.shape(1));
  with_verifier(method, options, [&](VerifierWork work, auto make, auto) {
    plan_rows(p, q, drafts, scales, options.kind, work.plan, make,
              [&](const auto& plan, std::int64_t r, const int* d, std::vector<double>& scratch) {
      Rng rng(s[r]);
      o[r] = sample_verified(plan, d, V, rng, scratch);
    });
  });
  return out;
}

// The per-token path of Verifier.verify: one row p (V,), q (V,), C-contiguous float64, checked
// and scaled in the call that verifies it (row_scale, distribution.hpp), drafts (n,) int64, one
// seed. The token, as batched_verify gives it for the same row and seed; None when p or q is
// refused or a draft is out of range, for the caller's general path to say what is wrong.
py::object verify_row(const std::string& method, const py::array& p, const py::array& q, const py::array& drafts,
                      std::uint64_t seed, const VerifierOptions& options, double tolerance) {
  auto float64_row = [](const py::array& x) {
    return x.ndim() == 1 && x.dtype().equal(py::dtype::of<double>()) && (x.flags() & py::array::c_style) != 0;
  };
  if (!float64_row(p) || !float64_row(q) || q.shape(0) != p.shape(0) || drafts.ndim() != 1 ||
      !drafts.dtype().equal(py::dtype::of<std::int64_t>()) || (drafts.flags() & py::array::c_style) == 0 ||
      options.kind == SchemeKind::independent)
    throw std::invalid_argument("internal: verify_row takes float64 rows p, q (V,) and int64 drafts (n,)");
  const int V = static_cast<int>(p.shape(0)), n = static_cast<int>(drafts.shape(0));
  const double* pr = static_cast<const double*>(p.data());
  const double* qr = static_cast<const double*>(q.data());
  const std::int64_t* d = static_cast<const std::int64_t*>(drafts.data());
  std::int64_t token = -1;
  {
    py::gil_scoped_release release;
    double p_scale, q_scale;
    const bool valid = row_scale(StridedRow<double>{pr, V, 1}, tolerance, p_scale) &&
                       row_scale(StridedRow<double>{qr, V, 1}, tolerance, q_scale) &&
                       std::all_of(d, d + n, [V](std::int64_t t) { return t >= 0 && t < V; });
    if (valid) {
      const std::vector<int> tuple = to_int(d, static_cast<std::size_t>(n));
      with_verifier(method, options, [&](VerifierWork, auto make, auto) {
        check_drawable(options.kind, qr, V, tuple.data(), n);
        std::vector<double> rows, scratch;
        const auto plan = make_plan(make, ScaledRow{pr, p_scale}, ScaledRow{qr, q_scale}, V, V, n, rows);
        Rng rng(seed);
        token = sample_verified(*plan, tuple.data(), V, rng, scratch);
      });
    }
  }
  return token >= 0 ? py::object(py::int_(token)) : py::object(py::none());
}

// Exact acceptance (B,) of the rows under `method` (the registry's acceptance).
py::array_t<double> batched_acceptance(const std::string& method, const Doubles& p, const Doubles& q, int n,
                                       const VerifierOptions& options) {
  return with_verifier(method, options, [&](VerifierWork work, auto, auto acceptance) {
    return values_per_row(p, q, work.acceptance, [&](const double* pr, const double* qr, int V) { return acceptance(pr, qr, V, n); });
  });
}

// SpecTr's K-SEQ parameter rho* (B,) of the rows (spectr.hpp).
py::array_t<double> batched_kseq_rho(const Doubles& p, const Doubles& q, int n) {
  return values_per_row(p, q, RowWork::heavy, [n](const double* pr, const double* qr, int V) { return kseq_prepare(pr, qr, V, n).rho; });
}

// Slices of one plan, shared by the chunks, at M tuples (M, n) -> (M, V).
template <class Plan>
py::array_t<double> plan_transport(const Plan& plan, const Ints& drafts, int V) {
  const py::ssize_t M = drafts.shape(0), n = drafts.shape(1);
  py::array_t<double> out({M, static_cast<py::ssize_t>(V)});
  const std::vector<int> tuples = to_int(drafts.data(), static_cast<std::size_t>(M * n));
  double* o = out.mutable_data();
  parallel_rows(M, light_rows(V), [&](py::ssize_t m) { plan.transport(tuples.data() + m * n, o + m * V); });
  return out;
}

// One verified token per tuple (M, n) with one seed each -> (M,) (sample_verified: no law written
// where the plan samples directly).
template <class Plan>
Ints plan_samples(const Plan& plan, const Ints& drafts, const Seeds& seeds, int V) {
  const py::ssize_t M = drafts.shape(0), n = drafts.shape(1);
  Ints out(M);
  const std::vector<int> tuples = to_int(drafts.data(), static_cast<std::size_t>(M * n));
  const std::uint64_t* s = seeds.data();
  std::int64_t* o = out.mutable_data();
  parallel_chunks(M, light_rows(V), [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> scratch;
    for (std::int64_t m = begin; m < end; ++m) {
      Rng rng(s[m]);
      o[m] = sample_verified(plan, tuples.data() + m * n, V, rng, scratch);
    }
  });
  return out;
}

// A Global Resolution plan for p (V,), q (V,), solved with the GIL released.
GlobalResolutionPlan* global_resolution_plan(const Doubles& p, const Doubles& q, int n,
                                             const GlobalResolutionOptions& options) {
  const int V = static_cast<int>(p.shape(0));
  py::gil_scoped_release release;
  return new GlobalResolutionPlan(p.data(), q.data(), V, n, options);
}

// Switches that only tests turn, kept out of the public module: the grouped objective's
// derivatives at a point, and Global Resolution plans with the implicit (unshifted) terms or the
// interpolated sums turned off, to compare the fast paths with enumeration.
// The test hooks' name for a GridUse.
GridUse grid_use(const std::string& name) {
  if (name == "never") return GridUse::kNever;
  if (name == "always") return GridUse::kAlways;
  if (name == "where_pays") return GridUse::kWherePays;
  throw std::invalid_argument("'grid' must be 'never', 'where_pays' or 'always', got '" + name + "'");
}

void bind_testing(py::module_& m) {
  py::module_ t = m.def_submodule("_testing", "Test hooks of the multidraft core (not a public API)");
  // Gradient, Hessian diagonal, accepted mass and a Hessian-vector product of one grouped
  // objective (convex.hpp) at a point, with or without interpolated sums (`coarse`: LaplaceSums'
  // rule for Newton iterates).
  t.def(
      "objective_derivatives",
      [](const Doubles& q, int n, std::vector<double> bases, bool slack, const Doubles& a, const Doubles& v,
         bool interpolation, double max_terms, bool coarse, const std::string& grid, double level_aim) {
        const int size = static_cast<int>(q.shape(0));
        if (a.shape(0) != size || v.shape(0) != size) throw std::invalid_argument("'q', 'a' and 'v' must have one length");
        if (n < 1 || n > kMaxTermSize || bases.empty()) throw std::invalid_argument("bad 'n' or 'bases'");
        Eigen::VectorXd gradient, product;
        Curvature curvature;
        // With level_aim (inner problem on the grid): the point first moves to the level whose
        // rejected mass is level_aim (LaplaceInterpolation::Level), within 1e-9 of it.
        LaplaceInterpolation::Level level;
        level.aim = level_aim, level.tolerance = 1e-9 * level_aim, level.low = -30.0, level.high = 30.0;
        const bool leveled = std::isfinite(level_aim);
        if (leveled && !(level_aim > 0.0)) throw std::invalid_argument("'level_aim' must be positive");
        {
          py::gil_scoped_release release;
          ConvexObjective objective;
          objective.slack = slack;
          objective.interpolation = interpolation;
          objective.grid = grid_use(grid);
          if (!build_grouped_terms(std::vector<double>(q.data(), q.data() + size), n, bases, max_terms, objective))
            throw std::runtime_error("over the work budget");
          objective.target = Eigen::VectorXd::Zero(size);
          const Eigen::VectorXd point = Eigen::Map<const Eigen::VectorXd>(a.data(), size);
          curvature.dense = false;
          if (!objective.evaluate(point, gradient, curvature, coarse, leveled ? &level : nullptr))
            throw std::runtime_error("over the work budget");
          objective.hessian_times(curvature, Eigen::Map<const Eigen::VectorXd>(v.data(), size), product);
        }
        py::dict out;
        out["gradient"] = py::array_t<double>(size, gradient.data());
        out["diagonal"] = py::array_t<double>(size, curvature.diagonal.data());
        out["hessian_times"] = py::array_t<double>(size, product.data());
        out["accepted"] = curvature.accepted;
        out["gradient_error"] = curvature.gradient_error;
        out["interpolated"] = curvature.interpolated;
        out["laplace"] = curvature.laplace;
        out["grid"] = curvature.on_grid;
        out["shift"] = level.shift;  // 0 without level_aim (or off the grid)
        return out;
      },
      py::arg("q"), py::arg("n"), py::arg("bases"), py::arg("slack"), py::arg("a"), py::arg("v"),
      py::arg("interpolation"), py::arg("max_terms") = 1e12, py::arg("coarse") = false, py::arg("grid") = "where_pays",
      py::arg("level_aim") = std::numeric_limits<double>::quiet_NaN());

  // write_single_terms (global_resolution.hpp): the stored singles' members and their weights,
  // one row per base, against the closed form (b + q_u)^n - b^n in tests.
  t.def(
      "single_terms",
      [](const Doubles& q, int n, const std::vector<double>& bases) {
        if (n < 2 || n > kMaxTermSize || bases.empty() || bases.size() > 2)
          throw std::invalid_argument("'n' in 2 .. 16 and one or two 'bases'");
        GroupedTerms terms;
        terms.extra_weight.resize(bases.size() - 1);
        write_single_terms(std::vector<double>(q.data(), q.data() + q.shape(0)), n, bases, terms);
        const py::ssize_t count = static_cast<py::ssize_t>(terms.size());
        py::array_t<double> weights({static_cast<py::ssize_t>(bases.size()), count});
        double* out = weights.mutable_data();
        for (std::size_t b = 0; b < bases.size(); ++b)
          std::copy_n((b == 0 ? terms.weight : terms.extra_weight[b - 1]).data(), count, out + b * count);
        const std::vector<std::int64_t> members(terms.members.begin(), terms.members.end());
        return py::make_tuple(Ints(static_cast<py::ssize_t>(members.size()), members.data()),
                              Ints(static_cast<py::ssize_t>(terms.offsets.size()), terms.offsets.data()), weights);
      },
      py::arg("q"), py::arg("n"), py::arg("bases"));

  // positions_by_key (radix_sort.hpp) over given 64-bit keys, against a stable argsort in tests.
  t.def(
      "positions_by_key",
      [](const py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>& keys) {
        const std::uint64_t* k = keys.data();
        const std::vector<int> positions = positions_by_key(static_cast<int>(keys.size()), [k](int j) { return k[j]; });
        return Ints(static_cast<py::ssize_t>(positions.size()), std::vector<std::int64_t>(positions.begin(), positions.end()).data());
      },
      py::arg("keys"));

  // draft_support (draft_scheme.hpp: the tokens with q > 0 by 64-token masks), against
  // np.flatnonzero in tests.
  t.def(
      "draft_support",
      [](const Doubles& q) {
        const std::vector<int> support = draft_support(q.data(), static_cast<int>(q.shape(0)));
        return Ints(static_cast<py::ssize_t>(support.size()), std::vector<std::int64_t>(support.begin(), support.end()).data());
      },
      py::arg("q"));

  // logs_with_range (chebyshev_pieces.hpp: vectorised log(c + x) and the range), against np.log in tests.
  t.def(
      "logs_with_range",
      [](const Doubles& x, double c) {
        const int m = static_cast<int>(x.shape(0));
        std::vector<double> logs(m);
        double low = 0.0, high = 0.0;
        logs_with_range(x.data(), m, c, logs.data(), low, high);
        return py::make_tuple(Doubles(m, logs.data()), low, high);
      },
      py::arg("x"), py::arg("c"));

  t.def(
      "global_resolution_plan",
      [](const Doubles& p, const Doubles& q, int n, double tau, int max_iterations, double max_terms,
         bool paper_threshold, bool exact, double unshifted_limit, bool interpolation, const std::string& grid) {
        const GlobalResolutionOptions options{tau,           max_iterations, max_terms,      paper_threshold,
                                              unshifted_limit, interpolation, exact, grid_use(grid)};
        return global_resolution_plan(p, q, n, options);
      },
      py::arg("p"), py::arg("q"), py::arg("n"), py::arg("tau"), py::arg("max_iterations"), py::arg("max_terms"),
      py::arg("paper_threshold"), py::arg("exact") = true, py::arg("unshifted_limit") = kUnshiftedLimit,
      py::arg("interpolation") = true, py::arg("grid") = "where_pays", py::return_value_policy::take_ownership);
}

}  // namespace

void bind_rdk(py::module_& m);         // cpp/bindings/rdk.cpp ([OOV])
void bind_validation(py::module_& m);  // cpp/bindings/validation.cpp

PYBIND11_MODULE(_core, m) {
  m.doc() = "multidraft C++ core ([GR] optimal transport, single-draft verifiers, draft schemes)";
  m.attr("MAX_NETWORK_ARCS") = kMaxNetworkArcs;
  m.attr("MAX_THREADS") = ThreadPool::kMaxThreads;
  // Releases the GIL: shrinking waits for ending workers to finish the chunk they are running.
  m.def("set_num_threads", [](int k) { ThreadPool::global().set_threads(k); }, py::arg("k"),
        py::call_guard<py::gil_scoped_release>());
  m.def("get_num_threads", [] { return ThreadPool::global().threads(); });
  py::class_<VerifierOptions>(m, "VerifierOptions")
      .def(py::init([](const std::string& kind, bool without_replacement, int truncation, double max_work, double tau,
                       int max_iterations, double max_terms, bool paper_threshold, bool exact, bool fallback) {
             VerifierOptions o;
             o.kind = parse_kind(kind);
             o.without_replacement = without_replacement;
             o.truncation = truncation;
             o.max_work = max_work;
             o.global_resolution.tau = tau;
             o.global_resolution.max_iterations = max_iterations;
             o.global_resolution.max_terms = max_terms;
             o.global_resolution.paper_threshold = paper_threshold;
             o.global_resolution.exact = exact;
             o.fallback = fallback;
             return o;
           }),
           py::arg("kind") = "iid", py::arg("without_replacement") = false, py::arg("truncation") = -1,
           py::arg("max_work") = 1e8, py::arg("tau") = 1e-3, py::arg("max_iterations") = 50, py::arg("max_terms") = 2e6,
           py::arg("paper_threshold") = false, py::arg("exact") = true, py::arg("fallback") = false);
  m.def("transport", &batched_transport, py::arg("method"), py::arg("p"), py::arg("q"), py::arg("drafts"),
        py::arg("options") = VerifierOptions(), py::arg("p_scale") = py::none(), py::arg("q_scale") = py::none());
  m.def("verify", &batched_verify, py::arg("method"), py::arg("p"), py::arg("q"), py::arg("drafts"), py::arg("seeds"),
        py::arg("options") = VerifierOptions(), py::arg("p_scale") = py::none(), py::arg("q_scale") = py::none());
  m.def("verify_row", &verify_row, py::arg("method"), py::arg("p"), py::arg("q"), py::arg("drafts"), py::arg("seed"),
        py::arg("options"), py::arg("tolerance"));
  m.def("acceptance", &batched_acceptance, py::arg("method"), py::arg("p"), py::arg("q"), py::arg("n"),
        py::arg("options") = VerifierOptions());
  m.def("optimal_subset", &batched_optimal_subset, py::arg("p"), py::arg("q"), py::arg("n"), py::arg("kind"));
  m.def("tuple_probability", &tuple_probability, py::arg("q"), py::arg("kind"), py::arg("n"), py::arg("drafts"));
  m.def("sample_drafts", &sample_drafts, py::arg("q"), py::arg("kind"), py::arg("n"), py::arg("seeds"));
  m.def("sample_rows", &sample_rows, py::arg("laws"), py::arg("seeds"));
  m.def("check_drawable", [](const Doubles& q, const std::string& kind, int n, const Ints& drafts) {
    const int V = static_cast<int>(q.shape(q.ndim() - 1));
    if (drafts.ndim() != 2 || drafts.shape(1) != n) throw std::invalid_argument("internal: 'drafts' must be (M, n)");
    const SchemeKind k = parse_kind(kind);
    const std::vector<int> tuples = to_int(drafts.data(), static_cast<std::size_t>(drafts.shape(0) * n));
    for (py::ssize_t m = 0; m < drafts.shape(0); ++m) check_drawable(k, q.data(), V, tuples.data() + m * n, n);
  }, py::arg("q"), py::arg("kind"), py::arg("n"), py::arg("drafts"));
  m.def("equal_row_runs", [](const Doubles& p, const Doubles& q) {
    const Batch b = batch_of(p, q);
    const std::vector<std::int64_t> starts = equal_row_runs(p.data(), q.data(), b.B, b.V, b.q_stride);
    return Ints(static_cast<py::ssize_t>(starts.size()), starts.data());
  }, py::arg("p"), py::arg("q"));
  m.def("kseq_rho", &batched_kseq_rho, py::arg("p"), py::arg("q"), py::arg("n"));

  py::class_<RelaxedPlan>(m, "RelaxedPlan")
      .def(py::init([](const Doubles& p, const Doubles& q, const std::string& kind, int n, const std::string& network) {
             const int V = static_cast<int>(p.shape(0));
             py::gil_scoped_release release;
             return new RelaxedPlan(p.data(), q.data(), V, parse_kind(kind), n, parse_network(network));
           }),
           py::arg("p"), py::arg("q"), py::arg("kind"), py::arg("n"), py::arg("network"))
      .def_property_readonly("alpha", &RelaxedPlan::alpha)
      .def("transport", [](const RelaxedPlan& plan, const Ints& drafts, int V) { return plan_transport(plan, drafts, V); })
      .def("sample", [](const RelaxedPlan& plan, const Ints& drafts, const Seeds& seeds, int V) {
        return plan_samples(plan, drafts, seeds, V);
      });

  py::class_<SlacknessPlan>(m, "SlacknessPlan")
      .def(py::init([](const Doubles& p, const Doubles& q, const std::string& kind, int n) {
             const int V = static_cast<int>(p.shape(0));
             py::gil_scoped_release release;
             return new SlacknessPlan(p.data(), q.data(), V, parse_kind(kind), n);
           }),
           py::arg("p"), py::arg("q"), py::arg("kind"), py::arg("n"))
      .def_property_readonly("alpha", &SlacknessPlan::alpha)
      .def("transport", [](const SlacknessPlan& plan, const Ints& drafts, int V) { return plan_transport(plan, drafts, V); })
      .def("sample", [](const SlacknessPlan& plan, const Ints& drafts, const Seeds& seeds, int V) {
        return plan_samples(plan, drafts, seeds, V);
      });

  py::class_<GlobalResolutionPlan>(m, "GlobalResolutionPlan")
      .def(py::init([](const Doubles& p, const Doubles& q, int n, double tau, int max_iterations, double max_terms,
                       bool paper_threshold, bool exact) {
             GlobalResolutionOptions options;
             options.tau = tau;
             options.max_iterations = max_iterations;
             options.max_terms = max_terms;
             options.paper_threshold = paper_threshold;
             options.exact = exact;
             return global_resolution_plan(p, q, n, options);
           }),
           py::arg("p"), py::arg("q"), py::arg("n"), py::arg("tau"), py::arg("max_iterations"), py::arg("max_terms"),
           py::arg("paper_threshold"), py::arg("exact") = true)
      .def_property_readonly("alpha", &GlobalResolutionPlan::alpha)
      .def_property_readonly("exact", &GlobalResolutionPlan::exact)
      .def_property_readonly("law_error_bound", &GlobalResolutionPlan::law_error_bound)
      .def_property_readonly("alpha_star", &GlobalResolutionPlan::alpha_star)
      .def_property_readonly("success", &GlobalResolutionPlan::success)
      .def_property_readonly("l1_bound", &GlobalResolutionPlan::l1_bound)
      .def_property_readonly("acceptance_bound", &GlobalResolutionPlan::acceptance_bound)
      .def_property_readonly("diagnostics",
                             [](const GlobalResolutionPlan& plan) {
                               py::dict out;
                               for (const auto& [name, r] : {std::pair<const char*, const SystemReport*>{"outer", &plan.outer_report()},
                                                              {"inner", &plan.inner_report()}}) {
                                 py::dict d;
                                 d["truncation_size"] = r->truncation_size;
                                 d["terms"] = r->terms;
                                 d["truncation_error"] = r->truncation_error;
                                 d["gradient_l1"] = r->gradient_l1;
                                 d["threshold"] = r->threshold;
                                 d["iterations"] = r->iterations;
                                 d["converged"] = r->converged;
                                 d["within_budget"] = r->within_budget;
                                 d["interpolated"] = r->interpolated;
                                 d["deviation_bound"] = r->deviation_bound();
                                 out[name] = d;
                               }
                               return out;
                             })
      .def("transport",
           [](const GlobalResolutionPlan& plan, const Ints& drafts, int V) { return plan_transport(plan, drafts, V); })
      .def("sample", [](const GlobalResolutionPlan& plan, const Ints& drafts, const Seeds& seeds, int V) {
        return plan_samples(plan, drafts, seeds, V);
      });
  bind_rdk(m);
  bind_validation(m);
  bind_testing(m);
}
