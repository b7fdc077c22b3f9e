"""RDK benchmark ([OOV]): acceptance against pruning level, and build / proposal times.

``python -m multidraft.bench --rdk [--quick] [--dataset PATH]``. The experiment takes arrays
(``p``, ``q``, ``target_logits``, ``token_counts``), so it runs on the synthetic heavy-tailed
generator below ([OOV] Section 6.1; our protocol, docs/benchmarks/rdk.md) or on real next-token distributions loaded
by ``multidraft.bench.dataset.load_next_token_pairs`` (the file ``scripts/train_pair.py`` writes).

Contexts are split three ways: *calibration* (Omega, the covariance of the target's logits),
*tuning* (held-out pairs on which tau and the first-order ``n_eff`` are selected) and *test*
(where the acceptance is reported). The pruned drafter keeps the FR-most-frequent tokens of
``token_counts``. Mean acceptance sum_t min(p_t, r_t) over test contexts for every proposal r:

- ``masked``: q on I, not renormalised (the "pruning without redistribution" baseline);
- ``tli``: Eq. (1), which is also the FR-pruned drafter itself;
- ``rdk``: full RDK M^T q', M from Eq. (2) with top-k rows, tau selected on the tuning split;
- ``rdk_corr``: the same with Omega the correlation ("normalized covariance", Appendix C.3);
- ``taylor``: Eq. (3) verbatim (prior = unigram from ``token_counts``, n_eff = |T|);
- ``taylor_tuned``: Eq. (3) with n_eff selected on the tuning split (unigram prior);
- ``taylor_oracle``: Eq. (3) with the live target p as prior and n_eff = |T| (metric only: the
  target is unknown at draft time).
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import _device, rdk
from ..otlp import acceptance_rate
from .dataset import load_next_token_pairs
from .report import machine_info

KEPT_FRACTIONS = (1.0, 0.5, 0.25, 0.125, 0.05, 0.01, 0.0025)
"""Kept fractions of the vocabulary; 0.25 kept = 75% pruned."""
TAUS = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
"""Temperature grid of Eq. (2) (logit covariances are O(1-10), correlations in [-1, 1])."""
#: Temperatures of M tried on held-out contexts by :func:`calibrated_affinity` (the smallest is about TLI).
CALIBRATION_TAUS = (0.01, 0.03, 0.1, 0.3, 1.0)

N_EFFS = (0.01, 0.1, 1.0, 10.0, 100.0)
"""Grid of n_eff for the tuned first-order form (the faithful value |T| is reported separately)."""
METHODS = ("masked", "tli", "rdk", "rdk_corr", "taylor", "taylor_tuned", "taylor_oracle")
OMEGA = {"rdk": "covariance", "rdk_corr": "correlation"}

MODES = {
    "quick": {"vocab": 1000, "contexts": 240, "top_k": 32, "timing_vocab": [32000], "timing_rows": 0.25,
              "timing_contexts": 16, "large_vocab": 0},
    "full": {"vocab": 4000, "contexts": 1200, "top_k": 64, "timing_vocab": [32000, 128000], "timing_rows": 0.25,
             "timing_contexts": 32, "large_vocab": 200000},
}


# ----------------------------------------------------------------------------- data

def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def top_quarter_mass(z: np.ndarray) -> float:
    """Mean over rows of the mass of softmax(z) on its top 25% of tokens ([OOV] Fig. 5)."""
    p = softmax(z)
    return float(np.sort(p, axis=1)[:, ::-1][:, : max(1, z.shape[1] // 4)].sum(axis=1).mean())


def synthetic_pairs(V: int, contexts: int, seed: int = 0, rank: int = 8, mean_ratio: float = 1.0,
                    target_top_quarter: float = 0.95, draft_noise: float = 0.5,
                    corpus_tokens: int = 10**6) -> Dict[str, np.ndarray]:
    """Heavy-tailed synthetic next-token pairs ([OOV] Section 6.1; our protocol, docs/benchmarks/rdk.md).

    Target logits z = s * (mu + F L + e) per context: mu ~ ``mean_ratio`` * t_5 per token (the
    frequency imbalance FR pruning exploits), a rank-``rank`` factor term F L (F ~ N(0, 1) per
    context, L ~ 0.6 N(0, 1) per token: tokens that co-vary, which M can learn) and e ~ t_5 noise.
    The scale s is set by bisection so that the top 25% of each context's tokens hold
    ``target_top_quarter`` of its mass (95%, Fig. 5) on the first 8 contexts; without it the t_5
    extremes make the target ever more peaked as V grows. Target p = softmax(z); drafter
    q = softmax(z + N(0, draft_noise^2)). ``token_counts``: ``corpus_tokens`` tokens drawn from the
    mean target. Returns the dataset fields ``p``, ``q`` (contexts, V) float64, ``target_logits``
    float32, ``token_counts`` (V,) int64, and ``scale`` (s).
    """
    rng = np.random.default_rng(seed)
    mu = mean_ratio * rng.standard_t(5, size=V)
    loadings = 0.6 * rng.normal(size=(rank, V))
    base = mu + rng.normal(size=(contexts, rank)) @ loadings + rng.standard_t(5, size=(contexts, V))
    low, high = 1e-3, 10.0  # the top-quarter mass increases with s
    for _ in range(50):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if top_quarter_mass(middle * base[:8]) < target_top_quarter else (low, middle)
    z = high * base
    p = softmax(z)
    q = softmax(z + draft_noise * rng.normal(size=z.shape))
    counts = rng.multinomial(corpus_tokens, p.mean(axis=0) / p.mean(axis=0).sum())
    return {"p": p, "q": q, "target_logits": z.astype(np.float32), "token_counts": counts.astype(np.int64),
            "scale": np.float64(high)}


def split(n: int, seed: int):
    """Disjoint (calibration, tuning, test) context indices: 50% / 25% / 25%."""
    order = np.random.default_rng(seed).permutation(n)
    a, b = n // 2, n // 2 + n // 4
    if n < 8:
        raise ValueError(f"need at least 8 contexts for the calibration/tuning/test split, got {n}")
    return order[:a], order[a:b], order[b:]


# ----------------------------------------------------------------------------- experiment

def calibrated_affinity(kept, logits, p, q, top_k: int = 8, taus: Sequence[float] = CALIBRATION_TAUS):
    """RDK's M for a drafter of the target ids ``kept``, as the generation and serving benchmarks
    build it: Eq. (2) with the correlation of the target's ``logits`` at calibration contexts, the
    top ``top_k`` entries of each shared row (so tau -> 0 tends to TLI), its temperature chosen
    among ``taus`` by the single-draft acceptance of the pruned proposal at held-out contexts
    (target laws ``p``, unpruned drafter laws ``q``; ``multidraft.rdk.select_temperature``).

    Returns ``(M, tau, the held-out acceptance at each of taus)``.
    """
    kept = np.asarray(kept, dtype=np.int64)
    V = np.asarray(logits).shape[1]
    scores = rdk.affinity_scores(logits, top_k=top_k, rows=np.sort(kept), omega="correlation")
    q_prime = rdk.VocabularyMap.pruned(kept, V).tli(q)
    tau, means = rdk.select_temperature(scores, taus, p, q_prime)
    return scores.matrix(tau), tau, means


def acceptance_vs_pruning(p, q, target_logits, token_counts, kept_fractions: Sequence[float] = KEPT_FRACTIONS,
                          taus: Sequence[float] = TAUS, top_k: int = 64, n_effs: Sequence[float] = N_EFFS,
                          full_rdk: bool = True, seed: int = 0) -> List[Dict[str, float]]:
    """Mean acceptance of every method at every kept fraction (one dict per fraction).

    ``p``, ``q`` (N, V): target and drafter next-token distributions at N contexts;
    ``target_logits`` (N, V): the target's logits there (Omega); ``token_counts`` (V,): corpus
    frequencies (FR pruning, unigram prior). ``full_rdk=False`` skips M (for huge V).
    Each row also reports the target mass outside the kept set (``oov_mass``), the selected tau
    and n_eff, and the time to build M.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    N, V = p.shape
    calibration, tuning, test = split(N, seed)
    prior = rdk.unigram_prior(token_counts)
    scores, build_seconds = {}, {}
    for method, omega in (OMEGA.items() if full_rdk else ()):
        start = time.perf_counter()
        scores[method] = rdk.affinity_scores(np.asarray(target_logits)[calibration], min(top_k, V), omega=omega)
        build_seconds[method] = time.perf_counter() - start
    rows = []
    for fraction in kept_fractions:
        kept = max(1, int(math.ceil(fraction * V)))
        vmap = rdk.VocabularyMap.frequency_ranked(token_counts, kept)
        shared_mass = vmap.shared_mass(q)
        usable = shared_mass > 0  # q(I) = 0: no draft at that context (the target samples)
        tune, held = tuning[usable[tuning]], test[usable[test]]
        q_tune, q_test = vmap.tli(q[tune]), vmap.tli(q[held])
        row: Dict[str, float] = {"kept": kept, "kept_fraction": fraction, "pruned_percent": 100 * (1 - kept / V),
                                 "oov_mass": float(1 - p[held][:, vmap.shared].sum(axis=1).mean()),
                                 "contexts": int(held.size)}
        row["masked"] = float(np.mean(rdk.masked_acceptance(p[held], vmap.masked(q[held]))))
        row["tli"] = float(np.mean(acceptance_rate(p[held], q_test)))
        for method, all_rows in scores.items():
            restricted = all_rows.restrict(vmap.shared)
            tau, _ = rdk.select_temperature(restricted, taus, p[tune], q_tune)
            row[f"{method}_tau"] = tau
            row[f"{method}_build_seconds"] = build_seconds[method]
            row[method] = float(np.mean(acceptance_rate(p[held], restricted.matrix(tau).proposal(q_test))))
        row["taylor"] = float(np.mean(acceptance_rate(p[held], rdk.taylor_proposal(q_test, prior))))
        tuned = [np.mean(acceptance_rate(p[tune], rdk.taylor_proposal(q_tune, prior, n))) for n in n_effs]
        n_eff = float(n_effs[int(np.argmax(tuned))])
        row["taylor_n_eff"] = n_eff
        row["taylor_tuned"] = float(np.mean(acceptance_rate(p[held], rdk.taylor_proposal(q_test, prior, n_eff))))
        row["taylor_oracle"] = float(np.mean([acceptance_rate(p[c], rdk.taylor_proposal(q_test[k], p[c]))
                                              for k, c in enumerate(held)]))
        rows.append(row)
    return rows


