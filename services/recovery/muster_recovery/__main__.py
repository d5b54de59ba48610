"""Entrypoint of the recovery service: `muster-recovery`."""

from __future__ import annotations


def main() -> None:
    from muster_recovery.entrypoint import run

    run()


if __name__ == "__main__":
    main()
