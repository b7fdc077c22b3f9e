// The one converter of Python's option values to the core's: the strings that name a draft
// scheme, a network or a grid use, and the keywords of VerifierOptions and of a Global Resolution
// plan (the VerifierOptions class, the GlobalResolutionPlan class and the test hooks all build
// their GlobalResolutionOptions here), and the Global Resolution plan such options describe.
#pragma once
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

#include "arrays.hpp"
#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/global_resolution/plan.hpp"
#include "multidraft/otlp/otlp_plan.hpp"
#include "multidraft/registry/verifier_registry.hpp"

namespace multidraft_bindings {

inline multidraft::SchemeKind parse_kind(const std::string& kind) {
  using multidraft::SchemeKind;
  if (kind == "iid") return SchemeKind::iid;
  if (kind == "without_replacement") return SchemeKind::without_replacement;
  if (kind == "independent") return SchemeKind::independent;
  if (kind == "hub") return SchemeKind::hub;
  if (kind == "topk") return SchemeKind::topk;
  throw std::invalid_argument("unknown draft scheme '" + kind + "'");
}

inline multidraft::NetworkKind parse_network(const std::string& network) {
  if (network == "sets") return multidraft::NetworkKind::sets;
  if (network == "tuples") return multidraft::NetworkKind::tuples;
  throw std::invalid_argument("'network' must be 'sets' or 'tuples', got '" + network + "'");
}

// The test hooks' name for a GridUse.
inline multidraft::GridUse grid_use(const std::string& name) {
  using multidraft::GridUse;
  if (name == "never") return GridUse::kNever;
  if (name == "always") return GridUse::kAlways;
  if (name == "where_pays") return GridUse::kWherePays;
  throw std::invalid_argument("'grid' must be 'never', 'where_pays' or 'always', got '" + name + "'");
}

// A Global Resolution plan's keywords; the last three only tests set.
inline multidraft::GlobalResolutionOptions global_resolution_options(
    double tau, int max_iterations, double max_terms, bool paper_threshold, bool exact,
    double unshifted_limit = multidraft::kUnshiftedLimit, bool interpolation = true,
    multidraft::GridUse grid = multidraft::GridUse::kWherePays) {
  multidraft::GlobalResolutionOptions o;
  o.tau = tau;
  o.max_iterations = max_iterations;
  o.max_terms = max_terms;
  o.paper_threshold = paper_threshold;
  o.unshifted_limit = unshifted_limit;
  o.interpolation = interpolation;
  o.exact = exact;
  o.grid = grid;
  return o;
}

// The keywords of _core.VerifierOptions.
inline multidraft::VerifierOptions verifier_options(const std::string& kind, bool without_replacement, int truncation,
                                                    double max_work, double tau, int max_iterations, double max_terms,
                                                    bool paper_threshold, bool exact, bool fallback) {
  multidraft::VerifierOptions o;
  o.kind = parse_kind(kind);
  o.without_replacement = without_replacement;
  o.truncation = truncation;
  o.max_work = max_work;
  o.global_resolution = global_resolution_options(tau, max_iterations, max_terms, paper_threshold, exact);
  o.fallback = fallback;
  return o;
}

// A Global Resolution plan for p (V,), q (V,), solved with the GIL released; Python owns it.
inline multidraft::GlobalResolutionPlan* global_resolution_plan(const Doubles& p, const Doubles& q, int n,
                                                                const multidraft::GlobalResolutionOptions& options) {
  const int V = static_cast<int>(p.shape(0));
  py::gil_scoped_release release;
  return new multidraft::GlobalResolutionPlan(p.data(), q.data(), V, n, options);
}

}  // namespace multidraft_bindings
