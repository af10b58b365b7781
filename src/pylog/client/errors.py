"""Errors the client raises besides the broker's (``pylog.errors.ApiError`` per Kafka code).

Broker answers with an error code surface as the ``pylog.errors`` class for that code
(``NotLeaderOrFollowerError``, ``TopicAlreadyExistsError``, ...). The classes here are the
client-side failures Kafka's Java client also has names for.
"""

from __future__ import annotations

from pylog.client.config import ConfigError
from pylog.errors import InvalidGroupIdError, KafkaError
from pylog.log.dir_lock import LogDirInUseError

__all__ = ["ConfigError", "KafkaTimeoutError", "KafkaConnectionError", "ClientClosedError",
           "NoOffsetForPartitionError", "RecordTooLargeError", "IllegalStateError",
           "CommitFailedError", "GroupsNotAvailableError", "LogDirInUseError"]


class KafkaTimeoutError(KafkaError, TimeoutError):
    """Something did not finish within its bound (``max.block.ms``, ``delivery.timeout.ms``,
    ``request.timeout.ms`` or a call's timeout): Kafka's ``TimeoutException``."""


class KafkaConnectionError(KafkaError, ConnectionError):
    """A broker could not be reached or dropped the connection (retriable)."""

    retriable = True
    invalid_metadata = True


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
