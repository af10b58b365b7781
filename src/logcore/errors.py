"""logcore's exceptions: bytes and files, no Kafka error codes.

`pylog.errors` holds the only table from these classes to Kafka codes
(CorruptRecordError -> CORRUPT_MESSAGE 2, LogDirError -> KAFKA_STORAGE_ERROR 56, ...).

Messages and attributes carry the file, offset and byte position of the problem so
that an operator can find it with a hex dump.
"""

from __future__ import annotations


class LogcoreError(Exception):
    """Root of every error logcore raises on purpose."""


class CorruptRecordError(LogcoreError, ValueError):
    """Bytes that are not a valid record batch (or record, varint, index entry).

    Attributes:
        batch_index: index of the offending batch in the buffer (None if not known).
        position: byte position in the buffer (or file) where the problem was found.
        path: file the bytes came from, when they came from a file.
    """

    def __init__(
        self,
        message: str,
        *,
        batch_index: int | None = None,
        position: int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.batch_index = batch_index
        self.position = position
        self.path = path


class UnexpectedAppendOffsetError(CorruptRecordError):
    """A follower append whose first batch starts below the log end offset (Kafka's
    ``UnexpectedAppendOffsetException``). A follower whose log is empty recovers by
    restarting its log at ``first_offset`` when the batch holds the log end offset (the
    leader's log start fell inside that batch); otherwise the leader sent offsets this
    log already has.

    Attributes:
        first_offset, last_offset: the first batch's base and last offsets.
        log_end_offset: the log's end offset at the append.
    """

    def __init__(self, message: str, *, first_offset: int, last_offset: int,
                 log_end_offset: int) -> None:
        super().__init__(message, batch_index=0, position=0)
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(LogcoreError, ValueError):
    """A batch is larger than the configured maximum message size."""

    def __init__(
        self,
        message: str,
        *,
        batch_index: int | None = None,
        position: int | None = None,
        size: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message)
        self.batch_index = batch_index
        self.position = position
        self.size = size
        self.limit = limit


class InvalidTimestampError(LogcoreError, ValueError):
    """A record timestamp violates the log's timestamp policy.

    Attributes (None when not given):
        timestamp: the first offending record timestamp.
        low / high: the allowed window, inclusive (clock - before.max.ms, clock +
            after.max.ms).
        violations: ``(record_index, timestamp)`` of every offending record, the index
            counted across the whole record set in order (for one batch: the record's
            index in it, Kafka's ``batch_index`` in Produce ``record_errors``).
    """

    def __init__(
        self,
        message: str,
        *,
        timestamp: int | None = None,
        low: int | None = None,
        high: int | None = None,
        violations: tuple[tuple[int, int], ...] = (),
    ) -> None:
        super().__init__(message)
        self.timestamp = timestamp
        self.low = low
        self.high = high
        self.violations = violations


class OffsetOutOfRangeError(LogcoreError, IndexError):
    """A read or lookup asked for an offset outside [log_start_offset, log_end_offset]."""

    def __init__(
        self,
        message: str,
        *,
        offset: int | None = None,
        log_start_offset: int | None = None,
        log_end_offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class LogDirError(LogcoreError, OSError):
    """An I/O failure on a log directory (``errno`` says which: ENOSPC, EIO, ...).

    Attributes: path (the file, or None), position (byte position of a failed append,
    or -1).
    """

    def __init__(self, *args: object, path: str | None = None, position: int = -1) -> None:
        super().__init__(*args)
        self.path = path
        self.position = position


class InvalidConfigError(LogcoreError, ValueError):
    """A log configuration key is unknown or its value is invalid."""


class InvalidProducerEpochError(LogcoreError, ValueError):
    """An idempotent producer's batch carries an epoch older than the log last saw.

    Attributes: producer_id, epoch (the batch's), current_epoch (the log's).
    """

    def __init__(self, message: str, *, producer_id: int = -1, epoch: int = -1,
                 current_epoch: int = -1) -> None:
        super().__init__(message)
        self.producer_id = producer_id
        self.epoch = epoch
        self.current_epoch = current_epoch


class OutOfOrderSequenceError(LogcoreError, ValueError):
    """An idempotent producer's batch does not continue its sequence.

    Attributes: producer_id, sequence (the batch's first), expected.
    """

    def __init__(self, message: str, *, producer_id: int = -1, sequence: int = -1,
                 expected: int = -1) -> None:
        super().__init__(message)
        self.producer_id = producer_id
        self.sequence = sequence
        self.expected = expected


class InvalidRecordError(LogcoreError, ValueError):
    """A record the log refuses though it is well formed: a record without a key on a
    compacted log (Kafka answers Produce with INVALID_RECORD).

    Attributes: record_index (the first offending record's index in the appended set).
    """

    def __init__(self, message: str, *, record_index: int = -1) -> None:
        super().__init__(message)
        self.record_index = record_index


class InvalidTxnStateError(LogcoreError, ValueError):
    """A producer with an open transaction on this log wrote a non-transactional batch
    (Kafka: INVALID_TXN_STATE).

    Attributes: producer_id.
    """

    def __init__(self, message: str, *, producer_id: int = -1) -> None:
        super().__init__(message)
        self.producer_id = producer_id


class TransactionCoordinatorFencedError(LogcoreError, ValueError):
    """A transaction marker carries a coordinator epoch older than the one the log last
    saw for its producer: it comes from a deposed transaction coordinator (Kafka:
    TRANSACTION_COORDINATOR_FENCED).

    Attributes: producer_id, coordinator_epoch (the marker's), current_coordinator_epoch.
    """

    def __init__(self, message: str, *, producer_id: int = -1, coordinator_epoch: int = -1,
                 current_coordinator_epoch: int = -1) -> None:
        super().__init__(message)
        self.producer_id = producer_id
        self.coordinator_epoch = coordinator_epoch
        self.current_coordinator_epoch = current_coordinator_epoch
