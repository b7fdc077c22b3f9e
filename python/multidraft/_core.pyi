"""Type stub of the C++ core (cpp/bindings/module.cpp). Arrays are C-contiguous float64/int64.

Batched layout: p (B, V); q (B, rows, V) with rows = n for independent drafts, else 1;
drafts (B, n) int64; seeds (B,) uint64. ``kind``: "iid" | "without_replacement" | "independent" | "hub" | "topk".
Batched functions (and plan ``transport`` of M tuples) spread their rows over the thread pool
with the GIL released; results do not depend on the thread count.
"""
from types import ModuleType

import numpy as np
import numpy.typing as npt

#: Test hooks, not a public API: objective_derivatives(q, n, bases, slack, a, v, interpolation, max_terms,
#: coarse=False) (the grouped objective's derivatives at a point, global_resolution/objective.hpp) and
#: global_resolution_plan(..., unshifted_limit=600.0, interpolation=True, acceptance_enumeration=inf) (a GlobalResolutionPlan with
#: those switches).
_testing: ModuleType

MAX_NETWORK_ARCS: float
MAX_THREADS: int

def set_num_threads(k: int) -> None:
    """Threads of the batch pool (batch/thread_pool.hpp), the calling thread included; 1 <= k <= MAX_THREADS."""
def get_num_threads() -> int: ...

def optimal_subset(
    p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], n: int, kind: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]: ...
def tuple_probability(
    q: npt.NDArray[np.float64], kind: str, n: int, drafts: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]: ...
def sample_drafts(
    q: npt.NDArray[np.float64], kind: str, n: int, seeds: npt.NDArray[np.uint64]
) -> npt.NDArray[np.int64]: ...
def sample_rows(laws: npt.NDArray[np.float64], seeds: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]: ...
def check_drawable(q: npt.NDArray[np.float64], kind: str, n: int, drafts: npt.NDArray[np.int64]) -> None:
    """Raise ValueError unless every tuple of drafts (M, n) has positive probability under the scheme
    (the check of every verifier, draft_scheme.hpp)."""
def equal_row_runs(p: npt.NDArray[np.float64], q: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Starts of the runs of consecutive equal (p, q) rows, then B (batch/row_runs.hpp)."""
class VerifierOptions:
    """Options of a batched verifier call: the draft scheme, RRS without replacement, khisti's
    truncation (-1: none), the work limit of enumerating acceptances, and Global Resolution's
    (tau, max_iterations, max_terms, paper_threshold, exact, fallback)."""
    def __init__(
        self, kind: str = "iid", without_replacement: bool = False, truncation: int = -1, max_work: float = 1e8,
        tau: float = 1e-3,
        max_iterations: int = 50, max_terms: float = 2e6, paper_threshold: bool = False, exact: bool = True,
        fallback: bool = False,
    ) -> None: ...

def transport(
    method: str, p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], drafts: npt.NDArray[np.int64],
    options: VerifierOptions = ...,
    p_scale: npt.NDArray[np.float64] | None = None, q_scale: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Batched output laws (B, V) of a verifier: method in sps, naive, rrs, spectr, spechub,
    khisti, maxflow, maxflow_cs, global_resolution; consecutive equal (p, q) rows share one plan;
    drafts of probability zero raise ValueError. The rows may be unnormalised with their scales
    (B,) (the laws are p_scale[:, None] * p and q_scale[:, None] * q; `row_scales`): sps, naive
    and global_resolution read them in place, the other methods from normalised copies."""
def verify(
    method: str, p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], drafts: npt.NDArray[np.int64],
    seeds: npt.NDArray[np.uint64], options: VerifierOptions = ...,
    p_scale: npt.NDArray[np.float64] | None = None, q_scale: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.int64]:
    """One verified token per row, drawn from the row's seed without writing the law where the
    plan samples directly (sps, naive, global_resolution); rows and scales as for `transport`."""
def verify_checked(
    method: str, p: npt.NDArray[np.floating], q: npt.NDArray[np.floating], drafts: npt.NDArray[np.int64],
    seeds: npt.NDArray[np.uint64], options: VerifierOptions, p_tolerance: float, q_tolerance: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]] | None:
    """Tokens (B,) and whether each is a draft, p and q (float32 / float64, (V,) or (B, V), any strides)
    checked in the same call (batch/checked_rows.hpp); None when an array, a row or a draft is refused."""
def transport_checked(
    method: str, p: npt.NDArray[np.floating], q: npt.NDArray[np.floating], drafts: npt.NDArray[np.int64],
    options: VerifierOptions, p_tolerance: float, q_tolerance: float,
) -> npt.NDArray[np.float64] | None:
    """Laws (B, V) of the rows at their drafts, checked as in `verify_checked`; None when refused."""
def acceptance_rate_checked(
    p: npt.NDArray[np.floating], q: npt.NDArray[np.floating], p_tolerance: float, q_tolerance: float,
) -> npt.NDArray[np.float64] | None:
    """sum_i min(p_i, q_i) (B,) of rows checked as in `verify_checked`; None when refused."""
