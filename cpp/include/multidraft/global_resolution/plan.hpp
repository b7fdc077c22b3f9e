// Global Resolution ([GR] Section 6, Algorithm 1, Appendices G to L): the optimal
// multi-draft transport for n i.i.d. drafts without an exponential LP. GlobalResolutionPlan::build
// follows Algorithm 1:
//   steps 1-2  H* by the ratio scan (Section 5.1) and the outer row targets p_i by the polymatroid
//              greedy (Theorem 6.2; IidSplit);
//   steps 7, 4 the truncation sets T (outer: T ⊆ V \ H*, which line 7 misprints as T ⊆ H*;
//              inner: T ⊆ H*) chosen minimal by decreasing q so that eps_T <= tau (Eq. 13) and
//              gamma_T <= tau (Eq. 16);
//   steps 8, 5 the convex problems Phi_T (Eq. 12, Theorem 6.4) and Theta_T (Eq. 15, Theorem 6.5)
//              minimised by damped Newton (newton.hpp) until ||grad||_1 <= 5 tau - 3 eps_T (resp.
//              gamma_T): a corrected stopping rule, which makes each system's row deviation <= 5 tau
//              and so the Lemma 6.6 bounds 15 tau / 10 tau hold (Algorithm 1's 5 tau threshold only
//              gives 24 tau; kept as `paper_threshold`; docs/design/certified-bounds.md);
//   steps 9, 6 the slice of Eq. (18), normalised (p_draft of the tuple cancels).
// T and the solutions depend on (p, q, n, tau) only, never on the drafts: every tuple's slice
// then comes from one approximate C, as Lemma 6.6 needs.
//
// That plan ("raw", options.exact = false) is within L1 15 tau of p (Lemma 6.6), not exact. The
// default plan is made exactly lossless at its output (not in [GR]; output_correction.hpp,
// docs/design/output-correction.md): its candidate law r is known exactly because
//   - a tuple whose outer part lies in the outer T, or an inner tuple in (T ∪ Z)^n, proposes the
//     Eq. (18) softmax of its tokens; summed over those tuples that is exactly what the convex
//     system allocates, (target + gradient) at the solution;
//   - every other tuple (the truncated ones, of mass eps_T resp. gamma_T) proposes its first
//     draft outside T, whose law is closed form: for an outer token y outside T,
//     r(y) = q(y) sum_{k<n} (Q - Q_R)^k Q^{n-1-k} (the first k draws miss R, the outer tokens
//     outside T; Q = sum q), and for an inner one r(y) = q(y) sum_{k<n} (Q_H - Q_Ri)^k Q_H^{n-1-k};
//   - the inner slack (the Eq. (18) rejection) proposes nothing.
// Then the candidate is kept with probability min(1, p / r), else the output is drawn from
// (p - r)^+. The plan's acceptance alpha() is P(output in drafts): the kept mass
// kept() = sum min(r, p) plus the residual draws that land on a draft (draft_acceptance.hpp).
// kept <= alpha <= alpha*, and 0 <= alpha* - kept <= ||g_outer||_1 + ||g_inner||_1 + eps_T + gamma_T
// <= acceptance_bound(): alpha* = 1 - Q_H^n + P(H*), the candidate mass is
// 1 - Q_H^n + P(T_i) + sum g_inner + gamma_T, the kept mass loses sum (r - p)^+ of it, which on
// the outer T is at most sum g^+ (r = p_i + g <= p + g), on the outer rest at most eps_T, and on
// the inner tokens outside T, together with P(those tokens) <= gamma_T (feasibility of H*),
// leaves at most gamma_T. A system whose gradient is unknown (refused by the work budget at its
// start) gets an empty T: every one of its tuples proposes its first draft, still exact.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "multidraft/global_resolution/sums/chebyshev_pieces.hpp"  // logs_with_range
#include "multidraft/global_resolution/newton.hpp"
#include "multidraft/global_resolution/objective.hpp"
#include "multidraft/global_resolution/workspace.hpp"
#include "multidraft/core/draft_scheme.hpp"
#include "multidraft/detail/gr_kernels.hpp"
#include "multidraft/otlp/network_builders.hpp"
#include "multidraft/global_resolution/output_correction.hpp"
#include "multidraft/global_resolution/draft_acceptance.hpp"
#include "multidraft/global_resolution/partner_mean_field.hpp"
#include "multidraft/otlp/polymatroid.hpp"
#include "multidraft/detail/radix_sort.hpp"
#include "multidraft/core/rng.hpp"

