"""Kafka's ZooKeeper-mode znodes: paths and JSON payloads, byte-compatible with Kafka.

Source: Kafka's ``core/src/main/scala/kafka/zk/ZkData.scala`` (the ``*ZNode`` objects) and
``KafkaZkClient.scala``. Payloads are UTF-8 JSON written compactly (no spaces), as Jackson
writes them. Layout (ephemeral znodes vanish with the session that created them)::

    /controller                          ephemeral  {"version":2,"brokerid":1,
                                                     "timestamp":"1700000000000",
                                                     "kraftControllerEpoch":-1}
    /controller_epoch                    persistent 7                (decimal text)
    /brokers/ids/<id>                    ephemeral  broker registration, version 5
    /brokers/seqid                       persistent (empty)
    /brokers/topics/<topic>              persistent {"version":3,"partitions":{"0":[1,2]},
                                                     "adding_replicas":{},"removing_replicas":{},
                                                     "topic_id":"<base64url uuid>"}
    /brokers/topics/<topic>/partitions/<p>/state
                                         persistent {"version":1,"leader":1,"leader_epoch":0,
                                                     "controller_epoch":7,"isr":[1,2]}
    /admin/delete_topics/<topic>         persistent (empty): a deletion request
    /config/<type>/<name>                persistent {"version":1,"config":{"k":"v"}}
    /config/changes/config_change_<seq>  persistent sequential {"version":2,
                                                                "entity_path":"topics/t"}
    /isr_change_notification/isr_change_<seq>
                                         persistent sequential {"version":1,"partitions":
                                                     [{"topic":"t","partition":0}]}
    /cluster/id                          persistent {"version":"1","id":"<id>"}
    /latest_producer_id_block            persistent {"version":1,"broker":1,
                                                     "block_start":"0","block_end":"999"}

The data version of a partition's ``state`` znode is the partition epoch (Kafka's
``zkVersion``) that conditional updates name; the data version of ``/controller_epoch`` is the
controller's ``epochZkVersion`` that fences every controller write.

Decoding is strict and bounded: a payload over ZooKeeper's default ``jute.maxbuffer``, not
UTF-8, not a JSON object, with duplicate keys, a missing or mistyped field, an int outside its
Java type's range or an unknown version raises ``ZkDataError`` naming the znode path. Unknown
extra fields are ignored, as Kafka's decoders ignore them (newer writers may add fields).
Everything here is pure (no I/O) and safe to call from any thread.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pylog.errors import KafkaError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# ZooKeeper refuses znode data over jute.maxbuffer (0xfffff bytes by default).
MAX_ZNODE_DATA_BYTES = 0xFFFFF

# -- paths (ZkData.scala object names in comments) ------------------------------------------

CONTROLLER_PATH = "/controller"  # ControllerZNode
CONTROLLER_EPOCH_PATH = "/controller_epoch"  # ControllerEpochZNode
BROKERS_PATH = "/brokers"  # BrokersZNode
BROKER_IDS_PATH = "/brokers/ids"  # BrokerIdsZNode
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"  # BrokerSequenceIdZNode
TOPICS_PATH = "/brokers/topics"  # TopicsZNode
ADMIN_PATH = "/admin"  # AdminZNode
DELETE_TOPICS_PATH = "/admin/delete_topics"  # DeleteTopicsZNode
CONFIG_PATH = "/config"  # ConfigZNode
CONFIG_CHANGES_PATH = "/config/changes"  # ConfigEntityChangeNotificationZNode
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"  # ...SequenceZNode.createPath
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "/isr_change_notification/isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
CLUSTER_ID_PATH = "/cluster/id"  # ClusterIdZNode
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"  # ProducerIdBlockZNode
CONSUMERS_PATH = "/consumers"  # ConsumerPathZNode (the old consumer's; Kafka still creates it)

# ConfigType.all, and "groups": group configs (resource type GROUP), which Kafka keeps in
# KRaft metadata only; pylog's cluster mode keeps them as the others, the group id
# sanitized (Kafka's Sanitizer) as client ids are.
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips", "groups")

# ZkData.PersistentZkPaths: created (empty) by every broker at startup.
PERSISTENT_PATHS = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
) + tuple(f"{CONFIG_PATH}/{t}" for t in CONFIG_TYPES)

# Kafka's org.apache.kafka.common.internals.Topic.validate
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME_LENGTH = 249


class ZkDataError(KafkaError, ValueError):
    """A znode's payload is not what Kafka writes there (or a path component is illegal).

    Attributes:
        path: the znode path whose data (or name) was refused.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def validate_topic(topic: str) -> str:
    """Return ``topic`` if it is a legal Kafka topic name (so a safe znode name), else raise."""
    if not isinstance(topic, str) or not topic or topic in (".", ".."):
        raise ZkDataError(TOPICS_PATH, f"illegal topic name {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH or _TOPIC_RE.fullmatch(topic) is None:
        raise ZkDataError(
            TOPICS_PATH, f"illegal topic name {topic!r}: at most {MAX_TOPIC_NAME_LENGTH} "
            "characters from [a-zA-Z0-9._-]")
    return topic


def _nonnegative(path: str, what: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= INT32_MAX:
        raise ZkDataError(path, f"{what} must be an int between 0 and {INT32_MAX}, not {value!r}")
    return value


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{_nonnegative(BROKER_IDS_PATH, 'broker id', broker_id)}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{validate_topic(topic)}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    base = topic_partitions_path(topic)
    return f"{base}/{_nonnegative(base, 'partition', partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{validate_topic(topic)}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    if entity_type not in CONFIG_TYPES:
        raise ZkDataError(CONFIG_PATH, f"unknown config entity type {entity_type!r}; "
                          f"one of {', '.join(CONFIG_TYPES)}")
    if entity_type == "topics":
        validate_topic(entity_name)
    elif entity_type == "users" and "/" in entity_name:
        # A <user, client-id> quota entity: users/<user>/clients/<client-id> (Kafka's
        # ConfigType.USER with a child ConfigType.CLIENT).
        user, kind, client = (entity_name.split("/", 2) + ["", ""])[:3]
        if not user or kind != "clients" or not client or "/" in client:
            raise ZkDataError(CONFIG_PATH, f"illegal users entity name {entity_name!r}: "
                              "<user> or <user>/clients/<client-id>")
    elif not entity_name or "/" in entity_name:
        raise ZkDataError(CONFIG_PATH, f"illegal {entity_type} entity name {entity_name!r}")
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


# -- strict JSON helpers ---------------------------------------------------------------------

def _dump(obj: Mapping[str, Any]) -> bytes:
    # Jackson's compact form; ensure_ascii=False keeps non-ASCII text as UTF-8 as Kafka does.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _load(path: str, data: bytes | None) -> dict[str, Any]:
    """The znode's payload as a JSON object, or ZkDataError naming ``path``."""
    if data is None or len(data) == 0:
        raise ZkDataError(path, "the znode has no data (expected a JSON object)")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ZkDataError(path, f"znode data must be bytes, not {type(data).__name__}")
    if len(data) > MAX_ZNODE_DATA_BYTES:
        raise ZkDataError(path, f"{len(data)} bytes is over ZooKeeper's {MAX_ZNODE_DATA_BYTES}")
    try:
        text = bytes(data).decode("utf-8")
        obj = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ZkDataError(path, f"malformed JSON ({exc}): {bytes(data)[:200]!r}") from None
    if not isinstance(obj, dict):
        raise ZkDataError(path, f"expected a JSON object, got {type(obj).__name__}")
    return obj


_MISSING = object()


def _int(path: str, obj: Mapping[str, Any], key: str, *, lo: int = INT32_MIN,
         hi: int = INT32_MAX, default: Any = _MISSING) -> int:
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        if default is _MISSING:
            raise ZkDataError(path, f"field {key!r} is missing")
        return int(default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ZkDataError(path, f"field {key!r} must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise ZkDataError(path, f"field {key!r} = {value} is outside [{lo}, {hi}]")
    return value


def _str(path: str, obj: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = obj.get(key, _MISSING)
    if value is _MISSING or (optional and value is None):
        if optional:
            return None
        raise ZkDataError(path, f"field {key!r} is missing")
    if not isinstance(value, str):
        raise ZkDataError(path, f"field {key!r} must be a string, not {value!r}")
    return value


def _long_text(path: str, obj: Mapping[str, Any], key: str) -> int:
    """A Java long written as a decimal string (timestamps, producer ids)."""
    text = _str(path, obj, key)
    assert text is not None
    if re.fullmatch(r"-?[0-9]{1,19}", text) is None or not INT64_MIN <= int(text) <= INT64_MAX:
        raise ZkDataError(path, f"field {key!r} must be a decimal long, not {text!r}")
    return int(text)


def _replica_list(path: str, what: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ZkDataError(path, f"{what} must be a list of broker ids, not {value!r}")
    out = []
    for v in value:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= INT32_MAX:
            raise ZkDataError(path, f"{what} holds {v!r}, not a broker id")
        out.append(v)
    if len(set(out)) != len(out):
        raise ZkDataError(path, f"{what} names a broker twice: {out}")
    return tuple(out)


def _version(path: str, obj: Mapping[str, Any], known: Iterable[int]) -> int:
    version = _int(path, obj, "version")
    known = tuple(known)
    if version not in known:
        raise ZkDataError(path, f"unsupported version {version} (known: {list(known)})")
    return version


# -- /controller and /controller_epoch -------------------------------------------------------

@dataclass(frozen=True)
class ControllerRegistration:
    """``/controller``: who is the controller (``ControllerZNode``, version 2)."""

    broker_id: int
    timestamp_ms: int
    kraft_controller_epoch: int = -1

    def encode(self) -> bytes:
        return _dump({"version": 2, "brokerid": self.broker_id,
                      "timestamp": str(self.timestamp_ms),
                      "kraftControllerEpoch": self.kraft_controller_epoch})

    @classmethod
    def decode(cls, data: bytes | None, path: str = CONTROLLER_PATH) -> ControllerRegistration:
        obj = _load(path, data)
        _version(path, obj, (1, 2))
        ts = _long_text(path, obj, "timestamp") if "timestamp" in obj else -1
        return cls(broker_id=_int(path, obj, "brokerid", lo=0), timestamp_ms=ts,
                   kraft_controller_epoch=_int(path, obj, "kraftControllerEpoch", default=-1))


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch``: the epoch as decimal text."""
    return str(_nonnegative(CONTROLLER_EPOCH_PATH, "controller epoch", epoch)).encode()


def decode_controller_epoch(data: bytes | None, path: str = CONTROLLER_EPOCH_PATH) -> int:
    if data is None or re.fullmatch(rb"[0-9]{1,10}", bytes(data)) is None:
        raise ZkDataError(path, f"expected a decimal controller epoch, got {data!r}")
    return _nonnegative(path, "controller epoch", int(data))


# -- /brokers/ids/<id> -----------------------------------------------------------------------

_ENDPOINT_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True)
class EndPoint:
    """One advertised listener: ``LISTENER://host:port`` and its security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (``BrokerIdZNode``), written by the broker itself, version 5.

    ``host``/``port`` at the top level are the first PLAINTEXT endpoint (null/-1 when there is
    none), kept by Kafka for old clients. The broker epoch is the znode's czxid, not a field.
    ``features`` maps a feature name to its supported (min_version, max_version).
    """

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = 0
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    version: int = 5

    def encode(self) -> bytes:
        plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        obj: dict[str, Any] = {
            "version": self.version,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "endpoints": [e.connection_string for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp_ms),
        }
        if self.rack is not None and self.version >= 3:
            obj["rack"] = self.rack
        if self.version >= 4:
            obj["listener_security_protocol_map"] = {
                e.listener: e.security_protocol for e in self.endpoints}
        if self.version >= 5:
            obj["features"] = {name: {"min_version": lo, "max_version": hi}
                               for name, (lo, hi) in sorted(self.features.items())}
        return _dump(obj)

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None,
               path: str | None = None) -> BrokerRegistration:
        path = path or broker_id_path(broker_id)
        obj = _load(path, data)
        version = _version(path, obj, range(1, 6))
        jmx_port = _int(path, obj, "jmx_port", default=-1)
        ts = _long_text(path, obj, "timestamp") if "timestamp" in obj else 0
        if version == 1:
            host = _str(path, obj, "host")
            assert host is not None
            endpoints: tuple[EndPoint, ...] = (
                EndPoint("PLAINTEXT", host, _int(path, obj, "port", lo=0, hi=65535)),)
        else:
            proto_map = obj.get("listener_security_protocol_map")
            if proto_map is not None and (not isinstance(proto_map, dict) or not all(
                    isinstance(v, str) for v in proto_map.values())):
                raise ZkDataError(path, "listener_security_protocol_map must map names to "
                                  f"protocol names, not {proto_map!r}")
            raw = obj.get("endpoints")
            if not isinstance(raw, list) or not all(isinstance(e, str) for e in raw):
                raise ZkDataError(path, f"endpoints must be a list of strings, not {raw!r}")
            parsed = []
            for text in raw:
                m = _ENDPOINT_RE.match(text)
                if m is None or not 0 <= int(m.group(3)) <= 65535:
                    raise ZkDataError(path, f"endpoint {text!r} is not LISTENER://host:port")
                listener = m.group(1)
                protocol = str((proto_map or {}).get(listener, listener))
                parsed.append(EndPoint(listener, m.group(2), int(m.group(3)), protocol))
            endpoints = tuple(parsed)
        rack = _str(path, obj, "rack", optional=True)
        features: dict[str, tuple[int, int]] = {}
        raw_features = obj.get("features", {})
        if not isinstance(raw_features, dict):
            raise ZkDataError(path, f"features must be an object, not {raw_features!r}")
        for name, rng in raw_features.items():
            if not isinstance(rng, dict):
                raise ZkDataError(path, f"feature {name!r} must be an object, not {rng!r}")
            features[name] = (_int(path, rng, "min_version", lo=-32768, hi=32767),
                              _int(path, rng, "max_version", lo=-32768, hi=32767))
        return cls(broker_id=broker_id, endpoints=endpoints, rack=rack, jmx_port=jmx_port,
                   timestamp_ms=ts, features=features, version=version)


# -- /brokers/topics/<topic> -----------------------------------------------------------------

@dataclass(frozen=True)
class ReplicaAssignment:
    """One partition's replicas (head = preferred leader) and an ongoing reassignment."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once a reassignment completes (Kafka's ``targetReplicas``)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


def _uuid_text_ok(text: str) -> bool:
    # Kafka's Uuid.toString: 16 bytes, URL-safe base64 without padding (22 characters).
    if re.fullmatch(r"[A-Za-z0-9_-]{22}", text) is None:
        return False
    return len(base64.urlsafe_b64decode(text + "==")) == 16


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<topic>`` (``TopicZNode``, version 3 written; 1-3 read)."""

    partitions: Mapping[int, ReplicaAssignment]
    topic_id: str | None = None

    def encode(self, path: str = TOPICS_PATH) -> bytes:
        if self.topic_id is not None and not _uuid_text_ok(self.topic_id):
            raise ZkDataError(path, f"topic_id {self.topic_id!r} is not a base64url UUID")
        parts = {}
        adding = {}
        removing = {}
        for p in sorted(self.partitions):
            a = self.partitions[p]
            _replica_list(path, f"partition {p}'s replicas", list(a.replicas))
            parts[str(p)] = list(a.replicas)
            if a.adding_replicas:
                adding[str(p)] = list(a.adding_replicas)
            if a.removing_replicas:
                removing[str(p)] = list(a.removing_replicas)
        obj: dict[str, Any] = {"version": 3, "partitions": parts,
                               "adding_replicas": adding, "removing_replicas": removing}
        if self.topic_id is not None:
            obj["topic_id"] = self.topic_id
        return _dump(obj)

    @classmethod
    def decode(cls, topic: str, data: bytes | None) -> TopicAssignment:
        path = topic_path(topic)
        obj = _load(path, data)
        _version(path, obj, (1, 2, 3))
        topic_id = _str(path, obj, "topic_id", optional=True)
        if topic_id is not None and not _uuid_text_ok(topic_id):
            raise ZkDataError(path, f"topic_id {topic_id!r} is not a base64url UUID")

        def table(key: str, required: bool) -> dict[int, tuple[int, ...]]:
            raw = obj.get(key)
            if raw is None and not required:
                return {}
            if not isinstance(raw, dict):
                raise ZkDataError(path, f"{key!r} must be an object of partition -> replicas")
            out = {}
            for k, v in raw.items():
                if re.fullmatch(r"0|[1-9][0-9]{0,9}", k) is None or int(k) > INT32_MAX:
                    raise ZkDataError(path, f"{key!r} has key {k!r}, not a partition number")
                out[int(k)] = _replica_list(path, f"{key}[{k}]", v)
            return out

        parts = table("partitions", True)
        adding = table("adding_replicas", False)
        removing = table("removing_replicas", False)
        for what, extra in (("adding_replicas", adding), ("removing_replicas", removing)):
            for p, reps in extra.items():
                if p not in parts or not set(reps) <= set(parts[p]):
                    raise ZkDataError(path, f"{what}[{p}] = {list(reps)} is not within the "
                                      f"partition's replicas")
        return cls(partitions={p: ReplicaAssignment(r, adding.get(p, ()), removing.get(p, ()))
                               for p, r in sorted(parts.items())}, topic_id=topic_id)


# -- /brokers/topics/<topic>/partitions/<p>/state --------------------------------------------

LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionState:
    """``.../partitions/<p>/state`` (``TopicPartitionStateZNode``, version 1): Kafka's
    ``LeaderIsrAndControllerEpoch`` minus the partition epoch, which is the znode's data
    version and travels beside it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"version": 1, "leader": self.leader,
                               "leader_epoch": self.leader_epoch,
                               "controller_epoch": self.controller_epoch,
                               "isr": list(self.isr)}
        if self.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
            obj["leader_recovery_state"] = self.leader_recovery_state
        return _dump(obj)

    @classmethod
    def decode(cls, topic: str, partition: int, data: bytes | None) -> PartitionState:
        path = partition_state_path(topic, partition)
        obj = _load(path, data)
        _version(path, obj, (1,))
        recovery = _int(path, obj, "leader_recovery_state", default=LEADER_RECOVERY_RECOVERED)
        if recovery not in (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING):
            raise ZkDataError(path, f"leader_recovery_state {recovery} is neither 0 nor 1")
        return cls(leader=_int(path, obj, "leader", lo=NO_LEADER),
                   leader_epoch=_int(path, obj, "leader_epoch", lo=0),
                   isr=_replica_list(path, "isr", obj.get("isr")),
                   controller_epoch=_int(path, obj, "controller_epoch", lo=0),
                   leader_recovery_state=recovery)


# -- /config -------------------------------------------------------------------------------

def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """``/config/<type>/<name>`` (``ConfigEntityZNode``): values are strings."""
    for k, v in config.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ZkDataError(CONFIG_PATH, f"config {k!r}={v!r}: keys and values are strings")
    return _dump({"version": 1, "config": dict(config)})


def decode_entity_config(path: str, data: bytes | None) -> dict[str, str]:
    obj = _load(path, data)
    _version(path, obj, (1,))
    config = obj.get("config")
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise ZkDataError(path, f"config must map names to string values, not {config!r}")
    return dict(config)


def encode_config_change(entity_path: str) -> bytes:
    """``/config/changes/config_change_<seq>``: ``entity_path`` like ``topics/orders``."""
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes | None) -> str:
    obj = _load(path, data)
    _version(path, obj, (2,))
    entity = _str(path, obj, "entity_path")
    assert entity is not None
    kind, _, name = entity.partition("/")
    if kind not in CONFIG_TYPES:
        raise ZkDataError(path, f"entity_path {entity!r} is not <type>/<name>")
    try:
        config_entity_path(kind, name)
    except ZkDataError:
        raise ZkDataError(path, f"entity_path {entity!r} is not <type>/<name> "
                          "(or users/<user>/clients/<client-id>)") from None
    return entity


# -- /isr_change_notification ------------------------------------------------------------------

def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dump({"version": 1, "partitions": [
        {"topic": validate_topic(t), "partition": p} for t, p in sorted(set(partitions))]})


def decode_isr_change(path: str, data: bytes | None) -> list[tuple[str, int]]:
    obj = _load(path, data)
    _version(path, obj, (1,))
    raw = obj.get("partitions")
    if not isinstance(raw, list):
        raise ZkDataError(path, "partitions must be a list")
    out = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise ZkDataError(path, f"partition entry {entry!r} is not an object")
        topic = _str(path, entry, "topic")
        assert topic is not None
        out.append((topic, _int(path, entry, "partition", lo=0)))
    return out


# -- /cluster/id ---------------------------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    """``/cluster/id``: note that Kafka writes ``version`` as the string ``"1"``."""
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ZkDataError(CLUSTER_ID_PATH, f"cluster id must be a non-empty string: {cluster_id!r}")
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None, path: str = CLUSTER_ID_PATH) -> str:
    obj = _load(path, data)
    if obj.get("version") not in ("1", 1):
        raise ZkDataError(path, f"unsupported version {obj.get('version')!r} (known: \"1\")")
    cluster_id = _str(path, obj, "id")
    assert cluster_id is not None
    if not cluster_id:
        raise ZkDataError(path, "the cluster id is empty")
    return cluster_id


# -- /latest_producer_id_block -------------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


@dataclass(frozen=True)
class ProducerIdBlock:
    """A range of producer ids one broker owns: ``block_start`` .. ``block_end`` inclusive."""

    broker_id: int
    block_start: int
    block_end: int

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1

    def encode(self) -> bytes:
        return _dump({"version": 1, "broker": self.broker_id,
                      "block_start": str(self.block_start), "block_end": str(self.block_end)})

    @classmethod
    def decode(cls, data: bytes | None, path: str = PRODUCER_ID_BLOCK_PATH) -> ProducerIdBlock:
        obj = _load(path, data)
        _version(path, obj, (1,))
        start = _long_text(path, obj, "block_start")
        end = _long_text(path, obj, "block_end")
        if start < 0 or end < start:
            raise ZkDataError(path, f"block {start}..{end} is not a range of producer ids")
        return cls(_int(path, obj, "broker", lo=0), start, end)

    @classmethod
    def next_after(cls, previous: ProducerIdBlock | None, broker_id: int,
                   size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """The block a broker claims after ``previous`` (the first block starts at 0).

        Raises:
            ZkDataError: the producer id space (a Java long) is exhausted.
        """
        start = 0 if previous is None else previous.block_end + 1
        if start > INT64_MAX - size:
            raise ZkDataError(PRODUCER_ID_BLOCK_PATH, "the producer id space is exhausted; "
                              f"the last block ends at {start - 1}")
        return cls(broker_id, start, start + size - 1)


def new_uuid_text(rand: Callable[[int], bytes] | None = None) -> str:
    """A fresh id as Kafka's ``Uuid.randomUuid().toString()`` prints it (cluster and topic ids):
    16 random bytes, URL-safe base64 without padding, never starting with ``-`` and never the
    zero or the metadata-topic UUID (Kafka rerolls those)."""
    rand = rand or os.urandom
    while True:
        raw = bytearray(rand(16))
        # a version-4 UUID, as java.util.UUID.randomUUID makes
        raw[6] = (raw[6] & 0x0F) | 0x40
        raw[8] = (raw[8] & 0x3F) | 0x80
        text = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
        if not text.startswith("-") and bytes(raw) not in (bytes(16), bytes(15) + b"\x01"):
            return text
