"""`pylog cluster info`: the cluster id, its brokers and controller, and a summary of its
topics, laid out as ``rpk cluster info`` does (the controller's id is starred)::

    CLUSTER
    =======
    ID          q8dUwJdBQDu5iSC3EEw9Hg
    CONTROLLER  0
    TOPICS      2 (4 partitions)

    BROKERS
    =======
    ID  HOST       PORT  RACK
    0*  127.0.0.1  9092  -

    TOPICS
    ======
    NAME       PARTITIONS  REPLICAS
    greetings  3           1
    orders     1           1

``--json`` prints the same as one object (``cluster_id``, ``controller_id``, ``brokers``,
``topics`` with ``name``, ``partitions``, ``replicas``, ``internal``).

``pylog cluster start [--brokers 3] [--data-dir D]`` starts ZooKeeper and N brokers in
cluster mode on 127.0.0.1 (``pylog.controller.launcher``); ``pylog cluster stop`` stops them.
``elect-leaders``, ``reassign`` and ``reassignments`` ask the controller
(``pylog.cli.replicas``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from pylog.cli._common import run_command

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, add_bootstrap: Callable[[argparse.ArgumentParser], None]) -> None:
    c = sub.add_parser("cluster", help="describe the cluster; start or stop a local one",
                       description="Describe the cluster a broker belongs to, or start/stop a "
                       "local cluster (ZooKeeper and N brokers).")
    csub = c.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    info = csub.add_parser("info", help="cluster id, brokers (controller starred), topics",
                           description="Cluster id, brokers with the controller starred, and "
                           "each topic's partition and replica counts (as rpk cluster info).")
    info.add_argument("--all", action="store_true", help="include internal topics")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    add_bootstrap(info)
    st = csub.add_parser("start", help="start a local cluster: ZooKeeper and N brokers",
                         description="Start Debian's ZooKeeper and N pylog brokers in cluster "
                         "mode on 127.0.0.1 (in the background), print their addresses and "
                         "record them in DATA_DIR/cluster.json for `pylog cluster stop`.")
    st.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    st.add_argument("--data-dir", default="./pylog-cluster",
                    help="where ZooKeeper, the brokers' data and the logs go (default ./pylog-cluster)")
    st.add_argument("--base-port", type=int, default=9092,
                    help="broker i listens on BASE_PORT + i (default 9092)")
    st.add_argument("--zookeeper-port", type=int, default=2181, help="ZooKeeper's port (default 2181)")
    st.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for every broker (repeatable)")
    st.add_argument("--sasl", action="store_true",
                    help="a secured cluster: SASL_PLAINTEXT listeners with SCRAM, brokers "
                    "authenticating to each other; an admin user's settings are written to "
                    "DATA_DIR/client.properties (use with --command-config)")
    sp = csub.add_parser("stop", help="stop a cluster started by `pylog cluster start`",
                         description="SIGTERM the brokers (controlled shutdown), then ZooKeeper.")
    sp.add_argument("--data-dir", default="./pylog-cluster",
                    help="the --data-dir given to start (default ./pylog-cluster)")
    from pylog.cli import replicas

    replicas.add_parsers(csub, add_bootstrap)


def _start(args: argparse.Namespace) -> int:
    from pylog.controller import launcher

    if args.brokers < 1:
        print("pylog cluster start: --brokers must be at least 1", file=sys.stderr)
        return 2
    try:
        state = launcher.start(args.data_dir, args.brokers, args.base_port, args.zookeeper_port,
                               args.override, sasl=args.sasl)
    except launcher.LauncherError as exc:
        print(f"pylog cluster start: {exc}", file=sys.stderr)
        return 1
    print(f"zookeeper.connect=127.0.0.1:{state['zookeeper']['port']}")
    print("bootstrap.servers=" + ",".join(f"{b['host']}:{b['port']}" for b in state["brokers"]))
    for b in state["brokers"]:
        print(f"broker {b['id']}  {b['host']}:{b['port']}  pid {b['pid']}")
    if state.get("client_properties"):
        print(f"SASL_PLAINTEXT with SCRAM: client settings (user admin) in "
              f"{state['client_properties']}: pylog ... --command-config "
              f"{state['client_properties']}")
    print(f"logs and data in {args.data_dir}; stop with: pylog cluster stop --data-dir {args.data_dir}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from pylog.controller import launcher

    try:
        lines = launcher.stop(args.data_dir)
    except launcher.LauncherError as exc:
        print(f"pylog cluster stop: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.cluster_command == "start":
        return run_command("cluster", _start, args)
    if args.cluster_command == "stop":
        return run_command("cluster", _stop, args)
    from pylog.cli import replicas

    if args.cluster_command in replicas.COMMANDS:
        return run_command("cluster", replicas.COMMANDS[args.cluster_command], args)
    return run_command("cluster", info, args)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def info(args: argparse.Namespace) -> int:
    from pylog.cli.tools import admin_for

    with admin_for(args) as admin:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics(None)
    shown = sorted((t for t in topics.values() if args.all or not t.is_internal),
                   key=lambda t: t.name)
    brokers = sorted(cluster.brokers, key=lambda b: b.node_id)
    if args.json:
        print(json.dumps({
            "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                         "controller": b.node_id == cluster.controller_id} for b in brokers],
            "topics": [{"name": t.name, "partitions": len(t.partitions),
                        "replicas": len(t.partitions[0].replicas) if t.partitions else 0,
                        "internal": t.is_internal} for t in shown],
        }, indent=2))
        return 0
    partitions = sum(len(t.partitions) for t in shown)
    lines = ["CLUSTER", "=======",
             *_table([["ID", cluster.cluster_id or "-"],
                      ["CONTROLLER", str(cluster.controller_id)],
                      ["TOPICS", f"{len(shown)} ({partitions} partitions)"]]),
             "", "BROKERS", "=======",
             *_table([["ID", "HOST", "PORT", "RACK"]] + [
                 [f"{b.node_id}{'*' if b.node_id == cluster.controller_id else ''}", b.host,
                  str(b.port), b.rack or "-"] for b in brokers])]
    if shown:
        lines += ["", "TOPICS", "======",
                  *_table([["NAME", "PARTITIONS", "REPLICAS"]] + [
                      [t.name, str(len(t.partitions)),
                       str(len(t.partitions[0].replicas) if t.partitions else 0)]
                      for t in shown])]
    print("\n".join(lines))
    return 0
