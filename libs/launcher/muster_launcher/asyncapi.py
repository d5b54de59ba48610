"""`make docs`: every service's Kafka contract as AsyncAPI 3.0, one JSON file each, written
by the one generator (`muster_runtime.messaging.asyncapi`) from each service's own broker.

Usage: `python -m muster_launcher.asyncapi [--out docs/asyncapi]`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from muster_runtime.messaging.asyncapi import Contract, build_document

DEFAULT_OUT = Path("docs") / "asyncapi"
# Each service declares its contract next to its bootstrap; imported here, not at the top,
# because the launcher itself depends on no service package.
CONTRACT_MODULES = (
    "muster_gateway.asyncapi",
    "muster_harness.asyncapi",
    "muster_subagent_worker.asyncapi",
    "muster_recovery.asyncapi",
)


def contracts() -> list[Contract]:
    return [importlib.import_module(name).CONTRACT for name in CONTRACT_MODULES]


def write_documents(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for contract in contracts():
        path = out_dir / f"{contract.service}.json"
        path.write_text(json.dumps(build_document(contract), indent=2) + "\n")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m muster_launcher.asyncapi", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    args = parser.parse_args(argv)
    for path in write_documents(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
