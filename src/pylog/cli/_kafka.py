"""A small blocking Kafka client for the command-line tools (topics, produce, consume).

It speaks the wire protocol through ``pylog.protocol.ClientConnection`` over plain sockets,
so the tools work against any Kafka-compatible broker: versions are negotiated with
ApiVersions (KIP-511: a broker that does not know our ApiVersions version answers in the v0
layout and we retry), each request uses the highest version both sides implement (capped
where a newer version needs features the tools do not use, such as topic IDs in Fetch),
and partition requests go to the partition's leader from Metadata.

Not thread-safe; one client per command.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from pylog import errors
from pylog.protocol.connection import NEED_DATA, ClientConnection, ConnectionClosed, Response
from pylog.protocol.messages import ApiVersionsRequest, MetadataRequest

# The newest version of each API these tools know how to fill in.
MAX_VERSIONS = {
    0: 11,  # Produce
    1: 12,  # Fetch (13+ names topics by ID)
    2: 7,  # ListOffsets
    3: 12,  # Metadata
    18: 4,  # ApiVersions
    19: 7,  # CreateTopics
    20: 6,  # DeleteTopics
    32: 4,  # DescribeConfigs
    44: 1,  # IncrementalAlterConfigs
}


class ClientError(Exception):
    """A tool-level failure with a message for the user."""


def parse_hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise ClientError(f"bad address {text!r}: expected HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


class BrokerConnection:
    """One TCP connection to one broker, with its negotiated API versions."""

    def __init__(self, host: str, port: int, timeout: float, client_id: str = "pylog-cli") -> None:
        self.address = f"{host}:{port}"
        self.timeout = timeout
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ClientError(f"cannot connect to {self.address}: {exc.strerror or exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(client_id=client_id)
        self.versions: dict[int, tuple[int, int]] = {}
        self._negotiate()

    def close(self) -> None:
        self.sock.close()

    def _negotiate(self) -> None:
        version = MAX_VERSIONS[18]
        for _ in range(3):
            body = ApiVersionsRequest(client_software_name="pylog", client_software_version="0.1.0")
            resp = self._roundtrip(body, version)
            if resp.error_code == errors.UnsupportedVersionError.code:
                ours = [k for k in resp.api_keys if k.api_key == 18]
                version = min(version - 1, ours[0].max_version) if ours else 0
                continue
            if resp.error_code:
                raise ClientError(f"{self.address}: ApiVersions failed with error {resp.error_code}")
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise ClientError(f"{self.address}: could not agree on an ApiVersions version")

    def version_for(self, body: Any, max_version: int | None = None) -> int:
        cls = type(body)
        key = cls.API_KEY
        rng = self.versions.get(key)
        if rng is None:
            raise ClientError(f"{self.address} does not support {cls.NAME[:-7]}")
        lo, hi = cls.VALID_VERSIONS
        top = min(hi, MAX_VERSIONS.get(key, hi), rng[1])
        if max_version is not None:
            top = min(top, max_version)
        if top < max(lo, rng[0]):
            raise ClientError(f"{self.address}: no common version of {cls.NAME[:-7]} "
                              f"(broker {rng[0]}-{rng[1]})")
        return top

    def request(self, body: Any, version: int | None = None, *, expect_response: bool = True) -> Any:
        if version is None:
            version = self.version_for(body)
        return self._roundtrip(body, version, expect_response=expect_response)

    def _roundtrip(self, body: Any, version: int, *, expect_response: bool = True) -> Any:
        chunks = self.conn.send(body, version)
        try:
            self.sock.sendall(b"".join(bytes(c) for c in chunks))
            if not expect_response:
                return None
            deadline = time.monotonic() + self.timeout
            while True:
                event = self.conn.next_event()
                if isinstance(event, Response):
                    return event.body
                if isinstance(event, ConnectionClosed):
                    raise ClientError(f"{self.address} closed the connection")
                assert event is NEED_DATA
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ClientError(f"{self.address}: no answer within {self.timeout} s")
                self.sock.settimeout(left)
                data = self.sock.recv(1 << 20)
                self.conn.receive_data(data)
        except (OSError, errors.RemoteProtocolError) as exc:
            raise ClientError(f"{self.address}: {exc}") from None

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Cluster:
    """Connections to the brokers of a cluster, found from a bootstrap address."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        self.timeout = timeout
        host, port = parse_hostport(bootstrap.split(",")[0])
        self.bootstrap = BrokerConnection(host, port, timeout)
        self._conns: dict[int, BrokerConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}

    def close(self) -> None:
        self.bootstrap.close()
        for c in self._conns.values():
            c.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metadata(self, topics: list[str] | None, *, auto_create: bool = False) -> Any:
        req = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=auto_create,
        )
        version = self.bootstrap.version_for(req)
        if topics is None and version == 0:
            req.topics = []
        resp = self.bootstrap.request(req, version)
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        return resp

    def leader_connection(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is None:
            if node_id not in self.brokers:
                raise ClientError(f"broker {node_id} is not in the metadata")
            host, port = self.brokers[node_id]
            conn = self._conns[node_id] = BrokerConnection(host, port, self.timeout)
        return conn


def check(code: int, what: str, message: str | None = None) -> None:
    """Raise a ClientError naming Kafka's error for a non-zero code."""
    if code:
        cls = errors.error_for_code(code)
        name = getattr(cls, "name", "") or (cls.__name__ if cls else "")
        raise ClientError(f"{what}: {name} ({code})" + (f": {message}" if message else ""))


def murmur2(data: bytes) -> int:
    """Kafka's default partitioner hash (``Utils.murmur2``), as a signed 32-bit int."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = data[4 * n4 :]
    if rest == 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's ``BuiltInPartitioner.partitionForKey``: ``toPositive(murmur2) % n``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
