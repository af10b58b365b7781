"""`pylog groups` for KIP-932 share groups' offsets, in ``kafka-share-groups.sh``'s shape
(Kafka's ``ShareGroupCommand``): ``groups.py`` sends a share group here.

- ``describe G [--offsets]``: one row per partition the group has state for: its leader
  epoch, start offset (the share-partition start offset, SPSO: every record below it is
  done with) and lag (records from the SPSO to the high watermark not yet acknowledged;
  "-" from a broker without DescribeShareGroupOffsets v1).
- ``reset-offsets G (--topic T[:P,...]... | --all-topics) (--to-earliest | --to-latest |
  --to-offset N | --to-datetime T | --by-duration D) [--dry-run | --execute]``: only for a
  share group without members; ``--shift-by`` has nothing to shift from in a share group
  and is refused. ``--all-topics`` means the partitions the group has state for.
- ``delete-offsets G --topic T...``: a share group's state goes per whole topic.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.cli.groups import (
    CommandError,
    UsageError,
    _advice,
    _count,
    _new_offsets,
    _parse_topic_args,
    _table,
    _topic_partitions,
)

if TYPE_CHECKING:
    from pylog.client import Admin, GroupDescription


def offset_rows(admin: Admin, group: str) -> list[dict[str, Any]]:
    found = admin.list_share_group_offsets(group)
    return [{"topic": tp.topic, "partition": tp.partition, "leader_epoch": info.leader_epoch,
             "start_offset": info.start_offset, "lag": info.lag}
            for tp, info in sorted(found.items())]


def describe_offsets(admin: Admin, desc: GroupDescription) -> None:
    gid = desc.group_id
    if desc.state == "Empty":
        print(f"Share group {gid!r} has no active members.", file=sys.stderr)
    rows = offset_rows(admin, gid)
    if rows:
        _table(["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"],
               [[gid, r["topic"], r["partition"], r["leader_epoch"], r["start_offset"], r["lag"]]
                for r in rows], [15, 15, 10, 13, 13, 0])
    else:
        print(f"Share group {gid!r} has no share-partition state yet (nothing fetched).",
              file=sys.stderr)


def reset_offsets(admin: Admin, args: argparse.Namespace, desc: GroupDescription) -> int:
    group = desc.group_id
    if args.shift_by is not None:
        raise UsageError("--shift-by does not apply to a share group (it has no committed "
                         "offsets to shift); use --to-offset, --to-earliest, --to-latest, "
                         "--to-datetime or --by-duration")
    if desc.state != "Empty":
        raise CommandError(
            f"share group {group!r} is not empty ({desc.state}, "
            f"{_count(len(desc.members), 'member')}): its start offsets can only be reset "
            f"while it has no members; stop its consumers first")
    if args.all_topics:
        tps = sorted(admin.list_share_group_offsets(group))
        if not tps:
            raise CommandError(f"share group {group!r} has no share-partition state; name the "
                               f"topics with --topic")
    else:
        tps = _topic_partitions(admin, args.topic)
    plan = _new_offsets(admin, args, group, tps)
    _table(["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"],
           [[group, tp.topic, tp.partition, plan[tp]] for tp in sorted(plan)], [30, 30, 10, 0])
    if not args.execute:
        print("Dry run: nothing was changed; run again with --execute to reset these start "
              "offsets.", file=sys.stderr)
        return 0
    try:
        admin.alter_share_group_offsets(group, plan)
    except errors.NonEmptyGroupError:
        raise CommandError(f"share group {group!r} got members while the offsets were "
                           f"computed; stop its consumers first, then run again") from None
    print(f"Start offsets of share group {group!r} were reset.", file=sys.stderr)
    return 0


def delete_offsets(admin: Admin, args: argparse.Namespace, desc: GroupDescription) -> int:
    group = desc.group_id
    topics = []
    for topic, parts in _parse_topic_args(args.topic):
        if parts is not None:
            raise UsageError(f"--topic {topic}:...: a share group's offsets are deleted per "
                             f"topic (kafka-share-groups.sh --delete-offsets); name the topic "
                             f"alone")
        topics.append(topic)
    try:
        results = admin.delete_share_group_offsets(group, topics)
    except (errors.GroupIdNotFoundError, errors.NonEmptyGroupError) as exc:
        raise CommandError(_advice(exc, group)) from None
    _table(["TOPIC", "STATUS"],
           [[t, "Successful" if err is None else f"Error: {err}"] for t, err in results.items()],
           [30, 0])
    return 1 if any(err is not None for err in results.values()) else 0
