"""Token formats shared by the launcher and the gateway: `token=user,…` and `token=user` lines."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from muster_launcher.tokens import (
    default_client_token,
    dev_tokens,
    effective_tokens,
    format_tokens_file,
    load_tokens,
    new_token,
    parse_tokens,
    parse_tokens_file,
)


def test_parse_env_form_keeps_order_and_trims() -> None:
    tokens = parse_tokens(" tok-a = alice ,tok-b=bob,, ")
    assert tokens == {"tok-a": "alice", "tok-b": "bob"}
    assert next(iter(tokens)) == "tok-a"  # `token:` prints the first one


def test_user_may_contain_equals_token_split_on_first() -> None:
    assert parse_tokens("abc=team=red") == {"abc": "team=red"}


@pytest.mark.parametrize("spec", ["nouser", "=bob", "tok=", "tok= "])
def test_malformed_entries_are_rejected(spec: str) -> None:
    with pytest.raises(ValueError, match="token=user"):
        parse_tokens(spec)


def test_one_token_cannot_map_to_two_users() -> None:
    with pytest.raises(ValueError, match="second user"):
        parse_tokens("t=alice,t=bob")
    assert parse_tokens("t=alice,t=alice") == {"t": "alice"}


def test_file_form_allows_comments_and_blank_lines() -> None:
    text = "# local tokens\n\ntok-a=alice\n  tok-b=bob  \n"
    assert parse_tokens_file(text) == {"tok-a": "alice", "tok-b": "bob"}
    assert parse_tokens_file(format_tokens_file({"x": "y", "z": "w"})) == {"x": "y", "z": "w"}


def test_load_tokens_prefers_env_then_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("file-tok=carol\n")
    assert load_tokens({"MUSTER_TOKENS": "t=a", "MUSTER_TOKENS_FILE": str(path)}) == {"t": "a"}
    assert load_tokens({"MUSTER_TOKENS_FILE": str(path)}) == {"file-tok": "carol"}
    assert load_tokens({}) == {}


def test_dev_token_generated_once_and_private(tmp_path: Path) -> None:
    first = dev_tokens(tmp_path)
    ((token, user),) = first.items()
    assert user == "dev" and len(token) >= 24 and "=" not in token and "," not in token
    path = tmp_path / "tokens"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert dev_tokens(tmp_path) == first


def test_effective_tokens_from_env_do_not_replace_dev_token(tmp_path: Path) -> None:
    dev = dev_tokens(tmp_path)
    tokens, path = effective_tokens(tmp_path, {"MUSTER_TOKENS": "tok-a=alice"})
    assert tokens == {"tok-a": "alice"}
    assert parse_tokens_file(path.read_text()) == tokens
    assert dev_tokens(tmp_path) == dev
    tokens, path = effective_tokens(tmp_path, {})
    assert tokens == dev and parse_tokens_file(path.read_text()) == dev


def test_default_client_token(tmp_path: Path) -> None:
    assert default_client_token(tmp_path, {}) is None
    dev = next(iter(dev_tokens(tmp_path)))
    assert default_client_token(tmp_path, {}) == dev
    effective_tokens(tmp_path, {"MUSTER_TOKENS": "tok-a=alice"})
    assert default_client_token(tmp_path, {}) == "tok-a"
    assert default_client_token(tmp_path, {"MUSTER_TOKEN": "explicit"}) == "explicit"


def test_a_generated_token_never_starts_with_a_dash() -> None:
    drawn = iter(["-6js2first", "--again", "ok-token"])
    assert new_token(lambda _n: next(drawn)) == "ok-token"
    assert not any(new_token().startswith("-") for _ in range(500))
