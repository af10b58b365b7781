"""The consumer's fetcher: Fetch requests per leader, fetched data turned into records or
columns.

One Fetch per broker at a time, for the assigned, unpaused partitions it leads that have a
position and at most one fetch's data waiting to be polled. Prefetching: when a fetch's
data arrives, the offset after its last whole batch is read from the batch headers at
once, and the next fetch for the partition (from there) goes out as soon as the broker has
none in flight, so that the broker's read and the network overlap the decoding and the
application's processing, as librdkafka's fetch queue does. A partition holds at most two
fetches' data (``completed``, then ``prefetched``), so memory stays bounded by twice
``max.partition.fetch.bytes`` per partition.
Incremental fetch sessions (KIP-227), one per broker (``FetchSession``): the first fetch
names every partition and asks for a session (epoch 0); the next ones name only the
partitions added or whose position moved, list those no longer fetched as forgotten, and
the broker answers only the partitions with news. A broker that makes no session (id 0)
is asked again with the next full fetch; a session the broker lost (restart, eviction:
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) or a broken connection starts a
new one, with no error for the application.

A fetch answer is kept as received (the record bytes are a slice of the response frame)
until ``poll`` or ``poll_columns`` takes it:

- ``records``: each batch is CRC-checked (``check.crcs``), control batches and — with
  ``read_committed`` — batches of aborted transactions are skipped, records below the
  position (a compressed batch is returned whole from its base offset) are dropped.
- ``columns``: the selected batches go to ``logcore.decode_columns`` in one call, with no
  Python object per record; the leading records below the position are sliced off the
  numpy columns. With ``copy_values=False`` the values of uncompressed batches are not
  copied: the columns point into the response frame's buffer and keep it alive (the
  connection's ``FrameReader`` reuses a frame buffer only once nothing refers to it).

Fetched data is dropped if the position moved (``seek``) while it was in flight.

Event-loop affinity: runs on the consumer's loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

import numpy as np

import logcore
from pylog import errors
from pylog.client._native import decode_records
from pylog.client.aio._cluster import Cluster
from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError, RecordTooLargeError
from pylog.client.records import ConsumerRecord, TopicPartition
from pylog.protocol.messages import FetchRequest

__all__ = ["Fetcher", "PartitionState", "CompletedFetch"]

log = logging.getLogger("pylog.client.consumer")

OFFSET_OUT_OF_RANGE = 1


class PartitionState:
    """An assigned partition: its position and what the last fetch said about it."""

    __slots__ = ("position", "paused", "high_watermark", "last_stable_offset",
                 "log_start_offset", "reset_to", "leader_epoch", "pending_revocation")

    def __init__(self) -> None:
        self.position: int | None = None
        self.paused = False
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.reset_to: str | None = None  # pending reset strategy
        self.leader_epoch = -1  # of the last record handed out (committed with the position)
        # Being revoked by a rebalance: no more fetching or handing out (Kafka's
        # markPendingRevocation), so the committed position is the consumed one.
        self.pending_revocation = False


class CompletedFetch:
    """One partition's fetched bytes, waiting to be polled."""

    __slots__ = ("tp", "data", "fetch_offset", "aborted", "records", "index", "next_offset")

    def __init__(self, tp: TopicPartition, data: Any, fetch_offset: int,
                 aborted: list[tuple[int, int]]) -> None:
        self.tp = tp
        self.data = data
        self.fetch_offset = fetch_offset
        self.aborted = aborted
        self.records: list[ConsumerRecord] | None = None  # decoded, handed out from index
        self.index = 0
        self.next_offset = fetch_offset


