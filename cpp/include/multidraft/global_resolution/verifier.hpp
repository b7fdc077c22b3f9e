// Global Resolution as a verifier: the plan of plan.hpp for one (p, q) row, which with `fallback`
// hands over to the exact complementary-slackness plan (otlp_plan.hpp) when it did not meet its
// bound (success() false; docs/design/certified-bounds.md, "What a user may rely on"). It reads the
// rows in place with their scales; only the fallback (rare) takes normalised copies.
#pragma once
#include <memory>
#include <vector>

#include "multidraft/global_resolution/plan.hpp"
#include "multidraft/otlp/otlp_plan.hpp"
#include "multidraft/core/rng.hpp"

namespace multidraft {

class GlobalResolutionVerifierPlan {
 public:
  GlobalResolutionVerifierPlan(const ScaledRow& p, const ScaledRow& q, int V, int n,
                               const GlobalResolutionOptions& options, bool fallback)
      : V_(V), plan_(p, q, V, n, options) {
    if (!fallback || plan_.success()) return;
    auto normalised = [V](const ScaledRow& row) {
      std::vector<double> copy(V);
      for (int i = 0; i < V; ++i) copy[i] = row[i];
      return copy;
    };
    exact_p_ = normalised(p);
    exact_q_ = normalised(q);
    exact_ = std::make_unique<SlacknessPlan>(exact_p_.data(), exact_q_.data(), V, SchemeKind::iid, n);
  }

  double alpha() const { return exact_ ? exact_->alpha() : plan_.alpha(); }

  void transport(const int* drafts, double* out) const {
    if (exact_) return exact_->transport(drafts, out);
    plan_.transport(drafts, out);
  }

  int sample(const int* drafts, Rng& rng) const {
    if (!exact_) return plan_.sample(drafts, rng);
    std::vector<double> law(V_);  // the fallback (rare) writes its law
    exact_->transport(drafts, law.data());
    return sample_index(law.data(), V_, rng);
  }

 private:
  int V_;
  GlobalResolutionPlan plan_;
  std::vector<double> exact_p_, exact_q_;  // the fallback's rows (it keeps views of them)
  std::unique_ptr<SlacknessPlan> exact_;
};

}  // namespace multidraft
