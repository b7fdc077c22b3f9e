// NumPy array types shared by the binding translation units (module.cpp, rdk.cpp, testing.cpp): C-contiguous,
// converted on the way in (forcecast), so the C++ core sees plain pointers.
#pragma once
#include <pybind11/numpy.h>

#include <cstdint>

namespace multidraft_bindings {

namespace py = pybind11;
using Doubles = py::array_t<double, py::array::c_style | py::array::forcecast>;
using Ints = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using Indices = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;
using Seeds = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>;

}  // namespace multidraft_bindings
