"""`pylog groups`: list, describe, reset the offsets of and delete consumer groups (and list,
describe, reset the start offsets of and delete KIP-932 share groups: ``share_groups``).

After Kafka's ``kafka-consumer-groups.sh`` (``ConsumerGroupCommand``): the same views
and columns, the same rules, over pylog's own admin client (``pylog.client.Admin``), so
it works against any Kafka-compatible broker.

- ``list [--state [S,...]] [--type [T,...]]``: group ids; with ``--state`` / ``--type`` a
  GROUP / TYPE / STATE table, filtered by the states and types given.
- ``describe G... [--members [--verbose] | --state] [--json]``: by default one row per
  partition the group is assigned or has a committed offset for: committed offset, log
  end offset, lag (end - committed; "-" without a commit) and the member that holds it.
- ``reset-offsets G (--topic T[:P,...]... | --all-topics) MODE [--dry-run | --execute]``:
  prints the new offsets; only ``--execute`` commits them, and only for a group without
  members (Empty, or unknown: then the commit creates it). ``--to-offset`` and
  ``--shift-by`` are clamped to the partition's [log start, log end], with a warning.
- ``delete G...``, ``delete-offsets G --topic T[:P,...]...``.

Exit status 0 on success, 1 when the broker refused something or the group does not
exist, 2 for a malformed command line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog._durations import parse_duration_ms
from pylog.cli._common import CliError, connection_settings, describe_error, interrupted_status

if TYPE_CHECKING:  # the client is imported when a groups command runs, not by `pylog broker`
    from pylog.client import Admin, GroupDescription, TopicPartition

MISSING = "-"
RESET_MODES = ("to_earliest", "to_latest", "to_offset", "to_datetime", "shift_by", "by_duration")
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty",
          "Assigning", "Reconciling")


class UsageError(Exception):
    """A malformed command line (exit status 2)."""


class CommandError(Exception):
    """A failure with a message saying what to do (exit status 1)."""


# --- the parser -------------------------------------------------------------------------------


def add_parser(sub: Any, add_bootstrap: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register ``pylog groups`` on ``main``'s subparsers."""
    g = sub.add_parser(
        "groups", help="list, describe, reset offsets of, delete consumer groups",
        description="Consumer group administration, after Kafka's kafka-consumer-groups.sh.")
    gsub = g.add_subparsers(dest="groups_command", metavar="ACTION", required=True)

    gl = gsub.add_parser("list", help="list groups",
                         description="List the groups of every broker.")
    gl.add_argument("--state", nargs="?", const="", metavar="STATE[,STATE...]",
                    help="show each group's state; with states, only groups in them "
                    f"(case-insensitive: {', '.join(STATES)})")
    gl.add_argument("--type", nargs="?", const="", metavar="TYPE[,TYPE...]",
                    help="show each group's type (classic, consumer, share); with types, only groups "
                    "of them")
    add_bootstrap(gl)

    gd = gsub.add_parser(
        "describe", help="offsets and lag, members or state of groups",
        description="Per partition: committed offset, log end offset, lag and the member "
        "holding it (default); members (--members); state (--state).")
    gd.add_argument("groups", nargs="*", metavar="GROUP")
    gd.add_argument("--all-groups", action="store_true", help="describe every group")
    view = gd.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="partitions and lag (the default)")
    view.add_argument("--members", action="store_true", help="members and their partitions")
    view.add_argument("--state", action="store_true",
                      help="coordinator, assignor, state and member count")
    gd.add_argument("--verbose", action="store_true",
                    help="with --members: the partitions of each member")
    gd.add_argument("--json", action="store_true",
                    help="print every view of each group as JSON (a list of groups)")
    add_bootstrap(gd)

    gr = gsub.add_parser(
        "reset-offsets", help="plan or set a group's committed offsets",
        description="Print the offsets a group would be reset to; --execute commits them. "
        "The group must have no members (stop its consumers first).")
    gr.add_argument("group", metavar="GROUP")
    scope = gr.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has a committed offset for")
    mode = gr.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true", help="the log start offset")
    mode.add_argument("--to-latest", action="store_true", help="the log end offset")
    mode.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    mode.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                      help="the first offset at or after this time (UTC unless a zone "
                      "such as Z or +02:00 is given)")
    mode.add_argument("--shift-by", type=int, metavar="N",
                      help="the committed offset plus N (N may be negative)")
    mode.add_argument("--by-duration", metavar="PnDTnHnMnS",
                      help="the first offset at or after now minus this ISO-8601 duration")
    run = gr.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    add_bootstrap(gr)

    gdel = gsub.add_parser("delete", help="delete groups and their offsets",
                           description="Delete groups without members, with their offsets.")
    gdel.add_argument("groups", nargs="+", metavar="GROUP")
    add_bootstrap(gdel)

    gdo = gsub.add_parser(
        "delete-offsets", help="delete a group's offsets of some topics",
        description="Delete a group's committed offsets of topics its members do not consume.")
    gdo.add_argument("group", metavar="GROUP")
    gdo.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,...]",
                     help="a topic, or some of its partitions (repeatable)")
    add_bootstrap(gdo)


