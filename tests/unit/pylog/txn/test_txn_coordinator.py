"""The transaction coordinator (pylog.txn.coordinator), sans-IO, with a manual clock.

The cases follow the kinds Kafka's TransactionCoordinatorTest / TransactionStateManagerTest
check (each error in the state Kafka returns it); the tests and the harness are our own: the
harness keeps every record written per ``__transaction_state`` partition, so that a second
coordinator can load what the first wrote.
"""

from __future__ import annotations

from typing import Any

import pytest

from pylog import errors
from pylog._clock import ManualClock
from pylog.txn.config import TransactionConfig, partition_for
from pylog.txn.coordinator import TransactionCoordinator
from pylog.txn.metadata import TxnState
from pylog.txn.records import decode_key, decode_value, encode_key, encode_value
from pylog.txn.results import MarkerRequest

S = TxnState
CONCURRENT = errors.ConcurrentTransactionsError.code
FENCED = errors.ProducerFencedError.code
MAPPING = errors.InvalidProducerIdMappingError.code
INVALID_TXN_STATE = errors.InvalidTxnStateError.code
TP = ("t", 0)
TP2 = ("t", 1)


class Harness:
    """A coordinator hosting every partition, a fake log per partition, producer ids from 1000."""

    def __init__(self, config: TransactionConfig | None = None, clock: ManualClock | None = None,
                 log: dict[int, list[tuple[bytes, bytes | None]]] | None = None) -> None:
        self.clock = clock or ManualClock()
        self.config = config or TransactionConfig(num_partitions=3)
        self.next_pid = 1000
        self.gone: set[tuple[str, int]] = set()
        self.coord = TransactionCoordinator(self.clock, self.config, new_producer_id=self._pid,
                                            partition_exists=lambda t, p: (t, p) not in self.gone)
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = log if log is not None else {}
        self.markers: list[MarkerRequest] = []

    def _pid(self) -> int:
        self.next_pid += 1
        return self.next_pid - 1

    def host_all(self) -> None:
        for p in range(self.config.num_partitions):
            self.coord.begin_load(p)
            for key, value in self.log.get(p, []):
                self.coord.replay(p, key, value)
        for p in range(self.config.num_partitions):
            self.coord.complete_load(p)
        self.markers.extend(self.coord.take_markers())

    def flush(self, fail: int = 0) -> int:
        """Settle every pending write (fail them with ``fail`` if set); returns how many."""
        n = 0
        while writes := self.coord.take_writes():
            for w in writes:
                n += 1
                if fail:
                    w.fail(fail)
                else:
                    self.log.setdefault(w.partition, []).extend(w.records)
                    w.complete()
        self.markers.extend(self.coord.take_markers())
        return n

    def ack_markers(self, codes: dict[tuple[str, int], int] | None = None) -> list[MarkerRequest]:
        sent, self.markers = self.markers, []
        for m in sent:
            self.coord.on_markers_written(m, {tp: (codes or {}).get(tp, 0) for tp in m.partitions})
        self.flush()
        return sent

    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coord.tick()
        self.flush()

    # requests, settled at once
    def init(self, txn: str = "tx", timeout: int = 60_000, expected: tuple[int, int] | None = None) -> Any:
        pending = self.coord.init_producer_id(txn, timeout, expected)
        self.flush()
        assert pending.done
        return pending.result

    def add(self, txn: str, pid: int, epoch: int, *tps: tuple[str, int]) -> int:
        pending = self.coord.add_partitions(txn, pid, epoch, tps or [TP])
        self.flush()
        assert pending.done
        return pending.result

    def end(self, txn: str, pid: int, epoch: int, commit: bool) -> int:
        pending = self.coord.end_txn(txn, pid, epoch, commit)
        self.flush()
        assert pending.done
        return pending.result

    def state(self, txn: str = "tx") -> TxnState:
        md = self.coord.metadata(txn)
        assert md is not None
        return md.state

    def last_record(self, txn: str = "tx") -> Any:
        p = partition_for(txn, self.config.num_partitions)
        for key, value in reversed(self.log[p]):
            if decode_key(key).transactional_id == txn:  # type: ignore[union-attr]
                return decode_value(value)
        raise AssertionError(f"no record for {txn}")


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.host_all()
    return harness