def acceptance(
    method: str, p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], n: int, options: VerifierOptions = ...,
) -> npt.NDArray[np.float64]:
    """Exact acceptance (B,) of a verifier method per row (registry/verifier_registry.hpp)."""
def row_scales(x: npt.NDArray[np.float64], tolerance: float) -> npt.NDArray[np.float64] | None:
    """C-contiguous float64 (B, V) -> 1 / row sums (B,), or None when a row is refused as by
    `normalised_rows`; x times its scale is, entry by entry, the row normalised_rows writes."""
def normalised_rows(x: npt.NDArray[np.floating], tolerance: float) -> npt.NDArray[np.float64] | None:
    """float32/float64 (B, V), any strides -> rows / their sums in float64, or None when a row has
    a non-finite or negative entry or a sum farther than `tolerance` from 1 (distribution.hpp)."""
def kseq_rho(p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.float64]:
    """SpecTr's K-SEQ parameter rho* (B,) per row (spectr.hpp)."""

class RelaxedPlan:
    """[GR] Section 5.2 max-flow plan completed by Eq. (3); network "sets" or "tuples"."""
    def __init__(self, p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], kind: str, n: int, network: str) -> None: ...
    @property
    def alpha(self) -> float: ...
    def transport(self, drafts: npt.NDArray[np.int64], V: int) -> npt.NDArray[np.float64]: ...
    def sample(self, drafts: npt.NDArray[np.int64], seeds: npt.NDArray[np.uint64], V: int) -> npt.NDArray[np.int64]: ...

class SlacknessPlan:
    """[GR] Theorem 5.1 outer/inner networks, each solved once on first use (by whichever thread
    asks first), completed by Eq. (8)."""
    def __init__(self, p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], kind: str, n: int) -> None: ...
    @property
    def alpha(self) -> float: ...
    def transport(self, drafts: npt.NDArray[np.int64], V: int) -> npt.NDArray[np.float64]: ...
    def sample(self, drafts: npt.NDArray[np.int64], seeds: npt.NDArray[np.uint64], V: int) -> npt.NDArray[np.int64]: ...

class GlobalResolutionPlan:
    """[GR] Algorithm 1 (Global Resolution) for n i.i.d. drafts; see multidraft.GlobalResolution."""
    def __init__(
        self, p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], n: int, tau: float, max_iterations: int,
        max_terms: float, paper_threshold: bool, exact: bool = True,
    ) -> None: ...
    @property
    def alpha(self) -> float: ...
    @property
    def kept(self) -> float: ...
    @property
    def alpha_error_bound(self) -> float: ...
    @property
    def exact(self) -> bool: ...
    @property
    def law_error_bound(self) -> float: ...
    @property
    def alpha_star(self) -> float: ...
    @property
    def success(self) -> bool: ...
    @property
    def l1_bound(self) -> float: ...
    @property
    def acceptance_bound(self) -> float: ...
    @property
    def diagnostics(self) -> dict[str, dict[str, float | int | bool]]: ...
    def transport(self, drafts: npt.NDArray[np.int64], V: int) -> npt.NDArray[np.float64]: ...
    def sample(self, drafts: npt.NDArray[np.int64], seeds: npt.NDArray[np.uint64], V: int) -> npt.NDArray[np.int64]: ...

class _Rdk:
    """The submodule ``_core.rdk`` (cpp/bindings/rdk.cpp, [OOV]). CSR: indptr int64, indices int32."""

    @staticmethod
    def frequency_ranked(counts: npt.NDArray[np.int64], size: int) -> npt.NDArray[np.int64]: ...
    @staticmethod
    def project(
        q: npt.NDArray[np.float64], draft_to_target: npt.NDArray[np.int64], target_size: int, renormalise: bool
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
    @staticmethod
    def covariance_top_k(
        samples: npt.NDArray[np.float64], rows: npt.NDArray[np.int64], k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float64]]: ...
    @staticmethod
    def affinity_softmax(
        indptr: npt.NDArray[np.int64], indices: npt.NDArray[np.int32], scores: npt.NDArray[np.float64],
        rows: npt.NDArray[np.int64], V: int, tau: float
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float64]]: ...
    @staticmethod
    def proposal(
        indptr: npt.NDArray[np.int64], indices: npt.NDArray[np.int32], values: npt.NDArray[np.float64],
        q_prime: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]: ...
    @staticmethod
    def sample(
        indptr: npt.NDArray[np.int64], indices: npt.NDArray[np.int32], values: npt.NDArray[np.float64],
        q_prime: npt.NDArray[np.float64], n: int, seeds: npt.NDArray[np.uint64]
    ) -> npt.NDArray[np.int64]: ...
    @staticmethod
    def taylor(q_prime: npt.NDArray[np.float64], prior: npt.NDArray[np.float64], n_eff: float) -> npt.NDArray[np.float64]: ...

rdk: _Rdk
