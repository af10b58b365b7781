"""One transactional id's state and its allowed transitions (Kafka's ``TransactionMetadata``).

A ``TransactionMetadata`` is the coordinator's view of one ``transactional.id``: its producer
id and epoch, the transaction timeout, the state (``TxnState``), the partitions of the open
transaction and two timestamps. Every change goes in two steps, as in Kafka:

1. ``prepare_*`` checks the move is allowed from the current state (``VALID_PREVIOUS``),
   records it as the one pending transition (``pending_state``) and returns a ``TxnTransit``:
   the values the metadata will have, which are written to ``__transaction_state``;
2. once that record is in the log, ``complete_transition(transit)`` applies it. If the write
   fails, the caller clears ``pending_state`` instead.

While a transition is pending no other may start: the coordinator answers
CONCURRENT_TRANSACTIONS (the client retries). ``prepare_*`` raising ``IllegalTransitionError``
means a coordinator bug (a move the coordinator should have refused before calling).

Only transaction.version 0 semantics are implemented (no epoch bump per transaction, which
needs EndTxn v5).

Not thread-safe: owned by the coordinator's thread (the broker's event loop).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` ids (the ``TransactionStatus`` field of the log value)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions show (``"PrepareCommit"``)."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}


def state_from_name(name: str) -> TxnState | None:
    """The state called ``name`` (exact, case-sensitive as Kafka's ``fromName``), or None."""
    return _BY_NAME.get(name)


_S = TxnState

# The states a state may be entered from (Kafka's ``validPreviousStates``).
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}

# States from which an idle transactional id may expire (``isExpirationAllowed``).
EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})

TopicPartition = tuple[str, int]


def is_epoch_exhausted(epoch: int) -> bool:
    """No more epochs for this producer id: ``epoch >= Short.MaxValue - 1``. The last value
    is kept so that the coordinator can always fence the producer once more."""
    return epoch >= MAX_EPOCH - 1


class IllegalTransitionError(RuntimeError):
    """A transition the state machine does not allow was asked for (a coordinator bug)."""


