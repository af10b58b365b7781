"""Transaction markers in cluster mode (Kafka's ``TransactionMarkerChannelManager``).

The coordinator's ``MarkerRequest`` names the partitions of one transaction; each marker must
be written by the partition's current leader. ``route`` splits the partitions by leader from
the broker's ``MetadataCache`` (pure); partitions this broker leads are written in-process
(``write_markers``), the others go as WriteTxnMarkers (27) requests to their leaders through
``MarkerChannels``: one ordered sender per destination broker, a
``pylog.net.channel.BrokerChannel`` in its no-retry mode (a failed request comes back as an
error so that the coordinator re-routes it after the metadata changed, instead of knocking
on a dead broker).

Per partition the outcome is an error code for ``TransactionCoordinator.on_markers_written``:

- a partition missing from the metadata (its topic was deleted) gets UNKNOWN_TOPIC_OR_PARTITION;
  the coordinator then finds it gone and completes without it, as Kafka skips a partition whose
  leader is unknown to its metadata cache;
- a partition without a live leader gets NOT_LEADER_OR_FOLLOWER (retried);
- a request that could not be sent or answered gets NETWORK_EXCEPTION for all its partitions
  (retried, like Kafka's re-enqueue on disconnection);
- otherwise the leader's answer per partition.

Event-loop affinity: the broker's loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pylog import errors
from pylog.net.channel import BrokerChannels

from .metadata import TopicPartition

log = logging.getLogger("pylog.txn.markers")

UNKNOWN = errors.UnknownTopicOrPartitionError.code
NOT_LEADER = errors.NotLeaderOrFollowerError.code
NETWORK = errors.NetworkError.code


@dataclass
class Route:
    """Where the markers of one request go."""

    local: list[TopicPartition] = field(default_factory=list)
    remote: dict[int, list[TopicPartition]] = field(default_factory=dict)
    #: Partitions answered without a send (no metadata, no live leader).
    settled: dict[TopicPartition, int] = field(default_factory=dict)


def route(partitions: Iterable[TopicPartition], local_id: int, metadata: Any) -> Route:
    """Split ``partitions`` by their leader in ``metadata`` (a ``MetadataCache``: its
    ``partitions`` {topic: {index: meta with .leader}} and live ``brokers``)."""
    out = Route()
    for tp in sorted(partitions):
        topic, index = tp
        meta = metadata.partitions.get(topic, {}).get(index)
        if meta is None:
            out.settled[tp] = UNKNOWN
        elif meta.leader == local_id:
            out.local.append(tp)
        elif meta.leader < 0 or meta.leader not in metadata.brokers:
            out.settled[tp] = NOT_LEADER
        else:
            out.remote.setdefault(meta.leader, []).append(tp)
    return out


def leaders(partitions: Iterable[TopicPartition], metadata: Any) -> dict[TopicPartition, int | None]:
    """The leader of each partition in ``metadata`` (None: unknown partition)."""
    out: dict[TopicPartition, int | None] = {}
    for topic, index in partitions:
        meta = metadata.partitions.get(topic, {}).get(index)
        out[(topic, index)] = None if meta is None else meta.leader
    return out


def build_request(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                  partitions: Iterable[TopicPartition]) -> Any:
    """A WriteTxnMarkersRequest with one marker for ``partitions``."""
    from pylog.protocol.messages import WriteTxnMarkersRequest as R

    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    return R(markers=[R.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch,
        topics=[R.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])])


def response_codes(response: Any, producer_id: int,
                   partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """The per-partition codes of a WriteTxnMarkersResponse for ``producer_id``; a partition
    the response does not mention gets NETWORK_EXCEPTION (retried)."""
    wanted = set(partitions)
    out: dict[TopicPartition, int] = {}
    for marker in response.markers:
        if marker.producer_id != producer_id:
            continue
        for t in marker.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp in wanted:
                    out[tp] = p.error_code
    for tp in wanted - out.keys():
        out[tp] = NETWORK
    return out


def build_verify_request(transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> Any:
    """AddPartitionsToTxn v4+ with one verify-only transaction (KIP-890: a partition leader
    asking the coordinator whether the partition is in the producer's transaction)."""
    from pylog.protocol.messages import AddPartitionsToTxnRequest as R

    return R(transactions=[R.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        verify_only=True, topics=[R.AddPartitionsToTxnTopic(name=topic, partitions=[partition])])])


def verify_version(conn: Any) -> int:
    """The AddPartitionsToTxn version for a verification: the highest both sides serve, at
    least 4 (the broker-to-broker versions; the client code caps clients at 3).

    Raises:
        UnsupportedVersionError: the coordinator's broker does not serve v4+.
    """
    from pylog.protocol.messages import AddPartitionsToTxnRequest as R

    rng = conn.versions.get(R.API_KEY)
    top = -1 if rng is None else min(rng[1], R.VALID_VERSIONS[1])
    if top < 4:
        raise errors.UnsupportedVersionError(
            f"broker {conn.node_id} does not serve AddPartitionsToTxn v4+ (verification)")
    return top


def verify_response_code(response: Any, transactional_id: str, topic: str, partition: int) -> int:
    """The code of one verify-only AddPartitionsToTxn answer (the top-level error first);
    NETWORK_EXCEPTION when the answer does not mention the partition."""
    if isinstance(response, BaseException):
        return NETWORK
    if response.error_code:
        return int(response.error_code)
    for result in response.results_by_transaction:
        if result.transactional_id != transactional_id:
            continue
        for t in result.topic_results:
            if t.name != topic:
                continue
            for r in t.results_by_partition:
                if r.partition_index == partition:
                    return int(r.partition_error_code)
    return NETWORK


class MarkerChannels(BrokerChannels):
    """One ordered WriteTxnMarkers sender per destination broker."""

    async def send(self, broker: Any, producer_id: int, producer_epoch: int, commit: bool,
                   coordinator_epoch: int, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Send one marker to ``broker`` (a ``BrokerInfo``) for ``partitions``; the code per
        partition (NETWORK_EXCEPTION when it could not be sent or answered)."""
        resp = await self.request(broker, build_request(producer_id, producer_epoch, commit,
                                                        coordinator_epoch, partitions))
        if isinstance(resp, BaseException):
            log.info("WriteTxnMarkers to broker %d failed (%s): retried", broker.broker_id, resp)
            return dict.fromkeys(partitions, NETWORK)
        return response_codes(resp, producer_id, partitions)
