"""What a piece of torch code launches on a device, counted exactly on any machine.

On a GPU every aten operator that computes launches at least one kernel, and every read of a
device value on the host (``.item()``, a copy to the host, an operator whose output shape depends
on the data) waits for the device to finish. Both costs are fixed per operator, whatever the sizes,
so their counts predict the overhead of a loop of small operators before a GPU is at hand. They
are the same on a CPU tensor, which takes the same operators through the accelerator's path
(``multidraft._device.CPU_ON_HOST = False``), so the counts here are our GPU figures where no GPU is.

:class:`Launches` counts, while it is entered, in the calling thread:

- ``ops``: aten operators that launch a kernel: every operator but views (slice, select,
  unsqueeze, reshape, expand, detach, ...: they only make a new header over the same memory; one
  whose result owns new memory copied, and is counted) and the few that only allocate or wrap
  (``empty``, ``lift_fresh``);
- ``reads``: host reads: :func:`multidraft._device.to_host` calls (every read of the package's
  device path goes there), the operators that synchronise by themselves (``_local_scalar_dense``,
  behind ``.item()``, ``int(t)`` and ``bool(t)``; ``nonzero``; indexing by a boolean mask;
  ``unique``; ``bincount``; ``repeat_interleave`` without ``output_size``). A copy to the host
  elsewhere than in ``to_host`` (``t.cpu()``, ``t.tolist()``) is no operator on a CPU tensor and
  is not seen;
- ``uploads``: copies from the host to the device by :func:`multidraft._device.to_device` (not
  reads; one copy call each, which does not wait for the device's queue);
- ``seconds``: host time (wall time of the calling thread) while it is entered.

Copies between the host and the device are no ops (a copy is a transfer, not a kernel).

Passing ``models`` leaves out what runs inside their forward passes (ops, reads and time): the
counts are then the loop's own, beside the models'. ``forwards`` counts those passes per model, and
``model_reads`` the synchronising operators inside them (a read inside a forward waits for the
device as any other; the loop's inputs to transformers' models cause none).

:func:`loop_counts` counts a generation loop per round beside ``target.generate`` and transformers'
assisted generation, :func:`verify_counts` one device verify call of every verifier; each has its
goals (:func:`loop_goals`, :func:`verify_goals`) and a Markdown table. ``python -m multidraft.bench
--launches`` prints both (:func:`main`; docs/benchmarks/launches.md).
"""
from __future__ import annotations

import collections
import sys
import time
from typing import Dict, Sequence

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _device

#: Operators (names without the overload) that launch no kernel although they are not views:
#: allocation and tensor wrapping.
_NO_KERNEL = frozenset({"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::lift_fresh",
                        "aten::_local_scalar_dense", "aten::alias", "aten::_unsafe_view", "aten::set_"})
#: Operators (names without the overload) whose result the host must see before it can go on (a
#: device synchronisation).
_SYNCING = frozenset({"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::unique",
                      "aten::_unique", "aten::_unique2", "aten::unique_consecutive", "aten::unique_dim",
                      "aten::item", "aten::equal", "aten::is_nonzero", "aten::bincount"})
#: Indexing operators that read the count of a boolean mask among their indices.
_MASK_INDEXING = frozenset({"aten::index", "aten::_unsafe_index", "aten::index_put", "aten::index_put_",
                            "aten::_index_put_impl", "aten::_index_put_impl_"})


def _base_name(func) -> str:
    """``func``'s name without its overload: ``aten::index`` for ``aten::index.Tensor``."""
    return func.name().split(".", 1)[0]


def _launches_kernel(func, args=(), kwargs=None) -> bool:
    return not func.is_view and _base_name(func) not in _NO_KERNEL and not _transfer(func, args, kwargs or {})


def _copying_view(func, args, out) -> bool:
    """Whether a view operator copied: under ``torch.inference_mode`` composite operators such as
    ``to`` (a dtype change), ``reshape`` and ``contiguous`` reach the counter whole, with a view's
    schema, and copy when they must (their result then owns new memory)."""
    if not func.is_view or not args or not isinstance(args[0], torch.Tensor) or not isinstance(out, torch.Tensor):
        return False
    return out.untyped_storage().data_ptr() != args[0].untyped_storage().data_ptr()


