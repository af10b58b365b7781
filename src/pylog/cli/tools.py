"""`pylog topics|produce|consume`: tools that speak the Kafka protocol over TCP."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import logcore
from pylog.cli._kafka import ClientError, Cluster, check, partition_for_key
from pylog.protocol.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    FetchRequest,
    IncrementalAlterConfigsRequest,
    ListOffsetsRequest,
    ProduceRequest,
)

RESOURCE_TOPIC = 2


def run(args: argparse.Namespace) -> int:
    try:
        with Cluster(args.bootstrap_server, args.timeout) as cluster:
            if args.command == "topics":
                return _TOPICS[args.topics_command](cluster, args)
            if args.command == "produce":
                return produce(cluster, args)
            if args.command == "consume":
                return consume(cluster, args)
    except ClientError as exc:
        print(f"pylog {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    raise AssertionError(args.command)


def _kv(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ClientError(f"{what} {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


# --- topics ---------------------------------------------------------------------------------


def topics_create(cluster: Cluster, args: argparse.Namespace) -> int:
    R = CreateTopicsRequest
    req = R(
        topics=[R.CreatableTopic(
            name=args.topic, num_partitions=args.partitions, replication_factor=args.replication_factor,
            assignments=[], configs=[R.CreatableTopicConfig(name=k, value=v)
                                     for k, v in _kv(args.config, "--config").items()],
        )],
        timeout_ms=int(args.timeout * 1000), validate_only=False,
    )
    version = cluster.bootstrap.version_for(req)
    if version < 4 and (args.partitions == -1 or args.replication_factor == -1):
        # Before KIP-464 the broker defaults cannot be asked for.
        req.topics[0].num_partitions = 1 if args.partitions == -1 else args.partitions
        req.topics[0].replication_factor = 1 if args.replication_factor == -1 else args.replication_factor
    resp = cluster.bootstrap.request(req, version)
    res = resp.topics[0]
    if res.error_code == 36 and args.if_not_exists:
        return 0
    check(res.error_code, f"create {args.topic}", res.error_message)
    print(f"Created topic {args.topic}.")
    return 0


def topics_list(cluster: Cluster, args: argparse.Namespace) -> int:
    resp = cluster.metadata(None)
    for t in sorted(resp.topics, key=lambda t: t.name or ""):
        if t.is_internal and not args.all:
            continue
        print(t.name)
    return 0


def _offsets(cluster: Cluster, topic: str, partitions: list[Any], timestamp: int) -> dict[int, int]:
    """{partition: offset} for a ListOffsets timestamp (-1 latest, -2 earliest, or a time)."""
    out: dict[int, int] = {}
    by_leader: dict[int, list[int]] = {}
    for p in partitions:
        by_leader.setdefault(p.leader_id, []).append(p.partition_index)
    R = ListOffsetsRequest
    for leader, indexes in by_leader.items():
        req = R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
            name=topic, partitions=[R.ListOffsetsPartition(partition_index=i, timestamp=timestamp,
                                                           current_leader_epoch=-1) for i in indexes])])
        conn = cluster.leader_connection(leader)
        resp = conn.request(req, max(conn.version_for(req), 1))
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, f"list offsets of {topic}-{p.partition_index}")
                out[p.partition_index] = p.offset
    return out


def topics_describe(cluster: Cluster, args: argparse.Namespace) -> int:
    resp = cluster.metadata(args.topics or None)
    for t in sorted(resp.topics, key=lambda t: t.name or ""):
        check(t.error_code, f"describe {t.name}")
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        starts = _offsets(cluster, t.name, parts, -2)
        ends = _offsets(cluster, t.name, parts, -1)
        print(f"Topic: {t.name}\tTopicId: {_uuid_text(t.topic_id)}\tPartitionCount: {len(parts)}\t"
              f"ReplicationFactor: {len(parts[0].replica_nodes) if parts else 0}")
        for p in parts:
            print(f"\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                  f"Replicas: {','.join(map(str, p.replica_nodes))}\tIsr: {','.join(map(str, p.isr_nodes))}\t"
                  f"StartOffset: {starts.get(p.partition_index)}\tEndOffset: {ends.get(p.partition_index)}")
        if args.configs:
            R = DescribeConfigsRequest
            dc = cluster.bootstrap.request(R(resources=[R.DescribeConfigsResource(
                resource_type=RESOURCE_TOPIC, resource_name=t.name, configuration_keys=None)],
                include_synonyms=False, include_documentation=False))
            for res in dc.results:
                check(res.error_code, f"describe configs of {t.name}", res.error_message)
                for c in sorted(res.configs, key=lambda c: c.name):
                    label = {1: "\t(override)", 4: "\t(broker config)"}.get(c.config_source, "")
                    print(f"\t{c.name}={c.value}{label}")
    return 0


def _uuid_text(u: Any) -> str:
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def topics_delete(cluster: Cluster, args: argparse.Namespace) -> int:
    R = DeleteTopicsRequest
    req = R(topic_names=list(args.topics),
            topics=[R.DeleteTopicState(name=n) for n in args.topics],
            timeout_ms=int(args.timeout * 1000))
    resp = cluster.bootstrap.request(req)
    status = 0
    for r in resp.responses:
        try:
            check(r.error_code, f"delete {r.name}", r.error_message)
            print(f"Deleted topic {r.name}.")
        except ClientError as exc:
            print(f"pylog topics: {exc}", file=sys.stderr)
            status = 1
    return status


def topics_alter_config(cluster: Cluster, args: argparse.Namespace) -> int:
    R = IncrementalAlterConfigsRequest
    configs = [R.AlterableConfig(name=k, config_operation=0, value=v)
               for k, v in _kv(args.set, "--set").items()]
    configs += [R.AlterableConfig(name=k, config_operation=1, value=None) for k in args.delete]
    if not configs:
        raise ClientError("nothing to change: give --set KEY=VALUE or --delete KEY")
    resp = cluster.bootstrap.request(R(resources=[R.AlterConfigsResource(
        resource_type=RESOURCE_TOPIC, resource_name=args.topic, configs=configs)], validate_only=False))
    for r in resp.responses:
        check(r.error_code, f"alter configs of {args.topic}", r.error_message)
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


def _topic_partitions(cluster: Cluster, topic: str, auto_create: bool) -> list[Any]:
    for _ in range(10):
        md = cluster.metadata([topic], auto_create=auto_create)
        t = md.topics[0]
        if t.error_code in (5,):  # LEADER_NOT_AVAILABLE while a new topic settles
            time.sleep(0.2)
            continue
        check(t.error_code, f"topic {topic}")
        return sorted(t.partitions, key=lambda p: p.partition_index)
    raise ClientError(f"topic {topic}: no leader")


def produce(cluster: Cluster, args: argparse.Namespace) -> int:
    partitions = _topic_partitions(cluster, args.topic, auto_create=True)
    headers = [(k, v.encode()) for k, v in _kv(args.header, "--header").items()]
    stream = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
    sep = args.key_separator.encode() if args.key_separator else None
    null = args.null_value.encode() if args.null_value is not None else None
    pending: dict[int, logcore.BatchBuilder] = {}
    counts: dict[int, int] = {}
    sent = 0
    rr = 0
    try:
        for raw in stream:
            line = raw.rstrip(b"\r\n")
            key = None
            if sep is not None:
                key, found, value = line.partition(sep)
                if not found:
                    key, value = None, line
            else:
                value = line
            val: bytes | None = None if null is not None and value == null else value
            if args.partition is not None:
                part = args.partition
            elif key is not None:
                part = partition_for_key(key, len(partitions))
            else:
                part = rr % len(partitions)
            b = pending.get(part)
            if b is None:
                b = pending[part] = logcore.BatchBuilder(compression=args.compression)
                counts[part] = 0
            b.append(val, key=key, timestamp_ms=int(time.time() * 1000), headers=headers or None)
            counts[part] += 1
            if counts[part] >= args.batch_size:
                sent += _send(cluster, args, partitions, part, pending.pop(part))
                if key is None and args.partition is None:
                    rr += 1  # sticky partitioning: move on after a full batch
        for part, b in list(pending.items()):
            sent += _send(cluster, args, partitions, part, b)
    finally:
        if args.file:
            stream.close()
    print(f"Produced {sent} records to {args.topic}.", file=sys.stderr)
    return 0


def _send(cluster: Cluster, args: argparse.Namespace, partitions: list[Any], part: int,
          builder: logcore.BatchBuilder) -> int:
    if not 0 <= part < len(partitions):
        raise ClientError(f"{args.topic} has no partition {part}")
    data = builder.build()
    n = logcore.RecordBatch(data).records_count
    R = ProduceRequest
    req = R(transactional_id=None, acks=args.acks, timeout_ms=int(args.timeout * 1000),
            topic_data=[R.TopicProduceData(name=args.topic, partition_data=[
                R.PartitionProduceData(index=part, records=data)])])
    conn = cluster.leader_connection(partitions[part].leader_id)
    version = conn.version_for(req)
    if version < 3:
        raise ClientError(f"{conn.address} does not accept record batch v2 (Produce v3+)")
    resp = conn.request(req, version, expect_response=args.acks != 0)
    if resp is not None:
        for t in resp.responses:
            for p in t.partition_responses:
                check(p.error_code, f"produce to {args.topic}-{p.index}", p.error_message)
    return n


# --- consume ---------------------------------------------------------------------------------


def consume(cluster: Cluster, args: argparse.Namespace) -> int:
    partitions = _topic_partitions(cluster, args.topic, auto_create=False)
    if args.partition:
        wanted = set(args.partition)
        missing = wanted - {p.partition_index for p in partitions}
        if missing:
            raise ClientError(f"{args.topic} has no partition {sorted(missing)}")
        partitions = [p for p in partitions if p.partition_index in wanted]
    if args.from_beginning:
        positions = _offsets(cluster, args.topic, partitions, -2)
    elif args.from_timestamp is not None:
        positions = _offsets(cluster, args.topic, partitions, args.from_timestamp)
        ends = _offsets(cluster, args.topic, partitions, -1)
        positions = {p: (o if o >= 0 else ends[p]) for p, o in positions.items()}
    elif args.offset is not None:
        if args.offset >= 0:
            positions = {p.partition_index: args.offset for p in partitions}
        else:
            ends = _offsets(cluster, args.topic, partitions, -1)
            starts = _offsets(cluster, args.topic, partitions, -2)
            positions = {p: max(starts[p], e + args.offset) for p, e in ends.items()}
    else:
        positions = _offsets(cluster, args.topic, partitions, -1)
    leaders = {p.partition_index: p.leader_id for p in partitions}
    out = sys.stdout.buffer
    printed = 0
    at_end: set[int] = set()
    R = FetchRequest
    while True:
        by_leader: dict[int, list[int]] = {}
        for p in positions:
            by_leader.setdefault(leaders[p], []).append(p)
        for leader, parts in by_leader.items():
            req = R(replica_id=-1, max_wait_ms=args.max_wait_ms, min_bytes=1, max_bytes=50 << 20,
                    isolation_level=0, session_id=0, session_epoch=-1,
                    topics=[R.FetchTopic(topic=args.topic, partitions=[
                        R.FetchPartition(partition=p, fetch_offset=positions[p], partition_max_bytes=1 << 20,
                                         log_start_offset=-1, current_leader_epoch=-1)
                        for p in parts])],
                    forgotten_topics_data=[], rack_id="")
            conn = cluster.leader_connection(leader)
            resp = conn.request(req, max(conn.version_for(req), 4))
            check(resp.error_code, "fetch")
            for t in resp.responses:
                for pd in t.partitions:
                    p = pd.partition_index
                    if pd.error_code == 1:  # OFFSET_OUT_OF_RANGE: restart at the start
                        positions[p] = _offsets(cluster, args.topic, [x for x in partitions
                                                                     if x.partition_index == p], -2)[p]
                        continue
                    check(pd.error_code, f"fetch {args.topic}-{p}")
                    records = pd.records
                    if records:
                        for batch in logcore.iter_batches(bytes(records)):
                            if batch.is_control:
                                positions[p] = max(positions[p], batch.last_offset + 1)
                                continue
                            for rec in batch:
                                if rec.offset < positions[p]:
                                    continue
                                out.write(_format(args, p, rec, batch))
                                positions[p] = rec.offset + 1
                                printed += 1
                                if args.max_messages is not None and printed >= args.max_messages:
                                    out.flush()
                                    return 0
                            positions[p] = max(positions[p], batch.last_offset + 1)
                        out.flush()
                    if positions[p] >= pd.high_watermark:
                        at_end.add(p)
                    else:
                        at_end.discard(p)
        if args.exit_at_end and at_end >= set(positions):
            return 0


def _format(args: argparse.Namespace, partition: int, rec: Any, batch: Any) -> bytes:
    parts: list[bytes] = []
    if args.offsets:
        parts.append(f"{partition}:{rec.offset}".encode())
    if args.timestamp:
        kind = "LogAppendTime" if batch.timestamp_type == "log_append" else "CreateTime"
        parts.append(f"{kind}:{rec.timestamp}".encode())
    if args.headers:
        parts.append(b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in rec.headers))
    sep = args.key_separator.encode()
    if args.key:
        parts.append(bytes(rec.key) if rec.key is not None else b"null")
    parts.append(bytes(rec.value) if rec.value is not None else b"null")
    return sep.join(parts) + b"\n"
