"""Record the wire fuzzer's corpus: real request frames from real clients.

Usage (from the repository root, with the test dependencies installed)::

    python tests/fuzz/record_corpus.py            # rewrites tests/fuzz/corpus/*.frames

A ``pylog broker`` subprocess (the integration suite's ``BrokerProcess``) serves behind a
small recording TCP proxy; the broker advertises the proxy's address
(``advertised.listeners``), so every connection a client opens, bootstrap or not, goes
through the proxy. Each client then runs a realistic session: metadata, produce in every
codec, fetch, list offsets, a consumer group (join, sync, heartbeat, commit, leave), a
transaction (init producer id, add partitions, end txn), admin (create and delete topics,
describe configs).

Output: one file per client, ``corpus/<client>.frames``, the client-to-broker request
frames back to back exactly as sent (int32 size prefix, header, body). Identical frames are
kept once, and at most ``PER_API_VERSION`` frames per (API key, version) per client (fetches
and heartbeats repeat), so the corpus stays small (well under 1 MB) and is committed: the
fuzzer needs no client libraries and no recording at test time, and a seed names the same
mutants on every machine. Rerun this script when a client library changes its requests.
"""

from __future__ import annotations

import asyncio
import pathlib
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from integration.conftest import KCAT, BrokerProcess  # noqa: E402

CORPUS = HERE / "corpus"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_API_VERSION = 12
_size = struct.Struct(">i")


