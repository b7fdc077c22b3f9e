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


def chi_square(samples: Sequence[Tuple[int, ...]], law: Dict[Tuple[int, ...], float], min_expected: float = 5.0):
    """p-value of Pearson's test of ``samples`` against ``law``; cells expected below
    ``min_expected`` and sequences outside ``law`` are pooled into one remainder cell."""
    n = len(samples)
    counts = Counter(samples)
    big = [s for s, prob in law.items() if prob * n >= min_expected]
    observed = [counts[s] for s in big]
    expected = [law[s] * n for s in big]
    rest_observed, rest_expected = n - sum(observed), n - sum(expected)
    if rest_expected >= min_expected:
        observed.append(rest_observed)
        expected.append(rest_expected)
    elif rest_observed > rest_expected + 5 * np.sqrt(max(rest_expected, 1.0)):
        return 0.0  # sequences the law gives (almost) no mass came out often
    expected = np.array(expected) * (n / sum(expected))
    return float(stats.chisquare(observed, expected).pvalue)


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
