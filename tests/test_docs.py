"""The docs read true: every cited section and anchor exists, every relative Markdown link resolves, and
the headline figures are stated once, in the README, as the sealed run's results.json has them.

A section citation is ``<file>.md §<Heading>`` (``docs/design.md §Graph``); the shorthand ``DESIGN
§<Heading>`` cites docs/design.md. An anchor is ``<file>.md#<slug>`` with GitHub's heading slugs.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
SCANNED = {".md", ".py", ".yaml", ".yml", ".sh", ".toml", ".ipynb", ".cfg", ".txt"}

SECTION = re.compile(r"(DESIGN|[\w./-]*[\w-]\.md)\s*§\s*([A-Za-z0-9][\w\s.'/-]{0,80})")
ANCHOR = re.compile(r"([\w./-]*[\w-]\.md)#([\w-]+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def repo_files() -> list[Path]:
    """Tracked files and untracked ones git does not ignore, with a text suffix we scan."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    files = {ROOT / line for line in out if line}
    return sorted(p for p in files if p.is_file() and (p.suffix in SCANNED or p.name == "Makefile"))


def headings(path: Path) -> list[str]:
    """Markdown headings of `path`, outside fenced code."""
    found, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.append(m.group(1))
    return found


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in headings(path):
        base = slug(h)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def target(cited: str, where: Path, root: Path = ROOT) -> Path | None:
    """The Markdown file a citation in `where` names: relative to it, to the root or to docs/."""
    if cited == "DESIGN":
        return root / "docs" / "design.md"
    for base in (where.parent, root, root / "docs"):
        p = (base / cited).resolve()
        if p.is_file():
            return p
    return None


def cites_section(text: str, names: list[str]) -> bool:
    """`text` (what follows the §) starts with one of the heading `names`, whole words."""
    text = " ".join(text.split())
    return any(text.startswith(n) and (len(text) == len(n) or not text[len(n)].isalnum()) for n in names)


def broken_citations(files: list[Path], root: Path = ROOT) -> list[str]:
    bad = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        for m in SECTION.finditer(text):
            doc = target(m.group(1), f, root)
            if doc is None or not cites_section(m.group(2), [" ".join(h.split()) for h in headings(doc)]):
                bad.append(f"{f.relative_to(root)}: {m.group(1)} §{m.group(2).strip()[:40]}")
        for m in ANCHOR.finditer(text):
            doc = target(m.group(1), f, root)
            if doc is not None and m.group(2) not in anchors(doc):
                bad.append(f"{f.relative_to(root)}: {m.group(1)}#{m.group(2)}")
    return bad


def test_every_cited_section_and_anchor_exists():
    assert DESIGN.is_file()
    bad = broken_citations([f for f in repo_files() if f != Path(__file__)])  # this file cites broken ones on purpose
    assert not bad, "citations of sections that do not exist:\n" + "\n".join(bad)


def test_the_checker_finds_missing_sections_and_anchors(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text("# Design\n\n## Graph\n\n```\n## Not a heading\n```\n")
    good = tmp_path / "good.py"
    good.write_text('"""See docs/design.md §Graph, design.md#graph and (DESIGN\n§Graph)."""\n')
    bad = tmp_path / "bad.md"
    bad.write_text("docs/design.md §Foo, design.md#foo, docs/design.md §Graphs, DESIGN §Not a heading\n")
    assert broken_citations([good], tmp_path) == []
    assert broken_citations([bad], tmp_path) == ["bad.md: docs/design.md §Foo", "bad.md: docs/design.md §Graphs",
                                       "bad.md: DESIGN §Not a heading", "bad.md: design.md#foo"]


def test_relative_markdown_links_resolve():
    bad = []
    for f in repo_files():
        if f.suffix != ".md":
            continue
        for m in LINK.finditer(f.read_text(encoding="utf-8")):
            link = m.group(1).split("#", 1)[0]
            if not link or "://" in link or link.startswith("mailto:"):
                continue
            if not (f.parent / link).exists():
                bad.append(f"{f.relative_to(ROOT)}: {m.group(1)}")
    assert not bad, "links to files that do not exist:\n" + "\n".join(bad)


def test_nothing_cites_the_developers_guide():
    """The repository carries its own design document; the developers' guide stays outside it."""
    bad = [str(f.relative_to(ROOT)) for f in repo_files()
           if f != Path(__file__) and re.search(r"\bDESIGN\.md\b|shared/DESIGN", f.read_text(errors="replace"))]
    assert not bad


def readme_figures() -> dict[str, str]:
    """The headline cells the README must show, from the sealed run's results.json."""
    results = json.loads((ROOT / "experiments/results/wikileads-sealed/results.json").read_text())
    m = results["methods"]

    def vs(name: str) -> str:
        p = m[name]["vs_majority"]
        return f"{m[name]['em']:.1f}: {p['diff']:+.1f} [{p['low']:+.1f}, {p['high']:+.1f}], {p['won']}/{p['lost']}"

    return {"majority": f"{m['majority']['em']:.1f}", "trace": vs("trace"), "trace_grounded": vs("trace_grounded"),
            "oracle": f"{m['oracle']['em']:.1f}"}


def test_readme_headline_is_the_sealed_run():
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `wikileads`"))
    cells = [c.strip().replace("**", "") for c in row.strip("|").split("|")]
    figures = readme_figures()
    assert cells[2:] == [figures["majority"], figures["trace"], figures["trace_grounded"], figures["oracle"]]


@pytest.mark.parametrize("figure", ["[-2.8, +0.6]", "[+1.0, +5.6]", "[+1.8, +6.6]", "[-1.6, +0.4]", "[+0.2, +1.6]",
                                    "89.4"])
def test_headline_figures_are_stated_once(figure):
    """Each sealed figure lives in one Markdown file (the README's table or docs/results.md); model cards
    and other READMEs link there."""
    holders = [str(f.relative_to(ROOT)) for f in repo_files() if f.suffix == ".md" and figure in f.read_text()]
    assert len(holders) == 1, f"{figure} appears in {holders}"
