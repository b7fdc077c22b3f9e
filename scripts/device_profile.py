"""Where a round of the generation loop spends its time on a device: ``torch.profiler`` over generation.

``python scripts/device_profile.py [--pair gpu-pair] [--draft draft] [--device cuda] [--inflate 8b]
[--new-tokens 32]`` loads the trained pair (in ``--dtype``), inflates the target
(``multidraft.bench.inflate``: the same logits, a larger pass), and prints first one target forward
as ``target.generate`` makes it and as the loop makes it, host time and time until the device is
done (:func:`forward_costs`); then for ``target.generate`` and each configuration of the loop (an
sps chain of 4, four global_resolution chains of 4 with ``draft_top_k="auto"`` and with 16, a
top-k tree, and the first global_resolution chains again with the core's thread pool cut to one
thread), after a warm-up run:

- wall time per round (per token for ``target.generate``), and the loop's own split of it
  (``GenerationStats``: drafting, target passes, verification; the rest is committing and caches);
- the device's busy time per round (the sum of its kernels' time; ``cuda`` only) against the wall
  time: what is left is the device waiting for the host;
- the operators with the most host time (self CPU time, all calls in the profiled run) and, on
  ``cuda``, those with the most device time.

It answers the question of docs/benchmarks/gpu.md ("Token trees with the inflated target"): which
part of a round costs more than the flat cost model expects. ``--device cpu`` is a dry run of the
script (``--inflate moderate``).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

import multidraft as md
from multidraft import _device, hf
from multidraft.bench.inflate import inflate, parse_shape

#: (label, options of hf.generate)
CONFIGS = (("sps chain L=4", dict(verifier="sps", num_drafts=1, draft_length=4, draft_top_k=16)),
           ("global_resolution 4 chains of 4, top-k auto",
            dict(verifier="global_resolution", num_drafts=4, draft_length=4, draft_top_k="auto")),
           ("global_resolution 4 chains of 4, top-k 16",  # the H200's slow rounds had top-k auto
            dict(verifier="global_resolution", num_drafts=4, draft_length=4, draft_top_k=16)),
           ("topk tree (4, 2, 2)", dict(verifier="topk", tree=(4, 2, 2), draft_top_k=16)))
#: Label of the run of the global_resolution configuration with the core's thread pool cut to the
#: calling thread: whether waking the pool's workers for a compressed batch costs a round its time.
ONE_CORE_THREAD = "global_resolution 4 chains of 4, top-k auto, one core thread"


def profiled(run, device: torch.device):
    """(seconds, result, profiler) of ``run()`` under ``torch.profiler``, after one unprofiled warm-up."""
    run()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    _device.synchronize(device)
    with torch.profiler.profile(activities=activities) as profiler:
        start = time.perf_counter()
        result = run()
        _device.synchronize(device)
        seconds = time.perf_counter() - start
    return seconds, result, profiler


def device_ms(profiler) -> float:
    """Milliseconds of device kernels in the profile (0 without a device)."""
    return sum(getattr(event, "self_device_time_total", 0.0) for event in profiler.key_averages()) / 1e3


def report(label: str, seconds: float, rounds: int, profiler, stats=None, top: int = 12) -> None:
    print(f"\n### {label}: {1e3 * seconds / rounds:.2f} ms per round ({rounds} rounds, {seconds:.3f} s)")
    if stats is not None:
        parts = {"draft": stats.draft_seconds, "target": stats.target_seconds, "verify": stats.verify_seconds}
        rest = seconds - sum(parts.values())
        print("loop's split per round (ms): " + ", ".join(f"{k} {1e3 * v / rounds:.2f}" for k, v in parts.items())
              + f", rest {1e3 * rest / rounds:.2f}; tokens per target pass {stats.tokens_per_target_pass:.2f}")
    busy = device_ms(profiler)
    if busy:
        print(f"device busy {busy / rounds:.2f} ms per round ({100 * busy / (1e3 * seconds):.0f}% of the wall time)")
    print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=top))
    if busy:
        print(profiler.key_averages().table(sort_by="self_device_time_total", row_limit=top))


def forward_costs(model, prompt: torch.Tensor, slots: int = 17, repeats: int = 10) -> dict:
    """Median milliseconds of one target forward after the cached ``prompt``, as ``target.generate``
    makes it (one new token, no mask) and as the loop makes it (``slots`` new tokens, a 4-D additive
    mask, explicit position ids, ``slots`` logits kept), each as host time until the call returns
    (launching) and until the device is done; the cache is cut back after each call. The loop's
    pass costs more than a plain step on a GPU (docs/benchmarks/gpu.md): this separates the model's
    share from the loop's."""
    from transformers import DynamicCache
    from multidraft.hf._cache import cache_keyword

    device, dtype = prompt.device, next(model.parameters()).dtype
    cache = DynamicCache()
    keyword = cache_keyword(model)
    model(input_ids=prompt, use_cache=True, **{keyword: cache})
    T = prompt.shape[1]
    allowed = torch.ones(slots, T + slots, dtype=torch.bool, device=device).tril(T)
    mask = torch.zeros(1, 1, slots, T + slots, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
    calls = {"plain step": dict(input_ids=prompt[:, -1:], logits_to_keep=1),
             f"{slots}-slot pass, 4-D mask": dict(input_ids=prompt[:, -1:].expand(1, slots), attention_mask=mask,
                                                  position_ids=torch.arange(T, T + slots, device=device)[None],
                                                  logits_to_keep=slots)}
    out = {}
    for label, arguments in calls.items():
        host, total = [], []
        for _ in range(repeats + 1):
            _device.synchronize(device)
            start = time.perf_counter()
            model(use_cache=True, **{keyword: cache}, **arguments)
            host.append(time.perf_counter() - start)
            _device.synchronize(device)
            total.append(time.perf_counter() - start)
            for layer in cache.layers:  # back to the prompt (as the loop's commit slices its cache)
                layer.keys, layer.values = layer.keys[:, :, :T], layer.values[:, :, :T]
        out[label] = (1e3 * float(np.median(host[1:])), 1e3 * float(np.median(total[1:])))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", type=Path, default=Path("gpu-pair"))
    parser.add_argument("--draft", default="draft")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--inflate", default="8b", help="preset or shape of multidraft.bench.inflate ('' for none)")
    parser.add_argument("--new-tokens", type=int, default=32)
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    if device.type == "cpu":
        _device.CPU_ON_HOST = False  # the accelerator's path, as on a GPU
    target = AutoModelForCausalLM.from_pretrained(args.pair / "target", dtype=dtype).eval().to(device)
    if args.inflate:
        target = inflate(target, **parse_shape(args.inflate), device=device, dtype=dtype)
    draft = AutoModelForCausalLM.from_pretrained(args.pair / args.draft, dtype=dtype).eval().to(device)
    prompt = AutoTokenizer.from_pretrained(args.pair / "tokenizer")("And God said unto Moses,",
                                                                    return_tensors="pt").input_ids.to(device)
    n = args.new_tokens
    print(f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}, torch {torch.__version__}, "
          f"target {sum(p.numel() for p in target.parameters()) / 1e6:.0f} M parameters in {args.dtype}, {n} new tokens, "
          f"{md.get_num_threads()} core threads")
    common = dict(max_new_tokens=n, min_new_tokens=n, do_sample=True, attention_mask=torch.ones_like(prompt),
                  pad_token_id=0)
    with torch.inference_mode():
        for label, (host, total) in forward_costs(target, prompt).items():
            print(f"target forward, {label}: {host:.2f} ms on the host until it returns, {total:.2f} ms until the "
                  "device is done")
        seconds, _, profiler = profiled(lambda: target.generate(prompt, **common), device)
        report("target.generate", seconds, n, profiler)
        runs = list(CONFIGS) + [(ONE_CORE_THREAD, CONFIGS[1][1])]
        threads = md.get_num_threads()
        for label, options in runs:
            md.set_num_threads(1 if label == ONE_CORE_THREAD else threads)
            seconds, result, profiler = profiled(
                lambda: hf.generate(target, draft, prompt, n, seed=0, eos_token_id=None, **options), device)
            report(label, seconds, result.stats.target_calls, profiler, result.stats)
        md.set_num_threads(threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
