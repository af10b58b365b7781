"""What the client-side commands share: settings from the command line, errors, exit codes.

Exit codes of ``pylog topics|produce|consume|cluster|perf``:

- 0: done;
- 1: the command failed (the broker refused, could not be reached, a setting is wrong, a
  topic or partition does not exist ...): one line on stderr, ``pylog COMMAND: what is
  wrong``, saying what to do next where there is something to do;
- 2: the command line is wrong (argparse's usage message);
- 130: interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from pylog import errors
from pylog.client.errors import (
    ConfigError,
    GroupsNotAvailableError,
    KafkaConnectionError,
    KafkaTimeoutError,
)

__all__ = ["CliError", "base_settings", "connection_settings", "parse_properties",
           "read_properties_file", "run_command"]


class CliError(Exception):
    """A failure of a command with a message for the user (what is wrong, what to do)."""


def parse_properties(items: Iterable[str], what: str) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}`` (the value may contain ``=``).

    Raises:
        CliError: an item without ``=`` or with an empty key, naming the option.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{what} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def read_properties_file(path: str, what: str) -> dict[str, str]:
    """A Java-style ``.properties`` file (``key=value`` lines, ``#``/``!`` comments).

    Raises:
        CliError: the file cannot be read or a line has no ``=``.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise CliError(f"{what} {path}: {exc.strerror or exc}") from None
    items = []
    for line in lines:
        text = line.strip()
        if text and not text.startswith(("#", "!")):
            items.append(text.replace(":", "=", 1) if "=" not in text else text)
    return parse_properties(items, f"{what} {path}:")


def base_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Client settings every command takes from ``-b``, ``--timeout``, ``--command-config``
    and ``-X`` (connection settings only: ``security.protocol``, ``ssl.*`` and ``sasl.*``).

    Raises:
        CliError: a malformed ``-X``, an unreadable file, or a setting that is not a
            connection setting.
    """
    timeout_ms = max(1, int(args.timeout * 1000))
    return {
        "bootstrap.servers": args.bootstrap_server,
        "request.timeout.ms": timeout_ms,
        "socket.connection.setup.timeout.ms": min(timeout_ms, 10_000),
        **connection_settings(args),
    }


def connection_settings(args: argparse.Namespace) -> dict[str, str]:
    """``--command-config FILE`` then ``-X KEY=VALUE`` (which wins): how to connect. The -X
    of produce and consume takes every client setting; its connection settings apply to
    the command's other clients (its admin) too."""
    out: dict[str, str] = {}
    path = getattr(args, "command_config", None)
    if path:
        out.update(read_properties_file(path, "--command-config"))
    out.update(parse_properties(getattr(args, "client_property", None) or [], "-X"))
    for key in out:
        if not _is_connection_setting(key):
            raise CliError(f"{key}: only connection settings (security.protocol, ssl.*, sasl.*) are "
                           "taken from -X and --command-config")
    for attr in ("producer_property", "consumer_property"):
        items = parse_properties(getattr(args, attr, None) or [], "-X")
        out.update({k: v for k, v in items.items() if _is_connection_setting(k)})
    return out


def _is_connection_setting(key: str) -> bool:
    return key == "security.protocol" or key.startswith(("ssl.", "sasl."))


def describe_error(exc: BaseException, args: argparse.Namespace) -> str:
    """The message for an error, with what to do next where we know it."""
    text = str(exc) or type(exc).__name__
    bootstrap = getattr(args, "bootstrap_server", None)
    if isinstance(exc, KafkaConnectionError):
        return (f"{text} (is a broker listening at {bootstrap}? Give its address with "
                "-b HOST:PORT)")
    if isinstance(exc, KafkaTimeoutError):
        return f"{text} (is the broker at {bootstrap} overloaded? Try a longer --timeout)"
    if isinstance(exc, errors.UnknownTopicOrPartitionError):
        return f"{text} (list the topics with: pylog topics list -b {bootstrap})"
    if isinstance(exc, errors.InvalidTopicError) and getattr(args, "topic", None):
        from pylog.log.topics import TopicNameError, validate_topic_name

        try:
            validate_topic_name(args.topic)
        except TopicNameError as bad:  # the rule the broker applied, which its code omits
            return f"{text}: {bad}"
    if isinstance(exc, ConfigError):
        return f"bad client setting: {text}"
    if isinstance(exc, GroupsNotAvailableError):
        return f"{text} (consume without --group meanwhile)"
    return text


class Terminated(KeyboardInterrupt):
    """SIGTERM (a plain ``kill``, a process supervisor), raised where Ctrl-C's
    KeyboardInterrupt is, so that a command stops the same way: a consumer commits what it
    printed and leaves its group instead of staying a member until its session times out."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def stop_on_sigterm() -> None:
    """Handle SIGTERM as Ctrl-C for the rest of this process (main thread only). The broker
    replaces it with its own handler on its event loop."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


def interrupted_status(exc: KeyboardInterrupt) -> int:
    """The exit status of a command stopped by Ctrl-C (130) or SIGTERM (143), as a shell
    reports a process killed by either."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def run_command(name: str, fn: Callable[[argparse.Namespace], int],
                args: argparse.Namespace) -> int:
    """Run ``fn(args)`` and turn failures into one stderr line and an exit code."""
    try:
        return fn(args)
    except KeyboardInterrupt as exc:
        return interrupted_status(exc)
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as other Unix tools do; stdout
        # goes to /dev/null so that the interpreter's last flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (CliError, errors.KafkaError, OSError) as exc:
        print(f"pylog {name}: {describe_error(exc, args)}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a value the client refused (e.g. a partition out of range)
        print(f"pylog {name}: {exc}", file=sys.stderr)
        return 1
