"""The transaction coordinator's settings, with Kafka's names and defaults.

Kept apart from ``pylog.config`` so that the sans-IO coordinator can be built and tested on
its own; ``pylog.txn.service`` fills one from the broker's configuration. Each field names
the broker setting it stands for (Kafka's ``TransactionStateManagerConfig`` and
``TransactionLogConfig``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pylog.group.config import partition_for as _java_hash_partition


@dataclass(frozen=True)
class TransactionConfig:
    # transaction.state.log.num.partitions: partitions of __transaction_state.
    num_partitions: int = 50
    # transaction.max.timeout.ms: InitProducerId above it gets INVALID_TRANSACTION_TIMEOUT.
    max_timeout_ms: int = 900_000
    # transactional.id.expiration.ms: an idle id (no open transaction) is forgotten after it.
    transactional_id_expiration_ms: int = 604_800_000
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_timed_out_interval_ms: int = 10_000
    # transaction.remove.expired.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3_600_000
    # How long a failed marker write or completion record waits before it is retried
    # (Kafka's marker channel retries on its next poll; fixed here).
    retry_backoff_ms: int = 100

    def __post_init__(self) -> None:
        if self.num_partitions < 1:
            raise ValueError("transaction.state.log.num.partitions must be at least 1")
        for name in ("max_timeout_ms", "transactional_id_expiration_ms", "abort_timed_out_interval_ms",
                     "remove_expired_interval_ms", "retry_backoff_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition of an id: Kafka's
    ``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``."""
    return _java_hash_partition(transactional_id, num_partitions)
