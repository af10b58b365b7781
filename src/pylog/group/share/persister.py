"""The share-partition leader's way to the share coordinator (Kafka's ``DefaultStatePersister``
and ``PersisterStateManager``).

A share partition's state lives with its share coordinator, the leader of partition
``partition_of(key)`` of ``__share_group_state`` (``state_store.ShareStateStore``). The
leader of the topic partition reads the state when it makes the share partition and writes
every change before it answers ShareFetch / ShareAcknowledge:

- **where**: on a single node the coordinator is always this broker; in cluster mode the
  leader of the state partition from the metadata cache (``broker.cluster.find_coordinator``,
  which also makes the topic through ZooKeeper on first use). This broker: a direct call
  into its ``ShareStateStore``; another broker: the RPC over the inter-broker listener
  (``net.channel.BrokerChannels``, as the transaction coordinator's markers: one ordered
  channel per broker, with the listener's TLS and SASL settings), ReadShareGroupState / WriteShareGroupState / DeleteShareGroupState v0;
- **retries**: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
  NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT and a broken connection are retried
  (the coordinator is looked up again) after a backoff of 50 ms doubling to 1 s, until the
  call's deadline; then that code is the answer;
- **writes** are coalesced: ``write`` notes the share partition's whole state (its start
  offset and every in-flight offset's state, acquired ones as available), one flush per
  event-loop turn sends what was noted (one WriteShareGroupState per group and coordinator),
  and flushes run one after the other, so that a share partition's writes reach the
  coordinator in order. ``flushed`` waits for what was noted before it and gives the error
  code of each share partition that failed.

Event-loop affinity: the broker's loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pylog import errors
from pylog.log.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME
from pylog.log.topics import topic_id_str
from pylog.net.channel import BrokerChannels

from .share_partition import StateBatch
from .state_store import ShareState, ShareStateStore, StateResult

__all__ = ["RETRIABLE", "SHARE", "SharePersister"]

log = logging.getLogger("pylog.share.persister")

ShareKey = tuple[str, uuid.UUID, int]

#: FindCoordinator's key type of a share partition (Kafka's ``CoordinatorType.SHARE``).
SHARE = 2

RETRIABLE = frozenset({
    errors.NotCoordinatorError.code, errors.CoordinatorNotAvailableError.code,
    errors.CoordinatorLoadInProgressError.code, errors.NotEnoughReplicasError.code,
    errors.NotEnoughReplicasAfterAppendError.code, errors.RequestTimedOutError.code,
    errors.NetworkError.code,
})
BACKOFF_S, BACKOFF_MAX_S = 0.05, 1.0
_NETWORK = errors.NetworkError.code


def _one(resp: Any, key: ShareKey) -> Any:
    """The partition result for ``key`` in a state RPC's response, or the StateResult of
    its error (a broken connection: NETWORK_EXCEPTION, retried)."""
    if isinstance(resp, BaseException):
        return StateResult(_NETWORK, str(resp))
    _gid, tid, part = key
    for t in resp.results:
        for p in t.partitions:
            if t.topic_id == tid and p.partition == part:
                if p.error_code:
                    return StateResult(p.error_code, p.error_message)
                return p
    return StateResult(errors.UnknownServerError.code, "the coordinator did not answer for the partition")


def coordinator_key(key: ShareKey) -> str:
    """FindCoordinator's key of a share partition: ``group:topicId:partition``."""
    gid, tid, part = key
    return f"{gid}:{topic_id_str(tid)}:{part}"


