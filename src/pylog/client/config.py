"""Client configuration: Kafka's names and defaults, given the way both Python camps do.

A client takes its settings as a mapping with Kafka's dotted names (confluent-kafka's
style) and/or keyword arguments with the same names spelled with underscores
(kafka-python's style)::

    Producer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5})
    Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5)

Values may be given as Python values or as the strings a properties file holds
(``"5"``, ``"true"``). An unknown name is an error naming it and the closest known name;
so is a value of the wrong type or outside its range, and a setting given twice with two
different values. Defaults are Kafka's (the Java client's ``ProducerConfig`` /
``ConsumerConfig`` / ``AdminClientConfig``, Kafka 4.x: ``linger.ms`` 5 per KIP-1030,
``enable.idempotence`` true, ``acks`` all).

Only settings this client implements are accepted: a Kafka setting we do not honour is
rejected like an unknown one rather than silently ignored.

``log.dir`` instead of ``bootstrap.servers`` selects embedded mode: the data directory is
opened in this process (``pylog.client.aio._embedded``), with ``broker.config`` as its
broker settings::

    Producer(log_dir="./data", broker_config={"num.partitions": 3})
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from typing import Any

from pylog.errors import KafkaError

__all__ = ["ConfigError", "Setting", "PRODUCER", "CONSUMER", "ADMIN", "Resolved", "resolve",
           "check_group_protocol"]


class ConfigError(KafkaError, ValueError):
    """A client setting is unknown, mistyped, out of range or contradicts another."""


class Setting:
    """One setting: its Kafka name, a parser from any accepted form, and its default."""

    __slots__ = ("name", "parse", "default", "doc")

    def __init__(self, name: str, parse: Callable[[str, Any], Any], default: Any, doc: str) -> None:
        self.name = name
        self.parse = parse
        self.default = default
        self.doc = doc


# ----------------------------------------------------------------------------- parsers


def _int(lo: int = 0, hi: int = 2**31 - 1) -> Callable[[str, Any], int]:
    def parse(name: str, value: Any) -> int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
        if not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ConfigError(f"{name}: expected an integer, got {value!r}")
        if not lo <= value <= hi:
            raise ConfigError(f"{name}: {value} is outside [{lo}, {hi}]")
        return value

    return parse


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{name}: expected true or false, got {value!r}")


def _choice(*choices: str) -> Callable[[str, Any], str]:
    def parse(name: str, value: Any) -> str:
        text = str(value).strip().lower() if isinstance(value, str) else value
        if text not in choices:
            raise ConfigError(f"{name}: {value!r} is not one of {', '.join(choices)}")
        return text  # type: ignore[no-any-return]

    return parse


def _str_or_none(name: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(f"{name}: expected a string, got {value!r}")


def _servers(name: str, value: Any) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` or a list of ``"host:port"`` -> [(host, port)]."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[tuple[str, int]] = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"{name}: expected HOST:PORT strings, got {item!r}")
        text = item.strip()
        if not text:
            continue
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{name}: bad address {text!r}: expected HOST:PORT")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise ConfigError(f"{name}: no address given")
    return out


def _acks(name: str, value: Any) -> int:
    """``all``/``-1`` -> -1, ``0``, ``1`` (the int16 sent in ProduceRequest)."""
    text = str(value).strip().lower()
    table = {"all": -1, "-1": -1, "0": 0, "1": 1}
    if isinstance(value, bool) or text not in table:
        raise ConfigError(f"{name}: {value!r} is not one of all, -1, 0, 1")
    return table[text]


def _path_or_none(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}: expected a directory path, got {value!r}")
    return value


def _broker_config(name: str, value: Any) -> dict[str, str] | str | None:
    """A mapping of broker settings (values kept as their string form, so that two
    clients giving the same settings compare equal) or the path of a properties file."""
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        return _path_or_none(name, value)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: expected a mapping of broker settings or the path of a "
                          f"server.properties file, got {value!r}")
    out: dict[str, str] = {}
    for key, v in value.items():
        if not isinstance(key, str):
            raise ConfigError(f"{name}: setting names are strings, got {key!r}")
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v)
        out[key.strip()] = str(v).strip()
    return out


def _callable_or_none(name: str, value: Any) -> Any:
    if value is None or callable(value):
        return value
    raise ConfigError(f"{name}: expected a callable or None, got {value!r}")


def _protocol(name: str, value: Any) -> str:
    text = str(value).strip().upper()
    if text not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError(f"{name}: {value!r} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
                          "SASL_SSL")
    return text


def _mechanism(name: str, value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip().upper()
    if text not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"):
        raise ConfigError(f"{name}: {value!r} is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
                          "OAUTHBEARER (GSSAPI is not supported)")
    return text


def _list(name: str, value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(i).strip() for i in items if str(i).strip()]


def _secret(name: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(f"{name}: expected a string, got a {type(value).__name__}")


# TLS: the Java client's names (SslConfigs), and confluent-kafka's names for PEM files.
# pylog.security.tls.client_context reads them (docs/security.md).
_SECURITY = [
    Setting("security.protocol", _protocol, "PLAINTEXT",
            "PLAINTEXT; SSL: TLS to every broker (the brokers' certificates are verified); "
            "SASL_PLAINTEXT, SASL_SSL: SASL authentication (sasl.*), without or with TLS."),
    Setting("sasl.mechanism", _mechanism, None,
            "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER."),
    Setting("sasl.mechanisms", _mechanism, None, "confluent-kafka's name of sasl.mechanism."),
    Setting("sasl.username", _secret, None, "PLAIN and SCRAM: the user name."),
    Setting("sasl.password", _secret, None, "PLAIN and SCRAM: the password."),
    Setting("sasl.jaas.config", _secret, None,
            "The Java client's form of the credentials: a PlainLoginModule or ScramLoginModule "
            "entry with username and password (or OAuthBearerLoginModule with "
            "unsecuredLoginStringClaim_sub)."),
    Setting("sasl.oauthbearer.token", _secret, None, "OAUTHBEARER: the token to send."),
    Setting("sasl.oauthbearer.config", _str_or_none, None,
            "OAUTHBEARER without a token: librdkafka's 'principal=<name> [scope=a,b] "
            "[lifeSeconds=N]' for an unsecured (alg none) token."),
    Setting("ssl.truststore.location", _str_or_none, None,
            "CA certificates that sign the brokers' certificates (PEM or PKCS12 file); unset: "
            "the system's CAs."),
    Setting("ssl.truststore.type", _choice("pem", "pkcs12", "jks"), "pem",
            "Format of ssl.truststore.location: PEM or PKCS12."),
    Setting("ssl.truststore.password", _secret, None, "Password of a PKCS12 trust store."),
    Setting("ssl.truststore.certificates", _secret, None,
            "Trusted CA certificates as PEM text (KIP-651)."),
    Setting("ssl.keystore.location", _str_or_none, None,
            "Client certificate for mutual TLS: a PEM file holding the private key and the "
            "certificate chain, or a PKCS12 file."),
    Setting("ssl.keystore.type", _choice("pem", "pkcs12", "jks"), "pem",
            "Format of ssl.keystore.location: PEM or PKCS12."),
    Setting("ssl.keystore.password", _secret, None, "Password of a PKCS12 key store."),
    Setting("ssl.keystore.certificate.chain", _secret, None,
            "Client certificate chain as PEM text (KIP-651)."),
    Setting("ssl.keystore.key", _secret, None, "Client private key as PEM text (KIP-651)."),
    Setting("ssl.key.password", _secret, None, "Password of an encrypted private key."),
    Setting("ssl.ca.location", _str_or_none, None,
            "confluent-kafka's name: a PEM file of trusted CA certificates."),
    Setting("ssl.certificate.location", _str_or_none, None,
            "confluent-kafka's name: the client certificate (PEM), with ssl.key.location."),
    Setting("ssl.key.location", _str_or_none, None,
            "confluent-kafka's name: the client's private key (PEM)."),
    Setting("ssl.endpoint.identification.algorithm", _choice("https", "", "none"), "https",
            "https: a broker's certificate must name the host connected to; empty or none: "
            "not checked."),
    Setting("ssl.enabled.protocols", _list, ["TLSv1.2", "TLSv1.3"], "TLS versions offered."),
    Setting("ssl.protocol", _str_or_none, "TLSv1.3",
            "Newest TLS version offered (TLSv1.2 caps it; TLSv1.3 or TLS: no cap)."),
    Setting("ssl.cipher.suites", _list, [], "TLS 1.2 cipher suites allowed (empty: defaults)."),
]


_COMMON = [
    Setting("bootstrap.servers", _servers, None,
            "HOST:PORT pairs to learn the cluster from (comma-separated or a list). Required "
            "unless log.dir is given."),
    Setting("log.dir", _path_or_none, None,
            "Embedded mode: open this data directory in this process, with no broker (the "
            "broker's layout; one process at a time). Instead of bootstrap.servers."),
    Setting("broker.config", _broker_config, None,
            "Embedded mode: broker settings for log.dir (server.properties names: "
            "num.partitions, log.retention.check.interval.ms, ...), a mapping or the path of "
            "a properties file. The first client of the process that opens the directory "
            "applies them; later ones give the same or none."),
    Setting("client.id", _str_or_none, None, "Sent in every request header; default pylog-<kind>-N."),
    Setting("request.timeout.ms", _int(1), 30000,
            "How long to wait for an answer to one request before failing or retrying it."),
    Setting("retry.backoff.ms", _int(0), 100, "Wait before retrying a failed request."),
    Setting("retry.backoff.max.ms", _int(0), 1000,
            "Cap of the exponential retry backoff (KIP-580)."),
    Setting("metadata.max.age.ms", _int(0), 300000,
            "Refresh metadata at least this often even without errors."),
    Setting("socket.connection.setup.timeout.ms", _int(1), 10000,
            "How long a TCP connect plus ApiVersions may take."),
] + _SECURITY


PRODUCER: dict[str, Setting] = {s.name: s for s in _COMMON + [
    Setting("acks", _acks, -1, "all (-1): the ISR has it; 1: the leader has it; 0: no answer."),
    Setting("linger.ms", _int(0), 5, "Wait up to this long for a batch to fill before sending."),
    Setting("batch.size", _int(0), 16384, "Target size of one partition's batch in bytes."),
    Setting("compression.type", _choice("none", "gzip", "snappy", "lz4", "zstd"), "none",
            "Codec of produced batches."),
    Setting("max.in.flight.requests.per.connection", _int(1), 5,
            "Produce requests pipelined on one connection (at most 5 with idempotence)."),
    Setting("retries", _int(0), 2147483647, "Resends of a failed batch (bounded by delivery.timeout.ms)."),
    Setting("delivery.timeout.ms", _int(1), 120000,
            "Upper bound on the time from send() to success or failure."),
    Setting("enable.idempotence", _bool, True,
            "Producer id + per-partition sequence numbers: retries never duplicate."),
    Setting("transactional.id", _str_or_none, None,
            "Makes the producer transactional (init_transactions, begin/commit/"
            "abort_transaction); one id per producer instance, stable across restarts."),
    Setting("transaction.timeout.ms", _int(1, 2**31 - 1), 60000,
            "How long a transaction may stay open before the coordinator aborts it "
            "(at most the broker's transaction.max.timeout.ms)."),
    Setting("partitioner.class", _callable_or_none, None,
            "A callable (key_bytes, all_partitions, available_partitions) -> partition; None"
            " is Kafka's built-in: murmur2 for keys, sticky for keyless records."),
    Setting("partitioner.ignore.keys", _bool, False, "Place keyed records as keyless ones."),
    Setting("buffer.memory", _int(1, 2**62), 33554432,
            "Bytes of records waiting to be sent; send() blocks beyond it."),
    Setting("max.block.ms", _int(0, 2**62), 60000,
            "How long send() may block on metadata or buffer.memory before raising."),
    Setting("max.request.size", _int(1), 1048576, "Largest record (and produce request) sent."),
    Setting("key.serializer", _callable_or_none, None, "Turns a key into bytes (default: keys are bytes)."),
    Setting("value.serializer", _callable_or_none, None, "Turns a value into bytes."),
]}

# partition.assignment.strategy: Kafka's names, and the Java class names for the same assignors.
ASSIGNOR_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}
ASSIGNORS = ("range", "roundrobin", "cooperative-sticky")


def _assignors(name: str, value: Any) -> tuple[str, ...]:
    """Assignor names or Java class names, comma-separated or a list, in preference order."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"{name}: expected assignor names, got {item!r}")
        text = item.strip()
        if not text:
            continue
        canonical = ASSIGNOR_CLASS_NAMES.get(text, text.lower())
        if canonical not in ASSIGNORS:
            raise ConfigError(f"{name}: unknown assignor {text!r}; use range, roundrobin or "
                              "cooperative-sticky (or their Java class names)")
        if canonical in out:
            raise ConfigError(f"{name}: {canonical} is listed twice")
        out.append(canonical)
    if not out:
        raise ConfigError(f"{name}: name at least one of range, roundrobin, cooperative-sticky")
    return tuple(out)


