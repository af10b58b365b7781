"""What the group coordinator hands back: results, pending handles and writes.

The coordinator is sans-IO (no sockets, no event loop), so anything that cannot be answered
at once comes back as a ``Pending``: a JoinGroup waits for the rebalance to complete, a
follower's SyncGroup for the leader's assignment, an OffsetCommit for its records to be
appended. The caller (asyncio glue) attaches a callback and sends the response when it fires.

Every state change that must survive a restart is a ``Write``: the records to append, in
order, to the group's ``__consumer_offsets`` partition. The caller appends them through the
ordinary partition-append path and reports the outcome with ``complete()`` or
``fail(error_code)``; answers that depend on the write are released only then, as Kafka's
coordinator answers only once its records are in the log.

Not thread-safe: all objects here belong to the coordinator's event loop (or test thread).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

NONE = 0  # Kafka's Errors.NONE


class Pending(Generic[T]):
    """A result that may not be known yet (a parked request).

    ``done`` says whether it is; ``result`` is the value once done; ``add_done_callback``
    runs a function with the result (at once if already done). Completed exactly once: a
    second completion is ignored and reported as False, which the coordinator uses when a
    parked request is answered by whichever event comes first (join completes, member
    fenced, coordinator unloaded).
    """

    __slots__ = ("_done", "_result", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._result: T | None = None
        self._callbacks: list[Callable[[T], None]] = []

    @classmethod
    def completed(cls, result: T) -> Pending[T]:
        p: Pending[T] = cls()
        p._complete(result)
        return p

    @property
    def done(self) -> bool:
        return self._done

    @property
    def result(self) -> T:
        """The result. Raises ``RuntimeError`` when not done yet."""
        if not self._done:
            raise RuntimeError("result of a pending request read before it completed")
        return self._result  # type: ignore[return-value]

    def add_done_callback(self, fn: Callable[[T], None]) -> None:
        if self._done:
            fn(self._result)  # type: ignore[arg-type]
        else:
            self._callbacks.append(fn)

    def _complete(self, result: T) -> bool:
        if self._done:
            return False
        self._done = True
        self._result = result
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(result)
        return True

    def __repr__(self) -> str:
        return f"Pending({self._result!r})" if self._done else "Pending(<waiting>)"


class Write:
    """Records to append, in order, to one group's ``__consumer_offsets`` partition.

    Attributes:
        group_id: the group the records belong to (its partition is ``partition_for``).
        records: ``(key, value)`` byte pairs in Kafka's format; value None is a tombstone.
        producer_id, producer_epoch: -1, or (TxnOffsetCommit) the transactional producer
            whose batch this is: then the records go out as ONE transactional batch with
            that producer id and epoch and base sequence -1, as Kafka's coordinator writes
            them, and stay pending until the producer's COMMIT or ABORT marker.
        base_offset: the log offset of the first record, given by ``complete`` (-1 until
            then, or when the appender did not say).
    """

    __slots__ = ("group_id", "records", "producer_id", "producer_epoch", "base_offset", "_callback",
                 "_settled")

    def __init__(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                 callback: Callable[[int], None], producer_id: int = -1, producer_epoch: int = -1) -> None:
        self.group_id = group_id
        self.records = records
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_offset = -1
        self._callback = callback
        self._settled = False

    @property
    def transactional(self) -> bool:
        return self.producer_id >= 0

    @property
    def settled(self) -> bool:
        return self._settled

    def complete(self, base_offset: int = -1) -> None:
        """The records are in the log (acknowledged as the append path defines it), the
        first at ``base_offset`` (the others follow it one by one)."""
        if not self._settled:
            self.base_offset = base_offset
        self._settle(NONE)

    def fail(self, error_code: int) -> None:
        """The append failed with ``error_code`` (the partition-append error, e.g. 6)."""
        if error_code == NONE:
            raise ValueError("fail() needs a non-zero error code")
        self._settle(error_code)

    def _settle(self, code: int) -> None:
        if self._settled:
            raise RuntimeError(f"write for group {self.group_id!r} settled twice")
        self._settled = True
        self._callback(code)

    def __repr__(self) -> str:
        return f"Write({self.group_id!r}, {len(self.records)} records, settled={self._settled})"


# --------------------------------------------------------------------------- results


@dataclass
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass
class JoinGroupResult:
    """The fields of a JoinGroup response (members only for the leader)."""

    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: list[JoinGroupMember] = field(default_factory=list)


@dataclass
class SyncGroupResult:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class LeaveGroupMemberResult:
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass
class LeaveGroupResult:
    """Top-level error (v0-2 carry only this) and per-member errors (v3+)."""

    error_code: int
    members: list[LeaveGroupMemberResult] = field(default_factory=list)


@dataclass
class PartitionResult:
    topic: str
    partition: int
    error_code: int


@dataclass
class OffsetFetchPartition:
    topic: str
    partition: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: int = NONE


@dataclass
class OffsetFetchGroupResult:
    group_id: str
    error_code: int
    partitions: list[OffsetFetchPartition] = field(default_factory=list)


@dataclass
class OffsetDeleteResult:
    error_code: int
    partitions: list[PartitionResult] = field(default_factory=list)


@dataclass
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"


@dataclass
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass
class DescribedGroup:
    error_code: int
    group_id: str
    group_state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[DescribedMember] = field(default_factory=list)