def _transfer(func, args, kwargs) -> bool:
    """Whether the operator copies between the host and a device (``_to_copy`` to another device
    type, ``copy_`` between two): on a CPU tensor the same call copies nothing and shows no operator,
    so counting it would make a GPU's counts differ from the CPU's."""
    name = _base_name(func)
    if name == "aten::_to_copy" and kwargs.get("device") is not None and isinstance(args[0], torch.Tensor):
        return torch.device(kwargs["device"]).type != args[0].device.type
    if name == "aten::copy_" and all(isinstance(a, torch.Tensor) for a in args[:2]):
        return args[0].device.type != args[1].device.type
    return False


def _syncs(func, args, kwargs) -> bool:
    name = _base_name(func)
    if name in _SYNCING:
        return True
    if name in _MASK_INDEXING:  # a boolean mask: its count is read
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())
    if func.name() == "aten::repeat_interleave.Tensor":  # the output's length is the sum of the repeats
        return kwargs.get("output_size") is None and (len(args) < 2 or args[1] is None)
    return False


def _called_from(function: str) -> bool:
    """Whether the caller of the torch function being handled is ``multidraft._device``'s ``function``
    (frames: 0 this one, 1 ``__torch_function__``, 2 the caller)."""
    frame = sys._getframe(2)
    return frame.f_code.co_name == function and frame.f_globals.get("__name__", "").startswith(_device.__name__)


class _Counting(TorchDispatchMode):
    def __init__(self, owner: "Launches"):
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        owner = self.owner
        out = func(*args, **(kwargs or {}))
        syncs = _syncs(func, args, kwargs or {})
        if owner._inside == 0:
            if _launches_kernel(func, args, kwargs) or _copying_view(func, args, out):
                owner.ops += 1
                owner.by_op[func.name()] += 1
            owner.reads += syncs
        else:
            owner.model_reads += syncs
        return out


class _Uploads(TorchFunctionMode):
    """``to_device``'s ``.to(device)`` copies, which no aten operator shows on a CPU tensor."""

    def __init__(self, owner: "Launches"):
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.to and self.owner._inside == 0 and _called_from("to_device"):
            self.owner.uploads += 1
        return func(*args, **(kwargs or {}))


class Launches:
    """Counts of kernel-launching aten operators, host reads and host seconds while entered (module
    docstring), outside the forward passes of ``models``. Re-entrant counts add up over several
    ``with`` blocks of one object."""

    def __init__(self, models: Sequence[torch.nn.Module] = ()):
        self.models = list(models)
        self.ops = 0
        self.reads = 0
        self.model_reads = 0  # synchronising operators inside the models' forward passes
        self.uploads = 0
        self.seconds = 0.0
        self.forwards: Dict[int, int] = collections.Counter()
        self.by_op: Dict[str, int] = collections.Counter()
        self._inside = 0
        self._hooks = []

    def _enter_model(self, module, *_):
        if self._inside == 0:
            self._pause = time.perf_counter()
        self._inside += 1
        self.forwards[id(module)] += 1

    def _leave_model(self, *_):
        self._inside -= 1
        if self._inside == 0:
            self._start += time.perf_counter() - self._pause  # the model's time is not the loop's

    def __enter__(self) -> "Launches":
        for model in self.models:
            self._hooks.append(model.register_forward_pre_hook(self._enter_model))
            self._hooks.append(model.register_forward_hook(self._leave_model))
        self._reads_before = _device.host_reads()
        self._copies = _Uploads(self)
        self._copies.__enter__()
        self._mode = _Counting(self)
        self._mode.__enter__()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds += time.perf_counter() - self._start
        self._mode.__exit__(*exc)
        self._copies.__exit__(*exc)
        self.reads += _device.host_reads() - self._reads_before
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    def passes(self, model: torch.nn.Module) -> int:
        """Forward passes of ``model`` while entered."""
        return self.forwards[id(model)]


def _per_round(label: str, launches: Launches, rounds: int, forwards: int, **extra) -> dict:
    return dict(method=label, rounds=rounds, reads=launches.reads, ops_per_round=launches.ops / rounds,
                ops_per_forward=launches.ops / forwards, reads_per_round=launches.reads / rounds,
                uploads_per_round=launches.uploads / rounds, host_ms_per_round=1e3 * launches.seconds / rounds, **extra)


