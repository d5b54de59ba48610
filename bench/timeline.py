"""Where a C=1 fan-out turn's time goes, hop by hop (issue 39).

    .venv/bin/python -m bench.timeline [--n 60 --k 4 --warmup 10]

On a fresh cluster, N turns of `make bench`'s K=4 fan-out workload one after another (one
client). The client stamps when it sent `create_session` and when the parent's `COMPLETED`
reached it; every other stamp is an event's `recorded_at`, set by the writer just before
its statement (all clocks are this machine's). Each stage is the median over the turns of
the time from one stamp to the next:

the producer's timestamp of a Kafka record (the gateway's `ProcessSession`, the first
`RunExecution`, the parent's `ResumeSession`), read back from the topics after the run.
The stages are in `STAGES`: the gateway's decision, hop 1 (commands → harness), the
parent's first step, hop 2 (delegations → worker), the children, the delivery, hop 3
(commands → harness) and hop 4 (events → gateway → client).

It prints the table and writes `bench-results/timeline-<time>.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import websockets
from aiokafka import AIOKafkaConsumer, TopicPartition
from muster_runtime.messaging import topics

from bench import report
from bench.cluster import ROOT, BenchCluster
from bench.workload import timed_turn

STAGES = (
    "client send → the gateway's decision stamped",
    "the gateway's decision: its statement and commit, the command produced",
    "hop 1: commands → harness, consumed, the parent's claim stamped",
    "the claim's statement, the parent's model call, the delegation stamped",
    "the delegation's statement and commit, the first RunExecution produced",
    "hop 2: delegations → worker, consumed, the claim, the first child's model call",
    "the children's tools, answers and closes (the last one delivers to the parent)",
    "the parent's ResumeSession produced",
    "hop 3: commands → harness, consumed, the parent's claim, model call and close stamped",
    "hop 4: the close's statement and commit, events → gateway → client: COMPLETED received",
)

EVENTS_OF_TREE = """
SELECT e.stream_id, e.type, e.payload, e.recorded_at, s.session_type
FROM events e JOIN sessions s ON s.session_id::text = e.stream_id
WHERE s.root_session_id = $1::uuid
ORDER BY e.position
"""


def stamps(rows: list[asyncpg.Record], sent: float, received: float) -> list[float]:
    """Eight stamps of one turn (seconds since the epoch), from its tree's events and the
    client's send and receipt; `with_produced` adds the Kafka records' three."""

    def at(row: asyncpg.Record) -> float:
        when: datetime = row["recorded_at"]
        return when.timestamp()

    def payload(row: asyncpg.Record) -> dict[str, Any]:
        value = row["payload"]
        return json.loads(value) if isinstance(value, str) else dict(value)

    parent = [r for r in rows if r["session_type"] != "SUBAGENT"]
    children = [r for r in rows if r["session_type"] == "SUBAGENT"]
    phases = [(at(r), payload(r).get("phase")) for r in parent if r["type"] == "SessionPhaseChanged"]
    assistant = [at(r) for r in parent if r["type"] == "MessageRecorded" and payload(r).get("role") == "ASSISTANT"]
    child_first = [
        at(r) for r in children if r["type"] == "MessageRecorded" and payload(r).get("role") == "ASSISTANT"
    ]
    child_done = [
        at(r) for r in children if r["type"] == "SessionPhaseChanged" and payload(r).get("phase") == "COMPLETED"
    ]
    created = next(at(r) for r in parent if r["type"] == "SessionCreated")
    running = next(t for t, phase in phases if phase == "RUNNING")
    completed = next(t for t, phase in phases if phase == "COMPLETED")
    return [sent, created, running, assistant[0], min(child_first), max(child_done), completed, received]


def with_produced(turn: list[float], produced: list[float]) -> list[float]:
    """The stamps in time order, the three records' producer stamps put in their places:
    [send, decided, ProcessSession, running, delegation, RunExecution, first child step,
    last close, ResumeSession, completed, received]."""
    sent, created, running, delegated, child_first, child_done, completed, received = turn
    process, run, resume = produced
    return [sent, created, process, running, delegated, run, child_first, child_done, resume, completed, received]


async def produced_at(bootstrap: str, sessions: list[str], children: dict[str, list[str]]) -> dict[str, list[float]]:
    """Per root session, the producer stamps (s) of its first command, its first child's
    RunExecution and its last command, read from the start of the topics."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    stamps: dict[str, list[float]] = {}
    try:
        parts = [
            TopicPartition(topic, p)
            for topic in (topics.COMMANDS, topics.DELEGATIONS)
            for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    if record.key is not None:
                        stamps.setdefault(record.key.decode(), []).append(record.timestamp / 1000)
    finally:
        await consumer.stop()
    out = {}
    for sid in sessions:
        commands = sorted(stamps[sid])
        runs = [t for child in children[sid] for t in stamps.get(child, [])]
        out[sid] = [commands[0], min(runs), commands[-1]]
    return out


async def measure(cluster: BenchCluster, n: int, k: int, warmup: int) -> list[list[float]]:
    turns: list[tuple[str, float, float]] = []
    async with websockets.connect(f"{cluster.ws_url}?token={cluster.token}", max_size=None) as ws:
        for i in range(warmup + n):
            sid, sent, latency_ms = await timed_turn(ws, k, f"timeline-{i}")
            if i >= warmup:
                turns.append((sid, sent, sent + latency_ms / 1000))
    conn = await asyncpg.connect(cluster.ready["database"])
    try:
        trees = {sid: await conn.fetch(EVENTS_OF_TREE, sid) for sid, _, _ in turns}
    finally:
        await conn.close()
    children = {
        sid: sorted({r["stream_id"] for r in rows if r["session_type"] == "SUBAGENT"}) for sid, rows in trees.items()
    }
    produced = await produced_at(cluster.ready["kafka"], [sid for sid, _, _ in turns], children)
    return [with_produced(stamps(trees[sid], sent, got), produced[sid]) for sid, sent, got in turns]


def table(all_stamps: list[list[float]]) -> dict[str, Any]:
    stages = []
    for i, name in enumerate(STAGES):
        spans = [(s[i + 1] - s[i]) * 1000 for s in all_stamps]
        stages.append({"stage": name, "p50_ms": round(statistics.median(spans), 2)})
    totals = [(s[-1] - s[0]) * 1000 for s in all_stamps]
    return {"turns": len(all_stamps), "stages": stages, "turn_p50_ms": round(statistics.median(totals), 2)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with BenchCluster() as cluster:
        result = table(await measure(cluster, args.n, args.k, args.warmup))
    result["workload"] = {"n": args.n, "k": args.k, "c": 1, "warmup": args.warmup}
    result["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for stage in result["stages"]:
        print(f"{stage['p50_ms']:8.2f} ms  {stage['stage']}")
    print(f"{result['turn_p50_ms']:8.2f} ms  the whole turn (p50; the stages' medians need not add up to it)")
    return result


def cli() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=60, help="measured turns")
    parser.add_argument("--k", type=int, default=4, help="children a turn")
    parser.add_argument("--warmup", type=int, default=10, help="turns first, not measured")
    parser.add_argument("--out", default=str(ROOT / "bench-results"))
    return parser.parse_args()


if __name__ == "__main__":
    arguments = cli()
    path = report.write_json(asyncio.run(main(arguments)), Path(arguments.out), "timeline")
    print(f"wrote {path}")
