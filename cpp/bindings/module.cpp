// pybind11 bindings: the only C++ that knows about Python. They take C-contiguous float64 /
// int64 arrays already validated by python/multidraft/_validation.py, check their shapes, turn
// them into the core's views and run the core's batched call (multidraft/batch/batched_calls.hpp)
// with the GIL released. Batched layout: p (B, V); q (B, rows, V) with rows = n for independent
// drafts and 1 otherwise; drafts (B, n); seeds (B,) uint64, one core generator per row; the plan
// calls (transport, verify) may take p and q unnormalised with their row scales (B,)
// (_validation.probability_scales), read in place. A call reads the caller's arrays with the GIL
// released: another thread writing them meanwhile races, as with NumPy's own GIL-free ufuncs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "options.hpp"
#include "multidraft/batch/batched_calls.hpp"
#include "multidraft/batch/row_runs.hpp"
#include "multidraft/detail/thread_pool.hpp"
#include "multidraft/global_resolution/plan.hpp"
#include "multidraft/otlp/otlp_plan.hpp"
#include "multidraft/otlp/relaxed_network.hpp"
#include "multidraft/registry/verifier_registry.hpp"

namespace py = pybind11;
using namespace multidraft;

namespace {

using multidraft_bindings::Doubles;
using multidraft_bindings::Ints;
using multidraft_bindings::Seeds;
using multidraft_bindings::parse_kind;

// p (B, V) and q (B, rows, V) as the core's view, with the rows' scales when given (both or none).
BatchRows batch_rows(const Doubles& p, const Doubles& q) {
  if (p.ndim() != 2 || q.ndim() != 3 || q.shape(0) != p.shape(0) || q.shape(2) != p.shape(1))
    throw std::invalid_argument("internal: expected p (B, V) and q (B, rows, V)");
  BatchRows b;
  b.p = p.data(), b.q = q.data();
  b.B = p.shape(0), b.V = p.shape(1), b.q_stride = q.shape(1) * q.shape(2);
  return b;
}

BatchRows batch_rows(const Doubles& p, const Doubles& q, const std::optional<Doubles>& p_scale,
                     const std::optional<Doubles>& q_scale) {
  BatchRows b = batch_rows(p, q);
  if (!p_scale != !q_scale) throw std::invalid_argument("internal: give the scales of both p and q, or neither");
  if (!p_scale) return b;
  if (p_scale->size() != b.B || q_scale->size() != b.B) throw std::invalid_argument("internal: one scale per row");
  b.p_scale = p_scale->data(), b.q_scale = q_scale->data();
  return b;
}

// core() with the GIL released: it reads and writes only the pointers taken beforehand.
template <class Core>
void without_gil(const Core& core) {
  py::gil_scoped_release release;
  core();
}

py::array_t<double> py_transport(const std::string& method, const Doubles& p, const Doubles& q, const Ints& drafts,
                                 const VerifierOptions& options, const std::optional<Doubles>& p_scale,
                                 const std::optional<Doubles>& q_scale) {
  const BatchRows b = batch_rows(p, q, p_scale, q_scale);
  py::array_t<double> out({p.shape(0), p.shape(1)});
  const int n = static_cast<int>(drafts.shape(1));
  const std::int64_t* d = drafts.data();
  double* o = out.mutable_data();
  without_gil([&] { batched_transport(method, b, d, n, options, o); });
  return out;
}

Ints py_verify(const std::string& method, const Doubles& p, const Doubles& q, const Ints& drafts, const Seeds& seeds,
               const VerifierOptions& options, const std::optional<Doubles>& p_scale,
               const std::optional<Doubles>& q_scale) {
  const BatchRows b = batch_rows(p, q, p_scale, q_scale);
  Ints out(p.shape(0));
  const int n = static_cast<int>(drafts.shape(1));
  const std::int64_t* d = drafts.data();
  const std::uint64_t* s = seeds.data();
  std::int64_t* o = out.mutable_data();
  without_gil([&] { batched_verify(method, b, d, n, s, options, o); });
  return out;
}

// The checked calls: p and q as users pass them (user_rows: float32 / float64, (V,) or (B, V), any
// strides) with their sum tolerances, checked by the core in one read per row (checked_rows.hpp)
// and computed in the same call; None when an array is of another kind, a row is refused or a
// draft is out of range, for the caller's general path to handle or explain. Drafts (B, n) int64.
std::optional<CheckedRows> checked_rows(const py::array& p, const py::array& q, double p_tolerance, double q_tolerance,
                                        bool scaled) {
  const auto pr = multidraft_bindings::user_rows(p, p_tolerance), qr = multidraft_bindings::user_rows(q, q_tolerance);
  if (!pr || !qr || p.ndim() != q.ndim()) return std::nullopt;
  std::optional<CheckedRows> rows(std::in_place);
  bool valid = false;
  without_gil([&] { valid = rows->check(*pr, *qr, scaled); });
  return valid ? std::move(rows) : std::nullopt;
}

bool drafts_fit(const py::array& drafts, const BatchRows& b) {
  return drafts.dtype().equal(py::dtype::of<std::int64_t>()) && (drafts.flags() & py::array::c_style) != 0 &&
         drafts.ndim() == 2 && drafts.shape(0) == b.B && drafts.shape(1) > 0 &&
         drafts_in_range(static_cast<const std::int64_t*>(drafts.data()), drafts.size(), b.V);
}

py::object py_verify_checked(const std::string& method, const py::array& p, const py::array& q, const py::array& drafts,
                             const Seeds& seeds, const VerifierOptions& options, double p_tolerance, double q_tolerance) {
  const auto rows = checked_rows(p, q, p_tolerance, q_tolerance, true);
  if (!rows || !drafts_fit(drafts, rows->rows()) || seeds.size() != rows->rows().B) return py::none();
  const BatchRows& b = rows->rows();
  Ints tokens(b.B);
  py::array_t<bool> accepted(b.B);
  const int n = static_cast<int>(drafts.shape(1));
  const std::int64_t* d = static_cast<const std::int64_t*>(drafts.data());
  const std::uint64_t* s = seeds.data();
  std::int64_t* t = tokens.mutable_data();
  bool* a = accepted.mutable_data();
  without_gil([&] {
    batched_verify(method, b, d, n, s, options, t);
    tokens_in_drafts(t, d, b.B, n, a);
  });
  return py::make_tuple(tokens, accepted);
}

py::object py_transport_checked(const std::string& method, const py::array& p, const py::array& q,
                                const py::array& drafts, const VerifierOptions& options, double p_tolerance,
                                double q_tolerance) {
  const auto rows = checked_rows(p, q, p_tolerance, q_tolerance, true);
  if (!rows || !drafts_fit(drafts, rows->rows())) return py::none();
  const BatchRows& b = rows->rows();
  py::array_t<double> out({b.B, b.V});
  const int n = static_cast<int>(drafts.shape(1));
  const std::int64_t* d = static_cast<const std::int64_t*>(drafts.data());
  double* o = out.mutable_data();
  without_gil([&] { batched_transport(method, b, d, n, options, o); });
  return std::move(out);
}

py::object py_acceptance_rate_checked(const py::array& p, const py::array& q, double p_tolerance, double q_tolerance) {
  const auto rows = checked_rows(p, q, p_tolerance, q_tolerance, true);
  if (!rows) return py::none();
  py::array_t<double> out(rows->rows().B);
  double* o = out.mutable_data();
  without_gil([&] { batched_acceptance_rate(rows->rows(), o); });
  return std::move(out);
}

py::array_t<double> py_acceptance(const std::string& method, const Doubles& p, const Doubles& q, int n,
                                  const VerifierOptions& options) {
  const BatchRows b = batch_rows(p, q);
  py::array_t<double> out(p.shape(0));
  double* o = out.mutable_data();
  without_gil([&] { batched_acceptance(method, b, n, options, o); });
  return out;
}

py::array_t<double> py_kseq_rho(const Doubles& p, const Doubles& q, int n) {
  const BatchRows b = batch_rows(p, q);
  py::array_t<double> out(p.shape(0));
  double* o = out.mutable_data();
  without_gil([&] { batched_kseq_rho(b, n, o); });
  return out;
}

py::tuple py_optimal_subset(const Doubles& p, const Doubles& q, int n, const std::string& kind) {
  const SchemeKind k = parse_kind(kind);
  const py::ssize_t B = p.shape(0), V = p.shape(1);
  py::array_t<double> alpha(B);
  py::array_t<bool> in_H({B, V});
  double* a = alpha.mutable_data();
  bool* h = in_H.mutable_data();
  const BatchRows b = batch_rows(p, q);
  without_gil([&] { batched_optimal_subset(b, n, k, a, h); });
  return py::make_tuple(alpha, in_H);
}

// Probabilities of M tuples (M, n) under one scheme q (rows, V).
py::array_t<double> py_tuple_probability(const Doubles& q, const std::string& kind, int n, const Ints& drafts) {
  const int V = static_cast<int>(q.shape(q.ndim() - 1));
  const py::ssize_t M = drafts.shape(0);
  py::array_t<double> out(M);
  const SchemeKind k = parse_kind(kind);
  const double* qq = q.data();
  const std::int64_t* d = drafts.data();
  double* o = out.mutable_data();
  without_gil([&] { batched_tuple_probability(qq, k, n, V, d, M, o); });
  return out;
}

Ints py_sample_drafts(const Doubles& q, const std::string& kind, int n, const Seeds& seeds) {
  const py::ssize_t B = q.shape(0), V = q.shape(2), stride = q.shape(1) * V;
  const SchemeKind k = parse_kind(kind);
  Ints out({B, static_cast<py::ssize_t>(n)});
  const double* qq = q.data();
  const std::uint64_t* s = seeds.data();
  std::int64_t* o = out.mutable_data();
  without_gil([&] { batched_sample_drafts(qq, B, V, stride, k, n, s, o); });
  return out;
}

// One draw per row of a batch of laws (B, V): the verified token given that row's transport.
Ints py_sample_rows(const Doubles& laws, const Seeds& seeds) {
  const py::ssize_t B = laws.shape(0), V = laws.shape(1);
  Ints out(B);
  const double* l = laws.data();
  const std::uint64_t* s = seeds.data();
  std::int64_t* o = out.mutable_data();
  without_gil([&] { batched_sample_laws(l, B, V, s, o); });
  return out;
}

void py_check_drawable(const Doubles& q, const std::string& kind, int n, const Ints& drafts) {
  const int V = static_cast<int>(q.shape(q.ndim() - 1));
  if (drafts.ndim() != 2 || drafts.shape(1) != n) throw std::invalid_argument("internal: 'drafts' must be (M, n)");
  check_drawable_tuples(parse_kind(kind), q.data(), V, drafts.data(), drafts.shape(0), n);
}

Ints py_equal_row_runs(const Doubles& p, const Doubles& q) {
  const BatchRows b = batch_rows(p, q);
  const std::vector<std::int64_t> starts = equal_row_runs(b.p, b.q, b.B, b.V, b.q_stride);
  return Ints(static_cast<py::ssize_t>(starts.size()), starts.data());
}

// One plan's laws at M tuples (M, n) -> (M, V).
template <class Plan>
py::array_t<double> transport_of(const Plan& plan, const Ints& drafts, int V) {
  const py::ssize_t M = drafts.shape(0), n = drafts.shape(1);
  py::array_t<double> out({M, static_cast<py::ssize_t>(V)});
  const std::int64_t* d = drafts.data();
  double* o = out.mutable_data();
  without_gil([&] { plan_transport(plan, d, M, n, V, o); });
  return out;
}

// One plan's verified token per tuple (M, n), one seed each -> (M,).
template <class Plan>
Ints samples_of(const Plan& plan, const Ints& drafts, const Seeds& seeds, int V) {
  const py::ssize_t M = drafts.shape(0), n = drafts.shape(1);
  Ints out(M);
  const std::int64_t* d = drafts.data();
  const std::uint64_t* s = seeds.data();
  std::int64_t* o = out.mutable_data();
  without_gil([&] { plan_samples(plan, d, M, n, s, V, o); });
  return out;
}

// transport(drafts, V) and sample(drafts, seeds, V) of a plan class.
template <class Plan, class... Options>
void bind_plan_uses(py::class_<Plan, Options...>& plan) {
  plan.def("transport", [](const Plan& p, const Ints& drafts, int V) { return transport_of(p, drafts, V); })
      .def("sample", [](const Plan& p, const Ints& drafts, const Seeds& seeds, int V) { return samples_of(p, drafts, seeds, V); });
}

// The verifiers' batched calls and their options.
void bind_verifier_calls(py::module_& m) {
  py::class_<VerifierOptions>(m, "VerifierOptions")
      .def(py::init(&multidraft_bindings::verifier_options), py::arg("kind") = "iid",
           py::arg("without_replacement") = false, py::arg("truncation") = -1, py::arg("max_work") = 1e8,
           py::arg("tau") = 1e-3, py::arg("max_iterations") = 50, py::arg("max_terms") = 2e6,
           py::arg("paper_threshold") = false, py::arg("exact") = true, py::arg("fallback") = false);
  m.def("transport", &py_transport, py::arg("method"), py::arg("p"), py::arg("q"), py::arg("drafts"),
        py::arg("options") = VerifierOptions(), py::arg("p_scale") = py::none(), py::arg("q_scale") = py::none());
  m.def("verify", &py_verify, py::arg("method"), py::arg("p"), py::arg("q"), py::arg("drafts"), py::arg("seeds"),
        py::arg("options") = VerifierOptions(), py::arg("p_scale") = py::none(), py::arg("q_scale") = py::none());
  m.def("verify_checked", &py_verify_checked, py::arg("method"), py::arg("p"), py::arg("q"), py::arg("drafts"),
        py::arg("seeds"), py::arg("options"), py::arg("p_tolerance"), py::arg("q_tolerance"));
  m.def("transport_checked", &py_transport_checked, py::arg("method"), py::arg("p"), py::arg("q"), py::arg("drafts"),
        py::arg("options"), py::arg("p_tolerance"), py::arg("q_tolerance"));
  m.def("acceptance_rate_checked", &py_acceptance_rate_checked, py::arg("p"), py::arg("q"), py::arg("p_tolerance"),
        py::arg("q_tolerance"));
  m.def("acceptance", &py_acceptance, py::arg("method"), py::arg("p"), py::arg("q"), py::arg("n"),
        py::arg("options") = VerifierOptions());
}

// The draft schemes' and the OTLP's batched calls.
void bind_scheme_calls(py::module_& m) {
  m.def("optimal_subset", &py_optimal_subset, py::arg("p"), py::arg("q"), py::arg("n"), py::arg("kind"));
  m.def("tuple_probability", &py_tuple_probability, py::arg("q"), py::arg("kind"), py::arg("n"), py::arg("drafts"));
  m.def("sample_drafts", &py_sample_drafts, py::arg("q"), py::arg("kind"), py::arg("n"), py::arg("seeds"));
  m.def("sample_rows", &py_sample_rows, py::arg("laws"), py::arg("seeds"));
  m.def("check_drawable", &py_check_drawable, py::arg("q"), py::arg("kind"), py::arg("n"), py::arg("drafts"));
  m.def("equal_row_runs", &py_equal_row_runs, py::arg("p"), py::arg("q"));
  m.def("kseq_rho", &py_kseq_rho, py::arg("p"), py::arg("q"), py::arg("n"));
}

// The max-flow OTLP plans of one (p, q) row (otlp_plan.hpp), solved with the GIL released.
void bind_otlp_plans(py::module_& m) {
  py::class_<RelaxedPlan> relaxed(m, "RelaxedPlan");
  relaxed
      .def(py::init([](const Doubles& p, const Doubles& q, const std::string& kind, int n, const std::string& network) {
             const int V = static_cast<int>(p.shape(0));
             py::gil_scoped_release release;
             return new RelaxedPlan(p.data(), q.data(), V, parse_kind(kind), n, multidraft_bindings::parse_network(network));
           }),
           py::arg("p"), py::arg("q"), py::arg("kind"), py::arg("n"), py::arg("network"))
      .def_property_readonly("alpha", &RelaxedPlan::alpha);
  bind_plan_uses(relaxed);
  py::class_<SlacknessPlan> slackness(m, "SlacknessPlan");
  slackness
      .def(py::init([](const Doubles& p, const Doubles& q, const std::string& kind, int n) {
             const int V = static_cast<int>(p.shape(0));
             py::gil_scoped_release release;
             return new SlacknessPlan(p.data(), q.data(), V, parse_kind(kind), n);
           }),
           py::arg("p"), py::arg("q"), py::arg("kind"), py::arg("n"))
      .def_property_readonly("alpha", &SlacknessPlan::alpha);
  bind_plan_uses(slackness);
}

// GlobalResolutionPlan.diagnostics: the outer and inner systems' reports.
py::dict diagnostics(const GlobalResolutionPlan& plan) {
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
}

void bind_global_resolution_plan(py::module_& m) {
  py::class_<GlobalResolutionPlan> plan(m, "GlobalResolutionPlan");
  plan.def(py::init([](const Doubles& p, const Doubles& q, int n, double tau, int max_iterations, double max_terms,
                       bool paper_threshold, bool exact) {
             return multidraft_bindings::global_resolution_plan(
                 p, q, n, multidraft_bindings::global_resolution_options(tau, max_iterations, max_terms, paper_threshold, exact));
           }),
           py::arg("p"), py::arg("q"), py::arg("n"), py::arg("tau"), py::arg("max_iterations"), py::arg("max_terms"),
           py::arg("paper_threshold"), py::arg("exact") = true)
      .def_property_readonly("alpha", &GlobalResolutionPlan::alpha)
      .def_property_readonly("kept", &GlobalResolutionPlan::kept)
      .def_property_readonly("alpha_error_bound", &GlobalResolutionPlan::alpha_error_bound)
      .def_property_readonly("exact", &GlobalResolutionPlan::exact)
      .def_property_readonly("law_error_bound", &GlobalResolutionPlan::law_error_bound)
      .def_property_readonly("alpha_star", &GlobalResolutionPlan::alpha_star)
      .def_property_readonly("success", &GlobalResolutionPlan::success)
      .def_property_readonly("l1_bound", &GlobalResolutionPlan::l1_bound)
      .def_property_readonly("acceptance_bound", &GlobalResolutionPlan::acceptance_bound)
      .def_property_readonly("diagnostics", &diagnostics);
  bind_plan_uses(plan);
}

}  // namespace

void bind_rdk(py::module_& m);         // cpp/bindings/rdk.cpp ([OOV])
void bind_validation(py::module_& m);  // cpp/bindings/validation.cpp
void bind_testing(py::module_& m);     // cpp/bindings/testing.cpp (_core._testing)

PYBIND11_MODULE(_core, m) {
  m.doc() = "multidraft C++ core ([GR] optimal transport, single-draft verifiers, draft schemes)";
  m.attr("MAX_NETWORK_ARCS") = kMaxNetworkArcs;
  m.attr("MAX_THREADS") = ThreadPool::kMaxThreads;
  // Releases the GIL: shrinking waits for ending workers to finish the chunk they are running.
  m.def("set_num_threads", [](int k) { ThreadPool::global().set_threads(k); }, py::arg("k"),
        py::call_guard<py::gil_scoped_release>());
  m.def("get_num_threads", [] { return ThreadPool::global().threads(); });
  bind_verifier_calls(m);
  bind_scheme_calls(m);
  bind_otlp_plans(m);
  bind_global_resolution_plan(m);
  bind_rdk(m);
  bind_validation(m);
  bind_testing(m);
}
