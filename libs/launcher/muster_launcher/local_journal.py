"""What a LOCAL client has run: tool requests by `requestId`, with their results.

The server sends every outstanding request again whenever a client connects, so the same
request may arrive many times; it must run once. The journal answers "already run?" for the
newest `limit` request ids. With a path it is also an append-only JSON-lines file, written
(and fsync'ed) before the tool runs (`started`) and before the answer is sent (`result`), so
a restarted client neither runs a request again nor loses its answer. A request that was
started but has no result was interrupted by the client stopping: like an interrupted
tool on the server, it is not run again; it gets an error result saying so.

The file lives outside the client's directory (the agent's tools see that directory and
must not read or change the journal); `default_path` picks one per directory.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any

Result = dict[str, Any]
INTERRUPTED: Result = {
    "success": False,
    "error": "the LOCAL client stopped while this tool was running; it is not run again",
}


def default_path(directory: Path, state_dir: Path | None = None) -> Path:
    """`$XDG_STATE_HOME/muster/local/<digest of the directory's real path>/requests.jsonl`
    (`~/.local/state` without XDG_STATE_HOME), or `state_dir/requests.jsonl`."""
    if state_dir is None:
        base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
        digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
        state_dir = base / "muster" / "local" / digest
    return state_dir / "requests.jsonl"


class RequestJournal:
    def __init__(self, path: Path | None = None, limit: int = 10_000) -> None:
        self.path, self.limit = path, limit
        # request id -> result; None while the request runs (only ever in this process).
        self._entries: OrderedDict[str, Result | None] = OrderedDict()
        self._lines = 0
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._load(path)
            self._file = path.open("a", encoding="utf-8")

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._entries

    def result(self, request_id: str) -> Result | None:
        """The result of a request that ran, else None."""
        return self._entries.get(request_id)

    def start(self, request_id: str) -> None:
        self._remember(request_id, None)
        self._append({"requestId": request_id, "started": True})

    def finish(self, request_id: str, result: Result) -> None:
        self._remember(request_id, result)
        self._append({"requestId": request_id, "result": result})
        if self._lines > 2 * self.limit:
            self._compact()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _remember(self, request_id: str, result: Result | None) -> None:
        self._entries[request_id] = result
        self._entries.move_to_end(request_id)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)

    def _load(self, path: Path) -> None:
        if not path.exists():
            return
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                self._lines += 1
                try:
                    entry = json.loads(line)
                    request_id = str(entry["requestId"])
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a crash
                result = entry.get("result")
                self._remember(request_id, result if isinstance(result, dict) else INTERRUPTED)

    def _append(self, entry: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        self._lines += 1

    def _compact(self) -> None:
        """Rewrite the file with only the entries kept (atomically: temp file + rename)."""
        assert self.path is not None and self._file is not None
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as out:
            for request_id, result in self._entries.items():
                entry = {"requestId": request_id, "result": result or INTERRUPTED}
                out.write(json.dumps(entry) + "\n")
            out.flush()
            os.fsync(out.fileno())
        self._file.close()
        os.replace(tmp, self.path)
        self._file = self.path.open("a", encoding="utf-8")
        self._lines = len(self._entries)