PER_TOKEN = ("tli", "rdk_proposal", "two_stage_sample", "taylor", "verify")
"""The per-token calls timed, in the tables' order."""


def per_token(vmap, M, prior, p, q, rng_seed: int, tokens: int, sync=None) -> Dict[str, Tuple[float, float]]:
    """``{call: (median milliseconds, mean bytes read from the device to the host)}`` of each
    per-token call over ``tokens`` positions, each on its own (fresh) row of ``p`` and ``q`` (NumPy
    arrays, or tensors on a device: ``sync`` then waits for it)."""
    q_prime = vmap.tli(q)
    p_prime = M.proposal(q_prime)
    drafts = M.sample(q_prime, 1, list(range(rng_seed, rng_seed + q_prime.shape[0])))
    calls = {"tli": lambda b: vmap.tli(q[b]), "rdk_proposal": lambda b: M.proposal(q_prime[b]),
             "two_stage_sample": lambda b: M.sample(q_prime[b], 1, b),
             "taylor": lambda b: rdk.taylor_proposal(q_prime[b], prior),
             "verify": lambda b: rdk.verify(p[b], p_prime[b], drafts[b], b)}
    out = {}
    for name in PER_TOKEN:
        times, before = [], _device.host_bytes_read()
        for b in range(tokens):
            start = time.perf_counter()
            calls[name](b)
            if sync is not None:
                sync()
            times.append(time.perf_counter() - start)
        out[name] = (1e3 * float(np.median(times)), (_device.host_bytes_read() - before) / tokens)
    return out


