"""Share groups and transactions (``share.isolation.level``) and ``share.auto.offset.reset=
by_duration:...`` with real clients: a confluent-kafka transactional producer commits and
aborts, confluent-kafka 2.16 ``ShareConsumer``s read in both isolation levels (and a
pylog.client ``ShareConsumer`` under read_committed).

Done is checked on the broker, not by waiting: a share group has finished a partition when
its share-partition start offset (DescribeShareGroupOffsets, pylog's admin client) reaches
the log end offset, which needs every record acknowledged or archived, transaction markers
and (read_committed) aborted data included.
"""

from __future__ import annotations

import time
import uuid
import warnings
from typing import Any

import pytest

from pylog.client import Admin
from pylog.client import ShareConsumer as PylogShareConsumer
from pylog.client.aio.admin import ConfigResource
from tests.integration.conftest import BrokerProcess, cluster_size

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.skipif(bool(cluster_size()), reason="share groups: single node only")

OVERRIDES = {
    "group.share.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "10000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}
DEADLINE = 60.0


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("share-txn") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


def _topic(bootstrap: str) -> str:
    name = f"stx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=15)
    return name


def _group(bootstrap: str, **configs: str) -> str:
    group = f"g-{uuid.uuid4().hex[:6]}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.alter_configs(ConfigResource("group", group),
                            {k.replace("_", "."): v for k, v in configs.items()})
    return group


def _consumer(bootstrap: str, group: str, topic: str) -> Any:
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.subscribe([topic])
    return c


def _txn_producer(bootstrap: str) -> Any:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                  "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    return p


def _transaction(p: Any, topic: str, values: list[str], commit: bool) -> None:
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v.encode())
    if commit:
        p.commit_transaction(30)
    else:
        p.flush(15)
        p.abort_transaction(30)


def _plain(bootstrap: str, topic: str, values: list[str], **kw: Any) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, value=v.encode(), **kw)
    assert p.flush(15) == 0


def _log_end(bootstrap: str, topic: str) -> int:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return int(c.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=15)[1])
    finally:
        c.close()


def _start_offset(admin: Admin, group: str) -> int:
    offsets = admin.list_share_group_offsets(group)
    info = next(iter(offsets.values()), None) if offsets else None
    return -1 if info is None else int(info.start_offset)


def _drain(bootstrap: str, consumers: dict[str, Any], topic: str) -> dict[str, list[str]]:
    """Poll every consumer (implicit acknowledgement) until each one's share group has
    finished the partition (start offset == log end); the values each one got."""
    end = _log_end(bootstrap, topic)
    got: dict[str, list[str]] = {g: [] for g in consumers}
    done: set[str] = set()
    deadline = time.monotonic() + DEADLINE
    with Admin(bootstrap_servers=bootstrap) as admin:
        while done != set(consumers):
            assert time.monotonic() < deadline, f"not done: {got}, start offsets " \
                f"{ {g: _start_offset(admin, g) for g in consumers} }, log end {end}"
            for g, c in consumers.items():
                if isinstance(c, confluent_kafka.ShareConsumer):
                    for m in c.poll(0.3):
                        assert m.error() is None, m.error()
                        got[g].append(m.value().decode())
                else:  # pylog.client's ShareConsumer
                    got[g] += [r.value.decode() for r in c.poll(0.3, max_records=50)]
                if _start_offset(admin, g) == end:
                    done.add(g)
    return got


def test_read_committed_delivers_only_committed_records_read_uncommitted_all(tbroker: BrokerProcess) -> None:
    bs = tbroker.bootstrap
    topic = _topic(bs)
    committed_group = _group(bs, share_auto_offset_reset="earliest", share_isolation_level="read_committed")
    uncommitted_group = _group(bs, share_auto_offset_reset="earliest")  # read_uncommitted: default
    p = _txn_producer(bs)
    _transaction(p, topic, [f"c{i}" for i in range(5)], commit=True)
    _transaction(p, topic, [f"a{i}" for i in range(5)], commit=False)
    _plain(bs, topic, ["p0", "p1"])
    _transaction(p, topic, [f"c{i}" for i in range(5, 10)], commit=True)
    _transaction(p, topic, [f"a{i}" for i in range(5, 8)], commit=False)
    pylog_group = _group(bs, share_auto_offset_reset="earliest", share_isolation_level="read_committed")
    pylog_consumer = PylogShareConsumer({"bootstrap.servers": bs, "group.id": pylog_group})
    pylog_consumer.subscribe([topic])
    consumers = {committed_group: _consumer(bs, committed_group, topic),
                 uncommitted_group: _consumer(bs, uncommitted_group, topic),
                 pylog_group: pylog_consumer}
    try:
        got = _drain(bs, consumers, topic)
    finally:
        for c in consumers.values():
            c.close()
    committed = [f"c{i}" for i in range(10)] + ["p0", "p1"]
    aborted = [f"a{i}" for i in range(8)]
    # Exactly once each: no aborted record under read_committed (confluent-kafka's and
    # pylog.client's share consumers), every record under read_uncommitted, and the four
    # markers (never delivered, they hold no value) done with in every group (the start
    # offsets reached the log end).
    assert sorted(got[committed_group]) == sorted(committed)
    assert sorted(got[pylog_group]) == sorted(committed)
    assert sorted(got[uncommitted_group]) == sorted(committed + aborted)


def test_an_open_transaction_holds_read_committed_back_until_it_ends(tbroker: BrokerProcess) -> None:
    bs = tbroker.bootstrap
    topic = _topic(bs)
    committed_group = _group(bs, share_auto_offset_reset="earliest", share_isolation_level="read_committed")
    uncommitted_group = _group(bs, share_auto_offset_reset="earliest")
    p = _txn_producer(bs)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"t{i}".encode())
    p.flush(15)
    _plain(bs, topic, ["after"])  # behind the open transaction
    rc = _consumer(bs, committed_group, topic)
    ru = _consumer(bs, uncommitted_group, topic)
    seen: dict[str, list[str]] = {"rc": [], "ru": []}
    try:
        # read_uncommitted gets all four while read_committed, polled as often, gets none
        deadline = time.monotonic() + DEADLINE
        while len(seen["ru"]) < 4:
            assert time.monotonic() < deadline, seen
            for name, c in (("ru", ru), ("rc", rc)):
                seen[name] += [m.value().decode() for m in c.poll(0.3) if m.error() is None]
        for _ in range(3):
            seen["rc"] += [m.value().decode() for m in rc.poll(0.3) if m.error() is None]
        assert sorted(seen["ru"]) == ["after", "t0", "t1", "t2"]
        assert seen["rc"] == []
        p.commit_transaction(30)
        got = _drain(bs, {committed_group: rc}, topic)
        assert sorted(got[committed_group]) == ["after", "t0", "t1", "t2"]
    finally:
        rc.close()
        ru.close()


def test_by_duration_starts_at_the_first_record_that_recent(tbroker: BrokerProcess) -> None:
    bs = tbroker.bootstrap
    topic = _topic(bs)
    now_ms = int(time.time() * 1000)
    for age_min in (300, 120, 61):
        _plain(bs, topic, [f"old{age_min}"], timestamp=now_ms - age_min * 60_000)
    for age_min in (45, 10):
        _plain(bs, topic, [f"new{age_min}"], timestamp=now_ms - age_min * 60_000)
    group = _group(bs, share_auto_offset_reset="by_duration:PT1H")
    c = _consumer(bs, group, topic)
    try:
        got = _drain(bs, {group: c}, topic)
    finally:
        c.close()
    assert sorted(got[group]) == ["new10", "new45"]
