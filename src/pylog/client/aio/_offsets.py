"""ListOffsets for the consumer and the admin: earliest, latest, or by timestamp.

``timestamp`` -2 asks for the log start offset (earliest), -1 for the end (latest: the
high watermark, or the last stable offset with ``read_committed``), anything else for the
first offset whose timestamp is at least that many ms (KIP-79). Requests go to each
partition's leader, one request per leader.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pylog import errors
from pylog.client.aio._cluster import Cluster
from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError
from pylog.client.records import TopicPartition
from pylog.protocol.messages import ListOffsetsRequest

__all__ = ["EARLIEST", "LATEST", "list_offsets"]

EARLIEST = -2
LATEST = -1


async def list_offsets(cluster: Cluster, wanted: dict[TopicPartition, int], *,
                       isolation_level: int = 0, timeout: float = 60.0,
                       backoff: float = 0.1) -> dict[TopicPartition, tuple[int, int]]:
    """``{tp: (offset, timestamp)}`` for ``{tp: timestamp}``; offset -1 when no record
    matches a timestamp.

    Retries stale-metadata errors and lost connections until ``timeout``.

    Raises:
        KafkaTimeoutError: not every partition answered in time.
        ApiError: a non-retriable error for a partition (e.g. UNKNOWN_TOPIC_OR_PARTITION
            after the topic's metadata says it does not exist).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    out: dict[TopicPartition, tuple[int, int]] = {}
    todo = dict(wanted)
    last: BaseException | None = None
    while todo:
        if loop.time() >= deadline:
            raise KafkaTimeoutError(f"ListOffsets for {sorted(todo)} did not complete in "
                                    f"{timeout:g} s" + (f" (last error: {last})" if last else ""))
        topics = {tp.topic for tp in todo}
        missing = [t for t in topics if cluster.topic(t) is None]
        if missing or cluster.needs_update():
            try:
                await cluster.update(set(topics))
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
                await asyncio.sleep(backoff)
                continue
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in todo:
            info = cluster.topic(tp.topic)
            if info is None:
                known = cluster.topics.get(tp.topic)
                code = known.error_code if known is not None else 3
                cls = errors.error_for_code(code) or errors.UnknownTopicOrPartitionError
                if not cls.retriable or code == 3:
                    raise cls(f"{tp.topic}: {cls.name}")
                continue
            p = info.partitions.get(tp.partition)
            if p is None:
                raise errors.UnknownTopicOrPartitionError(
                    f"{tp.topic} has no partition {tp.partition}")
            if p.leader >= 0:
                by_leader.setdefault(p.leader, []).append(tp)
        if not by_leader:
            cluster.request_update()
            await asyncio.sleep(backoff)
            continue
        results = await asyncio.gather(*(
            _ask(cluster, node, {tp: todo[tp] for tp in tps}, isolation_level)
            for node, tps in by_leader.items()), return_exceptions=True)
        retry = False
        for res in results:
            if isinstance(res, (KafkaConnectionError, KafkaTimeoutError)):
                last = res
                retry = True
                cluster.request_update()
                continue
            if isinstance(res, BaseException):
                raise res
            for tp, (code, offset, ts) in res.items():
                if code == 0:
                    out[tp] = (offset, ts)
                    todo.pop(tp, None)
                    continue
                cls = errors.error_for_code(code) or errors.UnknownServerError
                if not cls.retriable:
                    raise cls(f"{tp.topic}-{tp.partition}: {cls.name}")
                last = cls(f"{tp.topic}-{tp.partition}: {cls.name}")
                retry = True
                if cls.invalid_metadata:
                    cluster.request_update()
        if retry and todo:
            await asyncio.sleep(backoff)
    return out


async def _ask(cluster: Cluster, node: int, wanted: dict[TopicPartition, int],
               isolation_level: int) -> dict[TopicPartition, tuple[int, int, int]]:
    conn = await cluster.connection(node)
    R = ListOffsetsRequest
    by_topic: dict[str, list[Any]] = {}
    for tp, ts in wanted.items():
        by_topic.setdefault(tp.topic, []).append(R.ListOffsetsPartition(
            partition_index=tp.partition, current_leader_epoch=-1, timestamp=ts))
    req = R(replica_id=-1, isolation_level=isolation_level,
            topics=[R.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
    resp = await conn.send(req)
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            out[TopicPartition(t.name, p.partition_index)] = (p.error_code, p.offset, p.timestamp)
    return out
