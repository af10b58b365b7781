"""The transactional producer's state machine, without I/O (Kafka's ``TransactionManager``
states, ``clients/.../producer/internals/TransactionManager.java``).

States and who moves between them:

- ``UNINITIALIZED`` -> ``INITIALIZING`` (``init_transactions``) -> ``READY`` (InitProducerId
  answered: producer id and epoch known);
- ``READY`` -> ``IN_TRANSACTION`` (``begin_transaction``; nothing is sent);
- ``IN_TRANSACTION`` -> ``COMMITTING`` / ``ABORTING`` (``commit_transaction`` /
  ``abort_transaction``) -> ``READY`` (EndTxn answered, or nothing to end);
- ``IN_TRANSACTION`` / ``COMMITTING`` -> ``ABORTABLE_ERROR`` (a record failed, the group
  refused the offsets, ...): only ``abort_transaction`` is legal, then ``ABORTING``;
- any state -> ``FATAL_ERROR`` (fenced by a newer producer with the same id, not
  authorized, ...): every call raises the error; the producer can only be closed.

Partitions: ``send`` to a partition not yet in the transaction puts it in ``pending``; the
sender sends one AddPartitionsToTxn for everything pending and, once it is answered, the
partitions move to ``partitions`` and their batches may be sent (``may_send``). ``started``
says the coordinator knows of the transaction (partitions or offsets were added), so that
ending it needs an EndTxn; a transaction that added nothing ends without one.

Errors: ``classify`` turns a Kafka error into a ``TransactionError``: fatal for fencing
and authorization of the id or cluster, abortable otherwise. A batch that failed after it
was given sequence numbers leaves a gap the partition leader would refuse, so the epoch is
bumped (InitProducerId again) after the abort (``need_epoch_bump``, KIP-360).

Thread-safety: one ``threading.Lock``; ``check_send`` is called from the thread that
calls ``send`` (blocking facade), everything else from the client's loop.
"""

from __future__ import annotations

import enum
import threading

from pylog import errors
from pylog.client.errors import (
    AbortableTransactionError,
    FatalTransactionError,
    IllegalStateError,
    TransactionError,
)

__all__ = ["TxnState", "TRANSITIONS", "TransactionState", "classify", "FATAL_ERRORS",
           "REFIND_ERRORS", "RETRY_ERRORS"]


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in-transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable-error"
    FATAL_ERROR = "fatal-error"


S = TxnState
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.INITIALIZING}),
    S.INITIALIZING: frozenset({S.READY, S.INITIALIZING}),  # again after a failed attempt
    S.READY: frozenset({S.IN_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.COMMITTING, S.ABORTING, S.ABORTABLE_ERROR}),
    S.COMMITTING: frozenset({S.READY, S.ABORTABLE_ERROR}),
    S.ABORTING: frozenset({S.READY, S.ABORTING}),  # again after a failed EndTxn
    S.ABORTABLE_ERROR: frozenset({S.ABORTING, S.ABORTABLE_ERROR}),
    S.FATAL_ERROR: frozenset(),
}  # and every state -> FATAL_ERROR

# Kafka errors after which the producer cannot go on (Java: ProducerFencedException,
# InvalidProducerEpochException on transactional requests, the authorization failures,
# a broker that cannot do transactions, an EndTxn in a state the coordinator refuses).
FATAL_ERRORS: frozenset[type[errors.ApiError]] = frozenset({
    errors.ProducerFencedError, errors.InvalidProducerEpochError,
    errors.TransactionalIdAuthorizationFailedError, errors.ClusterAuthorizationFailedError,
    errors.UnsupportedVersionError, errors.UnsupportedForMessageFormatError,
    errors.InvalidTransactionTimeoutError, errors.InvalidTxnStateError,
    errors.InvalidProducerIdMappingError,
})
# On a record batch only these are fatal; any other failure only dooms the transaction.
FATAL_BATCH_ERRORS: frozenset[type[errors.ApiError]] = frozenset({
    errors.ProducerFencedError, errors.InvalidProducerEpochError,
    errors.TransactionalIdAuthorizationFailedError, errors.ClusterAuthorizationFailedError,
})
# The coordinator moved or is not there: look it up again, then retry.
REFIND_ERRORS: frozenset[type[errors.ApiError]] = frozenset({
    errors.NotCoordinatorError, errors.CoordinatorNotAvailableError,
})
# Retry the same request after a backoff.
RETRY_ERRORS: frozenset[type[errors.ApiError]] = frozenset({
    errors.CoordinatorLoadInProgressError, errors.ConcurrentTransactionsError,
    errors.RequestTimedOutError, errors.UnknownTopicOrPartitionError,
    errors.OperationNotAttemptedError,
})


def classify(exc: BaseException, what: str, *, batch: bool = False) -> TransactionError:
    """The ``TransactionError`` for ``exc`` met while doing ``what``: fatal for the errors
    of ``FATAL_ERRORS`` (``FATAL_BATCH_ERRORS`` for a record batch), abortable otherwise."""
    if isinstance(exc, TransactionError):
        return exc
    fatal = type(exc) in (FATAL_BATCH_ERRORS if batch else FATAL_ERRORS)
    if fatal:
        hint = ("another producer with the same transactional.id took over (or the "
                "transaction timed out): close this producer"
                if isinstance(exc, (errors.ProducerFencedError, errors.InvalidProducerEpochError))
                else "the producer cannot go on: close it")
        return FatalTransactionError(f"{what}: {exc} ({hint})", exc)
    return AbortableTransactionError(
        f"{what}: {exc} (call abort_transaction(), then begin a new transaction)", exc)


TP = tuple[str, int]