namespace multidraft {


struct GlobalResolutionOptions {
  double tau = 1e-3;
  int max_iterations = 50;
  double max_terms = 2.0e6;  // grouped terms a pass may enumerate (interpolated ones are free), not a cap on |T|
  bool paper_threshold = false;  // Algorithm 1's ||grad||_1 <= 5 tau instead of 5 tau - 3 eps_T
  double unshifted_limit = kUnshiftedLimit;  // see ConvexObjective; tests set 0 to force the shifted path
  bool interpolation = true;  // see ConvexObjective; tests turn it off to compare with enumeration
  bool exact = true;  // output correction (exactly lossless); false: the raw [GR] plan
  GridUse grid = GridUse::kWherePays;  // see ConvexObjective; tests compare the summations
  double acceptance_enumeration = kAcceptanceEnumeration;  // draft_acceptance.hpp; tests lower it to bound
  bool acceptance = true;  // compute alpha() of the exact plan; plans built only to verify skip it (NaN)
};

// Diagnostics of one convex system (outer or inner).
struct SystemReport {
  int truncation_size = 0;     // |T|
  double terms = 0;            // grouped LogSumExp terms
  double truncation_error = 0; // eps_T (outer) or gamma_T (inner)
  double gradient_l1 = 0;      // achieved ||grad||_1
  double threshold = 0;        // stopping threshold used
  int iterations = 0;
  bool converged = true;
  bool within_budget = true;
  bool interpolated = false;  // terms summed, not enumerated (pair_sums.hpp, laplace_sums.hpp)
  bool rows_known = false;  // the allocated rows (target + gradient) at the solution are known
  double row_error = 0.0;   // L1 error bound of those rows (interpolated sums; 0 when enumerated)
  // Row deviation bound of Theorems 6.4 / 6.5: ||grad||_1 + 3 * truncation error.
  double deviation_bound() const { return gradient_l1 + 3.0 * truncation_error; }
};


// The truncation error of leaving the draft mass R (`leftover`) out of a block of draft mass
// `block`: block^n - (block - R)^n, eps_T of Eq. (13) or gamma_T of Eq. (16); and `cap`, the R at
// which it reaches tau (closed form, enlarged by 1e-9 for rounding).
struct TruncationError {
  double block, block_n;
  int n;
  double cap;
  TruncationError(double block_mass, int draws, double tau)
      : block(block_mass),
        block_n(integer_power(block_mass, draws)),
        n(draws),
        cap(tau >= block_n ? std::numeric_limits<double>::infinity()
                           : -block * std::expm1(std::log1p(-tau / block_n) / n) * (1.0 + 1e-9)) {}
  // block^n (1 - (1 - R/block)^n), by expm1/log1p: exact for tiny R
  double operator()(double leftover) const {
    return block > 0.0 ? -block_n * std::expm1(n * std::log1p(-std::min(leftover / block, 1.0))) : 0.0;
  }
};

// The entries that may leave (mass at most `cap`), by decreasing j, into `candidates`; returns
// their count.
template <class Mass>
int gather_truncation_candidates(int count, Mass mass, double cap, std::vector<TruncationCandidate>& candidates) {
  candidates.resize(count);
  int size = 0;  // written unconditionally: a branch per entry would be a coin flip
  for (int j = count - 1; j >= 0; --j) {
    const double x = mass(j);
    candidates[size] = {x, j};
    size += x <= cap;
  }
  candidates.resize(size);
  return size;
}

// The leaving prefix of entries already in leaving order (entry(k), k < available): entries
// [0, k) leave, k the largest with error_of(their mass) <= tau (the error grows with k), found by
// bisection on prefix sums. Marks them in buffers.leaves; `error`: the error of their mass.
template <class InOrder>
int leave_prefix(InOrder entry, int available, const TruncationError& error_of, double tau,
                 TruncationWorkspace& buffers, double& error) {
  std::vector<double>& prefix = buffers.prefix;
  std::vector<char>& leaves = buffers.leaves;
  prefix.resize(available + 1);
  prefix[0] = 0.0;
  for (int k = 0; k < available; ++k) prefix[k + 1] = prefix[k] + entry(k).mass;
  int low = 0, high = available;  // error_of(prefix[0]) = 0 <= tau
  while (low < high) {
    const int middle = high - (high - low) / 2;
    if (error_of(prefix[middle]) <= tau)
      low = middle;
    else
      high = middle - 1;
  }
  error = error_of(prefix[low]);
  for (int k = 0; k < low; ++k) leaves[entry(k).j] = 1;
  return low;
}

// The leaving prefix among every candidate (the first `size`, by decreasing j): buckets of the
// 11 leading varying bits of the masses' keys (increasing_key: the keys agree above them, so the
// buckets follow the leaving order); the narrowed candidates are the buckets up to the first whose
// cumulative mass passes R_cap by a margin (1e-6) far above the sums' rounding (size * 2^-53);
// they are radix sorted.
inline int leave_narrowed_and_sorted(int size, const TruncationError& error_of, double tau,
                                     TruncationWorkspace& buffers, double& error) {
  std::vector<TruncationCandidate>& candidates = buffers.candidates;
  const double cap = error_of.cap;
  constexpr int kBucketBits = 11, kBuckets = 1 << kBucketBits;
  std::uint64_t varying = 0;
  const std::uint64_t first = increasing_key(candidates[0].mass);
  for (const TruncationCandidate& c : candidates) varying |= increasing_key(c.mass) ^ first;
  int shift = 0;
  while ((varying >> shift) >= static_cast<std::uint64_t>(kBuckets)) ++shift;
  auto bucket = [&](const TruncationCandidate& c) {
    return static_cast<int>((increasing_key(c.mass) >> shift) & (kBuckets - 1));
  };
  double bucket_mass[kBuckets] = {};
  for (const TruncationCandidate& c : candidates) bucket_mass[bucket(c)] += c.mass;
  int last = kBuckets - 1;
  double cumulative = 0.0;
  for (int b = 0; b < kBuckets; ++b)
    if ((cumulative += bucket_mass[b]) > cap * (1.0 + 1e-6)) {
      last = b;
      break;
    }
  int narrowed = 0;  // in place, in the candidates' order: the sort below stays the same stable sort
  for (int c = 0; c < size; ++c) {
    candidates[narrowed] = candidates[c];
    narrowed += bucket(candidates[c]) <= last;
  }
  std::vector<int>& order = buffers.order;
  positions_by_key(narrowed, [&](int c) { return increasing_key(candidates[c].mass); }, order);
  return leave_prefix([&](int k) -> const TruncationCandidate& { return candidates[order[k]]; }, narrowed, error_of,
                      tau, buffers, error);
}

// The entries j < count that do not leave, increasing.
inline std::vector<int> kept_entries(int count, int leaving, const std::vector<char>& leaves) {
  std::vector<int> kept(count - leaving + 1);  // one spare slot: written unconditionally, as gather
  int written = 0;
  for (int j = 0; j < count; ++j) {
    kept[written] = j;
    written += !leaves[j];
  }
  kept.resize(written);
  return kept;
}

// The truncation set T ([GR] Algorithm 1, steps 4 and 7: a minimal T) among entries j < count of
// draft mass mass(j) >= 0: the fewest entries, by decreasing mass, whose leftover mass R (that of
// the others) gives a truncation error block^n - (block - R)^n <= tau, block being the draft mass
// the error refers to. That is, all entries but the most of the smallest (ties: later entries
// leave first) whose mass sum passes. Only entries of mass at most R_cap, where the error reaches
// tau, can leave. Two regimes: a flat top-k draft keeps ~1000 tokens with hundreds below R_cap, of
// which a handful leave: the kFewLeave lightest are selected, and the cut found among them (when
// they all leave, every candidate as below). Over a full vocabulary tens of thousands are
// candidates: they are first narrowed to the lightest ones whose total mass passes R_cap (the
// leaving entries are among them: any heavier entry follows all of them in the order, so the
// prefix through it passes R_cap), found from mass sums per bucket of the leading key bits; those
// are radix sorted. A peaked draft leaves most candidates, a flat one a few hundred of ~32000. The
// cut is found by bisection over prefix sums (a few transcendental calls, not one per entry), the
// sums of the entries in leaving order whichever path orders them: the same numbers. `buffers`:
// this system's part of the per-thread workspace (up to a vocabulary each).
// Returns the kept entries by increasing j; `error` is the error of their leftover.
template <class Mass>
std::vector<int> minimal_truncation(int count, Mass mass, double block, int n, double tau,
                                    TruncationWorkspace& buffers, double& error) {
  const TruncationError error_of(block, n, tau);
  std::vector<TruncationCandidate>& candidates = buffers.candidates;
  const int size = gather_truncation_candidates(count, mass, error_of.cap, candidates);
  buffers.leaves.assign(count, 0);
  error = 0.0;
  constexpr int kFewLeave = 16, kSelectUpTo = 4096;
  auto in_order = [&](int k) -> const TruncationCandidate& { return candidates[k]; };
  int leaving = 0;
  if (size > kSelectUpTo) {
    leaving = leave_narrowed_and_sorted(size, error_of, tau, buffers, error);
  } else if (size <= kFewLeave) {
    std::sort(candidates.begin(), candidates.end());
    leaving = leave_prefix(in_order, size, error_of, tau, buffers, error);
  } else {
    std::nth_element(candidates.begin(), candidates.begin() + (kFewLeave - 1), candidates.end());
    std::sort(candidates.begin(), candidates.begin() + kFewLeave);
    leaving = leave_prefix(in_order, kFewLeave, error_of, tau, buffers, error);
    if (leaving == kFewLeave) {  // they all leave: every candidate again, in order
      gather_truncation_candidates(count, mass, error_of.cap, candidates);
      leaving = leave_narrowed_and_sorted(size, error_of, tau, buffers, error);
    }
  }
  return kept_entries(count, leaving, buffers.leaves);
}

class GlobalResolutionPlan {
 public:
  // Normalised rows. The plan keeps a copy of p, which its output correction reads when it
  // samples; the plans of a batched call read the caller's rows in place instead (below).
  GlobalResolutionPlan(const double* p, const double* q, int V, int n, const GlobalResolutionOptions& options)
      : V_(V), n_(n), options_(options), own_p_(p, p + V) {
    build(ScaledRow{own_p_.data()}, ScaledRow{q});
  }

