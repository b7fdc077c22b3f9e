// The working storage of one Global Resolution plan build, kept per thread from plan to plan.
//
// Why per thread: a plan is built once per (p, q) row and then shared, read-only, by any thread
// (the batched calls build plans on a pool with Python's GIL released), so a build may not write
// into anything shared; yet its buffers are large (a full vocabulary: ~32000 entries each, the
// grouped terms tens of MB) and the same size from one plan to the next. Allocating them per plan
// would fault in and value-initialise fresh pages every time, so each thread keeps one workspace
// whose buffers only grow (`resize` to at least the size needed, never shrunk). Results never
// depend on what a buffer held before: every entry a step reads it wrote first.
//
// The workspace is looked up once per build (of_this_thread, the one thread_local) and passed by
// reference to the steps. A step that loops in a lambda binds references to the buffers outside
// it: a thread_local named inside a lambda may be looked up (a TLS access) at every use.
#pragma once
#include <vector>

#include "multidraft/global_resolution/objective.hpp"
#include "multidraft/global_resolution/partner_mean_field.hpp"

namespace multidraft {

// One convex system's storage, reused from one solve to the next (the Newton minimiser's).
struct ConvexWorkspace {
  ConvexObjective objective;
  Curvature curvature, trial_curvature;
  std::vector<double> product_scratch;  // ConvexObjective::hessian_times' working rows
};

// An entry that may leave a truncation set: its draft mass and index (minimal_truncation).
struct TruncationCandidate {
  double mass;
  int j;
  bool operator<(const TruncationCandidate& other) const {  // leaving order: lighter first, then later first
    return mass < other.mass || (mass == other.mass && j > other.j);
  }
};

// minimal_truncation's buffers (up to a vocabulary each).
struct TruncationWorkspace {
  std::vector<TruncationCandidate> candidates;
  std::vector<double> prefix;
  std::vector<int> order;
  std::vector<char> leaves;
};

// A system's solution at one support position: its alpha and its allocated row.
struct SolvedToken {
  double alpha, row;
};

struct GlobalResolutionWorkspace {
  // The plan's two systems (0: outer, 1: inner) each keep their own convex and truncation
  // storage, since their sizes differ a hundredfold (flat V = 32000: ~300 and ~32000 members):
  // one shared set would shrink and regrow (value-initialise) its buffers every plan.
  static constexpr int kOuter = 0, kInner = 1;
  ConvexWorkspace systems[2];
  TruncationWorkspace truncation[2];
  // Both systems' solutions by support position (GlobalResolutionPlan's assembly): which
  // positions are in a truncation set T, and their solutions.
  std::vector<char> in_T;
  std::vector<SolvedToken> solved;
  // The inner warm start's odds o_i (-1: not coverable) and mean-field odds o'_i (1 + k s).
  std::vector<double> odds, levels;
  PartnerMeanField partners;  // the inner warm start's rounds (partner_mean_field.hpp)

  // This thread's workspace (the only thread_local of a build).
  static GlobalResolutionWorkspace& of_this_thread() {
    thread_local GlobalResolutionWorkspace workspace;
    return workspace;
  }
};

}  // namespace multidraft
