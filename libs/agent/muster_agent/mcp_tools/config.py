"""MCP servers of an agent type, as `agents.toml` lists them, and the names their tools get.

    [general.mcp_servers.tracker]           # a stdio server: started by muster
    command = "python"
    args = ["-m", "tracker_mcp"]
    env = { TRACKER_TOKEN = "MY_TRACKER_TOKEN" }   # variable -> muster's env var holding it

    [general.mcp_servers.search]            # a streamable HTTP server
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "SEARCH_AUTH" }    # header -> muster's env var holding it
    timeout_s = 30                          # per call; default MUSTER_MCP_CALL_TIMEOUT_S

Values of `env` and `headers` are never written in the file: each names an environment
variable of the muster process, read when the server is reached.

A tool is offered to the model as `<server>__<tool>`: OpenAI function names allow only
`[A-Za-z0-9_-]` (at most 64 characters), so the `.` of `server.tool` cannot be used. Server
names are `[A-Za-z0-9-]` (no underscore), so the first `__` always splits the name back.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any

SEPARATOR = "__"
MAX_NAME = 64
_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpConfigError(ValueError):
    """A server entry of agents.toml that cannot be used (raised when loading the file)."""


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # (variable in the server, muster's variable)
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()  # (header, muster's variable)
    timeout_s: float | None = None
    cwd: str | None = None

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def resolved_env(self) -> dict[str, str]:
        return _resolve(self.env, "environment variable")

    def resolved_headers(self) -> dict[str, str]:
        return _resolve(self.headers, "header")


class MissingSecret(LookupError):
    """An environment variable named in agents.toml is not set."""


def _resolve(pairs: tuple[tuple[str, str], ...], what: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, variable in pairs:
        value = os.environ.get(variable)
        if value is None:
            raise MissingSecret(f"{what} {key!r} needs the environment variable {variable} to be set")
        values[key] = value
    return values


def parse_servers(agent_type: str, raw: Any) -> tuple[McpServerConfig, ...]:
    """The `mcp_servers` table of one agent type."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise McpConfigError(f"{agent_type}.mcp_servers must be a table of servers")
    return tuple(_server(agent_type, name, spec) for name, spec in raw.items())


def _server(agent_type: str, name: str, spec: Any) -> McpServerConfig:
    where = f"{agent_type}.mcp_servers.{name}"
    if not _SERVER_NAME.match(name):
        raise McpConfigError(f"{where}: a server name is 1-32 of [A-Za-z0-9-], not starting with -")
    if not isinstance(spec, dict):
        raise McpConfigError(f"{where} must be a table")
    command, url = spec.get("command"), spec.get("url")
    if (command is None) == (url is None):
        raise McpConfigError(f"{where}: give exactly one of `command` (stdio) or `url` (streamable HTTP)")
    if command is not None and "headers" in spec:
        raise McpConfigError(f"{where}: `headers` are for `url` servers")
    if url is not None and ("env" in spec or "args" in spec):
        raise McpConfigError(f"{where}: `args` and `env` are for `command` servers")
    timeout = spec.get("timeout_s")
    if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
        raise McpConfigError(f"{where}.timeout_s must be a positive number")
    return McpServerConfig(
        name=name,
        command=str(command) if command is not None else None,
        args=tuple(str(a) for a in spec.get("args", [])),
        env=_named_variables(where, "env", spec.get("env", {})),
        url=str(url) if url is not None else None,
        headers=_named_variables(where, "headers", spec.get("headers", {})),
        timeout_s=float(timeout) if timeout is not None else None,
        cwd=str(spec["cwd"]) if "cwd" in spec else None,
    )


def _named_variables(where: str, key: str, raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, dict) or not all(isinstance(v, str) and v for v in raw.values()):
        raise McpConfigError(f"{where}.{key} maps each name to the environment variable holding its value")
    return tuple((str(k), v) for k, v in raw.items())


def model_name(server: str, tool: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """The name the model sees for `tool` of `server`: `server__tool`, with characters
    OpenAI refuses replaced by `_`; a name too long (or taken after the replacement) ends
    with a short hash of the original so it stays unique and stable."""
    name = f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_NAME and name not in taken:
        return name
    digest = hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def is_mcp_name(name: str) -> bool:
    """Whether `name` is shaped like an MCP tool's model-facing name (no built-in tool has `__`)."""
    return SEPARATOR in name


def server_of(name: str) -> str:
    return name.split(SEPARATOR, 1)[0]