def loop_counts(target, draft, prompt: torch.Tensor, new_tokens: int, methods: Sequence[dict],
                assisted_tokens: int = 4, draft_top_k: int = 16, device_path: bool = True) -> list:
    """Per round (one target pass), in one run each: kernel-launching ops outside the two models,
    ops per model forward (target and draft passes together), host reads and host milliseconds
    outside the models, for ``target.generate`` (plain sampling: a round is a token), transformers'
    assisted generation drafting ``assisted_tokens`` tokens a round (constant schedule, no
    confidence stop) and ``target.generate(custom_generate=multidraft.hf.decode, **m)`` for each
    ``m`` of ``methods`` (e.g. ``dict(verifier="sps", num_drafts=1, draft_length=4)``, ``dict(
    verifier="global_resolution", tree=(3, 2, 1))``; a ``label`` key names the row). Exactly
    ``new_tokens`` sampled tokens from ``prompt`` (1, T). ``device_path``: CPU models take the
    accelerator's path (``_device.CPU_ON_HOST = False``), so the counts are a GPU's."""
    from .. import hf

    common = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True,
                  attention_mask=torch.ones_like(prompt), pad_token_id=target.generation_config.eos_token_id)
    saved = (draft.generation_config.num_assistant_tokens, draft.generation_config.num_assistant_tokens_schedule,
             draft.generation_config.assistant_confidence_threshold, _device.CPU_ON_HOST)
    draft.generation_config.num_assistant_tokens = assisted_tokens
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    _device.CPU_ON_HOST = not device_path
    rows = []
    try:
        with torch.inference_mode():
            torch.manual_seed(0)
            with Launches([target, draft]) as count:
                target.generate(prompt, **common)
            rows.append(_per_round("target.generate", count, count.passes(target), count.passes(target), kind="plain"))
            with Launches([target, draft]) as count:
                target.generate(prompt, assistant_model=draft, **common)
            passes = count.passes(target)
            rows.append(_per_round(f"transformers assisted, {assisted_tokens} draft tokens", count, passes,
                                   passes + count.passes(draft), kind="assisted"))
            for method in methods:
                options = {k: v for k, v in method.items() if k != "label"}
                with Launches([target, draft]) as count:
                    out = target.generate(prompt, custom_generate=hf.decode, draft_model=draft, seed=0,
                                          draft_top_k=draft_top_k, return_dict_in_generate=True, **options, **common)
                stats = out.multidraft
                label = method.get("label") or "multidraft " + ", ".join(f"{k}={v}" for k, v in options.items())
                rows.append(_per_round(label, count, stats.target_calls, count.passes(target) + count.passes(draft),
                                       tokens_per_pass=stats.tokens_per_target_pass, kind="multidraft",
                                       options=options))
    finally:
        (draft.generation_config.num_assistant_tokens, draft.generation_config.num_assistant_tokens_schedule,
         draft.generation_config.assistant_confidence_threshold, _device.CPU_ON_HOST) = saved
    return rows


#: Goals of a multidraft row of :func:`loop_counts`, against transformers' assisted generation in the
#: same run: a single-draft chain launches at most assisted's ops per round; several drafts (a tree,
#: chains with n > 1) at most this multiple of assisted's ops per model forward (their draft passes
#: are wider, not more numerous); every multidraft row reads the host at most depth + 1 times a round.
OPS_PER_FORWARD_FACTOR = 1.5
#: Goals of one device verify call of :func:`verify_counts`.
VERIFY_MAX_OPS = 40
VERIFY_MAX_READS = 1


def _depth_and_width(options: dict):
    """(depth, whether a node has several drafts) of a multidraft row's shape; depth None for a shape
    chosen at run time (``tree="auto"``)."""
    tree = options.get("tree")
    if tree is None:  # chains: the defaults of multidraft.hf (2 drafts, 4 tokens)
        n, length = options.get("num_drafts") or 2, options.get("draft_length") or 4
        return length, n > 1
    if isinstance(tree, (tuple, list)):
        return len(tree), any(int(w) > 1 for w in tree)
    return getattr(tree, "depth", None), True