class FetchSession:
    """The client side of one broker's fetch session (Kafka's ``FetchSessionHandler``):
    the id, the epoch of the next request and the partitions the broker holds with the
    positions last sent."""

    __slots__ = ("session_id", "epoch", "partitions")

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0  # 0: the next request is full and asks for a session
        self.partitions: dict[TopicPartition, int] = {}

    def reset(self) -> None:
        self.session_id, self.epoch, self.partitions = 0, 0, {}

    def request_parts(self, wanted: dict[TopicPartition, int]
                      ) -> tuple[dict[TopicPartition, int], dict[str, list[int]]]:
        """What the next request names: (partitions to send with their positions, forgotten
        partitions by topic); every wanted partition when no session is open."""
        if self.session_id == 0:
            return dict(wanted), {}
        known = self.partitions
        send = {tp: off for tp, off in wanted.items() if known.get(tp) != off}
        forgotten: dict[str, list[int]] = {}
        for tp in known:
            if tp not in wanted:
                forgotten.setdefault(tp.topic, []).append(tp.partition)
        return send, forgotten

    def answered(self, session_id: int, wanted: dict[TopicPartition, int]) -> None:
        """The broker answered with ``session_id``: the session now holds ``wanted``."""
        if self.session_id == 0:
            self.session_id = session_id
            self.epoch = 1 if session_id else 0
        else:
            self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1
        self.partitions = dict(wanted) if self.session_id else {}


#: Top-level Fetch errors that only mean the broker no longer has this session.
_SESSION_ERRORS = (errors.FetchSessionIdNotFoundError.code,
                   errors.InvalidFetchSessionEpochError.code)


