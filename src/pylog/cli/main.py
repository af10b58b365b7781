"""Entry point of the `pylog` console script."""

from __future__ import annotations

import argparse
import sys

import pylog


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pylog", description="A Kafka-compatible commit log: broker, tools and clients."
    )
    parser.add_argument("--version", action="version", version=f"pylog {pylog.__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        import logcore

        print(f"pylog {pylog.__version__} (logcore {logcore.IMPLEMENTATION})")
        return 0
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
