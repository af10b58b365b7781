"""The consumer's core, shared by the asyncio and the blocking ``Consumer``.

Holds the assignment (``PartitionState`` per partition: position, pause, pending
revocation), the fetcher, and, with ``group.id``, the group membership: the classic
protocol's coordinator client (``_coordinator.ConsumerCoordinator``) or, with
``group.protocol=consumer``, KIP-848's (``_consumer_membership.ConsumerMembership``).
Partitions come from ``assign()`` (manual) or from the group after ``subscribe()``; the two
are exclusive, as in Kafka.

Positions: a partition without one takes its group's committed offset (OffsetFetch) when
the consumer has a ``group.id``, else (or when nothing is committed) ``auto.offset.reset``.
A position that fell out of the log is reset by ``auto.offset.reset``.

Commits: ``commit`` (sync, retried until ``default.api.timeout.ms``) or asynchronous;
with ``enable.auto.commit`` the consumed positions are committed from ``poll`` every
``auto.commit.interval.ms``, before a rebalance revokes partitions, and on close. While
``close`` runs (its revoke callback may commit, as Kafka's ``commitSync`` in
``onPartitionsRevoked``), a synchronous commit or ``committed`` waits no longer than what
is left of close's timeout.

Rebalance callbacks run through ``run_callback``: awaited on the loop for the asyncio
consumer; the blocking consumer replaces it to run them on the application's thread inside
its ``poll`` (as Kafka runs them inside ``poll()``).

Event-loop affinity: built and used on one loop.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Callable
from typing import Any

import logcore
from pylog import errors
from pylog.client.aio._assignors import EAGER
from pylog.client.aio._cluster import make_cluster
from pylog.client.aio._consumer_membership import ConsumerMembership
from pylog.client.aio._coordinator import ConsumerCoordinator, SubscriptionState
from pylog.client.aio._fetcher import Fetcher, PartitionState
from pylog.client.aio._group_offsets import commit_offsets, fetch_committed, is_retriable
from pylog.client.aio._offsets import EARLIEST, LATEST, list_offsets
from pylog.client.aio._rebalance import RebalanceListener
from pylog.client.aio._tasks import cancel_all
from pylog.client.config import ConfigError, Resolved, check_group_protocol
from pylog.client.errors import (
    ClientClosedError,
    IllegalStateError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
)
from pylog.client.records import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    TopicPartition,
)

__all__ = ["ConsumerCore"]

log = logging.getLogger("pylog.client.consumer")

_ids = itertools.count(1)
CLOSE_TIMEOUT = 30.0  # Kafka's default close timeout (seconds)
_NO_GROUP = ("needs a consumer group: set group.id in the consumer's settings "
             "(e.g. {'group.id': 'my-group'})")


async def _call_on_loop(fn: Callable[[list[TopicPartition]], Any], partitions: list[TopicPartition]) -> Any:
    result = fn(partitions)
    if inspect.isawaitable(result):
        result = await result
    return result


class ConsumerCore:
    """Assignment, positions, fetcher, group membership. Built and used on one loop."""

    def __init__(self, settings: Resolved) -> None:
        self.settings = settings
        self.client_id = settings["client.id"] or f"pylog-consumer-{next(_ids)}"
        self.cluster = make_cluster(settings, self.client_id)
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.fetcher = Fetcher(self.cluster, self.assignment, settings)
        self.reset_policy: str = settings["auto.offset.reset"]
        self.api_timeout = settings["default.api.timeout.ms"] / 1000
        self.max_poll_records: int = settings["max.poll.records"]
        self.isolation_level = self.fetcher.isolation_level
        self.group_id: str | None = settings["group.id"]
        if self.group_id is None and "enable.auto.commit" in settings.explicit and settings["enable.auto.commit"]:
            raise ConfigError("enable.auto.commit cannot be true without a group.id")
        self.auto_commit = self.group_id is not None and settings["enable.auto.commit"]
        self.auto_commit_interval = settings["auto.commit.interval.ms"] / 1000
        check_group_protocol(settings)
        self.group_protocol: str = settings["group.protocol"]
        if (self.group_id is not None and self.group_protocol == "classic"
                and settings["heartbeat.interval.ms"] >= settings["session.timeout.ms"]):
            raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms "
                              f"({settings['heartbeat.interval.ms']} >= {settings['session.timeout.ms']})")
        self.mode = "none"  # "assigned" (assign()) or "subscribed" (subscribe())
        self.subscription = SubscriptionState()
        self.coordinator: ConsumerCoordinator | ConsumerMembership | None = None
        self.next_auto_commit: float | None = None
        self.async_commits: set[asyncio.Task[Any]] = set()
        # Replaced by the blocking consumer to run callbacks on the application's thread.
        self.run_callback: Callable[[Any, list[TopicPartition]], Any] = _call_on_loop
        self.closing = False
        self.closed = False
        self.close_deadline: float | None = None  # loop time, while closing

    def _check(self) -> None:
        if self.closed:
            raise ClientClosedError("the consumer is closed")

    def deadline(self, timeout: float | None) -> float:
        """Loop time ``timeout`` seconds from now (None: ``default.api.timeout.ms``), no later
        than close's deadline while the consumer is closing."""
        at = asyncio.get_running_loop().time() + (self.api_timeout if timeout is None else timeout)
        if self.close_deadline is not None:
            at = min(at, self.close_deadline)
        return at

    def _state(self, tp: TopicPartition) -> PartitionState:
        st = self.assignment.get(tp)
        if st is None:
            raise IllegalStateError(f"{tp.topic}-{tp.partition} is not assigned")
        return st

    def group(self, what: str) -> ConsumerCoordinator | ConsumerMembership:
        """The group membership (made on first use): the classic protocol's coordinator
        client, or the consumer protocol's membership (``group.protocol=consumer``).

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        if self.group_id is None:
            raise errors.InvalidGroupIdError(f"{what} {_NO_GROUP}")
        if self.coordinator is None:
            kind = ConsumerMembership if self.group_protocol == "consumer" else ConsumerCoordinator
            self.coordinator = kind(self.cluster, self.settings, self.client_id,
                                    self.subscription, self)
        return self.coordinator

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Group id, generation, member id and group instance id now, for a transactional
        producer's ``send_offsets_to_transaction`` (Kafka's ``groupMetadata()``; under
        ``group.protocol=consumer`` the generation is the member epoch).

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        coord = self.group("consumer_group_metadata()")
        gen = coord.generation
        return ConsumerGroupMetadata(coord.group_id, gen.generation_id, gen.member_id,
                                     coord.group_instance_id)

    # ------------------------------------------------------------------ what the coordinator uses

    def owned_partitions(self) -> list[TopicPartition]:
        return list(self.assignment)

    def set_assignment(self, partitions: list[TopicPartition]) -> None:
        """Replace the assignment, keeping the state (position, pause) of kept partitions."""
        keep = set(partitions)
        for tp in list(self.assignment):
            if tp not in keep:
                del self.assignment[tp]
                self.fetcher.drop(tp)
        for tp in partitions:
            self.assignment.setdefault(tp, PartitionState()).pending_revocation = False
        self.refresh_wanted_topics()
        if any(self.cluster.topic(tp.topic) is None for tp in partitions):
            self.cluster.request_update()
        self.wake()

    def mark_pending_revocation(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            st = self.assignment.get(tp)
            if st is not None:
                st.pending_revocation = True
                self.fetcher.drop(tp)

    def refresh_wanted_topics(self) -> None:
        wanted = set(self.subscription.topics) | {tp.topic for tp in self.assignment}
        if self.coordinator is not None:
            wanted |= self.coordinator.group_subscription
        self.cluster.wanted = wanted

    def wake(self) -> None:
        """Wake a ``poll`` waiting for data (the assignment or the membership changed)."""
        self.fetcher.arrived.set()

    async def invoke_listener(self, kind: str, partitions: list[TopicPartition]) -> BaseException | None:
        listener: RebalanceListener | None = self.subscription.listener
        fn = listener.get(kind) if listener is not None else None
        if fn is None:
            return None
        try:
            await self.run_callback(fn, partitions)
        except Exception as exc:  # noqa: BLE001 - handed back, raised from poll()
            log.error("rebalance callback on partitions %s of %s failed: %r", kind, partitions, exc)
            return exc
        return None

    def consumed_offsets(self, partitions: list[TopicPartition] | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
        tps = self.assignment if partitions is None else partitions
        out = {}
        for tp in tps:
            st = self.assignment.get(tp)
            if st is not None and st.position is not None:
                out[tp] = OffsetAndMetadata(st.position, "", st.leader_epoch)
        return out

    async def commit_before_revocation(self, partitions: list[TopicPartition] | None,
                                       timeout: float) -> None:
        """Auto commit before partitions go: retried for up to ``timeout``; failures are
        logged (as Kafka does), the rebalance goes on."""
        if not self.auto_commit:
            return
        offsets = self.consumed_offsets(partitions)
        coord = self.group("auto commit")
        try:
            await commit_offsets(coord, offsets, group_managed=self.mode == "subscribed",
                                 deadline=self.deadline(timeout), retry=True, skip_deleted=True)
        except (errors.KafkaError, ValueError) as exc:
            log.warning("group %s: auto commit of %s before a rebalance failed: %s",
                        self.group_id, offsets, exc)

    # ------------------------------------------------------------------ assignment

    async def assign(self, partitions: list[TopicPartition]) -> None:
        self._check()
        if self.mode == "subscribed":
            raise IllegalStateError("assign() on a subscribed consumer: subscribing and assigning "
                                    "are exclusive; call unsubscribe() first")
        if not partitions:
            await self.unsubscribe()
            return
        self._maybe_auto_commit(force=True)
        self.mode = "assigned"
        self.set_assignment(partitions)
        self.cluster.request_update()

    async def subscribe(self, topics: list[str] | None, pattern: Any, listener: RebalanceListener | None) -> None:
        self._check()
        coord = self.group("subscribe()")
        if self.mode == "assigned":
            raise IllegalStateError("subscribe() on a consumer with assigned partitions: "
                                    "assigning and subscribing are exclusive; call unsubscribe() first")
        if topics is not None and not topics:
            await self.unsubscribe()
            return
        sub = self.subscription
        if self.mode == "subscribed" and (sub.pattern is None) != (pattern is None):
            raise IllegalStateError("switching between a topic list and a pattern: call "
                                    "unsubscribe() first")
        sub.pattern = pattern
        sub.topics = frozenset(topics) if topics is not None else frozenset()
        sub.listener = listener
        self.cluster.all_topics = pattern is not None
        self.mode = "subscribed"
        coord.invalidate_metadata()
        self.refresh_wanted_topics()
        self.cluster.request_update()
        self.wake()

    async def unsubscribe(self) -> None:
        """Leave the group (revoking the partitions) or drop the manual assignment."""
        self._check()
        try:
            if self.mode == "subscribed" and self.coordinator is not None:
                await self.coordinator.unsubscribe()
        finally:
            self.subscription.topics = frozenset()
            self.subscription.pattern = None
            self.subscription.listener = None
            self.cluster.all_topics = False
            self.mode = "none"
            self.set_assignment([])

    # ------------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check()
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        st = self._state(tp)
        st.position = offset
        st.reset_to = None
        self.fetcher.drop(tp)

    def request_reset(self, tps: list[TopicPartition], strategy: str) -> None:
        self._check()
        for tp in tps:
            st = self._state(tp)
            st.position = None
            st.reset_to = strategy
            self.fetcher.drop(tp)

    async def update_positions(self, timeout: float | None = None, *, from_poll: bool = False) -> None:
        """Give every assigned partition without a position one: a pending seek, else the
        group's committed offset, else ``auto.offset.reset``. ``from_poll``: an OffsetFetch
        sent is waited for even past ``timeout`` (poll's; see ``fetch_committed``).

        Raises:
            KafkaTimeoutError: not done within ``timeout`` (default ``default.api.timeout.ms``).
            NoOffsetForPartitionError: nothing to start from and ``auto.offset.reset`` none.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.api_timeout if timeout is None else timeout)
        if self.group_id is not None:
            init = [tp for tp, st in self.assignment.items() if st.position is None and st.reset_to is None]
            if init:
                found = await fetch_committed(self.group("committed offsets"), init, deadline,
                                              bound_answer=not from_poll)
                for tp in init:
                    st = self.assignment.get(tp)
                    if st is None or st.position is not None or st.reset_to is not None:
                        continue
                    om = found.get(tp)
                    if om is not None:
                        st.position, st.leader_epoch = om.offset, om.leader_epoch
                    else:
                        st.reset_to = self.reset_policy
        need: dict[TopicPartition, int] = {}
        for tp, st in self.assignment.items():
            if st.position is not None:
                continue
            strategy = st.reset_to or self.reset_policy
            if strategy == "none":
                raise NoOffsetForPartitionError(
                    f"{tp.topic}-{tp.partition} has no position"
                    + (" and no committed offset" if self.group_id else "")
                    + ", and auto.offset.reset is none")
            need[tp] = EARLIEST if strategy == "earliest" else LATEST
        if not need:
            return
        found_offsets = await list_offsets(self.cluster, need, isolation_level=self.isolation_level,
                                           timeout=max(0.01, deadline - loop.time()),
                                           backoff=self.cluster.retry_backoff)
        for tp, (offset, _) in found_offsets.items():
            state = self.assignment.get(tp)
            if state is not None and state.position is None:
                state.position = offset
                state.reset_to = None

    def _handle_out_of_range(self) -> None:
        oor, self.fetcher.out_of_range = self.fetcher.out_of_range, []
        for tp, offset in oor:
            st = self.assignment.get(tp)
            if st is None or st.position != offset:
                continue  # unassigned, or seeked since the fetch (Kafka drops it as stale)
            if self.reset_policy == "none":
                raise NoOffsetForPartitionError(
                    f"{tp.topic}-{tp.partition}: offset {st.position} is out of range and "
                    "auto.offset.reset is none")
            st.position = None
            st.reset_to = self.reset_policy  # out of range: reset, not the committed offset

    def _raise_errors(self) -> None:
        errs, self.fetcher.errors = self.fetcher.errors, []
        if errs:
            raise errs[0]

    async def _wait_for_data(self, deadline: float) -> None:
        """Fetch until data is there, ``deadline`` (loop time) passes, or the group needs
        this consumer to rejoin."""
        loop = asyncio.get_running_loop()
        coord = self.coordinator if self.mode == "subscribed" else None
        while True:
            if coord is not None:
                coord.last_poll = loop.time()  # inside poll() counts as polling
            self._raise_errors()
            self._handle_out_of_range()
            if self.cluster.needs_update():
                try:
                    await asyncio.wait_for(self.cluster.update(), max(0.01, deadline - loop.time()))
                except Exception:  # noqa: BLE001 - retried on the next turn; poll must not fail
                    pass
            if any(st.position is None for st in self.assignment.values()):
                try:
                    await self.update_positions(max(0.01, deadline - loop.time()), from_poll=True)
                except KafkaTimeoutError:
                    if loop.time() < deadline:
                        raise
                    return  # the next poll goes on
            self.fetcher.send_fetches()
            if self.fetcher.completed:
                return
            left = deadline - loop.time()
            if left <= 0 or (coord is not None and coord.needs_poll()):
                return
            self.fetcher.arrived.clear()
            try:
                await asyncio.wait_for(self.fetcher.arrived.wait(), min(left, 0.5))
            except asyncio.TimeoutError:
                pass

    async def _poll(self, timeout: float, take: Callable[[], Any]) -> Any:
        self._check()
        if self.mode == "none":
            raise IllegalStateError("poll() before assign() or subscribe(): no partitions to consume")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            if self.mode == "subscribed":
                coord = self.group("subscribe()")
                # Eager: nothing to fetch while rebalancing, so wait for it; cooperative:
                # the partitions kept are fetched meanwhile.
                await coord.poll(deadline, wait=not self.assignment or coord.protocol == EAGER)
            self._maybe_auto_commit()
            if self.assignment:
                await self._wait_for_data(deadline)
                out = take()
                if out:
                    self.fetcher.send_fetches()  # prefetch while the caller processes
                    return out
            else:
                left = deadline - loop.time()
                member = self.coordinator
                if member is not None:
                    member.last_poll = loop.time()
                if left > 0 and not (member is not None and member.needs_poll()):
                    self.fetcher.arrived.clear()
                    try:
                        await asyncio.wait_for(self.fetcher.arrived.wait(), min(left, 0.5))
                    except asyncio.TimeoutError:
                        pass
            if loop.time() >= deadline:
                return take()

    async def poll(self, timeout: float, max_records: int | None) -> list[ConsumerRecord]:
        return await self._poll(  # type: ignore[no-any-return]
            timeout, lambda: self.fetcher.take_records(max_records or self.max_poll_records))

    async def poll_columns(self, timeout: float, copy_values: bool = True
                           ) -> dict[TopicPartition, logcore.Columns]:
        return await self._poll(  # type: ignore[no-any-return]
            timeout, lambda: self.fetcher.take_columns(copy_values))

    async def position(self, tp: TopicPartition, timeout: float | None) -> int:
        self._check()
        st = self._state(tp)
        if st.position is None:
            await self.update_positions(timeout)
        assert st.position is not None
        return st.position

    async def offsets(self, tps: list[TopicPartition], ts: int | dict[TopicPartition, int],
                      timeout: float | None) -> dict[TopicPartition, tuple[int, int]]:
        wanted = dict(ts) if isinstance(ts, dict) else {tp: ts for tp in tps}
        return await list_offsets(self.cluster, wanted, isolation_level=self.isolation_level,
                                  timeout=self.api_timeout if timeout is None else timeout,
                                  backoff=self.cluster.retry_backoff)

    # ------------------------------------------------------------------ commits

    def _maybe_auto_commit(self, force: bool = False) -> None:
        """From poll: commit the consumed positions asynchronously once the interval passed."""
        if not self.auto_commit or not self.assignment:
            return
        now = asyncio.get_running_loop().time()
        if self.next_auto_commit is None:
            self.next_auto_commit = now + self.auto_commit_interval
        if not force and now < self.next_auto_commit:
            return
        self.next_auto_commit = now + self.auto_commit_interval
        offsets = self.consumed_offsets()
        if offsets:
            task = self.start_async_commit(offsets, consumed=True)
            task.add_done_callback(self._auto_commit_done)

    def _auto_commit_done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if is_retriable(exc):
            log.debug("group %s: auto commit failed (retried soon): %s", self.group_id, exc)
            self.next_auto_commit = asyncio.get_running_loop().time() + self.cluster.retry_backoff
        else:
            log.warning("group %s: auto commit failed: %s", self.group_id, exc)

    def start_async_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                           consumed: bool = False) -> asyncio.Task[Any]:
        """Send one OffsetCommit (no retries); the task's result is ``offsets``.
        ``consumed``: they are the consumed positions (a deleted topic's are left out)."""
        coord = self.group("commit()")

        async def run() -> dict[TopicPartition, OffsetAndMetadata]:
            await commit_offsets(coord, offsets, group_managed=self.mode == "subscribed",
                                 deadline=self.deadline(None), retry=False, skip_deleted=consumed)
            return offsets

        loop = asyncio.get_running_loop()
        task = loop.create_task(run())
        self.async_commits.add(task)
        task.add_done_callback(self.async_commits.discard)
        task.add_done_callback(_retrieve)
        return task

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata] | None,
                     timeout: float | None, *, consumed: bool = False
                     ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Commit ``offsets`` (None: the consumed positions), retrying retriable errors for
        up to ``timeout`` (default ``default.api.timeout.ms``; while closing, no longer than
        close's deadline). ``consumed``: ``offsets`` are the consumed positions (partitions
        of a topic deleted meanwhile are left out instead of failing the commit)."""
        self._check()
        coord = self.group("commit()")
        if offsets is None:
            offsets, consumed = self.consumed_offsets(), True
        await commit_offsets(coord, offsets, group_managed=self.mode == "subscribed",
                             deadline=self.deadline(timeout), retry=True, skip_deleted=consumed)
        return offsets

    async def committed(self, partitions: list[TopicPartition], timeout: float | None
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self._check()
        coord = self.group("committed()")
        return await fetch_committed(coord, partitions, self.deadline(timeout))

    # ------------------------------------------------------------------ close

    async def close(self, timeout: float | None = None) -> None:
        """Auto commit, revoke (callbacks) and leave the group, stop fetching, close
        connections. Waits at most ``timeout`` (30 s by default) for the group: the auto
        commit, the revoke callback (and the commits it makes) and the LeaveGroup."""
        if self.closed or self.closing:
            return
        self.closing = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (CLOSE_TIMEOUT if timeout is None else timeout)
        self.close_deadline = deadline
        try:
            coord = self.coordinator
            if coord is not None:
                if self.auto_commit:
                    offsets = self.consumed_offsets()
                    try:
                        await commit_offsets(coord, offsets, group_managed=self.mode == "subscribed",
                                             deadline=deadline, retry=True, skip_deleted=True)
                    except (errors.KafkaError, ValueError) as exc:
                        log.warning("group %s: auto commit on close failed: %s", self.group_id, exc)
                if self.async_commits:
                    await asyncio.wait(list(self.async_commits), timeout=max(0.0, deadline - loop.time()))
                await coord.close(deadline)
        finally:
            self.closed = True
            await cancel_all(list(self.fetcher.in_flight.values()) + list(self.async_commits))
            self.fetcher.clear()
            if self.coordinator is not None:
                await self.coordinator.close_link()
            await self.cluster.close()


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: an async commit's failure is the caller's to read
