// The plan concept and the registry of verifiers. Every verifier is (a draft scheme, a plan per
// (p, q) row). A plan is any class with
//   void transport(const int* drafts, double* out) const;  // the output law pi(. | drafts), V entries
// and optionally
//   int sample(const int* drafts, Rng& rng) const;          // one verified token, no law written
// (plan_sampling.hpp picks it when present); drafts are drawable (check_drawable) before either is
// called. Its draft law is the DraftScheme of the options' kind. A plan maker takes the rows as
// `const double*` (normalised rows) or as ScaledRow (distribution.hpp: the caller's rows read in
// place with their scales, no normalised copy); the batched calls hand each maker the rows it
// takes. A verifier is registered by one
// entry of with_verifier below: how heavy a row is, how its plan is built, and its exact
// acceptance. Adding a verifier is its header (the plan and the acceptance) plus that entry; the
// bindings and the Python classes dispatch by name.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>

#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/global_resolution/plan.hpp"
#include "multidraft/global_resolution/verifier.hpp"
#include "multidraft/baselines/khisti.hpp"
#include "multidraft/otlp/otlp_plan.hpp"
#include "multidraft/core/rng.hpp"
#include "multidraft/baselines/rrs.hpp"
#include "multidraft/baselines/single_draft.hpp"
#include "multidraft/baselines/spechub.hpp"
#include "multidraft/baselines/spectr.hpp"
#include "multidraft/baselines/topk.hpp"
#include "multidraft/otlp/subset_selection.hpp"

