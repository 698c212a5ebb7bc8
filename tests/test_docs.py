"""The README stays a front page and the manual's links hold.

The README is at most 250 lines and carries no history of the verdict's seeds (that is
CHANGELOG.md's); docs/accuracy.md carries the latest seeds only; every relative link in
README.md, CHANGELOG.md and docs/*.md points to a file that exists, and a link to a
heading of a Markdown file to a heading that is there, as GitHub and the site name it.
`make test` builds the site itself with `mkdocs build --strict`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# "seed 7", "seeds 101, 131", "--seed 23", "seed=41", "(seed 503)"
SEED = re.compile(r"(?:--)?\bseeds?\b\s*[=:(]?\s*(\d+)", re.IGNORECASE)


def _pages() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if match:
            mark = match.group(2)
            if fence is None:
                fence = mark[0] * len(mark)
            elif mark.startswith(fence):
                fence = None
            continue
        if fence is None:
            lines.append(line)
    return lines


def _links(path: Path) -> list[str]:
    targets = []
    for line in _prose(path.read_text(encoding="utf-8")):
        targets += LINK.findall(INLINE_CODE.sub("", line))
    return targets


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it (and the site, configured alike in mkdocs.yml)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in _prose(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        slug = _slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines, more than {MAX_README_LINES}: "
        "move the detail into a page of docs/ and link it"
    )
    # The two commands a newcomer runs come first.
    commands = [line.split("#")[0].strip() for line in lines if line.startswith("make ")]
    assert commands[:2] == ["make demo", "make test"]


def test_readme_holds_no_seed_history() -> None:
    text = README.read_text(encoding="utf-8")
    seeds = sorted({int(number) for number in SEED.findall(text)})
    assert not seeds, (
        f"README.md names seeds {seeds}: the accuracy figures belong in docs/accuracy.md "
        "and their history in CHANGELOG.md"
    )
    assert "verdict-history" not in text


def test_accuracy_page_holds_the_latest_seeds_only() -> None:
    text = (DOCS / "accuracy.md").read_text(encoding="utf-8")
    seeds = {int(number) for number in SEED.findall(text)}
    assert seeds, "docs/accuracy.md names the seeds its figures come from"
    assert len(seeds) <= 2, (
        f"docs/accuracy.md names seeds {sorted(seeds)}: keep the latest and its held-out "
        "seed, move the others to CHANGELOG.md"
    )


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files_that_exist(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif not destination.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_checks_see_links_and_headings() -> None:
    # The link pattern and the slugs on shapes the pages use, so a check that finds
    # nothing cannot pass for one that found everything in order.
    assert _slug("Finding a split stack: `pinchpoint init --agent`") == (
        "finding-a-split-stack-pinchpoint-init---agent"
    )
    assert _slug("The engine's HTTP/1.1 client") == "the-engines-http11-client"
    line = "see [Plans](plans.md#written-by-hand) and `[x](not-a-link.md)`, ![i](a.png)"
    assert LINK.findall(INLINE_CODE.sub("", line)) == ["plans.md#written-by-hand", "a.png"]
    assert len(_links(README)) >= 10
    assert SEED.findall("held out (seed 23), --seed 401 and seeds 101") == ["23", "401", "101"]