def timing(V: int, contexts: int = 32, rows_fraction: float = 0.25, top_k: int = 32, tokens: int = 50,
           seed: int = 0, device: Optional[str] = None) -> Dict[str, float]:
    """Build and per-token times (seconds) at vocabulary V, sparse top-k M (never dense V x V).

    M's rows are the FR-kept set (``rows_fraction`` of V; other rows are identity rows), from
    ``contexts`` calibration logit vectors. Per-token times are medians over ``tokens`` drafted
    positions: full RDK p' = M^T q', one two-stage draw, Eq. (3), TLI, and speculative sampling's
    verify with the dense proposal (residual over all V). With a torch ``device`` the same calls on
    float32 tensors there (as a model's softmax gives them) are timed too, keys ``tensor_*``.
    """
    rng = np.random.default_rng(seed)
    logits = rng.standard_t(5, size=(contexts + tokens, V))
    p, q = softmax(logits[contexts:]), softmax(logits[contexts:] + 0.5 * rng.normal(size=(tokens, V)))
    counts = rng.integers(0, 1000, V)
    vmap = rdk.VocabularyMap.frequency_ranked(counts, max(1, int(rows_fraction * V)))
    start = time.perf_counter()
    scores = rdk.affinity_scores(logits[:contexts], top_k, vmap.shared)
    covariance = time.perf_counter() - start
    start = time.perf_counter()
    M = scores.matrix(1.0)
    softmax_seconds = time.perf_counter() - start
    prior = rdk.unigram_prior(counts)
    row = {"V": V, "rows": int(vmap.shared.size), "top_k": top_k, "contexts": contexts, "nnz": M.nnz,
           "covariance_topk_s": covariance, "softmax_s": softmax_seconds}
    row.update({f"{name}_ms": ms for name, (ms, _) in per_token(vmap, M, prior, p, q, seed, tokens).items()})
    if device is not None:
        import torch

        on = {name: torch.tensor(x, dtype=torch.float32, device=device) for name, x in (("p", p), ("q", q))}
        M.proposal(on["q"][:1])  # M^T is copied to the device once, before the timed calls
        measured = per_token(vmap, M, torch.tensor(prior, device=device), on["p"], on["q"], seed, tokens,
                             functools.partial(_device.synchronize, device))
        for name, (ms, read) in measured.items():
            row[f"tensor_{name}_ms"], row[f"tensor_{name}_bytes"] = ms, read
    return row