def loop_goals(row: dict, rows: Sequence[dict]) -> list:
    """``[(goal, met), ...]`` of a multidraft row of :func:`loop_counts` (:data:`OPS_PER_FORWARD_FACTOR`),
    the assisted row of ``rows`` as the reference; [] for the reference rows."""
    assisted = next((r for r in rows if r.get("kind") == "assisted"), None)
    if row.get("kind") != "multidraft" or assisted is None:
        return []
    depth, several = _depth_and_width(row.get("options", {}))
    if several:
        bound = OPS_PER_FORWARD_FACTOR * assisted["ops_per_forward"]
        goals = [(f"ops per forward <= {bound:.0f} ({OPS_PER_FORWARD_FACTOR:g} x assisted)",
                  row["ops_per_forward"] <= bound)]
    else:
        bound = assisted["ops_per_round"]
        goals = [(f"ops per round <= {bound:.0f} (assisted)", row["ops_per_round"] <= bound)]
    if depth is not None:  # plus generate()'s own set-up reads, once per call (the plain row's beyond one a step)
        plain = next((r for r in rows if r.get("kind") == "plain"), None)
        setup = max(plain["reads"] - plain["rounds"], 0) if plain and "reads" in plain else 0
        goals.append((f"reads per round <= {depth + 1} (+ generate's set-up)",
                      row["reads_per_round"] <= depth + 1 + (setup / row["rounds"] if setup else 0)))
    return goals


def _met(goals: Sequence[tuple]) -> str:
    missed = [goal.split(" <=")[0] for goal, met in goals if not met]
    return "met" if not missed else "not met (" + ", ".join(missed) + ")"


def format_counts(rows: Sequence[dict], goals: bool = True) -> str:
    """The rows of :func:`loop_counts` as a Markdown table; ``goals``: with each multidraft row's goals
    (:func:`loop_goals`) and whether the row meets them."""
    head = ("| per round (one target pass) | kernel-launching ops outside the models | per model forward | host reads "
            "| copies to the device | host ms outside the models |")
    lines = [head + (" goal | met |" if goals else ""), "|---|---|---|---|---|---|" + ("---|---|" if goals else "")]
    for r in rows:
        line = (f"| {r['method']} | {r['ops_per_round']:.0f} | {r['ops_per_forward']:.0f} | "
                f"{r['reads_per_round']:.1f} | {r.get('uploads_per_round', 0):.1f} | {r['host_ms_per_round']:.2f} |")
        if goals:
            row_goals = loop_goals(r, rows)
            line += (f" {'; '.join(g for g, _ in row_goals)} | {_met(row_goals)} |" if row_goals
                     else " (reference) | |")
        lines.append(line)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- one verify call

#: Drafts per call of :func:`verify_counts` where the verifier takes any number: 4, but 2 for the
#: verifiers whose exact plan grows fast with n ("otlp"'s max-flow over draft subsets, "khisti"'s LP).
VERIFY_N = {"otlp": 2, "khisti": 2}
DEFAULT_VERIFY_N = 4


def verify_n(verifier, n=None) -> int:
    """Drafts per row of ``verifier``'s call in :func:`verify_counts`: its fixed n if it has one, else
    ``n`` (an int, or a dict by verifier name), else :data:`VERIFY_N` / :data:`DEFAULT_VERIFY_N`."""
    if verifier.fixed_n is not None:
        return verifier.fixed_n
    if isinstance(n, dict):
        n = n.get(verifier.name)
    return int(n) if n else VERIFY_N.get(verifier.name, DEFAULT_VERIFY_N)


def verify_laws(B: int, V: int, top: int, seed: int = 0):
    """(p, q), (B, V) float32 on the CPU: p the softmax of random logits (scale 2), q the softmax of the
    same logits plus unit noise truncated to its ``top`` most probable tokens per row (renormalised),
    as a generation loop's draft top-k leaves it."""
    generator = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(B, V, generator=generator)
    p = torch.softmax(logits, -1)
    values, ids = (logits + torch.randn(B, V, generator=generator)).topk(min(top, V), -1)
    q = torch.zeros(B, V).scatter_(1, ids, torch.softmax(values, -1))
    return p, q


def _drafts(verifier, q, n: int, seeds: Sequence[int]):
    """(B, n) int64 drafts of the rows of ``q`` as ``verifier`` draws them (and its draft law)."""
    if verifier.scheme_kind == "independent":  # one law per draft: the row's law n times
        q = q.unsqueeze(1).expand(-1, n, -1).contiguous()
        return q, torch.stack([verifier.draft(q[b], n, seed) for b, seed in enumerate(seeds)])
    return q, torch.from_numpy(_device.draft_rows(verifier, q, n, seeds))


