// Neumaier's compensated summation: prefix sums of probabilities stay exact to ~1 ulp, which the
// subset scan of [GR] Section 5.1 needs to resolve psi ties (docs/design/certified-bounds.md,
// "Subset selection round-off").
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
