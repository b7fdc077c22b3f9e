"""Generation benchmark: multi-draft decoding inside ``model.generate`` against its peers.

``python -m multidraft.bench --generation [--pair data/pair] [--new-tokens 64] [--repeats 5]`` (the
same as ``python -m multidraft.bench.generation``) loads the trained pair of ``scripts/train_pair.py`` and
compares, on one prompt with the same generation arguments (sampling at the models' defaults,
exactly ``--new-tokens`` tokens):

- ``target.generate`` (plain sampling) and ``transformers``' assisted generation
  (``assistant_model=draft``, single draft);
- ``target.generate(custom_generate=multidraft.hf.decode, ...)`` for several verifiers and n
  (``--configs``), at each draft length of ``--draft-length`` (e.g. ``2,4,6``);
- with ``--prune 0.25,0.1``: the draft head pruned to those fractions of the vocabulary by corpus
  frequency (``multidraft.hf.prune_draft_head``, counts from ``data/next_token_pairs.npz``),
  drafting through TLI and through RDK with an affinity matrix calibrated on the exported target
  logits ([OOV]).

Reported per method: tokens per target forward pass (a forward hook counts the passes), median
wall time over ``--repeats`` runs after one warm-up run, and for multidraft the target positions
computed per round (tokens fed to the target), the bytes copied to the host per round
(``GenerationStats.host_bytes_per_round``; with ``--device-path`` CPU models take the accelerator's
path, so this is what would cross a PCIe bus) and the acceptance per draft position, the relative
costs of the round (``multidraft.bench.cost_model.measured_costs``: a draft pass and the
verification in target passes, a target pass in plain sampling steps) and the speedup the cost
model predicts from them against the measured one. Then the cost model's PREDICTED speedups at
deployment cost ratios for the measured acceptance profiles.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np
import torch

from .inflate import inflate, parse_shape
from .timing import timed_runs
from .trees import BUDGETS, DEPTHS, compare_trees, format_tree_rows, summary

#: (verifier, n) compared by default: single draft, the exact optimum, and K-SEQ.
CONFIGS: Tuple[Tuple[str, int], ...] = (("sps", 1), ("otlp", 2), ("otlp", 4), ("spectr", 4), ("rrs", 4))
#: (verifier, n) of the out-of-vocabulary rows.
OOV_CONFIGS: Tuple[Tuple[str, int], ...] = (("sps", 1), ("otlp", 2))
#: Draft/target cost ratios of the prediction table: 0.1-0.2 is e.g. a 1 B draft for an 8 B target.
DEPLOYMENT_RATIOS = (0.05, 0.1, 0.15, 0.2, 0.3)


def pruned_drafters(draft, dataset: Path, fractions: Sequence[float]):
    """(label, verifier, n, decode arguments) of the out-of-vocabulary rows: per pruned fraction,
    TLI and RDK with :data:`OOV_CONFIGS`. From ``dataset``: the token counts; M by
    :func:`multidraft.bench.oov.calibrated_affinity` from the target logits of the first half of the
    contexts, its temperature chosen on the second half."""
    from .. import hf
    from .oov import calibrated_affinity

    rows = []
    if fractions:
        data = np.load(dataset)
        half = len(data["p"]) // 2
        counts, logits, p, q = data["token_counts"], data["target_logits"][:half], data["p"][half:], data["q"][half:]
    for fraction in fractions:
        pruned, vmap = hf.prune_draft_head(draft, counts, max(1, round(fraction * len(counts))))
        matrix, tau, _ = calibrated_affinity(vmap.draft_to_target, logits, p, q)
        kinds = ((f"TLI {fraction:.0%}", None), (f"RDK {fraction:.0%} (tau {tau:g})", matrix))
        rows += [(f" {kind}", name, n, dict(draft_model=pruned, vocabulary_map=vmap, affinity=affinity))
                 for kind, affinity in kinds for name, n in OOV_CONFIGS]
    return rows


def _total(stats):
    """The statistics of several runs added up (the fields the cost model and the table read)."""
    from ..hf import GenerationStats

    first = stats[0]
    return GenerationStats(first.num_drafts, first.draft_length, first.verifier,
                           target_calls=sum(s.target_calls for s in stats),
                           draft_seconds=sum(s.draft_seconds for s in stats),
                           target_seconds=sum(s.target_seconds for s in stats),
                           verify_seconds=sum(s.verify_seconds for s in stats),
                           host_bytes=sum(s.host_bytes for s in stats),
                           reached=sum(s.reached for s in stats), accepted=sum(s.accepted for s in stats))


def compare(target, draft, prompt: torch.Tensor, new_tokens: int, repeats: int,
            configs: Sequence[Tuple[str, int]] = CONFIGS, draft_length: int | Sequence[int] = 4,
            draft_top_k: int = 16, oov: Sequence = ()) -> List[dict]:
    """Rows of the comparison (see the module docstring) for one prompt (1, T): the full draft
    with ``configs``, then the ``oov`` rows (:func:`pruned_drafters`), each at every draft length
    of ``draft_length`` (an int or a sequence of them)."""
    from .. import hf
    from . import cost_model

    passes = {"n": 0}
    hook = target.register_forward_hook(lambda *_: passes.__setitem__("n", passes["n"] + 1))
    common = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True,
                  attention_mask=torch.ones_like(prompt), pad_token_id=target.generation_config.eos_token_id)
    rows = []
    try:
        for label, extra in (("target.generate", {}), ("transformers assisted", {"assistant_model": draft})):
            seconds, calls, _ = timed_runs(lambda i: target.generate(prompt, **extra, **common), repeats, passes)
            rows.append(dict(method=label, n=1, tokens_per_pass=repeats * new_tokens / calls, seconds=seconds))
        plain = rows[0]["seconds"]
        lengths = [draft_length] if isinstance(draft_length, int) else list(draft_length)
        drafters = [("", name, n, dict(draft_model=draft)) for name, n in configs] + list(oov)
        for (label, name, n, models), length in [(d, length) for d in drafters for length in lengths]:
            seconds, calls, outputs = timed_runs(lambda i: target.generate(
                prompt, custom_generate=hf.decode, num_drafts=n, draft_length=length, verifier=name,
                draft_top_k=draft_top_k, seed=i, return_dict_in_generate=True, **models, **common), repeats, passes)
            stats = _total([o.multidraft for o in outputs])
            rounds = sum(o.multidraft.row_rounds for o in outputs)
            acceptance = np.nan_to_num(stats.acceptance_per_position)  # 0 where never reached
            costs = cost_model.measured_costs(stats, plain / new_tokens)
            rows.append(dict(method=f"multidraft {name}{label}", n=n, draft_length=length, tokens_per_pass=repeats * new_tokens / calls,
                             seconds=seconds, acceptance=acceptance, cost_ratio=costs.cost_ratio,
                             overhead=costs.overhead, target_step=costs.target_step,
                             measured_speedup=plain / seconds,
                             predicted_speedup=cost_model.predicted_speedup(acceptance, costs.cost_ratio,
                                                                            costs.overhead, costs.target_step),
                             target_positions_per_round=sum(o.multidraft.target_positions for o in outputs) / rounds,
                             host_bytes_per_round=stats.host_bytes_per_round))
    finally:
        hook.remove()
    return rows


#: Prompts of ``--many-prompts``: openings of King James verses (public domain).
PROMPTS = ("And God said unto Moses,", "In the beginning", "And the LORD spake unto Moses, saying,",
           "Blessed is the man that", "And it came to pass, when", "Then said Jesus unto them,",
           "The LORD is my shepherd;", "And he said unto them,", "Now the serpent was", "Hear, O Israel:",
           "And the children of Israel", "For God so loved the world,", "And Abraham said,",
           "Thus saith the LORD of hosts,", "And when the people saw", "My son, hear the instruction")


def many_rounds(target, draft, prompts: torch.Tensor, mask: torch.Tensor, configs: Sequence[Tuple[str, int]],
                draft_length: int, new_tokens: int, seeds: int, draft_top_k) -> List[dict]:
    """Tokens per target pass with a standard error, for chains of each (verifier, n): ``seeds``
    runs of ``target.generate(custom_generate=hf.decode)`` (sampling at the models' defaults, as
    :func:`compare`) on the whole batch of ``prompts`` (B, T), each run one sample; plus the
    acceptance per depth over all rounds (``reached`` counts beside it) and the medians over runs of
    the wall time and of the time spent drafting and verifying (the batch's rows together)."""
    from .. import hf

    rows = []
    for name, n in configs:
        per_run, reached, accepted, seconds = [], 0, 0, []
        for seed in range(seeds):
            start = time.perf_counter()
            stats = target.generate(prompts, attention_mask=mask, custom_generate=hf.decode, draft_model=draft,
                                    num_drafts=n, draft_length=draft_length, verifier=name, seed=seed,
                                    draft_top_k=draft_top_k, do_sample=True, max_new_tokens=new_tokens,
                                    min_new_tokens=new_tokens, pad_token_id=target.generation_config.eos_token_id,
                                    return_dict_in_generate=True).multidraft
            seconds.append((time.perf_counter() - start, stats.draft_seconds, stats.verify_seconds))
            per_run.append(stats.tokens_per_target_pass)
            reached, accepted = reached + stats.reached, accepted + stats.accepted
        error = float(np.std(per_run, ddof=1) / np.sqrt(seeds)) if seeds > 1 else 0.0
        wall, drafting, verifying = np.median(np.array(seconds), axis=0)
        rows.append(dict(verifier=name, n=n, tokens_per_pass=float(np.mean(per_run)), standard_error=error,
                         reached=reached, acceptance=accepted / np.maximum(reached, 1), seconds=float(wall),
                         draft_seconds=float(drafting), verify_seconds=float(verifying)))
    return rows


def format_many_rounds(rows: List[dict]) -> str:
    lines = ["| verifier | n | tokens per target pass (+- 2 s.e.) | acceptance per depth (groups verified) | wall time "
             "(s) | drafting (ms) | verification (ms) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        depths = " ".join(f"{a:.3f} ({c})" for a, c in zip(r["acceptance"], r["reached"]))
        lines.append(f"| {r['verifier']} | {r['n']} | {r['tokens_per_pass']:.3f} +- {2 * r['standard_error']:.3f} | "
                     f"{depths} | {r['seconds']:.2f} | {1e3 * r['draft_seconds']:.0f} | {1e3 * r['verify_seconds']:.1f} |")
    return "\n".join(lines)


def format_rows(rows: List[dict]) -> str:
    lines = ["| method | n | L | tokens per target pass | wall time (s) | target positions per round | host bytes per "
             "round | acceptance per position | draft pass / target pass | verification / target pass | target pass / "
             "plain step | speedup measured (predicted) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r['target_positions_per_round']:.1f}", f"{r['host_bytes_per_round']:.0f}",
                 " ".join(f"{a:.2f}" for a in r["acceptance"]),
                 f"{r['cost_ratio']:.2f}", f"{r['overhead']:.2f}", f"{r['target_step']:.1f}",
                 f"{r['measured_speedup']:.2f} ({r['predicted_speedup']:.2f})"] if "acceptance" in r else ["-"] * 7
        lines.append(f"| {r['method']} | {r['n']} | {r.get('draft_length', '-')} | {r['tokens_per_pass']:.2f} | {r['seconds']:.3f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m multidraft.bench --generation",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", type=Path, default=Path("data/pair"), help="scripts/train_pair.py output")
    parser.add_argument("--draft", default="draft", help="the draft's directory under --pair (default draft; "
                        "draft-medium for the medium draft of scripts/train_pair.py --draft-size medium)")
    parser.add_argument("--prompt", default="And God said unto Moses,")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: shared cores)")
    parser.add_argument("--device", default="cpu", help="torch device of the models and prompts (e.g. cuda)")
    parser.add_argument("--device-path", action="store_true", help="CPU tensors take the path of an accelerator's "
                        "(laws on the device, compressed problems to the host) instead of the core reading them in place")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="dtype of the models' weights")
    parser.add_argument("--inflate", metavar="PRESET_OR_SHAPE", help="inflate the target into a larger Llama with "
                        "the same logits, built on --device in --dtype (multidraft.bench.inflate): 8b, moderate, "
                        "or hidden_size=N,num_hidden_layers=N,intermediate_size=N,num_attention_heads=N,"
                        "num_key_value_heads=N")
    parser.add_argument("--draft-length", default="4", help="draft lengths L, comma-separated (e.g. 2,4,6)")
    parser.add_argument("--configs", default=",".join(f"{name}:{n}" for name, n in CONFIGS),
                        help="verifier:n pairs, comma-separated (default: %(default)s)")
    parser.add_argument("--draft-top-k", type=int, default=16, help="draft top-k (0: the full draft law)")
    parser.add_argument("--prune", default="", help="comma-separated fractions of the vocabulary the pruned draft "
                        "heads keep (e.g. 0.25,0.1); needs the dataset of scripts/train_pair.py")
    parser.add_argument("--dataset", type=Path, default=Path("data/next_token_pairs.npz"))
    parser.add_argument("--trees", action="store_true", help="add the token-tree table (multidraft.bench.trees): "
                        "chains, trees and top-k trees by depth and node budget, and tree='auto'")
    parser.add_argument("--depths", default=",".join(map(str, DEPTHS)), help="tree depths (default %(default)s)")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="node budgets (default %(default)s)")
    parser.add_argument("--tree-verifier", default="global_resolution", help="verifier of the chains and trees "
                        "with more than one draft per node (default %(default)s)")
    parser.add_argument("--no-chains", action="store_true", help="skip the chain table (--configs)")
    parser.add_argument("--many-prompts", type=int, default=0, help="instead of the tables: tokens per target pass "
                        "of the --configs chains at the first --draft-length over this many built-in prompts "
                        "(one batch), --repeats seeds, with standard errors")
    parser.add_argument("--counts", action="store_true", help="add the table of kernel-launching ops and host "
                        "reads per round of the --configs chains (multidraft.bench.launches.loop_counts)")
    args = parser.parse_args(argv)
    try:
        shape = parse_shape(args.inflate) if args.inflate else None
    except ValueError as error:
        parser.error(str(error))
    if not (args.pair / "target").is_dir():
        parser.error(f"no trained pair under {args.pair}: run scripts/train_pair.py first")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    if args.device_path:
        from .. import _device

        _device.CPU_ON_HOST = False
    tokenizer = AutoTokenizer.from_pretrained(args.pair / "tokenizer")
    dtype = getattr(torch, args.dtype)
    target = AutoModelForCausalLM.from_pretrained(args.pair / "target", dtype=dtype).eval().to(args.device)
    if shape:
        target = inflate(target, **shape, device=args.device, dtype=dtype)
        print(f"target inflated to {shape}: {sum(p.numel() for p in target.parameters()) / 1e6:.0f} M parameters")
    draft = AutoModelForCausalLM.from_pretrained(args.pair / args.draft, dtype=dtype).eval().to(args.device)
    prompt = tokenizer(args.prompt, return_tensors="pt").input_ids.to(args.device)
    print(f"prompt {args.prompt!r} ({prompt.shape[1]} tokens), {args.new_tokens} new tokens, "
          f"{args.repeats} runs after a warm-up (medians), {args.threads} torch thread(s), models on "
          f"{args.device} in {args.dtype}" + (" (the accelerator's path)" if args.device_path else ""))
    fractions = [float(f) for f in args.prune.split(",") if f]
    lengths = [int(length) for length in args.draft_length.split(",")]
    configs = [(name, int(n)) for name, n in (pair.split(":") for pair in args.configs.split(",") if pair)]
    if args.many_prompts:
        texts = list(PROMPTS[: args.many_prompts])
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        batch = tokenizer(texts, return_tensors="pt", padding=True).to(args.device)
        rows = many_rounds(target, draft, batch.input_ids, batch.attention_mask, configs, lengths[0],
                           args.new_tokens, args.repeats, args.draft_top_k or None)
        print(format_many_rounds(rows))
        return 0
    plain = None
    if not args.no_chains:
        rows = compare(target, draft, prompt, args.new_tokens, args.repeats, configs=configs, draft_length=lengths,
                       draft_top_k=args.draft_top_k or None, oov=pruned_drafters(draft, args.dataset, fractions))
        print(format_rows(rows))
        from .cost_model import format_predictions

        print(f"\nPREDICTED speedups (cost model, best draft length <= {max(lengths)}, no verification cost) "
              "from the measured acceptance, at deployment draft/target cost ratios:")
        print(format_predictions({r["method"]: r["acceptance"] for r in rows if "acceptance" in r}, DEPLOYMENT_RATIOS))
        plain = rows[0]["seconds"]
    if args.counts:
        from .launches import format_counts, loop_counts

        methods = [dict(label=f"multidraft {name} n={n} L={length}", verifier=name, num_drafts=n, draft_length=length)
                   for name, n in configs for length in lengths]
        print("\nPer round, outside the models (one run each, CPU tensors on the accelerator's path; "
              "docs/benchmarks/launches.md):")
        print(format_counts(loop_counts(target, draft, prompt, args.new_tokens, methods,
                                        draft_top_k=args.draft_top_k or None)))
    if args.trees:
        tree_rows = compare_trees(target, draft, prompt, args.new_tokens, args.repeats, args.dataset,
                                  depths=[int(d) for d in args.depths.split(",")],
                                  budgets=[int(m) for m in args.budgets.split(",")], verifier=args.tree_verifier,
                                  plain_seconds=plain)
        print("\nToken trees (draft_top_k='auto'; predicted tokens from the acceptance measured on --dataset):")
        print(format_tree_rows(tree_rows))
        print(summary(tree_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