class RecordingProxy:
    """Forwards TCP connections to ``upstream`` and records every request frame sent."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.frames: list[bytes] = []
        self._lock = threading.Lock()
        self.upstream = ("127.0.0.1", 0)

    def start(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        threading.Thread(target=self._accept, daemon=True).start()

    def take(self) -> list[bytes]:
        with self._lock:
            frames, self.frames = self.frames, []
        return frames

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        buf = bytearray()
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
                if record:
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + _size.unpack_from(buf)[0]:
                        n = 4 + _size.unpack_from(buf)[0]
                        with self._lock:
                            self.frames.append(bytes(buf[:n]))
                        del buf[:n]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def _topics(prefix: str) -> dict[str, str]:
    return {codec: f"fz-{prefix}-{codec}-{uuid.uuid4().hex[:6]}" for codec in CODECS}


def session_confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    base = {"bootstrap.servers": bootstrap, "broker.address.family": "v4"}
    admin = AdminClient(base)
    topics = _topics("ck")
    for f in admin.create_topics([NewTopic(t, 2, 1) for t in topics.values()]).values():
        f.result(15)
    for f in admin.describe_configs([ConfigResource("topic", topics["none"])]).values():
        f.result(15)
    for codec, topic in topics.items():
        p = Producer(
            {
                **base,
                "compression.type": codec,
                "linger.ms": 5,
                "enable.idempotence": codec == "zstd",
            }
        )
        for i in range(20):
            p.produce(topic, key=b"k%d" % i, value=b"value %d " % i * 8, headers=[("h", b"v")])
        assert p.flush(15) == 0
    tp = Producer({**base, "transactional.id": f"fz-ck-{uuid.uuid4().hex[:6]}"})
    tp.init_transactions(15)
    for commit in (True, False):
        tp.begin_transaction()
        tp.produce(topics["lz4"], b"in a transaction")
        tp.commit_transaction(15) if commit else tp.abort_transaction(15)
    c = Consumer(
        {
            **base,
            "group.id": f"fz-ck-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    c.subscribe(list(topics.values()))
    got, deadline = 0, time.monotonic() + 20
    while got < 60 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.commit(asynchronous=False)
    c.get_watermark_offsets(TopicPartition(topics["gzip"], 0), timeout=10)
    c.offsets_for_times(
        [TopicPartition(topics["gzip"], 0, int(time.time() * 1000) - 60_000)], timeout=10
    )
    c.committed([TopicPartition(topics["gzip"], 0)], timeout=10)
    c.close()
    for f in admin.delete_topics(list(topics.values())).values():
        f.result(15)


def session_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topics = _topics("kp")
    admin.create_topics([NewTopic(t, 2, 1) for t in topics.values()])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topics["none"])])
    for codec, topic in topics.items():
        p = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
        )
        for i in range(20):
            p.send(topic, key=b"k%d" % i, value=b"value %d " % i * 8, headers=[("h", b"v")])
        p.flush(15)
        p.close()
    tp = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"fz-kp-{uuid.uuid4().hex[:6]}"
    )
    tp.init_transactions()
    for commit in (True, False):
        tp.begin_transaction()
        tp.send(topics["gzip"], b"in a transaction")
        tp.commit_transaction() if commit else tp.abort_transaction()
    tp.close()
    c = KafkaConsumer(
        *topics.values(),
        bootstrap_servers=bootstrap,
        group_id=f"fz-kp-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=4000,
    )
    for _ in c:
        pass
    c.commit()
    part = TopicPartition(topics["snappy"], 0)
    c.end_offsets([part])
    c.offsets_for_times({part: int(time.time() * 1000) - 60_000})
    c.close()
    admin.delete_topics(list(topics.values()))
    admin.close()


def session_aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        topics = _topics("ak")
        await admin.create_topics([NewTopic(t, 2, 1) for t in topics.values()])
        await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topics["none"])])
        for codec, topic in topics.items():
            p = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                linger_ms=5,
                compression_type=None if codec == "none" else codec,
            )
            await p.start()
            for i in range(20):
                await p.send(
                    topic, key=b"k%d" % i, value=b"value %d " % i * 8, headers=[("h", b"v")]
                )
            await p.stop()
        tp = AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=f"fz-ak-{uuid.uuid4().hex[:6]}"
        )
        await tp.start()
        async with tp.transaction():
            await tp.send_and_wait(topics["zstd"], b"in a transaction")
        await tp.stop()
        c = AIOKafkaConsumer(
            *topics.values(),
            bootstrap_servers=bootstrap,
            group_id=f"fz-ak-{uuid.uuid4().hex[:6]}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await c.start()
        await c.getmany(timeout_ms=3000)
        await c.commit()
        part = TopicPartition(topics["lz4"], 0)
        await c.end_offsets([part])
        await c.offsets_for_times({part: int(time.time() * 1000) - 60_000})
        await c.stop()
        await admin.delete_topics(list(topics.values()))
        await admin.close()

    asyncio.run(run())


def session_kcat(bootstrap: str) -> None:
    if KCAT is None:
        raise RuntimeError("kcat is not installed")
    topic = f"fz-kc-{uuid.uuid4().hex[:6]}"
    for codec in CODECS:
        subprocess.run(
            [KCAT, "-b", bootstrap, "-P", "-t", topic, "-z", codec, "-K", ":"],
            input=b"".join(b"k%d:v%d\n" % (i, i) for i in range(10)),
            check=True,
            timeout=30,
        )
    subprocess.run(
        [KCAT, "-b", bootstrap, "-C", "-t", topic, "-e", "-o", "beginning", "-q"],
        check=True,
        timeout=30,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run([KCAT, "-b", bootstrap, "-L"], check=True, timeout=30, stdout=subprocess.DEVNULL)


SESSIONS: dict[str, Callable[[str], None]] = {
    "confluent-kafka": session_confluent,
    "kafka-python": session_kafka_python,
    "aiokafka": session_aiokafka,
    "kcat": session_kcat,
}


def _keep(frames: list[bytes]) -> list[bytes]:
    """Distinct frames, at most PER_API_VERSION per (API key, version), in send order."""
    seen: set[bytes] = set()
    per: dict[tuple[int, int], int] = {}
    kept = []
    for f in frames:
        if len(f) < 8 or f in seen:
            continue
        key = struct.unpack_from(">hh", f, 4)
        if per.get(key, 0) >= PER_API_VERSION:
            continue
        per[key] = per.get(key, 0) + 1
        seen.add(f)
        kept.append(f)
    return kept


def main() -> int:
    warnings.simplefilter("ignore")
    CORPUS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = pathlib.Path(tmp) / "data"
        data.mkdir()
        # The proxy listens first; the broker advertises the proxy's address.
        proxy = RecordingProxy()
        broker = BrokerProcess(
            data,
            {
                "auto.create.topics.enable": "true",
                "offsets.topic.num.partitions": "1",
                "transaction.state.log.num.partitions": "1",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
            },
        )
        broker.start()
        proxy.start((broker.host, broker.port))
        try:
            bootstrap = f"127.0.0.1:{proxy.port}"
            for name, session in SESSIONS.items():
                t0 = time.monotonic()
                session(bootstrap)
                time.sleep(0.5)  # the last frames of closing connections
                kept = _keep(proxy.take())
                (CORPUS / f"{name}.frames").write_bytes(b"".join(kept))
                apis = sorted({struct.unpack_from(">h", f, 4)[0] for f in kept})
                print(
                    f"{name}: {len(kept)} frames, {sum(map(len, kept))} bytes, APIs {apis} "
                    f"({time.monotonic() - t0:.1f} s)"
                )
        finally:
            proxy.close()
            rc = broker.stop()
        if rc != 0:
            print(f"broker exited with {rc}:\n{broker.read_log()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
