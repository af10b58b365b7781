"""The API keys and versions the broker serves and advertises: the one version table.

``ADVERTISED`` is what ApiVersions lists; ``SUPPORTED`` is what the broker accepts on use.
They differ only for Produce: versions 0-2 are advertised (older librdkafka only enables
compression when Produce v0 is in the broker's range, KAFKA-18659) but refused with
UNSUPPORTED_VERSION when actually used, as Kafka 4.x does. Transactions are listed
(transaction.version 0: the coordinator's APIs, the markers, TxnOffsetCommit), SASL
(on every listener, as Kafka: other listeners answer ILLEGAL_SASL_STATE) and the ACL APIs;
what is not built is not advertised: clients use the newest advertised version, so everything
advertised must be implemented.

The codec (``pylog.protocol._schema``) decodes every version of every message in the JSON
specs; these tables only decide what the broker offers. The broker's handler modules read
their ``VERSIONS`` from ``ADVERTISED`` (this module imports nothing of the broker).
"""

from __future__ import annotations

import enum

from pylog.protocol import _schema


class ApiKey(enum.IntEnum):
    """Kafka API keys, named after the spec's request messages (``ProduceRequest`` -> PRODUCE)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CLIENT_METRICS_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# (min, max) per API key, as listed in ApiVersionsResponse.
ADVERTISED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (0, 12),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    # Client quotas (KIP-546): pylog.broker.quotas.
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    # ACLs (pylog.security.authz); v0 was removed in Kafka 4 (KIP-896). Without an
    # authorizer they answer SECURITY_DISABLED, as Kafka's brokers do.
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    # Replication (ZooKeeper mode): the controller's requests to brokers (pylog.replication).
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    # Consumer groups (Kafka's classic protocol): pylog.group and its handlers.
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    # Transactions, partition side: markers from the coordinator, producer state.
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    # Transactions (transaction.version 0): pylog.txn and its handlers.
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    # Transactions: the group coordinator's side.
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    # KIP-848 consumer groups (dropped when group.coordinator.rebalance.protocols lacks
    # "consumer"). Heartbeat v1 adds SubscribedTopicRegex (pylog.group.topic_regex).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    # ConsumerGroupDescribe v1 adds each member's MemberType (0 classic, 1 consumer; KIP-1099).
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # SASL (pylog.security.sasl, pylog.broker.sasl_net) and SCRAM credentials (KIP-554).
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # KIP-932 share groups (dropped when group.share.enable is false): pylog.group.share.
    # Kafka 4.2's versions; confluent-kafka 2.16 sends ShareFetch/ShareAcknowledge v1.
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    # The share coordinator's RPCs (inter-broker, CLUSTER_ACTION): version 0 of the vendored
    # specs (apache/kafka 1eb7644), which Kafka 4.2 still serves.
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 0),
    # The share-group offset admin APIs (Kafka 4.1: v0; 4.2 adds Lag in Describe v1).
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}

# The APIs of the KIP-848 consumer group protocol.
CONSUMER_GROUP_APIS = frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE})
# The APIs of KIP-932 share groups.
SHARE_GROUP_APIS = frozenset({ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE,
                              ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE,
                              ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE,
                              ApiKey.WRITE_SHARE_GROUP_STATE, ApiKey.DELETE_SHARE_GROUP_STATE,
                              ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
                              ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS,
                              ApiKey.DELETE_SHARE_GROUP_OFFSETS})

# Inter-broker APIs served in cluster mode only (zookeeper.connect set): the metadata and
# shutdown requests between the controller and the brokers. A single-node broker neither lists
# nor accepts them. LeaderAndIsr and StopReplica (above) are served everywhere, as Kafka's
# ZooKeeper-mode brokers list them: a broker without ZooKeeper can be made a leader or a
# follower by hand (the replica manager's tests do).
CLUSTER_ADVERTISED: dict[int, tuple[int, int]] = {
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    # Admin requests answered by the controller (others answer NOT_CONTROLLER).
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
}

# Versions accepted on use: ADVERTISED minus Produce 0-2 (refused with UNSUPPORTED_VERSION).
SUPPORTED: dict[int, tuple[int, int]] = dict(ADVERTISED)
SUPPORTED[ApiKey.PRODUCE] = (3, 11)


def api_name(api_key: int) -> str:
    """The API's name as in the specs (``"Produce"``), or ``"Unknown(<key>)"``."""
    name = _schema.REQUESTS.get(api_key)
    return name[: -len("Request")] if name else f"Unknown({api_key})"


def is_supported(api_key: int, version: int, table: dict[int, tuple[int, int]] | None = None) -> bool:
    """Whether the broker serves ``api_key`` at ``version`` (``SUPPORTED`` by default)."""
    rng = (SUPPORTED if table is None else table).get(api_key)
    return rng is not None and rng[0] <= version <= rng[1]


def api_versions_keys(table: dict[int, tuple[int, int]] | None = None) -> list:
    """The ``api_keys`` list of an ApiVersionsResponse for ``table`` (``ADVERTISED`` by default)."""
    cls = _schema.load("ApiVersionsResponse")
    rows = ADVERTISED if table is None else table
    return [
        cls.ApiVersion(api_key=int(k), min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(rows.items())
    ]
