"""Consumer groups in embedded mode: ``commit``, ``committed``, ``subscribe``.

Offsets go through the broker's own group coordinator and ``__consumer_offsets``, with
the requests a Kafka consumer sends: FindCoordinator (which creates ``__consumer_offsets``
on first use), OffsetCommit and OffsetFetch, over the ``EmbeddedConnection``. A commit
carries generation -1 and no member id, as the commits of Kafka's consumers that use
``assign()`` do (the coordinator accepts them while the group has no members), so the
offsets are stored, compacted, reloaded at the next open and read by a broker started on
the directory later, exactly as a broker's are.

``subscribe()``: a data directory is open in one process at a time, so a group has one
member: the subscribed consumer is assigned every partition of the topics it subscribed
to (or that match its pattern), without JoinGroup/SyncGroup. The assignment is brought up
to date at the start of each ``poll`` from the metadata (new partitions and topics join,
deleted ones leave), and the change is reported to the rebalance listener as Kafka's
cooperative protocol does (only the partitions that left, then only those that came).
A second consumer of the process subscribing to the same group is refused
(``IllegalStateError``): two members would each read every partition.

Partitions without a position start from the group's committed offset, then from
``auto.offset.reset`` (Kafka's ``refreshCommittedOffsetsIfNeeded``), whether assigned or
subscribed. Commits are explicit: ``enable.auto.commit`` is not implemented.

Over the network these calls still raise ``GroupsNotAvailableError`` (the client's
JoinGroup/SyncGroup and its offset calls are not in yet); this module serves embedded
consumers only.

Event-loop affinity: the consumer's loop.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.client.aio._fetcher import PartitionState
from pylog.client.errors import IllegalStateError, KafkaConnectionError, KafkaTimeoutError
from pylog.client.records import TopicPartition
from pylog.protocol.messages import FindCoordinatorRequest, OffsetCommitRequest, OffsetFetchRequest

if TYPE_CHECKING:
    from pylog.client.aio.consumer import ConsumerCore

__all__ = ["EmbeddedGroup"]

# Answers that mean "ask again in a moment" (the coordinator is loading, moving, or its
# topic is being created).
_RETRY = {errors.CoordinatorLoadInProgressError.code, errors.CoordinatorNotAvailableError.code,
          errors.NotCoordinatorError.code}


class EmbeddedGroup:
    """The group side of one embedded consumer (``ConsumerCore.group``)."""

    def __init__(self, core: ConsumerCore) -> None:
        self.core = core
        self.group_id: str | None = core.settings["group.id"]
        self.topics: frozenset[str] | None = None
        self.pattern: re.Pattern[str] | None = None
        self._listed_at = -1e18
        self._claimed = False

    @property
    def subscribed(self) -> bool:
        return self.topics is not None or self.pattern is not None

    def _need_group_id(self, call: str) -> str:
        if not self.group_id:
            raise errors.InvalidGroupIdError(
                f"{call} needs a consumer group: give group.id in the consumer's settings")
        return self.group_id

    # ------------------------------------------------------------------ subscription

    async def subscribe(self, topics: Any, pattern: Any) -> None:
        """Subscribe to ``topics`` (names) or ``pattern`` (a regular expression matched
        against whole topic names), replacing an earlier subscription.

        Raises:
            InvalidGroupIdError: no group.id. IllegalStateError: partitions were assigned
            with ``assign()``, or another consumer of this process is subscribed in the
            group. ValueError / TypeError: neither or both of topics and pattern, or not
            names / a pattern.
        """
        group_id = self._need_group_id("subscribe()")
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern (one of them)")
        if self.core.assignment and not self.subscribed:
            raise IllegalStateError("subscribe() after assign(): a consumer either assigns "
                                    "partitions or subscribes; call unsubscribe() first")
        names: frozenset[str] | None = None
        regex: re.Pattern[str] | None = None
        if topics is not None:
            items = [topics] if isinstance(topics, str) else list(topics)
            if not items or not all(isinstance(t, str) and t for t in items):
                raise TypeError(f"topics must be topic names, got {topics!r}")
            names = frozenset(items)
        else:
            regex = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        cluster = self.core.cluster
        await cluster.open()
        backend = getattr(cluster, "backend", None)
        if backend is None:
            raise KafkaConnectionError("client is closed")
        backend.claim_group(group_id, self)
        self._claimed = True
        self.topics, self.pattern = names, regex
        self._listed_at = -1e18
        cluster.wanted = set(names or ())
        cluster.request_update()

    def unsubscribe(self) -> list[TopicPartition]:
        """Leave the subscription (and any assignment); returns the partitions dropped."""
        dropped = sorted(self.core.assignment)
        for tp in dropped:
            self._drop(tp)
        self.topics = self.pattern = None
        self._release()
        return dropped

    def close(self) -> None:
        self._release()

    def _release(self) -> None:
        backend = getattr(self.core.cluster, "backend", None)
        if self._claimed and backend is not None and self.group_id:
            backend.release_group(self.group_id, self)
        self._claimed = False

    def _drop(self, tp: TopicPartition) -> None:
        self.core.assignment.pop(tp, None)
        self.core.fetcher.completed.pop(tp, None)

    async def refresh(self) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Bring the assignment of a subscribed consumer up to date with the metadata.

        Returns:
            (partitions revoked, partitions assigned) since the last call, sorted.
        """
        if not self.subscribed:
            return [], []
        cluster = self.core.cluster
        loop = asyncio.get_running_loop()
        try:
            if self.pattern is not None:
                if cluster.needs_update() or loop.time() - self._listed_at >= cluster.metadata_max_age:
                    await cluster.describe_all()
                    self._listed_at = loop.time()
            elif cluster.needs_update():
                await cluster.update(set(self.topics or ()))
        except (KafkaConnectionError, KafkaTimeoutError):
            pass  # the assignment stays as it is; the next poll looks again
        if self.pattern is not None:
            names = {n for n, info in cluster.topics.items()
                     if not info.is_internal and self.pattern.fullmatch(n)}
            cluster.wanted = set(names)
        else:
            names = set(self.topics or ())
        target: set[TopicPartition] = set()
        for name in names:
            info = cluster.topic(name)
            if info is not None:
                target.update(TopicPartition(name, p) for p in info.partitions)
        current = set(self.core.assignment)
        revoked, assigned = sorted(current - target), sorted(target - current)
        for tp in revoked:
            self._drop(tp)
        for tp in assigned:
            self.core.assignment[tp] = PartitionState()
        return revoked, assigned

    # ------------------------------------------------------------------ offsets

    async def _coordinator(self, deadline: float) -> Any:
        """A connection to the group's coordinator (FindCoordinator: creates
        ``__consumer_offsets`` the first time)."""
        group_id = self._need_group_id("this call")
        loop = asyncio.get_running_loop()
        while True:
            conn = await self.core.cluster.any_connection()
            R = FindCoordinatorRequest
            version = conn.version_for(R)
            if version >= 4:
                resp = await conn.send(R(key_type=0, coordinator_keys=[group_id]), version)
                code, message = resp.coordinators[0].error_code, resp.coordinators[0].error_message
            else:
                resp = await conn.send(R(key=group_id, key_type=0), version)
                code, message = resp.error_code, resp.error_message
            if code == 0:
                return conn
            await self._retry_or_raise(code, f"FindCoordinator for group {group_id!r}", message,
                                       deadline, loop)

    async def _retry_or_raise(self, code: int, what: str, message: str | None, deadline: float,
                              loop: asyncio.AbstractEventLoop) -> None:
        cls = errors.error_for_code(code) or errors.UnknownServerError
        text = f"{what}: {cls.name}" + (f": {message}" if message else "")
        if code not in _RETRY:
            raise cls(text)
        if loop.time() >= deadline:
            raise KafkaTimeoutError(f"{text} (still, after default.api.timeout.ms)")
        await asyncio.sleep(self.core.cluster.retry_backoff)

    async def commit(self, offsets: dict[TopicPartition, int] | None,
                     timeout: float | None = None) -> dict[TopicPartition, int]:
        """Store ``offsets`` (default: the position of every assigned partition that has
        one) as the group's committed offsets. Returns what was committed.

        Raises:
            InvalidGroupIdError: no group.id. KafkaTimeoutError: the coordinator did not
            take it within ``timeout`` (default ``default.api.timeout.ms``). ApiError: the
            coordinator's refusal (e.g. UNKNOWN_TOPIC_OR_PARTITION for a partition that
            does not exist).
        """
        group_id = self._need_group_id("commit()")
        if offsets is None:
            offsets = {tp: st.position for tp, st in self.core.assignment.items()
                       if st.position is not None}
        if not offsets:
            return {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.core.api_timeout if timeout is None else timeout)
        R = OffsetCommitRequest
        by_topic: dict[str, list[Any]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(R.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=""))
        req = R(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, retention_time_ms=-1,
                topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])
        while True:
            conn = await self._coordinator(deadline)
            resp = await conn.send(req)
            retry = 0
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code in _RETRY:
                        retry = p.error_code
                    elif p.error_code:
                        cls = errors.error_for_code(p.error_code) or errors.UnknownServerError
                        raise cls(f"commit of {t.name}-{p.partition_index} for group "
                                  f"{group_id!r}: {cls.name}")
            if not retry:
                return dict(offsets)
            await self._retry_or_raise(retry, f"commit for group {group_id!r}", None, deadline,
                                       loop)

    async def committed(self, partitions: Iterable[TopicPartition],
                        timeout: float | None = None) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition; None where it has none.

        Raises:
            InvalidGroupIdError, KafkaTimeoutError, ApiError: as ``commit``.
        """
        group_id = self._need_group_id("committed()")
        wanted = list(partitions)
        out: dict[TopicPartition, int | None] = {tp: None for tp in wanted}
        if not wanted:
            return out
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.core.api_timeout if timeout is None else timeout)
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        R = OffsetFetchRequest
        while True:
            conn = await self._coordinator(deadline)
            version = conn.version_for(R)
            if version >= 8:
                resp = await conn.send(R(groups=[R.OffsetFetchRequestGroup(
                    group_id=group_id, topics=[R.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                                               for t, ps in by_topic.items()])],
                    require_stable=True), version)
                code, topics = resp.groups[0].error_code, resp.groups[0].topics
            else:
                resp = await conn.send(R(group_id=group_id, topics=[
                    R.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()], require_stable=True), version)
                code, topics = resp.error_code, resp.topics
            partition_codes = [p.error_code for t in topics for p in t.partitions if p.error_code]
            code = code or next(iter(partition_codes), 0)
            if code:
                await self._retry_or_raise(code, f"committed offsets of group {group_id!r}", None,
                                           deadline, loop)
                continue
            for t in topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp in out:
                        out[tp] = p.committed_offset if p.committed_offset >= 0 else None
            return out
