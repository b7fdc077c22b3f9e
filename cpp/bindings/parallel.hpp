// The shell of the batched bindings that loop in place (rdk.cpp, validation.cpp): the core's
// parallel_rows (multidraft/batch/parallel_rows.hpp) with the GIL released, so bodies must not
// touch Python objects; they read and write plain pointers taken beforehand.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>

#include "multidraft/batch/parallel_rows.hpp"

namespace multidraft_bindings {

namespace py = pybind11;
using multidraft::light_rows;

// row(r) for every r in [0, rows), on the thread pool with the GIL released.
template <class Row>
void parallel_rows(py::ssize_t rows, std::int64_t min_rows, Row&& row, bool balanced = false) {
  py::gil_scoped_release release;
  multidraft::parallel_rows(rows, min_rows, row, balanced);
}

}  // namespace multidraft_bindings
