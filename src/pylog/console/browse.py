"""The message browser and the produce form, over ``pylog.client.aio`` Consumer and Producer.

A browse reads one partition (or every partition of the topic) from a starting point:
``newest`` N records, an ``offset``, or the first record at or after a ``timestamp``
(ListOffsets by time). It assigns the partitions to the console's one consumer (no group:
nothing is committed, no group is joined), seeks, and polls until it has ``limit`` records
that pass the filter, reached the end offsets it saw when it started, scanned
``MAX_SCANNED`` records, or spent ``max_wait`` seconds. Browses take turns on a lock: the
consumer has one assignment at a time.

Event-loop affinity: one ``Browser`` belongs to the console's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pylog._clock import Clock
from pylog.client import ConsumerRecord, TopicPartition
from pylog.client.aio import Consumer, Producer
from pylog.console.data import ClusterData
from pylog.console.formatting import PREVIEW_CHARS, as_json_value, searchable, show

__all__ = ["Browser", "BrowseRequest", "record_view", "record_json", "MAX_LIMIT", "MAX_SCANNED"]

MAX_LIMIT = 1000
MAX_SCANNED = 20_000
MODES = ("newest", "offset", "timestamp")


class BrowseRequest:
    """What to read. ``partition`` None means every partition of the topic."""

    def __init__(self, topic: str, partition: int | None = None, mode: str = "newest",
                 offset: int = 0, timestamp_ms: int = 0, limit: int = 50,
                 filter_text: str = "") -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit {limit}: expected 1 to {MAX_LIMIT}")
        self.topic = topic
        self.partition = partition
        self.mode = mode
        self.offset = offset
        self.timestamp_ms = timestamp_ms
        self.limit = limit
        self.filter_text = filter_text


def _matches(r: ConsumerRecord, needle: str) -> bool:
    if not needle:
        return True
    if needle in searchable(r.key) or needle in searchable(r.value):
        return True
    return any(needle in name or needle in searchable(v) for name, v in r.headers)


def record_view(r: ConsumerRecord, fmt: str, full: bool = False) -> dict[str, Any]:
    """A record as the templates show it (strings only; escaping is the template's)."""
    key, value = show(r.key, fmt), show(r.value, fmt)
    value_text = value.text
    cut = not full and len(value_text) > PREVIEW_CHARS
    return {"topic": r.topic, "partition": r.partition, "offset": r.offset,
            "timestamp": r.timestamp,
            "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
            "key": key.text, "key_format": key.format, "key_note": key.note,
            "value": value_text[:PREVIEW_CHARS] + "…" if cut else value_text,
            "value_format": value.format, "value_note": value.note, "value_cut": cut,
            "key_size": -1 if r.key is None else len(r.key),
            "value_size": -1 if r.value is None else len(r.value),
            "headers": [{"name": n, "value": show(v, "auto" if fmt == "json" else fmt).text,
                         "null": v is None} for n, v in r.headers]}


def record_json(r: ConsumerRecord) -> dict[str, Any]:
    """A record as a JSON object (downloads): bytes as UTF-8 text or base64."""
    return {"topic": r.topic, "partition": r.partition, "offset": r.offset,
            "timestamp": r.timestamp, "timestamp_type": r.timestamp_type,
            "key": as_json_value(r.key), "value": as_json_value(r.value),
            "headers": [[n, as_json_value(v)] for n, v in r.headers]}


class Browser:
    """Reads records for the browser and writes the produce form's records."""

    def __init__(self, consumer_settings: Mapping[str, Any],
                 producer_settings: Mapping[str, Any], data: ClusterData, clock: Clock) -> None:
        self.consumer_settings = dict(consumer_settings)
        self.producer_settings = dict(producer_settings)
        self.data = data
        self.admin = data.admin
        self.clock = clock
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._lock = asyncio.Lock()

    async def _partitions(self, req: BrowseRequest) -> list[TopicPartition]:
        desc = (await self.data.topics()).get(req.topic)
        if desc is None:  # newer than the metadata the console holds, or no such topic
            desc = (await self.admin.describe_topics([req.topic]))[req.topic]
        known = [TopicPartition(req.topic, p.partition) for p in desc.partitions]
        if req.partition is None:
            return known
        tp = TopicPartition(req.topic, req.partition)
        if tp not in known:
            raise ValueError(f"topic {req.topic!r} has no partition {req.partition} "
                             f"(it has {len(known)})")
        return [tp]

    async def _starts(self, req: BrowseRequest, tps: list[TopicPartition],
                      first: dict[TopicPartition, int], ends: dict[TopicPartition, int]
                      ) -> dict[TopicPartition, int]:
        if req.mode == "newest":
            # Across partitions, the newest N are looked for among the newest N/P of each
            # partition that has records (all N with a filter, which may skip many): a topic
            # of 1,000 partitions is not read 50 records deep in each.
            with_data = sum(1 for tp in tps if ends[tp] > first[tp])
            per = (req.limit if req.filter_text or with_data <= 1
                   else -(-req.limit // with_data))
            return {tp: max(first[tp], ends[tp] - per) for tp in tps}
        if req.mode == "offset":
            return {tp: min(max(req.offset, first[tp]), ends[tp]) for tp in tps}
        found = await self.admin.list_offsets(dict.fromkeys(tps, max(req.timestamp_ms, 0)))
        return {tp: (o if o >= 0 else ends[tp]) for tp, (o, _) in found.items()}

    async def browse(self, req: BrowseRequest, max_wait: float = 3.0) -> dict[str, Any]:
        """Records and what was scanned: ``{"records": [ConsumerRecord], "scanned",
        "starts", "ends", "first", "complete"}``.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
            ValueError: no such partition.
        """
        tps = await self._partitions(req)
        first, ends = await self.data.offsets(tps)
        starts = await self._starts(req, tps, first, ends)
        pending = {tp for tp in tps if starts[tp] < ends[tp]}
        found: list[ConsumerRecord] = []
        scanned = 0
        async with self._lock:
            consumer = await self._get_consumer()
            await consumer.assign(sorted(pending))
            for tp in pending:
                consumer.seek(tp, starts[tp])
            deadline = self.clock.monotonic() + max_wait
            while pending and scanned < MAX_SCANNED and self.clock.monotonic() < deadline:
                if req.mode != "newest" and len(found) >= req.limit:
                    break
                batch = await consumer.poll(timeout=0.5, max_records=500)
                for r in batch:
                    tp = TopicPartition(r.topic, r.partition)
                    if tp not in pending or r.offset >= ends[tp]:
                        continue
                    scanned += 1
                    if r.offset >= ends[tp] - 1:
                        pending.discard(tp)
                    if _matches(r, req.filter_text):
                        found.append(r)
                for tp in list(pending):  # transaction markers may end a partition early
                    if (await consumer.position(tp)) >= ends[tp]:
                        pending.discard(tp)
                if pending:
                    consumer.pause(*[tp for tp in consumer.assignment() if tp not in pending])
            await consumer.assign([])
        if req.mode == "newest":
            found.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
            found = found[-req.limit:]
        else:
            found.sort(key=lambda r: (r.partition, r.offset))
            if req.partition is None:
                found.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
            found = found[:req.limit]
        return {"records": found, "scanned": scanned, "complete": not pending,
                "partitions": [{"partition": tp.partition, "start": first[tp],
                                "from": starts[tp], "end": ends[tp]} for tp in tps]}

    async def record(self, topic: str, partition: int, offset: int) -> ConsumerRecord | None:
        """The record at ``offset`` (None when there is none: deleted, compacted, a
        transaction marker, or past the end)."""
        req = BrowseRequest(topic, partition, "offset", offset=offset, limit=1)
        result = await self.browse(req)
        for r in result["records"]:
            if r.offset == offset:
                return r  # type: ignore[no-any-return]
        return None

    async def produce(self, topic: str, value: bytes | None, key: bytes | None,
                      headers: list[tuple[str, bytes]], partition: int | None) -> Any:
        """Send one record and wait for its metadata (offset, partition, timestamp)."""
        producer = await self._get_producer()
        return await producer.send_and_wait(topic, value, key=key, headers=headers or None,
                                            partition=partition)

    async def _get_consumer(self) -> Consumer:
        if self._consumer is None:
            # fetch.max.wait.ms 5: a browse stops at the end offsets it saw, but the consumer
            # keeps one fetch in flight; parked at a log end, that fetch would make the next
            # browse wait out the broker's wait (100 ms at 100). 5 ms keeps a browse of one
            # partition near 10 ms (benchmarks/console_pages.py).
            self._consumer = Consumer({**self.consumer_settings, "enable.auto.commit": False,
                                       "auto.offset.reset": "earliest",
                                       "fetch.max.wait.ms": 5})
        return self._consumer

    async def _get_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({**self.producer_settings, "linger.ms": 0})
        return self._producer

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.close()
        if self._producer is not None:
            await self._producer.close()
