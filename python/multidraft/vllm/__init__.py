"""multidraft inside vLLM: exact chain verification and lossless drafting from another vocabulary.

A ``vllm.general_plugins`` entry point (:func:`register`), loaded by vLLM in each of its
processes, inert unless an engine's configuration asks for it::

    from vllm import LLM, SamplingParams
    import multidraft.vllm

    llm = LLM(model=target, speculative_config={"method": "draft_model", "model": draft,
                                                "num_speculative_tokens": 3,
                                                "draft_sample_method": "probabilistic"},
              additional_config=multidraft.vllm.options(verifier="sps"))

With it, each step's draft chains are verified by a multidraft verifier on the engine's own
tensors and device, with vLLM's sampling parameters (temperature, top-k/top-p, penalties, ...)
applied to the target's law as vLLM applies them. A drafter of another or pruned vocabulary
(``"use_heterogeneous_vocab": True``) drafts at temperature > 0 from [OOV]'s proposal over the
target's vocabulary (TLI, or RDK's p' = M^T q' with ``affinity=``), which vLLM alone refuses.
docs/serving.md has the use, the tests and the measurements; :mod:`._patch` every point where
vLLM is changed.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Union

from ._options import CHAIN_VERIFIERS, KEY, SUPPORTED_VLLM, Options

__all__ = ["CHAIN_VERIFIERS", "SUPPORTED_VLLM", "options", "register"]

PathLike = Union[str, "os.PathLike[str]"]


def options(verifier: str = "sps", *, verifier_options: Optional[Mapping[str, Any]] = None,
            vocabulary_map: Optional[PathLike] = None, affinity: Optional[PathLike] = None) -> dict:
    """vLLM's ``additional_config`` that turns the plugin on, checked here before an engine starts.

    ``verifier``: the chain verifier, one of :data:`CHAIN_VERIFIERS` (one draft per position drawn
    from the draft's law; ``"sps"`` is Leviathan/Chen's), or ``"vllm"`` for vLLM's own sampler;
    ``verifier_options``: keywords of ``md.verifier``. For a drafter of another vocabulary
    (``speculative_config["use_heterogeneous_vocab"] = True``): ``vocabulary_map``, the path of a
    :meth:`multidraft.rdk.VocabularyMap.save` file (drafter ids to target ids) instead of vLLM's
    token-string intersection, and ``affinity``, the path of a
    :meth:`multidraft.rdk.AffinityMatrix.save` file over the target's vocabulary for RDK.

    Returns ``{"multidraft": {...}}``. Raises ValueError for a vLLM other than
    :data:`SUPPORTED_VLLM`, an unknown verifier or option, or a file that is not a saved map.
    """
    from ._options import check_version, vllm_version

    check_version(vllm_version())
    entry = {"verifier": verifier, "verifier_options": verifier_options, "vocabulary_map": vocabulary_map,
             "affinity": affinity}
    return {KEY: Options.parse({name: value for name, value in entry.items() if value is not None}).entry()}


def register() -> None:
    """The ``vllm.general_plugins`` entry point: install the plugin's subclasses into vLLM.

    Runs in every vLLM process of an environment where multidraft is installed, for every
    engine, so it never raises: with a vLLM other than :data:`SUPPORTED_VLLM` it installs
    nothing (an engine that asks for the plugin is then refused by :func:`options`), and the
    subclasses behave exactly as vLLM's own classes unless an engine asks.
    """
    from ._options import supported, vllm_version

    if not supported(vllm_version()):
        return
    from . import _patch

    _patch.install()
