"""User-facing text says what it means: no pointers a reader cannot follow.

The README, docs/, tests/, and the docstrings and comments of python/, scripts/, cpp/ and the
notebook generators cite papers by their short keys ([GR], [OOV], [NH], [CD], [HUB]) and their own
numbering, and state requirements and reasons directly. Refused, case-insensitive: pointers to
discussions a reader cannot see (an item of our tracker, by number or as "the" one), private
section and seed labels, workspace paths and machine-specific wording (:data:`INTERNAL`; the
phrases are assembled from pieces here so that this file passes its own scan).

URLs are left out before matching, so a link to another project's tracker (for instance a GitHub
URL ending in ``/issues/123``) is allowed. Wrapped text is matched across line breaks, comment
markers included (the article at the end of one comment line, the noun at the start of the next)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
ITEM, LABEL, SEED, WORKSPACE, SHARED = "iss" + "ue", "sp" + "ec", "se" + "ed", "/wo" + "rk/", r"\.\./" + "shared"
INTERNAL = re.compile(
    rf"\bthe\s+{ITEM}s?\b"          # the tracker item, its possessive, the plural
    rf"|\b{ITEM}s?\s*#?\s*\d"       # an item by number, with or without '#'
    rf"|\b{LABEL}\s*§"               # private section labels
    rf"|\b{SEED}[ -]?00\d"           # private seed labels
    rf"|{WORKSPACE}|{SHARED}|this project's \d-core",
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
             *(ROOT / "notebooks").glob("*.py"), *(ROOT / "tests").rglob("*.py"),
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
    refused = [f"As the {ITEM} asks, ...", f"see {ITEM} 41", f"{ITEM.title()} #3 says", f"The\n# {ITEM}'s bar",
               f"{LABEL} § 4.2", f"{SEED} 003", f"the\n{ITEM} measured 4x"]
    for text in refused:
        assert hits_in(text), text
    allowed = [f"https://github.com/vllm-project/vllm/{ITEM}s/123", f"<https://github.com/a/b/{ITEM}s/4>",
               f"vLLM's {ITEM} tracker", f"t{ITEM} 3", f"the {ITEM}s_list", f"an {ITEM} of scale"]
    assert [text for text in allowed if hits_in(text)] == []


def test_user_facing_text_has_no_internal_references():
    files = scanned_files()
    assert len(files) > 50 and ROOT / "README.md" in files
    assert any(path.parent.name == "scripts" for path in files) and pathlib.Path(__file__).resolve() in files
    hits = [f"{path.relative_to(ROOT)}:{number}: {phrase}" for path in files
            for number, phrase in hits_in(path.read_text(encoding="utf-8", errors="replace"))]
    assert not hits, "internal references (say what is meant instead):\n" + "\n".join(hits)