  // Rows read in place with their scales (distribution.hpp); p must outlive the plan.
  GlobalResolutionPlan(const ScaledRow& p, const ScaledRow& q, int V, int n, const GlobalResolutionOptions& options)
      : V_(V), n_(n), options_(options) {
    build(p, q);
  }

  GlobalResolutionPlan(const GlobalResolutionPlan&) = delete;  // the correction views own_p_
  GlobalResolutionPlan& operator=(const GlobalResolutionPlan&) = delete;


 private:
  // [GR] Algorithm 1, every step of it that does not depend on the drafts (the header).
  void build(const ScaledRow& p, const ScaledRow& q) {
    check_options();
    GlobalResolutionWorkspace& workspace = GlobalResolutionWorkspace::of_this_thread();
    // Steps 1-2: H* by the ratio scan and the outer row targets p_i (Theorem 6.2).
    IidSplit split(p, q, V_, n_, !options_.exact);  // the exact plan builds its own residual
    alpha_star_ = split.subset.alpha;
    // Steps 7-8: the outer system (tuples with a token outside H*).
    const TruncatedSystem outer_system = outer_truncation_set(split, workspace);
    const SystemSolution outer = solve_outer_system(outer_system, split.draft_mass_H, workspace);
    // Steps 4-5: the inner system (tuples inside H*).
    double mass_Z = 0.0;
    TruncatedSystem inner_system = classify_support(split, mass_Z);
    inner_truncation_set(inner_system, split.draft_mass_H, workspace);
    double inner_acceptance = 0.0;
    const SystemSolution inner =
        solve_inner_system(inner_system, split.draft_mass_H, mass_Z, workspace, inner_acceptance);
    // Steps 9 and 6: the slices of Eq. (18), raw or with the exact output correction.
    if (!options_.exact)
      assemble_raw_plan(split, outer_system, outer, inner_system, inner, inner_acceptance, workspace);
    else
      assemble_exact_plan(p, q, split, outer_system, outer, inner_system, inner, mass_Z, workspace);
  }

 public:
  // The acceptance P(output in drafts), exact (float64; within alpha_error_bound(), 0 unless the
  // exact plan's subsets inside T were too many to enumerate: draft_acceptance.hpp).
  double alpha() const { return alpha_; }
  double alpha_error_bound() const { return alpha_error_bound_; }
  // The probability that the proposal is kept: sum_y min(r(y), p(y)) for the exact plan (a
  // rejected proposal may still output a draft through the residual), the Eq. (18) accepted mass
  // for the raw plan.
  double kept() const { return kept_; }
  double alpha_star() const { return alpha_star_; }
  bool exact() const { return options_.exact; }
  // Exact plan: an L1 bound on the output law's distance from p beyond float rounding, twice the
  // interpolated sums' certified error in the rows (0 when every sum was enumerated).
  double law_error_bound() const { return law_error_bound_; }
  const SystemReport& outer_report() const { return outer_; }
  const SystemReport& inner_report() const { return inner_; }
  // The Lemma 6.6 guarantees were met: L1 <= 15 tau and acceptance within 10 tau (the corrected
  // stopping rule implies both; with the paper's threshold they are checked, not assumed). For
  // the exact plan the L1 error is 0 and alpha* - alpha <= acceptance_bound() (see the header).
  bool success() const {
    return outer_.within_budget && inner_.within_budget && l1_bound() <= 15.0 * options_.tau &&
           acceptance_bound() <= 10.0 * options_.tau;
  }
  // Lemma 6.6 with a = outer, b = inner row deviation bounds: output L1 error <= a + 2b,
  // acceptance error <= a + b.
  double l1_bound() const { return outer_.deviation_bound() + 2.0 * inner_.deviation_bound(); }
  double acceptance_bound() const { return outer_.deviation_bound() + inner_.deviation_bound(); }

  // transport and sample refuse tuples with a draft of q = 0 (check_drawable's i.i.d. check: the
  // plan keeps no q, its token classes tell the draft support).
  void transport(const int* drafts, double* out) const {
    check_drafts(drafts);
    if (options_.exact) {
      correction_.write_law(candidates(drafts), out);
      return;
    }
    raw_transport(drafts, out);
  }

  // One verified token: no V-long work for the exact plan unless the candidate is rejected.
  int sample(const int* drafts, Rng& rng) const {
    check_drafts(drafts);
    if (options_.exact) return correction_.sample(candidates(drafts), rng);
    std::vector<double> law(V_);
    raw_transport(drafts, law.data());
    return sample_index(law.data(), V_, rng);
  }

