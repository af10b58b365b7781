"""The producer's sender: drains ready batches to partition leaders, retries, completes.

Runs as one task on the client's event loop (Kafka's ``Sender`` thread). Each turn it

1. makes sure an idempotent producer has a producer id and epoch (InitProducerId);
2. drains, per partition, the head batch when it is *ready* — full, older than
   ``linger.ms``, a retry whose backoff passed, or wanted now by ``flush()``, ``close()``
   or a ``send()`` blocked on ``buffer.memory`` — and whose leader is known and not over
   its in-flight bound; batches for one broker go in one ProduceRequest (one batch per
   partition per request, at most ``max.request.size`` bytes), pipelined on that broker's
   connection up to ``max.in.flight.requests.per.connection``;
3. fails batches older than ``delivery.timeout.ms`` with ``KafkaTimeoutError``;
4. sleeps until woken (a new or full batch, a completed request) or the next linger or
   backoff deadline.

Idempotence (KIP-98): a batch gets its base sequence (per partition, counted from 0 for
the producer id) when first drained and keeps its encoded bytes for every retry, so a
resend after a lost answer or a broker restart is recognised by the broker as a duplicate
and not written twice. While a partition has a batch being retried, only one batch of it
is in flight, and later batches that came back OUT_OF_ORDER_SEQUENCE_NUMBER because an
earlier one failed are put back in sequence order and resent after it — Kafka's ordering
guarantee with up to 5 requests in flight.

Transactions (a ``transactional.id``): the ``TransactionManager`` (``_txn_manager``) sets
the producer id instead of step 1, and each turn first adds the partitions sent to for the
first time to the transaction (AddPartitionsToTxn); a partition's batches are drained only
once it is in. Batches are marked transactional and the ProduceRequest names the id. A
batch that fails for good makes the transaction abortable (or fatal when fenced) instead of
resetting the producer id; while the transaction failed or is being aborted, queued
batches are failed instead of sent.

Errors: retriable codes (``ApiError.retriable``) and lost connections are retried with
exponential backoff (``retry.backoff.ms`` doubling to ``retry.backoff.max.ms``) while
``retries`` and ``delivery.timeout.ms`` allow; codes that mean stale metadata
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...) also ask for a metadata
refresh. Anything else fails the batch's records with the ``pylog.errors`` class for the
code.

Event-loop affinity: every method runs on the client's loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.client.aio._accumulator import PendingBatch, RecordAccumulator
from pylog.client.aio._cluster import Cluster
from pylog.client.errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError
from pylog.client.records import RecordMetadata
from pylog.protocol.messages import InitProducerIdRequest, ProduceRequest

if TYPE_CHECKING:
    from pylog.client.aio._txn_manager import TransactionManager

__all__ = ["Sender"]

log = logging.getLogger("pylog.client.producer")

DUPLICATE_SEQUENCE_NUMBER = 46
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


class Sender:
    def __init__(self, cluster: Cluster, accumulator: RecordAccumulator, settings: dict[str, Any],
                 idempotent: bool) -> None:
        self.cluster = cluster
        self.acc = accumulator
        self.acks: int = settings["acks"]
        self.linger = settings["linger.ms"] / 1000
        self.batch_size: int = settings["batch.size"]
        self.compression: str = settings["compression.type"]
        self.max_in_flight: int = settings["max.in.flight.requests.per.connection"]
        self.retries: int = settings["retries"]
        self.delivery_timeout = settings["delivery.timeout.ms"] / 1000
        self.request_timeout = settings["request.timeout.ms"] / 1000
        self.backoff = settings["retry.backoff.ms"] / 1000
        self.backoff_max = max(self.backoff, settings["retry.backoff.max.ms"] / 1000)
        self.max_request_size: int = settings["max.request.size"]
        self.idempotent = idempotent
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_seq: dict[tuple[str, int], int] = {}
        self._tp_in_flight: dict[tuple[str, int], int] = {}
        self._node_in_flight: dict[int, int] = {}
        self._retrying: set[tuple[str, int]] = set()
        self._wake = asyncio.Event()
        self._flush_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.flush_mark = -1
        self.closing = False
        self._give_up = False  # close()'s time is up: the loop ends at its next turn
        self._task: asyncio.Task[None] | None = None
        self._pid_error: BaseException | None = None
        # A transactional producer's manager: it sets the producer id, adds partitions to
        # the transaction before their batches go, and stops sending when the transaction
        # failed or is being aborted.
        self.txn: TransactionManager | None = None
        self.transactional_id: str | None = settings.get("transactional.id")

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.cluster.on_connect.append(self.wake)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        self._wake.set()

    async def wait_for_completion(self, mark: int) -> None:
        """Until every batch created before batch id ``mark`` completed."""
        if self._oldest_incomplete() >= mark:
            return
        fut = asyncio.get_running_loop().create_future()
        self._flush_waiters.append((mark, fut))
        await fut

    def _oldest_incomplete(self) -> int:
        # ``incomplete`` is filled in batch-id order and only shrinks: its first key is
        # the oldest batch not yet completed.
        with self.acc.lock:
            return next(iter(self.acc.incomplete), self.acc.next_batch_id)

    async def stop(self, timeout: float) -> None:
        """Send what is left within ``timeout`` seconds, then fail the rest and stop."""
        self.closing = True
        self.wake()
        task = self._task
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except asyncio.TimeoutError:
                # Cancel until it ends: Python 3.11's wait_for inside the loop (a request's
                # timeout) can swallow a cancel that lands as its own wait completes, and
                # the loop would then run on until delivery.timeout.ms.
                self._give_up = True
                while not task.done():
                    task.cancel()
                    await asyncio.wait({task}, timeout=0.1)
                if not task.cancelled() and task.exception() is not None:
                    log.debug("sender loop ended with %r while closing", task.exception())
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            try:
                await t
            except asyncio.CancelledError:
                pass
        err = ClientClosedError("producer closed before the record was delivered")
        for batch in list(self.acc.incomplete.values()):
            self._fail(batch, err)

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        while True:
            if self.closing and (self._give_up or not self.acc.incomplete):
                return
            now = time.monotonic()
            if self.cluster.needs_update():
                self._spawn(self._update_metadata())
            if self.txn is not None:
                self.txn.sender_turn()
            elif self.idempotent and self.producer_id < 0:
                if not await self._init_producer_id():
                    self._expire(time.monotonic())
                    await self._sleep(self.backoff)
                    continue
            ready, next_check = self._drain(now)
            for node, batches in ready.items():
                self._send(node, batches)
            await self._sleep(max(0.0, next_check - time.monotonic()))

    async def _sleep(self, delay: float) -> None:
        if delay <= 0 and not self._wake.is_set():
            await asyncio.sleep(0)
            return
        try:
            await asyncio.wait_for(self._wake.wait(), delay)
        except asyncio.TimeoutError:
            pass
        self._wake.clear()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _update_metadata(self) -> None:
        try:
            await self.cluster.update()
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self.cluster.last_error = exc
        self.wake()

    async def _init_producer_id(self) -> bool:
        try:
            conn = await self.cluster.any_connection()
            resp = await conn.send(InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                producer_epoch=-1))
        except (KafkaConnectionError, KafkaTimeoutError, errors.UnsupportedVersionError) as exc:
            self._pid_error = exc
            return False
        if resp.error_code:
            cls = errors.error_for_code(resp.error_code)
            self._pid_error = cls(f"InitProducerId: {cls.name}") if cls else None
            return False
        self.set_producer_id(resp.producer_id, resp.producer_epoch)
        return True

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id or epoch: sequences start over from 0."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._next_seq.clear()
        self._retrying.clear()
        self.wake()

    async def flush_all(self) -> None:
        """Send everything queued now and wait until each batch succeeded or failed."""
        with self.acc.lock:
            mark = self.acc.next_batch_id
        self.flush_mark = max(self.flush_mark, mark)
        self.wake()
        await self.wait_for_completion(mark)

    def abort_undrained(self, error: BaseException) -> None:
        """Fail every batch not in flight with ``error`` (a transaction that failed or is
        aborted sends nothing more). A failed batch that had sequence numbers leaves a gap:
        the transaction manager bumps the epoch after the abort."""
        with self.acc.lock:
            batches = [b for q in self.acc.queues.values() for b in q if not b.in_flight]
            for q in self.acc.queues.values():
                q.clear()
        for b in batches:
            if b.base_sequence >= 0 and self.txn is not None:
                self.txn.state.need_epoch_bump = True
            self._retrying.discard((b.topic, b.partition))
            self._fail(b, error)

    def _expire(self, now: float) -> None:
        with self.acc.lock:
            # ``incomplete`` is in creation order (a retried batch keeps its place): when
            # its first batch is young enough, none is old enough, and no queue is scanned.
            oldest = next(iter(self.acc.incomplete.values()), None)
            if oldest is None or now - oldest.created < self.delivery_timeout:
                return
            expired = [b for q in self.acc.queues.values() for b in q
                       if now - b.created >= self.delivery_timeout]
            for b in expired:
                self.acc.queues[(b.topic, b.partition)].remove(b)
        for b in expired:
            reason = f" (last error: {self._pid_error})" if self._pid_error else ""
            exc = KafkaTimeoutError(
                f"{len(b)} record(s) for {b.topic}-{b.partition}: delivery.timeout.ms "
                f"({self.delivery_timeout * 1000:.0f} ms) passed{reason}")
            self._fail(b, exc)
            if self.txn is not None:
                self.txn.state.batch_failed(exc, b.topic, b.partition, b.base_sequence >= 0)

    def _drain(self, now: float) -> tuple[dict[int, list[PendingBatch]], float]:
        """Pick ready batches per leader; the time of the next deadline to look again."""
        self._expire(now)
        next_check = now + 1.0
        ready: dict[int, list[PendingBatch]] = {}
        sizes: dict[int, int] = {}
        conns: dict[int, Any] = {}
        acc = self.acc
        txn = self.txn
        want_add = False
        with acc.lock:
            urgent = self.closing or acc.waiting_for_memory > 0
            for tp, q in acc.queues.items():
                if not q:
                    continue
                head = q[0]
                if txn is not None and not txn.state.may_send(tp):
                    # AddPartitionsToTxn first, once a batch of the partition is ready to
                    # go (one request for the partitions of a linger or a flush); the
                    # manager wakes us when it is answered.
                    due = head.created + self.linger
                    if (urgent or len(q) > 1 or head.size >= self.batch_size or due <= now
                            or head.batch_id < self.flush_mark):
                        want_add = True
                    else:
                        next_check = min(next_check, due)
                    continue
                info = self.cluster.topics.get(tp[0])
                pinfo = info.partitions.get(tp[1]) if info is not None else None
                if pinfo is None or pinfo.leader < 0:
                    self.cluster.request_update()
                    next_check = min(next_check, now + self.backoff)
                    continue
                node = pinfo.leader
                if node not in conns:
                    conns[node] = self.cluster.ready_connection(node)
                if conns[node] is None:
                    continue  # connecting: on_connect wakes us
                cap = 1 if tp in self._retrying else self.max_in_flight
                if self._tp_in_flight.get(tp, 0) >= cap:
                    continue
                if self._node_in_flight.get(node, 0) + (node in ready) >= self.max_in_flight:
                    continue
                if head.next_attempt > now:
                    next_check = min(next_check, head.next_attempt)
                    continue
                full = len(q) > 1 or head.size >= self.batch_size
                due = head.created + self.linger
                if not (full or urgent or head.data is not None or due <= now
                        or head.batch_id < self.flush_mark):
                    next_check = min(next_check, due)
                    continue
                size = len(head.data) if head.data is not None else head.size
                if sizes.get(node, 0) + size > self.max_request_size and node in ready:
                    next_check = now
                    continue
                q.popleft()
                if head.data is None and self.idempotent:
                    seq = self._next_seq.get(tp, 0)
                    head.base_sequence = seq
                    self._next_seq[tp] = (seq + len(head)) & 0x7FFFFFFF
                head.in_flight = True
                self._tp_in_flight[tp] = self._tp_in_flight.get(tp, 0) + 1
                ready.setdefault(node, []).append(head)
                sizes[node] = sizes.get(node, 0) + size
                if q:
                    next_check = now  # more may be ready once this request is out
        if want_add and txn is not None:
            txn.add_partitions()
        for batches in ready.values():
            for b in batches:
                b.encode(self.compression, self.producer_id if self.idempotent else -1,
                         self.producer_epoch if self.idempotent else -1,
                         b.base_sequence if self.idempotent else -1, txn is not None)
        return ready, next_check

    def _send(self, node: int, batches: list[PendingBatch]) -> None:
        """Write one ProduceRequest now (so requests leave in drain order: sequence numbers
        of a partition reach the broker in order) and handle its answer in a task."""
        by_topic: dict[str, list[Any]] = {}
        for b in batches:
            by_topic.setdefault(b.topic, []).append(
                ProduceRequest.PartitionProduceData(index=b.partition, records=b.data))
        req = ProduceRequest(
            transactional_id=self.transactional_id, acks=self.acks, timeout_ms=int(self.request_timeout * 1000),
            topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=parts)
                        for t, parts in by_topic.items()])
        self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
        conn = self.cluster.ready_connection(node)
        try:
            if conn is None:
                raise KafkaConnectionError(f"no connection to broker {node}")
            fut = conn.send_nowait(req)
        except (KafkaConnectionError, errors.ApiError) as exc:
            self._spawn(self._answer(node, batches, None, None, exc))
            return
        self._spawn(self._answer(node, batches, conn, fut, None))

    async def _answer(self, node: int, batches: list[PendingBatch], conn: Any,
                      fut: asyncio.Future[Any] | None, error: BaseException | None) -> None:
        try:
            try:
                if error is not None:
                    raise error
                resp = None if fut is None else await conn.wait(fut, what="ProduceRequest")
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self.cluster.request_update()
                for b in batches:
                    self._retry_or_fail(b, exc, retriable=True)
                return
            except errors.ApiError as exc:
                for b in batches:
                    self._retry_or_fail(b, exc, retriable=exc.retriable)
                return
            if resp is None:  # acks=0: no answer, no offsets
                for b in batches:
                    self._complete(b, -1, -1)
                return
            answers = {(t.name, p.index): p for t in resp.responses for p in t.partition_responses}
            for b in batches:
                p = answers.get((b.topic, b.partition))
                if p is None:
                    self._retry_or_fail(b, errors.UnknownServerError(
                        f"no answer for {b.topic}-{b.partition} in the produce response"),
                        retriable=False)
                elif p.error_code == 0:
                    self._complete(b, p.base_offset, p.log_append_time_ms)
                elif p.error_code == DUPLICATE_SEQUENCE_NUMBER:
                    self._complete(b, -1, p.log_append_time_ms)
                else:
                    self._on_error(b, p.error_code, p.error_message)
        finally:
            self._node_in_flight[node] -= 1
            self.wake()

    def _on_error(self, b: PendingBatch, code: int, message: str | None) -> None:
        cls = errors.error_for_code(code) or errors.UnknownServerError
        exc = cls(f"{b.topic}-{b.partition}: {cls.name}" + (f": {message}" if message else ""))
        retriable = cls.retriable
        if cls.invalid_metadata:
            self.cluster.request_update()
        if code == OUT_OF_ORDER_SEQUENCE_NUMBER and self.idempotent:
            # Retriable only when an earlier batch of this partition is still to be
            # (re)written: this one was refused because its predecessor was.
            tp = (b.topic, b.partition)
            retriable = any(o is not b and (o.topic, o.partition) == tp and not o.done
                            and 0 <= o.base_sequence < b.base_sequence
                            for o in list(self.acc.incomplete.values()))
        self._retry_or_fail(b, exc, retriable=retriable)

    def _retry_or_fail(self, b: PendingBatch, exc: BaseException, *, retriable: bool) -> None:
        tp = (b.topic, b.partition)
        self._tp_in_flight[tp] -= 1
        b.in_flight = False
        now = time.monotonic()
        if (retriable and b.attempts < self.retries
                and now - b.created < self.delivery_timeout):
            b.attempts += 1
            log.debug("retrying %d record(s) for %s-%d (attempt %d, seq %d): %s", len(b),
                      b.topic, b.partition, b.attempts, b.base_sequence, exc)
            b.next_attempt = now + min(self.backoff_max, self.backoff * 2 ** (b.attempts - 1))
            if self.idempotent:
                self._retrying.add(tp)
            self.acc.requeue(b)
            return
        self._fail(b, exc)
        if self.txn is not None:
            # The transaction cannot commit now; the abort bumps the epoch if needed.
            self.txn.state.batch_failed(exc, b.topic, b.partition, b.base_sequence >= 0)
        elif self.idempotent and b.base_sequence >= 0:
            self._reset_producer_id()

    def _reset_producer_id(self) -> None:
        """After a batch with a sequence failed for good, later sequences of the same
        producer id would be refused as out of order: start over with a new producer id;
        batches waiting to be retried are re-encoded with it."""
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_seq.clear()
        self._retrying.clear()
        with self.acc.lock:
            for q in self.acc.queues.values():
                for o in q:
                    if o.data is not None and not o.in_flight:
                        o.data = None
                        o.base_sequence = -1

    def _complete(self, b: PendingBatch, base_offset: int, log_append_time: int) -> None:
        tp = (b.topic, b.partition)
        self._tp_in_flight[tp] -= 1
        self._retrying.discard(tp)
        b.in_flight = False
        if b.futures is not None:
            keys = b.keys
            for i, fut in enumerate(b.futures):
                if fut is None or fut.done():
                    continue
                k, v = keys[i] if keys is not None else None, b.values[i]
                fut.set_result(RecordMetadata(
                    b.topic, b.partition, base_offset + i if base_offset >= 0 else -1,
                    log_append_time if log_append_time >= 0 else b.timestamps[i],
                    len(k) if k is not None else -1, len(v) if v is not None else -1))
        result = b.result
        self._finish(b)
        result.set(base_offset, log_append_time, None)

    def _fail(self, b: PendingBatch, exc: BaseException) -> None:
        if b.futures is not None:
            for fut in b.futures:
                if fut is not None and not fut.done():
                    fut.set_exception(exc)
        result = b.result
        self._finish(b)
        result.set(-1, -1, exc)

    def _finish(self, b: PendingBatch) -> None:
        self.acc.release(b)
        b.values, b.timestamps = [], []
        b.keys = b.futures = b.headers = None
        b.data = None
        if self._flush_waiters:
            oldest = self._oldest_incomplete()
            keep = []
            for mark, fut in self._flush_waiters:
                if oldest >= mark:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    keep.append((mark, fut))
            self._flush_waiters = keep
