"""The README's Python examples run as written (those importing torch only where it is installed)."""
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_examples():
    assert BLOCKS, "README has no python example"


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{k}" for k in range(len(BLOCKS))])
def test_readme_python_block_runs(block):
    if re.search(r"^\s*(import torch|from transformers|from multidraft import hf)", block, flags=re.M):
        pytest.importorskip("torch", reason="this README example needs torch: pip install 'multidraft[hf]'")
    exec(compile(block, str(README), "exec"), {})