def begin(h: Harness, txn: str = "tx", *tps: tuple[str, int]) -> tuple[int, int]:
    r = h.init(txn)
    assert r.error_code == 0
    assert h.add(txn, r.producer_id, r.producer_epoch, *(tps or (TP,))) == 0
    return r.producer_id, r.producer_epoch


# --------------------------------------------------------------------------- InitProducerId


def test_new_transactional_id_gets_a_producer_id_and_epoch_zero(h: Harness) -> None:
    r = h.init("tx", 30_000)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)
    v = h.last_record("tx")
    assert (v.producer_id, v.producer_epoch, v.transaction_status) == (1000, 0, int(S.EMPTY))
    assert v.transaction_partitions is None and v.transaction_timeout_ms == 30_000
    assert v.transaction_start_timestamp_ms == -1


def test_init_again_bumps_the_epoch_and_keeps_the_producer_id(h: Harness) -> None:
    first = h.init()
    again = h.init()
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)


@pytest.mark.parametrize("txn,timeout,code", [
    ("", 60_000, errors.InvalidRequestError.code),
    ("tx", 0, errors.InvalidTransactionTimeoutError.code),
    ("tx", 900_001, errors.InvalidTransactionTimeoutError.code),
])
def test_init_refuses_bad_arguments(h: Harness, txn: str, timeout: int, code: int) -> None:
    assert h.init(txn, timeout).error_code == code


def test_not_hosted_and_loading_partitions() -> None:
    h = Harness()
    assert h.init("tx").error_code == errors.NotCoordinatorError.code
    h.coord.begin_load(partition_for("tx", 3))
    assert h.init("tx").error_code == errors.CoordinatorLoadInProgressError.code
    assert h.coord.describe("tx").error_code == errors.CoordinatorLoadInProgressError.code
    assert h.coord.list_transactions().error_code == errors.CoordinatorLoadInProgressError.code
    assert h.add("tx", 1, 0) == errors.CoordinatorLoadInProgressError.code
    assert h.end("tx", 1, 0, True) == errors.CoordinatorLoadInProgressError.code


def test_a_pending_transition_gets_concurrent_transactions(h: Harness) -> None:
    h.init()
    first = h.coord.init_producer_id("tx", 60_000)
    second = h.coord.init_producer_id("tx", 60_000)
    assert second.done and second.result.error_code == CONCURRENT
    assert not first.done
    h.flush()
    assert first.result.producer_epoch == 1


def test_init_on_an_open_transaction_fences_and_aborts_it(h: Harness) -> None:
    pid, epoch = begin(h, "tx", TP, TP2)
    r = h.init()
    # The open transaction is aborted with epoch + 1; the producer is told to retry.
    assert r.error_code == CONCURRENT
    assert h.state() == S.PREPARE_ABORT
    v = h.last_record()
    assert (v.transaction_status, v.producer_epoch) == (int(S.PREPARE_ABORT), epoch + 1)
    [m] = h.markers
    assert (m.producer_id, m.producer_epoch, m.commit, m.partitions) == (pid, epoch + 1, False, {TP, TP2})
    assert h.init().error_code == CONCURRENT  # markers still being written
    h.ack_markers()
    assert h.state() == S.COMPLETE_ABORT
    again = h.init()
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, epoch + 2)
    # The zombie with the old epoch is fenced everywhere.
    assert h.add("tx", pid, epoch) == FENCED
    assert h.end("tx", pid, epoch, True) == FENCED


