// The shell of every batched binding (module.cpp, rdk.cpp): rows spread over the core's thread
// pool (multidraft/thread_pool.hpp) with the GIL released, so bodies must not touch Python
// objects; they read and write plain pointers taken beforehand.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>

#include "multidraft/thread_pool.hpp"

namespace multidraft_bindings {

namespace py = pybind11;

// chunk(begin, end) over contiguous chunks of [0, rows): for bodies with per-chunk scratch.
template <class Chunk>
void parallel_chunks(py::ssize_t rows, Chunk&& chunk) {
  py::gil_scoped_release release;
  multidraft::ThreadPool::global().parallel_for(rows, chunk);
}

// row(r) for every r in [0, rows).
template <class Row>
void parallel_rows(py::ssize_t rows, Row&& row) {
  parallel_chunks(rows, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) row(static_cast<py::ssize_t>(r));
  });
}

}  // namespace multidraft_bindings