# ----------------------------------------------------------------------------- report

LABELS = {"masked": "masked", "tli": "TLI (= FR-pruned drafter)", "rdk": "RDK, cov", "rdk_corr": "RDK, corr",
          "taylor": "Eq. 3, n_eff=|T|", "taylor_tuned": "Eq. 3, tuned n_eff", "taylor_oracle": "Eq. 3, oracle p"}


def acceptance_table(rows: List[Dict[str, float]]) -> str:
    methods = [m for m in METHODS if m in rows[0]]
    head = ["kept", "pruned", "target OOV mass", *(LABELS[m] for m in methods), "tau (cov / corr)", "n_eff"]
    # a "|" inside a cell (the label "n_eff=|T|") must be escaped, else the row has one cell too many
    lines = ["| " + " | ".join(h.replace("|", "\\|") for h in head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["kept"]), f"{r['pruned_percent']:.2f}%", f"{r['oov_mass']:.3f}",
                 *(f"{r[m]:.4f}" for m in methods), " / ".join(f"{r[m + '_tau']:g}" for m in OMEGA if m in r) or "-",
                 f"{r['taylor_n_eff']:g}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


PER_TOKEN_LABELS = ("TLI (ms)", "RDK M^T q' (ms)", "two-stage draw (ms)", "Eq. 3 (ms)", "sps verify (ms)")


def timing_table(rows: List[Dict[str, float]]) -> str:
    head = ["V", "rows of M (kept)", "top-k", "calibration contexts", "Omega top-k build (s)", "softmax (s)",
            *PER_TOKEN_LABELS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join([str(r["V"]), str(r["rows"]), str(r["top_k"]), str(r["contexts"]),
                                        f"{r['covariance_topk_s']:.2f}", f"{r['softmax_s']:.3f}",
                                        *(f"{r[name + '_ms']:.3f}" for name in PER_TOKEN)]) + " |")
    return "\n".join(lines)


def tensor_table(rows: List[Dict[str, float]]) -> str:
    """Per-token medians on tensors beside NumPy's and the bytes each call reads on the host:
    "tensor ms (tensor / NumPy), bytes"."""
    head = ["V", *PER_TOKEN_LABELS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"{r['tensor_' + name + '_ms']:.3f} ({r['tensor_' + name + '_ms'] / r[name + '_ms']:.2f}x), "
                 f"{r['tensor_' + name + '_bytes']:,.0f} B" for name in PER_TOKEN]
        lines.append("| " + " | ".join([str(r["V"]), *cells]) + " |")
    return "\n".join(lines)


def load_dataset(path: Path) -> Dict[str, np.ndarray]:
    """The real next-token pairs of ``scripts/train_pair.py`` via ``load_next_token_pairs``."""
    pairs = load_next_token_pairs(path)
    return {"p": pairs.p, "q": pairs.q, "target_logits": pairs.target_logits, "token_counts": pairs.token_counts,
            "meta": dict(pairs.meta)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m multidraft.bench --rdk",
        description="[OOV] (RDK): mean acceptance against the pruning level of the drafter vocabulary for "
        "masked, TLI, full RDK and the first-order form (Eq. 3), and the time to build M and to propose one token.")
    parser.add_argument("--quick", action="store_true", help="small run (V=1000 synthetic; timing at V=32k only)")
    parser.add_argument("--dataset", type=Path, help="real next-token pairs (.npz written by scripts/train_pair.py) instead of the synthetic "
                        "generator")
    parser.add_argument("--vocab", type=int, help="synthetic vocabulary size (default 4000, quick 1000)")
    parser.add_argument("--contexts", type=int, help="synthetic contexts (default 1200, quick 240)")
    parser.add_argument("--top-k", type=int, help="entries kept per row of M (default 64, quick 32)")
    parser.add_argument("--timing-vocab", type=lambda t: [int(v) for v in t.split(",") if v.strip()],
                        help="vocabulary sizes of the timing table (default 32000,128000; quick 32000; '' for none)")
    parser.add_argument("--large-vocab", type=int, help="vocabulary of an extra synthetic table without M (masked, "
                        "TLI, Eq. 3 only; 200k, the paper's size); default 200000, quick 0 (none)")
    parser.add_argument("--tensors", metavar="DEVICE", help="also time the per-token calls on float32 torch tensors "
                        "on DEVICE (e.g. cuda, or cpu), beside NumPy's")
    parser.add_argument("--device-path", action="store_true", help="CPU tensors take the path of an accelerator's "
                        "(computed in torch) instead of the core reading them in place")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="writes rdk.json there")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    mode = MODES["quick" if args.quick else "full"]
    V = args.vocab or mode["vocab"]
    contexts = args.contexts or mode["contexts"]
    top_k = args.top_k or mode["top_k"]
    timing_vocab = mode["timing_vocab"] if args.timing_vocab is None else args.timing_vocab
    start = time.perf_counter()
    if args.dataset is not None:
        data = load_dataset(args.dataset)
        source = {"dataset": str(args.dataset), **{k: v for k, v in data.pop("meta").items()}}
    else:
        data = synthetic_pairs(V, contexts, args.seed)
        source = {"synthetic": "[OOV] Section 6.1 / docs/benchmarks/rdk.md", "V": V, "contexts": contexts, "rank": 8,
                  "mean_ratio": 1.0, "target_top_quarter": 0.95, "scale": float(data["scale"]), "draft_noise": 0.5,
                  "seed": args.seed}
    rows = acceptance_vs_pruning(data["p"], data["q"], data["target_logits"], data["token_counts"], top_k=top_k,
                                 seed=args.seed)
    large_vocab = mode["large_vocab"] if args.large_vocab is None else args.large_vocab
    large_rows = []
    if large_vocab and args.dataset is None:
        large = synthetic_pairs(large_vocab, 80, args.seed)
        large_rows = acceptance_vs_pruning(large["p"], large["q"], large["target_logits"], large["token_counts"],
                                           full_rdk=False, seed=args.seed)
        del large
    if args.device_path:
        _device.CPU_ON_HOST = False
    times = [timing(v, mode["timing_contexts"], mode["timing_rows"], seed=args.seed, device=args.tensors)
             for v in timing_vocab]
    print(f"## RDK: mean acceptance against pruning ({'dataset ' + str(args.dataset) if args.dataset else 'synthetic'}, "
          f"V={data['p'].shape[1]}, test contexts={rows[0]['contexts']}, top-k={top_k})\n")
    print(acceptance_table(rows))
    if large_rows:
        print(f"\n## Without M at the paper's vocabulary size (synthetic, V={large_vocab}, test contexts="
              f"{large_rows[0]['contexts']})\n")
        print(acceptance_table(large_rows))
    if times:
        print("\n## RDK: build time of M and per-token times (median)\n")
        print(timing_table(times))
    if times and args.tensors:
        path = " (the accelerator's path)" if args.device_path else ""
        print(f"\n## RDK per-token times on float32 tensors on {args.tensors}{path} (median; x: against NumPy)\n")
        print(tensor_table(times))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "rdk.json"
    path.write_text(json.dumps({"benchmark": "multidraft.bench --rdk", "source": source, "top_k": top_k,
                                "taus": list(TAUS), "n_effs": list(N_EFFS), "acceptance": rows,
                                "acceptance_large_vocab": large_rows, "timing": times,
                                "machine": machine_info(), "wall_s": time.perf_counter() - start}, indent=1,
                               default=str))
    print(f"\nWrote {path}.", file=sys.stderr)
    return 0
