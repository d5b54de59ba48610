"""Renders the history of measured runs (bench/results/*.json) as a Markdown table.

    python -m bench.results.table            # print the table
    python -m bench.results.table --write    # rewrite the generated part of bench/results/README.md

Each JSON file is one dated run: `date`, `time` (or null), `title`, `kind` (`same-run`: muster and
its peers measured in one run of `../shared/peers/run.sh .`; `experiments`: pairs, profiles and
changes tried), `recorded_in` (the commit that first wrote the figures down), `code_commit` (when
the run named it), `peers` (`rows` per system with `turns_per_s`, `p50_ms` at C=16, `p50_ms_c1`,
`cpu_ms_per_turn`; `ratios`; `own_floors`, `peer_floors`, the same names as `make bench`'s report)
and `notes` (the run's own write-up, verbatim).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
BEGIN, END = "<!-- table.py: begin -->", "<!-- table.py: end -->"


def load(directory: Path = HERE) -> list[tuple[str, dict[str, Any]]]:
    runs = [(p.name, json.loads(p.read_text())) for p in directory.glob("*.json")]
    # a run without a time comes first on its day; files of one day sort by name otherwise
    return sorted(runs, key=lambda r: (r[1]["date"], r[1].get("time") is not None, r[1].get("time") or "", r[0]))


def fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return format(value, spec) if spec else str(value)


def same_run_table(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = [
        "| date | time | run | muster turns/s | muster p50 ms (C=16 / C=1) | muster CPU ms/turn "
        "| LangGraph turns/s | LangGraph p50 ms C=1 | Celery turns/s | vs LangGraph turns/s "
        "| vs Celery turns/s | vs LangGraph p50 C=1 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, run in runs:
        if run["kind"] != "same-run" or not run.get("peers"):
            continue
        rows, ratios = run["peers"]["rows"], run["peers"].get("ratios", {})
        me, lg, cel = rows.get("muster") or {}, rows.get("LangGraph") or {}, rows.get("Celery") or {}
        lines.append(
            f"| {run['date']} | {fmt(run.get('time'))} | [{run['title']}]({name}) "
            f"| {fmt(me.get('turns_per_s'))} | {fmt(me.get('p50_ms'), '.0f')} / {fmt(me.get('p50_ms_c1'))} "
            f"| {fmt(me.get('cpu_ms_per_turn'))} | {fmt(lg.get('turns_per_s'))} | {fmt(lg.get('p50_ms_c1'))} "
            f"| {fmt(cel.get('turns_per_s'))} | {fmt(ratios.get('turns_per_s_over_langgraph'))} "
            f"| {fmt(ratios.get('turns_per_s_over_celery'))} | {fmt(ratios.get('p50_c1_over_langgraph'))} |"
        )
    return lines


def experiments_list(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [
        f"- {run['date']}{', ' + run['time'] if run.get('time') else ''}: [{run['title']}]({name})"
        for name, run in runs
        if run["kind"] != "same-run"
    ]


def render(directory: Path = HERE) -> str:
    runs = load(directory)
    parts = [
        "Same-run passes with the peers (muster: medians of its passes; ratios as the run stated them):",
        "",
        *same_run_table(runs),
        "",
        "Pairs, profiles and changes measured (kept or not):",
        "",
        *experiments_list(runs),
    ]
    return "\n".join(parts) + "\n"


def write(readme: Path = README) -> None:
    text = readme.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    readme.write_text(f"{head}{BEGIN}\n{render(readme.parent)}{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help=f"rewrite the table in {README.name}")
    if parser.parse_args().write:
        write()
    else:
        print(render(), end="")


if __name__ == "__main__":
    main()
