// _core._testing: switches and probes that only tests use, kept out of the public module: the
// grouped objective's derivatives at a point, the stored single terms, the vectorised kernels
// (radix sort, draft support, logs), and Global Resolution plans with the implicit (unshifted)
// terms or the interpolated sums turned off, to compare the fast paths with enumeration.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "options.hpp"
#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/detail/radix_sort.hpp"
#include "multidraft/global_resolution/plan.hpp"
#include "multidraft/detail/sum_kernels.hpp"  // logs_with_range

namespace py = pybind11;
using namespace multidraft;

namespace {

using multidraft_bindings::Doubles;
using multidraft_bindings::Ints;

// Gradient, Hessian diagonal, accepted mass and a Hessian-vector product of one grouped objective
// (the ConvexObjective of global_resolution/plan.hpp) at a point a, with or without interpolated
// sums (`coarse`: LaplaceSums' rule for Newton iterates). With level_aim (inner problem on the
// grid) the point first moves to the level whose rejected mass is level_aim
// (LaplaceInterpolation::Level), within 1e-9 of it.
py::dict objective_derivatives(const Doubles& q, int n, std::vector<double> bases, bool slack, const Doubles& a,
                               const Doubles& v, bool interpolation, double max_terms, bool coarse,
                               const std::string& grid, double level_aim) {
  const int size = static_cast<int>(q.shape(0));
  if (a.shape(0) != size || v.shape(0) != size) throw std::invalid_argument("'q', 'a' and 'v' must have one length");
  if (n < 1 || n > kMaxTermSize || bases.empty()) throw std::invalid_argument("bad 'n' or 'bases'");
  Eigen::VectorXd gradient, product;
  Curvature curvature;
  LaplaceInterpolation::Level level;
  level.aim = level_aim, level.tolerance = 1e-9 * level_aim, level.low = -30.0, level.high = 30.0;
  const bool leveled = std::isfinite(level_aim);
  if (leveled && !(level_aim > 0.0)) throw std::invalid_argument("'level_aim' must be positive");
  {
    py::gil_scoped_release release;
    ConvexObjective objective;
    objective.slack = slack;
    objective.interpolation = interpolation;
    objective.grid = multidraft_bindings::grid_use(grid);
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
}

// write_single_terms (global_resolution/objective.hpp): the stored singles' members and their weights,
// one row per base, against the closed form (b + q_u)^n - b^n in tests.
auto single_terms(const Doubles& q, int n, const std::vector<double>& bases) {
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
}

Ints int64_array(const std::vector<int>& values) {
  return Ints(static_cast<py::ssize_t>(values.size()), std::vector<std::int64_t>(values.begin(), values.end()).data());
}

// The vectorised kernels, against NumPy in tests: positions_by_key (radix_sort.hpp) against a
// stable argsort, draft_support (draft_scheme.hpp: the tokens with q > 0 by 64-token masks)
// against np.flatnonzero, logs_with_range (detail/sum_kernels.hpp: vectorised log(c + x) and the
// range) against np.log.
void bind_kernels(py::module_& t) {
  t.def(
      "positions_by_key",
      [](const py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>& keys) {
        const std::uint64_t* k = keys.data();
        return int64_array(positions_by_key(static_cast<int>(keys.size()), [k](int j) { return k[j]; }));
      },
      py::arg("keys"));
  t.def(
      "draft_support", [](const Doubles& q) { return int64_array(draft_support(q.data(), static_cast<int>(q.shape(0)))); },
      py::arg("q"));
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
}

// A Global Resolution plan with every option, the test-only ones included.
void bind_global_resolution_plan(py::module_& t) {
  t.def(
      "global_resolution_plan",
      [](const Doubles& p, const Doubles& q, int n, double tau, int max_iterations, double max_terms,
         bool paper_threshold, bool exact, double unshifted_limit, bool interpolation, const std::string& grid,
         double acceptance_enumeration) {
        GlobalResolutionOptions options = multidraft_bindings::global_resolution_options(
            tau, max_iterations, max_terms, paper_threshold, exact, unshifted_limit, interpolation,
            multidraft_bindings::grid_use(grid));
        options.acceptance_enumeration = acceptance_enumeration;
        return multidraft_bindings::global_resolution_plan(p, q, n, options);
      },
      py::arg("p"), py::arg("q"), py::arg("n"), py::arg("tau"), py::arg("max_iterations"), py::arg("max_terms"),
      py::arg("paper_threshold"), py::arg("exact") = true, py::arg("unshifted_limit") = kUnshiftedLimit,
      py::arg("interpolation") = true, py::arg("grid") = "where_pays",
      py::arg("acceptance_enumeration") = kAcceptanceEnumeration, py::return_value_policy::take_ownership);
}

}  // namespace

void bind_testing(py::module_& m) {
  py::module_ t = m.def_submodule("_testing", "Test hooks of the multidraft core (not a public API)");
  t.def("objective_derivatives", &objective_derivatives, py::arg("q"), py::arg("n"), py::arg("bases"), py::arg("slack"),
        py::arg("a"), py::arg("v"), py::arg("interpolation"), py::arg("max_terms") = 1e12, py::arg("coarse") = false,
        py::arg("grid") = "where_pays", py::arg("level_aim") = std::numeric_limits<double>::quiet_NaN());
  t.def("single_terms", &single_terms, py::arg("q"), py::arg("n"), py::arg("bases"));
  bind_kernels(t);
  bind_global_resolution_plan(t);
}
