"""Enumerated laws of a target's first generated tokens under vLLM's sampling parameters, and the
chi-square test of sampled sequences against them."""
from __future__ import annotations

from collections import Counter
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
from scipy import stats


def processed_law(logits, temperature: float, top_p: float, top_k: Optional[int] = None):
    """The law vLLM samples from: logits / temperature, then its top-k and top-p masks (float32)."""
    import torch
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    logits = logits.to(torch.float32) / temperature
    rows = logits.shape[0]
    k = None if top_k is None else torch.full((rows,), top_k)
    p = None if top_p >= 1.0 else torch.full((rows,), top_p)
    return apply_top_k_top_p_pytorch(logits.clone(), k, p).softmax(dim=-1).double()


def sequence_law(model_dir: str, prompt: Sequence[int], steps: int, temperature: float, top_p: float,
                 top_k: Optional[int] = None, floor: float = 1e-7) -> Dict[Tuple[int, ...], float]:
    """P(first ``steps`` generated tokens = s) for every s of probability above ``floor``, by
    enumeration with the target in float32 (prefixes below ``floor`` are dropped: their mass is
    the test's remainder cell)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    law = {(): 1.0}
    with torch.no_grad():
        for _ in range(steps):
            prefixes = list(law)
            ids = torch.tensor([list(prompt) + list(s) for s in prefixes])
            probs = processed_law(model(ids).logits[:, -1], temperature, top_p, top_k).numpy()
            law = {s + (int(t),): law[s] * probs[i, t] for i, s in enumerate(prefixes)
                   for t in np.flatnonzero(probs[i] * law[s] > floor)}
    return law


def pooled_pvalue(observed, expected, min_expected: float = 5.0) -> float:
    """Pearson's p-value of counts ``observed`` against ``expected`` (same total), the cells
    expected below ``min_expected`` pooled into one; 0 when a cell expecting nothing was seen."""
    observed, expected = np.asarray(observed, dtype=float), np.asarray(expected, dtype=float)
    small = expected < min_expected
    observed = np.append(observed[~small], observed[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
    if expected[-1] <= 0:
        if observed[-1] > 0:
            return 0.0
        observed, expected = observed[:-1], expected[:-1]
    return float(stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue)


def chi_square(samples: Sequence[Tuple[int, ...]], law: Dict[Tuple[int, ...], float], min_expected: float = 5.0):
    """p-value of Pearson's test of ``samples`` against ``law``; cells expected below
    ``min_expected`` and the sequences outside ``law`` (its dropped mass) are pooled."""
    n = len(samples)
    counts = Counter(samples)
    cells = list(law)
    observed = [counts[s] for s in cells]
    expected = [law[s] * n for s in cells]
    observed.append(n - sum(observed))  # the sequences the enumeration dropped
    expected.append(max(n - sum(expected), 0.0))
    return pooled_pvalue(observed, expected, min_expected)


def two_sample(first: Sequence[Tuple[int, ...]], second: Sequence[Tuple[int, ...]], min_count: int = 10):
    """p-value of the chi-square test that two samples of sequences share one law; sequences seen
    fewer than ``min_count`` times in both samples together are pooled into one cell."""
    a, b = Counter(first), Counter(second)
    cells = [s for s in set(a) | set(b) if a[s] + b[s] >= min_count]
    table = [[a[s] for s in cells], [b[s] for s in cells]]
    rest = (len(first) - sum(table[0]), len(second) - sum(table[1]))
    if sum(rest) >= min_count:
        table[0].append(rest[0])
        table[1].append(rest[1])
    return float(stats.chi2_contingency(np.array(table)).pvalue)