def test_exhausted_epoch_gets_a_new_producer_id() -> None:
    h = Harness()
    p = partition_for("tx", 3)
    from pylog.txn.metadata import TxnTransit
    t = TxnTransit(77, -1, 32766, -1, 60_000, S.COMPLETE_COMMIT, frozenset(), 5, 6)
    h.log[p] = [(encode_key("tx"), encode_value(t))]
    h.host_all()
    r = h.init()
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)
    md = h.coord.metadata("tx")
    assert md is not None and md.previous_producer_id == 77


def test_kip360_with_an_exhausted_epoch() -> None:
    h = Harness()
    from pylog.txn.metadata import TxnTransit
    h.log[partition_for("tx", 3)] = [(encode_key("tx"), encode_value(
        TxnTransit(77, -1, 32765, -1, 60_000, S.EMPTY, frozenset(), -1, 6)))]
    h.host_all()
    last = h.init(expected=(77, 32765))
    assert (last.error_code, last.producer_id, last.producer_epoch) == (0, 77, 32766)
    # A retry of that call after the epoch ran out: the current epoch, no rotation.
    assert (h.init(expected=(77, 32765)).producer_epoch, h.coord.metadata("tx").producer_id) == (  # type: ignore[union-attr]
        32766, 77)
    assert h.init(expected=(77, 3)).error_code == FENCED
    rotated = h.init(expected=(77, 32766))
    assert (rotated.error_code, rotated.producer_id, rotated.producer_epoch) == (0, 1000, 0)
    # The previous id with its exhausted epoch is a retry of the rotation, not a zombie.
    assert h.init(expected=(77, 32766)).error_code == 0


def test_kip360_expected_producer_id_and_epoch(h: Harness) -> None:
    r = h.init()
    pid = r.producer_id
    bumped = h.init(expected=(pid, 0))
    assert (bumped.error_code, bumped.producer_epoch) == (0, 1)
    # A retry of that call (the answer was lost): the current epoch, no second bump.
    retry = h.init(expected=(pid, 0))
    assert (retry.error_code, retry.producer_epoch) == (0, 1)
    assert h.init(expected=(pid, 5)).error_code == FENCED
    assert h.init(expected=(pid + 1, 1)).error_code == FENCED


# --------------------------------------------------------------------------- AddPartitionsToTxn


def test_add_partitions_errors(h: Harness) -> None:
    assert h.add("nobody", 1, 0) == MAPPING
    r = h.init()
    assert h.add("tx", r.producer_id + 1, 0) == MAPPING
    assert h.add("tx", r.producer_id, 3) == FENCED
    assert h.add("", r.producer_id, 0) == errors.InvalidRequestError.code


def test_add_partitions_starts_the_transaction_and_unions(h: Harness) -> None:
    t0 = h.clock.time_ms()
    pid, epoch = begin(h)
    md = h.coord.metadata("tx")
    assert md is not None and md.state == S.ONGOING and md.txn_start_ms == t0
    h.clock.advance(50)
    assert h.add("tx", pid, epoch, TP2) == 0
    assert md.partitions == {TP, TP2} and md.txn_start_ms == t0
    v = h.last_record()
    assert [(p.topic, p.partition_ids) for p in v.transaction_partitions] == [("t", [0, 1])]
    # Already in the transaction: answered at once, nothing written.
    pending = h.coord.add_partitions("tx", pid, epoch, [TP])
    assert pending.done and pending.result == 0 and h.coord.take_writes() == []


def test_failed_write_clears_the_pending_state(h: Harness) -> None:
    r = h.init()
    pending = h.coord.add_partitions("tx", r.producer_id, r.producer_epoch, [TP])
    h.flush(fail=errors.NotLeaderOrFollowerError.code)
    assert pending.result == errors.NotCoordinatorError.code
    assert h.state() == S.EMPTY
    assert h.add("tx", r.producer_id, r.producer_epoch) == 0


