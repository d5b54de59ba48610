"""The `muster` command: `muster run` starts everything, `muster chat` talks to it,
`muster rebuild` replays the projections from the events (or `--check`s them)."""

from __future__ import annotations

import argparse
import sys

from muster_runtime.settings import Settings
from pydantic import ValidationError

from .tokens import default_client_token


def _parser(settings: Settings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="muster")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="start PostgreSQL, the broker and the services; stop with Ctrl-C")
    run.add_argument(
        "--no-wait-gateway",
        action="store_true",
        help="do not wait for the gateway's /healthz before printing the ready lines",
    )
    chat = commands.add_parser("chat", help="send a message and print the turn as it streams")
    chat.add_argument("--url", default=f"http://127.0.0.1:{settings.gateway_port}")
    chat.add_argument("--token", help="default: $MUSTER_TOKEN, else the data dir's token")
    target = chat.add_mutually_exclusive_group()
    target.add_argument("--session", help="post to this session instead of creating one")
    target.add_argument("--side-of", metavar="ID", help="start a side task of this session with the message")
    chat.add_argument(
        "--mode",
        choices=("none", "summary", "fork"),
        default="none",
        help="with --side-of: what the side task inherits (nothing, a summary, the whole history)",
    )
    chat.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the turn")
    chat.add_argument("message")
    rebuild = commands.add_parser(
        "rebuild",
        help="drop the projections and replay them from the events ($DATABASE_URL, else the local database)",
    )
    rebuild.add_argument(
        "--check",
        action="store_true",
        help="replay into scratch tables and compare them with the live ones; exit 1 if any differs",
    )
    rebuild.add_argument("--batch", type=int, default=10_000, help="event positions projected per round trip")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        settings = Settings.from_env()
    except ValidationError as exc:
        # pydantic names each variable, the value given and what was expected.
        print(f"muster: invalid environment: {exc}", file=sys.stderr)
        return 2
    args = _parser(settings).parse_args(argv)
    if args.command == "run":
        from .run import RunOptions, run

        return run(RunOptions(wait_gateway=not args.no_wait_gateway))
    if args.command == "rebuild":
        from .rebuild_cli import run_rebuild

        return run_rebuild(args.check, args.batch)
    from .chat import run_chat

    token = args.token or default_client_token(settings.data_dir, settings)
    if not token:
        print(
            "muster chat: no token (use --token, $MUSTER_TOKEN, or run `muster run` first)",
            file=sys.stderr,
        )
        return 2
    return run_chat(
        args.url, token, args.message, args.session, args.timeout, side_of=args.side_of, mode=args.mode
    )


if __name__ == "__main__":
    sys.exit(main())
