// Neumaier's compensated summation: prefix sums of probabilities stay exact to ~1 ulp,
// which the subset scan of [GR] §2.1 needs to resolve psi ties.
#pragma once
#include <cmath>

namespace multidraft {

class CompensatedSum {
 public:
  void add(double x) {
    const double t = sum_ + x;
    if (std::fabs(sum_) >= std::fabs(x)) {
      compensation_ += (sum_ - t) + x;
    } else {
      compensation_ += (x - t) + sum_;
    }
    sum_ = t;
  }
  double value() const { return sum_ + compensation_; }

 private:
  double sum_ = 0.0;
  double compensation_ = 0.0;
};

}  // namespace multidraft
