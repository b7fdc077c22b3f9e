// Global Resolution as a verifier: the plan of global_resolution.hpp for one (p, q) row, which
// with `fallback` hands over to the exact complementary-slackness plan (otlp_plan.hpp) when it
// did not meet its bound (success() false).
#pragma once
#include <memory>
#include <vector>

#include "multidraft/global_resolution.hpp"
#include "multidraft/otlp_plan.hpp"
#include "multidraft/rng.hpp"

namespace multidraft {

class GlobalResolutionVerifierPlan {
 public:
  GlobalResolutionVerifierPlan(const double* p, const double* q, int V, int n, const GlobalResolutionOptions& options,
                               bool fallback)
      : V_(V), plan_(p, q, V, n, options) {
    if (fallback && !plan_.success()) exact_ = std::make_unique<SlacknessPlan>(p, q, V, SchemeKind::iid, n);
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
  std::unique_ptr<SlacknessPlan> exact_;
};

}  // namespace multidraft
