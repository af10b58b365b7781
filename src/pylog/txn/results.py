"""What the transaction coordinator hands back: results, log writes and marker requests.

As for the group coordinator (``pylog.group.results``, whose ``Pending`` is used here too),
anything that waits on the log comes back as a ``Pending``; state changes are ``TxnWrite``s
(records for one ``__transaction_state`` partition, appended in order and reported with
``complete()``/``fail(code)``); transaction markers to write are ``MarkerRequest``s, reported
with ``TransactionCoordinator.on_markers_written``.

Not thread-safe: owned by the coordinator's event loop (or test thread).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pylog.group.results import NONE, Pending

__all__ = ["NONE", "Pending", "TxnWrite", "MarkerRequest", "InitProducerIdResult",
           "DescribedTransaction", "ListTransactionsResult"]


class TxnWrite:
    """Records to append, in order, to ``__transaction_state`` partition ``partition``.

    ``records``: ``(key, value)`` byte pairs; value None is a tombstone. ``timeout_ms``: how
    long the append may wait for the in-sync replicas of a replicated partition.
    """

    __slots__ = ("partition", "records", "timeout_ms", "_callback", "_settled")

    def __init__(self, partition: int, records: list[tuple[bytes, bytes | None]],
                 callback: Callable[[int], None], timeout_ms: int = 30000) -> None:
        self.partition = partition
        self.records = records
        self.timeout_ms = timeout_ms
        self._callback = callback
        self._settled = False

    @property
    def settled(self) -> bool:
        return self._settled

    def complete(self) -> None:
        """The records are in the log."""
        self._settle(NONE)

    def fail(self, error_code: int) -> None:
        """The append failed with partition-append error ``error_code``."""
        if error_code == NONE:
            raise ValueError("fail() needs a non-zero error code")
        self._settle(error_code)

    def _settle(self, code: int) -> None:
        if self._settled:
            raise RuntimeError(f"write to __transaction_state-{self.partition} settled twice")
        self._settled = True
        self._callback(code)

    def __repr__(self) -> str:
        return f"TxnWrite(partition={self.partition}, {len(self.records)} records, settled={self._settled})"


@dataclass(frozen=True)
class MarkerRequest:
    """COMMIT or ABORT markers to write for one transaction, one per partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[tuple[str, int]]


@dataclass
class InitProducerIdResult:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass
class DescribedTransaction:
    transactional_id: str
    error_code: int
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class ListTransactionsResult:
    error_code: int
    unknown_state_filters: list[str] = field(default_factory=list)
    # (transactional id, producer id, state name)
    transactions: list[tuple[str, int, str]] = field(default_factory=list)
