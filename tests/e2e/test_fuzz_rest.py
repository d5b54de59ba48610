"""Hostile REST input: schemathesis cases for every operation of the gateway's own
/openapi.json, valid and schema-violating, sent with alice's, bob's, a wrong, a garbage or
no token, and with path ids pointing at alice's real sessions.

Required of every response: no 5xx; every 4xx is a §7 error body whose code matches the
status; a wrong or missing token is `unauthorized` on every route that needs one; bob never
reads alice's session (`not_found`, never 200); schemathesis's own conformance checks pass.
The REST surface is read-only (writes go over the WebSocket), so it has no stateful links.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.failures import Failure, FailureGroup

from .fuzz_support import HTTP_STATUS, Tally, budget, check_error_body
from .wsclient import Client, script

pytestmark = [pytest.mark.e2e, pytest.mark.fuzz, pytest.mark.serial]

PUBLIC = {"/healthz", "/metrics", "/openapi.json", "/asyncapi.json", "/docs", "/redoc"}
# Generated values are hostile already; these tokens add the ones that name real users.
TOKENS = st.sampled_from(["alice", "bob", "wrong", "none"]) | st.text(max_size=40).map(lambda t: "garbage:" + t)


@pytest.fixture
async def alice_session(cluster) -> str:  # type: ignore[no-untyped-def]
    client = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    try:
        return await client.run_turn(script({"content": "alice's private reply"}))
    finally:
        await client.close()


def _headers(choice: str, tokens: dict[str, str]) -> dict[str, str]:
    if choice in tokens:
        return {"Authorization": f"Bearer {tokens[choice]}"}
    if choice == "wrong":
        return {"Authorization": "Bearer tok-not-a-user"}
    if choice.startswith("garbage:"):
        # Only what HTTP allows in a header value (visible latin-1, space, tab): control
        # characters are refused by the HTTP parser before the app, which cannot answer them.
        value = "".join(c for c in choice[len("garbage:"):] if c == "\t" or (" " <= c <= "\xff" and c != "\x7f"))
        return {"Authorization": value.strip()}
    return {}


def _check(case: Any, response: requests.Response, token: str, foreign: bool, tally: Tally) -> None:
    where = f"{case.method} {case.formatted_path} token={token} -> {response.status_code}"
    if response.status_code >= 500:
        tally.violation("5xx", f"{where}: {response.text[:200]}")
        return
    public = case.path in PUBLIC
    if not public and token not in ("alice", "bob") and response.status_code != 401:
        tally.violation("no token but not unauthorized", where)
    if foreign and token == "bob" and response.status_code == 200:
        tally.violation("cross-user read", where)
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            tally.violation("non-JSON error", f"{where}: {response.text[:200]}")
            return
        code = check_error_body(body.get("error") if isinstance(body, dict) else body, where, tally)
        if code is not None and HTTP_STATUS.get(code) != response.status_code:
            tally.violation("status does not match code", f"{where}: {code}")


@pytest.mark.usefixtures("stable_services")
def test_rest_api_survives_hostile_requests(cluster, alice_session: str) -> None:
    spec = httpx.get(cluster.gateway_url + "/openapi.json", timeout=15).json()
    schema = schemathesis.openapi.from_dict(spec)
    operations = [op.ok() for op in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/v1/sessions", "/v1/sessions/{session_id}/messages"}
    cases = schema.as_strategy(GenerationMode.POSITIVE) | schema.as_strategy(GenerationMode.NEGATIVE)
    tally = Tally("rest (schemathesis)", "requests")
    session = requests.Session()
    examples = budget(bounded=600, full=10_500)

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(case=cases, token=TOKENS, own_id=st.booleans())
    def run(case: Any, token: str, own_id: bool) -> None:
        foreign = own_id and "session_id" in (case.path_parameters or {})
        if foreign:
            case.path_parameters["session_id"] = alice_session
        response = case.call(base_url=cluster.gateway_url, session=session,
                             headers=_headers(token, cluster.tokens), timeout=30)
        tally.tried += 1
        _check(case, response, token, foreign, tally)
        if token == "alice" and response.status_code < 400:
            try:
                case.validate_response(response)
            except (Failure, FailureGroup) as exc:  # schemathesis's conformance failures
                tally.violation("schemathesis check", f"{case.method} {case.formatted_path}: {str(exc)[:300]}")

    started = time.perf_counter()
    run()
    tally.record()
    print(f"\n{time.perf_counter() - started:.1f}s")
    print("\n" + tally.report())
    assert tally.tried >= examples, tally.summary()
    assert not tally.violations, tally.report()
