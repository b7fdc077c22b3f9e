"""Every page of the API reference (docs/api/*.rst) opens with a ``.. doctest::`` example whose
printed results are checked here with the standard library's doctest (``make docs`` runs the same
blocks with Sphinx's doctest builder), links the notebooks that use its entries, and the index
lists every notebook of notebooks/ under "Notebooks"."""
import doctest
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
PAGES = sorted(path for path in API.glob("*.rst") if path.name != "index.rst")
NOTEBOOKS = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
# The option flags of sphinx.ext.doctest (its doctest_default_flags), so both runs agree.
FLAGS = doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL | doctest.DONT_ACCEPT_TRUE_FOR_1


def doctest_blocks(text):
    """The bodies of the ``.. doctest::`` directives of one reST page, dedented (options dropped)."""
    blocks = []
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line.strip() != ".. doctest::":
            continue
        body = []
        for following in lines[start + 1:]:
            if following.strip() and not following.startswith("   "):
                break  # the first unindented line ends the directive
            body.append(following[3:])
        blocks.append("\n".join(part for part in body if not part.lstrip().startswith(":")) + "\n")
    return blocks


def test_every_api_page_has_a_checked_example():
    assert PAGES
    for page in PAGES:
        blocks = doctest_blocks(page.read_text())
        assert blocks, f"{page.name} has no .. doctest:: example"
        examples = [e for block in blocks for e in doctest.DocTestParser().get_examples(block)]
        assert any(e.want for e in examples), f"{page.name}: its example prints nothing to check"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_api_page_example_prints_what_it_shows(page):
    text = page.read_text()
    if "import torch" in text:
        pytest.importorskip("torch", reason=f"{page.name}'s example needs torch: pip install 'multidraft[hf]'")
    globs = {}  # the blocks of one page share their names, as under sphinx.ext.doctest
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for k, block in enumerate(doctest_blocks(text)):
        test = doctest.DocTestParser().get_doctest(block, globs, f"{page.stem}[{k}]", str(page), 0)
        runner.run(test, clear_globs=False)
    assert runner.failures == 0, f"{page.name}: {runner.failures} example(s) print something else (see above)"


def test_api_pages_link_their_notebooks():
    linked = set()
    for page in PAGES:
        text = page.read_text()
        notebooks = re.findall(r":doc:`notebooks/(\w+)`", text)
        assert notebooks or ":ref:`notebooks`" in text, f"{page.name} links no notebook"
        assert set(notebooks) <= set(NOTEBOOKS), f"{page.name} links a notebook that does not exist"
        linked.update(notebooks)
    assert linked == set(NOTEBOOKS), f"no API page links {sorted(set(NOTEBOOKS) - linked)}"


def test_index_lists_every_notebook():
    index = (API / "index.rst").read_text()
    section = index.split(":caption: Notebooks", 1)
    assert len(section) == 2, "index.rst has no Notebooks toctree"
    listed = re.findall(r"^   notebooks/(\w+)$", section[1], flags=re.M)
    assert sorted(listed) == NOTEBOOKS
    # docs/api/notebooks is a link to notebooks/: the build renders the committed notebooks themselves
    assert (API / "notebooks").resolve() == (ROOT / "notebooks").resolve()


def test_readme_names_each_rendered_notebook_page_and_its_source():
    readme = (ROOT / "README.md").read_text()
    for name in NOTEBOOKS:
        assert f"`build/docs/notebooks/{name}.html`" in readme, f"README does not name the rendered page of {name}"
        assert f"](notebooks/{name}.ipynb)" in readme, f"README does not link notebooks/{name}.ipynb"