@dataclass(frozen=True)
class TxnTransit:
    """The values a metadata will have after a pending transition (what is written)."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_ms: int
    txn_last_update_ms: int


class TransactionMetadata:
    """The coordinator's state for one transactional id. See the module docstring."""

    __slots__ = ("transactional_id", "producer_id", "previous_producer_id", "producer_epoch",
                 "last_producer_epoch", "txn_timeout_ms", "state", "partitions", "txn_start_ms",
                 "txn_last_update_ms", "pending_state", "has_failed_epoch_fence")

    def __init__(self, transactional_id: str, producer_id: int, *, previous_producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH, last_producer_epoch: int = NO_PRODUCER_EPOCH,
                 txn_timeout_ms: int, state: TxnState = TxnState.EMPTY,
                 partitions: set[TopicPartition] | None = None, txn_start_ms: int = -1,
                 txn_last_update_ms: int) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions: set[TopicPartition] = set(partitions or ())
        self.txn_start_ms = txn_start_ms
        self.txn_last_update_ms = txn_last_update_ms
        self.pending_state: TxnState | None = None
        # An epoch fence whose PrepareAbort write failed already bumped the epoch in memory:
        # the next fence must not bump it again (Kafka's ``hasFailedEpochFence``).
        self.has_failed_epoch_fence = False

    # ------------------------------------------------------------------ queries

    @property
    def pending_transition(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def __repr__(self) -> str:
        return (f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
                f"epoch={self.producer_epoch}, state={self.state.kafka_name}, "
                f"pending={None if self.pending_state is None else self.pending_state.kafka_name}, "
                f"partitions={sorted(self.partitions)})")

    # ------------------------------------------------------------------ prepare

    def _prepare(self, state: TxnState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start_ms: int, update_ms: int) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: transition to {state.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise IllegalTransitionError(f"illegal producer id {producer_id}")
        if state != TxnState.DEAD and epoch < 0:
            raise IllegalTransitionError(f"illegal producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: {state.kafka_name} cannot follow "
                f"{self.state.kafka_name}")
        self.pending_state = state
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, partitions,
                          start_ms, update_ms)

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Ongoing -> PrepareEpochFence with epoch + 1 (kept in memory only; the abort that
        follows writes PrepareAbort with it)."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTransitionError("cannot fence a producer whose epoch is Short.MaxValue")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                             self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_ms,
                             self.txn_last_update_ms)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransit | None:
        """-> Empty with the epoch bumped (InitProducerId). ``expected_epoch`` (KIP-360, v3+):
        the epoch the producer has; equal to the last epoch means a retry (no bump). None
        when the expected epoch matches neither (the caller answers PRODUCER_FENCED).
        Raises ``IllegalTransitionError`` when a bump is needed but the epoch is exhausted
        (the caller rotates the producer id instead)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        if epoch != self.producer_epoch and self.epoch_exhausted:
            raise IllegalTransitionError(f"no epochs left for producer id {self.producer_id}")
        return self._prepare(TxnState.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """-> Empty with a new producer id and epoch 0 (the old id's epochs are exhausted)."""
        if self.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalTransitionError("cannot rotate the producer id of an open transaction")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(TxnState.EMPTY, new_producer_id, 0, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int) -> TxnTransit:
        """-> Ongoing with ``added`` joined to the transaction (its start time is set when a
        new transaction begins)."""
        start = now_ms if self.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT,
                                         TxnState.COMPLETE_COMMIT) else self.txn_start_ms
        return self._prepare(TxnState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions | added), start, now_ms)

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int) -> TxnTransit:
        """Ongoing -> PrepareCommit / PrepareAbort (EndTxn, or an abort by the coordinator)."""
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_ms, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort (all markers written)."""
        state = TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(state, self.producer_id, self.producer_epoch, self.producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_ms, now_ms)

    def prepare_dead(self) -> TxnTransit:
        """-> Dead (expiry of an idle id): a tombstone is written, then the id is dropped."""
        return self._prepare(TxnState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_ms, self.txn_last_update_ms)

    # ------------------------------------------------------------------ complete

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker for ``tp`` is written: it leaves the transaction being completed."""
        if self.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: marker acknowledged in state {self.state.kafka_name}")
        self.partitions.discard(tp)

    def complete_transition(self, t: TxnTransit) -> None:
        """Apply the pending transition ``t`` now that its record is in the log."""
        to = self.pending_state
        if to is None or to != t.state:
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: completing {t.state.kafka_name} but the pending "
                f"transition is {None if to is None else to.kafka_name}")
        same_epoch = t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
        if to == TxnState.EMPTY:
            bump = (t.producer_epoch == self.producer_epoch + 1
                    or (t.producer_epoch == 0 and t.producer_id != self.producer_id))
            if (t.producer_epoch != self.producer_epoch and not bump) or t.partitions or t.txn_start_ms != -1:
                self._fail(t)
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.previous_producer_id = t.previous_producer_id
        elif to == TxnState.ONGOING:
            if not same_epoch or not self.partitions <= t.partitions or self.txn_timeout_ms != t.txn_timeout_ms:
                self._fail(t)
            self.txn_start_ms = t.txn_start_ms
            self.partitions |= t.partitions
        elif to in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            if (not same_epoch or self.partitions != t.partitions or self.txn_timeout_ms != t.txn_timeout_ms
                    or self.txn_start_ms != t.txn_start_ms):
                self._fail(t)
        elif to in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            if not same_epoch or self.txn_timeout_ms != t.txn_timeout_ms or t.txn_start_ms == -1:
                self._fail(t)
            self.txn_start_ms = t.txn_start_ms
            self.partitions.clear()
        else:  # PrepareEpochFence is never completed; Dead is removed, never applied
            self._fail(t)
        self.txn_last_update_ms = t.txn_last_update_ms
        self.pending_state = None
        self.state = to

    def _fail(self, t: TxnTransit) -> None:
        raise IllegalTransitionError(f"{self!r}: transition to {t} does not match the metadata")
