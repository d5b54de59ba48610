"""Entrypoint of the harness service: `muster-harness`."""

from __future__ import annotations


def main() -> None:
    from muster_harness.entrypoint import run

    run()


if __name__ == "__main__":
    main()
