"""Real next-token (target, draft) distributions from a trained model pair, for the benchmark.

File format (one ``.npz``, written by ``scripts/train_pair.py``, default ``data/next_token_pairs.npz``):
``p`` (N, V) float64 target next-token probabilities (temperature 1) at N contexts; ``q`` (N, V)
float64 draft probabilities at the same contexts; ``target_logits`` (N, V) float32 raw target logits;
``token_counts`` (V,) int64 token frequencies in the training corpus; ``meta`` a 0-d string array
holding a JSON object (str -> str/int/float). No pickles: the file loads with ``allow_pickle=False``.

``python -m multidraft.bench --dataset PATH`` benchmarks on these pairs (regime ``"dataset"``):
each cell draws its ``--tokens`` contexts from the file with the cell's seed, truncates the draft to
its top-k like the synthetic regimes, and keeps the target whole.
"""
from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

import numpy as np

from .distributions import top_k

#: Rows of p and q may deviate from 1 by this much in the file (float32 softmax); they are renormalised.
FILE_SUM_TOLERANCE = 1e-3

_ARRAYS = ("p", "q", "target_logits", "token_counts", "meta")


@dataclasses.dataclass(frozen=True)
class NextTokenPairs:
    """Validated contents of a next-token-pairs file (see the module docstring for the fields)."""

    p: np.ndarray
    q: np.ndarray
    target_logits: np.ndarray
    token_counts: np.ndarray
    meta: Dict[str, Union[str, int, float]]

    @property
    def V(self) -> int:
        return self.p.shape[1]

    def __len__(self) -> int:
        return self.p.shape[0]


def _probability_rows(array: np.ndarray, name: str, path: Path) -> np.ndarray:
    array = np.asarray(array, dtype=np.float64)
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError(f"{path}: '{name}' has negative or non-finite entries")
    sums = array.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1)))
    if abs(sums[worst] - 1) > FILE_SUM_TOLERANCE:
        raise ValueError(f"{path}: row {worst} of '{name}' sums to {sums[worst]!r}, not 1 "
                         f"(tolerance {FILE_SUM_TOLERANCE:g})")
    return array / sums[:, None]  # float64 renormalisation so rows pass the package's 1e-6 check


def load_next_token_pairs(path: Union[str, Path]) -> NextTokenPairs:
    """Read and validate a next-token-pairs ``.npz`` file; ValueError says what is wrong and where."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file (make it with scripts/train_pair.py)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in _ARRAYS if k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, AttributeError) as error:
        raise ValueError(f"{path}: not a readable .npz file without pickles ({error})") from None
    missing = [k for k in _ARRAYS if k not in arrays]
    if missing:
        raise ValueError(f"{path}: missing array(s) {missing}; expected {list(_ARRAYS)}")
    p, q, logits, counts = (arrays[k] for k in _ARRAYS[:4])
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2:
        raise ValueError(f"{path}: 'p' must be (N, V) with N >= 1 and V >= 2, got shape {p.shape}")
    for name, array in (("q", q), ("target_logits", logits)):
        if array.shape != p.shape:
            raise ValueError(f"{path}: '{name}' has shape {array.shape}, but 'p' has {p.shape}")
    if not np.issubdtype(logits.dtype, np.floating) or not np.all(np.isfinite(logits)):
        raise ValueError(f"{path}: 'target_logits' must be finite floats")
    if counts.shape != (p.shape[1],) or not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 0):
        raise ValueError(f"{path}: 'token_counts' must be ({p.shape[1]},) non-negative integers, "
                         f"got shape {counts.shape} dtype {counts.dtype}")
    try:
        meta = json.loads(str(arrays["meta"]))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: 'meta' is not a JSON string ({error})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: 'meta' must be a JSON object, got {type(meta).__name__}")
    return NextTokenPairs(_probability_rows(p, "p", path), _probability_rows(q, "q", path),
                          logits.astype(np.float32), counts.astype(np.int64), meta)


@dataclasses.dataclass(frozen=True)
class DatasetRegime:
    """A benchmark regime whose (p, q) pairs are rows of a :class:`NextTokenPairs` file."""

    name: str
    path: str
    data: NextTokenPairs = dataclasses.field(repr=False, compare=False)
    description: str = "real next-token distributions of a trained (target, draft) pair"

    @classmethod
    def from_file(cls, path: Union[str, Path], name: str = "dataset") -> "DatasetRegime":
        return cls(name, str(path), load_next_token_pairs(path))

    def params(self) -> Dict[str, object]:
        keys = ("corpus", "vocab_size", "target_parameters", "draft_parameters", "target_held_out_perplexity",
                "draft_held_out_perplexity", "seed")
        info = {k: self.data.meta[k] for k in keys if k in self.data.meta}
        return {"name": self.name, "path": self.path, "contexts": len(self.data), "V": self.data.V,
                "description": self.description, **info}

    def sample_pairs(self, V: int, k: Optional[int], count: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
        """``count`` rows drawn with ``seed`` (without replacement while they last); q truncated to top-k."""
        if V != self.data.V:
            raise ValueError(f"regime {self.name!r}: the file has V = {self.data.V}, asked for V = {V}")
        rng = np.random.default_rng(seed)
        rows = rng.choice(len(self.data), size=count, replace=count > len(self.data))
        return self.data.p[rows].copy(), top_k(self.data.q[rows], k)