def _non_empty_or_none(name: str, value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value.strip() if isinstance(value, str) else None
    raise ConfigError(f"{name}: expected a non-empty string, got {value!r}")


CONSUMER: dict[str, Setting] = {s.name: s for s in _COMMON + [
    Setting("group.id", _str_or_none, None,
            "Consumer group: needed by subscribe(), commit() and committed()."),
    Setting("group.protocol", _choice("classic", "consumer"), "classic",
            "classic: JoinGroup/SyncGroup, the members assign; consumer: KIP-848's "
            "ConsumerGroupHeartbeat, the broker assigns and moves only what changes owner."),
    Setting("group.remote.assignor", _non_empty_or_none, None,
            "group.protocol=consumer: the server-side assignor to ask for (uniform, range); "
            "unset: the broker's default."),
    Setting("group.instance.id", _non_empty_or_none, None,
            "Static membership (KIP-345): a restart within session.timeout.ms keeps the "
            "partitions without a rebalance; no LeaveGroup on close."),
    Setting("session.timeout.ms", _int(1), 45000,
            "The coordinator drops a member it has not heard from for this long."),
    Setting("heartbeat.interval.ms", _int(1), 3000,
            "Heartbeats to the coordinator this often (below session.timeout.ms)."),
    Setting("max.poll.interval.ms", _int(1), 300000,
            "Longest time between poll() calls before the member leaves the group; also "
            "the rebalance timeout."),
    Setting("partition.assignment.strategy", _assignors, ("range", "cooperative-sticky"),
            "Assignors in preference order: range, roundrobin, cooperative-sticky."),
    Setting("enable.auto.commit", _bool, True,
            "Commit consumed positions every auto.commit.interval.ms, before a rebalance "
            "revokes partitions and on close (needs group.id)."),
    Setting("auto.commit.interval.ms", _int(0), 5000, "How often auto commit runs (from poll())."),
    Setting("client.rack", _str_or_none, None,
            "This consumer's rack: sent to the group leader for rack-aware assignment."),
    Setting("exclude.internal.topics", _bool, True,
            "A pattern subscription does not match internal topics (__consumer_offsets)."),
    Setting("auto.offset.reset", _choice("earliest", "latest", "none"), "latest",
            "Where to start when there is no position or it is out of range."),
    Setting("fetch.min.bytes", _int(0), 1, "The broker waits for this many bytes..."),
    Setting("fetch.max.wait.ms", _int(0), 500, "... or this long, whichever comes first."),
    Setting("max.partition.fetch.bytes", _int(1), 1048576, "Per-partition fetch size."),
    Setting("fetch.max.bytes", _int(1), 52428800, "Whole fetch response size (soft)."),
    Setting("isolation.level", _choice("read_uncommitted", "read_committed"), "read_uncommitted",
            "read_committed: stop at the last stable offset and drop aborted records."),
    Setting("max.poll.records", _int(1), 500, "Most records one poll() returns."),
    Setting("check.crcs", _bool, True, "Verify each batch's CRC-32C on the record path."),
    Setting("default.api.timeout.ms", _int(0), 60000,
            "Timeout of blocking calls without their own (position, offsets lookups)."),
    Setting("key.deserializer", _callable_or_none, None, "Turns key bytes into a key."),
    Setting("value.deserializer", _callable_or_none, None, "Turns value bytes into a value."),
]}

# KIP-932 share consumers (``pylog.client.ShareConsumer``): confluent-kafka's settings.
SHARE_CONSUMER: dict[str, Setting] = {s.name: s for s in _COMMON + [
    Setting("group.id", _str_or_none, None, "The share group (required)."),
    Setting("share.acknowledgement.mode", _choice("implicit", "explicit"), "implicit",
            "implicit: the records of a poll are accepted by the next poll or commit; "
            "explicit: each record is acknowledged with acknowledge()."),
    Setting("fetch.min.bytes", _int(0), 1, "The broker waits for this many bytes..."),
    Setting("fetch.max.wait.ms", _int(0), 500, "... or this long, whichever comes first."),
    Setting("fetch.max.bytes", _int(1), 52428800, "Whole fetch response size (soft)."),
    Setting("max.poll.records", _int(1), 500, "Most records one poll() returns."),
    Setting("share.acquire.mode", _choice("batch_optimized", "record_limit"), "batch_optimized",
            "KIP-1206 (ShareFetch v2's ShareAcquireMode): batch_optimized lets the broker "
            "acquire past max.poll.records to a batch's end; record_limit acquires at most "
            "max.poll.records per fetch."),
    Setting("check.crcs", _bool, True, "Verify each batch's CRC-32C on the record path."),
    Setting("default.api.timeout.ms", _int(0), 60000,
            "Timeout of commit_sync() and close() when none is given."),
    Setting("key.deserializer", _callable_or_none, None, "Turns key bytes into a key."),
    Setting("value.deserializer", _callable_or_none, None, "Turns value bytes into a value."),
]}

ADMIN: dict[str, Setting] = {s.name: s for s in _COMMON + [
    Setting("default.api.timeout.ms", _int(0), 60000, "Timeout of an admin call."),
]}


# Settings the broker owns under group.protocol=consumer (KIP-848): the Java client's
# ConsumerConfig refuses them there, and group.remote.assignor under classic.
CONSUMER_PROTOCOL_UNSUPPORTED = ("partition.assignment.strategy", "heartbeat.interval.ms",
                                 "session.timeout.ms")


def check_group_protocol(settings: Resolved) -> None:
    """Refuse the settings that do not apply to the chosen ``group.protocol``, as Kafka's
    ``ConsumerConfig`` does.

    Raises:
        ConfigError: ``partition.assignment.strategy``, ``heartbeat.interval.ms`` or
            ``session.timeout.ms`` given with ``group.protocol=consumer`` (the broker's
            ``group.consumer.*`` settings rule them), or ``group.remote.assignor`` with
            ``group.protocol=classic``.
    """
    if settings["group.protocol"] == "consumer":
        given = [name for name in CONSUMER_PROTOCOL_UNSUPPORTED if name in settings.explicit]
        if given:
            raise ConfigError(f"{', '.join(given)} cannot be set when group.protocol=consumer: "
                              "the broker decides them (group.consumer.assignors, "
                              "group.consumer.heartbeat.interval.ms, "
                              "group.consumer.session.timeout.ms); ask for a server-side "
                              "assignor with group.remote.assignor")
    elif settings["group.remote.assignor"] is not None:
        raise ConfigError("group.remote.assignor cannot be set when group.protocol=classic "
                          "(it names a server-side assignor of group.protocol=consumer)")


class Resolved(dict):  # type: ignore[type-arg]
    """Parsed settings by dotted name; ``explicit`` holds the names the user gave."""

    explicit: frozenset[str] = frozenset()


def resolve(table: Mapping[str, Setting], config: Mapping[str, Any] | None,
            kwargs: Mapping[str, Any]) -> Resolved:
    """Merge a dotted-name mapping and underscore keyword arguments into parsed settings.

    Args:
        table: the settings a client accepts (``PRODUCER``, ``CONSUMER``, ``ADMIN``).
        config: ``{"linger.ms": 5, ...}`` or None.
        kwargs: ``{"linger_ms": 5, ...}``.

    Returns:
        Every setting of ``table`` by dotted name, parsed, defaults filled in; its
        ``explicit`` attribute names the settings given.

    Raises:
        ConfigError: an unknown name (with the closest known one), a bad value, a name given
            twice with different values, neither or both of ``bootstrap.servers`` and
            ``log.dir``, or ``broker.config`` without ``log.dir``.
    """
    given: dict[str, tuple[Any, str]] = {}

    def put(name: str, value: Any, spelled: str) -> None:
        setting = table.get(name)
        if setting is None:
            raise ConfigError(_unknown(table, spelled, underscore=spelled != name))
        parsed = setting.parse(name, value)
        if name in given and given[name][0] != parsed:
            raise ConfigError(f"{name} given twice ({given[name][1]} and {spelled}) with "
                              f"different values")
        given[name] = (parsed, spelled)

    for key, value in (config or {}).items():
        if not isinstance(key, str):
            raise ConfigError(f"setting names are strings, got {key!r}")
        put(key.strip(), value, key)
    for key, value in kwargs.items():
        put(key.replace("_", "."), value, key)
    out = Resolved((name, s.default) for name, s in table.items())
    out.update({name: v for name, (v, _) in given.items()})
    out.explicit = frozenset(given)
    if out["log.dir"] is not None:
        if out["bootstrap.servers"] is not None:
            raise ConfigError("give bootstrap.servers (a broker over the network) or log.dir "
                              "(embedded mode: the data directory opened in this process), "
                              "not both")
    elif out["bootstrap.servers"] is None:
        raise ConfigError("bootstrap.servers is required (e.g. '127.0.0.1:9092'), or log.dir "
                          "for embedded mode (a data directory opened in this process)")
    elif out["broker.config"] is not None:
        raise ConfigError("broker.config applies to embedded mode only (with log.dir); a "
                          "broker reached over the network has its own configuration")
    return out


def _unknown(table: Mapping[str, Setting], spelled: str, *, underscore: bool) -> str:
    names = list(table)
    key = spelled.replace("_", ".").lower() if underscore else spelled.lower()
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = ""
    if close:
        suggestion = close[0].replace(".", "_") if underscore else close[0]
        hint = f"; did you mean {suggestion!r}?"
    return f"unknown setting {spelled!r}{hint}"
