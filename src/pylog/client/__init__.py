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

``embedded_metrics(log_dir)`` gives that in-process broker's metrics, the Prometheus text
a listening broker serves on ``metrics.listener`` (docs/metrics.md).

Consumer groups: ``Consumer.subscribe`` (Kafka's classic group protocol with the range,
roundrobin and cooperative-sticky assignors), ``commit``, ``committed``, auto commit.

Transactions: ``transactional.id`` with ``init_transactions``, ``begin_transaction``,
``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction`` (the names
of confluent-kafka's producer), ``Consumer.consumer_group_metadata()``.
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
    PartitionDescription,
    QuotaFilter,
    TopicDescription,
)
from pylog.client.config import ConfigError
from pylog.client.consumer import Consumer
from pylog.client.errors import (
    AbortableTransactionError,
    ClientClosedError,
    CommitFailedError,
    FatalTransactionError,
    GroupsNotAvailableError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    LogDirInUseError,
    NoOffsetForPartitionError,
    RecordTooLargeError,
    RetriableTransactionError,
    TransactionAbortedError,
    TransactionError,
)
from pylog.client.partitioner import murmur2, partition_for_key
from pylog.client.producer import BatchDelivery, Producer, SendManyFuture
from pylog.client.records import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    RecordMetadata,
    TopicPartition,
)
from pylog.client.share_consumer import AcknowledgeType, ShareConsumer
from pylog.security.acl import AclOperation, ResourceType
from pylog.security.authz.bindings import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)


def embedded_metrics(log_dir: str) -> str:
    """The metrics of the embedded broker a client of this process has open on
    ``log_dir``, in Prometheus's text format (the ``/metrics`` of a listening broker).

    Raises:
        ConfigError: no client of this process has ``log_dir`` open.
    """
    from pylog.client.aio import _embedded

    return _embedded.metrics(log_dir)


__all__ = [
    "AbortableTransactionError",
    "AcknowledgeType",
    "Admin",
    "BatchDelivery",
    "BrokerDescription",
    "ClientClosedError",
    "CommitFailedError",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigError",
    "ConfigResource",
    "Consumer",
    "embedded_metrics",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "QuotaFilter",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
    "FatalTransactionError",
    "GroupsNotAvailableError",
    "IllegalStateError",
    "KafkaConnectionError",
    "GroupDescription",
    "GroupListing",
    "KafkaTimeoutError",
    "LogDirInUseError",
    "MemberDescription",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "PartitionDescription",
    "Producer",
    "RecordMetadata",
    "RecordTooLargeError",
    "RetriableTransactionError",
    "SendManyFuture",
    "ShareConsumer",
    "TopicDescription",
    "TopicPartition",
    "TransactionAbortedError",
    "TransactionError",
    "murmur2",
    "partition_for_key",
]
