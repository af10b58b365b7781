"""The transactional producer's requests (Kafka's ``TransactionManager`` handlers, KIP-98).

``TransactionManager`` drives ``_txn_state.TransactionState`` with the coordinator:

- **Coordinator**: FindCoordinator with key type 1 (the ``transactional.id``) to any
  broker; the group coordinator for ``send_offsets_to_transaction`` with key type 0.
  NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and lost connections forget the coordinator
  and look it up again.
- **init_transactions**: InitProducerId with the id and ``transaction.timeout.ms``; the
  answer's producer id and epoch go to the sender (sequences start over). A new epoch
  fences older producers with the same id; their open transaction is aborted by the
  coordinator.
- **Partitions**: partitions sent to for the first time in the transaction are pending;
  when the sender finds a batch of one ready to go (``linger.ms`` passed, full, or a flush
  or commit wants it), every pending partition is added with one AddPartitionsToTxn
  (v0-3); their batches wait until it is answered.
- **send_offsets_to_transaction**: AddOffsetsToTxn to the transaction coordinator, then
  TxnOffsetCommit to the group coordinator with the consumer's generation, member id and
  group instance id (v3+), retrying the partitions still to do.
- **commit / abort**: commit flushes every record and fails when one failed (the
  transaction is then abortable); abort fails the records not sent yet
  (``TransactionAbortedError``) and waits for those in flight. Then EndTxn, when the
  coordinator knows of the transaction. After an abort in which a batch with sequence
  numbers failed, InitProducerId with the current id and epoch bumps the epoch (KIP-360) so
  the partitions accept sequence 0 again.

Retries: CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT (and
UNKNOWN_TOPIC_OR_PARTITION for partitions) are retried, with ``retry.backoff.ms`` doubling
up to ``retry.backoff.max.ms`` (the first AddPartitionsToTxn of a transaction after 20 ms:
the previous transaction's markers are usually being written), as long as it takes: each
public call waits at most its
timeout (``max.block.ms`` by default) and then raises ``RetriableTransactionError`` while
the work goes on; calling the same method again waits for it (Kafka's semantics).

Event-loop affinity: the producer's loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from pylog import errors
from pylog.client.aio._accumulator import PendingBatch
from pylog.client.aio._cluster import Cluster
from pylog.client.aio._rebalance import as_offsets
from pylog.client.aio._txn_state import (
    REFIND_ERRORS,
    RETRY_ERRORS,
    TransactionState,
    TxnState,
    classify,
)
from pylog.client.errors import (
    AbortableTransactionError,
    CommitFailedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    RetriableTransactionError,
    TransactionAbortedError,
    TransactionError,
)
from pylog.client.records import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from pylog.net.connection import Connection
from pylog.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

if TYPE_CHECKING:
    from pylog.client.aio._sender import Sender

__all__ = ["TransactionManager", "as_group_metadata"]

log = logging.getLogger("pylog.client.producer")

T = TypeVar("T")

# The first AddPartitionsToTxn of a transaction usually meets CONCURRENT_TRANSACTIONS while
# the coordinator still writes the previous one's markers: retried after this instead of
# retry.backoff.ms (the Java client's ADD_PARTITIONS_RETRY_BACKOFF_MS).
ADD_PARTITIONS_RETRY_BACKOFF = 0.020

# Members the group no longer knows: the offsets belong to a consumer that lost its
# partitions (Java: CommitFailedException, abortable). STALE_MEMBER_EPOCH: a consumer
# group member's metadata from an epoch it has left (group.protocol=consumer).
_MEMBER_ERRORS = (errors.UnknownMemberIdError, errors.IllegalGenerationError,
                  errors.FencedInstanceIdError, errors.StaleMemberEpochError)


class _Again(Exception):
    """A request to send again after a backoff; ``refind``: look the coordinator up first."""

    def __init__(self, cause: BaseException, refind: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.refind = refind


def _worst(codes: list[int]) -> int:
    """The code that decides a request with several: one that is not retried, else one that
    needs the coordinator again, else any (OPERATION_NOT_ATTEMPTED only says another
    partition failed)."""
    def rank(code: int) -> int:
        cls = errors.error_for_code(code)
        if cls is errors.OperationNotAttemptedError:
            return 3
        if cls in RETRY_ERRORS:
            return 2
        return 1 if cls in REFIND_ERRORS else 0
    return min(codes, key=rank)


def as_group_metadata(group_metadata: Any) -> ConsumerGroupMetadata:
    """``Consumer.consumer_group_metadata()``, or a bare group id (Java's older form)."""
    if isinstance(group_metadata, ConsumerGroupMetadata):
        return group_metadata
    if isinstance(group_metadata, str) and group_metadata:
        return ConsumerGroupMetadata(group_metadata)
    raise TypeError("group_metadata must be Consumer.consumer_group_metadata() (or a group "
                    f"id string), got {group_metadata!r}")


class TransactionManager:
    """Transactions of one producer (see the module docstring).

    Args:
        cluster: the producer's cluster view.
        settings: resolved producer settings (``transactional.id`` set).
        sender: the producer's sender (producer id and epoch, queues, flush).
    """

    def __init__(self, cluster: Cluster, settings: dict[str, Any], sender: Sender) -> None:
        self.cluster = cluster
        self.sender = sender
        self.transactional_id: str = settings["transactional.id"]
        self.timeout_ms: int = settings["transaction.timeout.ms"]
        self.max_block = settings["max.block.ms"] / 1000
        self.backoff = settings["retry.backoff.ms"] / 1000
        self.backoff_max = max(self.backoff, settings["retry.backoff.max.ms"] / 1000)
        self.state = TransactionState(self.transactional_id)
        self._coordinators: dict[tuple[int, str], tuple[int, str, int]] = {}
        self._own_conns: dict[int, Connection] = {}
        self._op: tuple[str, asyncio.Task[Any]] | None = None
        self._adding: asyncio.Task[None] | None = None
        self._closed = False

    # ------------------------------------------------------------------ public calls

    async def init_transactions(self, timeout: float | None) -> None:
        """Register the ``transactional.id``: fences older producers with it and completes
        (commits or aborts) what they left open."""
        await self._run("init_transactions", self._init, timeout)

    def begin_transaction(self) -> None:
        self.state.begin()

    async def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any,
                                          timeout: float | None) -> None:
        wanted = as_offsets(offsets)
        meta = as_group_metadata(group_metadata)
        self.state.check_in_transaction("send_offsets_to_transaction()")
        await self._run("send_offsets_to_transaction",
                        lambda: self._send_offsets(wanted, meta), timeout)

    async def commit_transaction(self, timeout: float | None) -> None:
        await self._run("commit_transaction", self._commit, timeout)

    async def abort_transaction(self, timeout: float | None) -> None:
        await self._run("abort_transaction", self._abort, timeout)

    async def close(self) -> None:
        self._closed = True
        tasks = [t for t in (self._adding, self._op[1] if self._op else None) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing
                pass
        for conn in self._own_conns.values():
            await conn.close()
        self._own_conns.clear()

    async def _run(self, name: str, work: Callable[[], Coroutine[Any, Any, None]],
                   timeout: float | None) -> None:
        """Run ``work`` as this call's task, or wait again for the same call's task that an
        earlier timeout left running."""
        task: asyncio.Task[Any] | None = None
        if self._op is not None:
            running, t = self._op
            if running == name:
                task = t
            elif not t.done():
                raise IllegalStateError(f"{name}(): {running}() is still in progress; call "
                                        f"{running}() again to wait for it")
            else:  # another call's task ended unobserved: its outcome is in the state
                if not t.cancelled():
                    t.exception()
                self._op = None
        if task is None:
            if self._closed:
                raise IllegalStateError(f"{name}() on a closed producer")
            task = asyncio.get_running_loop().create_task(work())
            self._op = (name, task)
        limit = self.max_block if timeout is None else timeout
        try:
            await asyncio.wait_for(asyncio.shield(task), max(0.0, limit))
        except asyncio.TimeoutError:
            raise RetriableTransactionError(
                f"{name}() did not complete within {limit:g} s; it goes on: call {name}() "
                "again to wait for it") from None
        finally:
            if task.done() and self._op is not None and self._op[1] is task:
                self._op = None

    # ------------------------------------------------------------------ the work

    async def _init(self) -> None:
        self.state.begin_init()
        await self._init_producer_id(bump=False)
        self.state.initialized()

    async def _init_producer_id(self, *, bump: bool) -> None:
        sender = self.sender

        async def attempt(conn: Connection) -> Any:
            version = conn.version_for(InitProducerIdRequest)
            keep = bump and version >= 3  # KIP-360: bump this id's epoch, not a new id
            resp = await conn.send(InitProducerIdRequest(
                transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms,
                producer_id=sender.producer_id if keep else -1,
                producer_epoch=sender.producer_epoch if keep else -1), version)
            self._check(resp.error_code, "InitProducerId")
            return resp

        resp = await self._call("InitProducerId", None, attempt, always=True)
        sender.set_producer_id(resp.producer_id, resp.producer_epoch)
        log.info("transactional id %r: producer id %d epoch %d", self.transactional_id,
                 resp.producer_id, resp.producer_epoch)

    async def _add_partitions(self) -> None:
        """One AddPartitionsToTxn for every partition pending now (retried until answered
        or the transaction stops)."""
        tps = self.state.pending_partitions()
        if not tps:
            return
        sender = self.sender
        R = AddPartitionsToTxnRequest

        async def attempt(conn: Connection) -> None:
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            version = conn.version_for(R, 3)
            resp = await conn.send(R(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=sender.producer_id,
                v3_and_below_producer_epoch=sender.producer_epoch,
                v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                     for t, ps in by_topic.items()]), version)
            ok: list[tuple[str, int]] = []
            failed: dict[tuple[str, int], int] = {}
            for t in resp.results_by_topic_v3_and_below:
                for p in t.results_by_partition:
                    if p.partition_error_code:
                        failed[(t.name, p.partition_index)] = p.partition_error_code
                    else:
                        ok.append((t.name, p.partition_index))
            self.state.added(ok)
            if failed:
                self._check(_worst(list(failed.values())), "AddPartitionsToTxn " + ", ".join(
                    f"{t}-{p}" for t, p in sorted(failed)))

        try:
            await self._call("AddPartitionsToTxn", None, attempt)
        except TransactionError:
            pass  # recorded in the state; the sender fails the partitions' records
        finally:
            sender.wake()

    async def _send_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                            meta: ConsumerGroupMetadata) -> None:
        if not offsets:
            return
        sender = self.sender

        async def add_offsets(conn: Connection) -> None:
            resp = await conn.send(AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id, producer_id=sender.producer_id,
                producer_epoch=sender.producer_epoch, group_id=meta.group_id),
                conn.version_for(AddOffsetsToTxnRequest, 4))
            self._check(resp.error_code, f"AddOffsetsToTxn for group {meta.group_id!r}")

        await self._call("AddOffsetsToTxn", None, add_offsets)
        self.state.offsets_added()
        todo = dict(offsets)
        R = TxnOffsetCommitRequest

        async def commit(conn: Connection) -> None:
            by_topic: dict[str, list[Any]] = {}
            for tp, om in sorted(todo.items()):
                by_topic.setdefault(tp.topic, []).append(R.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
            resp = await conn.send(R(
                transactional_id=self.transactional_id, group_id=meta.group_id,
                producer_id=sender.producer_id, producer_epoch=sender.producer_epoch,
                generation_id=meta.generation_id, member_id=meta.member_id,
                group_instance_id=meta.group_instance_id,
                topics=[R.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()]), conn.version_for(R, 4))
            codes = []
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code == 0:
                        todo.pop(TopicPartition(t.name, p.partition_index), None)
                    else:
                        codes.append(p.error_code)
            if codes:
                worst = _worst(codes)
                cls = errors.error_for_code(worst) or errors.UnknownServerError
                if cls in _MEMBER_ERRORS:
                    exc = CommitFailedError(
                        f"TxnOffsetCommit for group {meta.group_id!r}: {cls.name}: the "
                        "consumer is no longer a member of this generation (it rebalanced)")
                    raise self.state.fail(AbortableTransactionError(str(exc), exc))
                self._check(worst, f"TxnOffsetCommit for group {meta.group_id!r}")

        await self._call("TxnOffsetCommit", meta.group_id, commit)

    async def _commit(self) -> None:
        self.state.begin_commit()
        await self.sender.flush_all()
        st = self.state
        if st.state is not TxnState.COMMITTING:  # a record failed while flushing
            assert st.last_error is not None
            raise st.last_error
        if st.started:
            await self._end_txn(commit=True)
        st.completed()

    async def _abort(self) -> None:
        self.state.begin_abort()
        adding = self._adding
        if adding is not None and not adding.done():
            # Its answer decides whether the coordinator knows of the transaction; it stops
            # retrying now that the transaction is being aborted.
            await asyncio.wait([adding])
        self.sender.abort_undrained(TransactionAbortedError(
            f"the transaction of {self.transactional_id!r} was aborted before the record "
            "was sent"))
        await self.sender.flush_all()
        if self.state.started or self.state.maybe_started:
            # maybe_started: an add whose answer was lost; the coordinator may know of the
            # transaction or not (then it answers INVALID_TXN_STATE: nothing to abort).
            await self._end_txn(commit=False, none_to_end_ok=not self.state.started)
        if self.state.need_epoch_bump:
            await self._init_producer_id(bump=True)
            self.state.need_epoch_bump = False
        self.state.completed()

    async def _end_txn(self, *, commit: bool, none_to_end_ok: bool = False) -> None:
        sender = self.sender
        what = "EndTxn(" + ("COMMIT" if commit else "ABORT") + ")"

        async def attempt(conn: Connection) -> None:
            resp = await conn.send(EndTxnRequest(
                transactional_id=self.transactional_id, producer_id=sender.producer_id,
                producer_epoch=sender.producer_epoch, committed=commit),
                conn.version_for(EndTxnRequest, 4))
            if none_to_end_ok and resp.error_code == errors.InvalidTxnStateError.code:
                return
            self._check(resp.error_code, what)

        await self._call(what, None, attempt, always=True)

    # ------------------------------------------------------------------ the sender's turn

    def sender_turn(self) -> None:
        """Called by the sender before it drains: fail what may no longer be sent."""
        st = self.state
        if st.failed:
            err: BaseException = st.last_error if st.state is not TxnState.ABORTING and \
                st.last_error is not None else TransactionAbortedError(
                    f"the transaction of {self.transactional_id!r} was aborted")
            self.sender.abort_undrained(err)

    def add_partitions(self) -> None:
        """Called by the sender when a batch of a partition not yet in the transaction is
        ready: add every pending partition (one request at a time)."""
        st = self.state
        if (st.pending and st.adding_allowed and not self._closed
                and (self._adding is None or self._adding.done())):
            self._adding = asyncio.get_running_loop().create_task(self._add_partitions())

    def may_send(self, batch: PendingBatch) -> bool:
        return self.state.may_send((batch.topic, batch.partition))

    # ------------------------------------------------------------------ requests

    def _check(self, code: int, what: str) -> None:
        """Raise for a non-zero code: ``_Again`` (retry), or the ``TransactionError`` now in
        force."""
        if code == 0:
            return
        cls = errors.error_for_code(code) or errors.UnknownServerError
        exc = cls(f"{what}: {cls.name}")
        if cls in REFIND_ERRORS:
            raise _Again(exc, refind=True)
        if cls in RETRY_ERRORS:
            raise _Again(exc, refind=False)
        raise self.state.fail(classify(exc, what))

    async def _call(self, what: str, group: str | None,
                    attempt: Callable[[Connection], Awaitable[T]], *, always: bool = False) -> T:
        """``attempt`` on the coordinator (the transaction's, or ``group``'s), again after
        retriable errors with backoff. Unless ``always``, stops (raising the state's error)
        once the transaction can no longer add anything."""
        key = (1, self.transactional_id) if group is None else (0, group)
        tries = 0
        while True:
            if self._closed:
                raise IllegalStateError(f"{what}: the producer is closed")
            if not always and not self.state.adding_allowed:
                raise self.state.last_error or TransactionAbortedError(
                    f"{what}: the transaction is being aborted")
            try:
                conn = await self._coordinator(key)
                return await attempt(conn)
            except _Again as again:
                cause: BaseException = again.cause
                if again.refind:
                    self._coordinators.pop(key, None)
                if (isinstance(cause, errors.ConcurrentTransactionsError)
                        and what == "AddPartitionsToTxn" and not self.state.started):
                    await asyncio.sleep(ADD_PARTITIONS_RETRY_BACKOFF)
                    continue
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                cause = exc
                self._coordinators.pop(key, None)
                if what.startswith("Add"):  # sent or not: the coordinator may have it
                    self.state.maybe_started = True
            except errors.ApiError as exc:  # from FindCoordinator or the connection
                if not exc.retriable:
                    raise self.state.fail(classify(exc, what)) from None
                cause = exc
            pause = min(self.backoff_max, self.backoff * 2 ** min(tries, 30))
            pause *= random.uniform(0.8, 1.2)
            tries += 1
            log.debug("%s for %r: %s; again in %.0f ms", what, self.transactional_id, cause,
                      pause * 1000)
            await asyncio.sleep(pause)

    async def _coordinator(self, key: tuple[int, str]) -> Connection:
        found = self._coordinators.get(key)
        if found is None:
            found = self._coordinators[key] = await self._find(*key)
        node_id, host, port = found
        if self.cluster.embedded or node_id in self.cluster.brokers:
            return await self.cluster.connection(node_id)
        conn = self._own_conns.get(node_id)  # not (yet) in our metadata: a connection of its own
        if conn is None or conn.closed:
            conn = self._own_conns[node_id] = await self.cluster.coordinator_connection(
                node_id, host, port)
        return conn

    async def _find(self, key_type: int, key: str) -> tuple[int, str, int]:
        conn = await self.cluster.any_connection()
        R = FindCoordinatorRequest
        version = conn.version_for(R)
        if version >= 4:
            resp = await conn.send(R(key_type=key_type, coordinator_keys=[key]), version)
            if len(resp.coordinators) != 1:
                raise KafkaConnectionError(f"FindCoordinator answered {len(resp.coordinators)} "
                                           "coordinators for one key")
            c = resp.coordinators[0]
            code, node_id, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            resp = await conn.send(R(key=key, key_type=key_type), version)
            code, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        kind = "transaction" if key_type == 1 else "group"
        if code:
            cls = errors.error_for_code(code) or errors.UnknownServerError
            raise cls(f"FindCoordinator for {kind} {key!r}: {cls.name}")
        log.debug("%s coordinator of %r: broker %d at %s:%d", kind, key, node_id, host, port)
        return node_id, host, port
