"""Value types the client hands out: topic-partitions, produced-record metadata, records."""

from __future__ import annotations

from typing import Any, NamedTuple

import logcore

__all__ = ["TopicPartition", "RecordMetadata", "ConsumerRecord", "OffsetAndMetadata",
           "ConsumerGroupMetadata"]


class TopicPartition(NamedTuple):
    """A partition of a topic (hashable; ``("t", 0)`` compares equal)."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the next record to read, a metadata string stored
    with it (``offset.metadata.max.bytes``, 4096 by default) and the leader epoch of the
    last record read (-1 if unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's place in its group, for ``Producer.send_offsets_to_transaction``
    (``Consumer.consumer_group_metadata()``; Kafka's ``ConsumerGroupMetadata``). The group
    coordinator refuses transactional offsets of a member that is no longer in this
    generation, so a zombie consumer-producer pair cannot commit.

    Attributes:
        group_id: ``group.id``.
        generation_id: the group generation the consumer joined (-1 if it has not joined,
            e.g. with ``assign()``).
        member_id: its member id ("" if it has not joined).
        group_instance_id: ``group.instance.id`` (static membership) or None.
    """

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class RecordMetadata(NamedTuple):
    """Where a produced record landed.

    Attributes:
        topic, partition: the partition it was written to.
        offset: its offset (-1 with ``acks=0``, which gets no answer, and for a retried batch
            the broker recognised as a duplicate without reporting the offset).
        timestamp: the record's timestamp (the broker's append time for topics with
            ``message.timestamp.type=LogAppendTime``), milliseconds since the epoch.
        serialized_key_size, serialized_value_size: bytes of key and value (-1 for None).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class PyConsumerRecord:
    """One consumed record (``ConsumerRecord``: this class, or its compiled twin).

    Attributes:
        topic, partition, offset: where it was read.
        timestamp: milliseconds since the epoch; ``timestamp_type`` 0 create time, 1 log
            append time.
        key, value: bytes or None (or what the deserializers made of them).
        headers: list of (str, bytes | None) (made on first access for a record without
            headers: most have none, and a list per record is a cost the garbage collector
            pays again on every pass).
        leader_epoch: the batch's partition leader epoch (-1 if unknown).
    """

    __slots__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key",
                 "value", "_headers", "leader_epoch")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int,
                 timestamp_type: int, key: Any, value: Any,
                 headers: list[tuple[str, bytes | None]] | None, leader_epoch: int = -1) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self._headers = headers
        self.leader_epoch = leader_epoch

    @property
    def headers(self) -> list[tuple[str, bytes | None]]:
        if self._headers is None:
            self._headers = []
        return self._headers

    @headers.setter
    def headers(self, value: list[tuple[str, bytes | None]]) -> None:
        self._headers = value

    _FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
               "headers", "leader_epoch")

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (PyConsumerRecord, ConsumerRecord)):  # either twin
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a in self._FIELDS)

    __hash__ = None  # type: ignore[assignment]


# The compiled twin (``_crecords.pyx``: same fields, behaviour and equality) serves where it
# is built, unless ``LOGCORE_PUREPYTHON=1`` asks for the Python code; ``PyConsumerRecord``
# stays the reference either way.
ConsumerRecord = PyConsumerRecord
if logcore.IMPLEMENTATION == "c":
    try:
        from pylog.client._crecords import ConsumerRecord  # type: ignore[assignment]  # noqa: F811
    except ImportError:  # a source tree whose extensions were not built
        pass

