// pybind11 bindings of [OOV] (RDK): vocabulary maps, the affinity matrix M and the RDK
// proposals. Inputs are validated by python/multidraft/rdk.py; these functions convert arrays,
// release the GIL around every loop and spread batched rows over the core's thread pool
// (parallel.hpp). Batched layout: distributions (B, V), seeds (B,).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "arrays.hpp"
#include "parallel.hpp"
#include "multidraft/oov/affinity_matrix.hpp"
#include "multidraft/oov/rdk_proposal.hpp"
#include "multidraft/core/rng.hpp"
#include "multidraft/oov/vocabulary_map.hpp"

namespace py = pybind11;
using namespace multidraft;

namespace {

using multidraft_bindings::Doubles;
using multidraft_bindings::Indices;
using multidraft_bindings::Ints;
using multidraft_bindings::Seeds;
using multidraft_bindings::light_rows;
using multidraft_bindings::parallel_rows;

template <class T>
py::array_t<T> to_array(const std::vector<T>& values) {
  py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

py::tuple to_tuple(const SparseRows& rows) {
  return py::make_tuple(to_array(rows.indptr), to_array(rows.indices), to_array(rows.values));
}

// Keeps the arrays of M alive while a CsrView points into them.
struct Csr {
  Ints indptr;
  Indices indices;
  Doubles values;
  CsrView view() const { return {indptr.shape(0) - 1, indptr.data(), indices.data(), values.data()}; }
};

// (B, Vd) drafter rows -> (B, Vt) target rows plus the shared mass q(I) of each row.
py::tuple project(const Doubles& q, const Ints& draft_to_target, std::int64_t target_size, bool renormalise) {
  const py::ssize_t B = q.shape(0), Vd = q.shape(1);
  py::array_t<double> out({B, static_cast<py::ssize_t>(target_size)});
  py::array_t<double> mass(B);
  const double* qq = q.data();
  const std::int64_t* map = draft_to_target.data();
  double *o = out.mutable_data(), *m = mass.mutable_data();
  parallel_rows(B, light_rows(Vd + target_size), [&](py::ssize_t r) {
    m[r] = renormalise ? tli_projection(qq + r * Vd, Vd, map, target_size, o + r * target_size)
                       : masked_projection(qq + r * Vd, Vd, map, target_size, o + r * target_size);
  });
  return py::make_tuple(out, mass);
}

py::array_t<double> proposal_rows(const Csr& M, const Doubles& q_prime) {
  const py::ssize_t B = q_prime.shape(0), V = q_prime.shape(1);
  py::array_t<double> out({B, V});
  const CsrView view = M.view();
  const double* q = q_prime.data();
  double* o = out.mutable_data();
  parallel_rows(B, light_rows(V), [&](py::ssize_t r) { rdk_proposal(view, q + r * V, o + r * V); });
  return out;
}

// n i.i.d. two-stage draws per row (one generator per row, seeded by seeds[r]) -> (B, n).
Ints sample_rows(const Csr& M, const Doubles& q_prime, int n, const Seeds& seeds) {
  const py::ssize_t B = q_prime.shape(0), V = q_prime.shape(1);
  Ints out({B, static_cast<py::ssize_t>(n)});
  const CsrView view = M.view();
  const double* q = q_prime.data();
  const std::uint64_t* s = seeds.data();
  std::int64_t* o = out.mutable_data();
  parallel_rows(B, light_rows(n * V), [&](py::ssize_t r) {
    Rng rng(s[r]);
    for (int j = 0; j < n; ++j) o[r * n + j] = rdk_sample(view, q + r * V, rng);
  });
  return out;
}

py::array_t<double> taylor_rows(const Doubles& q_prime, const Doubles& prior, double n_eff) {
  const py::ssize_t B = q_prime.shape(0), V = q_prime.shape(1);
  py::array_t<double> out({B, V});
  const double *q = q_prime.data(), *pi = prior.data();
  double* o = out.mutable_data();
  parallel_rows(B, light_rows(V), [&](py::ssize_t r) { taylor_proposal(q + r * V, pi, V, n_eff, o + r * V); });
  return out;
}

}  // namespace

void bind_rdk(py::module_& m) {
  auto rdk = m.def_submodule("rdk", "[OOV] (RDK): vocabulary maps, affinity matrix, proposals");
  rdk.def("frequency_ranked", [](const Ints& counts, std::int64_t size) {
    std::vector<std::int64_t> kept;
    {
      py::gil_scoped_release release;
      kept = frequency_ranked(counts.data(), counts.shape(0), size);
    }
    return to_array(kept);
  }, py::arg("counts"), py::arg("size"));
  rdk.def("project", &project, py::arg("q"), py::arg("draft_to_target"), py::arg("target_size"), py::arg("renormalise"));
  rdk.def("covariance_top_k", [](const Doubles& samples, const Ints& rows, std::int64_t k) {
    SparseRows scores;
    {
      py::gil_scoped_release release;
      scores = covariance_top_k(samples.data(), samples.shape(0), samples.shape(1), rows.data(), rows.shape(0), k);
    }
    return to_tuple(scores);
  }, py::arg("samples"), py::arg("rows"), py::arg("k"));
  rdk.def("affinity_softmax", [](const Ints& indptr, const Indices& indices, const Doubles& scores, const Ints& rows,
                                 std::int64_t V, double tau) {
    SparseRows kept, M;
    kept.cols = V;
    kept.indptr.assign(indptr.data(), indptr.data() + indptr.shape(0));
    kept.indices.assign(indices.data(), indices.data() + indices.shape(0));
    kept.values.assign(scores.data(), scores.data() + scores.shape(0));
    {
      py::gil_scoped_release release;
      M = affinity_softmax(kept, rows.data(), V, tau);
    }
    return to_tuple(M);
  }, py::arg("indptr"), py::arg("indices"), py::arg("scores"), py::arg("rows"), py::arg("V"), py::arg("tau"));
  rdk.def("proposal", [](const Ints& indptr, const Indices& indices, const Doubles& values, const Doubles& q_prime) {
    return proposal_rows(Csr{indptr, indices, values}, q_prime);
  }, py::arg("indptr"), py::arg("indices"), py::arg("values"), py::arg("q_prime"));
  rdk.def("sample", [](const Ints& indptr, const Indices& indices, const Doubles& values, const Doubles& q_prime, int n,
                       const Seeds& seeds) { return sample_rows(Csr{indptr, indices, values}, q_prime, n, seeds); },
          py::arg("indptr"), py::arg("indices"), py::arg("values"), py::arg("q_prime"), py::arg("n"), py::arg("seeds"));
  rdk.def("taylor", &taylor_rows, py::arg("q_prime"), py::arg("prior"), py::arg("n_eff"));
}
