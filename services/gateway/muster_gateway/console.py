"""The web console (issue 36): a static single-page app served from this package.

`/` and `/sessions/{id}` answer the same page; the page signs in client-side and talks to
the public API only (REST with a bearer header, the WebSocket with the token offered as a
subprotocol, see origin.py). The page needs no token itself, so another user's session URL
gets the page, whose REST read then says `not_found`. Everything is served with a
Content-Security-Policy that allows scripts from this origin only (no inline script, no
eval) and keeps the page from being framed; the files are compressed on the way out.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, Response
from muster_runtime.process.settings import Settings
from starlette.middleware.gzip import GZipMiddleware
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from muster_gateway.origin import allowed_origins

STATIC = Path(__file__).with_name("static")
# Python's table may lack .mjs, and a module script served as octet-stream is refused.
mimetypes.add_type("text/javascript", ".mjs")

CSP = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",  # CSP3: 'self' covers ws:/wss: of this host
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

router = APIRouter()


def _page() -> Response:
    headers = {**HEADERS, "Cache-Control": "no-cache"}
    return FileResponse(STATIC / "index.html", media_type="text/html", headers=headers)


@router.get("/", include_in_schema=False)
async def console_root() -> Response:
    return _page()


@router.get("/sessions/{session_id}", include_in_schema=False)
async def console_session(session_id: str) -> Response:
    # The id is not looked at here: the page reads the session with the user's token.
    return _page()


class _Secured:
    """Static files with the console's security headers."""

    def __init__(self, directory: Path) -> None:
        self._files = StaticFiles(directory=directory)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]
                headers.append((b"cache-control", b"no-cache"))
                message = {**message, "headers": headers}
            await send(message)

        await self._files(scope, receive, send_with_headers)


def install(app: FastAPI, settings: Settings) -> None:
    app.state.allowed_origins = allowed_origins(settings.allowed_origins)
    app.include_router(router)
    app.mount("/console", GZipMiddleware(_Secured(STATIC), minimum_size=512, compresslevel=9), name="console")
