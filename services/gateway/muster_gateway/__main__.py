"""Entrypoint of the gateway service: `muster-gateway`."""

from __future__ import annotations


def main() -> None:
    from muster_gateway.entrypoint import run

    run()


if __name__ == "__main__":
    main()