class Fetcher:
    def __init__(self, cluster: Cluster, assignment: dict[TopicPartition, PartitionState],
                 settings: dict[str, Any]) -> None:
        self.cluster = cluster
        self.assignment = assignment
        self.min_bytes: int = settings["fetch.min.bytes"]
        self.max_wait_ms: int = settings["fetch.max.wait.ms"]
        self.max_bytes: int = settings["fetch.max.bytes"]
        self.partition_max_bytes: int = settings["max.partition.fetch.bytes"]
        self.isolation_level = 1 if settings["isolation.level"] == "read_committed" else 0
        self.check_crcs: bool = settings["check.crcs"]
        self.key_deserializer = settings["key.deserializer"]
        self.value_deserializer = settings["value.deserializer"]
        self.request_timeout = settings["request.timeout.ms"] / 1000
        self.completed: collections.OrderedDict[TopicPartition, CompletedFetch] = (
            collections.OrderedDict())
        # The next fetch's data of a partition whose ``completed`` data is not all handed
        # out yet; it becomes ``completed`` when that is done (if the position still
        # follows on).
        self.prefetched: dict[TopicPartition, CompletedFetch] = {}
        self.in_flight: dict[int, asyncio.Task[None]] = {}
        self.sessions: dict[int, FetchSession] = {}  # by broker
        self.arrived = asyncio.Event()
        self.errors: list[BaseException] = []  # raised by the next poll
        # (partition, the fetch offset the broker called out of range), reset by the
        # consumer if the position is still that offset (a seek since makes it stale).
        self.out_of_range: list[tuple[TopicPartition, int]] = []

    # ------------------------------------------------------------------ sending

    def drop(self, tp: TopicPartition) -> None:
        """Forget a partition's fetched data (seek, reset, revocation, unassignment)."""
        self.completed.pop(tp, None)
        self.prefetched.pop(tp, None)

    def clear(self) -> None:
        self.completed.clear()
        self.prefetched.clear()

    def _fetch_offset(self, tp: TopicPartition, st: PartitionState) -> int | None:
        """Where the partition's next fetch starts, or None when it has enough data waiting."""
        c = self.completed.get(tp)
        if c is None:
            return st.position
        if tp in self.prefetched or c.next_offset <= c.fetch_offset:
            return None
        return c.next_offset

    def _promote(self, tp: TopicPartition, st: PartitionState) -> None:
        """The partition's completed data is all handed out: its prefetched data follows."""
        p = self.prefetched.pop(tp, None)
        if p is not None and p.fetch_offset == st.position:
            self.completed[tp] = p

    def send_fetches(self) -> None:
        """Start a fetch to every leader without one in flight that has work."""
        by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp, st in self.assignment.items():
            if st.paused or st.pending_revocation or st.position is None:
                continue
            if self.out_of_range and (tp, st.position) in self.out_of_range:
                continue  # waits for the consumer's reset
            offset = self._fetch_offset(tp, st)
            if offset is None:
                continue
            info = self.cluster.topic(tp.topic)
            p = info.partitions.get(tp.partition) if info is not None else None
            if p is None or p.leader < 0:
                self.cluster.request_update()
                continue
            if p.leader in self.in_flight:
                continue
            by_node.setdefault(p.leader, []).append((tp, offset))
        for node, parts in by_node.items():
            task = asyncio.get_running_loop().create_task(self._fetch(node, parts))
            self.in_flight[node] = task

    async def _fetch(self, node: int, parts: list[tuple[TopicPartition, int]]) -> None:
        session = self.sessions.setdefault(node, FetchSession())
        settled = False  # the session's state follows the broker's (answer read, or reset)
        try:
            R = FetchRequest
            asked = dict(parts)
            send, forgotten = session.request_parts(asked)
            topics: dict[str, list[Any]] = {}
            for tp, offset in send.items():
                topics.setdefault(tp.topic, []).append(R.FetchPartition(
                    partition=tp.partition, current_leader_epoch=-1, fetch_offset=offset,
                    last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=self.partition_max_bytes))
            req = R(replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
                    max_bytes=self.max_bytes, isolation_level=self.isolation_level,
                    session_id=session.session_id, session_epoch=session.epoch,
                    topics=[R.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                    forgotten_topics_data=[R.ForgottenTopic(topic=t, partitions=ps)
                                           for t, ps in forgotten.items()],
                    rack_id="")
            try:
                conn = await self.cluster.connection(node)
                resp = await conn.send(req, timeout=self.request_timeout + self.max_wait_ms / 1000)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.debug("fetch from broker %d failed: %s", node, exc)
                self.cluster.request_update()
                await asyncio.sleep(0.05)
                return
            if resp.error_code in _SESSION_ERRORS:
                log.debug("fetch session %d of broker %d is gone (error %d): starting a new one",
                          session.session_id, node, resp.error_code)
                return
            if resp.error_code:
                cls = errors.error_for_code(resp.error_code) or errors.UnknownServerError
                self.errors.append(cls(f"Fetch: {cls.name}"))
                return
            session.answered(resp.session_id, asked)
            settled = True
            for t in resp.responses:
                for p in t.partitions:
                    self._on_partition(TopicPartition(t.topic, p.partition_index), p, asked)
        finally:
            if not settled:
                session.reset()  # cancelled, failed or refused: the next fetch starts over
            self.in_flight.pop(node, None)
            self.arrived.set()
        if settled:
            self.send_fetches()  # prefetch: the next request goes out before the decoding

    def _on_partition(self, tp: TopicPartition, p: Any, asked: dict[TopicPartition, int]) -> None:
        st = self.assignment.get(tp)
        fetch_offset = asked.get(tp)
        if st is None or fetch_offset is None or st.position is None:
            return  # unassigned while in flight: stale
        waiting = self.completed.get(tp)
        if waiting is None:
            if st.position != fetch_offset:
                return  # seeked while in flight: stale
        elif waiting.next_offset != fetch_offset or tp in self.prefetched:
            return  # a prefetch that no longer follows on (seek, or already have one)
        if p.error_code == 0:
            st.high_watermark = p.high_watermark
            st.last_stable_offset = p.last_stable_offset
            st.log_start_offset = p.log_start_offset
            data = p.records
            if data is not None and len(data):
                aborted = sorted((a.first_offset, a.producer_id)
                                 for a in (p.aborted_transactions or ()))
                c = CompletedFetch(tp, data, fetch_offset, [(pid, off) for off, pid in aborted])
                c.next_offset = _next_offset(data, fetch_offset)
                if waiting is None:
                    self.completed[tp] = c
                else:
                    self.prefetched[tp] = c
            return
        if waiting is not None:
            return  # the error is for later offsets: met again when they are fetched
        cls = errors.error_for_code(p.error_code) or errors.UnknownServerError
        if p.error_code == OFFSET_OUT_OF_RANGE:
            if (tp, fetch_offset) not in self.out_of_range:
                self.out_of_range.append((tp, fetch_offset))
        elif cls.invalid_metadata or cls.retriable:
            self.cluster.request_update()
        else:
            self.errors.append(cls(f"{tp.topic}-{tp.partition}: {cls.name}"))

    # ------------------------------------------------------------------ handing out

    def _select(self, c: CompletedFetch) -> tuple[list[Any], int]:
        """The batches of a fetch to hand out as (batch, start, end) byte spans of the
        fetched data, and the offset after the last whole batch."""
        st = self.assignment[c.tp]
        position = st.position if st.position is not None else c.fetch_offset
        out = []
        next_offset = c.fetch_offset
        aborted = list(c.aborted)
        active: set[int] = set()
        pos = 0
        try:
            for batch in logcore.iter_batches(c.data):
                start = pos
                pos += batch.size_in_bytes
                if self.check_crcs:
                    batch.validate()
                last = batch.last_offset
                if last < position:
                    next_offset = max(next_offset, last + 1)
                    continue
                next_offset = last + 1
                if self.isolation_level == 1:
                    while aborted and aborted[0][1] <= last:
                        active.add(aborted.pop(0)[0])
                    if batch.is_control:
                        active.discard(batch.producer_id)
                        continue
                    if batch.is_transactional and batch.producer_id in active:
                        continue
                if batch.is_control:
                    continue
                out.append((batch, start, pos))
        except logcore.CorruptRecordError as exc:
            raise errors.CorruptMessageError(
                f"{c.tp.topic}-{c.tp.partition}: corrupt record batch fetched at offset "
                f"{c.fetch_offset}: {exc}") from None
        if next_offset == c.fetch_offset and len(c.data) >= self.partition_max_bytes:
            raise RecordTooLargeError(
                f"{c.tp.topic}-{c.tp.partition}: a batch at offset {c.fetch_offset} is larger "
                f"than max.partition.fetch.bytes ({self.partition_max_bytes})")
        return out, next_offset

    def take_records(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` records from fetched data; positions move past them."""
        out: list[ConsumerRecord] = []
        while self.completed and len(out) < max_records:
            tp, c = next(iter(self.completed.items()))
            st = self.assignment.get(tp)
            if st is None or st.position is None or st.paused or st.pending_revocation:
                self.drop(tp)
                continue
            if c.records is None:
                batches, c.next_offset = self._select(c)
                c.records = self._decode(tp, batches, st.position)
                c.index = 0
                c.data = None
            recs, i = c.records, c.index
            take = min(len(recs) - i, max_records - len(out))
            if take > 0:
                if not out and i == 0 and take == len(recs):
                    out = recs  # the whole fetch: no copy
                else:
                    out.extend(recs[i:i + take])
                c.index = i = i + take
                st.position = recs[i - 1].offset + 1
                st.leader_epoch = recs[i - 1].leader_epoch
            if i >= len(recs):
                st.position = max(st.position, c.next_offset)
                del self.completed[tp]
                self._promote(tp, st)
        return out

    def _decode(self, tp: TopicPartition, batches: list[Any], position: int
                ) -> list[ConsumerRecord]:
        """The records at or after ``position`` of the selected batches (the hot loop of
        ``poll``: one ``ConsumerRecord`` per record, nothing else per record)."""
        kd, vd = self.key_deserializer, self.value_deserializer
        recs: list[ConsumerRecord] = []
        topic, partition = tp.topic, tp.partition
        if kd is None and vd is None and decode_records is not None:
            decode_records(batches, topic, partition, position, recs)  # compiled: _crecords
            return recs
        append = recs.append
        for batch, _, _ in batches:
            ts_type = 1 if batch.timestamp_type == "log_append" else 0
            epoch = batch.partition_leader_epoch
            if kd is None and vd is None:
                # A Record owns its headers list (and is dropped here): no copy; and no
                # empty list for a record without headers (ConsumerRecord makes one if
                # asked).
                for r in batch:
                    offset = r.offset
                    if offset >= position:
                        append(ConsumerRecord(topic, partition, offset, r.timestamp, ts_type,
                                              r.key, r.value, r.headers_or_none, epoch))
                continue
            for r in batch:
                if r.offset < position:
                    continue
                key = r.key if kd is None else kd(r.key)
                value = r.value if vd is None else vd(r.value)
                append(ConsumerRecord(topic, partition, r.offset, r.timestamp, ts_type, key,
                                      value, r.headers_or_none, epoch))
        return recs

    def take_columns(self, copy_values: bool = True) -> dict[TopicPartition, logcore.Columns]:
        """Every fetched partition's records as ``logcore.Columns``; positions move past.
        ``copy_values=False``: values located by ``value_starts``/``value_lengths`` (in
        the fetched bytes where uncompressed), ``value_offsets`` None."""
        out: dict[TopicPartition, logcore.Columns] = {}
        # Partitions whose prefetched data follows on, made completed after the loop (one
        # fetch's columns per partition per call).
        followed: list[tuple[TopicPartition, PartitionState]] = []
        while self.completed:
            tp, c = self.completed.popitem(last=False)
            st = self.assignment.get(tp)
            if st is None or st.position is None or st.paused or st.pending_revocation:
                self.prefetched.pop(tp, None)
                continue
            if c.records is not None:  # half handed out as records: finish as columns
                recs = c.records[c.index:]
                if recs:
                    out[tp] = _columns_from_records(recs, copy_values)
                st.position = max(recs[-1].offset + 1 if recs else st.position, c.next_offset)
                followed.append((tp, st))
                continue
            batches, next_offset = self._select(c)
            position = st.position
            st.position = max(position, next_offset)
            followed.append((tp, st))
            if not batches:
                continue
            view = memoryview(c.data).cast("B")
            spans = [(a, b) for _, a, b in batches]
            if all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1)):
                buf: Any = view[spans[0][0]:spans[-1][1]]  # contiguous: no copy
            else:
                buf = b"".join(view[a:b] for a, b in spans)
            cols = logcore.decode_columns(buf, copy_values=copy_values)
            if cols.num_records and cols.offsets[0] < position:
                cols = _slice_columns(cols, int(np.searchsorted(cols.offsets, position)))
            if cols.num_records:
                out[tp] = cols
        for tp, st in followed:
            self._promote(tp, st)
        return out


def _next_offset(data: Any, fetch_offset: int) -> int:
    """The offset after the last whole batch of fetched data (``fetch_offset`` when there
    is none, or when a header is corrupt: the data is then checked when it is handed out,
    and nothing is prefetched after it)."""
    last = -1
    try:
        for batch in logcore.iter_batches(data):
            last = batch.last_offset
    except logcore.CorruptRecordError:
        return fetch_offset
    return max(fetch_offset, last + 1)


def _slice_columns(c: Any, i: int) -> Any:
    views = c.value_offsets is None  # copy_values=False: starts and lengths
    return logcore.Columns(c.offsets[i:], c.timestamps[i:], c.timestamp_types[i:],
                           c.key_offsets[i:], None if views else c.value_offsets[i:],
                           c.key_data, c.value_data, c.key_valid[i:], c.value_valid[i:],
                           c.header_counts[i:], c.value_starts[i:] if views else None,
                           c.value_lengths[i:] if views else None)


def _columns_from_records(recs: list[ConsumerRecord], copy_values: bool = True) -> Any:
    keys = [r.key if isinstance(r.key, (bytes, type(None))) else bytes(r.key) for r in recs]
    values = [r.value if isinstance(r.value, (bytes, type(None))) else bytes(r.value)
              for r in recs]

    def pack(items: list[bytes | None]) -> tuple[Any, Any, Any]:
        lens = np.array([len(x) if x is not None else 0 for x in items], dtype=np.int32)
        offs = np.zeros(len(items) + 1, dtype=np.int32)
        np.cumsum(lens, out=offs[1:])
        data = np.frombuffer(b"".join(x for x in items if x is not None), dtype=np.uint8)
        valid = np.array([x is not None for x in items], dtype=np.bool_)
        return offs, data, valid

    ko, kdata, kv = pack(keys)
    vo, vdata, vv = pack(values)
    starts = lengths = None
    if not copy_values:  # the same layout as decode_columns(copy_values=False) gives
        starts, lengths, vo = vo[:-1].astype(np.int64), np.diff(vo), None
    return logcore.Columns(
        np.array([r.offset for r in recs], dtype=np.int64),
        np.array([r.timestamp for r in recs], dtype=np.int64),
        np.array([r.timestamp_type for r in recs], dtype=np.int8), ko, vo, kdata, vdata, kv, vv,
        np.array([len(r.headers) for r in recs], dtype=np.int32), starts, lengths)