@pytest.mark.parametrize("append_error,client_error", [
    (errors.UnknownTopicOrPartitionError.code, errors.CoordinatorNotAvailableError.code),
    (errors.KafkaStorageError.code, errors.NotCoordinatorError.code),
    (errors.MessageTooLargeError.code, errors.UnknownServerError.code),
])
def test_append_errors_are_mapped(h: Harness, append_error: int, client_error: int) -> None:
    pending = h.coord.init_producer_id("tx", 60_000)
    h.flush(fail=append_error)
    assert pending.result.error_code == client_error


def test_verify_partitions(h: Harness) -> None:
    pid, epoch = begin(h)
    assert h.coord.verify_partitions("tx", pid, epoch, [TP, TP2]) == {
        TP: 0, TP2: errors.TransactionAbortableError.code}
    assert h.coord.verify_partitions("tx", pid, epoch + 1, [TP]) == {TP: FENCED}
    assert h.coord.verify_partitions("tx", pid + 1, epoch, [TP]) == {TP: MAPPING}
    assert h.coord.verify_partitions("zz", pid, epoch, [TP]) == {TP: MAPPING}
    assert h.end("tx", pid, epoch, True) == 0
    assert h.coord.verify_partitions("tx", pid, epoch, [TP]) == {TP: CONCURRENT}


# --------------------------------------------------------------------------- EndTxn and markers


def test_commit_writes_prepare_then_markers_then_complete(h: Harness) -> None:
    pid, epoch = begin(h, "tx", TP, TP2)
    pending = h.coord.end_txn("tx", pid, epoch, True)
    assert not pending.done  # answered once PrepareCommit is in the log
    h.flush()
    assert pending.result == 0 and h.state() == S.PREPARE_COMMIT
    [m] = h.markers
    assert (m.transactional_id, m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch) == (
        "tx", pid, epoch, True, 0)
    assert h.end("tx", pid, epoch, True) == CONCURRENT  # retry while markers are written
    assert h.add("tx", pid, epoch, TP) == CONCURRENT
    h.ack_markers()
    assert h.state() == S.COMPLETE_COMMIT
    v = h.last_record()
    assert v.transaction_status == int(S.COMPLETE_COMMIT) and v.transaction_partitions == []
    md = h.coord.metadata("tx")
    assert md is not None and md.partitions == set()
    # Retries after completion; the opposite result is refused.
    assert h.end("tx", pid, epoch, True) == 0
    assert h.end("tx", pid, epoch, False) == INVALID_TXN_STATE
    # A next transaction with the same epoch (transaction.version 0).
    assert h.add("tx", pid, epoch, TP2) == 0 and h.state() == S.ONGOING


def test_end_txn_state_table(h: Harness) -> None:
    r = h.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert h.end("tx", pid, epoch, True) == INVALID_TXN_STATE  # Empty
    assert h.end("nobody", pid, epoch, True) == MAPPING
    assert h.end("tx", pid + 1, epoch, True) == MAPPING
    assert h.end("tx", pid, epoch + 1, True) == FENCED
    assert h.add("tx", pid, epoch) == 0
    assert h.end("tx", pid, epoch, False) == 0
    # While the markers are written the completion is pending: any EndTxn is told to retry.
    assert h.end("tx", pid, epoch, True) == CONCURRENT
    assert h.end("tx", pid, epoch, False) == CONCURRENT
    h.ack_markers()
    assert h.state() == S.COMPLETE_ABORT
    assert h.end("tx", pid, epoch, False) == 0
    assert h.end("tx", pid, epoch, True) == INVALID_TXN_STATE


def test_failed_markers_are_retried_after_a_backoff(h: Harness) -> None:
    pid, epoch = begin(h, "tx", TP, TP2)
    h.end("tx", pid, epoch, True)
    h.ack_markers({TP2: errors.NotLeaderOrFollowerError.code})
    md = h.coord.metadata("tx")
    assert md is not None and md.partitions == {TP2} and h.state() == S.PREPARE_COMMIT
    assert h.markers == []
    h.tick(h.config.retry_backoff_ms)
    [m] = h.markers
    assert m.partitions == {TP2}
    h.ack_markers()
    assert h.state() == S.COMPLETE_COMMIT


