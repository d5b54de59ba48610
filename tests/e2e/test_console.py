"""The web console in a real Chromium against the shared cluster (issue 36).

Every wait is a Playwright `expect` on a condition of the page, never a sleep."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .console_support import Console, browser, delegate, script, shots, write  # noqa: F401

pytestmark = pytest.mark.e2e
expect: Any = None


@pytest.fixture(autouse=True)
def _expect() -> None:
    global expect
    from playwright.sync_api import expect as playwright_expect

    playwright_expect.set_options(timeout=30_000)
    expect = playwright_expect


@pytest.fixture
def console(browser: Any, cluster: Any, shots: Path) -> Iterator[Console]:  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    c = Console(page, cluster.gateway_url, shots)
    yield c
    unauthenticated = c.unauthenticated_api_calls()
    calls = len(c.api_requests)
    context.close()
    assert calls > 0 and not unauthenticated, unauthenticated
    assert not c.errors, c.errors
    # The token is never put in a URL (page, REST or WebSocket).
    assert not [u for u in c.urls if "tok-" in u], c.urls


def _rest(cluster: Any, token: str) -> httpx.Client:
    return httpx.Client(base_url=cluster.gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=15)


def test_sign_in_list_and_page_security(console: Console, cluster: Any) -> None:
    page = console.page
    page.goto(cluster.gateway_url + "/")
    page.get_by_label("Token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")
    console.sign_in(cluster.tokens["alice"])
    expect(page.get_by_role("status", name="connection open")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('muster.token')") == cluster.tokens["alice"]
    console.shot("sign-in-list")
    assert console.axe() == []

    head = httpx.get(cluster.gateway_url + "/")
    csp = head.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    # The WebSocket refuses a foreign Origin and accepts its own.
    ws = cluster.gateway_url.replace("http", "ws") + "/v1/ws"
    refused = page.evaluate(
        """async ([url, token]) => await new Promise((done) => {
             const b64 = btoa(token).replace(/=+$/, '');
             const ws = new WebSocket(url, ['muster', 'bearer.' + b64]);
             ws.onopen = () => { ws.close(); done('open'); };
             ws.onerror = () => done('refused');
           })""",
        [ws.replace("127.0.0.1", "localhost"), cluster.tokens["alice"]],
    )
    assert refused == "refused"  # a page of another origin (localhost ≠ 127.0.0.1)


def test_two_subagents_tabs_cards_files_timeline_and_fork(console: Console, cluster: Any) -> None:
    page = console.page
    console.sign_in(cluster.tokens["alice"])
    child_a = script({"tool_calls": [write("a.py", "print('a')\n")], "delay_ms": 150}, {"content": "wrote a.py"})
    child_b = script({"tool_calls": [write("b.py", "print('b')\nprint('b')\n")], "delay_ms": 300}, {"content": "wrote b.py"})
    session_id = console.start_session(
        script({"tool_calls": [write("main.txt", "main\n"), delegate("coder", child_a), delegate("general", child_b)]},
               {"content": "both **children** finished"}),
        title="two children",
    )
    conv = page.locator(f".conversation[data-session-id='{session_id}']")
    # Both subagent tabs appear and complete; the cards show the children's results.
    sub_tabs = page.locator("[role=tab][data-kind=sub]")
    expect(sub_tabs).to_have_count(2)
    expect(page.locator("[role=tab][data-kind=sub][data-status=COMPLETED]")).to_have_count(2)
    expect(conv.locator(".delegation[data-status=COMPLETED]")).to_have_count(2)
    expect(conv.locator(".delegation").nth(0)).to_contain_text("wrote a.py")
    expect(conv.locator(".delegation").nth(1)).to_contain_text("wrote b.py")
    expect(conv.locator("[data-role=ASSISTANT]").last).to_contain_text("both children finished")
    console.shot("conversation")
    assert console.axe(".tabs-area") == []
    # The tabs follow the arrow keys.
    main_tab = page.get_by_role("tab", name=re.compile("Main"))
    main_tab.focus()
    page.keyboard.press("ArrowRight")
    expect(sub_tabs.first).to_have_attribute("aria-selected", "true")
    expect(sub_tabs.first).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(main_tab).to_have_attribute("aria-selected", "true")
    # Closing a subagent's tab (Delete) and reopening it from its card keeps the same child.
    coder_tab = sub_tabs.filter(has_text="coder")
    coder_id = coder_tab.get_attribute("data-session-id")
    coder_tab.focus()
    page.keyboard.press("Delete")
    expect(sub_tabs).to_have_count(1)
    conv.locator(".delegation", has_text="wrote a.py").get_by_role("button", name="View process").click()
    expect(page.locator(f"[role=tab][data-session-id='{coder_id}'][aria-selected=true]")).to_have_count(1)
    page.get_by_role("tab", name=re.compile("Main")).click()

    # The round's file changes: merged paths with their sources.
    conv.locator(".files > summary").first.click()
    files = conv.locator(".file-list .file")
    expect(files).to_have_count(3)
    expect(conv.locator(".file[data-path='main.txt'] .sources")).to_have_text("from MAIN")
    expect(conv.locator(".file[data-path='a.py'] .sources")).to_have_text("from coder (subagent)")
    expect(conv.locator(".file[data-path='b.py'] .sources")).to_have_text("from general (subagent)")
    expect(conv.locator(".file[data-path='b.py'] summary .add")).to_have_text("+2")
    conv.locator(".file[data-path='a.py'] summary").click()
    expect(conv.locator(".file[data-path='a.py'] .diff .add").last).to_contain_text("print('a')")
    conv.locator(".files").first.scroll_into_view_if_needed()
    console.shot("file-changes")
    assert console.axe(".files") == []

    # The timeline: both children's runs inside the parent's turn.
    conv.get_by_role("button", name="Timeline").first.click()
    rows = conv.locator(".timeline .tl-child")
    expect(rows).to_have_count(2)
    spans = conv.locator(".timeline .span.whole").evaluate_all(
        "els => els.map(e => [e.closest('.tl-row').className, +e.dataset.start, +e.dataset.end])"
    )
    parent = next(s for s in spans if "tl-parent" in s[0])
    children = [s for s in spans if "tl-child" in s[0]]
    assert len(children) == 2
    for _, start, end in children:
        assert parent[1] <= start <= end <= parent[2], (parent, children)
    expect(conv.locator(".timeline .kind-barrier[data-kind=barrier]")).to_have_count(1)
    conv.locator(".timeline").scroll_into_view_if_needed()
    console.shot("timeline")

    # A subagent's tab: its own read-only stream.
    page.locator(f"[role=tab][data-session-id='{coder_id}']").click()
    child_panel = page.locator("[role=tabpanel]:not([hidden]) .conversation")
    expect(child_panel.locator("[data-role=ASSISTANT]").last).to_contain_text("wrote a.py")
    expect(child_panel.locator(".composer")).to_have_count(0)
    child_panel.locator(".files > summary").first.click()  # the subagent's own changes
    expect(child_panel.locator(".file-list .file")).to_have_count(1)
    expect(child_panel.locator(".file[data-path='a.py'] .sources")).to_have_text("from coder (subagent)")
    page.get_by_role("tab", name=re.compile("Main")).click()

    # Fork from the round into a side task; it is listed in the inspector.
    conv.get_by_role("button", name=re.compile("Fork to side task")).first.click()
    form = page.get_by_role("form", name="New side task")
    expect(form.get_by_label("Fork of the main session up to this round")).to_be_checked()
    form.get_by_label("First message").fill("what did the kids produce?")
    form.get_by_role("button", name="Start side task").click()
    side = page.locator("[role=tab][data-kind=side]")
    expect(side).to_have_count(1)
    inspector = page.get_by_role("complementary", name="Side tasks of this tree")
    expect(inspector.locator(".side-list li")).to_have_count(1)
    side_panel = page.locator("[role=tabpanel]:not([hidden]) .conversation")
    expect(side_panel.locator("[data-role=USER]").first).to_contain_text("#script")  # the copied history
    expect(side_panel.locator("[data-role=USER]").last).to_contain_text("what did the kids produce?")
    console.shot("side-task")

    # Search opens the hit inside its tree: the root, then the side task's tab.
    page.get_by_role("link", name="muster").click()
    page.get_by_label("Search messages").fill("kids produce")
    page.get_by_role("button", name="Search", exact=True).click()
    page.get_by_role("list", name="Search results").get_by_role("link").first.click()
    expect(page.get_by_role("tab", name=re.compile("Main"))).to_be_visible()
    expect(page.locator("[role=tab][data-kind=side][aria-selected=true]")).to_have_count(1)


def test_model_html_is_shown_as_text(console: Console, cluster: Any) -> None:
    page = console.page
    console.sign_in(cluster.tokens["alice"])
    evil = "**bold** then <script>window.__pwned = 1</script> and <img src=x onerror=\"window.__pwned = 2\">\n\n<script>window.__pwned = 3</script>"
    console.start_session(script({"content": evil}))
    answer = page.locator("[data-role=ASSISTANT]").last
    expect(answer).to_contain_text("<script>window.__pwned = 1</script>")
    expect(answer).to_contain_text('<img src=x onerror="window.__pwned = 2">')
    expect(answer.locator("strong")).to_have_text("bold")  # Markdown still renders
    assert answer.locator("script, img").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_an_ask_session_approved_in_the_page_writes_once(console: Console, cluster: Any) -> None:
    page = console.page
    console.sign_in(cluster.tokens["alice"])
    session_id = console.start_session(
        script({"tool_calls": [write("approved.txt", "yes\n")]}, {"content": "written"}), permission="ask"
    )
    approval = page.get_by_role("region", name="Approval request for write_file")
    expect(approval).to_be_visible()
    expect(page.locator(".session-header .phase")).to_have_attribute("data-phase", "WAITING_APPROVAL")
    # The list shows the tree's pending approval, live; the wait is there after a reload.
    page.get_by_role("link", name="muster").click()
    card = page.locator(f".card[data-session-id='{session_id}']")
    expect(card.get_by_label("1 pending approvals")).to_be_visible()
    card.get_by_role("link").first.click()
    expect(approval).to_be_visible()
    page.reload()
    expect(approval).to_be_visible()
    assert page.locator(".session-header select").input_value() == "ask"
    console.shot("approval")
    approval.get_by_role("button", name="Approve").click()
    expect(page.locator("[data-role=ASSISTANT]").last).to_contain_text("written")
    expect(approval).to_have_count(0)
    assert (cluster.data_dir / "workspaces" / session_id / "approved.txt").read_text() == "yes\n"
    with _rest(cluster, cluster.tokens["alice"]) as rest:
        items = rest.get(f"/v1/sessions/{session_id}/messages").json()["items"]
    writes = [m for m in items if m["role"] == "TOOL" and "approved.txt" in m["content"]]
    assert len(writes) == 1 and json.loads(writes[0]["content"])["success"] is True
    changes = [c for m in items for c in m.get("fileChanges") or []]
    assert [c["path"] for c in changes] == ["approved.txt"]


def test_a_question_answered_in_the_page(console: Console, cluster: Any) -> None:
    page = console.page
    console.sign_in(cluster.tokens["alice"])
    session_id = console.start_session(
        script({"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which colour?", "options": ["red", "blue"]}}]},
               {"content": "thanks"})
    )
    question = page.get_by_role("form", name="Question from the agent")
    expect(question).to_contain_text("Which colour?")
    question.get_by_label("Your answer").fill("green, please")
    question.get_by_role("button", name="Answer").click()
    expect(page.locator("[data-role=ASSISTANT]").last).to_contain_text("thanks")
    with _rest(cluster, cluster.tokens["alice"]) as rest:
        items = rest.get(f"/v1/sessions/{session_id}/messages").json()["items"]
    answers = [json.loads(m["content"]) for m in items if m["role"] == "TOOL"]
    assert answers == [{"success": True, "answer": "green, please"}]


def test_reload_mid_turn_resumes_without_duplicates(console: Console, cluster: Any) -> None:
    page = console.page
    console.sign_in(cluster.tokens["alice"])
    steps = [{"tool_calls": [{"name": "list_files", "arguments": {}}], "content": f"step {i}", "delay_ms": 250}
             for i in range(8)]
    console.start_session(script(*steps, {"content": "the end"}))
    assistant = page.locator("[data-role=ASSISTANT]")
    expect(assistant.filter(has_text="step 2")).to_have_count(1)
    page.reload()
    expect(assistant.filter(has_text="step 4")).to_have_count(1)
    page.evaluate("window.musterConsole.socket.dropForTest()")  # a dropped connection, too
    expect(assistant.filter(has_text="the end")).to_have_count(1)
    for i in range(8):
        expect(assistant.filter(has_text=f"step {i}")).to_have_count(1)
    expect(page.locator("[data-role=USER]")).to_have_count(1)
    expect(assistant).to_have_count(9)


def test_another_users_session_is_not_found(console: Console, cluster: Any) -> None:
    page = console.page
    console.sign_in(cluster.tokens["bob"])
    bobs = console.start_session("hello from bob")
    expect(page.locator("[data-role=ASSISTANT]").last).to_contain_text("You said")
    page.get_by_role("button", name="Sign out").click()
    console.sign_in(cluster.tokens["alice"])
    page.goto(f"{cluster.gateway_url}/sessions/{bobs}")
    expect(page.get_by_role("heading", name="Session not found")).to_be_visible()
    expect(page.get_by_text("hello from bob")).to_have_count(0)


def test_older_rounds_load_on_scroll(console: Console, cluster: Any) -> None:
    from websockets.sync.client import connect

    ws_url = cluster.gateway_url.replace("http", "ws") + "/v1/ws?token=" + cluster.tokens["alice"]
    with connect(ws_url) as ws:
        def call(frame: dict[str, Any]) -> dict[str, Any]:
            ws.send(json.dumps(frame))
            while (reply := json.loads(ws.recv())).get("id") != frame["id"]:
                pass
            assert reply["type"] == "ack", reply
            return dict(reply["data"])

        session_id = call({"type": "create_session", "id": "c", "data": {"content": "round 0"}})["sessionId"]
        for i in range(1, 25):  # queued behind one another
            call({"type": "send_message", "id": f"s{i}", "sessionId": session_id, "data": {"content": f"round {i}"}})
    page = console.page
    console.sign_in(cluster.tokens["alice"])
    card = page.locator(f".card[data-session-id='{session_id}']")
    expect(card.get_by_role("img", name="unread")).to_be_visible()  # a turn ended, unseen
    card.get_by_role("link").first.click()
    users = page.locator("[data-role=USER]")
    expect(page.locator("[data-role=ASSISTANT]").filter(has_text="You said: round 24")).to_have_count(1)
    page.reload()
    expect(page.locator("[data-role=ASSISTANT]").filter(has_text="You said: round 24")).to_have_count(1)
    expect(users).to_have_count(20)  # the newest 20 rounds first
    page.locator(".scroller").evaluate("el => { el.scrollTop = 0; }")
    expect(users).to_have_count(25)
    expect(users.first).to_contain_text("round 0")
    expect(page.get_by_role("button", name="Load older rounds")).to_have_count(0)
    page.get_by_role("link", name="muster").click()  # seen now: the unread dot is gone
    expect(card.get_by_role("img", name="running")).to_have_count(0)
    expect(card.get_by_role("img", name="unread")).to_have_count(0)


async def test_session_events_read_gives_the_replay(cluster: Any, alice: Any, alice_rest: Any, bob_rest: Any) -> None:
    """`GET /v1/sessions/{id}/events`, the console's extension: the stored frames exactly as
    the socket delivered them, pageable, filterable by type, and only for the owner."""
    session_id = await alice.run_turn("hello events")
    live = [f for f in alice.events[session_id] if "position" in f]
    # Events after the turn ended (the tree signal, the title) may follow: compare the prefix.
    body = (await alice_rest.get(f"/v1/sessions/{session_id}/events")).json()
    assert body["items"][: len(live)] == live and body["nextAfterPosition"] is None
    first = (await alice_rest.get(f"/v1/sessions/{session_id}/events", limit=1)).json()
    assert first["items"] == live[:1] and first["nextAfterPosition"] == live[0]["position"]
    rest = (await alice_rest.get(f"/v1/sessions/{session_id}/events", afterPosition=live[0]["position"])).json()
    assert rest["items"][: len(live) - 1] == live[1:]
    only = (await alice_rest.get(f"/v1/sessions/{session_id}/events", types="message")).json()["items"]
    assert only == [f for f in live if f["type"] == "message"] and len(only) == 2
    bad = await alice_rest.get(f"/v1/sessions/{session_id}/events", types=",")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_request"
    foreign = await bob_rest.get(f"/v1/sessions/{session_id}/events")
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "not_found"


def test_queue_cancel_manage_compact(console: Console, cluster: Any) -> None:
    """Send while running (queued), cancel, settings, context preview, compaction, and the
    side-task and session management actions."""
    page = console.page
    console.sign_in(cluster.tokens["alice"])
    session_id = console.start_session(script({"content": "slow", "delay_ms": 60_000}), title="managed")
    header = page.locator(".session-header")
    expect(header.locator(".phase")).to_have_attribute("data-phase", "RUNNING")
    page.get_by_role("textbox", name="Message").fill("queued hello")
    page.get_by_role("textbox", name="Message").press("Enter")
    expect(page.locator("[data-role=QUEUED]")).to_contain_text("queued hello")
    page.get_by_role("button", name="Cancel").click()
    expect(header.locator(".phase")).to_have_attribute("data-phase", "CANCELLED")
    expect(page.locator("[data-role=QUEUED]")).to_have_count(0)

    page.get_by_role("textbox", name="Message").fill("second turn")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("[data-role=ASSISTANT]").filter(has_text="You said: second turn")).to_have_count(1)
    header.get_by_label("Permission").select_option("read_only")
    with _rest(cluster, cluster.tokens["alice"]) as rest:
        expect(header.get_by_label("Permission")).to_have_value("read_only")
        compact = rest.post(f"/v1/sessions/{session_id}/compact")
        assert compact.status_code == 202, compact.text
    expect(page.locator(".compaction")).to_contain_text("Compacted here")
    header.get_by_role("button", name="Context").click()
    dialog = page.get_by_role("dialog", name="Context preview")
    expect(dialog).to_contain_text("summary of")
    dialog.get_by_role("button", name="Close the context preview").click()
    page.reload()
    expect(header.get_by_label("Permission")).to_have_value("read_only")
    expect(page.locator(".compaction")).to_have_count(1)  # shown after a reload too

    # A side task (no context), renamed, archived and back, then promoted to a main session.
    page.get_by_role("button", name="+ Side task").click()
    form = page.get_by_role("form", name="New side task")
    expect(form.get_by_label("None (a fresh conversation)")).to_be_checked()
    form.get_by_label("First message").fill("side hello")
    form.get_by_role("button", name="Start side task").click()
    side_panel = page.locator("[role=tabpanel]:not([hidden]) .conversation")
    expect(side_panel.locator(".session-header .phase")).to_have_attribute("data-phase", "COMPLETED")
    inspector = page.get_by_role("complementary", name="Side tasks of this tree")
    item = inspector.locator(".side-list li")
    expect(item).to_have_count(1)
    side_id = item.get_attribute("data-session-id")
    page.once("dialog", lambda d: d.accept("my side task"))
    item.get_by_role("button", name=re.compile("^Rename")).click()
    expect(item.locator(".side-open")).to_have_text("my side task")
    item.get_by_role("button", name="Archive").click()
    expect(item).to_have_count(0)
    inspector.get_by_label("Show archived").check()
    expect(item).to_have_count(1)
    item.get_by_role("button", name="Unarchive").click()
    expect(item).to_have_count(0)
    inspector.get_by_label("Show archived").uncheck()
    expect(item).to_have_count(1)
    item.get_by_role("button", name="Promote").click()
    page.wait_for_url(f"**/sessions/{side_id}")
    expect(page.get_by_role("tab", name="Main")).to_have_count(1)
    expect(page.locator(".session-header .title").first).to_have_text("my side task")

    # Both are main sessions now; delete one from the list.
    page.get_by_role("link", name="muster").click()
    cards = page.locator(".card")
    expect(page.locator(f".card[data-session-id='{side_id}']")).to_have_count(1)
    page.once("dialog", lambda d: d.accept())
    page.locator(f".card[data-session-id='{session_id}']").get_by_role("button", name="Delete managed").click()
    expect(page.locator(f".card[data-session-id='{session_id}']")).to_have_count(0)
    expect(cards.first).to_be_visible()


def test_a_subagents_approval_is_answered_in_its_tab(console: Console, cluster: Any) -> None:
    page = console.page
    console.sign_in(cluster.tokens["alice"])
    child = script({"tool_calls": [write("child.txt", "c\n")]}, {"content": "child wrote"})
    session_id = console.start_session(script({"tool_calls": [delegate("coder", child)]}, {"content": "parent done"}),
                                       permission="ask")
    page.get_by_role("region", name="Approval request for delegate").get_by_role("button", name="Approve").click()
    sub = page.locator("[role=tab][data-kind=sub]")
    expect(sub).to_have_count(1)
    expect(sub.get_by_label("waiting for you")).to_be_visible()  # the tab says where the wait is
    card = page.locator(".delegation")
    expect(card.locator(".phase")).to_have_attribute("data-phase", "WAITING_APPROVAL")
    sub.click()
    child_panel = page.locator("[role=tabpanel]:not([hidden])")
    child_panel.get_by_role("region", name="Approval request for write_file").get_by_role("button", name="Approve").click()
    page.get_by_role("tab", name=re.compile("Main")).click()
    expect(page.locator("[data-role=ASSISTANT]").filter(has_text="parent done")).to_have_count(1)
    expect(card.locator(".phase")).to_have_attribute("data-phase", "COMPLETED")
    expect(sub.get_by_label("waiting for you")).to_have_count(0)
    assert (cluster.data_dir / "workspaces" / session_id / "child.txt").read_text() == "c\n"
