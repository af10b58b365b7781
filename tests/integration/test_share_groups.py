"""KIP-932 share groups with a real client: confluent-kafka 2.16 ``ShareConsumer``s
(ShareGroupHeartbeat v1, ShareFetch v1, ShareAcknowledge v1) against a pylog broker.

Each test uses its own topic and share group; group configs (``share.auto.offset.reset``,
``share.record.lock.duration.ms``, ``share.delivery.count.limit``) are set through
IncrementalAlterConfigs on the GROUP resource with pylog's admin client. The broker lowers
``group.share.min.record.lock.duration.ms`` so that a test can use 2-second locks. All
consumers of a test are polled from the test thread, one after the other.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections import Counter
from typing import Any

import pytest
from _harness.waiting import wait_until as _wait

from pylog.client import Admin, TopicPartition
from pylog.client.aio.admin import ConfigResource
from tests.integration.conftest import BrokerProcess, cluster_size

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka
    from confluent_kafka import AcknowledgeType
    from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.skipif(bool(cluster_size()), reason="share groups: single node only")

OVERRIDES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "10000",
    "offsets.topic.num.partitions": "3",
}
DEADLINE = 60.0


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("share-groups") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=15)
    return name


def _group_configs(bootstrap: str, group: str, **configs: str) -> str:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.alter_configs(ConfigResource("group", group),
                            {k.replace("_", "."): v for k, v in configs.items()})
    return group


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> list[bytes]:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [f"v{i}".encode() for i in range(n)]
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions)
    assert p.flush(15) == 0
    return values


def _produce_batches(bootstrap: str, topic: str, n: int, per: int) -> list[bytes]:
    """``n`` records in batches of ``per`` (a flush after each): a batch-optimized share
    fetch (KIP-1206, ShareFetch v1's only mode) acquires whole batches, so their size
    bounds what one member takes at a time."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000})
    values = [f"v{i}".encode() for i in range(n)]
    for i in range(0, n, per):
        for v in values[i:i + per]:
            p.produce(topic, value=v)
        assert p.flush(15) == 0
    return values


def _consumer(bootstrap: str, group: str, topic: str, **extra: str) -> Any:
    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    c = confluent_kafka.ShareConsumer(conf)
    c.subscribe([topic])
    return c


def _wait_members(bootstrap: str, group: str, n: int, poll: Any = None) -> None:
    """Until the share group has ``n`` members, each with its partitions assigned (the
    group coordinator assigns a partition once its share-partition state is initialized,
    at the heartbeat after the member joined; "latest" is resolved after that);
    ``poll()`` between looks."""
    deadline = time.monotonic() + DEADLINE
    with Admin(bootstrap_servers=bootstrap) as admin:
        while time.monotonic() < deadline:
            desc = admin.describe_groups([group])[group]
            if (desc.group_type == "share" and len(desc.members) >= n
                    and all(m.assignment for m in desc.members)):
                return
            if poll is not None:
                poll()
            time.sleep(0.1)
    raise AssertionError(f"share group {group} did not reach {n} members")


def _records(msgs: Any) -> list[Any]:
    out = []
    for m in msgs:
        assert m.error() is None, m.error()
        out.append(m)
    return out


def test_consumers_share_one_partition_and_each_record_is_accepted_once(sbroker: BrokerProcess) -> None:
    bs = sbroker.bootstrap
    topic = _topic(bs)
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest")
    # librdkafka's ShareFetch v1 is batch-optimized (KIP-1206): a fetch takes whole batches
    # past max.poll.records, so both are kept small for the members to share the records.
    consumers = [_consumer(bs, group, topic, client_id=f"c{i}", max_poll_records="50")
                 for i in range(3)]
    # Every member in before the records: none can take them all before the others join.
    _wait_members(bs, group, 3, lambda: [c.poll(0.05) for c in consumers])
    values = _produce_batches(bs, topic, 1500, 50)
    seen: Counter[bytes] = Counter()
    by_consumer: Counter[int] = Counter()
    deadline = time.monotonic() + DEADLINE
    try:
        while len(seen) < len(values) and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for m in _records(c.poll(0.3)):
                    seen[m.value()] += 1
                    by_consumer[i] += 1
        # The records of the last polls are accepted by the next poll (implicit mode).
        for c in consumers:
            assert _records(c.poll(0.5)) == [] or True
    finally:
        for c in consumers:
            c.close()
    assert set(seen) == set(values), f"missing {len(set(values) - set(seen))} records"
    assert max(seen.values()) == 1, f"delivered more than once: {[v for v, n in seen.items() if n > 1][:5]}"
    assert len([n for n in by_consumer.values() if n]) >= 2, f"one consumer took all: {by_consumer}"
    # All accepted: a new member of the group gets nothing.
    late = _consumer(bs, group, topic)
    try:
        got: list[Any] = []
        end = time.monotonic() + 4
        while time.monotonic() < end:
            got += _records(late.poll(0.5))
        assert got == []
    finally:
        late.close()


def test_latest_is_the_default_reset(sbroker: BrokerProcess) -> None:
    bs = sbroker.bootstrap
    topic = _topic(bs)
    p = confluent_kafka.Producer({"bootstrap.servers": bs})
    for i in range(5):
        p.produce(topic, value=b"old%d" % i)
    assert p.flush(15) == 0
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = _consumer(bs, group, topic)
    try:
        _wait_members(bs, group, 1, lambda: c.poll(0.05))
        for i in range(5):
            p.produce(topic, value=b"new%d" % i)
        assert p.flush(15) == 0
        got: list[bytes] = []
        deadline = time.monotonic() + DEADLINE
        while len(got) < 5 and time.monotonic() < deadline:
            got += [m.value() for m in _records(c.poll(0.5))]
        end = time.monotonic() + 2
        while time.monotonic() < end:
            got += [m.value() for m in _records(c.poll(0.5))]
    finally:
        c.close()
    # The share partition starts where the log ended when the group got it.
    assert got == [b"new%d" % i for i in range(5)]


_DIE_HOLDING = r"""
import os, sys, time, warnings
warnings.simplefilter("ignore")
import confluent_kafka
c = confluent_kafka.ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2]})
c.subscribe([sys.argv[3]])
end = time.monotonic() + 30
while time.monotonic() < end:
    msgs = [m for m in c.poll(0.5) if m.error() is None]
    if msgs:
        print(" ".join(str(m.offset()) for m in msgs), flush=True)
        os._exit(0)  # dies holding them: no acknowledgement, no leave
os._exit(3)
"""


def test_records_of_a_dead_consumer_are_redelivered_after_the_lock(sbroker: BrokerProcess) -> None:
    bs = sbroker.bootstrap
    topic = _topic(bs)
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest",
                           share_record_lock_duration_ms="2000")
    _produce(bs, topic, 20)
    child = subprocess.run([sys.executable, "-c", _DIE_HOLDING, bs, group, topic],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ))
    assert child.returncode == 0, child.stderr[-2000:]
    held = {int(o) for o in child.stdout.split()}
    assert held
    c = _consumer(bs, group, topic)
    redelivered: dict[int, int] = {}
    deadline = time.monotonic() + DEADLINE
    try:
        while not held <= set(redelivered) and time.monotonic() < deadline:
            for m in _records(c.poll(0.5)):
                redelivered.setdefault(m.offset(), m.delivery_count())
    finally:
        c.close()
    assert held <= set(redelivered)
    # The dead consumer's delivery counted: these come with delivery count 2.
    assert {redelivered[o] for o in held} == {2}