class SharePersister:
    """See the module docstring. One per broker (``ShareService.persister``)."""

    def __init__(self, broker: Any, store: ShareStateStore) -> None:
        self.broker = broker
        self.store = store
        self._channels: Any = None  # MarkerChannels, made on the first remote call
        self._dirty: dict[ShareKey, ShareState] = {}
        self._next: asyncio.Future[dict[ShareKey, int]] | None = None
        self._inflight: asyncio.Future[dict[ShareKey, int]] | None = None
        self._runner: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # Flush generations: ``_next`` is flush ``_gen``; the last failed write of each share
        # partition, with its flush's generation (a success clears it), so that ``flushed``
        # reports a failure of a flush that ended before it was called (see ``mark``).
        self._gen = 0
        self._failures: dict[ShareKey, tuple[int, int]] = {}
        #: Called with each flush's failures (``ShareService`` drops fenced share partitions).
        self.on_failed: Callable[[dict[ShareKey, int]], None] | None = None

    def _timeout_s(self) -> float:
        return self.broker.config["share.coordinator.write.timeout.ms"] / 1000.0

    # ------------------------------------------------------------------ routing

    async def _route(self, key: ShareKey) -> tuple[int, Any]:
        """(0, None): this broker's store; (0, BrokerInfo): another broker; (code, None)."""
        if self.broker.cluster is None:
            try:
                await self.store.ensure_topic()
            except errors.ApiError as exc:
                log.error("cannot create %s: %s", SHARE_GROUP_STATE_TOPIC_NAME, exc)
                return errors.CoordinatorNotAvailableError.code, None
            return 0, None
        code, _message, b = await self.broker.cluster.find_coordinator(coordinator_key(key), SHARE)
        if code:
            return code, None
        return 0, None if b.broker_id == self.broker.node_id else b

    async def _request(self, broker: Any, body: Any) -> Any:
        if self._channels is None:
            b = self.broker
            self._channels = BrokerChannels(f"pylog-share-persister-{b.node_id}",
                                            ssl_context=b.inter_broker_tls(), sasl=b.inter_broker_sasl())
        return await self._channels.request(broker, body)

    async def _retrying(self, what: str, attempt: Callable[[], Awaitable[StateResult]]) -> StateResult:
        deadline = self.broker.clock.monotonic() + self._timeout_s()
        backoff = BACKOFF_S
        while True:
            r = await attempt()
            if r.error_code not in RETRIABLE or self.broker.stopping:
                return r
            wait = min(backoff, deadline - self.broker.clock.monotonic())
            if wait <= 0:
                log.info("%s: gave up with error %d (%s)", what, r.error_code, r.error_message)
                return r
            await asyncio.sleep(wait)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    # ------------------------------------------------------------------ reads

    async def read(self, key: ShareKey, leader_epoch: int) -> StateResult:
        """ReadShareGroupState of one share partition (retried until the deadline)."""
        return await self._retrying(f"reading the state of {key}", lambda: self._read_once(key, leader_epoch))

    async def _read_once(self, key: ShareKey, leader_epoch: int) -> StateResult:
        code, where = await self._route(key)
        if code:
            return StateResult(code, "no share coordinator")
        if where is None:
            return await self.store.read_state(key, leader_epoch)
        from pylog.protocol.messages import ReadShareGroupStateRequest as R

        gid, tid, part = key
        resp = await self._request(where, R(group_id=gid, topics=[R.ReadStateData(
            topic_id=tid, partitions=[R.PartitionData(partition=part, leader_epoch=leader_epoch)])]))
        if isinstance(resp, BaseException):
            return StateResult(_NETWORK, str(resp))
        for t in resp.results:
            for p in t.partitions:
                if t.topic_id == tid and p.partition == part:
                    if p.error_code:
                        return StateResult(p.error_code, p.error_message)
                    return StateResult(0, None, ShareState(
                        p.state_epoch, leader_epoch, p.start_offset,
                        [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                         for b in p.state_batches]))
        return StateResult(errors.UnknownServerError.code, "the coordinator did not answer for the partition")

    # ------------------------------------------------------------------ the admin side

    async def read_summary(self, key: ShareKey) -> StateResult:
        """ReadShareGroupStateSummary of one share partition (the group coordinator's admin
        calls; retried until the deadline). A local coordinator answers with the whole
        state (batches and leader epoch); a remote one with version 0's fields only: state
        epoch and start offset (``leader_epoch`` -1, no batches)."""
        return await self._retrying(f"reading the summary of {key}", lambda: self._summary_once(key))

    async def _summary_once(self, key: ShareKey) -> StateResult:
        code, where = await self._route(key)
        if code:
            return StateResult(code, "no share coordinator")
        if where is None:
            return self.store.read_summary(key, -1)
        from pylog.protocol.messages import ReadShareGroupStateSummaryRequest as R

        gid, tid, part = key
        resp = await self._request(where, R(group_id=gid, topics=[R.ReadStateSummaryData(
            topic_id=tid, partitions=[R.PartitionData(partition=part, leader_epoch=-1)])]))
        p = _one(resp, key)
        if isinstance(p, StateResult):
            return p
        return StateResult(0, None, ShareState(p.state_epoch, -1, p.start_offset, []))

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> StateResult:
        """InitializeShareGroupState of one share partition: ``start_offset`` with no
        in-flight records under ``state_epoch``, which must be above the coordinator's
        (FENCED_STATE_EPOCH otherwise). A share-partition leader still holding the old state
        is fenced by its next write and loads the new one. Retried until the deadline."""
        return await self._retrying(f"initializing the state of {key}",
                                    lambda: self._initialize_once(key, state_epoch, start_offset))

    async def _initialize_once(self, key: ShareKey, state_epoch: int, start_offset: int) -> StateResult:
        code, where = await self._route(key)
        if code:
            return StateResult(code, "no share coordinator")
        if where is None:
            return await self.store.initialize_state(key, state_epoch, start_offset)
        from pylog.protocol.messages import InitializeShareGroupStateRequest as R

        gid, tid, part = key
        resp = await self._request(where, R(group_id=gid, topics=[R.InitializeStateData(
            topic_id=tid, partitions=[R.PartitionData(partition=part, state_epoch=state_epoch,
                                                      start_offset=start_offset)])]))
        p = _one(resp, key)
        return p if isinstance(p, StateResult) else StateResult(0)

    async def delete_now(self, key: ShareKey) -> StateResult:
        """DeleteShareGroupState of one share partition, answered (retried until the
        deadline); a write of it noted but not sent yet is dropped first."""
        self._dirty.pop(key, None)
        return await self._retrying(f"deleting the state of {key}", lambda: self._delete_once(key))

    # ------------------------------------------------------------------ deletes

    def delete(self, key: ShareKey) -> None:
        """DeleteShareGroupState of one share partition, in the background (retried)."""
        self._dirty.pop(key, None)
        self._failures.pop(key, None)
        task = asyncio.get_running_loop().create_task(
            self._retrying(f"deleting the state of {key}", lambda: self._delete_once(key)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete_once(self, key: ShareKey) -> StateResult:
        code, where = await self._route(key)
        if code:
            return StateResult(code, "no share coordinator")
        if where is None:
            return await self.store.delete_state(key)
        from pylog.protocol.messages import DeleteShareGroupStateRequest as R

        gid, tid, part = key
        resp = await self._request(where, R(group_id=gid, topics=[R.DeleteStateData(
            topic_id=tid, partitions=[R.PartitionData(partition=part)])]))
        if isinstance(resp, BaseException):
            return StateResult(_NETWORK, str(resp))
        codes = [(p.error_code, p.error_message) for t in resp.results for p in t.partitions]
        return StateResult(*codes[0]) if codes else StateResult(0)

    # ------------------------------------------------------------------ writes

    def write(self, key: ShareKey, state: ShareState) -> None:
        """Note the share partition's state; sent with the next flush."""
        self._dirty[key] = state
        if self._next is None:
            loop = asyncio.get_running_loop()
            self._next = loop.create_future()
            self._gen += 1
            loop.call_soon(self._kick)

    def _kick(self) -> None:
        if self._runner is None or self._runner.done():
            self._runner = asyncio.get_running_loop().create_task(self._run())

    def mark(self) -> int:
        """The generation of the first flush that can carry a write noted from now on: a
        request takes it before its changes and passes it to ``flushed``."""
        return self._gen if self._next is not None else self._gen + 1

    async def flushed(self, since: int | None = None) -> dict[ShareKey, int]:
        """Wait until what was noted so far is written; the share partitions whose write
        failed, with their error codes: those of the flushes waited for and, with ``since``
        (a ``mark``), the last failure of each share partition in a flush from that
        generation on, so a write that failed before this call is still reported."""
        out: dict[ShareKey, int] = {}
        for fut in [f for f in (self._inflight, self._next) if f is not None]:
            out.update(await asyncio.shield(fut))
        if since is not None:
            out.update({k: c for k, (gen, c) in self._failures.items() if gen >= since and k not in out})
        return out

    async def _run(self) -> None:
        while self._next is not None:
            fut, self._next = self._next, None
            gen = self._gen
            dirty, self._dirty = self._dirty, {}
            self._inflight = fut
            try:
                failed = await self._write_all(dirty)
            except Exception as exc:  # noqa: BLE001 - every waiter must be answered
                log.exception("writing share-partition state failed: %s", exc)
                failed = dict.fromkeys(dirty, errors.UnknownServerError.code)
            finally:
                self._inflight = None
            for key in dirty:
                if key in failed:
                    self._failures[key] = (gen, failed[key])
                else:
                    self._failures.pop(key, None)
            if not fut.done():
                fut.set_result(failed)
            if failed and self.on_failed is not None:
                self.on_failed(failed)

    async def _write_all(self, dirty: dict[ShareKey, ShareState]) -> dict[ShareKey, int]:
        failed: dict[ShareKey, int] = {}
        pending = dict(dirty)
        deadline = self.broker.clock.monotonic() + self._timeout_s()
        backoff = BACKOFF_S
        while pending:
            codes = await self._write_once(pending)
            retry = {k: pending[k] for k, c in codes.items() if c in RETRIABLE}
            failed.update({k: c for k, c in codes.items() if c and c not in RETRIABLE})
            wait = min(backoff, deadline - self.broker.clock.monotonic())
            if not retry or wait <= 0 or self.broker.stopping:
                failed.update({k: codes[k] for k in retry})
                break
            await asyncio.sleep(wait)
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            pending = retry
        for k, c in failed.items():
            log.info("writing the state of share partition %s failed with error %d", k, c)
        return failed

    async def _write_once(self, states: dict[ShareKey, ShareState]) -> dict[ShareKey, int]:
        """One attempt: local writes and one request per (coordinator, group)."""
        codes: dict[ShareKey, int] = {}
        local: list[ShareKey] = []
        remote: dict[tuple[int, str], tuple[Any, list[ShareKey]]] = {}
        for key in states:
            code, where = await self._route(key)
            if code:
                codes[key] = code
            elif where is None:
                local.append(key)
            else:
                remote.setdefault((where.broker_id, key[0]), (where, []))[1].append(key)
        calls: list[Awaitable[Any]] = [self.store.write_state(k, *self._args(states[k])) for k in local]
        calls += [self._write_remote(where, gid, keys, states) for (_b, gid), (where, keys) in remote.items()]
        results = await asyncio.gather(*calls)
        for k, r in zip(local, results[:len(local)], strict=True):
            codes[k] = r.error_code
        for r in results[len(local):]:
            codes.update(r)
        return codes

    @staticmethod
    def _args(st: ShareState) -> tuple[int, int, int, list[StateBatch]]:
        return st.state_epoch, st.leader_epoch, st.start_offset, st.batches

    async def _write_remote(self, where: Any, gid: str, keys: list[ShareKey],
                            states: dict[ShareKey, ShareState]) -> dict[ShareKey, int]:
        from pylog.protocol.messages import WriteShareGroupStateRequest as R

        by_topic: dict[uuid.UUID, list[Any]] = {}
        for key in keys:
            st = states[key]
            by_topic.setdefault(key[1], []).append(R.PartitionData(
                partition=key[2], state_epoch=st.state_epoch, leader_epoch=st.leader_epoch,
                start_offset=st.start_offset, state_batches=[
                    R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                 delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                    for b in st.batches]))
        resp = await self._request(where, R(group_id=gid, topics=[
            R.WriteStateData(topic_id=t, partitions=ps) for t, ps in by_topic.items()]))
        if isinstance(resp, BaseException):
            return dict.fromkeys(keys, _NETWORK)
        out = dict.fromkeys(keys, errors.UnknownServerError.code)
        for t in resp.results:
            for p in t.partitions:
                if (gid, t.topic_id, p.partition) in out:
                    out[(gid, t.topic_id, p.partition)] = p.error_code
        return out

    # ------------------------------------------------------------------ lifecycle

    def retain(self, live: Any) -> None:
        if self._channels is not None:
            self._channels.retain(live)

    async def close(self) -> None:
        """Finish the writes noted so far, then close the channels."""
        if self._next is not None or self._inflight is not None:
            self._kick()
            await self.flushed()
        for task in list(self._tasks):
            task.cancel()
        if self._channels is not None:
            await self._channels.close()