 private:
  // Inner warm start (not in [GR]: docs/design/warm-starts.md), with a mean-field level. Token i's
  // terms hold the tuples that contain it, of mass m_i = Q^n - (Q - q_i)^n (Q = Q(T ∪ Z)). If each
  // of them gave i the share x_i / (1 + x_i + E_i), E_i the worth of its partners, the target would
  // be met at x_i = o_i (1 + E_i), o_i = p(i) / (m_i - p(i)). The other n - 1 draws are worth
  // sum_{j != i} q_j x_j / Q each: E_i = k (s - q_i x_i) with k = (n - 1) / Q, s = sum_j q_j x_j.
  // Solving for x_i: x_i = o'_i (1 + k s), o'_i = o_i / (1 + k o_i q_i), and summing q_i x_i:
  // 1 + k s = 1 / (1 - S), S = k sum_i q_i o'_i. (E_i = 0, each token as if alone, misses flat
  // inputs by the factor 1 / (1 - S), a Newton iteration; leaving i out of its own partners keeps
  // a dominant token's start finite.) When S >= 1 the mean field has no finite level: 1 + k s = 1,
  // and ConvexObjective::level_shift takes over. Clamped to [-30, 30]; tokens whose m_i cannot
  // cover p(i) start 5 above the others (at 30, a barely uncovered token of a flat input sent
  // Newton's iterates on a long crawl along it before the cold restart). The outer problem's
  // shares are x_i / X_U (no slack): the target is met at x_i = o_i E_i with the same mean-field
  // E_i for every token, which its gauge absorbs: x_i = o_i (k = 0); its starts save Newton
  // iterations (docs/benchmarks/global-resolution-internals.md, "Warm starts"). An inner system of
  // kPartnerStartFrom members or more then takes rounds of PartnerMeanField (the law of the
  // partners' worth instead of its mean; `aim`: the rejected mass to leave,
  // ConvexObjective::level_aim), a few passes over the members against a Newton step of the solve,
  // which bring the start near the threshold, where one step ends the solve (kCertifyAhead in
  // newton.hpp).
  // PartnerMeanField's start: from this many members (below, a grid pass costs little more than
  // its rounds), on flat drafts, where two draws coincide with probability at most kFlatCollisions
  // (peaked drafts' tuples draw a heavy member twice, which the model leaves out, and their starts
  // got worse).
  static constexpr int kPartnerStartFrom = 2000;
  static constexpr double kFlatCollisions = 0.05;
  // Branch-free loops over every member (full vocabularies: ~32000); the first vectorises with n a
  // compile-time constant (n <= 4). The odds live in the per-thread workspace, whose buffers only
  // grow. The loops that round stay here: moved into detail/gr_kernels.hpp they compiled to other
  // vector code, which changed the last bits of the starts.
  Eigen::VectorXd warm_start(const std::vector<double>& member_mass, double base, const std::vector<double>& targets,
                             bool slack, double aim, GlobalResolutionWorkspace& workspace) const {
    const int m = static_cast<int>(member_mass.size());
    Eigen::VectorXd start(m);  // every entry written below
    double Q = base;
#pragma omp simd reduction(+ : Q)
    for (int i = 0; i < m; ++i) Q += member_mass[i];
    const double k = slack ? (n_ - 1) / Q : 0.0;
    std::vector<double>& odds = workspace.odds;  // o_i; -1: not coverable
    if (odds.size() < static_cast<std::size_t>(m)) odds.resize(m);
    const double* __restrict mass = member_mass.data();
    const double* __restrict target = targets.data();
    double* __restrict o = odds.data();
    const double whole = integer_power(Q, n_);
    double S = 0.0, collisions = 0.0;  // sum q_i^2: two draws of one member, with probability collisions / Q^2
    auto scan = [&](auto size) {  // size: n as a compile-time constant (the loop vectorises), or 0
      constexpr int kSize = decltype(size)::value;
#pragma omp simd reduction(+ : S, collisions)
      for (int i = 0; i < m; ++i) {
        collisions += mass[i] * mass[i];
        const double rest = std::max(Q - mass[i], 0.0);
        double without = kSize ? 1.0 : integer_power(rest, n_);
        for (int j = 0; j < kSize; ++j) without *= rest;
        const double containing = whole - without;
        const bool coverable = containing > target[i];
        const double alone = target[i] / (coverable ? containing - target[i] : 1.0);
        o[i] = coverable ? alone : -1.0;
        S += coverable ? k * mass[i] * alone / (1.0 + k * alone * mass[i]) : 0.0;  // k q_i o'_i
      }
    };
    switch (n_) {
      case 2: scan(std::integral_constant<int, 2>{}); break;
      case 3: scan(std::integral_constant<int, 3>{}); break;
      case 4: scan(std::integral_constant<int, 4>{}); break;
      default: scan(std::integral_constant<int, 0>{});
    }
    const double level = S < 1.0 ? 1.0 / (1.0 - S) : 1.0;  // 1 + k s
    // The logs by logs_with_range (log_positive, within a few ulps of std::log), in a loop that
    // vectorises: a std::log call per member costs several times more. Of at least 1e-300:
    // clamped to -30 anyway.
    std::vector<double>& levels = workspace.levels;  // grows only, as odds
    if (levels.size() < static_cast<std::size_t>(m)) levels.resize(m);
    double* __restrict odds_level = levels.data();
#pragma omp simd
    for (int i = 0; i < m; ++i) odds_level[i] = std::max(o[i] / (1.0 + k * o[i] * mass[i]) * level, 1e-300);  // o'_i
    double* __restrict a = start.data();
    double low, high;
    logs_with_range(odds_level, m, 0.0, a, low, high);
    if (slack && m >= kPartnerStartFrom && collisions <= kFlatCollisions * Q * Q) {
      // Rounds (PartnerMeanField) from u = log o_i (log o'_i: within k o_i q_i of it on a flat draft):
      // n = 2 kept improving through the second, n = 3 not past the first.
      workspace.partners.refine(mass, o, m, n_, base, aim, n_ == 2 ? 2 : 1, 30.0, std::log(level), a);
    }
    const double highest = detail::clamp_covered(o, m, a);
    detail::set_uncovered(o, m, std::min(highest + 5.0, 30.0), a);
    return start;
  }

  // V \ H* and H* with p > 0 on the draft support, H* with p = 0, tokens that no draft takes
  enum TokenClass : char { kOuter = 0, kInner = 1, kZ = 2, kOffSupport = 3 };

  // A token's class, found in the draft support (O(log support): the plan keeps no V-long array).
  TokenClass token_class(int t) const {
    const auto found = std::lower_bound(support_.begin(), support_.end(), t);
    return found != support_.end() && *found == t ? static_cast<TokenClass>(support_class_[found - support_.begin()])
                                                  : kOffSupport;
  }

  void check_drafts(const int* drafts) const {
    for (int j = 0; j < n_; ++j)
      if (token_class(drafts[j]) == kOffSupport) refuse_drafts("q = 0 at a draft");
  }

  struct TruncatedToken {
    int token;
    double alpha;
    bool operator<(const TruncatedToken& other) const { return token < other.token; }
  };