def test_explicit_reject_release_and_accept(sbroker: BrokerProcess) -> None:
    bs = sbroker.bootstrap
    topic = _topic(bs)
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest")
    _produce(bs, topic, 30)
    c = _consumer(bs, group, topic, share_acknowledgement_mode="explicit")
    first: dict[int, int] = {}
    deadline = time.monotonic() + DEADLINE
    try:
        while len(first) < 30 and time.monotonic() < deadline:
            for m in _records(c.poll(0.5)):
                o = m.offset()
                if o in first:
                    # Only released records come back.
                    assert first[o] % 3 == 2 and m.delivery_count() == 2, (o, m.delivery_count())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    continue
                first[o] = o
                kind = (AcknowledgeType.ACCEPT, AcknowledgeType.REJECT, AcknowledgeType.RELEASE)[o % 3]
                c.acknowledge(m, kind)
            c.commit_sync(10)
        assert len(first) == 30
        # The released third comes back once; rejected and accepted records never do.
        again: Counter[int] = Counter()
        end = time.monotonic() + 6
        while time.monotonic() < end:
            for m in _records(c.poll(0.5)):
                again[m.offset()] += 1
                assert m.offset() % 3 == 2, f"offset {m.offset()} redelivered"
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(10)
    finally:
        c.close()


