"""Entry point of the `pylog` console script.

Commands:
    pylog broker [--config F] [--override k=v ...] [--log-level L] [--logger NAME=LEVEL]
                 [--allow-pure-python]
    pylog topics create|list|describe|delete|alter-config ...
    pylog groups list|describe|reset-offsets|delete|delete-offsets ...
    pylog produce TOPIC [options] < lines
    pylog consume TOPIC [options]
    pylog dump-log PATH... [options]     (offline: reads data files, no broker)
    pylog configs describe|alter --entity-type clients|users ...   (client quotas)
    pylog acls add|list|remove --allow-principal User:alice --topic t ...   (ACLs)
    pylog cluster info
    pylog perf produce|consume --topic T ...
    pylog console [-b HOST:PORT] [--port 8080] [--read-only] ...   (the web console)

Every command but ``broker`` and ``dump-log`` runs on ``pylog.client`` and speaks the Kafka
protocol over TCP (``-b/--bootstrap-server``), so it works against any Kafka-compatible
broker. Exit codes: 0 done, 1 failed (one line on stderr says what is wrong), 2 bad command
line, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys

import pylog
from pylog.cli import groups as groups_cmd
from pylog.cli._common import stop_on_sigterm

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _add_bootstrap(p: argparse.ArgumentParser) -> None:
    """-b, --timeout, and the connection settings -X and --command-config unless the command
    has its own (produce and consume take every client setting with -X; the console both)."""
    p.add_argument("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                   help=f"broker to connect to (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="give up on a request after this long (default 30)")
    own = p._option_string_actions  # argparse has no public "is this option defined?"
    if "-X" not in own:
        p.add_argument("-X", dest="client_property", action="append", default=[],
                       metavar="KEY=VALUE",
                       help="a connection setting for the client, as kcat's -X (repeatable): "
                       "security.protocol=SASL_SSL, ssl.ca.location=ca.pem, sasl.mechanism=PLAIN, "
                       "sasl.username=..., ... (docs/security.md)")
    if "--command-config" not in own:
        p.add_argument("--command-config", metavar="FILE",
                       help="a client.properties file of connection settings "
                       "(security.protocol, ssl.*, sasl.*), as Kafka's tools take it; -X wins")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pylog", description="A Kafka-compatible commit log: broker, tools and clients."
    )
    parser.add_argument("--version", action="version", version=f"pylog {pylog.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    # --- broker ---
    b = sub.add_parser("broker", help="run a single-node broker",
                       description="Run a single-node Kafka-compatible broker. Defaults: "
                       "listeners=PLAINTEXT://127.0.0.1:9092, log.dirs=./pylog-data, node.id=0. "
                       "Metrics: --override metrics.listener=http://127.0.0.1:9404 serves "
                       "/metrics (Prometheus), /healthz and /readyz there; --logger "
                       "kafka.request.logger=DEBUG logs every request (docs/metrics.md).")
    b.add_argument("--config", "-c", metavar="FILE", help="a server.properties file")
    b.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config (repeatable; wins over --config)")
    b.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR", "debug", "info", "warning", "error"])
    b.add_argument("--logger", action="append", default=[], metavar="NAME=LEVEL",
                   help="set one logger's level (repeatable), e.g. kafka.request.logger=DEBUG "
                   "for Kafka's request log")
    b.add_argument("--allow-pure-python", action="store_true",
                   help="run on logcore's pure-Python implementation (slow; for debugging)")
    b.add_argument("--ready-file", metavar="FILE",
                   help="write HOST:PORT of the first listener here once serving")

    # --- topics ---
    t = sub.add_parser("topics", help="create, list, describe, delete topics, alter their configs")
    tsub = t.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    tc = tsub.add_parser("create", help="create a topic")
    tc.add_argument("topic")
    tc.add_argument("--partitions", "-p", type=int, default=-1, help="default: the broker's num.partitions")
    tc.add_argument("--replication-factor", "-r", type=int, default=-1)
    tc.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config (repeatable)")
    tc.add_argument("--if-not-exists", action="store_true")
    _add_bootstrap(tc)
    tl = tsub.add_parser("list", help="list topics")
    tl.add_argument("--all", action="store_true", help="include internal topics")
    _add_bootstrap(tl)
    td = tsub.add_parser("describe", help="partitions, offsets and configs of topics")
    td.add_argument("topics", nargs="*", help="default: every topic")
    td.add_argument("--configs", action="store_true", help="also show every config entry")
    _add_bootstrap(td)
    tdel = tsub.add_parser("delete", help="delete topics")
    tdel.add_argument("topics", nargs="+")
    _add_bootstrap(tdel)
    ta = tsub.add_parser("alter-config", help="set or delete topic configs")
    ta.add_argument("topic")
    ta.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ta.add_argument("--delete", action="append", default=[], metavar="KEY")
    _add_bootstrap(ta)

    # --- groups (pylog.cli.groups) ---
    groups_cmd.add_parser(sub, _add_bootstrap)

    # --- produce ---
    p = sub.add_parser("produce", help="produce lines from stdin or a file")
    p.add_argument("topic")
    p.add_argument("--file", "-f", metavar="FILE", help="read lines from FILE instead of stdin")
    p.add_argument("--partition", "-p", type=int, default=None,
                   help="partition (default: by key hash, else round robin)")
    p.add_argument("--key-separator", "-K", metavar="SEP", help="split each line into key SEP value")
    p.add_argument("--header", "-H", action="append", default=[], metavar="NAME=VALUE",
                   help="header added to every record (repeatable)")
    p.add_argument("--compression", "-z", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    p.add_argument("--acks", type=int, default=-1, choices=[-1, 0, 1])
    p.add_argument("--batch-size", type=int, default=None, metavar="BYTES",
                   help="the producer's batch.size: bytes of records per partition batch "
                   "(default 16384), as kafka-console-producer's --batch-size")
    p.add_argument("--linger-ms", type=int, default=5, metavar="MS",
                   help="wait up to MS for a batch to fill (linger.ms, default 5)")
    p.add_argument("--producer-property", "-X", action="append", default=[], metavar="KEY=VALUE",
                   help="any producer setting by its Kafka name, e.g. -X enable.idempotence=false "
                   "(repeatable)")
    p.add_argument("--null-value", metavar="TEXT", help="a value equal to TEXT is sent as null")
    _add_bootstrap(p)

    # --- consume ---
    c = sub.add_parser("consume", help="print records of a topic")
    c.add_argument("topic")
    c.add_argument("--partition", "-p", type=int, action="append", default=None,
                   help="partition (repeatable; default all)")
    start = c.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start offset")
    start.add_argument("--offset", "-o", type=int, help="start at this offset (negative: from the end)")
    start.add_argument("--from-timestamp", type=int, metavar="MS",
                       help="start at the first record with timestamp >= MS")
    c.add_argument("--max-messages", "-n", type=int, default=None, help="stop after N records")
    c.add_argument("--exit-at-end", "-e", action="store_true", help="stop at the end of every partition")
    c.add_argument("--key", action="store_true", help="print the key")
    c.add_argument("--key-separator", default="\t", metavar="SEP")
    c.add_argument("--timestamp", action="store_true", help="print the timestamp")
    c.add_argument("--headers", action="store_true", help="print headers as name=value,...")
    c.add_argument("--offsets", action="store_true", help="print partition and offset")
    c.add_argument("--max-wait-ms", type=int, default=500, metavar="MS",
                   help="fetch.max.wait.ms: how long the broker may hold a fetch (default 500)")
    c.add_argument("--group", "-g", metavar="GROUP",
                   help="consume in this consumer group: subscribe (or, with --partition, assign) "
                   "and commit what was printed every 5 s and on exit")
    c.add_argument("--isolation-level", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed"],
                   help="read_committed: only committed transactional records")
    c.add_argument("--format", "-f", metavar="TEMPLATE",
                   help="print each record with a kcat -f template: %%t topic, %%p partition, "
                   "%%o offset, %%k key, %%s value, %%K/%%S their lengths, %%T timestamp, "
                   "%%h headers, \\n newline (e.g. '%%p:%%o %%k=%%s\\n')")
    c.add_argument("--json", "-J", action="store_true",
                   help="print each record as one JSON object (kcat -J's fields)")
    c.add_argument("--consumer-property", "-X", action="append", default=[], metavar="KEY=VALUE",
                   help="any consumer setting by its Kafka name (repeatable)")
    _add_bootstrap(c)

    # --- dump-log (offline) ---
    from pylog.cli import dump_log

    dump_log.add_parser(sub)
    # --- cluster, perf ---
    from pylog.cli import acls, cluster, configs, console_cmd, perf

    acls.add_parser(sub, _add_bootstrap)
    configs.add_parser(sub, _add_bootstrap)
    cluster.add_parser(sub, _add_bootstrap)
    perf.add_parser(sub, _add_bootstrap)
    console_cmd.add_parser(sub, _add_bootstrap)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        import logcore

        print(f"pylog {pylog.__version__} (logcore {logcore.IMPLEMENTATION})")
        return 0
    # Every command stops on SIGTERM as on Ctrl-C (the broker installs its own handlers).
    stop_on_sigterm()
    if args.command == "broker":
        from pylog.cli.broker_cmd import run

        return run(args)
    if args.command == "groups":
        return groups_cmd.run(args)
    if args.command == "dump-log":
        from pylog.cli import dump_log

        return dump_log.run(args)
    if args.command == "cluster":
        from pylog.cli import cluster

        return cluster.run(args)
    if args.command == "acls":
        from pylog.cli import acls

        return acls.run(args)
    if args.command == "configs":
        from pylog.cli import configs

        return configs.run(args)
    if args.command == "console":
        from pylog.cli import console_cmd

        return console_cmd.run(args)
    if args.command == "perf":
        from pylog.cli import perf

        return perf.run(args)
    from pylog.cli import tools

    return tools.run(args)


if __name__ == "__main__":
    sys.exit(main())
