"""The `editor` workload kind: a parent delegating one `coder` child whose middle step is a
single long round of `edit_file` calls on one file, so a kill often lands inside the round
(DESIGN §6 invariant 5: the round is discarded on resume, and no edit runs twice).

The child writes `s{index}/edits.txt` = "END", then edit k replaces "END" with "<k>END"
(k = 0..EDITS-1), then answers "edited". Whatever the crashes, the file must read as
ascending, distinct markers followed by "END" (see `chaos.checks_edits`).
"""

from __future__ import annotations

import random
import re
from typing import Any

from muster_client import call, script

EDITS = 120
ANSWER = "edited"
FILE_NAME = "edits.txt"
TAIL = "END"
CONTENT = re.compile(r"(?:<\d+>)*END")
MARKER = re.compile(r"<(\d+)>")


def edits_path(index: int) -> str:
    """The file's path inside the root session's workspace."""
    return f"s{index}/{FILE_NAME}"


def marker(k: int) -> str:
    return f"<{k}>"


def child_task(rng: random.Random, index: int) -> str:
    path = edits_path(index)
    first: dict[str, Any] = {"tool_calls": [call("write_file", path=path, content=TAIL)]}
    edits: dict[str, Any] = {
        "tool_calls": [
            call("edit_file", path=path, old_string=TAIL, new_string=marker(k) + TAIL) for k in range(EDITS)
        ]
    }
    if rng.random() < 0.5:
        first["delay_ms"] = rng.randint(100, 1500)
    if rng.random() < 0.5:
        edits["delay_ms"] = rng.randint(100, 1500)
    return script(first, edits, {"content": ANSWER})


def parent_script(rng: random.Random, index: int) -> str:
    delegation = call("delegate", agent_type="coder", task=child_task(rng, index))
    return script(
        {"tool_calls": [delegation], "delay_ms": rng.choice([0, rng.randint(100, 1000)])},
        {"content": f"editor {index} done"},
    )