def test_delivery_count_limit_archives_a_record_released_too_often(sbroker: BrokerProcess) -> None:
    bs = sbroker.bootstrap
    topic = _topic(bs)
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest",
                           share_delivery_count_limit="3")
    _produce(bs, topic, 5)
    c = _consumer(bs, group, topic, share_acknowledgement_mode="explicit")
    deliveries: Counter[int] = Counter()
    counts: dict[int, list[int]] = {}
    try:
        end = time.monotonic() + 12
        while time.monotonic() < end:
            for m in _records(c.poll(0.5)):
                deliveries[m.offset()] += 1
                counts.setdefault(m.offset(), []).append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync(10)
    finally:
        c.close()
    assert deliveries == Counter({o: 3 for o in range(5)}), deliveries
    assert all(v == [1, 2, 3] for v in counts.values()), counts


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["graceful", "killed"])
def test_a_broker_restart_keeps_the_share_partition_state(
        tmp_path_factory: pytest.TempPathFactory, sig: int) -> None:
    data = tmp_path_factory.mktemp("share-restart") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    try:
        bs = b.bootstrap
        topic = _topic(bs)
        group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest")
        _produce(bs, topic, 100)
        c = _consumer(bs, group, topic, share_acknowledgement_mode="explicit")
        done: set[int] = set()
        released: set[int] = set()
        deadline = time.monotonic() + DEADLINE
        while len(done) < 60 and time.monotonic() < deadline:
            for m in _records(c.poll(0.5)):
                o = m.offset()
                if o < 50:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    done.add(o)
                elif o < 60:
                    c.acknowledge(m, AcknowledgeType.REJECT)
                    done.add(o)
                else:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                    released.add(o)
            c.commit_sync(10)
        assert done == set(range(60))
        # The broker goes down with this consumer still in the group.
        assert b.stop(sig=sig) in (0, -signal.SIGKILL)
        b.start()
        c2 = _consumer(bs, group, topic)
        got: Counter[int] = Counter()
        counts: dict[int, int] = {}
        deadline = time.monotonic() + DEADLINE
        try:
            while len(got) < 40 and time.monotonic() < deadline:
                for m in _records(c2.poll(0.5)):
                    got[m.offset()] += 1
                    counts[m.offset()] = m.delivery_count()
            end = time.monotonic() + 3
            while time.monotonic() < end:
                for m in _records(c2.poll(0.5)):
                    got[m.offset()] += 1
        finally:
            c2.close()
            c.close()
        # Accepted and rejected records are not delivered again; the others are, once,
        # with the deliveries before the restart counted.
        assert set(got) == set(range(60, 100)), sorted(set(got) ^ set(range(60, 100)))[:10]
        assert max(got.values()) == 1
        assert all(counts[o] == 2 for o in released), {o: counts[o] for o in released if counts[o] != 2}
    finally:
        b.stop(sig=signal.SIGKILL)


def _send(broker: BrokerProcess, body: Any, version: int | None = None) -> Any:
    import asyncio

    from pylog.net.connection import BrokerConnection

    async def go() -> Any:
        conn = BrokerConnection(broker.host, broker.port, node_id=-1, client_id="share-test", request_timeout=15.0)
        await conn.connect(15.0)
        try:
            return await conn.send(body, version)
        finally:
            await conn.close()
    return asyncio.run(go())


