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
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from pylog.cli._common import run_command

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, add_bootstrap: Callable[[argparse.ArgumentParser], None]) -> None:
    c = sub.add_parser("cluster", help="describe the cluster: brokers, controller, topics",
                       description="Describe the cluster a broker belongs to.")
    csub = c.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    info = csub.add_parser("info", help="cluster id, brokers (controller starred), topics",
                           description="Cluster id, brokers with the controller starred, and "
                           "each topic's partition and replica counts (as rpk cluster info).")
    info.add_argument("--all", action="store_true", help="include internal topics")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    add_bootstrap(info)


def run(args: argparse.Namespace) -> int:
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
