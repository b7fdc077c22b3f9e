// NumPy array types shared by the binding translation units (module.cpp, rdk.cpp, testing.cpp): C-contiguous,
// converted on the way in (forcecast), so the C++ core sees plain pointers; and probability rows as
// users pass them (user_rows), which the core checks and reads in place.
#pragma once
#include <pybind11/numpy.h>

#include <cstdint>
#include <optional>

#include "multidraft/batch/checked_rows.hpp"

namespace multidraft_bindings {

namespace py = pybind11;
using Doubles = py::array_t<double, py::array::c_style | py::array::forcecast>;
using Ints = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using Indices = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;
using Seeds = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>;

// A float32 or float64 array (V,) or (B, V) of the caller's, any strides, as the core's UserRows
// (read in place, not converted); nullopt for any other array (the caller's general path).
inline std::optional<multidraft::UserRows> user_rows(const py::array& x, double tolerance) {
  const bool single = x.dtype().equal(py::dtype::of<float>());
  if ((!single && !x.dtype().equal(py::dtype::of<double>())) || x.ndim() < 1 || x.ndim() > 2 || x.size() == 0)
    return std::nullopt;
  const py::ssize_t item = x.itemsize(), last = x.ndim() - 1;
  if (x.strides(0) % item != 0 || x.strides(last) % item != 0) return std::nullopt;
  multidraft::UserRows rows;
  rows.data = x.data(), rows.single = single, rows.tolerance = tolerance;
  rows.B = x.ndim() == 2 ? x.shape(0) : 1, rows.V = x.shape(last);
  rows.row_stride = x.ndim() == 2 ? x.strides(0) / item : rows.V, rows.stride = x.strides(last) / item;
  return rows;
}

}  // namespace multidraft_bindings
