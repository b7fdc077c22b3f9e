// Rows of a batch spread over the process's thread pool (detail/thread_pool.hpp), in chunks
// sized so that a woken thread has enough work to pay for its wake-up. Plain C++: a Python binding
// releases the GIL around the call, so the bodies must not touch Python objects.
#pragma once
#include <algorithm>
#include <cstdint>

#include "multidraft/detail/thread_pool.hpp"

namespace multidraft {

// Rows of light work, a pass or two over `row_size` numbers, are given to a thread only in chunks
// of at least kChunkElements numbers: waking a worker costs tens of microseconds
// (docs/benchmarks/bindings-internals.md, "Chunk size").
constexpr std::int64_t kChunkElements = std::int64_t{1} << 17;
inline std::int64_t light_rows(std::int64_t row_size) {
  return (kChunkElements + row_size - 1) / std::max<std::int64_t>(row_size, 1);
}

// chunk(begin, end) over contiguous chunks of [0, rows), each of at least min_rows rows (1 for
// heavy rows such as a max-flow, light_rows(V) for a pass over V numbers); `balanced` for heavy
// rows of uneven cost: one row per chunk, to whichever thread is free (ThreadPool::parallel_for).
// For bodies with per-chunk scratch.
template <class Chunk>
void parallel_chunks(std::int64_t rows, std::int64_t min_rows, Chunk&& chunk, bool balanced = false) {
  ThreadPool::global().parallel_for(rows, chunk, min_rows, balanced);
}

// row(r) for every r in [0, rows).
template <class Row>
void parallel_rows(std::int64_t rows, std::int64_t min_rows, Row&& row, bool balanced = false) {
  parallel_chunks(
      rows, min_rows,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) row(r);
      },
      balanced);
}

}  // namespace multidraft
