"""`pylog cluster elect-leaders | reassign | reassignments`: leader elections and partition
reassignments at the controller of a ZooKeeper-mode cluster, after Kafka's
``kafka-leader-election.sh`` and ``kafka-reassign-partitions.sh`` (``--execute``,
``--cancel``, ``--list``), over ``pylog.client.Admin``.

- ``elect-leaders [--election-type preferred|unclean] (--partition T:P... |
  --all-topic-partitions)``: one line per partition: elected, not needed, or the error.
  Exit 1 if an election failed (not needed is not a failure).
- ``reassign --move T:P=B1,B2,...  [--cancel T:P]...``: start moving partitions to the
  replica lists given, or cancel ongoing moves; one line per partition.
- ``reassignments [--partition T:P]...``: the ongoing moves (replicas, adding, removing).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pylog.cli._common import CliError


def _tp(text: str) -> tuple[str, int]:
    topic, sep, part = text.rpartition(":")
    if not sep or not topic or not part.isdigit():
        raise argparse.ArgumentTypeError(f"expected TOPIC:PARTITION (e.g. orders:0), got {text!r}")
    return topic, int(part)


def _move(text: str) -> tuple[tuple[str, int], list[int]]:
    tp, sep, replicas = text.partition("=")
    ids = replicas.split(",")
    if not sep or not all(i.strip().isdigit() for i in ids):
        raise argparse.ArgumentTypeError(
            f"expected TOPIC:PARTITION=BROKER,BROKER,... (e.g. orders:0=1,2,3), got {text!r}")
    return _tp(tp), [int(i) for i in ids]


def add_parsers(csub: Any, add_bootstrap: Callable[[argparse.ArgumentParser], None]) -> None:
    el = csub.add_parser(
        "elect-leaders", help="elect preferred (or unclean) leaders of partitions",
        description="Ask the controller to move each partition's leadership to its preferred "
        "replica (preferred), or to elect a leader for partitions without one, outside the "
        "ISR if needed (unclean: records may be lost), as kafka-leader-election.sh.")
    el.add_argument("--election-type", choices=("preferred", "unclean"), default="preferred",
                    type=str.lower, help="the election to run (default preferred)")
    which = el.add_mutually_exclusive_group(required=True)
    which.add_argument("--partition", action="append", type=_tp, metavar="TOPIC:PARTITION",
                       help="a partition to elect a leader for (repeatable)")
    which.add_argument("--all-topic-partitions", action="store_true",
                       help="every partition of the cluster")
    add_bootstrap(el)
    ra = csub.add_parser(
        "reassign", help="move partitions to new replicas, or cancel a move",
        description="Start moving partitions to new replica lists (the new replicas copy the "
        "log, then the removed ones delete theirs), or cancel ongoing moves, as "
        "kafka-reassign-partitions.sh --execute / --cancel.")
    ra.add_argument("--move", action="append", type=_move, default=[],
                    metavar="TOPIC:PARTITION=B1,B2,...",
                    help="the new replica list of a partition, preferred leader first (repeatable)")
    ra.add_argument("--cancel", action="append", type=_tp, default=[], metavar="TOPIC:PARTITION",
                    help="cancel the ongoing move of a partition (repeatable)")
    add_bootstrap(ra)
    ls = csub.add_parser(
        "reassignments", help="list the ongoing partition moves",
        description="The partitions being moved, with every replica during the move, the "
        "ones being added and the ones being removed (kafka-reassign-partitions.sh --list).")
    ls.add_argument("--partition", action="append", type=_tp, metavar="TOPIC:PARTITION",
                    help="only these partitions (repeatable)")
    add_bootstrap(ls)


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids)) or "-"


def elect_leaders(args: argparse.Namespace) -> int:
    from pylog import errors
    from pylog.cli.tools import admin_for

    with admin_for(args) as admin:
        result = admin.elect_leaders(args.election_type,
                                     None if args.all_topic_partitions else args.partition)
    failed = 0
    for (t, p), err in sorted(result.items()):
        if err is None:
            print(f"{t}:{p}  elected ({args.election_type})")
        elif isinstance(err, errors.ElectionNotNeededError):
            print(f"{t}:{p}  not needed (the leader is already the one asked for)")
        else:
            failed += 1
            print(f"{t}:{p}  failed: {err}")
    if not result:
        print("no partition needed an election")
    return 1 if failed else 0


def reassign(args: argparse.Namespace) -> int:
    from pylog.cli.tools import admin_for

    targets: dict[tuple[str, int], list[int] | None] = dict(args.move)
    for tp in args.cancel:
        if tp in targets:
            raise CliError(f"{tp[0]}:{tp[1]} is both moved and cancelled: give one of the two")
        targets[tp] = None
    if not targets:
        raise CliError("nothing to do: give --move TOPIC:PARTITION=B1,B2,... or --cancel "
                       "TOPIC:PARTITION")
    with admin_for(args) as admin:
        result = admin.alter_partition_reassignments(targets)
    failed = 0
    for (t, p), err in sorted(result.items()):
        target = targets.get((t, p))
        if err is None:
            print(f"{t}:{p}  " + ("cancelled" if target is None else
                                  f"moving to replicas {_ids(target)}"))
        else:
            failed += 1
            print(f"{t}:{p}  failed: {err}")
    return 1 if failed else 0


def reassignments(args: argparse.Namespace) -> int:
    from pylog.cli.tools import admin_for

    with admin_for(args) as admin:
        ongoing = admin.list_partition_reassignments(args.partition)
    if not ongoing:
        print("no partition is being reassigned")
        return 0
    rows = [["PARTITION", "REPLICAS", "ADDING", "REMOVING"]] + [
        [f"{t}:{p}", _ids(r.replicas), _ids(r.adding_replicas), _ids(r.removing_replicas)]
        for (t, p), r in sorted(ongoing.items())]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "elect-leaders": elect_leaders, "reassign": reassign, "reassignments": reassignments}
