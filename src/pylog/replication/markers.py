"""Transaction markers onto local partitions: the partition side of WriteTxnMarkers.

For every marker and partition (Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``, whose
appends go through ``ReplicaManager.appendRecords``) one control batch (COMMIT or ABORT,
``logcore.Log.append_control``) is appended to the partition's log. Per (producer id,
partition) the answer is NONE, or UNKNOWN_TOPIC_OR_PARTITION (not hosted here),
INVALID_PRODUCER_EPOCH (the marker's epoch is older than the producer's),
TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than the partition has seen for
the producer), KAFKA_STORAGE_ERROR (the write failed). A single node is every partition's
leader and the marker is committed once written (acks=-1 is met at once); in cluster mode
only the leader writes (NOT_LEADER_OR_FOLLOWER elsewhere) and, as an acks=-1 append,
refuses it while the ISR is below ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS) and
answers once the in-sync replicas have it (NOT_ENOUGH_REPLICAS_AFTER_APPEND or
REQUEST_TIMED_OUT otherwise; the coordinator retries).

The appends keep the per-partition order of every other append (inline when nothing for
the partition is queued on an I/O thread, else behind what is), wake the fetches waiting
on the partition (a marker moves the last stable offset), and for ``__consumer_offsets``
partitions tell the group coordinator (``broker.groups.on_txn_marker(partition,
producer_id, commit, offset)``) so that pending transactional offset commits are
materialised or dropped.

Two callers: the WriteTxnMarkers handler (markers from another broker's coordinator) and
this broker's own transaction coordinator (``pylog.txn.service``), which needs no request
and no connection. ``TxnMarker`` is one WriteTxnMarkers entry (Kafka's
``WritableTxnMarker``), ``TxnMarkerResult`` the outcome for one (producer id, topic,
partition): a Kafka error code, 0 when written, and the marker's offset (-1 when not).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, NamedTuple

import logcore
from pylog import errors
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME
from pylog.replication.append import LEADER_EPOCH, must_wait_for_acks

__all__ = ["MARKER_APPEND_TIMEOUT_MS", "TxnMarker", "TxnMarkerResult", "write_markers",
           "write_markers_inline"]

log = logging.getLogger("pylog.replication.markers")


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


#: How long a marker on a replicated partition may wait for the ISR (Kafka appends markers
#: with acks=-1 and ``request.timeout.ms``, 30 s by default).
MARKER_APPEND_TIMEOUT_MS = 30000


def _append_marker(partition: Any, marker: TxnMarker, leader_epoch: int = LEADER_EPOCH) -> Any:
    return partition.log.append_control(
        marker.producer_id, marker.producer_epoch, commit=marker.commit,
        coordinator_epoch=marker.coordinator_epoch, leader_epoch=leader_epoch)


def _locate(broker: Any, marker: TxnMarker, topic_name: str, index: int) -> Any:
    """The checks before a marker's append: (result, None) when refused, else (None,
    (partition, key, leader epoch))."""
    topic = broker.log_manager.topics.get(topic_name)
    if topic is None or not 0 <= index < len(topic.partitions):
        return _result(marker, topic_name, index, errors.UnknownTopicOrPartitionError.code), None
    partition = topic.partitions[index]
    key = (partition.topic, partition.index)
    replicas = broker.replicas
    epoch = LEADER_EPOCH
    cluster = getattr(broker, "cluster", None)
    if replicas.active:  # cluster mode: only the leader writes markers, in its epoch
        state = replicas.partitions.get(key)
        if state is None and cluster is not None:
            # No role here (after StopReplica, before the first LeaderAndIsr): as
            # append_records, never written; the coordinator retries with the leader.
            return _result(marker, topic_name, index, errors.NotLeaderOrFollowerError.code), None
        if state is not None:
            if state.leader is None:
                return _result(marker, topic_name, index, errors.NotLeaderOrFollowerError.code), None
            try:  # acks=-1: not written while the ISR is below min.insync.replicas
                state.leader.check_before_append(-1)
            except errors.NotEnoughReplicasError as exc:
                log.info("marker for producer %d on %s-%d not written: %s", marker.producer_id,
                         topic_name, index, exc)
                return _result(marker, topic_name, index, exc.code), None
            epoch = state.leader_epoch
    return None, (partition, key, epoch)


def _result(marker: TxnMarker, topic_name: str, index: int, code: int, offset: int = -1) -> TxnMarkerResult:
    return TxnMarkerResult(marker.producer_id, topic_name, index, code, offset)


def _refused(marker: TxnMarker, topic_name: str, index: int, exc: Exception) -> TxnMarkerResult:
    log.info("%s marker for producer %d epoch %d on %s-%d refused: %s",
             "COMMIT" if marker.commit else "ABORT", marker.producer_id,
             marker.producer_epoch, topic_name, index, exc)
    return _result(marker, topic_name, index, errors.code_for_exception(exc))


def _appended(broker: Any, partition: Any, key: tuple[str, int]) -> None:
    if broker.replicas.active:
        broker.replicas.on_local_append(key, partition.log.log_end_offset)
    broker.waiters.notify(key)


async def _write_one(broker: Any, marker: TxnMarker, topic_name: str,
                     index: int) -> TxnMarkerResult:
    refused, found = _locate(broker, marker, topic_name, index)
    if refused is not None:
        return refused
    partition, key, epoch = found
    io = broker.io
    try:
        if io.busy(key) or epoch != LEADER_EPOCH:
            info = await io.run_ordered(key, _append_marker, partition, marker, epoch)
        else:
            info = _append_marker(partition, marker)  # one small batch: cheap inline
    except logcore.LogcoreError as exc:
        return _refused(marker, topic_name, index, exc)
    _appended(broker, partition, key)
    if must_wait_for_acks(broker, key):
        # acks=-1, as Kafka appends markers: acknowledged once the ISR has the marker, so a
        # completed transaction's markers survive the loss of this leader. A role lost
        # while the marker was appended (StopReplica dropped the partition's state) is
        # NOT_LEADER_OR_FOLLOWER, never a success: the marker may be truncated away.
        code = await broker.replicas.wait_for_acks(key, info.first_offset + 1, MARKER_APPEND_TIMEOUT_MS)
        if code:
            log.info("marker for producer %d on %s-%d not replicated to the ISR (error %d)",
                     marker.producer_id, topic_name, index, code)
            return _result(marker, topic_name, index, code)
    if topic_name == GROUP_METADATA_TOPIC_NAME:
        hook = getattr(broker.groups, "on_txn_marker", None)
        if hook is not None:
            done = hook(index, marker.producer_id, marker.commit, info.first_offset)
            if inspect.isawaitable(done):
                await done
    return _result(marker, topic_name, index, 0, info.first_offset)


def write_markers_inline(broker: Any, markers: list[TxnMarker]) -> list[TxnMarkerResult] | None:
    """``write_markers`` without a coroutine, for this broker's own coordinator: the
    results when every marker can be written on the loop now (each partition with
    nothing queued on an I/O thread, in the single node's epoch, no ISR to wait for, no
    ``__consumer_offsets`` partition among them); None when any cannot, and then nothing
    was written (the caller uses ``write_markers``)."""
    targets = []
    for m in markers:
        for topic_name, index in m.partitions:
            if topic_name == GROUP_METADATA_TOPIC_NAME:
                return None  # its group hook may be a coroutine: the async path
            refused, found = _locate(broker, m, topic_name, index)
            if found is not None:
                partition, key, epoch = found
                if broker.io.busy(key) or epoch != LEADER_EPOCH or must_wait_for_acks(broker, key):
                    return None
            targets.append((m, topic_name, index, refused, found))
    results = []
    for m, topic_name, index, refused, found in targets:
        if refused is not None:
            results.append(refused)
            continue
        partition, key, _epoch = found
        try:
            info = _append_marker(partition, m)
        except logcore.LogcoreError as exc:
            results.append(_refused(m, topic_name, index, exc))
            continue
        _appended(broker, partition, key)
        results.append(_result(m, topic_name, index, 0, info.first_offset))
    return results


async def write_markers(broker: Any, markers: list[TxnMarker]) -> list[TxnMarkerResult]:
    """Write every marker to each of its partitions; one result per (producer id, topic,
    partition), in the order given. Partitions are written concurrently; the markers of
    one partition keep their order (the per-partition ordered path)."""
    jobs = [_write_one(broker, m, t, p) for m in markers for t, p in m.partitions]
    if len(jobs) == 1:
        return [await jobs[0]]
    return list(await asyncio.gather(*jobs))
