"""Enumerated laws of a target's first generated tokens under vLLM's sampling parameters, and the
chi-square test of sampled sequences against them."""
from __future__ import annotations

from collections import Counter
from typing import Dict, Sequence, Tuple

import numpy as np
from scipy import stats


def processed_law(logits, temperature: float, top_p: float):
    """The law vLLM samples from: logits / temperature, then its top-p mask (float32)."""
    import torch
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    logits = logits.to(torch.float32) / temperature
    top_p_rows = torch.full((logits.shape[0],), top_p)
    return apply_top_k_top_p_pytorch(logits.clone(), None, top_p_rows).softmax(dim=-1).double()


def sequence_law(model_dir: str, prompt: Sequence[int], steps: int, temperature: float, top_p: float,
                 floor: float = 1e-7) -> Dict[Tuple[int, ...], float]:
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
            probs = processed_law(model(ids).logits[:, -1], temperature, top_p).numpy()
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
