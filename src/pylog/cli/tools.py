"""`pylog topics|produce|consume`: command-line tools on pylog's own client.

``topics`` runs on ``pylog.client.Admin``, ``produce`` on ``Producer`` and ``consume`` on
``Consumer``, so they work against any Kafka-compatible broker (``-b HOST:PORT``) and
share the client's version negotiation, retries and partitioning (murmur2 for keys, as
Kafka's Java client). Exit codes and error lines: ``pylog.cli._common``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from pylog import errors
from pylog.cli import _format
from pylog.cli._common import CliError, base_settings, parse_properties, run_command
from pylog.client import (
    Admin,
    ConfigResource,
    Consumer,
    NewTopic,
    Producer,
    RecordMetadata,
    TopicPartition,
)

# How long a consumer in a group waits between commits (Kafka's auto.commit.interval.ms).
AUTO_COMMIT_INTERVAL = 5.0


def run(args: argparse.Namespace) -> int:
    if args.command == "topics":
        return run_command("topics", _TOPICS[args.topics_command], args)
    if args.command == "produce":
        return run_command("produce", produce, args)
    if args.command == "consume":
        return run_command("consume", consume, args)
    raise AssertionError(args.command)


def admin_for(args: argparse.Namespace) -> Admin:
    settings = base_settings(args)
    settings["default.api.timeout.ms"] = settings["request.timeout.ms"]
    return Admin(settings)


# --- topics ---------------------------------------------------------------------------------


def topics_create(args: argparse.Namespace) -> int:
    configs = parse_properties(args.config, "--config")
    with admin_for(args) as admin:
        try:
            admin.create_topics([NewTopic(args.topic, args.partitions, args.replication_factor,
                                          configs)])
        except errors.TopicAlreadyExistsError:
            if args.if_not_exists:
                return 0
            raise
    print(f"Created topic {args.topic}.")
    return 0


def topics_list(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        topics = admin.describe_topics(None)
    for name in sorted(topics):
        if topics[name].is_internal and not args.all:
            continue
        print(name)
    return 0


def _uuid_text(u: Any) -> str:
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


CONFIG_LABELS = {"DYNAMIC_TOPIC_CONFIG": "\t(override)", "STATIC_BROKER_CONFIG": "\t(broker config)"}


def topics_describe(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        topics = admin.describe_topics(args.topics or None)
        tps = [TopicPartition(t.name, p.partition) for t in topics.values() for p in t.partitions]
        starts = admin.list_offsets({tp: "earliest" for tp in tps}) if tps else {}
        ends = admin.list_offsets({tp: "latest" for tp in tps}) if tps else {}
        for name in sorted(topics):
            t = topics[name]
            rf = len(t.partitions[0].replicas) if t.partitions else 0
            print(f"Topic: {name}\tTopicId: {_uuid_text(t.topic_id)}\t"
                  f"PartitionCount: {len(t.partitions)}\tReplicationFactor: {rf}")
            for p in t.partitions:
                tp = TopicPartition(name, p.partition)
                print(f"\tPartition: {p.partition}\tLeader: {p.leader}\t"
                      f"Replicas: {','.join(map(str, p.replicas))}\t"
                      f"Isr: {','.join(map(str, p.isr))}\t"
                      f"StartOffset: {starts[tp][0]}\tEndOffset: {ends[tp][0]}")
            if args.configs:
                res = ConfigResource("topic", name)
                entries = admin.describe_configs([res])[res]
                for key in sorted(entries):
                    c = entries[key]
                    print(f"\t{c.name}={c.value}{CONFIG_LABELS.get(c.source, '')}")
    return 0


def topics_delete(args: argparse.Namespace) -> int:
    status = 0
    with admin_for(args) as admin:
        for name in args.topics:  # one request each: one missing topic does not hide the rest
            try:
                admin.delete_topics([name])
            except errors.ApiError as exc:
                print(f"pylog topics: {exc}", file=sys.stderr)
                status = 1
                continue
            print(f"Deleted topic {name}.")
    return status


def topics_alter_config(args: argparse.Namespace) -> int:
    changes: dict[str, str | None] = dict(parse_properties(args.set, "--set"))
    changes.update({k: None for k in args.delete})
    if not changes:
        raise CliError("nothing to change: give --set KEY=VALUE or --delete KEY")
    with admin_for(args) as admin:
        admin.alter_configs(ConfigResource("topic", args.topic), changes)
    print(f"Updated configs of topic {args.topic}.")
    return 0


_TOPICS = {
    "create": topics_create,
    "list": topics_list,
    "describe": topics_describe,
    "delete": topics_delete,
    "alter-config": topics_alter_config,
}


# --- produce ---------------------------------------------------------------------------------


def producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    settings = base_settings(args)
    settings.update({
        "client.id": "pylog-console-producer",
        "acks": str(args.acks),
        "compression.type": args.compression,
        "linger.ms": args.linger_ms,
        "max.block.ms": settings["request.timeout.ms"],
    })
    if args.batch_size is not None:
        settings["batch.size"] = args.batch_size
    settings.update(parse_properties(args.producer_property, "--producer-property"))
    return settings


def produce(args: argparse.Namespace) -> int:
    headers = list(parse_properties(args.header, "--header").items())
    hdrs = [(k, v.encode()) for k, v in headers] or None
    sep = args.key_separator.encode() if args.key_separator else None
    null = args.null_value.encode() if args.null_value is not None else None
    stream = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
    settings = producer_settings(args)
    with admin_for(args) as admin:
        admin.describe_cluster()  # a wrong -b fails now, not after max.block.ms
    failed: list[BaseException] = []
    sent = 0

    def on_delivery(err: BaseException | None, meta: RecordMetadata | None) -> None:
        if err is not None:
            failed.append(err)

    try:
        with Producer(settings) as producer:
            partitions = producer.partitions_for(args.topic)  # creates it if the broker does
            if args.partition is not None and args.partition not in partitions:
                raise CliError(f"topic {args.topic!r} has no partition {args.partition} "
                               f"(it has {len(partitions)}: 0-{len(partitions) - 1})")
            send = producer.send
            topic, partition = args.topic, args.partition
            for raw in stream:
                line = raw.rstrip(b"\r\n")
                key = None
                value: bytes | None = line
                if sep is not None:
                    k, found, v = line.partition(sep)
                    if found:
                        key, value = k, v
                if null is not None and value == null:
                    value = None
                send(topic, value, key=key, headers=hdrs, partition=partition,
                     on_delivery=on_delivery)
                sent += 1
                if failed:
                    break
            producer.flush()
    finally:
        if args.file:
            stream.close()
    if failed:
        ok = sent - len(failed)
        raise CliError(f"{len(failed)} of {sent} records were not delivered ({ok} were): "
                       f"{failed[0]}")
    print(f"Produced {sent} records to {args.topic}.", file=sys.stderr)
    return 0


# --- consume ---------------------------------------------------------------------------------


def _formatter(args: argparse.Namespace) -> _format.Formatter:
    if args.format is not None and args.json:
        raise CliError("--format and --json exclude each other: give one")
    if args.format is not None:
        return _format.template_formatter(args.format)
    if args.json:
        return _format.json_formatter()
    return _format.classic_formatter(offsets=args.offsets, timestamp=args.timestamp,
                                     headers=args.headers, key=args.key,
                                     separator=args.key_separator)


def consumer_settings(args: argparse.Namespace) -> dict[str, Any]:
    settings = base_settings(args)
    settings.update({
        "client.id": "pylog-console-consumer",
        "default.api.timeout.ms": settings["request.timeout.ms"],
        "fetch.max.wait.ms": args.max_wait_ms,
        "isolation.level": args.isolation_level,
        # Where to start without a position: --from-beginning as Kafka's console consumer;
        # an --offset past the log restarts at its start, as before.
        "auto.offset.reset": "earliest" if (args.from_beginning or args.offset is not None)
        else "latest",
    })
    if args.group is not None:
        settings["group.id"] = args.group
    settings.update(parse_properties(args.consumer_property, "--consumer-property"))
    return settings


def _start_positions(consumer: Consumer, args: argparse.Namespace,
                     tps: list[TopicPartition]) -> None:
    if args.from_beginning:
        consumer.seek_to_beginning(*tps)
    elif args.from_timestamp is not None:
        found = consumer.offsets_for_times({tp: args.from_timestamp for tp in tps})
        later = [tp for tp, hit in found.items() if hit is None]
        for tp, hit in found.items():
            if hit is not None:
                consumer.seek(tp, hit[0])
        if later:
            consumer.seek_to_end(*later)
    elif args.offset is not None:
        if args.offset >= 0:
            for tp in tps:
                consumer.seek(tp, args.offset)
        else:
            starts = consumer.beginning_offsets(tps)
            ends = consumer.end_offsets(tps)
            for tp in tps:
                consumer.seek(tp, max(starts[tp], ends[tp] + args.offset))
    elif args.group is None:
        consumer.seek_to_end(*tps)
    # In a group without a start option, the group's committed offsets (else
    # auto.offset.reset) decide, as in Kafka's console consumer.


def _tell_new_group_start(consumer: Consumer, args: argparse.Namespace) -> bool:
    """Once the group has assigned partitions: say on stderr which of them have no
    committed offset and so start at the end (auto.offset.reset=latest, as Kafka's console
    consumer), which prints nothing until new records come. True once checked."""
    tps = sorted(consumer.assignment())
    if not tps:
        return False
    if consumer_settings(args).get("auto.offset.reset") != "latest":
        return True
    committed = consumer.committed(tps)
    fresh = [tp for tp in tps if committed.get(tp) is None]
    if fresh:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in fresh)
        print(f"pylog consume: group {args.group!r} has no committed offset for {names}: "
              "reading new records only (pass --from-beginning to read from the start)",
              file=sys.stderr, flush=True)
    return True


def _at_end(consumer: Consumer) -> bool:
    """Every assigned partition is at the end its last fetch reported."""
    tps = consumer.assignment()
    if not tps:
        return False
    for tp in tps:
        hw = consumer.highwater(tp)
        if hw < 0 or consumer.position(tp) < hw:
            return False
    return True


def consume(args: argparse.Namespace) -> int:
    fmt = _formatter(args)
    subscribe = args.group is not None and not args.partition
    if subscribe and (args.offset is not None or args.from_timestamp is not None):
        raise CliError("--offset and --from-timestamp with --group need --partition (a group "
                       "starts at its committed offsets; use --from-beginning for a new group)")
    with admin_for(args) as admin:
        try:
            (topic,) = admin.describe_topics([args.topic]).values()
        except errors.UnknownTopicOrPartitionError:
            raise CliError(f"topic {args.topic!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION; "
                           f"list the topics with: pylog topics list -b {args.bootstrap_server})"
                           ) from None
    known = [p.partition for p in topic.partitions]
    wanted = args.partition or known
    missing = sorted(set(wanted) - set(known))
    if missing:
        raise CliError(f"topic {args.topic!r} has no partition "
                       f"{', '.join(map(str, missing))} (it has {len(known)}: 0-{len(known) - 1})")
    tps = [TopicPartition(args.topic, p) for p in sorted(set(wanted))]
    out = sys.stdout.buffer
    with Consumer(consumer_settings(args)) as consumer:
        if subscribe:
            consumer.subscribe([args.topic])
        else:
            consumer.assign(tps)
            _start_positions(consumer, args, tps)
        printed = 0
        told_start = False
        committed_at = time.monotonic()
        try:
            while True:
                want = None if args.max_messages is None else args.max_messages - printed
                if want is not None and want <= 0:
                    break
                # At most the records still to print: the positions then stay just past the
                # last printed record, and committing them commits what was printed.
                records = consumer.poll(1.0, max_records=min(want, 500) if want else None)
                if subscribe and not told_start:
                    told_start = _tell_new_group_start(consumer, args)
                if records:
                    out.write(b"".join(map(fmt, records)))
                    out.flush()
                    printed += len(records)
                if args.group is not None and time.monotonic() - committed_at >= AUTO_COMMIT_INTERVAL:
                    consumer.commit()
                    committed_at = time.monotonic()
                if args.exit_at_end and _at_end(consumer):
                    break
        except KeyboardInterrupt:
            if args.group is not None:
                _commit_quietly(consumer)
            raise
        if args.group is not None:
            consumer.commit()  # what was printed, as Kafka's console consumer does on exit
    return 0


def _commit_quietly(consumer: Consumer) -> None:
    try:
        consumer.commit()
    except errors.KafkaError as exc:
        print(f"pylog consume: offsets not committed: {exc}", file=sys.stderr)
