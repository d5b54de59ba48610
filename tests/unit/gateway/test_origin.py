"""The WebSocket's Origin check and the browser's subprotocol token (issue 36)."""

from __future__ import annotations

import base64

from muster_gateway.origin import allowed_origins, offered_protocols, origin_allowed, subprotocol_token


def test_no_origin_is_not_a_browser_and_passes() -> None:
    assert origin_allowed(None, "127.0.0.1:8765", frozenset())


def test_same_origin_passes_and_another_is_refused() -> None:
    assert origin_allowed("http://127.0.0.1:8765", "127.0.0.1:8765", frozenset())
    assert origin_allowed("HTTPS://Example.com", "example.com", frozenset())
    assert not origin_allowed("http://localhost:8765", "127.0.0.1:8765", frozenset())
    assert not origin_allowed("http://127.0.0.1:9999", "127.0.0.1:8765", frozenset())
    assert not origin_allowed("null", "127.0.0.1:8765", frozenset())
    assert not origin_allowed("file://127.0.0.1:8765", "127.0.0.1:8765", frozenset())
    assert not origin_allowed("http://127.0.0.1:8765", None, frozenset())


def test_allowed_origins_widen_the_check() -> None:
    allowed = allowed_origins(" https://console.example.com/ , http://a:1")
    assert allowed == {"https://console.example.com", "http://a:1"}
    assert origin_allowed("https://console.example.com", "gw:8765", allowed)
    assert not origin_allowed("https://evil.example.com", "gw:8765", allowed)
    assert origin_allowed("https://anything", "gw:8765", allowed_origins("*"))
    assert allowed_origins("") == frozenset()


def test_the_token_comes_from_the_bearer_subprotocol() -> None:
    token = "tök=en/+x"
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    offered = offered_protocols(f"muster, bearer.{encoded}")
    assert offered == ["muster", f"bearer.{encoded}"]
    assert subprotocol_token(offered) == token
    assert subprotocol_token(["muster"]) is None
    assert subprotocol_token(["bearer.%%%"]) is None
    assert offered_protocols(None) == []
