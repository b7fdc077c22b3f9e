"""The vLLM plugin's engine tests run in the vLLM environment (make vllm-env; the Makefile runs
them with ``--confcutdir=tests/vllm``, so the main suite's conftest is not loaded here), with
engines in this process: the runner's sampler and drafter can be inspected and a start costs
seconds."""
import os

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # before vLLM is imported
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: tiny models need little

import pytest  # noqa: E402

import models  # noqa: E402


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """Model directories {"target", "draft", "pruned"} (tests/vllm/models.py)."""
    return models.build(str(tmp_path_factory.mktemp("models")))
