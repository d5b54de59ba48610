from __future__ import annotations

from typing import Any

from muster_gateway.queries import paginate


def rows(*roles: str) -> list[dict[str, Any]]:
    letter = {"U": "USER", "A": "ASSISTANT", "T": "TOOL"}
    return [{"seq": i, "role": letter[r]} for i, r in enumerate(roles, start=1)]


def seqs(page: list[dict[str, Any]]) -> list[int]:
    return [row["seq"] for row in page]


def test_newest_rounds_in_ascending_order() -> None:
    history = rows("U", "A", "U", "A", "T", "A", "U", "A")
    page, next_before = paginate(history, 2)
    assert seqs(page) == [3, 4, 5, 6, 7, 8]
    assert next_before == 3


def test_page_reaching_the_beginning_has_no_next() -> None:
    history = rows("U", "A", "U", "A")
    assert paginate(history, 2) == (history, None)
    assert paginate(history, 5) == (history, None)


def test_exact_fit_with_nothing_older() -> None:
    history = rows("U", "A", "T", "A")
    page, next_before = paginate(history, 1)
    assert seqs(page) == [1, 2, 3, 4] and next_before is None


def test_walking_pages_covers_everything_once() -> None:
    history = rows("U", "A", "U", "A", "T", "T", "A", "U", "U", "A")
    seen: list[int] = []
    before: int | None = None
    while True:
        window = [r for r in history if before is None or r["seq"] < before]
        page, before = paginate(window, 1)
        seen = seqs(page) + seen
        if before is None:
            break
    assert seen == list(range(1, 11))


def test_rows_before_the_first_user_message_come_with_the_oldest_page() -> None:
    history = rows("A", "U", "A")
    page, next_before = paginate(history, 1)
    assert seqs(page) == [2, 3] and next_before == 2
    assert paginate(history[:1], 1) == (history[:1], None)


def test_empty() -> None:
    assert paginate([], 20) == ([], None)
