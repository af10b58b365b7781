"""`pylog console`: serve the web console (docs/console.md), and make its password hashes.

    pylog console -b HOST:PORT [--port 8080] [--host 127.0.0.1] [--read-only]
                  [--auth USER:HASH] [--metrics-url URL ...] [--command-config FILE] [-X K=V ...]
    pylog console hash-password        (reads the password from the terminal or stdin)

The console listens on 127.0.0.1 by default; another ``--host`` is allowed with a warning,
since anyone who reaches the port can read every record (and, without ``--read-only``,
write and delete). Client settings: ``--command-config`` (a properties file, as Kafka's
tools take it), then ``-X`` (wins), each client taking the names it knows.
"""

from __future__ import annotations

import argparse
import getpass
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

from pylog.cli._common import CliError, parse_properties, read_properties_file, run_command

__all__ = ["add_parser", "run"]

AUTH_ENV = "PYLOG_CONSOLE_AUTH"


def add_parser(sub: Any, add_bootstrap: Callable[[argparse.ArgumentParser], None]) -> None:
    c = sub.add_parser(
        "console", help="serve the web console for a Kafka-compatible cluster",
        description="Serve a web console (topics, messages, consumer groups and lag, "
        "brokers, live charts) for any Kafka-compatible cluster, on pylog.client. "
        "See docs/console.md.")
    c.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080; 0 picks one)")
    c.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; others get a warning)")
    c.add_argument("--read-only", action="store_true",
                   help="no write action at all: no create, produce, config change, delete "
                   "or offset reset")
    c.add_argument("--auth", metavar="USER:HASH",
                   help="require HTTP basic auth; HASH from `pylog console hash-password` "
                   f"(or set {AUTH_ENV}, which keeps it out of the process list)")
    c.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                   help="a broker's Prometheus /metrics (repeatable): rates and sizes come "
                   "from it; without it, rates come from offsets")
    c.add_argument("--sample-interval", type=float, default=5.0, metavar="SECONDS",
                   help="seconds between samples of the live charts (default 5)")
    c.add_argument("--command-config", metavar="FILE",
                   help="client settings in a properties file (Kafka's tools' option)")
    c.add_argument("--property", "-X", action="append", default=[], metavar="KEY=VALUE",
                   help="a client setting by its Kafka name (repeatable; wins over "
                   "--command-config)")
    c.add_argument("--ready-file", metavar="FILE", help="write http://HOST:PORT here once serving")
    c.add_argument("--log-level", default="warning",
                   choices=["debug", "info", "warning", "error"])
    add_bootstrap(c)
    csub = c.add_subparsers(dest="console_command", metavar="ACTION")
    h = csub.add_parser("hash-password", help="print a password hash for --auth",
                        description="Read a password (twice from a terminal, once from a "
                        "pipe) and print its scrypt hash for --auth USER:HASH.")
    h.set_defaults(console_command="hash-password")


def _hash_password(args: argparse.Namespace) -> int:
    from pylog.console.security import hash_password

    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise CliError("the two passwords differ; run the command again")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CliError("an empty password: give one")
    print(hash_password(password))
    return 0


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    timeout_ms = max(1, int(args.timeout * 1000))
    settings: dict[str, Any] = {"bootstrap.servers": args.bootstrap_server,
                                "request.timeout.ms": timeout_ms,
                                "socket.connection.setup.timeout.ms": min(timeout_ms, 10_000)}
    if args.command_config:
        settings.update(read_properties_file(args.command_config, "--command-config"))
    settings.update(parse_properties(args.property, "-X"))
    return settings


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serve(args: argparse.Namespace) -> int:
    import asyncio

    import uvicorn

    from pylog.console import ConsoleConfig, create_app
    from pylog.console.security import parse_auth

    auth_text = args.auth or os.environ.get(AUTH_ENV)
    try:
        auth = parse_auth(auth_text) if auth_text else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.sample_interval <= 0:
        raise CliError("--sample-interval must be above 0")
    config = ConsoleConfig(_settings(args), read_only=args.read_only, auth=auth,
                           metrics_urls=args.metrics_url, sample_interval=args.sample_interval)
    app = create_app(config)
    if not _is_loopback(args.host):
        print(f"pylog console: warning: listening on {args.host}, not loopback: anyone who "
              "reaches this port can read every record"
              + ("" if auth else " (add --auth)")
              + ("" if args.read_only else " and change the cluster (add --read-only)"),
              file=sys.stderr)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        sock.close()
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc} "
                       "(choose another --port)") from None
    host, port = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    server = uvicorn.Server(uvicorn.Config(app, log_level=args.log_level, access_log=False,
                                           lifespan="on"))
    print(f"pylog console: serving {url} for {args.bootstrap_server}"
          + (" (read-only)" if args.read_only else ""), file=sys.stderr)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.05)
        if args.ready_file and server.started:
            with open(args.ready_file + ".tmp", "w") as f:
                f.write(url)
            os.replace(args.ready_file + ".tmp", args.ready_file)
        await task
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        # uvicorn shuts down on SIGINT/SIGTERM, then raises the signal again for the
        # handler it replaced (ours turns it into KeyboardInterrupt): a stop asked for and
        # done cleanly, so exit 0, as the broker does.
        if not server.should_exit:
            raise
    finally:
        sock.close()
    return 0


def run(args: argparse.Namespace) -> int:
    if args.console_command == "hash-password":
        return run_command("console hash-password", _hash_password, args)
    return run_command("console", _serve, args)
