"""The docs hold together: every relative link in the README, the changelog and the docs
points at a file that exists (and at a heading that exists, for a link into a Markdown
file), and the README stays short enough to read at once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 150
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def documents() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "results" / "README.md"]
    found += sorted((ROOT / "docs").rglob("*.md"))
    found += [*sorted((ROOT / "services").glob("*/README.md")), ROOT / "deploy" / "README.md"]
    return [p for p in found if p.exists()]


def prose(path: Path) -> str:
    """The text outside code fences (a fence may show link-like text that is not a link)."""
    kept, fenced = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(line)
    return "\n".join(kept)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", prose(path), re.M)}


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(path)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no such heading)")
    return broken


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == [], f"{path.relative_to(ROOT)} has broken links"


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


def test_readme_names_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "make run" in text and "make test" in text