  struct SystemSolution {
    std::vector<double> alpha;
    std::vector<double> rows;  // target + gradient at alpha, when rows_known
    bool rows_known = false;
  };

  // sum_{k<n} s^k Q^{n-1-k}: a tuple of n draws from a block of mass Q whose first draw outside
  // a part of mass s is a given token y has probability q(y) times this.
  double first_draft_factor(double s, double Q) const {
    double factor = 0.0, s_power = 1.0, Q_power = integer_power(Q, n_ - 1);
    for (int k = 0; k < n_; ++k) {
      factor += s_power * Q_power;
      s_power *= s;
      Q_power = Q > 0.0 ? Q_power / Q : 0.0;
    }
    return factor;
  }

  const TruncatedToken* find_truncated(int t) const {
    const auto found = std::lower_bound(truncated_.begin(), truncated_.end(), TruncatedToken{t, 0.0});
    return found != truncated_.end() && found->token == t ? &*found : nullptr;
  }

  // The exact plan's proposal for one tuple (see the header): the first draft outside T when the
  // tuple is truncated, else the Eq. (18) softmax of its T tokens (with the inner slack).
  Candidates candidates(const int* drafts) const {
    Candidates c;
    c.fallback = drafts[0];
    bool outer = false;
    for (int j = 0; j < n_; ++j) outer = outer || token_class(drafts[j]) == kOuter;
    const char kind = outer ? kOuter : kInner;
    for (int j = 0; j < n_; ++j)
      if (token_class(drafts[j]) == kind && !find_truncated(drafts[j])) {
        c.add(drafts[j], 1.0);
        return c;
      }
    double shift = outer ? -std::numeric_limits<double>::infinity() : 0.0;  // the slack has alpha = 0
    for (int j = 0; j < n_; ++j) {  // each distinct token once (no allocation: n is small)
      const int t = drafts[j];
      if (token_class(t) != kind || std::find(c.token, c.token + c.count, t) != c.token + c.count) continue;
      const double a = find_truncated(t)->alpha;
      c.add(t, a);
      shift = std::max(shift, a);
    }
    double total = outer ? 0.0 : std::exp(-shift);
    for (int k = 0; k < c.count; ++k) total += c.share[k] = std::exp(c.share[k] - shift);
    for (int k = 0; k < c.count; ++k) c.share[k] /= total;
    return c;
  }

  // Eq. (18), normalised: p_draft(drafts) cancels.
  void raw_transport(const int* drafts, double* out) const {
    std::fill(out, out + V_, 0.0);
    const std::vector<int> tokens = distinct_tokens(drafts, n_);
    bool inner = true;
    for (int t : tokens) inner = inner && token_class(t) != kOuter;
    if (!inner) {  // softmax over set(w) \ H*; acceptance is certain
      double shift = -std::numeric_limits<double>::infinity(), total = 0.0;
      for (int t : tokens)
        if (token_class(t) == kOuter) shift = std::max(shift, raw_alpha(t));
      for (int t : tokens)
        if (token_class(t) == kOuter) total += out[t] = std::exp(raw_alpha(t) - shift);
      for (int t : tokens) out[t] /= total;
      return;
    }
    double shift = 0.0;  // the slack token has alpha = 0
    for (int t : tokens) shift = std::max(shift, raw_alpha(t));
    double total = std::exp(-shift);
    for (int t : tokens) total += out[t] = std::exp(raw_alpha(t) - shift);
    for (int t : tokens) out[t] /= total;
    const double rejected = std::exp(-shift) / total;
    if (rejection_law_.empty()) {  // alpha* = 1 leaves nothing to reject to: keep the accepted part
      double accepted = 0.0;
      for (int t : tokens) accepted += out[t];
      for (int t : tokens) out[t] = accepted > 0.0 ? out[t] / accepted : 1.0 / tokens.size();
      return;
    }
    for (int i = 0; i < V_; ++i) out[i] += rejected * rejection_law_[i];
  }

  // alpha of the raw plan: the outer solution on V \ H*, the inner one on H* (Eqs. 14 and 17 leave
  // the values outside T free); outside
  // the truncation sets, outer_default_alpha_ on V \ H* and -inf on H* (Z and H* \ T get no mass).
  double raw_alpha(int t) const {
    if (const TruncatedToken* x = find_truncated(t)) return x->alpha;
    return token_class(t) != kOuter ? -std::numeric_limits<double>::infinity() : outer_default_alpha_;
  }

  // Builds the grouped terms of one system over the tokens of draft masses `member_mass` and
  // minimises it. bases[0] weights the objective; an optional bases[1] accumulates
  // sum_U weight1_U * s_U / (1 + s_U) (inner acceptance) at the solution. The terms live in the
  // per-thread workspace (one per system): one plan per token, same sizes every time, so reusing
  // the storage avoids allocating (and faulting in) tens of MB per call.
  SystemSolution solve_system(const std::vector<double>& member_mass, const std::vector<double>& bases,
                              const std::vector<double>& targets, bool slack, SystemReport& report,
                              double* acceptance, GlobalResolutionWorkspace& workspace) const {
    const int m = static_cast<int>(member_mass.size());
    report.truncation_size = m;
    ConvexWorkspace& system =
        workspace.systems[slack ? GlobalResolutionWorkspace::kInner : GlobalResolutionWorkspace::kOuter];
    ConvexObjective& objective = system.objective;
    objective.slack = slack;
    objective.unshifted_limit = options_.unshifted_limit;
    objective.interpolation = options_.interpolation;
    objective.grid = options_.grid;
    double count, members;
    count_small_subsets(m, n_, count, members);
    report.terms = count;
    if (!build_grouped_terms(member_mass, n_, bases, options_.max_terms, objective)) {
      report.within_budget = false;
      report.converged = false;
      report.gradient_l1 = std::numeric_limits<double>::infinity();  // no solve: no bound
      return {std::vector<double>(m, 0.0), {}, false};
    }
    objective.target = Eigen::Map<const Eigen::VectorXd>(targets.data(), m);
    const NewtonReport solved =
        minimise_from_warm_start(member_mass, bases[0], targets, slack, report, system, workspace);
    if (acceptance) *acceptance = solved.accepted;
    return system_solution(solved, targets, report);
  }

