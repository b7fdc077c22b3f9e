// Binding of distribution.hpp: probability arrays checked and normalised by the core in one read
// (python/multidraft/_validation.py calls it and explains any refusal itself); rows on the pool.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>

#include "multidraft/core/distribution.hpp"
#include "parallel.hpp"

namespace py = pybind11;

namespace {

// x (B, V) of T with any strides -> x / row sums as a new C-contiguous float64 (B, V), or None
// when a row has a non-finite or negative entry or a sum beyond `tolerance`.
template <class T>
py::object normalised_rows(const py::array& x, double tolerance) {
  const std::int64_t B = x.shape(0), V = x.shape(1);
  const std::int64_t row_stride = x.strides(0) / static_cast<std::int64_t>(sizeof(T));
  const std::int64_t stride = x.strides(1) / static_cast<std::int64_t>(sizeof(T));
  py::array_t<double> out({B, V});
  const T* data = static_cast<const T*>(x.data());
  double* o = out.mutable_data();
  std::atomic<bool> valid{true};
  multidraft_bindings::parallel_rows(B, multidraft_bindings::light_rows(V), [&](py::ssize_t b) {
    if (!multidraft::normalise_row(multidraft::StridedRow<T>{data + b * row_stride, V, stride}, tolerance, o + b * V))
      valid.store(false, std::memory_order_relaxed);
  });
  return valid.load() ? py::object(std::move(out)) : py::object(py::none());
}

// The scale 1 / sum of every row of x (B, V), float64 C-contiguous, or None when a row is refused
// (as normalised_rows): x times its scale is the law normalised_rows would write, entry by entry.
py::object row_scales(const py::array& x, double tolerance) {
  const std::int64_t B = x.shape(0), V = x.shape(1);
  py::array_t<double> out(B);
  const double* data = static_cast<const double*>(x.data());
  double* o = out.mutable_data();
  std::atomic<bool> valid{true};
  multidraft_bindings::parallel_rows(B, multidraft_bindings::light_rows(V), [&](py::ssize_t b) {
    if (!multidraft::row_scale(multidraft::StridedRow<double>{data + b * V, V, 1}, tolerance, o[b]))
      valid.store(false, std::memory_order_relaxed);
  });
  return valid.load() ? py::object(std::move(out)) : py::object(py::none());
}

}  // namespace

void bind_validation(py::module_& m) {
  m.def(
      "normalised_rows",
      [](const py::array& x, double tolerance) -> py::object {
        if (x.ndim() != 2) throw std::invalid_argument("internal: normalised_rows takes a 2-D array");
        if (x.strides(0) % x.itemsize() != 0 || x.strides(1) % x.itemsize() != 0)
          return py::none();  // unaligned strides: the caller's NumPy path handles them
        if (x.dtype().equal(py::dtype::of<double>())) return normalised_rows<double>(x, tolerance);
        if (x.dtype().equal(py::dtype::of<float>())) return normalised_rows<float>(x, tolerance);
        throw std::invalid_argument("internal: normalised_rows takes float32 or float64");
      },
      py::arg("x"), py::arg("tolerance"));
  m.def(
      "row_scales",
      [](const py::array& x, double tolerance) -> py::object {
        const bool readable = x.ndim() == 2 && x.dtype().equal(py::dtype::of<double>()) &&
                              (x.flags() & py::array::c_style) != 0;
        if (!readable) throw std::invalid_argument("internal: row_scales takes a C-contiguous float64 (B, V) array");
        return row_scales(x, tolerance);
      },
      py::arg("x"), py::arg("tolerance"));
}
