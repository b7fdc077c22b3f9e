"""multidraft: lossless single- and multi-draft speculative sampling with a C++ core.

Notation: ``p`` is the target distribution, ``q`` the draft distribution ([GR]'s convention).
See ``multidraft.verifier`` for the verifier interface and ``multidraft.solve_otlp`` for exact
optimal-transport plans. Probabilities may be NumPy arrays or torch tensors of any float dtype on
any device (the verifiers, the acceptances and ``softmax`` then return tensors on that device:
docs/design/device-path.md); every entry point samples their rows normalised in float64, and
``multidraft.softmax`` turns logits into such rows.
"""
import sys as _sys

from ._isa import load_core as _load_core

# The core compiled for the best instruction set this CPU runs (see multidraft._isa), importable
# as multidraft._core wherever the package and its tests use it.
_core = _load_core()
_sys.modules[__name__ + "._core"] = _core
del _sys, _load_core

from . import khisti
from ._validation import row_seeds
from .global_resolution import GlobalResolution
from .logits import softmax
from .otlp import (
    MAX_LP_VARIABLES,
    MAX_NETWORK_ARCS,
    OTLPPlan,
    acceptance_rate,
    optimal_acceptance,
    optimal_subset,
    solve_otlp,
)
from .schemes import SCHEME_KINDS, DraftScheme, draft_scheme
from .threads import MAX_THREADS, get_num_threads, set_num_threads
from .verifiers import Verifier, verifier, verifier_names
from . import rdk  # [OOV]: out-of-vocabulary drafting (after verifiers, which it uses)

__version__ = "0.1.0"

__all__ = [
    "MAX_LP_VARIABLES",
    "MAX_NETWORK_ARCS",
    "MAX_THREADS",
    "SCHEME_KINDS",
    "DraftScheme",
    "GlobalResolution",
    "OTLPPlan",
    "Verifier",
    "acceptance_rate",
    "draft_scheme",
    "get_num_threads",
    "khisti",
    "optimal_acceptance",
    "optimal_subset",
    "rdk",
    "row_seeds",
    "set_num_threads",
    "softmax",
    "solve_otlp",
    "verifier",
    "verifier_names",
]
