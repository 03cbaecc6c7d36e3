"""Every relative link and #anchor in README.md and docs/*.md resolves.

The docs are split into reference, how-to and results pages that link into each
other by section; a renamed heading or a moved section silently breaks those links
on GitHub.  This test reads the Markdown as GitHub renders it (links outside code,
heading anchors slugged the GitHub way) and names every link that leads nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "docs").glob("*/*.md"))]

# [text](target) and ![alt](target), target without spaces; an optional "title".
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation
    removed (letters, digits, '_', '-' and spaces kept), spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "")
    text = "".join(ch for ch in text.lower() if ch.isalnum() or ch in "_- ")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page defines: heading slugs (duplicates numbered -1, -2 ...
    as GitHub does) and explicit <a name=...> / id=... targets."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    text = page.read_text(encoding="utf-8")
    for _, line in prose_lines(text):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return out


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every link in the page's prose (not in code)."""
    found = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            found.append((number, target))
    return found


def broken(page: Path, root: Path = REPO) -> list[str]:
    """Messages naming each relative link of ``page`` whose file or anchor is missing
    (paths shown relative to ``root``)."""
    def show(path: Path) -> str:
        return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)

    problems = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        where = f"{show(page)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file {show(dest)}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading with anchor #{anchor} in {show(dest)}")
    return problems


def test_slug_follows_github() -> None:
    assert slug("One job per study (`calibration.one_job`)") == (
        "one-job-per-study-calibrationone_job")
    assert slug("One data set, few runs: `sequential` against GP-BO (issue 24)") == (
        "one-data-set-few-runs-sequential-against-gp-bo-issue-24")
    assert slug("At the paper's scale (`config/paper.yaml`; epidemic and epidemic_mean)") == (
        "at-the-papers-scale-configpaperyaml-epidemic-and-epidemic_mean")
    assert slug("Sampler (paper Algorithm 1)") == "sampler-paper-algorithm-1"


def test_checker_finds_a_broken_link(tmp_path: Path) -> None:
    """The checker itself fails on a missing file and a missing anchor (a test that
    cannot fail would prove nothing about the docs)."""
    (tmp_path / "a.md").write_text("# Title\n\n## A section\n\n[ok](#a-section) "
                                   "[bad](#nope) [gone](b.md) [self](a.md#title)\n"
                                   "```\n[in code](missing.md)\n```\n`[inline](x.md)`\n")
    page = tmp_path / "a.md"
    targets = [t for _, t in links(page)]
    assert targets == ["#a-section", "#nope", "b.md", "a.md#title"]
    problems = broken(page, root=tmp_path)
    assert len(problems) == 2
    assert "#nope" in problems[0] and "b.md" in problems[1]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    problems = broken(page)
    assert not problems, "broken links:\n" + "\n".join(problems)
