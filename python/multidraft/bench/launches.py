"""What a piece of torch code launches on a device, counted exactly on any machine.

On a GPU every aten operator that computes launches at least one kernel, and every read of a
device value on the host (``.item()``, a copy to the host, an operator whose output shape depends
on the data) waits for the device to finish. Both costs are fixed per operator, whatever the sizes,
so their counts predict the overhead of a loop of small operators before a GPU is at hand. They
are the same on a CPU tensor, which takes the same operators through the accelerator's path
(``multidraft._device.CPU_ON_HOST = False``), so the counts here are our GPU figures where no GPU is.

:class:`Launches` counts, while it is entered, in the calling thread:

- ``ops``: aten operators that launch a kernel: every operator but views (slice, select,
  unsqueeze, reshape, expand, detach, ...: they only make a new header over the same memory) and
  the few that only allocate or wrap (``empty``, ``lift_fresh``);
- ``reads``: host reads: :func:`multidraft._device.to_host` calls (every read of the package's
  device path goes there) and the operators that synchronise by themselves (``_local_scalar_dense``,
  behind ``.item()``, ``int(t)`` and ``bool(t)``; ``nonzero``; indexing by a boolean mask);
- ``seconds``: host time (wall time of the calling thread) while it is entered.

Passing ``models`` leaves out what runs inside their forward passes (ops, reads and time): the
counts are then the loop's own, beside the models'. ``forwards`` counts those passes per model.
"""
from __future__ import annotations

import collections
import time
from typing import Dict, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _device

#: Operators that launch no kernel although they are not views: allocation and tensor wrapping.
_NO_KERNEL = frozenset({"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::lift_fresh",
                        "aten::_local_scalar_dense", "aten::alias", "aten::_unsafe_view", "aten::set_"})
#: Operators whose result the host must see before it can go on (a device synchronisation).
_SYNCING = frozenset({"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::unique",
                      "aten::_unique2", "aten::unique_consecutive", "aten::unique_dim", "aten::item",
                      "aten::equal", "aten::is_nonzero"})


def _launches_kernel(func) -> bool:
    return not func.is_view and func.name() not in _NO_KERNEL


def _syncs(func, args) -> bool:
    if func.name() in _SYNCING:
        return True
    if func.name() in ("aten::index", "aten::index_put", "aten::index_put_"):  # a boolean mask: its count is read
        indices = args[1] if len(args) > 1 else ()
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
    return False


class _Counting(TorchDispatchMode):
    def __init__(self, owner: "Launches"):
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        owner = self.owner
        if owner._inside == 0:
            if _launches_kernel(func):
                owner.ops += 1
                owner.by_op[func.name()] += 1
            if _syncs(func, args):
                owner.reads += 1
        return func(*args, **(kwargs or {}))


class Launches:
    """Counts of kernel-launching aten operators, host reads and host seconds while entered (module
    docstring), outside the forward passes of ``models``. Re-entrant counts add up over several
    ``with`` blocks of one object."""

    def __init__(self, models: Sequence[torch.nn.Module] = ()):
        self.models = list(models)
        self.ops = 0
        self.reads = 0
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
        self._mode = _Counting(self)
        self._mode.__enter__()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds += time.perf_counter() - self._start
        self._mode.__exit__(*exc)
        self.reads += _device.host_reads() - self._reads_before
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    def passes(self, model: torch.nn.Module) -> int:
        """Forward passes of ``model`` while entered."""
        return self.forwards[id(model)]


def _per_round(label: str, launches: Launches, rounds: int, forwards: int, **extra) -> dict:
    return dict(method=label, rounds=rounds, ops_per_round=launches.ops / rounds,
                ops_per_forward=launches.ops / forwards, reads_per_round=launches.reads / rounds,
                host_ms_per_round=1e3 * launches.seconds / rounds, **extra)


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
            rows.append(_per_round("target.generate", count, count.passes(target), count.passes(target)))
            with Launches([target, draft]) as count:
                target.generate(prompt, assistant_model=draft, **common)
            passes = count.passes(target)
            rows.append(_per_round(f"transformers assisted, {assisted_tokens} draft tokens", count, passes,
                                   passes + count.passes(draft)))
            for method in methods:
                options = {k: v for k, v in method.items() if k != "label"}
                with Launches([target, draft]) as count:
                    out = target.generate(prompt, custom_generate=hf.decode, draft_model=draft, seed=0,
                                          draft_top_k=draft_top_k, return_dict_in_generate=True, **options, **common)
                stats = out.multidraft
                label = method.get("label") or "multidraft " + ", ".join(f"{k}={v}" for k, v in options.items())
                rows.append(_per_round(label, count, stats.target_calls, count.passes(target) + count.passes(draft),
                                       tokens_per_pass=stats.tokens_per_target_pass))
    finally:
        (draft.generation_config.num_assistant_tokens, draft.generation_config.num_assistant_tokens_schedule,
         draft.generation_config.assistant_confidence_threshold, _device.CPU_ON_HOST) = saved
    return rows


def format_counts(rows: Sequence[dict]) -> str:
    """The rows of :func:`loop_counts` as a Markdown table."""
    lines = ["| per round (one target pass) | kernel-launching ops outside the models | per model forward | host reads "
             "| host ms outside the models |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['method']} | {r['ops_per_round']:.0f} | {r['ops_per_forward']:.0f} | "
                     f"{r['reads_per_round']:.1f} | {r['host_ms_per_round']:.2f} |")
    return "\n".join(lines)