  // Newton from the warm start, and for the inner system, should it stall (a warm start deep in a
  // flat region), again from 0. The inner warm start stays where the pair interpolation reaches:
  // from a flat input's start, one a can crawl towards 600 by 30 per step at every pass dearer
  // (docs/benchmarks/global-resolution-internals.md, "Inner reach"); the cold restart then finds
  // the solution in a few steps.
  NewtonReport minimise_from_warm_start(const std::vector<double>& member_mass, double base,
                                        const std::vector<double>& targets, bool slack, SystemReport& report,
                                        ConvexWorkspace& system, GlobalResolutionWorkspace& workspace) const {
    const int m = static_cast<int>(member_mass.size());
    ConvexObjective& objective = system.objective;
    NewtonReport solved = minimise_newton(objective,
                                          warm_start(member_mass, base, targets, slack,
                                                     slack ? objective.level_aim(report.threshold) : 0.0, workspace),
                                          report.threshold,
                                          options_.max_iterations, !slack, system,
                                          slack ? kFourReciprocalsLimit : kUnshiftedLimit);
    int iterations = solved.iterations;
    if (!solved.converged && !solved.over_budget && slack) {  // a warm start deep in a flat region can stall: restart at 0
      NewtonReport cold = minimise_newton(objective, Eigen::VectorXd::Zero(m), report.threshold,
                                          options_.max_iterations, !slack, system);
      iterations += cold.iterations;
      if (cold.converged || cold.gradient_l1 < solved.gradient_l1) solved = std::move(cold);
    }
    report.iterations = iterations;
    return solved;
  }

  // The solution's alpha and, when its gradient is known, its allocated rows (target + gradient);
  // the rest of the system's report.
  static SystemSolution system_solution(const NewtonReport& solved, const std::vector<double>& targets,
                                        SystemReport& report) {
    const int m = static_cast<int>(targets.size());
    report.gradient_l1 = solved.gradient_l1;
    report.converged = solved.converged;
    report.within_budget = !solved.over_budget;
    report.interpolated = solved.interpolated;
    SystemSolution out{std::vector<double>(solved.solution.data(), solved.solution.data() + m), {}, false};
    report.rows_known = out.rows_known = solved.gradient.size() == m;
    if (out.rows_known) {
      out.rows.resize(m);
      for (int k = 0; k < m; ++k) out.rows[k] = targets[k] + solved.gradient[k];
      report.row_error = solved.gradient_error;
    }
    return out;
  }

  // ---- The steps of build ([GR] Algorithm 1) ----

  void check_options() const {
    if (!(options_.tau > 0.0)) throw std::invalid_argument("'tau' must be positive");
    if (n_ > kMaxTermSize)
      throw std::invalid_argument("'n' must be <= " + std::to_string(kMaxTermSize) + " for Global Resolution");
    static_assert(kMaxTermSize <= Candidates::kMax, "a tuple's candidates must fit Candidates");
  }

  // The stopping threshold of a system with truncation error eps_T (or gamma_T): 5 tau - 3 eps_T,
  // or Algorithm 1's 5 tau with paper_threshold (the header).
  double stopping_threshold(double truncation_error) const {
    const double slack_threshold = options_.paper_threshold ? 0.0 : 3.0;
    return 5.0 * options_.tau - slack_threshold * truncation_error;
  }

  // A truncation set T with its members' support positions, draft masses q and row targets.
  struct TruncatedSystem {
    std::vector<int> positions;  // in the support
    std::vector<double> mass, targets;
    double mass_T = 0.0;  // Q(T), summed in T's order
  };

  // Step 7: T ⊆ V \ H* by decreasing q, minimal with eps_T = 1 - Q(H* ∪ T)^n <= tau (Eq. 13).
  // outer_rows[j] belongs to order[h + j]; the masses are read in the ratio order (IidSplit::q_order).
  TruncatedSystem outer_truncation_set(const IidSplit& split, GlobalResolutionWorkspace& workspace) {
    const int h = split.h;
    const double* q_outer = split.q_order.data() + h;
    const std::vector<int> kept =
        minimal_truncation(static_cast<int>(split.outer_rows.size()), [&](int j) { return q_outer[j]; },
                           split.draft_mass, n_, options_.tau,
                           workspace.truncation[GlobalResolutionWorkspace::kOuter], outer_.truncation_error);
    const int size = static_cast<int>(kept.size());
    outer_.threshold = stopping_threshold(outer_.truncation_error);
    TruncatedSystem outer{std::vector<int>(size), std::vector<double>(size), std::vector<double>(size)};
    for (int k = 0; k < size; ++k) {
      outer.positions[k] = split.order_positions[h + kept[k]];
      outer.mass[k] = q_outer[kept[k]];
      outer.targets[k] = split.outer_rows[kept[k]];
      outer.mass_T += outer.mass[k];
    }
    return outer;
  }

  // Step 8: Phi_T minimised (Theorem 6.4; EGF base Q(H*)). The outer tokens outside T may take any
  // finite alpha (Eq. (14) solves the outer system for any values): the smallest alpha of T.
  SystemSolution solve_outer_system(const TruncatedSystem& outer, double mass_H, GlobalResolutionWorkspace& workspace) {
    SystemSolution solution = solve_system(outer.mass, {mass_H}, outer.targets, false, outer_, nullptr, workspace);
    const int size = static_cast<int>(outer.mass.size());
    if (size > 0) outer_default_alpha_ = detail::smallest(solution.alpha.data(), size);
    return solution;
  }

  // The support's token classes (support_class_), and the inner system's candidates: the tokens
  // of H* with p > 0, in the ratio order. Tokens of H* with p = 0 (Z) are free (alpha = -inf,
  // their mass, returned in mass_Z, in the EGF base). One pass through restricted pointers: the
  // class is a char store, which may alias every array read here.
  TruncatedSystem classify_support(const IidSplit& split, double& mass_Z) {
    const int h = split.h;
    support_class_.resize(split.support.size());
    TruncatedSystem inner{std::vector<int>(h), std::vector<double>(h), std::vector<double>(h)};
    int inner_count = 0;
    double free_mass = 0.0;
    const int* __restrict at_order = split.order_positions.data();
    const double *__restrict p_at = split.p_order.data(), *__restrict q_at = split.q_order.data();
    char* __restrict class_at = support_class_.data();
    int* __restrict position_of = inner.positions.data();
    double *__restrict mass_of = inner.mass.data(), *__restrict target_of = inner.targets.data();
    for (int k = 0; k < h; ++k) {
      const int position = at_order[k];
      const double target = p_at[k], mass = q_at[k];
      class_at[position] = target > 0.0 ? kInner : kZ;
      position_of[inner_count] = position;  // written unconditionally, kept when p > 0
      mass_of[inner_count] = mass;
      target_of[inner_count] = target;
      inner_count += target > 0.0;
      free_mass += target > 0.0 ? 0.0 : mass;
    }
    mass_Z = free_mass;
    const int count = static_cast<int>(split.order.size());
    for (int k = h; k < count; ++k) class_at[at_order[k]] = kOuter;
    inner.positions.resize(inner_count);  // shrinks: nothing moves
    return inner;
  }