namespace multidraft {

// Everything a verifier may need besides the arrays.
struct VerifierOptions {
  SchemeKind kind = SchemeKind::iid;
  bool without_replacement = false;     // rrs
  int truncation = -1;                  // khisti
  double max_work = 1e8;                // exact acceptances that enumerate prefixes or tuples
  GlobalResolutionOptions global_resolution;
  bool fallback = false;                // global_resolution
};

// The cost of one (p, q) row: a pass or two over it (light), or a sort, a search or a max-flow
// (heavy, each row worth a thread).
enum class RowWork { light, heavy };

// A method's row costs: of building and using its plan (transport, verify), and of its exact
// acceptance, which may cost more (rrs without replacement sums over draft prefixes).
struct VerifierWork {
  VerifierWork(RowWork both) : plan(both), acceptance(both) {}  // NOLINT: most methods cost the same
  VerifierWork(RowWork plan_work, RowWork acceptance_work) : plan(plan_work), acceptance(acceptance_work) {}
  RowWork plan, acceptance;
};

// Plans of the single-pass verifiers (views of the caller's rows, read with their scales).
struct SpsPlan {
  ScaledRow p, q;
  int V;
  void transport(const int* drafts, double* out) const { sps_transport(p, q, V, drafts[0], out); }
  int sample(const int* drafts, Rng& rng) const { return sps_sample(p, q, V, drafts[0], rng); }
};
struct NaivePlan {
  ScaledRow p;
  int V;
  void transport(const int*, double* out) const { naive_transport(p, V, out); }
  int sample(const int*, Rng& rng) const {
    return sample_index_by(V, rng, [row = p](int i) { return row[i]; });  // by value, as in sps_sample
  }
};
struct RrsPlan {
  const double *p, *q;
  int V, n;
  bool without_replacement;
  void transport(const int* drafts, double* out) const { rrs_transport(p, q, V, drafts, n, without_replacement, out); }
};
struct KSequentialPlan {  // rho* searched once per (p, q) row
  KSequentialPlan(const double* p, const double* q, int V, int n) : p_(p), q_(q), V_(V), n_(n), k_(kseq_prepare(p, q, V, n)) {}
  void transport(const int* drafts, double* out) const { kseq_transport(k_, p_, q_, V_, drafts, n_, out); }
  const double *p_, *q_;
  int V_, n_;
  KSequential k_;
};
struct SpecHubPlan {  // residuals prepared once per (p, q) row
  SpecHubPlan(const double* p, const double* q, int V) : p_(p), q_(q), V_(V), hub_(spechub_prepare(p, q, V)) {}
  void transport(const int* drafts, double* out) const { spechub_transport(hub_, p_, q_, V_, drafts, out); }
  const double *p_, *q_;
  int V_;
  SpecHub hub_;
};

// The deterministic topk scheme goes with its own verifier and with the exact OTLP plans (optimal
// for any scheme); every other method's law assumes drafts drawn at random from q.
inline void check_scheme_of(const std::string& method, SchemeKind kind) {
  if (method == "maxflow" || method == "maxflow_cs" || (method == "topk") == (kind == SchemeKind::topk)) return;
  throw std::invalid_argument(method == "topk" ? "verifier 'topk' takes the 'topk' draft scheme only"
                                               : "verifier '" + method + "' does not take the deterministic 'topk' "
                                                 "draft scheme (its law needs drafts drawn at random from q): use "
                                                 "verifier 'topk' or 'otlp'");
}

// The registry: calls visit(work, make, acceptance) for `method`, where work is a VerifierWork,
//   make(p, q, V, n) -> std::unique_ptr<Plan>   builds the plan of one (p, q) row (rows as above), and
//   acceptance(p, q, V, n) -> double            is the method's exact expected acceptance.
// q is one row of V (or n rows for independent drafts); the options are those of the call.
template <class Visit>
decltype(auto) with_verifier(const std::string& method, const VerifierOptions& o, Visit visit) {
  using P = const double*;
  using S = const ScaledRow&;
  check_scheme_of(method, o.kind);
  auto naive_plan = [](S p, S, int V, int) { return std::make_unique<NaivePlan>(NaivePlan{p, V}); };
  if (method == "sps")
    return visit(VerifierWork(RowWork::light), [](S p, S q, int V, int) { return std::make_unique<SpsPlan>(SpsPlan{p, q, V}); },
                 [](P p, P q, int V, int) { return sps_acceptance(p, q, V); });
  if (method == "naive")
    return visit(RowWork::light, naive_plan, [](P p, P q, int V, int n) { return naive_acceptance(p, q, V, n); });
  if (method == "topk")  // naive rejection with the top-n drafts: the output law is p whatever the drafts
    return visit(RowWork::light, naive_plan, [](P p, P q, int V, int n) { return topk_acceptance(p, q, V, n); });
  if (method == "rrs")  // without replacement, the acceptance sums over draft prefixes
    return visit(VerifierWork(RowWork::light, o.without_replacement ? RowWork::heavy : RowWork::light),
                 [&](P p, P q, int V, int n) { return std::make_unique<RrsPlan>(RrsPlan{p, q, V, n, o.without_replacement}); },
                 [&](P p, P q, int V, int n) {
                   return o.without_replacement ? rrs_without_replacement_acceptance(p, q, V, n, o.max_work)
                                                : rrs_acceptance(p, q, V, n);
                 });
  if (method == "spectr")
    return visit(RowWork::heavy, [](P p, P q, int V, int n) { return std::make_unique<KSequentialPlan>(p, q, V, n); },
                 [](P p, P q, int V, int n) { return kseq_prepare(p, q, V, n).acceptance; });
  if (method == "spechub")
    return visit(RowWork::light, [](P p, P q, int V, int) { return std::make_unique<SpecHubPlan>(p, q, V); },
                 [](P p, P q, int V, int) { return spechub_acceptance(p, q, V); });
  if (method == "khisti")
    return visit(RowWork::heavy,
                 [&](P p, P q, int V, int n) { return std::make_unique<CanonicalDecomposition>(p, q, V, n, o.kind, o.truncation); },
                 [&](P p, P q, int V, int n) { return CanonicalDecomposition(p, q, V, n, o.kind, o.truncation).acceptance(o.max_work); });
  auto optimum = [&](P p, P q, int V, int n) { return optimal_subset(p, DraftScheme(o.kind, n, V, q)).alpha; };
  if (method == "maxflow")
    return visit(RowWork::heavy,
                 [&](P p, P q, int V, int n) { return std::make_unique<RelaxedPlan>(p, q, V, o.kind, n, NetworkKind::sets); },
                 optimum);
  if (method == "maxflow_cs")
    return visit(RowWork::heavy, [&](P p, P q, int V, int n) { return std::make_unique<SlacknessPlan>(p, q, V, o.kind, n); },
                 optimum);
  if (method == "global_resolution") {
    GlobalResolutionOptions to_verify = o.global_resolution;
    to_verify.acceptance = false;  // verify and transport read the law only
    auto make = [&o, to_verify](S p, S q, int V, int n) {
      return std::make_unique<GlobalResolutionVerifierPlan>(p, q, V, n, to_verify, o.fallback);
    };
    return visit(RowWork::heavy, make, [&o](P p, P q, int V, int n) {
      return GlobalResolutionVerifierPlan({p}, {q}, V, n, o.global_resolution, o.fallback).alpha();
    });
  }
  throw std::invalid_argument("internal: unknown verifier method '" + method + "'");
}

}  // namespace multidraft
