"""`pylog broker`: configure logging, read the config, run the broker until a signal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    log = logging.getLogger("pylog.broker")
    from pylog.config import BrokerConfig, ConfigError

    # Kafka's log4j.properties keeps the request log at WARN whatever the root level is:
    # --log-level DEBUG does not turn it on, --logger kafka.request.logger=DEBUG does.
    logging.getLogger("kafka.request.logger").setLevel(logging.WARNING)
    for item in args.logger:
        name, _, level = item.partition("=")
        if not name or level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            print(f"pylog broker: --logger {item!r}: expected NAME=LEVEL with LEVEL one of "
                  "DEBUG, INFO, WARNING, ERROR (e.g. kafka.request.logger=DEBUG)", file=sys.stderr)
            return 1
        logging.getLogger(name).setLevel(level.upper())

    try:
        config = BrokerConfig.from_sources(args.config, args.override)
    except ConfigError as exc:
        print(f"pylog broker: invalid configuration: {exc}", file=sys.stderr)
        return 1
    for warning in config.warnings:  # accepted but ignored settings (deprecated, Kafka-only)
        log.warning("%s", warning)
    try:
        from pylog.broker.server import PurePythonRefused, run_broker
    except ImportError as exc:  # logcore's extensions are not built
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 1

    from pylog.broker.server import event_loop_factory
    from pylog.cluster import MissingKazooError
    from pylog.errors import InconsistentClusterIdError

    factory = event_loop_factory() if sys.version_info >= (3, 11) else None
    try:
        coro = run_broker(config, allow_pure_python=args.allow_pure_python, ready_file=args.ready_file)
        if factory is None:
            return asyncio.run(coro)
        with asyncio.Runner(loop_factory=factory) as runner:  # type: ignore[attr-defined,unused-ignore]
            return runner.run(coro)
    except MissingKazooError as exc:  # zookeeper.connect without the [cluster] extra
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 1
    except PurePythonRefused as exc:
        print(f"pylog broker: {exc}", file=sys.stderr)
        return 1
    except ConfigError as exc:
        print(f"pylog broker: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except InconsistentClusterIdError as exc:
        log.error("cannot start: InconsistentClusterIdException: %s", exc)
        return 1
    except OSError as exc:  # a taken port, a data directory in use or not writable
        detail = exc.strerror or str(exc)
        if exc.filename:
            detail = f"{exc.filename}: {detail}"
        log.error("cannot start: %s", detail)
        return 1
