"""`make bench-console`: the web console's weight and speed in Debian's Chromium.

On a fresh cluster: a session of 500 messages (10 turns of 24 tool calls and their
results), then
- first render: from navigation start to all 500 messages' elements on the page, median of 5;
- live latency: a message sent from another client, from its `message` frame reaching the
  page's socket to its element in the DOM (and to the next animation frame), median of 20;
- weight: the compressed bytes of every script and stylesheet the page loads.
Results are printed and written to bench-results/console.json.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import websockets
from playwright.async_api import async_playwright

from bench.cluster import ROOT, BenchCluster

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
ROUNDS, STEPS = 10, 24  # 10 x (1 USER + 24 x (ASSISTANT + TOOL) + the final ASSISTANT) = 500 messages
# Runs before the page's own scripts: stamps each `message` frame as the socket receives it,
# and each message element as it enters the DOM (and the frame after).
PROBE = """
(() => {
  const Native = window.WebSocket;
  window.__frames = {}; window.__dom = {}; window.__paint = {};
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (ev) => {
        const f = JSON.parse(ev.data);
        if (f.type === 'message') window.__frames[f.data.messageId] = performance.now();
      });
    }
  };
  new MutationObserver((records) => {
    const now = performance.now();
    for (const r of records) for (const n of r.addedNodes) {
      if (n.nodeType !== 1) continue;
      const found = [...(n.matches('[data-message-id]') ? [n] : []), ...n.querySelectorAll('[data-message-id]')];
      for (const el of found) {
        const id = el.dataset.messageId;
        if (!(id in window.__dom)) { window.__dom[id] = now; requestAnimationFrame(() => { window.__paint[id] = performance.now(); }); }
      }
    }
  }).observe(document, { childList: true, subtree: true });
})();
"""


async def _ws_call(url: str, token: str, frame: dict[str, Any]) -> dict[str, Any]:
    async with websockets.connect(f"{url}?token={token}", max_size=None) as ws:
        await ws.send(json.dumps(frame))
        while True:
            reply: dict[str, Any] = json.loads(await ws.recv())
            if reply.get("id") == frame["id"]:
                return reply


async def _wait_phase(rest: httpx.AsyncClient, session_id: str, phase: str = "COMPLETED") -> None:
    for _ in range(1200):
        if (await rest.get(f"/v1/sessions/{session_id}")).json().get("phase") == phase:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"session {session_id} did not reach {phase}")


async def _big_session(cluster: BenchCluster, rest: httpx.AsyncClient) -> str:
    """ROUNDS turns of STEPS tool rounds each (an agent's turn is capped at 50 rounds)."""
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "list_files", "arguments": {}}], "content": f"step {i}"} for i in range(STEPS)
    ]
    steps.append({"content": "the end"})
    content = "#script " + json.dumps({"steps": steps})
    ack = await _ws_call(cluster.ws_url, cluster.token, {"type": "create_session", "id": 1, "data": {"content": content}})
    session_id = str(ack["data"]["sessionId"])
    for _ in range(ROUNDS - 1):  # queued behind the running turn, played in order
        await _ws_call(cluster.ws_url, cluster.token,
                       {"type": "send_message", "id": 2, "sessionId": session_id, "data": {"content": content}})
    for _ in range(1200):
        page = (await rest.get(f"/v1/sessions/{session_id}/messages?rounds=1000")).json()["items"]
        if len(page) >= ROUNDS * (2 * STEPS + 2):
            break
        await asyncio.sleep(0.2)
    await _wait_phase(rest, session_id)
    return session_id


async def measure(cluster: BenchCluster) -> dict[str, Any]:
    base = cluster.ready["gateway"]
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {cluster.token}"}) as rest:
        session_id = await _big_session(cluster, rest)
        count = len((await rest.get(f"/v1/sessions/{session_id}/messages?rounds=1000")).json()["items"])
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = await browser.new_context(viewport={"width": 1280, "height": 860})
            await context.add_init_script(f"sessionStorage.setItem('muster.token', {json.dumps(cluster.token)});")
            await context.add_init_script(PROBE)
            page = await context.new_page()
            assets: list[str] = []
            page.on("response", lambda r: assets.append(r.url) if r.request.resource_type in ("script", "stylesheet") else None)
            renders = []
            for _ in range(5):
                await page.goto(f"{base}/sessions/{session_id}")
                # Functions, not expression strings: the page's CSP rightly forbids eval.
                await page.wait_for_function(
                    "(n) => document.querySelectorAll('.conversation [data-message-id]').length >= n",
                    arg=count - ROUNDS * STEPS,
                    timeout=30_000,
                )
                renders.append(await page.evaluate("performance.now()"))
            latencies, frames_after = [], []
            for i in range(20):
                ack = await _ws_call(cluster.ws_url, cluster.token, {
                    "type": "send_message", "id": 2, "sessionId": session_id, "data": {"content": f"ping {i}"}})
                message_id = ack["data"]["messageId"]
                await page.wait_for_function("(id) => window.__paint[id] !== undefined", arg=message_id, timeout=30_000)
                frame_at, dom_at, paint_at = await page.evaluate(
                    "(id) => [window.__frames[id], window.__dom[id], window.__paint[id]]", message_id)
                latencies.append(dom_at - frame_at)
                frames_after.append(paint_at - frame_at)
                await _wait_phase(rest, session_id)
            await browser.close()
        weight = 0
        raw = 0
        for url in sorted(set(assets)):
            async with httpx.AsyncClient() as plain:
                r = await plain.get(url, headers={"Accept-Encoding": "gzip"})
                weight += r.num_bytes_downloaded
                raw += len(r.content)
    return {
        "messages": count,
        "first_render_ms_median": round(statistics.median(renders), 1),
        "first_render_ms_all": [round(x, 1) for x in renders],
        "live_event_dom_ms_median": round(statistics.median(latencies), 2),
        "live_event_dom_ms_max": round(max(latencies), 2),
        "live_event_next_frame_ms_median": round(statistics.median(frames_after), 2),
        "live_event_next_frame_ms_max": round(max(frames_after), 2),
        "assets": len(set(assets)),
        "scripts_styles_compressed_bytes": weight,
        "scripts_styles_raw_bytes": raw,
    }


def main() -> None:
    started = time.perf_counter()
    with BenchCluster() as cluster:
        result = asyncio.run(measure(cluster))
    result["took_s"] = round(time.perf_counter() - started, 1)
    # Issue 36's targets, checked on the medians (a benchmark reports; it does not fail).
    result["within_targets"] = {
        "first_render_le_1000_ms": result["first_render_ms_median"] <= 1000,
        "live_event_le_100_ms": result["live_event_next_frame_ms_median"] <= 100,
        "weight_le_300_kb": result["scripts_styles_compressed_bytes"] <= 300_000,
    }
    out = Path(ROOT) / "bench-results" / "console.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
