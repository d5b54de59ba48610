from __future__ import annotations

from pathlib import Path

import pytest
from muster_gateway.auth import Authenticator, bearer_token
from muster_runtime.process.tokens import TokenError, load_tokens, parse_tokens, parse_tokens_file


def test_parse_env_form() -> None:
    assert parse_tokens("a=alice, b=bob,,") == {"a": "alice", "b": "bob"}
    assert parse_tokens("tok=user=with=equals") == {"tok": "user=with=equals"}


@pytest.mark.parametrize("spec", ["justatoken", "=alice", "tok=", "a=x,a=y"])
def test_bad_entries_are_rejected_without_echoing_tokens(spec: str) -> None:
    with pytest.raises(TokenError) as info:
        parse_tokens(spec)
    assert "justatoken" not in str(info.value)


def test_parse_file_form() -> None:
    text = "# dev tokens\n\nt1=alice\n  t2 = bob  \n"
    assert parse_tokens_file(text) == {"t1": "alice", "t2": "bob"}


def test_env_wins_over_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("f=file-user\n")
    assert load_tokens({"MUSTER_TOKENS": "e=env-user", "MUSTER_TOKENS_FILE": str(path)}) == {
        "e": "env-user"
    }
    assert load_tokens({"MUSTER_TOKENS_FILE": str(path)}) == {"f": "file-user"}
    assert load_tokens({}) == {}
    with pytest.raises(TokenError):
        load_tokens({"MUSTER_TOKENS_FILE": str(tmp_path / "missing")})


def test_bearer_header() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None


def test_authenticator() -> None:
    auth = Authenticator({"t1": "alice", "t2": "bob"})
    assert auth.user_for("t1") == "alice" and auth.user_for("t2") == "bob"
    assert auth.user_for("t3") is None and auth.user_for("") is None
    assert auth.user_for(None) is None and auth.user_for("t") is None
