"""pylog.client: pylog's own Kafka client (producer, consumer, admin).

Works against any Kafka-compatible broker. Two faces over one asyncio core:

- blocking: ``pylog.client.Producer``, ``Consumer``, ``Admin`` — the core runs on a
  private event loop in a background thread per client;
- asyncio: ``pylog.client.aio.Producer``, ``Consumer``, ``Admin``.

Settings are Kafka's, given as a mapping of dotted names and/or keyword arguments with
underscores; an unknown or mistyped name is a ``ConfigError`` naming it::

    Producer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5})
    Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5)

Embedded mode: ``log_dir=`` (or ``"log.dir"``) instead of ``bootstrap.servers`` opens a
data directory in this process, with no broker: the same API and the broker's own
semantics (``pylog.client.aio._embedded``)::

    Producer(log_dir="./data")

Not there yet (see docs/client.md): consumer groups over the network (``subscribe``,
``commit``, ``committed`` work in embedded mode), transactions.
"""

from pylog.client.admin import Admin
from pylog.client.aio.admin import (
    BrokerDescription,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    GroupDescription,
    GroupListing,
    MemberDescription,
    NewTopic,
    OffsetAndMetadata,
    PartitionDescription,
    TopicDescription,
)
from pylog.client.config import ConfigError
from pylog.client.consumer import Consumer
from pylog.client.errors import (
    ClientClosedError,
    GroupsNotAvailableError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    LogDirInUseError,
    NoOffsetForPartitionError,
    RecordTooLargeError,
)
from pylog.client.partitioner import murmur2, partition_for_key
from pylog.client.producer import Producer
from pylog.client.records import ConsumerRecord, RecordMetadata, TopicPartition

__all__ = [
    "Admin",
    "BrokerDescription",
    "ClientClosedError",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigError",
    "ConfigResource",
    "Consumer",
    "ConsumerRecord",
    "GroupDescription",
    "GroupListing",
    "GroupsNotAvailableError",
    "MemberDescription",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "LogDirInUseError",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "PartitionDescription",
    "Producer",
    "RecordMetadata",
    "RecordTooLargeError",
    "TopicDescription",
    "TopicPartition",
    "murmur2",
    "partition_for_key",
]
