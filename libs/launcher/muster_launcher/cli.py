"""The `muster` command: `muster run` starts everything, `muster chat` talks to it,
`muster local-client DIR` serves a LOCAL session's file tools in DIR, `muster rebuild`
replays the projections from the events (or `--check`s them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from muster_runtime.process.settings import Settings
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
    _connection_arguments(chat, settings)
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
    chat.add_argument(
        "--local",
        metavar="DIR",
        type=Path,
        help="be the LOCAL client: a new session is LOCAL and its file tools run in DIR",
    )
    chat.add_argument("message")
    local = commands.add_parser(
        "local-client", help="serve the file tools of your LOCAL sessions in DIR until stopped"
    )
    _connection_arguments(local, settings)
    local.add_argument("directory", metavar="DIR", type=Path)
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


def _connection_arguments(parser: argparse.ArgumentParser, settings: Settings) -> None:
    parser.add_argument("--url", default=f"http://127.0.0.1:{settings.gateway_port}")
    parser.add_argument("--token", help="default: $MUSTER_TOKEN, else the data dir's token")
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="LOCAL client: where the journal of the requests it ran is kept "
        "(default: $XDG_STATE_HOME/muster/local/<digest of DIR>)",
    )


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
    token = args.token or default_client_token(settings.data_dir, settings)
    if not token:
        print(
            f"muster {args.command}: no token (use --token, $MUSTER_TOKEN, or run `muster run` first)",
            file=sys.stderr,
        )
        return 2
    if args.command == "local-client":
        from .local_client import run_local_client

        return run_local_client(args.url, token, args.directory, args.state_dir)
    if args.local is not None and not args.local.is_dir():
        print(f"muster chat: --local {args.local} is not a directory", file=sys.stderr)
        return 2
    from .chat import run_chat

    return run_chat(
        args.url,
        token,
        args.message,
        args.session,
        args.timeout,
        side_of=args.side_of,
        mode=args.mode,
        local=args.local,
        state_dir=args.state_dir,
    )


if __name__ == "__main__":
    sys.exit(main())
