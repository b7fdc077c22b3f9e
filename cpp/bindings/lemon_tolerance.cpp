// The default epsilon of lemon::Tolerance<double>: a static member that LEMON's class declares and
// its compiled library defines (lemon/base.cc, with this value). The core uses LEMON's headers
// only, so one translation unit of the module defines it. lemon::Preflow's constructor reads it
// before the core sets its own tolerance: optimised builds drop that read, an unoptimised or
// sanitizer build references the symbol, and without this definition its module fails to import
// ("undefined symbol: _ZN5lemon9ToleranceIdE11def_epsilonE").
#include <lemon/tolerance.h>

namespace lemon {
double Tolerance<double>::def_epsilon = 1e-10;
}  // namespace lemon
