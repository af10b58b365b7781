"""Transaction states and transitions (pylog.txn.metadata) and the __transaction_state
record formats (pylog.txn.records)."""

from __future__ import annotations

import pytest

from pylog.protocol._records import TransactionLogValue
from pylog.txn.metadata import (
    VALID_PREVIOUS,
    IllegalTransitionError,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
    state_from_name,
)
from pylog.txn.records import (
    TxnKey,
    TxnRecordError,
    UnknownKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    metadata_from_value,
)

S = TxnState


def md(state: TxnState = S.EMPTY, epoch: int = 0) -> TransactionMetadata:
    return TransactionMetadata("tx", 5, producer_epoch=epoch, txn_timeout_ms=1000, state=state,
                               txn_last_update_ms=1)


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(int(s), s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert state_from_name("Ongoing") is S.ONGOING and state_from_name("ongoing") is None


def test_valid_previous_states() -> None:
    assert VALID_PREVIOUS[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert VALID_PREVIOUS[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


@pytest.mark.parametrize("state", list(S))
def test_every_illegal_move_is_refused(state: TxnState) -> None:
    moves = {
        S.ONGOING: lambda m: m.prepare_add_partitions({("t", 0)}, 2),
        S.PREPARE_COMMIT: lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 2),
        S.PREPARE_ABORT: lambda m: m.prepare_abort_or_commit(S.PREPARE_ABORT, 2),
        S.DEAD: lambda m: m.prepare_dead(),
        S.PREPARE_EPOCH_FENCE: lambda m: m.prepare_fence_producer_epoch(),
    }
    for target, move in moves.items():
        m = md(state)
        if state in VALID_PREVIOUS[target]:
            assert move(m).state == target and m.pending_state == target
        else:
            with pytest.raises(IllegalTransitionError):
                move(m)
            assert m.pending_state is None


def test_one_pending_transition_at_a_time_and_completion_checks() -> None:
    m = md(S.EMPTY)
    t = m.prepare_add_partitions({("t", 0)}, 2)
    with pytest.raises(IllegalTransitionError):
        m.prepare_add_partitions({("t", 1)}, 3)
    other = TxnTransit(5, 5, 0, -1, 1000, S.PREPARE_COMMIT, frozenset(), 2, 2)
    with pytest.raises(IllegalTransitionError):
        m.complete_transition(other)
    m.complete_transition(t)
    assert (m.state, m.partitions, m.txn_start_ms, m.pending_state) == (S.ONGOING, {("t", 0)}, 2, None)
    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 3)
    m.complete_transition(t)
    m.remove_partition(("t", 0))
    m.complete_transition(m.prepare_complete(4))
    assert (m.state, m.partitions, m.txn_last_update_ms) == (S.COMPLETE_COMMIT, set(), 4)


def test_epoch_bumps() -> None:
    assert not is_epoch_exhausted(32765) and is_epoch_exhausted(32766)
    m = md(S.COMPLETE_ABORT, epoch=3)
    t = m.prepare_increment_producer_epoch(2000, None, 9)
    assert t is not None and (t.producer_epoch, t.last_producer_epoch, t.txn_timeout_ms) == (4, -1, 2000)
    m.complete_transition(t)
    assert (m.state, m.producer_epoch, m.txn_timeout_ms) == (S.EMPTY, 4, 2000)
    assert m.prepare_increment_producer_epoch(2000, 1, 9) is None  # neither current nor last
    m = md(S.ONGOING, epoch=7)
    assert m.prepare_fence_producer_epoch().producer_epoch == 8
    m = md(S.EMPTY, epoch=32766)
    with pytest.raises(IllegalTransitionError):
        m.prepare_increment_producer_epoch(1000, None, 9)
    t = m.prepare_producer_id_rotation(99, 1000, 9, record_last_epoch=True)
    m.complete_transition(t)
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id, m.last_producer_epoch) == (99, 0, 5, 32766)


# --------------------------------------------------------------------------- records


def test_key_and_value_v0_bytes() -> None:
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    t = TxnTransit(7, -1, 2, -1, 60000, S.ONGOING, frozenset({("b", 1), ("a", 3), ("b", 0)}), 100, 200)
    raw = encode_value(t)
    assert raw[:2] == b"\x00\x00"
    # ProducerId, ProducerEpoch, TimeoutMs, Status, then 2 topics: "a" [3], "b" [0, 1].
    assert raw[2:17] == b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x02\x00\x00\xea\x60\x01"
    assert raw[17:21] == b"\x00\x00\x00\x02"
    v = decode_value(raw)
    assert v is not None
    assert [(p.topic, p.partition_ids) for p in v.transaction_partitions] == [("a", [3]), ("b", [0, 1])]
    assert (v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms) == (200, 100)
    m = metadata_from_value("tx", v)
    assert (m.state, m.partitions, m.producer_id, m.producer_epoch) == (
        S.ONGOING, {("a", 3), ("b", 0), ("b", 1)}, 7, 2)


def test_empty_state_has_null_partitions() -> None:
    t = TxnTransit(7, -1, 0, -1, 1000, S.EMPTY, frozenset(), -1, 5)
    v = decode_value(encode_value(t))
    assert v is not None and v.transaction_partitions is None
    with pytest.raises(ValueError):
        encode_value(TxnTransit(7, -1, 0, -1, 1000, S.EMPTY, frozenset({("a", 0)}), -1, 5))


def test_value_v1_is_read() -> None:
    value = TransactionLogValue(producer_id=9, previous_producer_id=4, next_producer_id=-1, producer_epoch=1,
                                transaction_timeout_ms=1000, transaction_status=int(S.COMPLETE_COMMIT),
                                transaction_partitions=[], transaction_last_update_timestamp_ms=3,
                                transaction_start_timestamp_ms=2, client_transaction_version=1)
    v = decode_value(b"\x00\x01" + value.encode(1))
    assert v is not None
    m = metadata_from_value("tx", v)
    assert (m.producer_id, m.previous_producer_id, m.state) == (9, 4, S.COMPLETE_COMMIT)


def test_tombstones_unknown_keys_and_garbage() -> None:
    assert decode_value(None) is None
    assert decode_key(encode_key("x")) == TxnKey("x")
    assert decode_key(b"\x00\x05abc") == UnknownKey(5)
    with pytest.raises(TxnRecordError):
        decode_key(b"\x00")
    with pytest.raises(TxnRecordError):
        decode_value(b"\x00\x00\x00\x01")
    with pytest.raises(TxnRecordError):
        decode_value(b"\x00\x09" + b"\x00" * 40)
    bad_status = TransactionLogValue(producer_id=1, producer_epoch=0, transaction_timeout_ms=1,
                                     transaction_status=42, transaction_partitions=None)
    v = decode_value(b"\x00\x00" + bad_status.encode(0))
    assert v is not None
    with pytest.raises(TxnRecordError):
        metadata_from_value("tx", v)
