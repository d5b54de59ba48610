"""What the SQL tests compare: the files of `store/sql/` and SQL text with its comments and
layout taken out, so a definition reformatted or commented for reading still equals the
one in the database, and any change to what it does (a token, a literal) does not."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from muster_runtime.store.migrate import SQL, SQL_VERSIONS

CREATE = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(FUNCTION|TYPE|TRIGGER|VIEW)\s+(\w+)", re.IGNORECASE)
PUNCTUATION = "()[],;"


@dataclass(frozen=True)
class Definition:
    """One `.sql` file: the object it creates (named as the file) and its text."""

    path: Path
    kind: str  # FUNCTION | TYPE | …
    name: str
    text: str


def definition(path: Path) -> Definition:
    text = path.read_text(encoding="utf-8")
    created = CREATE.findall(code_only(text))
    assert len(created) == 1, f"{path.name}: one CREATE per file, found {created}"
    kind, name = created[0]
    return Definition(path, kind.upper(), name, text)


def current_definitions() -> dict[str, Definition]:
    """The current definition of every function and type: `sql/<name>.sql`."""
    found = {d.name: d for d in map(definition, sorted(SQL.glob("*.sql")))}
    for name, found_definition in found.items():
        assert found_definition.path.stem == name, f"{found_definition.path.name} creates {name}"
    return found


def versioned_definitions() -> list[Definition]:
    """What each migration installed: `sql/versions/<revision>_<name>.sql`, oldest first."""
    return [definition(path) for path in sorted(SQL_VERSIONS.glob("*.sql"))]


def code_only(text: str) -> str:
    """`text` without its `--` comments, quoted literals kept whole (a comment's apostrophe
    or a literal's `--` must not confuse the two)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "'":
            end = i + 1
            while end < len(text) and not (text[end] == "'" and text[end + 1 : end + 2] != "'"):
                end += 2 if text[end] == "'" else 1
            out.append(text[i : end + 1])
            i = end + 1
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def normalised(text: str) -> str:
    """Comments dropped, every run of layout one space, none beside punctuation."""
    parts = re.split(r"('(?:[^']|'')*')", code_only(text))
    for n in range(0, len(parts), 2):  # even parts are code, odd ones literals
        code = re.sub(r"\s+", " ", parts[n])
        parts[n] = re.sub(r" ?([" + re.escape(PUNCTUATION) + r"]) ?", r"\1", code)
    return "".join(parts).strip()
