// One verified token from any plan: the plan's own sample(drafts, rng) when it has one (no V-long
// law is written), otherwise its transport written into a reusable scratch row and drawn from.
#pragma once
#include <type_traits>
#include <utility>
#include <vector>

#include "multidraft/core/rng.hpp"

namespace multidraft {

template <class Plan, class = void>
struct has_sample : std::false_type {};
template <class Plan>
struct has_sample<Plan, std::void_t<decltype(std::declval<const Plan&>().sample(std::declval<const int*>(),
                                                                                  std::declval<Rng&>()))>>
    : std::true_type {};

template <class Plan>
int sample_verified(const Plan& plan, const int* drafts, int V, Rng& rng, std::vector<double>& scratch) {
  if constexpr (has_sample<Plan>::value) {
    return plan.sample(drafts, rng);
  } else {
    scratch.resize(V);
    plan.transport(drafts, scratch.data());
    return sample_index(scratch.data(), V, rng);
  }
}

}  // namespace multidraft
