"""The replica manager: leader and follower roles of the local partitions.

``ReplicaManager`` (``broker.replicas``) applies LeaderAndIsr / StopReplica, keeps each
led partition's high watermark and ISR (``pylog.cluster.isr.PartitionLeader``), holds
acks=all produces until the high watermark passes them, and runs the follower fetchers.
In single-node mode it holds no partition: every local partition is then its own leader
with ISR [self] and high watermark = log end offset, and the request paths skip it.
See docs/replication.md ("The replica manager").

``append`` is the partition append path every writer of this broker uses (Produce, the
coordinators, the transaction markers in ``markers``; Kafka's ``ReplicaManager.appendRecords``).
"""

from pylog.replication.epochs import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    diverging_epoch,
    epoch_end_offset,
    truncation_offset,
)
from pylog.replication.manager import PartitionInfo, ReplicaManager, ReplicaPartition

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_OFFSET", "PartitionInfo", "ReplicaManager",
           "ReplicaPartition", "diverging_epoch", "epoch_end_offset", "truncation_offset"]