class TransactionState:
    """The state of one transactional producer (see the module docstring).

    Args:
        transactional_id: ``transactional.id``.
    """

    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.lock = threading.Lock()
        self.state = TxnState.UNINITIALIZED
        self.partitions: set[TP] = set()  # in the transaction at the coordinator
        self.pending: set[TP] = set()  # sent to, AddPartitionsToTxn not answered yet
        self.started = False  # the coordinator knows of the transaction
        self.maybe_started = False  # an add whose answer was lost: it may
        self.last_error: TransactionError | None = None
        self.need_epoch_bump = False

    def __repr__(self) -> str:
        return f"TransactionState({self.transactional_id!r}, {self.state.value})"

    # ------------------------------------------------------------------ transitions

    def _to(self, new: TxnState) -> None:
        if new is not TxnState.FATAL_ERROR and new not in TRANSITIONS[self.state]:
            raise IllegalStateError(f"transactional producer {self.transactional_id!r}: "
                                    f"cannot go from {self.state.value} to {new.value}")
        self.state = new

    def _raise_if_failed(self) -> None:
        if self.state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
            assert self.last_error is not None
            raise self.last_error

    def _illegal(self, call: str, hint: str) -> IllegalStateError:
        return IllegalStateError(f"{call} in state {self.state.value} of transactional "
                                 f"producer {self.transactional_id!r}: {hint}")

    def begin_init(self) -> None:
        with self.lock:
            if self.state is TxnState.FATAL_ERROR:
                self._raise_if_failed()
            if self.state not in (TxnState.UNINITIALIZED, TxnState.INITIALIZING):
                raise self._illegal("init_transactions()", "it was already called")
            self._to(TxnState.INITIALIZING)

    def initialized(self) -> None:
        with self.lock:
            self._to(TxnState.READY)
            self.need_epoch_bump = False

    def begin(self) -> None:
        with self.lock:
            self._raise_if_failed()
            if self.state is TxnState.UNINITIALIZED or self.state is TxnState.INITIALIZING:
                raise self._illegal("begin_transaction()", "call init_transactions() first")
            if self.state is not TxnState.READY:
                raise self._illegal("begin_transaction()",
                                    "a transaction is open: commit or abort it first")
            self._to(TxnState.IN_TRANSACTION)
            self.partitions.clear()
            self.pending.clear()
            self.started = self.maybe_started = False
            self.last_error = None

    def check_send(self, tp: TP) -> bool:
        """A record for ``tp`` may be sent in this transaction (its partition is added if
        new: returns True then).

        Raises:
            TransactionError: the transaction failed (the stored error).
            IllegalStateError: no transaction is open.
        """
        with self.lock:
            if self.state is not TxnState.IN_TRANSACTION:
                self._raise_if_failed()
                raise self._illegal("send()", "call begin_transaction() first")
            if tp in self.partitions or tp in self.pending:
                return False
            self.pending.add(tp)
            return True

    def check_in_transaction(self, call: str) -> None:
        with self.lock:
            if self.state is not TxnState.IN_TRANSACTION:
                self._raise_if_failed()
                raise self._illegal(call, "call begin_transaction() first")

    def may_send(self, tp: TP) -> bool:
        """The partition is in the transaction: its batches may go (the sender's check)."""
        return tp in self.partitions

    def pending_partitions(self) -> list[TP]:
        with self.lock:
            return sorted(self.pending)

    def added(self, tps: list[TP]) -> None:
        """AddPartitionsToTxn accepted ``tps``."""
        with self.lock:
            for tp in tps:
                self.pending.discard(tp)
                self.partitions.add(tp)
            if tps:
                self.started = True

    def offsets_added(self) -> None:
        """AddOffsetsToTxn accepted the group's offsets partition."""
        with self.lock:
            self.started = True

    def begin_commit(self) -> None:
        with self.lock:
            self._raise_if_failed()
            if self.state is not TxnState.IN_TRANSACTION:
                raise self._illegal("commit_transaction()", "no transaction is open")
            self._to(TxnState.COMMITTING)

    def begin_abort(self) -> None:
        with self.lock:
            if self.state is TxnState.FATAL_ERROR:
                self._raise_if_failed()
            if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR,
                                  TxnState.ABORTING):
                raise self._illegal("abort_transaction()", "no transaction is open")
            self._to(TxnState.ABORTING)

    def completed(self) -> None:
        """EndTxn answered (or nothing was to end): ready for the next transaction."""
        with self.lock:
            self._to(TxnState.READY)
            self.partitions.clear()
            self.pending.clear()
            self.started = self.maybe_started = False
            self.last_error = None

    # ------------------------------------------------------------------ errors

    @property
    def failed(self) -> bool:
        """Records still queued must not be sent (an error, or the transaction is being
        aborted)."""
        return self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR, TxnState.ABORTING)

    @property
    def adding_allowed(self) -> bool:
        return self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING)

    def fail(self, error: TransactionError) -> TransactionError:
        """Record ``error``: fatal always; abortable while a transaction is open or
        committing (an abortable error met while aborting or initializing changes nothing).
        Returns the error in force (a fatal one stays)."""
        with self.lock:
            if self.state is TxnState.FATAL_ERROR:
                assert self.last_error is not None
                return self.last_error
            if error.fatal:
                self._to(TxnState.FATAL_ERROR)
                self.last_error = error
            elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
                self._to(TxnState.ABORTABLE_ERROR)
                self.last_error = error
            return error

    def batch_failed(self, exc: BaseException, topic: str, partition: int,
                     sequenced: bool) -> None:
        """A record batch of the transaction failed for good."""
        if sequenced:
            self.need_epoch_bump = True
        self.fail(classify(exc, f"records for {topic}-{partition}", batch=True))
