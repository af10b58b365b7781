"""Errors the client raises besides the broker's (``pylog.errors.ApiError`` per Kafka code).

Broker answers with an error code surface as the ``pylog.errors`` class for that code
(``NotLeaderOrFollowerError``, ``TopicAlreadyExistsError``, ...). The classes here are the
client-side failures Kafka's Java client also has names for.
"""

from __future__ import annotations

from pylog.client.config import ConfigError
from pylog.errors import ApiError, InvalidGroupIdError, KafkaError
from pylog.log.dir_lock import LogDirInUseError
from pylog.net.errors import KafkaConnectionError, KafkaTimeoutError

__all__ = ["ConfigError", "KafkaTimeoutError", "KafkaConnectionError", "ClientClosedError",
           "NoOffsetForPartitionError", "RecordTooLargeError", "IllegalStateError",
           "CommitFailedError", "GroupsNotAvailableError", "LogDirInUseError",
           "TransactionError", "FatalTransactionError", "AbortableTransactionError",
           "RetriableTransactionError", "TransactionAbortedError"]


class ClientClosedError(KafkaError):
    """The client was closed; nothing more can be sent or polled."""


class NoOffsetForPartitionError(KafkaError):
    """A partition has no position and ``auto.offset.reset`` is ``none`` (or the position is
    out of range with ``none``)."""


class RecordTooLargeError(KafkaError, ValueError):
    """A record is larger than ``max.request.size`` or ``buffer.memory``."""


class IllegalStateError(KafkaError):
    """The call is not legal in the client's current state (e.g. position of an unassigned
    partition)."""


# ``LogDirInUseError`` (an ``OSError``, from ``pylog.log.dir_lock``): embedded mode could not
# open ``log.dir`` because another process (a broker, or another program's embedded
# clients) holds it; the message and ``.holder`` name that process.


class CommitFailedError(KafkaError):
    """An offset commit the group cannot accept any more: the group rebalanced and the
    partitions may belong to another member now (Kafka's ``CommitFailedException``).

    Usually the time between ``poll()`` calls exceeded ``max.poll.interval.ms``: poll more
    often, or lower ``max.poll.records``. The consumer rejoins on its next ``poll()``.
    """


# A group call (subscribe, commit, committed) on a consumer without ``group.id`` raises
# Kafka's InvalidGroupIdError; the old name of that case is kept for callers written
# before consumer groups existed in this client.
GroupsNotAvailableError = InvalidGroupIdError


class TransactionError(KafkaError):
    """A transactional producer call failed (``init_transactions``, ``begin_transaction``,
    ``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``, or a
    ``send`` inside a transaction).

    What to do next is in three flags, as confluent-kafka's ``KafkaError`` has them:

    - ``fatal``: the producer can do nothing more (fenced by a newer producer with the same
      ``transactional.id``, not authorized, ...): close it (and create a new one to go on).
    - ``abortable`` (``txn_requires_abort()``): this transaction cannot commit; call
      ``abort_transaction()``, then begin a new one.
    - ``retriable``: the call did not finish in its timeout but is still going on: call the
      same method again.

    Attributes:
        error: the Kafka error underneath (a ``pylog.errors.ApiError`` such as
            ``ProducerFencedError``, or a client error), or None. Also ``__cause__``.
        code: its Kafka error code (-1 if it has none).
    """

    fatal = False
    abortable = False
    retriable = False

    def __init__(self, message: str, error: BaseException | None = None) -> None:
        super().__init__(message)
        self.error = error
        if error is not None:
            self.__cause__ = error

    @property
    def code(self) -> int:
        return self.error.code if isinstance(self.error, ApiError) else -1

    def txn_requires_abort(self) -> bool:
        """True when ``abort_transaction()`` is the way on (confluent-kafka's name)."""
        return self.abortable

    def is_fatal(self) -> bool:
        return self.fatal

    def is_retriable(self) -> bool:
        return self.retriable


class FatalTransactionError(TransactionError):
    """The transactional producer is unusable (Kafka's ``ProducerFencedException``,
    ``TransactionalIdAuthorizationException`` ...): close it. ``error`` says why, e.g.
    ``ProducerFencedError`` when another producer with the same ``transactional.id`` called
    ``init_transactions``."""

    fatal = True


class AbortableTransactionError(TransactionError):
    """The current transaction cannot commit (a record failed, the consumer group moved on,
    a topic is not authorized ...): call ``abort_transaction()`` and begin again."""

    abortable = True


class RetriableTransactionError(TransactionError, KafkaTimeoutError):
    """The call did not finish within its timeout; it goes on in the background: call the
    same method again to wait for it (Kafka's ``TimeoutException`` on a transactional
    call)."""

    retriable = True


class TransactionAbortedError(TransactionError):
    """A record's outcome when its transaction was aborted before the record was sent
    (Kafka's ``TransactionAbortedException``)."""
