"""The transaction coordinator as a sans-IO state machine (Kafka's ``TransactionCoordinator``
with its ``TransactionStateManager`` cache and ``TransactionMarkerChannelManager`` bookkeeping).

One ``TransactionCoordinator`` serves every ``__transaction_state`` partition this broker
leads. A transactional id belongs to partition ``partition_for(id)``; a partition is hosted
(``begin_load`` ... ``complete_load``) or not (NOT_COORDINATOR), and while it loads its ids get
COORDINATOR_LOAD_IN_PROGRESS.

How the asyncio glue (``pylog.txn.service``) drives it (it never sleeps, reads sockets or
writes files itself):

- Requests are method calls returning a ``Pending`` (answered once the state change is in
  the log) or a result at once (verify, describe, list).
- ``take_writes()``: records to append to ``__transaction_state``, per partition in order;
  report each with ``TxnWrite.complete()`` / ``fail(code)``. The in-memory state changes only
  after its record is in the log.
- ``take_markers()``: COMMIT/ABORT markers to write on the transaction's partitions; report
  with ``on_markers_written(request, {(topic, partition): error_code})``. When every partition
  has its marker the CompleteCommit/CompleteAbort record is written.
- Time from the injected clock: call ``tick()`` when ``next_deadline_ms()`` (monotonic ms)
  has passed. Timers abort transactions open longer than their timeout (every
  transaction.abort.timed.out.transaction.cleanup.interval.ms), expire idle transactional
  ids (every transaction.remove.expired.transaction.cleanup.interval.ms) and retry failed
  marker writes and completion records.
- New producer ids come from the injected ``new_producer_id()`` (synchronous; the service
  keeps one ready from the broker's allocator).

Only transaction.version 0 semantics (EndTxn up to v4; the epoch changes on InitProducerId
and fencing only).

Not thread-safe: call everything from one thread (the broker's event loop).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from pylog import errors
from pylog._clock import Clock
from pylog.group.timers import Timers

from .config import TransactionConfig, partition_for
from .metadata import (
    EXPIRATION_ALLOWED,
    NO_PRODUCER_EPOCH,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
    state_from_name,
)
from .records import TxnKey, decode_key, decode_value, encode_key, encode_value, metadata_from_value
from .results import (
    NONE,
    DescribedTransaction,
    InitProducerIdResult,
    ListTransactionsResult,
    MarkerRequest,
    Pending,
    TxnWrite,
)

log = logging.getLogger("pylog.txn")

_S = TxnState
CONCURRENT = errors.ConcurrentTransactionsError.code
FENCED = errors.ProducerFencedError.code
MAPPING = errors.InvalidProducerIdMappingError.code
INVALID_TXN_STATE = errors.InvalidTxnStateError.code
NOT_COORDINATOR = errors.NotCoordinatorError.code
LOADING = errors.CoordinatorLoadInProgressError.code
NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code

# Marker write errors (``TransactionMarkerRequestCompletionHandler``).
_MARKER_RETRY = frozenset({
    errors.UnknownTopicOrPartitionError.code, errors.NotLeaderOrFollowerError.code,
    errors.NotEnoughReplicasError.code, errors.NotEnoughReplicasAfterAppendError.code,
    errors.RequestTimedOutError.code, errors.KafkaStorageError.code,
    errors.NetworkError.code,  # the leader could not be reached (the sender's own code)
})
_MARKER_GIVE_UP = frozenset({errors.InvalidProducerEpochError.code,
                             errors.TransactionCoordinatorFencedError.code})
_MARKER_DROP_PARTITION = frozenset({errors.UnsupportedForMessageFormatError.code,
                                    errors.UnsupportedVersionError.code})


def map_append_error(code: int) -> int:
    """A ``__transaction_state`` append error as the client sees it (Kafka's
    ``appendTransactionToLog``)."""
    if code in (errors.UnknownTopicOrPartitionError.code, errors.NotEnoughReplicasError.code,
                errors.NotEnoughReplicasAfterAppendError.code, errors.RequestTimedOutError.code):
        return NOT_AVAILABLE
    if code in (errors.NotLeaderOrFollowerError.code, errors.KafkaStorageError.code):
        return NOT_COORDINATOR
    if code in (errors.MessageTooLargeError.code, errors.RecordListTooLargeError.code):
        return errors.UnknownServerError.code
    return code


#: How long a tombstone append may wait for the ISR (Kafka's ``request.timeout.ms`` default,
#: which its ``removeExpiredTransactionalIds`` uses; state changes wait their transaction's
#: timeout, as ``appendTransactionToLog`` does).
TOMBSTONE_APPEND_TIMEOUT_MS = 30000


class _Partition:
    """One hosted ``__transaction_state`` partition: its ids (``txns``), load state and
    coordinator epoch (the partition's leader epoch, written into its markers)."""

    __slots__ = ("index", "loading", "txns", "loaded", "coordinator_epoch")

    def __init__(self, index: int, coordinator_epoch: int) -> None:
        self.index = index
        self.coordinator_epoch = coordinator_epoch
        self.loading = True
        self.txns: dict[str, TransactionMetadata] = {}
        self.loaded: dict[str, TransactionMetadata] = {}


class TransactionCoordinator:
    """Transactions of the hosted ``__transaction_state`` partitions. See the module docstring.

    Args:
        clock: wall time for the stored timestamps, monotonic time for the timers.
        config: the coordinator's settings.
        new_producer_id: returns a producer id never handed out before (raises on failure;
            the exception's Kafka code goes to the client).
        partition_exists: whether a (topic, partition) exists: a marker that cannot be
            written because its partition is gone is dropped, else it is retried.
        coordinator_epoch: the coordinator epoch of partitions hosted without one of their
            own (``begin_load``'s default; 0 on a single node), written into their markers.
    """

    def __init__(self, clock: Clock, config: TransactionConfig | None = None, *,
                 new_producer_id: Callable[[], int],
                 partition_exists: Callable[[str, int], bool] | None = None,
                 coordinator_epoch: int = 0) -> None:
        self._clock = clock
        self.config = config or TransactionConfig()
        self._new_producer_id = new_producer_id
        self._partition_exists = partition_exists or (lambda topic, partition: True)
        self.coordinator_epoch = coordinator_epoch
        self._partitions: dict[int, _Partition] = {}
        self._writes: list[TxnWrite] = []
        self._markers: list[MarkerRequest] = []
        # Transactions whose markers are being written: id -> (partition, metadata, completion).
        self._completing: dict[str, tuple[_Partition, TransactionMetadata, TxnTransit]] = {}
        self._timers = Timers()
        now = self._mono_ms()
        self._timers.schedule("abort-timed-out", now + self.config.abort_timed_out_interval_ms,
                              self._abort_timed_out)
        self._timers.schedule("expire-ids", now + self.config.remove_expired_interval_ms, self._expire_ids)

    # ------------------------------------------------------------------ driving

    def _mono_ms(self) -> int:
        return round(self._clock.monotonic() * 1000)

    def _now(self) -> int:
        return self._clock.time_ms()

    def next_deadline_ms(self) -> int | None:
        return self._timers.next_deadline()

    def tick(self) -> None:
        """Fire every timer due by the clock's monotonic time."""
        now = self._mono_ms()
        while (fn := self._timers.pop_due(now)) is not None:
            fn()

    def take_writes(self) -> list[TxnWrite]:
        writes, self._writes = self._writes, []
        return writes

    def take_markers(self) -> list[MarkerRequest]:
        markers, self._markers = self._markers, []
        return markers

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    # ------------------------------------------------------------------ hosting and loading

    def hosted(self) -> list[int]:
        return sorted(self._partitions)

    def is_loading(self, partition: int) -> bool:
        p = self._partitions.get(partition)
        return p is not None and p.loading

    def begin_load(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Start hosting ``partition``: its ids get COORDINATOR_LOAD_IN_PROGRESS until
        ``complete_load``. ``coordinator_epoch``: the partition's leader epoch in cluster mode
        (Kafka's ``onElection``), written into the markers of its transactions so that
        partition leaders fence a stale coordinator; default ``self.coordinator_epoch``."""
        self.unload(partition)
        epoch = self.coordinator_epoch if coordinator_epoch is None else coordinator_epoch
        self._partitions[partition] = _Partition(partition, epoch)

    def coordinator_epoch_of(self, partition: int) -> int | None:
        """The coordinator epoch of a hosted partition (loading or not), else None."""
        p = self._partitions.get(partition)
        return None if p is None else p.coordinator_epoch

    def wants_markers(self, request: MarkerRequest) -> bool:
        """Whether ``request`` still belongs to a transaction this coordinator is completing
        (not unloaded, resigned, reloaded in a newer epoch or given up meanwhile): a sender
        drops the ones that do not."""
        entry = self._completing.get(request.transactional_id)
        if entry is None:
            return False
        p, md, _ = entry
        return (self._current(p, md) and p.coordinator_epoch == request.coordinator_epoch
                and md.producer_epoch == request.producer_epoch)

    def replay(self, partition: int, key: bytes, value: bytes | None) -> None:
        """One record of the partition, in log order (the latest value of an id wins, a
        tombstone removes it). Raises ``TxnRecordError`` for a record that cannot be read."""
        p = self._partitions[partition]
        k = decode_key(key)
        if not isinstance(k, TxnKey):
            log.warning("__transaction_state-%d: skipping a record with unknown key version %d",
                        partition, k.version)
            return
        v = decode_value(value)
        if v is None:
            p.loaded.pop(k.transactional_id, None)
        else:
            p.loaded[k.transactional_id] = metadata_from_value(k.transactional_id, v)

    def complete_load(self, partition: int) -> list[str]:
        """Serve the partition's ids. Transactions found in PrepareCommit/PrepareAbort get
        their markers sent again and are completed; returns their ids."""
        p = self._partitions[partition]
        p.txns, p.loaded = p.loaded, {}
        p.loading = False
        resumed = []
        now = self._now()
        for txn_id, md in p.txns.items():
            if md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                self._send_markers(p, md, md.prepare_complete(now))
                resumed.append(txn_id)
        return resumed

    def unload(self, partition: int) -> None:
        """Stop hosting ``partition`` (resignation, topic deleted, shutdown): its pending
        answers resolve with NOT_COORDINATOR when their writes settle."""
        p = self._partitions.pop(partition, None)
        if p is None:
            return
        for txn_id in [t for t, (q, _, _) in self._completing.items() if q is p]:
            del self._completing[txn_id]
            self._timers.cancel(("markers", txn_id))
            self._timers.cancel(("complete", txn_id))

    def _lookup(self, transactional_id: str) -> tuple[int, _Partition | None]:
        p = self._partitions.get(self.partition_for(transactional_id))
        if p is None:
            return NOT_COORDINATOR, None
        if p.loading:
            return LOADING, None
        return NONE, p

    def _current(self, p: _Partition, md: TransactionMetadata) -> bool:
        """Whether ``md`` is still the cached metadata of a still hosted partition."""
        return self._partitions.get(p.index) is p and p.txns.get(md.transactional_id) is md

    # ------------------------------------------------------------------ log appends

    def _append(self, p: _Partition, md: TransactionMetadata, transit: TxnTransit,
                done: Callable[[int], object], retry_on_unavailable: bool = False) -> None:
        """Write ``transit`` for ``md``; apply it once written; then ``done(code)``."""
        records: list[tuple[bytes, bytes | None]] = [(encode_key(md.transactional_id), encode_value(transit))]
        timeout_ms = transit.txn_timeout_ms

        def settled(code: int) -> None:
            if code == NONE:
                if self._current(p, md):
                    md.complete_transition(transit)
                else:
                    code = NOT_COORDINATOR
            else:
                code = map_append_error(code)
                log.info("transactional id %r: writing %s failed (error %d)", md.transactional_id,
                         transit.state.kafka_name, code)
                if self._current(p, md) and not (retry_on_unavailable and code == NOT_AVAILABLE):
                    md.pending_state = None
            done(code)

        self._writes.append(TxnWrite(p.index, records, settled, timeout_ms))

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                         expected: tuple[int, int] | None = None) -> Pending[InitProducerIdResult]:
        """InitProducerId with a transactional id. ``expected``: the (producer id, epoch) a
        v3+ client sends when it has one (KIP-360), else None. PRODUCER_FENCED is returned
        as is (the handler turns it into INVALID_PRODUCER_EPOCH for v0-3)."""
        def fail(code: int) -> Pending[InitProducerIdResult]:
            return Pending.completed(InitProducerIdResult(code))

        if transactional_id == "":
            return fail(errors.InvalidRequestError.code)
        if not 0 < transaction_timeout_ms <= self.config.max_timeout_ms:
            return fail(errors.InvalidTransactionTimeoutError.code)
        code, p = self._lookup(transactional_id)
        if p is None:
            return fail(code)
        md = p.txns.get(transactional_id)
        if md is None:
            try:
                pid = self._new_producer_id()
            except Exception as exc:  # noqa: BLE001 - the allocator's failure goes to the client
                return fail(errors.code_for_exception(exc))
            md = TransactionMetadata(transactional_id, pid, txn_timeout_ms=transaction_timeout_ms,
                                     txn_last_update_ms=self._now())
            p.txns[transactional_id] = md
        outcome = self._prepare_init(md, transaction_timeout_ms, expected)
        if isinstance(outcome, int):
            return fail(outcome)
        result: Pending[InitProducerIdResult] = Pending()
        if outcome.state == _S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction with the bumped epoch; the producer retries and
            # gets the epoch bumped once more (so the fenced epoch is never handed out).
            def fenced(code: int) -> None:
                result._complete(InitProducerIdResult(code or CONCURRENT))
            self._end_txn(p, md, outcome.producer_id, outcome.producer_epoch, False, False, fenced)
            return result

        def written(code: int) -> None:
            if code == NONE:
                log.info("initialized transactional id %r with producer id %d epoch %d",
                         transactional_id, md.producer_id, md.producer_epoch)
                result._complete(InitProducerIdResult(NONE, md.producer_id, md.producer_epoch))
            else:
                result._complete(InitProducerIdResult(code))
        self._append(p, md, outcome, written)
        return result

    def _prepare_init(self, md: TransactionMetadata, timeout_ms: int,
                      expected: tuple[int, int] | None) -> TxnTransit | int:
        if md.pending_transition:
            return CONCURRENT
        if expected is not None:
            exp_pid, exp_epoch = expected
            valid = (md.producer_epoch == NO_PRODUCER_EPOCH or exp_pid == md.producer_id
                     or (exp_pid == md.previous_producer_id and is_epoch_exhausted(exp_epoch)))
            if not valid:
                return FENCED
        if md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return CONCURRENT
        if md.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                try:
                    pid = self._new_producer_id()
                except Exception as exc:  # noqa: BLE001 - the allocator's failure goes to the client
                    return errors.code_for_exception(exc)
                return md.prepare_producer_id_rotation(pid, timeout_ms, self._now(), expected is not None)
            transit = md.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], self._now())
            return FENCED if transit is None else transit
        if md.state == _S.ONGOING:
            return md.prepare_fence_producer_epoch()
        raise RuntimeError(f"transactional id {md.transactional_id!r} found in state {md.state.kafka_name}")

    # ------------------------------------------------------------------ AddPartitionsToTxn

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> Pending[int]:
        """AddPartitionsToTxn (v0-3, and v4+ entries that are not verify-only) and
        AddOffsetsToTxn: the error code once the partitions are in the transaction."""
        if not transactional_id:
            return Pending.completed(errors.InvalidRequestError.code)
        code, p = self._lookup(transactional_id)
        if p is None:
            return Pending.completed(code)
        md = p.txns.get(transactional_id)
        added = set(partitions)
        if md is None or md.producer_id != producer_id:
            return Pending.completed(MAPPING)
        if md.producer_epoch != producer_epoch:
            return Pending.completed(FENCED)
        if md.pending_transition or md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return Pending.completed(CONCURRENT)
        if md.state == _S.ONGOING and added <= md.partitions:
            return Pending.completed(NONE)
        result: Pending[int] = Pending()
        self._append(p, md, md.prepare_add_partitions(added, self._now()), result._complete)
        return result

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The verify-only check of AddPartitionsToTxn v4+ (KIP-890): per partition NONE if it
        is in the producer's open transaction, else TRANSACTION_ABORTABLE; one error for all
        when the id, producer or state does not match."""
        tps = list(partitions)
        if not transactional_id:
            return dict.fromkeys(tps, errors.InvalidRequestError.code)
        code, p = self._lookup(transactional_id)
        md = None if p is None else p.txns.get(transactional_id)
        if p is not None:
            if md is None or md.producer_id != producer_id:
                code = MAPPING
            elif md.producer_epoch != producer_epoch:
                code = FENCED
            elif md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                code = CONCURRENT
        if code or md is None:
            return dict.fromkeys(tps, code)
        abortable = errors.TransactionAbortableError.code
        return {tp: NONE if tp in md.partitions else abortable for tp in tps}

    # ------------------------------------------------------------------ EndTxn

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool) -> Pending[int]:
        """EndTxn from a client: NONE once PrepareCommit/PrepareAbort is written (the
        markers follow), or a retry's answer."""
        if not transactional_id:
            return Pending.completed(errors.InvalidRequestError.code)
        code, p = self._lookup(transactional_id)
        if p is None:
            return Pending.completed(code)
        md = p.txns.get(transactional_id)
        if md is None:
            return Pending.completed(MAPPING)
        result: Pending[int] = Pending()
        self._end_txn(p, md, producer_id, producer_epoch, commit, True, result._complete)
        return result

    def _end_txn(self, p: _Partition, md: TransactionMetadata, producer_id: int, producer_epoch: int,
                 commit: bool, from_client: bool, done: Callable[[int], object]) -> None:
        fence = md.pending_state == _S.PREPARE_EPOCH_FENCE
        valid_epoch = (not from_client or producer_epoch == md.producer_epoch) and producer_epoch >= md.producer_epoch
        if md.producer_id != producer_id:
            done(MAPPING)
            return
        if not valid_epoch:
            done(FENCED)
            return
        if md.pending_transition and not fence:
            done(CONCURRENT)
            return
        state = md.state
        if state == _S.ONGOING:
            if fence and not commit:
                # The fence's pending state gives way to PrepareAbort with the bumped epoch.
                md.pending_state = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = md.prepare_abort_or_commit(_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, self._now())

            def written(code: int) -> None:
                if code != NONE:
                    if fence and self._current(p, md):
                        md.has_failed_epoch_fence = True
                        log.warning("transactional id %r: the epoch fence could not be written (error %d); "
                                    "epoch %d stays in memory", md.transactional_id, code, md.producer_epoch)
                    done(code)
                    return
                if not self._current(p, md):
                    done(NOT_COORDINATOR)
                    return
                done(NONE)
                self._send_markers(p, md, md.prepare_complete(self._now()))
            self._append(p, md, transit, written)
            return
        if state == _S.COMPLETE_COMMIT:
            done(NONE if commit else INVALID_TXN_STATE)
            return
        if state == _S.COMPLETE_ABORT:
            done(INVALID_TXN_STATE if commit else NONE)
            return
        if state == _S.PREPARE_COMMIT:
            done(CONCURRENT if commit else INVALID_TXN_STATE)
            return
        if state == _S.PREPARE_ABORT:
            done(INVALID_TXN_STATE if commit else CONCURRENT)
            return
        if state == _S.EMPTY:
            done(INVALID_TXN_STATE)
            return
        raise RuntimeError(f"transactional id {md.transactional_id!r} found in state {state.kafka_name}")

    # ------------------------------------------------------------------ markers

    def _send_markers(self, p: _Partition, md: TransactionMetadata, completion: TxnTransit) -> None:
        """Markers for every partition of ``md`` (in PrepareCommit/PrepareAbort, with the
        completion pending); the completion is written when all are acknowledged."""
        self._completing[md.transactional_id] = (p, md, completion)
        if md.partitions:
            self._markers.append(self._marker_request(p, md, md.partitions))
        else:
            self._write_completion(md.transactional_id)

    def _marker_request(self, p: _Partition, md: TransactionMetadata,
                        partitions: Iterable[TopicPartition]) -> MarkerRequest:
        return MarkerRequest(md.transactional_id, md.producer_id, md.producer_epoch,
                             md.state == _S.PREPARE_COMMIT, p.coordinator_epoch, frozenset(partitions))

    def on_markers_written(self, request: MarkerRequest, results: dict[TopicPartition, int]) -> None:
        """The outcome of ``request``: an error code per partition (a partition missing
        from ``results`` is retried)."""
        entry = self._completing.get(request.transactional_id)
        if entry is None:
            return  # unloaded or already given up
        p, md, _ = entry
        if p.coordinator_epoch != request.coordinator_epoch:
            return  # sent before the partition was loaded again: the new load sent its own
        if not self._current(p, md) or md.producer_epoch != request.producer_epoch:
            self._completing.pop(request.transactional_id, None)
            return
        retry: set[TopicPartition] = set()
        for tp in request.partitions:
            code = results.get(tp, errors.RequestTimedOutError.code)
            if code == NONE or code in _MARKER_DROP_PARTITION:
                md.remove_partition(tp)
            elif code in _MARKER_GIVE_UP:
                log.warning("transactional id %r: marker for %s-%d refused (error %d); no more markers are "
                            "sent for this transaction", md.transactional_id, tp[0], tp[1], code)
                self._completing.pop(request.transactional_id, None)
                return
            elif code in _MARKER_RETRY and not self._partition_exists(*tp):
                log.info("transactional id %r: %s-%d no longer exists; no marker needed",
                         md.transactional_id, tp[0], tp[1])
                md.remove_partition(tp)
            else:
                if code not in _MARKER_RETRY:
                    log.error("transactional id %r: marker for %s-%d failed with unexpected error %d; retrying",
                              md.transactional_id, tp[0], tp[1], code)
                retry.add(tp)
        if retry:
            txn_id = request.transactional_id
            self._timers.schedule(("markers", txn_id), self._mono_ms() + self.config.retry_backoff_ms,
                                  lambda: self._retry_markers(txn_id, retry))
        elif not md.partitions:
            self._write_completion(request.transactional_id)

    def _retry_markers(self, txn_id: str, partitions: set[TopicPartition]) -> None:
        entry = self._completing.get(txn_id)
        if entry is not None:
            p, md, _ = entry
            self._markers.append(self._marker_request(p, md, partitions & md.partitions))

    def _write_completion(self, txn_id: str) -> None:
        entry = self._completing.get(txn_id)
        if entry is None:
            return  # the partition was unloaded meanwhile
        p, md, completion = entry

        def written(code: int) -> None:
            if code == NOT_AVAILABLE and txn_id in self._completing:
                self._timers.schedule(("complete", txn_id), self._mono_ms() + self.config.retry_backoff_ms,
                                      lambda: self._write_completion(txn_id))
                return
            self._completing.pop(txn_id, None)
            if code == NONE:
                log.debug("transactional id %r: %s", txn_id, md.state.kafka_name)
            elif code != NOT_COORDINATOR:
                log.error("transactional id %r: writing %s failed with error %d", txn_id,
                          completion.state.kafka_name, code)
        self._append(p, md, completion, written, retry_on_unavailable=True)

    # ------------------------------------------------------------------ timers

    def _abort_timed_out(self) -> None:
        """Fence and abort every transaction open longer than its timeout."""
        self._timers.schedule("abort-timed-out", self._mono_ms() + self.config.abort_timed_out_interval_ms,
                              self._abort_timed_out)
        now = self._now()
        for p in list(self._partitions.values()):
            if p.loading:
                continue
            for md in list(p.txns.values()):
                if md.pending_transition or md.state != _S.ONGOING or md.txn_start_ms + md.txn_timeout_ms >= now:
                    continue
                transit = md.prepare_fence_producer_epoch()
                log.info("transactional id %r: transaction open for more than %d ms: aborting it with producer "
                         "epoch %d", md.transactional_id, md.txn_timeout_ms, transit.producer_epoch)

                def done(code: int, txn_id: str = md.transactional_id) -> None:
                    if code not in (NONE, MAPPING, FENCED, CONCURRENT):
                        log.warning("transactional id %r: aborting the timed-out transaction failed (error %d)",
                                    txn_id, code)
                self._end_txn(p, md, transit.producer_id, transit.producer_epoch, False, False, done)

    def _expire_ids(self) -> None:
        """Tombstone the ids idle for transactional.id.expiration.ms, one write per partition."""
        self._timers.schedule("expire-ids", self._mono_ms() + self.config.remove_expired_interval_ms,
                              self._expire_ids)
        now = self._now()
        for p in list(self._partitions.values()):
            if p.loading:
                continue
            expired = [(md, md.prepare_dead()) for md in list(p.txns.values())
                       if not md.pending_transition and md.state in EXPIRATION_ALLOWED
                       and md.txn_last_update_ms <= now - self.config.transactional_id_expiration_ms]
            if not expired:
                continue
            records: list[tuple[bytes, bytes | None]] = [(encode_key(md.transactional_id), None) for md, _ in expired]

            def written(code: int, p: _Partition = p,
                        expired: list[tuple[TransactionMetadata, TxnTransit]] = expired) -> None:
                for md, transit in expired:
                    if (code == NONE and self._current(p, md) and md.pending_state == _S.DEAD
                            and md.producer_epoch == transit.producer_epoch):
                        del p.txns[md.transactional_id]
                        log.info("transactional id %r expired", md.transactional_id)
                    else:
                        md.pending_state = None
            self._writes.append(TxnWrite(p.index, records, written, TOMBSTONE_APPEND_TIMEOUT_MS))

    # ------------------------------------------------------------------ admin

    def describe(self, transactional_id: str) -> DescribedTransaction:
        """DescribeTransactions for one id."""
        if transactional_id == "":
            return DescribedTransaction(transactional_id, errors.InvalidRequestError.code)
        code, p = self._lookup(transactional_id)
        if p is None:
            return DescribedTransaction(transactional_id, code)
        md = p.txns.get(transactional_id)
        if md is None or md.state == _S.DEAD:
            return DescribedTransaction(transactional_id, errors.TransactionalIdNotFoundError.code)
        return DescribedTransaction(transactional_id, NONE, md.state.kafka_name, md.txn_timeout_ms,
                                    md.txn_start_ms, md.producer_id, md.producer_epoch, sorted(md.partitions))

    def list_transactions(self, state_filters: Iterable[str] = (), producer_id_filters: Iterable[int] = (),
                          duration_filter_ms: int = -1) -> ListTransactionsResult:
        """ListTransactions: this coordinator's ids, filtered by state names, producer ids and
        (v1) running longer than ``duration_filter_ms`` (-1: no filter)."""
        if any(p.loading for p in self._partitions.values()):
            return ListTransactionsResult(LOADING)
        names = list(state_filters)
        pids = set(producer_id_filters)
        states: set[TxnState] = set()
        unknown = []
        for name in names:
            state = state_from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        now = self._now()
        out = []
        for p in self._partitions.values():
            for md in p.txns.values():
                if md.state == _S.DEAD:
                    continue
                if pids and md.producer_id not in pids:
                    continue
                if names and md.state not in states:
                    continue
                if duration_filter_ms >= 0 and now - md.txn_start_ms <= duration_filter_ms:
                    continue
                out.append((md.transactional_id, md.producer_id, md.state.kafka_name))
        return ListTransactionsResult(NONE, unknown, sorted(out))

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The cached metadata of an id (tests and tools; do not mutate)."""
        p = self._partitions.get(self.partition_for(transactional_id))
        return None if p is None else p.txns.get(transactional_id)
