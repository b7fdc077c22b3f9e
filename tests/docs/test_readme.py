"""The README's Python examples run as written, and so do the blocks of the top-level docs pages
marked as examples (those importing torch only where it is installed).

In docs/*.md an example is a ```python block right under the line
``<!-- example: tests/docs/test_readme.py runs this block -->``; the other Python blocks of those
pages (signature lists, sketches) are not run."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKER = "<!-- example: tests/docs/test_readme.py runs this block -->"
# The pages that took the README's examples when it was shortened: each keeps at least one.
PAGES_WITH_EXAMPLES = ("inputs.md", "devices.md", "model-generate.md", "oov.md")


def readme_blocks():
    return [(README, block) for block in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)]


def docs_blocks():
    pattern = re.escape(MARKER) + r"\n```python\n(.*?)```"
    return [(page, block) for page in sorted((ROOT / "docs").glob("*.md"))
            for block in re.findall(pattern, page.read_text(), flags=re.S)]


BLOCKS = readme_blocks() + docs_blocks()


def test_readme_has_python_examples():
    assert readme_blocks(), "README has no python example"


def test_docs_pages_keep_their_examples():
    pages = {page.name for page, _ in docs_blocks()}
    missing = sorted(set(PAGES_WITH_EXAMPLES) - pages)
    assert not missing, f"no block marked {MARKER!r} in docs/{missing}"


@pytest.mark.parametrize("source, block", BLOCKS,
                         ids=[f"{path.relative_to(ROOT)}:block{k}" for k, (path, _) in enumerate(BLOCKS)])
def test_readme_python_block_runs(source, block):
    if re.search(r"^\s*(import torch|from transformers|from multidraft import hf)", block, flags=re.M):
        pytest.importorskip("torch", reason="this example needs torch: pip install 'multidraft[hf]'")
    exec(compile(block, str(source), "exec"), {})
