// The shell of every batched binding (module.cpp, rdk.cpp): rows spread over the core's thread
// pool (multidraft/batch/thread_pool.hpp) with the GIL released, so bodies must not touch Python
// objects; they read and write plain pointers taken beforehand.
#pragma once
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>

#include "multidraft/batch/thread_pool.hpp"

namespace multidraft_bindings {

namespace py = pybind11;

// Rows of light work, a pass or two over `row_size` numbers, are given to a thread only in chunks
// of at least kChunkElements numbers: waking a worker costs tens of microseconds. Measured on
// 2 cores with 64 rows of p and q: V = 500 took twice as long on 2 threads as on 1, V = 2000
// broke even, V = 4000 ran 1.4 times faster.
constexpr std::int64_t kChunkElements = std::int64_t{1} << 17;
inline std::int64_t light_rows(std::int64_t row_size) {
  return (kChunkElements + row_size - 1) / std::max<std::int64_t>(row_size, 1);
}

// chunk(begin, end) over contiguous chunks of [0, rows), each of at least min_rows rows (1 for
// heavy rows such as a max-flow, light_rows(V) for a pass over V numbers); `balanced` for heavy
// rows of uneven cost: one row per chunk, to whichever thread is free (ThreadPool::parallel_for).
// For bodies with per-chunk scratch.
template <class Chunk>
void parallel_chunks(py::ssize_t rows, std::int64_t min_rows, Chunk&& chunk, bool balanced = false) {
  py::gil_scoped_release release;
  multidraft::ThreadPool::global().parallel_for(rows, chunk, min_rows, balanced);
}

// row(r) for every r in [0, rows).
template <class Row>
void parallel_rows(py::ssize_t rows, std::int64_t min_rows, Row&& row, bool balanced = false) {
  parallel_chunks(
      rows, min_rows,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) row(static_cast<py::ssize_t>(r));
      },
      balanced);
}

}  // namespace multidraft_bindings