def test_marker_for_a_deleted_partition_is_dropped(h: Harness) -> None:
    pid, epoch = begin(h, "tx", TP, TP2)
    h.end("tx", pid, epoch, False)
    h.gone.add(TP2)
    h.ack_markers({TP2: errors.UnknownTopicOrPartitionError.code})
    assert h.state() == S.COMPLETE_ABORT


def test_fenced_marker_stops_the_completion(h: Harness) -> None:
    pid, epoch = begin(h)
    h.end("tx", pid, epoch, True)
    h.ack_markers({TP: errors.InvalidProducerEpochError.code})
    h.tick(10 * h.config.retry_backoff_ms)
    assert h.markers == [] and h.state() == S.PREPARE_COMMIT


def test_completion_write_unavailable_is_retried(h: Harness) -> None:
    pid, epoch = begin(h)
    h.end("tx", pid, epoch, True)
    for m in h.markers:
        h.coord.on_markers_written(m, {TP: 0})
    h.markers = []
    h.flush(fail=errors.NotEnoughReplicasError.code)
    assert h.state() == S.PREPARE_COMMIT
    h.tick(h.config.retry_backoff_ms)
    assert h.state() == S.COMPLETE_COMMIT


# --------------------------------------------------------------------------- timers


def test_timed_out_transaction_is_fenced_and_aborted() -> None:
    h = Harness(TransactionConfig(num_partitions=3, abort_timed_out_interval_ms=1_000))
    h.host_all()
    r = h.init("tx", timeout=5_000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert h.add("tx", pid, epoch) == 0
    h.tick(1_000)
    assert h.state() == S.ONGOING  # not timed out yet
    h.tick(5_000)
    assert h.state() == S.PREPARE_ABORT
    [m] = h.markers
    assert (m.commit, m.producer_epoch) == (False, epoch + 1)
    h.ack_markers()
    assert h.state() == S.COMPLETE_ABORT
    assert h.add("tx", pid, epoch) == FENCED
    assert h.end("tx", pid, epoch, True) == FENCED
    assert h.init().producer_epoch == epoch + 2


def test_a_timed_out_transaction_shows_the_bumped_epoch_before_prepare_abort_is_written() -> None:
    """Kafka's prepareFenceProducerEpoch: the epoch is bumped in memory at once, the state
    stays Ongoing until the PrepareAbort write is acknowledged. DescribeTransactions in
    between answers (Ongoing, epoch + 1): a client must wait for the state, not the epoch
    (what made test_open_transaction_times_out_and_is_aborted flaky under load)."""
    h = Harness(TransactionConfig(num_partitions=3, abort_timed_out_interval_ms=1_000))
    h.host_all()
    r = h.init("tx", timeout=1_000)
    assert h.add("tx", r.producer_id, r.producer_epoch) == 0
    h.clock.advance(2_000)
    h.coord.tick()  # the abort of the timed-out transaction starts; its write is pending
    d = h.coord.describe("tx")
    assert (d.state, d.producer_epoch) == ("Ongoing", r.producer_epoch + 1)
    h.flush()
    d = h.coord.describe("tx")
    assert (d.state, d.producer_epoch) == ("PrepareAbort", r.producer_epoch + 1)


def test_failed_fence_write_does_not_bump_twice() -> None:
    h = Harness(TransactionConfig(num_partitions=3, abort_timed_out_interval_ms=1_000))
    h.host_all()
    r = h.init("tx", timeout=1_000)
    h.add("tx", r.producer_id, r.producer_epoch)
    h.clock.advance(2_000)
    h.coord.tick()
    h.flush(fail=errors.NotLeaderOrFollowerError.code)
    md = h.coord.metadata("tx")
    assert md is not None and md.state == S.ONGOING and md.producer_epoch == 1 and md.has_failed_epoch_fence
    h.tick(1_000)
    assert md.state == S.PREPARE_ABORT and md.producer_epoch == 1


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    h = Harness(TransactionConfig(num_partitions=1, transactional_id_expiration_ms=10_000,
                                  remove_expired_interval_ms=5_000, abort_timed_out_interval_ms=900_000))
    h.host_all()
    h.init("idle")
    r = h.init("busy", timeout=900_000)
    h.add("busy", r.producer_id, r.producer_epoch)
    h.tick(5_000)
    assert h.coord.describe("idle").error_code == 0
    h.tick(5_000)
    assert h.coord.describe("idle").error_code == errors.TransactionalIdNotFoundError.code
    assert h.coord.describe("busy").state == "Ongoing"  # an open transaction never expires
    assert h.log[0][-1] == (encode_key("idle"), None)
    # A tombstone that fails to be written keeps the id.
    h.init("again")
    h.clock.advance(10_000)
    h.coord.tick()
    h.flush(fail=errors.NotLeaderOrFollowerError.code)
    assert h.coord.describe("again").error_code == 0
    assert h.init("again").error_code == 0


# --------------------------------------------------------------------------- loading


def test_reload_replays_the_log_and_resends_markers_of_prepared_transactions(h: Harness) -> None:
    pid, epoch = begin(h, "committing", TP, TP2)
    h.end("committing", pid, epoch, True)
    h.markers = []  # the broker died before the markers went out
    begin(h, "open")
    h.init("idle")
    h.init("gone")
    h.log[partition_for("gone", 3)].append((encode_key("gone"), None))

    h2 = Harness(log=h.log, clock=h.clock)
    h2.host_all()
    assert h2.coord.describe("open").state == "Ongoing"
    assert h2.coord.describe("idle").state == "Empty"
    assert h2.coord.describe("gone").error_code == errors.TransactionalIdNotFoundError.code
    assert h2.coord.describe("committing").state == "PrepareCommit"
    [m] = h2.markers
    assert (m.transactional_id, m.commit, m.partitions) == ("committing", True, {TP, TP2})
    assert h2.end("committing", pid, epoch, True) == CONCURRENT
    h2.ack_markers()
    assert h2.coord.describe("committing").state == "CompleteCommit"


def test_unknown_key_versions_are_skipped(h: Harness) -> None:
    h.coord.begin_load(0)
    h.coord.replay(0, b"\x00\x07junk", b"\x00\x00")
    h.coord.complete_load(0)
    assert h.coord.list_transactions().transactions == []


# --------------------------------------------------------------------------- describe and list


def test_describe_and_list_with_filters(h: Harness) -> None:
    t0 = h.clock.time_ms()
    a_pid, a_epoch = begin(h, "a", TP, TP2)
    b = h.init("b")
    h.clock.advance(1_000)
    d = h.coord.describe("a")
    assert (d.error_code, d.state, d.timeout_ms, d.start_time_ms, d.producer_id, d.producer_epoch) == (
        0, "Ongoing", 60_000, t0, a_pid, a_epoch)
    assert d.partitions == [TP, TP2]
    assert h.coord.describe("b").start_time_ms == -1
    assert h.coord.describe("").error_code == errors.InvalidRequestError.code
    everything = h.coord.list_transactions()
    assert everything.transactions == [("a", a_pid, "Ongoing"), ("b", b.producer_id, "Empty")]
    ongoing = h.coord.list_transactions(["Ongoing", "Bogus"])
    assert ongoing.transactions == [("a", a_pid, "Ongoing")] and ongoing.unknown_state_filters == ["Bogus"]
    assert h.coord.list_transactions([], [b.producer_id]).transactions == [("b", b.producer_id, "Empty")]
    assert h.coord.list_transactions(duration_filter_ms=500).transactions[0][0] == "a"
    assert [t[0] for t in h.coord.list_transactions(duration_filter_ms=2_000).transactions] == ["b"]