  // Step 4: T ⊆ H* \ Z by decreasing q, minimal with gamma_T = Q(H*)^n - Q(T ∪ Z)^n <= tau
  // (Eq. 16); empty when Q(H*)^n <= tau (every inner draft rejected to the residual). Compacts the
  // candidates to T in place (kept[k] >= k) and sums Q(T).
  void inner_truncation_set(TruncatedSystem& inner, double mass_H, GlobalResolutionWorkspace& workspace) {
    const int candidates = static_cast<int>(inner.positions.size());
    const double* mass = inner.mass.data();
    std::vector<int> kept =
        minimal_truncation(candidates, [&](int j) { return mass[j]; }, mass_H, n_, options_.tau,
                           workspace.truncation[GlobalResolutionWorkspace::kInner], inner_.truncation_error);
    if (integer_power(mass_H, n_) <= options_.tau) {  // reject every inner draft to the residual
      kept.clear();
      inner_.truncation_error = integer_power(mass_H, n_);
    }
    const int size = static_cast<int>(kept.size());
    double mass_T = 0.0;
    for (int k = 0; k < size; ++k) {  // kept[k] >= k
      inner.positions[k] = inner.positions[kept[k]];
      inner.mass[k] = inner.mass[kept[k]];
      inner.targets[k] = inner.targets[kept[k]];
      mass_T += inner.mass[k];
    }
    inner.positions.resize(size);
    inner.mass.resize(size);
    inner.targets.resize(size);
    inner.mass_T = mass_T;
    inner_.threshold = stopping_threshold(inner_.truncation_error);
  }

  // Step 5: Theta_T minimised (Theorem 6.5; EGF base Q(Z)). A second base counts the acceptance of
  // the assembled plan: tuples of H*^n by their T-part, whatever their other tokens are
  // (base Q(H*) - Q(T)).
  SystemSolution solve_inner_system(const TruncatedSystem& inner, double mass_H, double mass_Z,
                                    GlobalResolutionWorkspace& workspace, double& inner_acceptance) {
    return solve_system(inner.mass, {mass_Z, std::max(mass_H - inner.mass_T, 0.0)}, inner.targets, true, inner_,
                        &inner_acceptance, workspace);
  }

  // The solutions by support position (workspace.in_T, workspace.solved), read back in the
  // support's increasing ids: truncated_ comes out sorted, and the exact plan's law r with it,
  // without a sort.
  static void clear_by_support(std::size_t support_size, GlobalResolutionWorkspace& workspace) {
    workspace.in_T.assign(support_size, 0);
    workspace.solved.resize(support_size);
  }

  // Restricted pointers: a char store may alias anything, and reloaded every vector's data
  // pointer per entry (docs/benchmarks/global-resolution-internals.md, "Placing solutions").
  static void place_solution(const TruncatedSystem& system, const SystemSolution& solution,
                             GlobalResolutionWorkspace& workspace, int& truncated_size) {
    const int size = static_cast<int>(system.positions.size());
    const int* __restrict position = system.positions.data();
    const double *__restrict alpha = solution.alpha.data(), *__restrict row = solution.rows.data();
    char* __restrict flag = workspace.in_T.data();
    SolvedToken* __restrict at_position = workspace.solved.data();
    if (solution.rows_known)
      for (int k = 0; k < size; ++k) flag[position[k]] = 1, at_position[position[k]] = {alpha[k], row[k]};
    else
      for (int k = 0; k < size; ++k) flag[position[k]] = 1, at_position[position[k]] = {alpha[k], 0.0};
    truncated_size += size;
  }

  void read_truncated(const std::vector<int>& support, const GlobalResolutionWorkspace& workspace,
                      int truncated_size) {
    const std::vector<char>& in_T = workspace.in_T;
    const std::vector<SolvedToken>& solved = workspace.solved;
    const std::size_t support_size = support.size();
    truncated_.resize(truncated_size);
    int written = 0;
    for (std::size_t begin = 0; begin < support_size; begin += 8) {  // 8 flags at a time: T may be sparse
      const std::size_t end = std::min(begin + 8, support_size);
      std::uint64_t flags = 1;  // a short last group is read flag by flag
      if (end - begin == 8) std::memcpy(&flags, in_T.data() + begin, 8);
      if (flags == 0) continue;
      for (std::size_t i = begin; i < end; ++i)
        if (in_T[i]) truncated_[written++] = {support[i], solved[i].alpha};
    }
  }

  // Steps 9 and 6 for the raw plan: both solutions, and the Eq. (18) rejection law (IidSplit's).
  void assemble_raw_plan(IidSplit& split, const TruncatedSystem& outer_system, const SystemSolution& outer,
                         const TruncatedSystem& inner_system, const SystemSolution& inner, double inner_acceptance,
                         GlobalResolutionWorkspace& workspace) {
    clear_by_support(split.support.size(), workspace);
    int truncated_size = 0;
    place_solution(outer_system, outer, workspace, truncated_size);
    place_solution(inner_system, inner, workspace, truncated_size);
    read_truncated(split.support, workspace, truncated_size);
    rejection_law_ = std::move(split.law);
    support_ = std::move(split.support);
    kept_ = std::clamp(integer_power(split.draft_mass, n_) - integer_power(split.draft_mass_H, n_) + inner_acceptance,
                       0.0, 1.0);
    // The rejection law lives off H* (IidSplit), which holds every draft of an inner tuple: a
    // rejected inner tuple never outputs a draft, so alpha is the kept mass, unless there is no
    // rejection law, when raw_transport keeps the accepted part of every tuple.
    alpha_ = rejection_law_.empty() ? std::clamp(integer_power(split.draft_mass, n_), 0.0, 1.0) : kept_;
  }

