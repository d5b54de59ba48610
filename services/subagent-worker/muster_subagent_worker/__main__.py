"""Entrypoint of the subagent-worker service: `muster-subagent-worker`."""

from __future__ import annotations


def main() -> None:
    from muster_subagent_worker.entrypoint import run

    run()


if __name__ == "__main__":
    main()
