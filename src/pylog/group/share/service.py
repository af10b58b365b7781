"""The partition leader's side of share groups (Kafka's ``SharePartitionManager``): the share
partitions this broker leads, the share sessions, the acquisition-lock timer, the group
configs and the durable state. The ShareFetch and ShareAcknowledge handlers call it.

- A share partition (``SharePartition``) is made on first use, from its durable state when
  there is some (``ShareStateStore``: ``__share_group_state``), else at the offset
  ``share.auto.offset.reset`` names: ``latest`` (the default) the high watermark,
  ``earliest`` the log start. The group coordinator's heartbeat handler initializes the
  partitions of a new assignment at once (``initialize``), as Kafka initializes a share
  partition when it is first assigned, so "latest" means "from the assignment on".
- Acquisition locks: one ``DeadlineTimer`` at the earliest lock deadline of any share
  partition; when it fires, expired records become available again (or are archived at
  the delivery limit), fetches waiting on those partitions are woken and the state is
  written.
- Every change of a share partition's durable state (acknowledgements, releases, archived
  records, SPSO moves) is written to the state store; acquisitions are not durable (a lock
  does not survive a restart, and the delivery count is written with the next change).
- Members: when a member leaves its share group or its share session closes, what it
  holds is released at once.

Event-loop affinity: the broker's loop.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from pylog.coordinator.runtime import DeadlineTimer

from .group_configs import GroupConfigs
from .sessions import ShareSessionCache
from .share_partition import SharePartition
from .state_store import SHARE_GROUP_STATE_TOPIC_NAME, ShareStateStore

if TYPE_CHECKING:
    from pylog.broker.server import Broker

__all__ = ["ShareService", "waiter_key"]

log = logging.getLogger("pylog.share")

ShareKey = tuple[str, uuid.UUID, int]  # group id, topic id, partition


def waiter_key(group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[Any, ...]:
    """The ``PartitionWaiters`` key woken when records of a share partition become
    available again (released, lock expired)."""
    return ("share", group_id, topic_id, partition)


class ShareService:
    """See the module docstring. One per broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.enabled = bool(cfg["group.share.enable"])
        self.sessions = ShareSessionCache()
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._by_id: dict[uuid.UUID, Any] = {}
        self.group_configs = GroupConfigs(cfg)
        # The durable state (single node): __share_group_state. Cluster mode: memory only.
        self.state: ShareStateStore | None = None
        self._timer = DeadlineTimer(broker.clock, self._expire)

    async def start(self) -> None:
        """Load the saved state before any share partition is made."""
        if self.enabled and self.broker.cluster is None:
            self.state = ShareStateStore(self.broker)
        if self.state is not None:
            await self.state.start()
            if len(self.state):
                log.info("loaded the state of %d share partitions", len(self.state))

    async def flushed(self) -> int:
        """Wait until the state changes made so far are durable (0, or an error code)."""
        return 0 if self.state is None else await self.state.flushed()

    # ------------------------------------------------------------------ settings

    def lock_duration_ms(self, group_id: str) -> int:
        return self.group_configs.get(group_id, "share.record.lock.duration.ms")

    def delivery_count_limit(self, group_id: str) -> int:
        return self.group_configs.get(group_id, "share.delivery.count.limit")

    def _mono_ms(self) -> int:
        return round(self.broker.clock.monotonic() * 1000)

    # ------------------------------------------------------------------ topics

    def topic_of(self, topic_id: uuid.UUID) -> Any:
        """The local ``Topic`` with this id, or None. A cache by id, checked against the
        log manager's table (a topic deleted or re-created under its name is looked up
        again), so a fetch does not scan every topic for each partition."""
        topics = self.broker.log_manager.topics
        t = self._by_id.get(topic_id)
        if t is not None and topics.get(t.name) is t:
            return t
        self._by_id = {t.topic_id: t for t in topics.values()}
        return self._by_id.get(topic_id)

    def leader_bounds(self, topic: Any, partition: int) -> tuple[Any, int] | None:
        """(partition log, high watermark) when this broker leads the partition, else None."""
        p = topic.partitions[partition]
        replicas = self.broker.replicas
        if replicas.active:
            state = replicas.partitions.get((p.topic, p.index))
            if state is None or state.leader is None:
                return None
            return p.log, state.high_watermark
        if self.broker.cluster is not None:
            return None
        return p.log, p.log.log_end_offset

    # ------------------------------------------------------------------ share partitions

    def share_partition(self, group_id: str, topic: Any, partition: int) -> SharePartition | None:
        """The share partition (made on first use); None when this broker does not lead the
        topic partition."""
        bounds = self.leader_bounds(topic, partition)
        if bounds is None:
            return None
        plog, hw = bounds
        key = (group_id, topic.topic_id, partition)
        sp = self.partitions.get(key)
        if sp is None:
            limit = self.delivery_count_limit(group_id)
            max_locks = self.broker.config["group.share.partition.max.record.locks"]
            saved = self.state.read(key) if self.state is not None else None
            if saved is not None:
                start, batches = saved
                sp = SharePartition(max(start, plog.log_start_offset), delivery_count_limit=limit,
                                    max_in_flight=max_locks, batches=batches)
            else:
                reset = self.group_configs.get(group_id, "share.auto.offset.reset")
                start = plog.log_start_offset if reset == "earliest" else hw
                sp = SharePartition(start, delivery_count_limit=limit, max_in_flight=max_locks)
                self._persist(key, sp)
            self.partitions[key] = sp
            log.debug("share partition %s-%s[%d] of group %s starts at %d", topic.name,
                      topic.topic_id, partition, group_id, sp.start_offset)
        else:
            sp.delivery_count_limit = self.delivery_count_limit(group_id)
        sp.move_start(plog.log_start_offset)
        return sp

    def initialize(self, group_id: str, assignment: dict[uuid.UUID, set[int]]) -> None:
        """Make the share partitions of an assignment that this broker leads (their start
        offset is fixed now, not at the first fetch)."""
        for topic_id, parts in assignment.items():
            topic = self.topic_of(topic_id)
            if topic is None:
                continue
            for p in parts:
                if 0 <= p < len(topic.partitions) and (group_id, topic_id, p) not in self.partitions:
                    self.share_partition(group_id, topic, p)

    def changed(self, key: ShareKey, sp: SharePartition, woke: bool = False) -> None:
        """After a change of ``sp``: write its state, wake fetches when records became
        available, re-arm the lock timer."""
        self._persist(key, sp)
        if woke:
            self.broker.waiters.notify(waiter_key(*key))
        self.arm()

    def _persist(self, key: ShareKey, sp: SharePartition) -> None:
        if self.state is not None:
            self.state.write(key, sp)

    def arm(self) -> None:
        deadlines = [d for d in (sp.next_deadline_ms() for sp in self.partitions.values())
                     if d is not None]
        self._timer.arm(min(deadlines) if deadlines else None)

    def _expire(self) -> None:
        now = self._mono_ms()
        for key, sp in self.partitions.items():
            if sp.expire_locks(now):
                self._persist(key, sp)
                self.broker.waiters.notify(waiter_key(*key))
        self.arm()

    # ------------------------------------------------------------------ members

    def release_member(self, group_id: str, member_id: str) -> None:
        """Give back what ``member_id`` holds in every share partition of ``group_id``."""
        for key, sp in self.partitions.items():
            if key[0] == group_id and sp.release_member(member_id):
                self._persist(key, sp)
                self.broker.waiters.notify(waiter_key(*key))
        self.arm()

    def on_member_removed(self, group_id: str, member_id: str) -> None:
        """The group coordinator removed a member (left, session timed out). Its share
        session stays: a closing consumer sends its final acknowledgements (epoch -1) after
        or alongside its leave heartbeat; the cache's bound and epoch -1 end sessions."""
        self.release_member(group_id, member_id)

    def on_group_deleted(self, group_id: str) -> None:
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
            if self.state is not None:
                self.state.delete(key)
        self.sessions.remove_group(group_id)

    def on_topic_deleted(self, topic: Any) -> None:
        """A topic was deleted (single node): its share partitions and their state go; if
        it was ``__share_group_state`` itself, the state store resigns (the topic is made
        again by the next write; share partitions that do not change are not rewritten)."""
        if self.state is not None and topic.name == SHARE_GROUP_STATE_TOPIC_NAME:
            self.state.on_topic_deleted()
            return
        for key in [k for k in self.partitions if k[1] == topic.topic_id]:
            del self.partitions[key]
            if self.state is not None:
                self.state.delete(key)
        self.arm()

    async def shutdown(self) -> None:
        self._timer.cancel()
        if self.state is not None:
            await self.state.shutdown()
