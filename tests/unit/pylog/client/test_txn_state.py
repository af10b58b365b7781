"""The transactional producer's state machine (``_txn_state``) and its settings: legal and
illegal calls in each state, fatal vs abortable errors, partitions pending vs added. No
broker, no I/O."""

from __future__ import annotations

import asyncio

import pytest

import logcore
from pylog import errors
from pylog.client import (
    AbortableTransactionError,
    ConfigError,
    FatalTransactionError,
    IllegalStateError,
    TransactionError,
)
from pylog.client.aio._accumulator import PendingBatch
from pylog.client.aio._txn_state import TRANSITIONS, TransactionState, TxnState, classify
from pylog.client.aio.producer import producer_settings

S = TxnState


def ready() -> TransactionState:
    st = TransactionState("tx")
    st.begin_init()
    st.initialized()
    return st


def test_every_state_has_its_transitions_and_fatal_is_final() -> None:
    assert set(TRANSITIONS) == set(TxnState)
    assert TRANSITIONS[S.FATAL_ERROR] == frozenset()
    assert S.READY in TRANSITIONS[S.COMMITTING] and S.READY in TRANSITIONS[S.ABORTING]
    assert S.COMMITTING not in TRANSITIONS[S.ABORTABLE_ERROR]  # only abort after an error


def test_calls_before_init_are_refused_with_what_to_do() -> None:
    st = TransactionState("tx")
    with pytest.raises(IllegalStateError, match="init_transactions"):
        st.begin()
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        st.check_send(("t", 0))
    with pytest.raises(IllegalStateError, match="no transaction is open"):
        st.begin_commit()
    st.begin_init()
    st.begin_init()  # a retry of a failed or timed-out init is allowed
    st.initialized()
    with pytest.raises(IllegalStateError, match="already called"):
        st.begin_init()


def test_one_transaction_round_trip() -> None:
    st = ready()
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        st.check_send(("t", 0))
    st.begin()
    with pytest.raises(IllegalStateError, match="a transaction is open"):
        st.begin()
    assert st.check_send(("t", 0)) is True
    assert st.check_send(("t", 0)) is False  # already pending
    assert not st.may_send(("t", 0))
    assert st.pending_partitions() == [("t", 0)]
    assert not st.started
    st.added([("t", 0)])
    assert st.may_send(("t", 0)) and st.started and not st.pending
    assert st.check_send(("t", 0)) is False
    st.begin_commit()
    with pytest.raises(IllegalStateError):
        st.check_send(("t", 1))  # no sends while committing
    st.completed()
    assert st.state is S.READY and not st.partitions and not st.started
    st.begin()  # the next transaction starts empty
    assert st.check_send(("t", 0)) is True


def test_abortable_error_allows_only_abort() -> None:
    st = ready()
    st.begin()
    st.check_send(("t", 0))
    err = st.fail(classify(errors.TopicAuthorizationFailedError("no"), "AddPartitionsToTxn"))
    assert isinstance(err, AbortableTransactionError)
    assert err.txn_requires_abort() and not err.fatal and not err.retriable
    assert isinstance(err.error, errors.TopicAuthorizationFailedError) and err.code == 29
    assert st.state is S.ABORTABLE_ERROR
    for call in (lambda: st.check_send(("t", 1)), st.begin_commit, st.begin,
                 lambda: st.check_in_transaction("send_offsets_to_transaction()")):
        with pytest.raises(AbortableTransactionError) as info:
            call()
        assert info.value is err
    assert st.failed  # the sender fails what is queued
    st.begin_abort()
    st.completed()
    st.begin()
    assert st.last_error is None


def test_fatal_error_is_final() -> None:
    st = ready()
    st.begin()
    err = st.fail(classify(errors.ProducerFencedError("fenced"), "EndTxn"))
    assert isinstance(err, FatalTransactionError) and err.fatal and not err.txn_requires_abort()
    assert "same transactional.id" in str(err) and err.code == 90
    for call in (st.begin, st.begin_commit, st.begin_abort, st.begin_init,
                 lambda: st.check_send(("t", 0))):
        with pytest.raises(FatalTransactionError):
            call()
    # A later abortable error does not hide the fatal one.
    assert st.fail(classify(errors.TopicAuthorizationFailedError(), "x")) is err


