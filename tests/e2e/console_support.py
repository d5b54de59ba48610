"""Browser fixtures for the console tests: Debian's Chromium driven by Playwright, axe-core
injected from the npm package installed by services/gateway/console/vendor.sh, and
screenshots written to console-screenshots/ (named in the README)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / "services" / "gateway" / "console" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = ROOT / "console-screenshots"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return "Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it)"
    if not AXE.exists():
        return "axe-core is not installed (services/gateway/console/vendor.sh; .ci/run does it)"
    return None


@pytest.fixture
def browser() -> Iterator[Any]:
    """Per test, not per session: Playwright's sync API runs an event loop of its own while
    it is open, and the suite's async tests need theirs (pytest-asyncio's) in between."""
    missing = _missing()
    if missing is not None:
        if _ci():
            pytest.fail(missing)
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield instance
        instance.close()


def _ci() -> bool:
    import os

    return os.environ.get("CI") == "true"


@pytest.fixture(scope="session")
def shots() -> Path:
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    return SHOTS


class Console:
    """A signed-in page on the shared cluster, and what the tests check on it."""

    def __init__(self, page: Any, base_url: str, shots: Path) -> None:
        self.page, self.base_url, self.shots = page, base_url, shots
        self.errors: list[str] = []
        self.urls: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.api_requests: list[Any] = []
        page.on("request", self._on_request)
        page.on("websocket", lambda ws: self.urls.append(ws.url))

    def _on_request(self, request: Any) -> None:
        self.urls.append(request.url)
        if "/v1/" in request.url and request.resource_type in ("fetch", "xhr"):
            self.api_requests.append(request)

    def unauthenticated_api_calls(self) -> list[str]:
        """REST calls the page made without a bearer header (the token is in none of the URLs)."""
        missing = []
        for request in self.api_requests:
            value = request.all_headers().get("authorization", "")
            if not value.startswith("Bearer ") or len(value) <= len("Bearer "):
                missing.append(f"{request.method} {request.url}")
        return missing

    def sign_in(self, token: str) -> None:
        self.page.goto(self.base_url + "/")
        self.page.get_by_label("Token").fill(token)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.get_by_role("heading", name="New session").wait_for()

    def start_session(self, content: str, *, title: str | None = None, permission: str = "auto") -> str:
        """Create a session from the list page's form; returns its id (from the URL)."""
        page = self.page
        if title:
            page.get_by_label("Title (optional)").fill(title)
        page.get_by_label("First message").fill(content)
        page.get_by_label("Permission").select_option(permission)
        page.get_by_role("button", name="Start").click()
        page.wait_for_url("**/sessions/*")
        return str(page.url.rsplit("/", 1)[1])

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"))

    def axe(self, context: str = "body") -> list[dict[str, Any]]:
        """Serious and critical axe-core violations on the current view."""
        # Evaluated over the DevTools protocol: the page's CSP (rightly) refuses an inline tag.
        if not self.page.evaluate("typeof window.axe !== 'undefined'"):
            self.page.evaluate(AXE.read_text() + "\n;undefined")
        result = self.page.evaluate(
            "async (ctx) => (await axe.run(document.querySelector(ctx), {resultTypes: ['violations']})).violations",
            context,
        )
        return [
            {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
            for v in result
            if v["impact"] in ("serious", "critical")
        ]


def script(*steps: dict[str, Any]) -> str:
    return "#script " + json.dumps({"steps": list(steps)})


def write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def delegate(agent_type: str, task: str) -> dict[str, Any]:
    return {"name": "delegate", "arguments": {"agent_type": agent_type, "task": task}}