  // Steps 9 and 6 for the exact plan: T is kept only where the rows are known; the candidate law r
  // (the header) and the output correction built on it.
  void assemble_exact_plan(const ScaledRow& p, const ScaledRow& q, IidSplit& split, const TruncatedSystem& outer_system,
                           const SystemSolution& outer, const TruncatedSystem& inner_system,
                           const SystemSolution& inner, double mass_Z, GlobalResolutionWorkspace& workspace) {
    const double q_total = split.draft_mass, mass_H = split.draft_mass_H;
    const std::size_t support_size = split.support.size();
    clear_by_support(support_size, workspace);
    int truncated_size = 0;
    double outer_T = 0.0, inner_T = 0.0;  // Q(T) of each kept system
    if (outer.rows_known) {
      place_solution(outer_system, outer, workspace, truncated_size);
      outer_T = outer_system.mass_T;
    }
    if (inner.rows_known) {
      place_solution(inner_system, inner, workspace, truncated_size);
      inner_T = inner_system.mass_T;  // the same sum, in the same order
    }
    read_truncated(split.support, workspace, truncated_size);
    // A system without rows has an empty T: its truncation error is that of the empty set.
    if (!outer.rows_known) untruncated(outer_, q_total, mass_H);
    if (!inner.rows_known) untruncated(inner_, mass_H, mass_Z);
    const double outer_rest = std::max(q_total - mass_H - outer_T, 0.0);  // Q_R
    const double inner_rest = std::max(mass_H - mass_Z - inner_T, 0.0);   // Q_Ri
    const double first_outer = first_draft_factor(q_total - outer_rest, q_total);
    const double first_inner = first_draft_factor(mass_H - inner_rest, mass_H);
    support_ = std::move(split.support);
    std::vector<double> law = candidate_law(q, first_outer, first_inner, workspace);
    std::vector<double>& law_copy = DraftAcceptance::Workspace::of_this_thread().law;  // for the acceptance
    if (options_.acceptance) law_copy.assign(law.begin(), law.end());
    correction_ = OutputCorrection(p, V_, support_, std::move(law));
    kept_ = correction_.kept();
    // An error e in the rows moves the output law by up to 2e in L1 (docs/design/certified-bounds.md,
    // "Output law of the exact plan").
    law_error_bound_ = 2 * ((outer.rows_known ? outer_.row_error : 0.0) + (inner.rows_known ? inner_.row_error : 0.0));
    const AcceptanceMasses masses{n_, q_total, mass_H, mass_Z, outer_rest, inner_rest};
    if (options_.acceptance) {
      exact_acceptance(p, q, masses, law_copy, workspace);
    } else {
      alpha_ = std::numeric_limits<double>::quiet_NaN();
    }
  }

  // alpha: P(output in drafts) of the exact plan (draft_acceptance.hpp), from each support token's
  // class, mass, solution, candidate law and correction; a bound where the subsets inside T were
  // too many to enumerate (then the solver's rows, within their row error, enter too).
  void exact_acceptance(const ScaledRow& p, const ScaledRow& q, const AcceptanceMasses& masses,
                        const std::vector<double>& law, const GlobalResolutionWorkspace& workspace) {
    const double residual = correction_.residual_mass();
    if (!(residual > 0.0)) {  // no residual: every output is a draft (OutputCorrection::write_law)
      alpha_ = 1.0;
      return;
    }
    std::vector<AcceptanceToken>* tokens = DraftAcceptance::Workspace::of_this_thread().tokens;
    for (int c = 0; c < DraftAcceptance::kClasses; ++c) tokens[c].clear();
    const std::vector<double>& surplus = correction_.surplus();
    for (std::size_t i = 0; i < support_.size(); ++i) {
      const int t = support_[i];
      const bool in_T = workspace.in_T[i];
      const int c = support_class_[i] == kOuter ? (in_T ? DraftAcceptance::kOuterT : DraftAcceptance::kOuterRest)
                    : support_class_[i] == kZ   ? DraftAcceptance::kZ
                    : in_T                      ? DraftAcceptance::kInnerT
                                                : DraftAcceptance::kInnerRest;
      const double s = surplus[i];
      tokens[c].push_back({q[t], in_T ? workspace.solved[i].alpha : 0.0, law[i], p[t], s < 0.0 ? -s : 0.0,
                           s > 0.0 ? s / residual : 0.0});
    }
    const double limit = std::min(options_.acceptance_enumeration, kAcceptanceWork / ((n_ + 1.0) * (n_ + 1.0)));
    const AcceptanceResult result = DraftAcceptance(masses, tokens, limit, limit).compute();
    if (result.enumerated) {
      alpha_ = std::clamp(result.value, 0.0, 1.0);
      return;
    }
    // Bounded: the rows' errors enter (E[K], the pair bounds and the slack's part read them, the
    // last with weights rho_x e^{-alpha_x}), and a lossless plan accepts at most alpha* (up to its
    // law's error).
    const double error =
        result.error + 2.0 * outer_.row_error + (2.0 + result.inner_row_weight) * inner_.row_error;
    const double low = std::max(result.value - error, 0.0);
    const double high = std::max(std::min({result.value + error, alpha_star_ + law_error_bound_, 1.0}), low);
    alpha_ = 0.5 * (low + high);
    alpha_error_bound_ = 0.5 * (high - low);
  }

  void untruncated(SystemReport& report, double block, double base) const {
    report.truncation_size = 0;
    report.truncation_error = std::max(integer_power(block, n_) - integer_power(base, n_), 0.0);
    report.gradient_l1 = 0.0;
  }

  // The exact plan's candidate law r on the support: the system's row on T, else the first-draft
  // law (first_draft_factor times q); 0 on Z.
  std::vector<double> candidate_law(const ScaledRow& q, double first_outer, double first_inner,
                                    const GlobalResolutionWorkspace& workspace) const {
    const std::size_t support_size = support_.size();
    std::vector<double> law(support_size);
    const char *in_T_flags = workspace.in_T.data(), *classes = support_class_.data();
    const SolvedToken* solved_at = workspace.solved.data();
    const int* token = support_.data();
    double* r = law.data();
#pragma omp simd
    for (std::size_t i = 0; i < support_size; ++i) {
      const double first_draft = q.data[token[i]] * q.scale * (classes[i] == kOuter ? first_outer : first_inner);
      r[i] = in_T_flags[i] ? std::max(solved_at[i].row, 0.0) : classes[i] == kZ ? 0.0 : first_draft;
    }
    return law;
  }

  int V_, n_;
  GlobalResolutionOptions options_;
  std::vector<double> own_p_;  // p, when the plan was given normalised rows
  SystemReport outer_, inner_;
  double alpha_ = 0.0, alpha_star_ = 0.0, kept_ = 0.0, alpha_error_bound_ = 0.0;
  std::vector<int> support_;         // the draft support, increasing
  std::vector<char> support_class_;  // its tokens' TokenClass
  // The solutions on both truncation sets, sorted by token (O(|T|) storage: a V-long array
  // costs more to allocate, page by page, than a small plan takes to solve).
  std::vector<TruncatedToken> truncated_;
  double outer_default_alpha_ = 0.0;     // raw plan
  std::vector<double> rejection_law_;    // raw plan: the IidSplit law
  OutputCorrection correction_;          // exact plan
  double law_error_bound_ = 0.0;         // exact plan
};

}  // namespace multidraft