def test_abortable_error_while_not_in_a_transaction_changes_nothing() -> None:
    st = TransactionState("tx")
    st.begin_init()
    st.fail(classify(errors.GroupAuthorizationFailedError(), "x"))
    assert st.state is S.INITIALIZING


@pytest.mark.parametrize("cls, fatal", [
    (errors.ProducerFencedError, True),
    (errors.InvalidProducerEpochError, True),
    (errors.TransactionalIdAuthorizationFailedError, True),
    (errors.InvalidTxnStateError, True),
    (errors.TopicAuthorizationFailedError, False),
    (errors.GroupAuthorizationFailedError, False),
    (errors.TransactionAbortableError, False),
    (errors.UnknownProducerIdError, False),
])
def test_classify(cls: type[errors.ApiError], fatal: bool) -> None:
    e = classify(cls(), "EndTxn")
    assert isinstance(e, TransactionError) and e.fatal is fatal and e.abortable is not fatal
    assert e.__cause__ is e.error


def test_batch_errors_are_abortable_unless_fencing() -> None:
    st = ready()
    st.begin()
    st.batch_failed(errors.InvalidTxnStateError(), "t", 0, sequenced=True)
    assert st.state is S.ABORTABLE_ERROR and st.need_epoch_bump
    st2 = ready()
    st2.begin()
    st2.batch_failed(errors.InvalidProducerEpochError(), "t", 0, sequenced=False)
    assert st2.state is S.FATAL_ERROR and not st2.need_epoch_bump


def test_settings_force_idempotence() -> None:
    base = {"bootstrap.servers": "127.0.0.1:1", "transactional.id": "tx"}
    s = producer_settings(base, {})
    assert s["enable.idempotence"] is True and s["transaction.timeout.ms"] == 60000
    assert producer_settings({**base, "transaction.timeout.ms": "900000"}, {})[
        "transaction.timeout.ms"] == 900000
    with pytest.raises(ConfigError, match="enable.idempotence"):
        producer_settings({**base, "enable.idempotence": False}, {})
    with pytest.raises(ConfigError, match="acks must be all"):
        producer_settings({**base, "acks": 1}, {})
    with pytest.raises(ConfigError, match="max.in.flight"):
        producer_settings({**base, "max.in.flight.requests.per.connection": 6}, {})
    with pytest.raises(ConfigError, match="empty"):
        producer_settings({**base, "transactional.id": ""}, {})
    with pytest.raises(ConfigError, match="transaction.timeout.ms"):
        producer_settings({**base, "transaction.timeout.ms": 0}, {})
    # Without a transactional id, acks=1 still just turns idempotence off.
    assert producer_settings({"bootstrap.servers": "127.0.0.1:1", "acks": 1}, {})[
        "enable.idempotence"] is False


def test_transactional_batches_carry_the_attribute() -> None:
    b = PendingBatch("t", 0, 0, 0.0)
    b.values, b.timestamps = [b"a", b"b"], [1, 2]
    data = b.encode("none", 7, 3, 0, True)
    (batch,) = list(logcore.iter_batches(data))
    assert batch.is_transactional and not batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 0)
    plain = PendingBatch("t", 0, 1, 0.0)
    plain.values, plain.timestamps = [b"a"], [1]
    (batch,) = list(logcore.iter_batches(plain.encode("none", 7, 3, 2)))
    assert not batch.is_transactional


def test_consumer_group_metadata_before_joining() -> None:
    from pylog.client import Consumer, ConsumerGroupMetadata, aio

    with Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                   "group.instance.id": "static-1"}) as c:
        assert c.consumer_group_metadata() == ConsumerGroupMetadata("g", -1, "", "static-1")
    with Consumer({"bootstrap.servers": "127.0.0.1:1"}) as c, \
            pytest.raises(errors.InvalidGroupIdError, match="group.id"):
        c.consumer_group_metadata()

    async def on_a_loop() -> None:
        async with aio.Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}) as ac:
            assert ac.consumer_group_metadata() == ConsumerGroupMetadata("g")

    asyncio.run(on_a_loop())
