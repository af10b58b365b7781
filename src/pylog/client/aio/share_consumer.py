"""The asyncio share consumer (KIP-932): ``pylog.client.aio.ShareConsumer``.

A member of a share group: several members may read the same partitions, and the brokers
hand each record to one of them at a time, locked for ``group.share.record.lock.duration.ms``
until the member acknowledges it.

- Membership: ShareGroupHeartbeat v1 to the group coordinator (FindCoordinator), every
  ``HeartbeatIntervalMs`` the broker gives; the member id is made here (a UUID); epoch 0
  joins with the subscription, -1 leaves; UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH rejoin
  with epoch 0, coordinator errors look the coordinator up again. The answer's assignment
  (topic ids) is mapped to names with the metadata.
- Records: ShareFetch (v2 where the broker has it, else v1) to the leader of each assigned
  partition, with ``share.acquire.mode`` as v2's ShareAcquireMode (KIP-1206:
  ``batch_optimized``, the default, lets the broker acquire past ``max.poll.records`` to
  the end of a batch, the surplus being handed out by the next polls; ``record_limit``
  acquires at most ``max.poll.records`` per fetch; a v1 broker is always batch-optimized),
  one share session per broker (epoch 0 opens it with every partition assigned there; then the next epochs add and
  forget partitions). The answer's batches are decoded and only the records inside its
  ``AcquiredRecords`` ranges are handed out, with their delivery counts.
- Acknowledgements: ``implicit`` mode (the default) accepts the records of a poll on the next
  poll, ``commit_sync``/``commit_async`` or ``close``; ``explicit`` mode takes
  ``acknowledge(record, type)`` for each (ACCEPT, RELEASE, REJECT, and RENEW: KIP-1222,
  keep the record and extend its lock, as Java's ``AcknowledgeType.RENEW``) and refuses a
  poll while a record of the previous one is not acknowledged. A renewed record is handed
  out again by a later poll once the broker renewed its lock (as Java's consumer does), to
  be acknowledged again; a failed renewal drops it (its lock is lost) and the error is
  raised by the next poll. Renewals go in a renew-only ShareFetch (``IsRenewAck``, nothing
  fetched) or in ShareAcknowledge v2 with ``IsRenewAck``; a broker without v2 refuses them
  (UnsupportedVersionError). Pending acknowledgements ride on the next
  ShareFetch to the record's leader, or go in a ShareAcknowledge (``commit_*``); ``close``
  sends them with share session epoch -1 (closing the sessions, which releases whatever is
  still held) and leaves the group.

Event-loop affinity: one loop; not thread-safe (the blocking ``pylog.client.ShareConsumer``
runs it on its own thread).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Iterable
from typing import Any

import logcore
from pylog import errors
from pylog.client.aio._cluster import make_cluster
from pylog.client.aio._tasks import cancel_and_wait, run_within
from pylog.client.config import SHARE_CONSUMER, Resolved, resolve
from pylog.client.errors import IllegalStateError, KafkaConnectionError, KafkaTimeoutError
from pylog.client.records import ConsumerRecord, TopicPartition
from pylog.protocol.messages import (
    FindCoordinatorRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupHeartbeatRequest,
)

__all__ = ["AcknowledgeType", "ShareConsumer"]

log = logging.getLogger("pylog.client.share")

_REJOIN = {errors.UnknownMemberIdError.code, errors.FencedMemberEpochError.code}
_COORDINATOR = {errors.NotCoordinatorError.code, errors.CoordinatorNotAvailableError.code,
                errors.CoordinatorLoadInProgressError.code}
_SESSION = {errors.ShareSessionNotFoundError.code, errors.InvalidShareSessionEpochError.code}


class AcknowledgeType(enum.IntEnum):
    """How a record is acknowledged (the wire's AcknowledgeTypes)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


# ShareFetch v2's ShareAcquireMode (KIP-1206).
_BATCH_OPTIMIZED, _RECORD_LIMIT = 0, 1


def _ack_error(code: int, message: str | None) -> BaseException | None:
    if not code:
        return None
    cls = errors.error_for_code(code) or errors.UnknownServerError
    return cls(message or cls.name)


def _ack_batches(acks: dict[int, int]) -> list[tuple[int, int, int]]:
    """{offset: type} as runs of consecutive offsets with one type."""
    out: list[tuple[int, int, int]] = []
    for off in sorted(acks):
        t = acks[off]
        if out and out[-1][1] == off - 1 and out[-1][2] == t:
            out[-1] = (out[-1][0], off, t)
        else:
            out.append((off, off, t))
    return out


class _Session:
    """The share session with one broker: the next epoch and the partitions it holds."""

    __slots__ = ("epoch", "partitions")

    def __init__(self) -> None:
        self.epoch = 0
        self.partitions: set[TopicPartition] = set()


class ShareConsumer:
    """See the module docstring. Settings as confluent-kafka's ``ShareConsumer``
    (``group.id`` required, ``share.acknowledgement.mode``, ``max.poll.records``,
    ``fetch.max.wait.ms`` ...)."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.settings: Resolved = resolve(SHARE_CONSUMER, config, kwargs)
        if not self.settings["group.id"]:
            raise errors.InvalidGroupIdError("a share consumer needs group.id")
        self.group_id: str = self.settings["group.id"]
        self.explicit = self.settings["share.acknowledgement.mode"] == "explicit"
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self.client_id = self.settings["client.id"] or f"pylog-share-consumer-{id(self) & 0xFFFF}"
        self.cluster = make_cluster(self.settings, self.client_id)
        self.subscription: list[str] = []
        self._sent_subscription: list[str] | None = None
        self.assignment: set[TopicPartition] = set()
        self._sessions: dict[int, _Session] = {}
        # Records handed out and not yet acknowledged (explicit) / accepted (implicit).
        self._delivered: dict[TopicPartition, set[int]] = {}
        self._acks: dict[TopicPartition, dict[int, int]] = {}
        self._buffer: list[ConsumerRecord] = []
        # Records acknowledged with RENEW, until the broker answers (then handed out again).
        self._renewing: dict[TopicPartition, dict[int, ConsumerRecord]] = {}
        self.record_limit = self.settings["share.acquire.mode"] == "record_limit"
        self.delivery_counts: dict[tuple[TopicPartition, int], int] = {}
        self._coordinator: Any = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._interval = 5.0
        self._joined = asyncio.Event()
        self._closed = False
        self._closing = False  # close() has begun
        self.errors: list[BaseException] = []

    # ------------------------------------------------------------------ membership

    async def subscribe(self, topics: Iterable[str]) -> None:
        """Set the subscription (replaces the previous one); joins the group."""
        names = list(dict.fromkeys(topics))
        if not names or any(not t for t in names):
            raise ValueError("subscribe() takes a non-empty list of topic names")
        self._check_open()
        self.subscription = names
        self.cluster.wanted.update(names)
        if self._heartbeat is None:
            await self.cluster.open()
            self._heartbeat = asyncio.ensure_future(self._heartbeat_loop())

    async def _find_coordinator(self) -> Any:
        conn = await self.cluster.any_connection()
        R = FindCoordinatorRequest
        resp = await conn.send(R(key_type=0, coordinator_keys=[self.group_id]), 4)
        (c,) = resp.coordinators
        if c.error_code:
            raise (errors.error_for_code(c.error_code) or errors.UnknownServerError)(
                f"FindCoordinator for share group {self.group_id!r}")
        conn = await self.cluster.coordinator_connection(c.node_id, c.host, c.port)
        if self._closing:  # close() began while this connected: close has no hold of it
            await conn.close()
            raise KafkaConnectionError("the share consumer is closed")
        return conn

    async def _drop_coordinator(self) -> None:
        """Forget the coordinator connection, closing it (it may still be open: a
        NOT_COORDINATOR answer, an ApiError of the request)."""
        conn, self._coordinator = self._coordinator, None
        if conn is not None:
            await conn.close()

    async def _heartbeat_once(self, epoch: int) -> Any:
        if self._coordinator is None:
            self._coordinator = await self._find_coordinator()
        names = None
        if epoch == 0 or self._sent_subscription != self.subscription:
            names = list(self.subscription)
        req = ShareGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                         member_epoch=epoch, rack_id=None,
                                         subscribed_topic_names=names)
        resp = await self._coordinator.send(req)
        if resp.error_code == 0 and names is not None:
            self._sent_subscription = names
        return resp

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            try:
                resp = await self._heartbeat_once(self.member_epoch)
            except (KafkaConnectionError, KafkaTimeoutError, errors.ApiError) as exc:
                log.debug("share group %s: heartbeat failed: %s", self.group_id, exc)
                await self._drop_coordinator()
                if isinstance(exc, errors.ApiError) and not exc.retriable:
                    # e.g. GROUP_AUTHORIZATION_FAILED from FindCoordinator: poll raises it
                    # (once per failure), and the member keeps trying, as it is granted.
                    self.errors.append(exc)
                    await asyncio.sleep(self._interval)
                    continue
                await asyncio.sleep(self.cluster.retry_backoff)
                continue
            code = resp.error_code
            if code in _REJOIN:
                self.member_epoch = 0
                self._sent_subscription = None
                continue
            if code in _COORDINATOR:
                await self._drop_coordinator()
                await asyncio.sleep(self.cluster.retry_backoff)
                continue
            if code:
                cls = errors.error_for_code(code) or errors.UnknownServerError
                self.errors.append(cls(f"ShareGroupHeartbeat: {resp.error_message or cls.name}"))
                await asyncio.sleep(self._interval)
                continue
            self.member_epoch = resp.member_epoch
            self._interval = max(resp.heartbeat_interval_ms, 100) / 1000
            if resp.assignment is not None:
                await self._set_assignment(resp.assignment)
            self._joined.set()
            await asyncio.sleep(self._interval)

    async def _set_assignment(self, assignment: Any) -> None:
        wanted = {tp.topic_id: tp.partitions for tp in assignment.topic_partitions}
        by_id = {t.topic_id: name for name, t in self.cluster.topics.items()}
        if any(tid not in by_id for tid in wanted):
            await self.cluster.update(set(self.subscription))
            by_id = {t.topic_id: name for name, t in self.cluster.topics.items()}
        self.assignment = {TopicPartition(by_id[tid], p) for tid, ps in wanted.items()
                           if tid in by_id for p in ps}

    # ------------------------------------------------------------------ records

    def _leader(self, tp: TopicPartition) -> int:
        t = self.cluster.topics.get(tp.topic)
        info = None if t is None else t.partitions.get(tp.partition)
        return -1 if info is None else info.leader

    def _mark_implicit(self) -> None:
        if self.explicit:
            return
        for tp, offsets in self._delivered.items():
            acks = self._acks.setdefault(tp, {})
            for off in offsets:
                acks.setdefault(off, AcknowledgeType.ACCEPT)
        self._delivered.clear()

    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records acquired for this member (at most ``max.poll.records``), waiting up to
        ``timeout`` seconds; in implicit mode the previous poll's records are accepted first.

        Raises:
            IllegalStateError: not subscribed; closed; explicit mode with records of the
                previous poll not acknowledged.
        """
        self._check_open()
        if not self.subscription:
            raise IllegalStateError("poll() needs a subscription")
        if self.explicit and any(self._delivered.values()):
            raise IllegalStateError("explicit acknowledgement mode: acknowledge every record of "
                                    "the previous poll before polling again")
        self._mark_implicit()
        self._raise_errors()
        limit = max_records or self.settings["max.poll.records"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0)
        while not self._buffer:
            left = deadline - loop.time()
            if not self._joined.is_set():
                try:
                    await asyncio.wait_for(self._joined.wait(), max(left, 0.001))
                except asyncio.TimeoutError:
                    break
                continue
            await self._fetch_round(min(max(left, 0), self.settings["fetch.max.wait.ms"] / 1000), limit)
            if loop.time() >= deadline:
                break
        out, self._buffer = self._buffer[:limit], self._buffer[limit:]
        for r in out:
            self._delivered.setdefault(TopicPartition(r.topic, r.partition), set()).add(r.offset)
        return out

    async def _fetch_round(self, wait_s: float, limit: int) -> None:
        """One ShareFetch to each leader of the assignment (acknowledgements ride along)."""
        by_node: dict[int, set[TopicPartition]] = {}
        for tp in self.assignment:
            by_node.setdefault(self._leader(tp), set()).add(tp)
        for tp in self._acks:
            if self._acks[tp]:
                by_node.setdefault(self._leader(tp), set())
        by_node.pop(-1, None)
        if not by_node:
            self.cluster.request_update()
            await self.cluster.maybe_update()
            await asyncio.sleep(min(wait_s, 0.1))
            return
        await asyncio.gather(*(self._fetch(node, parts, wait_s, limit)
                               for node, parts in by_node.items()))

    def _take_acks(self, node: int) -> dict[TopicPartition, list[tuple[int, int, int]]]:
        out = {}
        for tp in list(self._acks):
            if self._acks[tp] and self._leader(tp) == node:
                out[tp] = _ack_batches(self._acks.pop(tp))
        return out

    async def _fetch(self, node: int, parts: set[TopicPartition], wait_s: float, limit: int) -> None:
        session = self._sessions.setdefault(node, _Session())
        acks = {} if session.epoch == 0 else self._take_acks(node)
        # KIP-1222: RENEW acknowledgements go in a fetch that fetches nothing (IsRenewAck,
        # MaxWaitMs/MinBytes/MaxBytes/MaxRecords 0); records come with the next round.
        renew = any(t == AcknowledgeType.RENEW for batches in acks.values() for _f, _l, t in batches)
        if renew and not await self._has_v2(node, ShareFetchRequest):
            acks = self._drop_renewals(acks, errors.UnsupportedVersionError(
                f"broker {node} has no ShareFetch v2: RENEW needs it (KIP-1222)"))
            renew = False
        ids = {name: t.topic_id for name, t in self.cluster.topics.items()}
        R = ShareFetchRequest
        send = (parts if session.epoch == 0 else parts - session.partitions) | set(acks)
        forget = session.partitions - parts if session.epoch else set()
        topics: dict[Any, list[Any]] = {}
        for tp in send:
            if tp.topic in ids:
                topics.setdefault(ids[tp.topic], []).append(R.FetchPartition(
                    partition_index=tp.partition, acknowledgement_batches=[
                        R.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
                        for f, last, t in acks.get(tp, [])]))
        forgotten: dict[Any, list[int]] = {}
        for tp in forget:
            if tp.topic in ids:
                forgotten.setdefault(ids[tp.topic], []).append(tp.partition)
        req = R(group_id=self.group_id, member_id=self.member_id, share_session_epoch=session.epoch,
                max_wait_ms=0 if renew else int(wait_s * 1000),
                min_bytes=0 if renew else self.settings["fetch.min.bytes"],
                max_bytes=0 if renew else self.settings["fetch.max.bytes"],
                max_records=0 if renew else limit, batch_size=0 if renew else limit,
                share_acquire_mode=_RECORD_LIMIT if self.record_limit else _BATCH_OPTIMIZED,
                is_renew_ack=renew,
                topics=[R.FetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()],
                forgotten_topics_data=[R.ForgottenTopic(topic_id=t, partitions=ps)
                                       for t, ps in forgotten.items()])
        try:
            conn = await self.cluster.connection(node)
            resp = await conn.send(req, timeout=self.cluster.request_timeout + wait_s)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("share fetch from broker %d failed: %s", node, exc)
            self._sessions.pop(node, None)  # the acknowledgements are lost: locks expire
            self._renewed(acks, exc)
            self.cluster.request_update()
            await asyncio.sleep(self.cluster.retry_backoff)
            return
        if resp.error_code in _SESSION:
            self._sessions.pop(node, None)
            self._renewed(acks, _ack_error(resp.error_code, resp.error_message))
            return
        if resp.error_code:
            cls = errors.error_for_code(resp.error_code) or errors.UnknownServerError
            self.errors.append(cls(f"ShareFetch: {resp.error_message or cls.name}"))
            self._renewed(acks, cls(resp.error_message or cls.name))  # nothing was renewed
            return
        session.epoch = 1 if session.epoch == 0x7FFFFFFF else session.epoch + 1
        session.partitions = (session.partitions | send) - forget
        names = {t.topic_id: name for name, t in self.cluster.topics.items()}
        for t in resp.responses:
            name = names.get(t.topic_id)
            for p in t.partitions:
                if name is None:
                    continue
                tp = TopicPartition(name, p.partition_index)
                if tp in acks:
                    self._renewed({tp: acks.pop(tp)}, _ack_error(p.acknowledge_error_code,
                                                              p.acknowledge_error_message))
                if p.error_code:
                    cls = errors.error_for_code(p.error_code) or errors.UnknownServerError
                    if cls.invalid_metadata or cls.retriable:
                        self.cluster.request_update()
                    else:
                        self.errors.append(cls(f"{name}-{p.partition_index}: {cls.name}"))
                if p.acquired_records and p.records is not None and len(p.records):
                    self._decode(tp, p.records, p.acquired_records)
        self._renewed(acks, None)  # partitions the answer left out: acknowledged without error

    def _decode(self, tp: TopicPartition, data: Any, acquired: list[Any]) -> None:
        ranges = [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired]
        kd, vd = self.settings["key.deserializer"], self.settings["value.deserializer"]
        check = self.settings["check.crcs"]
        try:
            for batch in logcore.iter_batches(bytes(data)):
                if check:
                    batch.validate()
                if batch.is_control or batch.last_offset < ranges[0][0]:
                    continue
                ts_type = 1 if batch.timestamp_type == "log_append" else 0
                for r in batch:
                    off = r.offset
                    count = next((c for f, last, c in ranges if f <= off <= last), 0)
                    if not count:
                        continue
                    key = r.key if kd is None else kd(r.key)
                    value = r.value if vd is None else vd(r.value)
                    self._buffer.append(ConsumerRecord(tp.topic, tp.partition, off, r.timestamp,
                                                       ts_type, key, value, r.headers_or_none,
                                                       batch.partition_leader_epoch))
                    self.delivery_counts[(tp, off)] = count
        except logcore.CorruptRecordError as exc:
            self.errors.append(errors.CorruptMessageError(f"{tp.topic}-{tp.partition}: {exc}"))

    # ------------------------------------------------------------------ acknowledgements

    def acknowledge(self, record: ConsumerRecord, ack_type: int = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: how the broker treats ``record`` (sent with the next poll or commit).

        Raises:
            IllegalStateError: implicit mode, or the record is not one handed out and not
                yet acknowledged.
            ValueError: an unknown type.
        """
        if not self.explicit:
            raise IllegalStateError("acknowledge() needs share.acknowledgement.mode=explicit")
        t = AcknowledgeType(int(ack_type))
        tp = TopicPartition(record.topic, record.partition)
        held = self._delivered.get(tp)
        if held is None or record.offset not in held:
            raise IllegalStateError(f"{tp.topic}-{tp.partition}@{record.offset} is not in flight")
        held.discard(record.offset)
        self._acks.setdefault(tp, {})[record.offset] = t
        if t == AcknowledgeType.RENEW:
            self._renewing.setdefault(tp, {})[record.offset] = record
        else:
            self.delivery_counts.pop((tp, record.offset), None)

    async def _has_v2(self, node: int, cls: Any) -> bool:
        """Whether the broker serves ``cls`` at version 2 (a connection failure is left to
        the request that follows)."""
        try:
            conn = await self.cluster.connection(node)
        except (KafkaConnectionError, KafkaTimeoutError):
            return True
        return bool(conn.version_for(cls) >= 2)

    def _drop_renewals(self, acks: dict[TopicPartition, list[tuple[int, int, int]]],
                       error: BaseException) -> dict[TopicPartition, list[tuple[int, int, int]]]:
        """``acks`` without their RENEW batches, whose records are given up with ``error``."""
        self._renewed(acks, error)
        out = {tp: [b for b in batches if b[2] != AcknowledgeType.RENEW] for tp, batches in acks.items()}
        return {tp: batches for tp, batches in out.items() if batches}

    def _renewed(self, acks: dict[TopicPartition, list[tuple[int, int, int]]],
                 error: BaseException | None) -> None:
        """The broker answered (or could not be asked) for these acknowledgements: renewed
        records go back to the buffer (handed out again, their lock extended); after an
        error they are dropped (their lock is lost) and the error is raised by a poll."""
        for tp, batches in acks.items():
            held = self._renewing.get(tp)
            if not held:
                continue
            for first, last, t in batches:
                if t != AcknowledgeType.RENEW:
                    continue
                for off in range(first, last + 1):
                    record = held.pop(off, None)
                    if record is None:
                        continue
                    if error is None:
                        self._buffer.append(record)
                    else:
                        self.delivery_counts.pop((tp, off), None)
            if not held:
                del self._renewing[tp]
        if error is not None and any(t == AcknowledgeType.RENEW for b in acks.values()
                                     for _f, _l, t in b):
            self.errors.append(error)

    async def commit(self, timeout: float | None = None) -> dict[TopicPartition, BaseException | None]:
        """Send the pending acknowledgements (ShareAcknowledge) and wait for the answers:
        per partition None, or the error the broker gave."""
        self._check_open()
        self._mark_implicit()
        nodes = {self._leader(tp) for tp, acks in self._acks.items() if acks} - {-1}
        results: dict[TopicPartition, BaseException | None] = {}
        t = self.settings["default.api.timeout.ms"] / 1000 if timeout is None else timeout
        await asyncio.wait_for(asyncio.gather(*(self._acknowledge(n, False, results) for n in nodes)), t)
        return results

    async def _acknowledge(self, node: int, final: bool,
                           results: dict[TopicPartition, BaseException | None]) -> None:
        session = self._sessions.get(node)
        acks = self._take_acks(node)
        if session is None or session.epoch == 0:
            for tp in acks:
                results[tp] = errors.ShareSessionNotFoundError("no share session with the leader")
            return
        ids = {name: t.topic_id for name, t in self.cluster.topics.items()}
        R = ShareAcknowledgeRequest
        topics: dict[Any, list[Any]] = {}
        for tp, batches in acks.items():
            topics.setdefault(ids[tp.topic], []).append(R.AcknowledgePartition(
                partition_index=tp.partition, acknowledgement_batches=[
                    R.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
                    for f, last, t in batches]))
        epoch = -1 if final else session.epoch
        renew = any(t == AcknowledgeType.RENEW for b in acks.values() for _f, _l, t in b)
        req = R(group_id=self.group_id, member_id=self.member_id, share_session_epoch=epoch,
                is_renew_ack=renew,
                topics=[R.AcknowledgeTopic(topic_id=t, partitions=ps) for t, ps in topics.items()])
        try:
            conn = await self.cluster.connection(node)
            if renew and conn.version_for(R) < 2:
                unsupported = errors.UnsupportedVersionError(
                    f"broker {node} has no ShareAcknowledge v2: RENEW needs it (KIP-1222)")
                for tp in acks:
                    results[tp] = unsupported
                self._renewed(acks, unsupported)
                return  # (the other acknowledgements of these partitions go too: their locks expire)
            resp = await conn.send(req)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            for tp in acks:
                results[tp] = exc
            self._sessions.pop(node, None)
            self._renewed(acks, exc)
            return
        if final:
            self._sessions.pop(node, None)
        else:
            session.epoch = 1 if session.epoch == 0x7FFFFFFF else session.epoch + 1
        names = {t.topic_id: name for name, t in self.cluster.topics.items()}
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(names.get(t.topic_id, ""), p.partition_index)
                cls = errors.error_for_code(p.error_code) if p.error_code else None
                results[tp] = None if cls is None else cls(p.error_message or cls.name)
        if resp.error_code:
            if resp.error_code in _SESSION:
                self._sessions.pop(node, None)
            cls = errors.error_for_code(resp.error_code) or errors.UnknownServerError
            for tp in acks:
                results.setdefault(tp, cls(resp.error_message or cls.name))
        if not final:
            for tp, batches in acks.items():
                self._renewed({tp: batches}, results.get(tp))

    # ------------------------------------------------------------------ closing

    async def close(self, timeout: float | None = None) -> None:
        """Accept (implicit mode) and send what is pending, close the share sessions
        (releasing the records still held) and leave the group.

        Every wait is bounded: the heartbeat task is stopped within ``_tasks.STOP_TIMEOUT``;
        the acknowledgements and the leave share ``timeout`` (``default.api.timeout.ms``
        when None), each stopped for sure when it runs out (``_tasks.run_within``); the
        connections are then closed, each within ``CLOSE_FLUSH_TIMEOUT``."""
        if self._closed or self._closing:
            return
        self._closing = True
        t = self.settings["default.api.timeout.ms"] / 1000 if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(t, 0.0)
        try:
            # The leave below is the last heartbeat (cancelled until it ends: _tasks).
            await cancel_and_wait(self._heartbeat)
            self._heartbeat = None
            self._mark_implicit()
            results: dict[TopicPartition, BaseException | None] = {}
            await run_within(asyncio.gather(
                *(self._acknowledge(n, True, results) for n in list(self._sessions))),
                deadline - loop.time())
            if self._coordinator is not None and self.member_epoch > 0:
                await run_within(self._heartbeat_once(-1), deadline - loop.time())
        except (KafkaConnectionError, KafkaTimeoutError, errors.ApiError, asyncio.TimeoutError) as exc:
            log.debug("share consumer close: %s", exc)
        finally:
            self._closed = True
            try:
                await self._drop_coordinator()
            finally:
                await self.cluster.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the share consumer is closed")

    def _raise_errors(self) -> None:
        if self.errors:
            exc = self.errors.pop(0)
            self.errors.clear()
            raise exc
