"""Transaction markers as the coordinator hands them to partition leaders.

``TxnMarker`` is one WriteTxnMarkers entry (Kafka's ``WritableTxnMarker``): the producer,
its epoch, the result (True = COMMIT), the coordinator epoch and the partitions to mark.
``TxnMarkerResult`` is the outcome for one (producer id, topic, partition): a Kafka error
code, 0 when the marker was written, and the marker's offset (-1 when not written).
``pylog.broker.handlers.write_txn_markers.write_markers`` turns the first into the second.
"""

from __future__ import annotations

from typing import NamedTuple


class TxnMarker(NamedTuple):
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: list[tuple[str, int]]


class TxnMarkerResult(NamedTuple):
    producer_id: int
    topic: str
    partition: int
    error_code: int
    offset: int = -1