def test_a_restart_between_initialize_and_assignment_keeps_the_initialized_state(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The group coordinator initializes a new member's partitions (InitializeShareGroupState,
    then ShareGroupStatePartitionMetadata's InitializedTopics) before it assigns them, at the
    member's next heartbeat. The broker is killed in between: loaded again, the coordinator
    knows they are initialized and assigns them at once; the records are delivered from
    ``share.auto.offset.reset`` (earliest), once each."""
    from pylog.protocol.messages import FindCoordinatorRequest, ShareGroupHeartbeatRequest

    data = tmp_path_factory.mktemp("share-init-restart") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    try:
        bs = b.bootstrap
        topic = _topic(bs, partitions=2)
        group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest")
        values = _produce(bs, topic, 20, partitions=2)
        deadline = time.monotonic() + DEADLINE
        while _send(b, FindCoordinatorRequest(key=group), 3).error_code and time.monotonic() < deadline:
            time.sleep(0.1)

        def heartbeat(epoch: int, topics: list[str] | None) -> Any:
            return _send(b, ShareGroupHeartbeatRequest(group_id=group, member_id="m-raw", member_epoch=epoch,
                                                       subscribed_topic_names=topics), 1)
        r = heartbeat(0, [topic])
        assert (r.error_code, r.member_epoch) == (0, 1), r
        assert r.assignment is not None and r.assignment.topic_partitions == []  # initialized, not assigned yet
        assert b.stop(sig=signal.SIGKILL) == -signal.SIGKILL
        b.start()
        r = heartbeat(1, None)
        while r.error_code and time.monotonic() < deadline:  # the coordinator loads
            time.sleep(0.1)
            r = heartbeat(1, None)
        assert r.error_code == 0 and r.member_epoch == 2, r
        assert [sorted(tp.partitions) for tp in r.assignment.topic_partitions] == [[0, 1]], r
        assert heartbeat(2, None).error_code == 0
        assert heartbeat(-1, None).error_code == 0

        c = _consumer(bs, group, topic)
        seen: Counter[bytes] = Counter()
        counts: set[int] = set()
        try:
            while len(seen) < len(values) and time.monotonic() < deadline:
                for m in _records(c.poll(0.5)):
                    seen[m.value()] += 1
                    counts.add(m.delivery_count())
        finally:
            c.close()
        assert set(seen) == set(values) and max(seen.values()) == 1 and counts == {1}
    finally:
        b.stop(sig=signal.SIGKILL)


def _pylog(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pylog", *args, "-b", broker.bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_pylog_groups_lists_and_describes_share_groups(sbroker: BrokerProcess) -> None:
    bs = sbroker.bootstrap
    topic = _topic(bs, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = _consumer(bs, group, topic, client_id="cli-share")
    try:
        # Joining happens on the first polls.
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            c.poll(0.3)
            out = _pylog(sbroker, "groups", "list", "--type", "share", "--state")
            if group in out.stdout:
                break
        assert out.returncode == 0, out.stderr
        line = next(ln for ln in out.stdout.splitlines() if ln.startswith(group))
        assert line.split()[1:] == ["share", "Stable"], out.stdout
        assert "Stable" in _pylog(sbroker, "groups", "list", "--state", "stable").stdout
        listed = _pylog(sbroker, "groups", "list", "--type", "consumer")
        assert group not in listed.stdout
        desc = _pylog(sbroker, "groups", "describe", group, "--members", "--verbose")
        assert desc.returncode == 0, desc.stderr
        assert "cli-share" in desc.stdout and f"{topic}(0,1)" in desc.stdout, desc.stdout
        state = _pylog(sbroker, "groups", "describe", group, "--state")
        assert "simple" in state.stdout and "Stable" in state.stdout, state.stdout
        js = _pylog(sbroker, "groups", "describe", group, "--json")
        import json

        (g,) = json.loads(js.stdout)
        assert g["type"] == "share" and g["protocol"] == "simple" and g["group_epoch"] >= 1
    finally:
        c.close()
    # Empty once it left; then it can be deleted.
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        out = _pylog(sbroker, "groups", "list", "--state")
        if any(ln.split()[:1] == [group] and "Empty" in ln for ln in out.stdout.splitlines()):
            break
        time.sleep(0.3)
    deleted = _pylog(sbroker, "groups", "delete", group)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert group not in _pylog(sbroker, "groups", "list").stdout


# --------------------------------------------------------------------------- pylog.client


@pytest.mark.parametrize("mode", ["batch_optimized", "record_limit"])
def test_pylog_client_share_consumers_split_the_records(sbroker: BrokerProcess, mode: str) -> None:
    """Two pylog.client members (``share.acquire.mode`` either way, ShareFetch v2) and a
    confluent-kafka one (v1, batch-optimized) share a topic: every record once."""
    from pylog.client import ShareConsumer

    bs = sbroker.bootstrap
    topic = _topic(bs)
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest")
    consumers = [ShareConsumer({"bootstrap.servers": bs, "group.id": group,
                                "share.acquire.mode": mode}) for _ in range(2)]
    # And a confluent-kafka member in the same group (ShareFetch v1: batch-optimized, so
    # max.poll.records 50 and batches of 50 keep it from taking everything at once).
    ck = _consumer(bs, group, topic, max_poll_records="50")
    seen: Counter[bytes] = Counter()
    who: Counter[str] = Counter()
    try:
        for c in consumers:
            c.subscribe([topic])
        _wait_members(bs, group, 3, lambda: ck.poll(0.05))
        values = _produce_batches(bs, topic, 600, 50)
        deadline = time.monotonic() + DEADLINE
        while len(seen) < len(values) and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for r in c.poll(0.3, max_records=50):
                    seen[r.value] += 1
                    who[f"pylog{i}"] += 1
            for m in _records(ck.poll(0.3)):
                seen[m.value()] += 1
                who["confluent"] += 1
    finally:
        for c in consumers:
            c.close()
        ck.close()
    assert set(seen) == set(values)
    assert max(seen.values()) == 1, [v for v, n in seen.items() if n > 1][:5]
    assert who["pylog0"] + who["pylog1"] > 0, who


def test_pylog_client_explicit_acknowledgements(sbroker: BrokerProcess) -> None:
    from pylog.client import AcknowledgeType as A
    from pylog.client import IllegalStateError, ShareConsumer

    bs = sbroker.bootstrap
    topic = _topic(bs)
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest",
                           share_delivery_count_limit="2")
    _produce(bs, topic, 12)
    deliveries: Counter[int] = Counter()
    with ShareConsumer({"bootstrap.servers": bs, "group.id": group,
                        "share.acknowledgement.mode": "explicit"}) as c:
        c.subscribe([topic])
        end = time.monotonic() + 15
        first = True
        while time.monotonic() < end:
            records = c.poll(0.5)
            if records and first:
                first = False
                with pytest.raises(IllegalStateError):
                    c.poll(0.1)  # the previous poll's records are not acknowledged yet
            for r in records:
                deliveries[r.offset] += 1
                assert c.delivery_count(r) == deliveries[r.offset]
                c.acknowledge(r, (A.ACCEPT, A.REJECT, A.RELEASE)[r.offset % 3])
            results = c.commit_sync(10)
            assert all(e is None for e in results.values()), results
    # Accepted and rejected once; released ones until the limit (2) archives them.
    assert deliveries == Counter({o: 2 if o % 3 == 2 else 1 for o in range(12)}), deliveries


def _joined(bs: str, group: str, consumers: list[Any]) -> None:
    _wait_members(bs, group, len(consumers), lambda: [c.poll(0.05) for c in consumers])


def test_record_limit_acquires_exactly_max_poll_records(sbroker: BrokerProcess) -> None:
    """KIP-1206 through pylog.client (ShareFetch v2, ShareAcquireMode 1): a member holding
    its first poll unacknowledged holds exactly max.poll.records records, whatever the
    batches; the rest, inside the same batches, go to another member at once."""
    from pylog.client import ShareConsumer

    bs = sbroker.bootstrap
    topic = _topic(bs)
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest")
    conf = {"bootstrap.servers": bs, "group.id": group, "share.acknowledgement.mode": "explicit",
            "share.acquire.mode": "record_limit"}
    a = ShareConsumer({**conf, "max.poll.records": 5})
    b = ShareConsumer({**conf, "max.poll.records": 100})
    try:
        a.subscribe([topic])
        _joined(bs, group, [a])
        values = _produce(bs, topic, 20)   # linger.ms 5: a few batches at most
        got_a: list[Any] = []
        _wait(lambda: got_a.extend(a.poll(0.3)) or got_a, DEADLINE, "a got nothing")
        assert [r.offset for r in got_a] == [0, 1, 2, 3, 4]
        b.subscribe([topic])
        got_b: list[Any] = []
        _wait(lambda: got_b.extend(b.poll(0.3)) or len(got_b) >= 15, DEADLINE, "b's 15 records")
        assert sorted(r.offset for r in got_b) == list(range(5, 20))
        assert {r.value for r in got_a + got_b} == set(values)
        assert all(b.delivery_count(r) == 1 for r in got_b)
        for c, rs in ((a, got_a), (b, got_b)):
            for r in rs:
                c.acknowledge(r)
            assert all(e is None for e in c.commit_sync(10).values())
    finally:
        a.close()
        b.close()


def test_renew_keeps_a_record_past_its_lock(sbroker: BrokerProcess) -> None:
    """KIP-1222 through pylog.client: a member renews one record (AcknowledgeType.RENEW)
    for three lock durations; another member polling all along never gets it; the renewed
    record is handed out again with its delivery count unchanged, then accepted."""
    from pylog.client import AcknowledgeType as A
    from pylog.client import ShareConsumer

    bs = sbroker.bootstrap
    topic = _topic(bs)
    lock_ms = 1000
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest",
                           share_record_lock_duration_ms=str(lock_ms))
    conf = {"bootstrap.servers": bs, "group.id": group, "share.acknowledgement.mode": "explicit",
            "share.acquire.mode": "record_limit", "max.poll.records": 1}
    a = ShareConsumer(conf)
    b = ShareConsumer(conf)
    try:
        a.subscribe([topic])
        _joined(bs, group, [a])
        _produce(bs, topic, 3)
        first: list[Any] = []
        _wait(lambda: first.extend(a.poll(0.3)) or first, DEADLINE, "a got nothing")
        (held,) = first
        b.subscribe([topic])
        seen_by_b: list[int] = []
        renewals = 0
        end = time.monotonic() + 3 * lock_ms / 1000
        a.acknowledge(held, A.RENEW)
        while time.monotonic() < end or renewals < 3:
            again = a.poll(0.2)                  # the renewed record, handed out again
            if again:
                assert [r.offset for r in again] == [held.offset]
                assert a.delivery_count(again[0]) == 1
                a.acknowledge(again[0], A.RENEW)
                renewals += 1
            for r in b.poll(0.1):
                seen_by_b.append(r.offset)
                b.acknowledge(r)
        assert held.offset not in seen_by_b, seen_by_b
        assert sorted(seen_by_b) == sorted({0, 1, 2} - {held.offset})
        # a finishes: accept it (after the pending renewal comes back)
        last: list[Any] = []
        _wait(lambda: last.extend(a.poll(0.2)) or last, DEADLINE, "renewal never came back")
        a.acknowledge(last[0], A.ACCEPT)
        assert all(e is None for e in a.commit_sync(10).values())
        assert all(e is None for e in b.commit_sync(10).values())
        assert b.poll(0.5) == []
    finally:
        a.close()
        b.close()


# --------------------------------------------------------------------------- cluster mode


@pytest.mark.slow
def test_share_groups_in_cluster_mode(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Two brokers: the partitions' leaders keep the share partitions, their share
    coordinators (the leaders of __share_group_state's partitions, 2 replicas here) the
    state, the group coordinator the group. Failover: test_cluster_share_groups.py."""
    from tests.integration.conftest import ClusterProcess

    cluster = ClusterProcess(tmp_path_factory.mktemp("share-cluster"), 2, OVERRIDES).start()
    try:
        bs = cluster.bootstrap
        topic = _topic(bs, partitions=4)
        # The default "latest": every leader starts its share partitions (on the members'
        # first fetches) before anything is produced; the share state's start offsets say
        # when they have.
        group = f"g-{uuid.uuid4().hex[:6]}"
        consumers = [_consumer(bs, group, topic) for _ in range(2)]
        _wait_members(bs, group, 2, lambda: [c.poll(0.05) for c in consumers])
        tps = [TopicPartition(topic, p) for p in range(4)]

        def started() -> bool:
            for c in consumers:
                assert _records(c.poll(0.2)) == []
            with Admin(bootstrap_servers=bs) as admin:
                offsets = admin.list_share_group_offsets(group, tps)
            return all(o is not None and o.start_offset >= 0 for o in offsets.values())
        _wait(started, DEADLINE, "every share partition started")
        values = _produce(bs, topic, 400, partitions=4)
        seen: Counter[bytes] = Counter()
        deadline = time.monotonic() + DEADLINE
        try:
            while len(seen) < len(values) and time.monotonic() < deadline:
                for c in consumers:
                    for m in _records(c.poll(0.3)):
                        seen[m.value()] += 1
        finally:
            for c in consumers:
                c.close()
        assert set(seen) == set(values) and max(seen.values()) == 1
    finally:
        rc = cluster.stop()
        assert rc == 0, cluster.read_log()[-3000:]