def verify_counts(names: Sequence[str] = None, B: int = 64, V: int = 32000, top: int = 32, n=None,
                  repeats: int = 3, seed: int = 0) -> list:
    """One device verify call ``multidraft.verifier(name).verify(p, q, drafts, seeds)`` per verifier of
    ``names`` (default: every one of ``multidraft.verifier_names()``) on a batch of B rows of
    :func:`verify_laws` (float32 CPU tensors taking the accelerator's path, ``_device.CPU_ON_HOST =
    False``), with n drafts per row (:func:`verify_n`) drawn as the verifier draws them. After one
    warm-up call, one call counted (:class:`Launches`: kernel-launching ops and host reads per call)
    and ``repeats`` uncounted calls timed (the median host ms per call), each with fresh seeds. Rows:
    dicts with verifier, n, B, V, top, ops, reads, uploads, host_ms and by_op (the counted call's ops by name)."""
    import multidraft as md

    names = list(md.verifier_names() if names is None else names)
    p, q = verify_laws(B, V, top, seed)
    saved = _device.CPU_ON_HOST
    _device.CPU_ON_HOST = False
    rows = []
    try:
        with torch.no_grad():
            for name in names:
                verifier = md.verifier(name)
                k = verify_n(verifier, n)
                seeds = iter(range(seed, seed + (repeats + 3) * B))
                q_k, drafts = _drafts(verifier, q, k, [next(seeds) for _ in range(B)])
                verifier.verify(p, q_k, drafts, [next(seeds) for _ in range(B)])  # warm-up
                with Launches() as count:
                    verifier.verify(p, q_k, drafts, [next(seeds) for _ in range(B)])
                times = []
                for _ in range(repeats):
                    call_seeds = [next(seeds) for _ in range(B)]
                    start = time.perf_counter()
                    verifier.verify(p, q_k, drafts, call_seeds)
                    times.append(time.perf_counter() - start)
                rows.append(dict(verifier=name, n=k, B=B, V=V, top=top, ops=count.ops, reads=count.reads,
                                 uploads=count.uploads,
                                 host_ms=1e3 * sorted(times)[len(times) // 2] if times else 1e3 * count.seconds,
                                 by_op=dict(count.by_op)))
    finally:
        _device.CPU_ON_HOST = saved
    return rows


def verify_goals(row: dict) -> list:
    """``[(goal, met), ...]`` of a row of :func:`verify_counts` (:data:`VERIFY_MAX_OPS`, :data:`VERIFY_MAX_READS`)."""
    return [(f"ops <= {VERIFY_MAX_OPS}", row["ops"] <= VERIFY_MAX_OPS),
            (f"reads <= {VERIFY_MAX_READS}", row["reads"] <= VERIFY_MAX_READS)]


def format_verify_counts(rows: Sequence[dict], goals: bool = True) -> str:
    """The rows of :func:`verify_counts` as a Markdown table; ``goals``: whether each call meets
    :func:`verify_goals`."""
    head = ("| verifier | n | kernel-launching ops per call | host reads per call | copies to the device "
            "| host ms per call |")
    goal = f" goal: <= {VERIFY_MAX_OPS} ops, <= {VERIFY_MAX_READS} read |"
    lines = [head + (goal if goals else ""), "|---|---|---|---|---|---|" + ("---|" if goals else "")]
    for r in rows:
        line = (f"| {r['verifier']} | {r['n']} | {r['ops']} | {r['reads']} | {r.get('uploads', 0)} | "
                f"{r['host_ms']:.1f} |")
        lines.append(line + (f" {_met(verify_goals(r))} |" if goals else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- command line

#: The multidraft rows of ``python -m multidraft.bench --launches``.
LOOP_METHODS = (dict(label="multidraft sps chain L=4", verifier="sps", num_drafts=1, draft_length=4),
                dict(label="multidraft global_resolution tree (3, 2, 1)", verifier="global_resolution",
                     tree=(3, 2, 1)))
#: The optional row (``--otlp-chains``, on by default).
OTLP_CHAINS = dict(label="multidraft otlp chains n=2 L=4", verifier="otlp", num_drafts=2, draft_length=4)


def tiny_pair(vocab: int = 4096, seed: int = 0):
    """(target, draft): random Llama models built from a config (nothing downloaded), width 64, 2 and
    1 layers, vocabulary ``vocab``, in eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def model(model_seed: int, layers: int):
        torch.manual_seed(model_seed)
        config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                             bos_token_id=0, eos_token_id=0, pad_token_id=0)
        return LlamaForCausalLM(config).eval()

    return model(seed, 2), model(seed + 1, 1)


def main(argv=None) -> int:
    import argparse
    from pathlib import Path

    import multidraft as md

    parser = argparse.ArgumentParser(
        prog="python -m multidraft.bench --launches",
        description="Kernel-launching aten ops and host reads (device synchronisations) of the generation loop "
        "per round, outside the models, beside target.generate and transformers' assisted generation; then of "
        "one device verify call per verifier. Counted exactly on CPU tensors taking the accelerator's path.")
    parser.add_argument("--pair", type=Path, help="a trained pair (scripts/train_pair.py output, e.g. data/pair) "
                        "instead of the tiny random Llama pair")
    parser.add_argument("--draft", default="draft", help="the draft's directory under --pair (default %(default)s)")
    parser.add_argument("--prompt", default="And God said unto Moses,", help="the prompt of --pair")
    parser.add_argument("--new-tokens", type=int, default=48, help="sampled tokens per run (default %(default)s)")
    parser.add_argument("--vocab", type=int, default=4096, help="vocabulary of the tiny pair (default %(default)s)")
    parser.add_argument("--draft-top-k", type=int, default=16, help="draft top-k of the multidraft rows "
                        "(0: the full draft law; default %(default)s)")
    parser.add_argument("--no-otlp-chains", action="store_true", help="skip the row of otlp chains (n=2, L=4)")
    parser.add_argument("--verify-vocab", type=int, default=32000, help="V of the verify calls (default %(default)s)")
    parser.add_argument("--verify-batch", type=int, default=64, help="rows B of a verify call (default %(default)s)")
    parser.add_argument("--verify-top", type=int, default=32, help="draft top-k of the verify calls' q "
                        "(default %(default)s)")
    parser.add_argument("--verifiers", default=",".join(md.verifier_names()),
                        help="verifiers of the verify table, comma-separated (default: all; '' for no table)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: shared cores)")
    args = parser.parse_args(argv)
    verifiers = [name for name in args.verifiers.split(",") if name.strip()]
    unknown = sorted(set(verifiers) - set(md.verifier_names()))
    if unknown:
        parser.error(f"--verifiers: unknown {unknown}; known: {', '.join(md.verifier_names())}")
    if args.new_tokens < 1 or args.vocab < 8 or args.verify_vocab < 2 or args.verify_batch < 1 or args.verify_top < 1:
        parser.error("need --new-tokens >= 1, --vocab >= 8, --verify-vocab >= 2, --verify-batch >= 1, "
                     "--verify-top >= 1")
    torch.set_num_threads(args.threads)
    if args.pair is not None:
        if not (args.pair / "target").is_dir():
            parser.error(f"no trained pair under {args.pair}: run scripts/train_pair.py first")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.pair / "tokenizer")
        target = AutoModelForCausalLM.from_pretrained(args.pair / "target", dtype=torch.float32).eval()
        draft = AutoModelForCausalLM.from_pretrained(args.pair / args.draft, dtype=torch.float32).eval()
        prompt = tokenizer(args.prompt, return_tensors="pt").input_ids
        pair = f"the pair under {args.pair}, prompt {args.prompt!r}"
    else:
        target, draft = tiny_pair(args.vocab)
        prompt = torch.tensor([[1, 2, 3, 4, 5]])
        pair = f"a random Llama pair (2 and 1 layers, width 64, V = {args.vocab}), a 5-token prompt"
    methods = list(LOOP_METHODS) + ([] if args.no_otlp_chains else [OTLP_CHAINS])
    rows = loop_counts(target, draft, prompt, args.new_tokens, methods, draft_top_k=args.draft_top_k or None)
    print(f"## The generation loop, per round\n\n{pair}, {args.new_tokens} new tokens, draft top-k "
          f"{args.draft_top_k or 'none'}; assisted generation drafts 4 tokens a round (constant schedule, no "
          "confidence stop). Counts outside the models' forward passes, CPU tensors on the accelerator's path. "
          f"Goals: a single-draft chain at most assisted's ops per round; several drafts at most "
          f"{OPS_PER_FORWARD_FACTOR:g} x assisted's ops per model forward; host reads per round at most depth + 1.\n")
    print(format_counts(rows))
    if verifiers:
        verify_rows = verify_counts(verifiers, B=args.verify_batch, V=args.verify_vocab, top=args.verify_top)
        print(f"\n## One device verify call\n\nB = {args.verify_batch} rows, V = {args.verify_vocab}, q truncated to "
              f"its top {args.verify_top} tokens, float32 CPU tensors on the accelerator's path; the second call "
              f"counted, host ms the median of 3 more. Goal: at most {VERIFY_MAX_OPS} ops and {VERIFY_MAX_READS} "
              "host read per call.\n")
        print(format_verify_counts(verify_rows))
    return 0
