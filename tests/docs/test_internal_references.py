"""User-facing text says what it means: no pointers a reader cannot follow.

The README, docs/, and the docstrings and comments of python/, scripts/, cpp/ and the notebook
generators cite papers by their short keys ([GR], [OOV], [NH], [CD], [HUB]) and their own
numbering, and state requirements and reasons directly. Refused, case-insensitive:

- pointers to discussions a reader cannot see: "the issue", "issue N", "issue #N";
- private labels: "spec §", "seed 00N";
- workspace paths and machine-specific wording: "/work/", "../shared", "this project's N-core".

URLs are left out before matching, so a link to another project's tracker (for instance a GitHub
URL ending in ``/issues/123``) is allowed. Wrapped text is matched across line breaks, comment
markers included ("the" at the end of one comment line, "issue" at the start of the next)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
INTERNAL = re.compile(
    r"\bthe\s+issues?\b"            # "the issue", "the issue's", "the issues"
    r"|\bissues?\s*#?\s*\d"         # "issue 41", "issue #3", "issues 3 and 4"
    r"|\bspec\s*§"                  # private section labels
    r"|\bseed[ -]?00\d"             # private seed labels
    r"|/work/|\.\./shared|this project's \d-core",
    re.IGNORECASE)
URL = re.compile(r"(?:https?|ftp)://[^\s)>\]\"'`]+|www\.[^\s)>\]\"'`]+", re.IGNORECASE)
# What a line may start with before its prose: indentation and comment markers (#, //, /*, *, >).
LEAD = re.compile(r"^\s*(?:(?:#+|//+|/\*+|\*+|>)\s*)?")


def scanned_files():
    python = ROOT / "python"
    files = [*python.rglob("*.py"), *python.rglob("*.pyi"),
             *(p for p in (ROOT / "scripts").rglob("*") if p.is_file() and p.suffix in {".py", ".sh", ".supp", ""}),
             *(ROOT / "cpp").rglob("*.[ch]pp"),
             *(ROOT / "docs").rglob("*.md"), *(ROOT / "docs").rglob("*.rst"), *(ROOT / "docs").glob("api/*.py"),
             *(ROOT / "notebooks").glob("*.py"),
             ROOT / "README.md"]
    return sorted(set(files))


def hits_in(text):
    """(line number, matched text) of every refused phrase in text, matched across line breaks."""
    prose, starts = [], []
    offset = 0
    for line in text.splitlines():
        line = URL.sub(" ", line)
        line = line[LEAD.match(line).end():].rstrip()
        starts.append(offset)
        prose.append(line)
        offset += len(line) + 1
    joined = " ".join(prose)
    found = []
    for match in INTERNAL.finditer(joined):
        number = sum(1 for start in starts if start <= match.start())
        found.append((number, re.sub(r"\s+", " ", match.group(0))))
    return found


def test_the_guard_matches_what_it_refuses_and_allows_urls():
    refused = ["As the issue asks, ...", "see issue 41", "Issue #3 says", "The\n# issue's bar", "spec § 4.2",
               "seed 003", "the\nissue measured 4x"]
    for text in refused:
        assert hits_in(text), text
    allowed = ["https://github.com/vllm-project/vllm/issues/123", "<https://github.com/a/b/issues/4>",
               "vLLM's issue tracker", "tissue 3", "the issues_list", "an issue of scale"]
    assert [text for text in allowed if hits_in(text)] == []


def test_user_facing_text_has_no_internal_references():
    files = scanned_files()
    assert len(files) > 50 and ROOT / "README.md" in files
    assert any(path.parent.name == "scripts" for path in files)
    hits = [f"{path.relative_to(ROOT)}:{number}: {phrase}" for path in files
            for number, phrase in hits_in(path.read_text(encoding="utf-8", errors="replace"))]
    assert not hits, "internal references (say what is meant instead):\n" + "\n".join(hits)
