"""docs/README.md maps every page of docs/ (and the notebooks), and the relative links of the README
and of every docs page lead to files that exist."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MAP = DOCS / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(page):
    """The targets of the Markdown links of page that are paths in this repository, anchors dropped."""
    targets = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, flags=re.I) or target.startswith("#"):
            continue  # a URL, or an anchor on the same page
        targets.append((page.parent / target.split("#", 1)[0]).resolve())
    return targets


def test_the_map_lists_every_page_and_notebook():
    listed = set(relative_links(MAP))
    pages = {path.resolve() for path in DOCS.rglob("*")
             if path.is_file() and "notebooks" not in path.relative_to(DOCS).parts and path != MAP}
    pages |= {path.resolve() for path in (ROOT / "notebooks").glob("*.ipynb")}
    assert len(pages) > 30 and listed, "no pages found, or a map without links: the check would be empty"
    missing = sorted(str(path.relative_to(ROOT)) for path in pages - listed)
    assert not missing, f"docs/README.md does not list {missing}"


def test_relative_links_of_the_readme_and_the_top_level_docs_pages_exist():
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    assert all(relative_links(page) for page in (ROOT / "README.md", MAP)), "no relative link found to check"
    broken = [f"{page.relative_to(ROOT)} -> {target}" for page in pages
              for target in relative_links(page) if not target.exists()]
    assert not broken, "\n".join(broken)


def test_the_readme_links_the_map_and_the_pages_it_moved_out():
    readme = (ROOT / "README.md").read_text()
    for page in ("README", "inputs", "devices", "trees", "oov", "performance", "model-generate", "serving",
                 "exactness", "development"):
        assert f"](docs/{page}.md" in readme, f"README does not link docs/{page}.md"


def test_relative_links_of_the_docs_pages_in_subfolders_exist():
    pages = sorted(page for page in DOCS.rglob("*.md")
                   if page.parent != DOCS and "notebooks" not in page.relative_to(DOCS).parts)
    assert pages and any(relative_links(page) for page in pages), "no page or no relative link found to check"
    broken = [f"{page.relative_to(ROOT)} -> {target}" for page in pages
              for target in relative_links(page) if not target.exists()]
    assert not broken, "\n".join(broken)