def run(args: argparse.Namespace) -> int:
    from pylog.client import Admin, ConfigError
    from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError

    where = f"pylog groups {args.groups_command}"
    try:
        _check_args(args)
    except UsageError as exc:
        print(f"{where}: error: {exc}", file=sys.stderr)
        return 2
    try:
        admin = Admin({"bootstrap.servers": args.bootstrap_server, "client.id": "pylog-groups",
                       "request.timeout.ms": max(1, int(args.timeout * 1000)),
                       "default.api.timeout.ms": max(1, int(args.timeout * 1000)),
                       **connection_settings(args)})
    except (ConfigError, CliError) as exc:
        print(f"{where}: error: {exc}", file=sys.stderr)
        return 2
    try:
        with admin:
            # One request first: a wrong address fails now, not after the group calls'
            # retries (they wait out coordinator moves and broker restarts until --timeout).
            admin.describe_cluster()
            return int(_ACTIONS[args.groups_command](admin, args))
    except UsageError as exc:
        print(f"{where}: error: {exc}", file=sys.stderr)
        return 2
    except CommandError as exc:
        print(f"{where}: {exc}", file=sys.stderr)
        return 1
    except (KafkaConnectionError, KafkaTimeoutError) as exc:  # worded as every command does
        print(f"{where}: {describe_error(exc, args)}", file=sys.stderr)
        return 1
    except errors.KafkaError as exc:
        print(f"{where}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        return interrupted_status(exc)
    except BrokenPipeError:
        return 0


def _check_args(args: argparse.Namespace) -> None:
    """Refuse a malformed command line before any request."""
    action = args.groups_command
    if action == "describe":
        if args.all_groups and args.groups:
            raise UsageError("give group ids or --all-groups, not both")
        if not args.all_groups and not args.groups:
            raise UsageError("name a group (or --all-groups)")
        if args.verbose and not args.members:
            raise UsageError("--verbose goes with --members")
    if action in ("reset-offsets", "delete-offsets") and args.topic:
        _parse_topic_args(args.topic)
    if action == "reset-offsets":
        if args.to_datetime is not None:
            parse_datetime(args.to_datetime)
        if args.by_duration is not None:
            parse_duration(args.by_duration)


# --- list -------------------------------------------------------------------------------------


def groups_list(admin: Admin, args: argparse.Namespace) -> int:
    show_type = getattr(args, "type", None) is not None
    if args.state is None and not show_type:
        for g in admin.list_groups():
            print(g.group_id)
        return 0
    states = [s for s in (x.strip() for x in (args.state or "").split(",")) if s]
    types = [t for t in (x.strip() for x in (args.type or "").split(",")) if t] if show_type else []
    try:
        listed = admin.list_groups(states or None, types or None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # kafka-consumer-groups.sh's columns: GROUP, then TYPE (--type), then STATE (--state).
    width = max([15] + [len(g.group_id) for g in listed]) + 10
    header = [f"{'GROUP':<{width}}"] + (["TYPE      "] if show_type else []) + (
        [f"{'STATE':<20}"] if args.state is not None else [])
    print(" ".join(header).rstrip())
    for g in listed:
        row = [f"{g.group_id:<{width}}"] + ([f"{g.group_type or MISSING:<10}"] if show_type else []) + (
            [f"{g.state or MISSING:<20}"] if args.state is not None else [])
        print(" ".join(row).rstrip())
    return 0


# --- describe ---------------------------------------------------------------------------------


def _group_ids(admin: Admin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_groups()]
    return list(dict.fromkeys(args.groups))


def _offset_rows(admin: Admin, desc: GroupDescription) -> list[dict[str, Any]]:
    """Kafka's describe rows: members with partitions (most partitions first), then the
    committed partitions no member holds."""

    committed = admin.list_group_offsets(desc.group_id)
    rows: list[tuple[TopicPartition, Any]] = []
    assigned: set[TopicPartition] = set()
    for m in sorted((m for m in desc.members if m.assignment), key=lambda m: -len(m.assignment)):
        for tp in sorted(m.assignment):
            rows.append((tp, m))
            assigned.add(tp)
    rows += [(tp, None) for tp in sorted(committed) if tp not in assigned]
    ends = _log_end_offsets(admin, [tp for tp, _ in rows])
    out = []
    for tp, m in rows:
        om = committed.get(tp)
        offset = om.offset if om is not None else None
        end = ends.get(tp)
        out.append({
            "topic": tp.topic, "partition": tp.partition, "committed_offset": offset,
            "log_end_offset": end,
            "lag": end - offset if offset is not None and end is not None else None,
            "consumer_id": m.member_id if m else None, "host": m.host if m else None,
            "client_id": m.client_id if m else None})
    return out


def _log_end_offsets(admin: Admin, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Log end offsets; a topic that no longer exists has none ("-" in the table)."""
    out: dict[TopicPartition, int] = {}
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp)
    for parts in by_topic.values():
        try:
            found = admin.list_offsets({tp: "latest" for tp in parts})
        except errors.UnknownTopicOrPartitionError:
            continue
        out.update({tp: offset for tp, (offset, _) in found.items()})
    return out


def _say_state(desc: GroupDescription) -> None:
    if desc.state == "Dead":
        raise CommandError(f"consumer group {desc.group_id!r} does not exist (no members, no "
                           f"committed offsets); `pylog groups list` shows the groups")
    if desc.state == "Empty":
        print(f"Consumer group {desc.group_id!r} has no active members.", file=sys.stderr)
    elif desc.state != "Stable":
        print(f"Warning: consumer group {desc.group_id!r} is rebalancing ({desc.state}).",
              file=sys.stderr)


def _table(header: list[str], rows: list[list[Any]], widths: list[int]) -> None:
    """Left-aligned columns of at least ``widths``, wider where a value is (the last
    column unpadded), as ConsumerGroupCommand prints them."""
    cells = [header] + [[MISSING if v is None else str(v) for v in r] for r in rows]
    sizes = [max([w] + [len(r[i]) for r in cells]) for i, w in enumerate(widths)]
    for r in cells:
        print(" ".join(v.ljust(sizes[i]) if i < len(r) - 1 else v for i, v in enumerate(r)))


def groups_describe(admin: Admin, args: argparse.Namespace) -> int:
    ids = _group_ids(admin, args)
    descs = admin.describe_groups(ids)
    if args.json:
        return _describe_json(admin, descs)
    status = 0
    brokers = {b.node_id: b for b in admin.describe_cluster().brokers} if args.state else {}
    for gid in ids:
        desc = descs[gid]
        try:
            _say_state(desc)
        except CommandError as exc:
            print(f"pylog groups describe: {exc}", file=sys.stderr)
            status = 1
            continue
        if args.members:
            _print_members(desc, args.verbose)
        elif args.state:
            b = brokers.get(desc.coordinator)
            where = f"{b.host}:{b.port}" if b else "?"
            if desc.group_type in ("consumer", "share"):
                # A KIP-848 or KIP-932 group: its epochs too, as kafka-consumer-groups.sh
                # and kafka-share-groups.sh show them.
                _table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                        "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"],
                       [[gid, f"{where}  ({desc.coordinator})", desc.protocol, desc.state,
                         desc.group_epoch, desc.assignment_epoch, len(desc.members)]],
                       [15, 25, 20, 15, 12, 24, 0])
            else:
                _table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                       [[gid, f"{where}  ({desc.coordinator})", desc.protocol, desc.state,
                         len(desc.members)]], [15, 25, 20, 15, 0])
        elif desc.group_type == "share":
            # A share group commits no offsets: its start offsets and lag, as
            # kafka-share-groups.sh --describe [--offsets] shows them.
            from pylog.cli import share_groups

            share_groups.describe_offsets(admin, desc)
        else:
            rows = _offset_rows(admin, desc)
            if rows:
                _table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                        "CONSUMER-ID", "HOST", "CLIENT-ID"],
                       [[gid, r["topic"], r["partition"], r["committed_offset"],
                         r["log_end_offset"], r["lag"], r["consumer_id"], r["host"],
                         r["client_id"]] for r in rows],
                       [15, 15, 10, 15, 15, 15, 15, 15, 0])
        print()
    return status


def _print_members(desc: GroupDescription, verbose: bool) -> None:
    instances = any(m.group_instance_id for m in desc.members)
    # A KIP-848 group's verbose view adds each member's epoch and its target assignment
    # (the partitions it is moving to) at the group's assignment epoch.
    modern = verbose and desc.group_type == "consumer"
    share = desc.group_type == "share"
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if instances else []) + [
        "HOST", "CLIENT-ID", "#PARTITIONS"]
    widths = [15, 15] + ([17] if instances else []) + [15, 15, 15]
    if modern:
        # MEMBER-TYPE (pylog's column): classic for a member that joined with JoinGroup
        # (a mixed group, groups.md "Migrating between the protocols"), else consumer.
        header += ["MEMBER-TYPE", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                   "TARGET-ASSIGNMENT"]
        widths += [12, 15, 20, 15, 0]
    elif share:
        header += ["MEMBER-EPOCH", "ASSIGNMENT"]
        widths += [15, 0]
    elif verbose:
        header.append("ASSIGNMENT")
        widths.append(0)
    rows = []
    for m in desc.members:
        row: list[Any] = [desc.group_id, m.member_id]
        if instances:
            row.append(m.group_instance_id or "")
        row += [m.host, m.client_id, len(m.assignment)]
        if modern:
            row += [m.member_type or MISSING, m.member_epoch, _assignment_text(m.assignment),
                    desc.assignment_epoch,
                    _assignment_text(m.target_assignment or [])]
        elif share:
            row += [m.member_epoch, _assignment_text(m.assignment)]
        elif verbose:
            row.append(_assignment_text(m.assignment))
        rows.append(row)
    _table(header, rows, widths)


def _assignment_text(tps: list[TopicPartition]) -> str:
    if not tps:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))


def _describe_json(admin: Admin, descs: dict[str, GroupDescription]) -> int:
    out = []
    status = 0
    for gid, desc in descs.items():
        if desc.state == "Dead":
            print(f"pylog groups describe: consumer group {gid!r} does not exist (no members, "
                  f"no committed offsets); `pylog groups list` shows the groups", file=sys.stderr)
            status = 1
            continue
        group: dict[str, Any] = {
            "group": gid, "state": desc.state, "protocol_type": desc.protocol_type,
            "protocol": desc.protocol, "coordinator": desc.coordinator, "type": desc.group_type,
            "members": [_member_json(m) for m in desc.members],
            "offsets": _offset_rows(admin, desc) if desc.group_type != "share" else
            _share_offset_rows(admin, gid)}
        if desc.group_type in ("consumer", "share"):
            group["group_epoch"] = desc.group_epoch
            group["assignment_epoch"] = desc.assignment_epoch
        out.append(group)
    print(json.dumps(out, indent=2))
    return status


def _share_offset_rows(admin: Admin, gid: str) -> list[dict[str, Any]]:
    from pylog.cli import share_groups

    return share_groups.offset_rows(admin, gid)


def _member_json(m: Any) -> dict[str, Any]:
    out = {"consumer_id": m.member_id, "group_instance_id": m.group_instance_id,
           "client_id": m.client_id, "host": m.host,
           "assignment": [{"topic": t, "partition": p} for t, p in m.assignment]}
    if m.member_epoch is not None:  # a KIP-848 consumer-group member
        out["member_epoch"] = m.member_epoch
        out["target_assignment"] = [{"topic": t, "partition": p} for t, p in m.target_assignment or []]
        out["subscribed_topics"] = m.subscribed_topics
        out["member_type"] = m.member_type
    return out


# --- reset-offsets ----------------------------------------------------------------------------


def _parse_topic_args(topics: list[str]) -> list[tuple[str, list[int] | None]]:
    out: list[tuple[str, list[int] | None]] = []
    for arg in topics:
        topic, sep, parts = arg.partition(":")
        if not topic:
            raise UsageError(f"--topic {arg!r}: expected TOPIC or TOPIC:P[,P...]")
        if not sep:
            out.append((topic, None))
            continue
        try:
            numbers = [int(p) for p in parts.split(",")]
        except ValueError:
            raise UsageError(f"--topic {arg!r}: partitions are numbers, as in {topic}:0,1,2") from None
        if any(n < 0 for n in numbers):
            raise UsageError(f"--topic {arg!r}: partitions are >= 0")
        out.append((topic, numbers))
    return out


def _topic_partitions(admin: Admin, topics: list[str], hint: str = "") -> list[TopicPartition]:
    """The partitions ``--topic`` arguments name, checked against the topics' metadata."""
    from pylog.client import TopicPartition

    out: list[TopicPartition] = []
    for topic, numbers in _parse_topic_args(topics):
        try:
            desc = admin.describe_topics([topic])[topic]
        except errors.UnknownTopicOrPartitionError:
            raise CommandError(f"topic {topic!r} does not exist (`pylog topics list` shows the "
                               f"topics){hint}") from None
        have = [p.partition for p in desc.partitions]
        if numbers is None:
            out += [TopicPartition(topic, p) for p in have]
            continue
        missing = sorted(set(numbers) - set(have))
        if missing:
            raise CommandError(f"topic {topic!r} has no partition {', '.join(map(str, missing))} "
                               f"(it has {len(have)}: 0-{len(have) - 1})")
        out += [TopicPartition(topic, n) for n in numbers]
    return list(dict.fromkeys(out))


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 local date-time, UTC unless it carries
    a zone, as Kafka's ``Utils.getDateTime`` reads ``--to-datetime``."""
    if "T" not in text:
        raise UsageError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss "
                         f"(optionally with a zone: Z, +02:00)")
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss "
                         f"(optionally with a zone: Z, +02:00)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp() * 1000)


def parse_duration(text: str) -> int:
    """Milliseconds of an ISO-8601 duration ``PnDTnHnMn.nS``, as Java's ``Duration.parse``
    reads ``--by-duration``."""
    try:
        return parse_duration_ms(text)
    except ValueError:
        raise UsageError(f"--by-duration {text!r}: expected an ISO-8601 duration PnDTnHnMnS, "
                         f"e.g. PT30M, P1DT2H, PT0.5S") from None


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr)


def _clamped(admin: Admin, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Offsets moved into each partition's [log start, log end], with a warning, as
    ConsumerGroupCommand's checkOffsetsRange does."""
    starts = admin.list_offsets({tp: "earliest" for tp in wanted})
    ends = admin.list_offsets({tp: "latest" for tp in wanted})
    out = {}
    for tp, offset in wanted.items():
        start, end = starts[tp][0], ends[tp][0]
        if offset > end:
            _warn(f"new offset ({offset}) is higher than the latest offset of {tp.topic}-"
                  f"{tp.partition}; it is set to {end}")
            offset = end
        elif offset < start:
            _warn(f"new offset ({offset}) is lower than the earliest offset of {tp.topic}-"
                  f"{tp.partition}; it is set to {start}")
            offset = start
        out[tp] = offset
    return out


def _by_time(admin: Admin, tps: list[TopicPartition], ms: int) -> dict[TopicPartition, int]:
    found = admin.list_offsets({tp: max(0, ms) for tp in tps})
    out = {}
    late = [tp for tp in tps if found[tp][0] < 0]
    ends = admin.list_offsets({tp: "latest" for tp in late}) if late else {}
    for tp in tps:
        if found[tp][0] >= 0:
            out[tp] = found[tp][0]
        else:
            _warn(f"partition {tp.partition} of topic {tp.topic} has no record at or after "
                  f"that time; using its latest offset")
            out[tp] = ends[tp][0]
    return out


def _new_offsets(admin: Admin, args: argparse.Namespace, group: str,
                 tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    if args.to_earliest or args.to_latest:
        found = admin.list_offsets({tp: "earliest" if args.to_earliest else "latest"
                                    for tp in tps})
        return {tp: found[tp][0] for tp in tps}
    if args.to_offset is not None:
        return _clamped(admin, {tp: args.to_offset for tp in tps})
    if args.shift_by is not None:
        committed = admin.list_group_offsets(group, tps)
        missing = [tp for tp in tps if committed.get(tp) is None]
        if missing:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
            raise CommandError(f"cannot shift the offsets of {names}: the group has no "
                               f"committed offset there (use --to-earliest, --to-latest or "
                               f"--to-offset for them)")
        return _clamped(admin, {tp: committed[tp].offset + args.shift_by  # type: ignore[union-attr]
                                for tp in tps})
    if args.to_datetime is not None:
        return _by_time(admin, tps, parse_datetime(args.to_datetime))
    return _by_time(admin, tps, int(time.time() * 1000) - parse_duration(args.by_duration))


def groups_reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    group = args.group
    desc = admin.describe_groups([group])[group]
    if desc.group_type == "share":
        from pylog.cli import share_groups

        return share_groups.reset_offsets(admin, args, desc)
    if desc.state not in ("Empty", "Dead"):
        raise CommandError(
            f"assignments can only be reset if the group {group!r} is inactive, but the "
            f"current state is {desc.state} ({_count(len(desc.members), 'member')}): stop its "
            f"consumers first (`pylog groups describe {group} --members` lists them)")
    if args.all_topics:
        tps = sorted(admin.list_group_offsets(group))
        if not tps:
            raise CommandError(f"group {group!r} has no committed offsets; name the topics "
                               f"with --topic")
    else:
        tps = _topic_partitions(admin, args.topic)
    plan = _new_offsets(admin, args, group, tps)
    _table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
           [[group, tp.topic, tp.partition, plan[tp]] for tp in sorted(plan)], [30, 30, 10, 0])
    if not args.execute:
        print("Dry run: nothing was changed; run again with --execute to commit these offsets.",
              file=sys.stderr)
        return 0
    try:
        admin.alter_group_offsets(group, plan)
    except errors.NonEmptyGroupError:
        raise CommandError(f"group {group!r} got members while the offsets were computed; "
                           f"stop its consumers first, then run again") from None
    print(f"Offsets of group {group!r} were reset.", file=sys.stderr)
    return 0


# --- delete, delete-offsets -------------------------------------------------------------------


def _advice(exc: errors.ApiError, group: str) -> str:
    if isinstance(exc, errors.NonEmptyGroupError):
        return (f"group {group!r} has active members (NON_EMPTY_GROUP): stop its consumers "
                f"first (`pylog groups describe {group} --members` lists them)")
    if isinstance(exc, errors.GroupIdNotFoundError):
        return (f"group {group!r} does not exist (GROUP_ID_NOT_FOUND); `pylog groups list` "
                f"shows the groups")
    if isinstance(exc, errors.GroupSubscribedToTopicError):
        return ("a member of the group consumes this topic (GROUP_SUBSCRIBED_TO_TOPIC): stop "
                "the consumers or unsubscribe them from it first")
    return str(exc)


def groups_delete(admin: Admin, args: argparse.Namespace) -> int:
    results = admin.delete_groups(args.groups)
    deleted = [g for g, err in results.items() if err is None]
    failed = {g: err for g, err in results.items() if err is not None}
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    for g, err in failed.items():
        print(f"pylog groups delete: {_advice(err, g)}", file=sys.stderr)
    return 1 if failed else 0


def groups_delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    group = args.group
    desc = admin.describe_groups([group])[group]
    if desc.group_type == "share":
        from pylog.cli import share_groups

        return share_groups.delete_offsets(admin, args, desc)
    tps = _topic_partitions(admin, args.topic, (
        "; the broker keeps no partition to delete offsets of: a deleted topic's offsets "
        f"expire (offsets.retention.minutes) or go with `pylog groups delete {group}`"))
    try:
        results = admin.delete_group_offsets(group, tps)
    except (errors.GroupIdNotFoundError, errors.NonEmptyGroupError) as exc:
        raise CommandError(_advice(exc, group)) from None
    _table(["TOPIC", "PARTITION", "STATUS"],
           [[tp.topic, tp.partition, "Successful" if err is None else f"Error: {_advice(err, group)}"]
            for tp, err in sorted(results.items())], [30, 15, 0])
    return 1 if any(err is not None for err in results.values()) else 0


_ACTIONS: dict[str, Callable[[Admin, argparse.Namespace], int]] = {
    "list": groups_list,
    "describe": groups_describe,
    "reset-offsets": groups_reset_offsets,
    "delete": groups_delete,
    "delete-offsets": groups_delete_offsets,
}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
