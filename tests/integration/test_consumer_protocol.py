"""The KIP-848 consumer group protocol with a real client: confluent-kafka consumers with
``group.protocol=consumer`` (ConsumerGroupHeartbeat, server-side assignment, incremental
reconciliation) against a pylog broker.

The broker runs with a 500 ms heartbeat interval (Kafka's minimum is 5 s; the min is
lowered here) so that reconciliation steps take tenths of a second, not seconds. All
consumers of a test are polled from the test thread, one after the other: whatever a
member holds after its poll is what it consumes from, so the samples show who owns what.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from pylog.client import Admin
from tests.integration.conftest import BrokerProcess, start_target

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient, NewTopic

OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "3",
}
PARTITIONS = 6
DEADLINE = 30.0


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory: pytest.TempPathFactory):
    b = start_target(tmp_path_factory, "consumer-protocol", OVERRIDES)
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


def _create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(timeout=10)


def _produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(15) == 0


class Members:
    """Consumers of one group, polled in turn; ``seen`` holds every record value read,
    ``history`` each member's assignment after each of its polls."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.consumers: dict[str, Any] = {}
        self.seen: list[str] = []
        self.history: dict[str, list[frozenset[int]]] = {}

    def add(self, name: str, **conf: Any) -> None:
        c = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "client.id": name,
                **conf,
            }
        )
        # With rebalance callbacks, librdkafka applies assignment changes inside poll(), so
        # what assignment() says after a poll is exactly what the member holds until its
        # next poll (without them it may apply them on its own thread, between samples).
        c.subscribe([self.topic], on_assign=lambda *a: None, on_revoke=lambda *a: None)
        self.consumers[name] = c
        self.history[name] = []

    def close(self, name: str) -> None:
        self.consumers.pop(name).close()

    def assignment(self, name: str) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumers[name].assignment())

    def poll_round(self) -> None:
        for name, c in self.consumers.items():
            msg = c.poll(0.02)
            while msg is not None:
                assert msg.error() is None, msg.error()
                self.seen.append(msg.value().decode())
                msg = c.poll(0)
            held = self.assignment(name)
            self.history[name].append(held)
            owners = [
                n
                for n in self.consumers
                if n != name and held & (self.history[n][-1:] or [frozenset()])[0]
            ]
            assert not owners, f"{name} holds {sorted(held)} while {owners} still hold some of them"

    def until(self, cond: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            self.poll_round()
            if cond():
                return
        raise AssertionError(
            f"timed out waiting for {what}: "
            f"{ {n: sorted(self.assignment(n)) for n in self.consumers} }"
        )

    def split(self) -> list[int]:
        return sorted(len(self.assignment(n)) for n in self.consumers)

    def covered(self) -> bool:
        held = [self.assignment(n) for n in self.consumers]
        return sum(len(h) for h in held) == PARTITIONS and frozenset().union(*held) == frozenset(
            range(PARTITIONS)
        )

    def commit_all(self) -> None:
        for c in self.consumers.values():
            if c.assignment():
                c.commit(asynchronous=False)

    def close_all(self) -> None:
        for name in list(self.consumers):
            self.close(name)


def _values(start: int, n: int) -> set[str]:
    return {f"v{i}" for i in range(start, start + n)}


def test_members_share_partitions_and_move_them_without_stopping(
    cbroker: BrokerProcess, topic_name: str
) -> None:
    bootstrap = cbroker.bootstrap
    _create_topic(bootstrap, topic_name)
    _produce(bootstrap, topic_name, 0, 60)
    group = f"g-{topic_name}"
    m = Members(bootstrap, group, topic_name)
    m.add("c1")
    m.add("c2")
    m.until(
        lambda: m.covered() and m.split() == [3, 3] and len(set(m.seen)) == 60,
        "two members with 3 each",
    )
    assert set(m.seen) == _values(0, 60)
    before = {n: m.assignment(n) for n in ("c1", "c2")}

    # A third member: partitions move to it, and the others keep theirs meanwhile.
    start = {n: len(m.history[n]) for n in ("c1", "c2")}
    m.add("c3")
    m.until(lambda: m.covered() and m.split() == [2, 2, 2], "three members with 2 each")
    for n in ("c1", "c2"):
        during = m.history[n][start[n] :]
        assert all(held and held <= before[n] for held in during), (n, before[n], during)
    _produce(bootstrap, topic_name, 60, 60)
    m.until(lambda: set(m.seen) >= _values(0, 120), "the next 60 records")

    # One leaves: its partitions go to the two left, who keep what they had.
    kept = {n: m.assignment(n) for n in ("c1", "c2")}
    m.close("c3")
    m.until(lambda: m.covered() and m.split() == [3, 3], "two members again")
    assert all(kept[n] <= m.assignment(n) for n in ("c1", "c2"))
    _produce(bootstrap, topic_name, 120, 30)
    m.until(lambda: set(m.seen) >= _values(0, 150), "the records after the leave")

    # Offsets committed by epoch-checked members (OffsetCommit v9) resume a new member.
    m.commit_all()
    m.close_all()
    _produce(bootstrap, topic_name, 150, 12)
    resumed = Members(bootstrap, group, topic_name)
    resumed.add("c4")
    resumed.until(lambda: set(resumed.seen) >= _values(150, 12), "the records after the commit")
    assert set(resumed.seen) == _values(150, 12)
    resumed.close_all()


def test_describe_lists_the_group_with_its_type_and_assignments(
    cbroker: BrokerProcess, topic_name: str
) -> None:
    bootstrap = cbroker.bootstrap
    _create_topic(bootstrap, topic_name)
    group = f"g-{topic_name}"
    m = Members(bootstrap, group, topic_name)
    m.add("d1")
    m.add("d2")
    m.until(lambda: m.covered() and m.split() == [3, 3], "a stable group")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=10).valid}
    assert listed[group].type == ConsumerGroupType.CONSUMER
    desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
    assert desc.type == ConsumerGroupType.CONSUMER and desc.partition_assignor == "uniform"
    assert str(desc.state).endswith("STABLE")
    by_client = {d.client_id: d for d in desc.members}
    assert set(by_client) == {"d1", "d2"}
    for name, d in by_client.items():
        held = {tp.partition for tp in d.assignment.topic_partitions}
        target = {tp.partition for tp in d.target_assignment.topic_partitions}
        assert held == target == set(m.assignment(name))

    # pylog's own Admin and `pylog groups describe`: the consumer-protocol fields.
    with Admin(bootstrap_servers=bootstrap) as padmin:
        mine = padmin.describe_groups([group])[group]
        listing = {g.group_id: g for g in padmin.list_groups()}
    assert listing[group].group_type == "consumer"
    assert (mine.group_type, mine.state, mine.protocol) == ("consumer", "Stable", "uniform")
    assert mine.group_epoch == mine.assignment_epoch == 2
    for mem in mine.members:
        assert mem.member_epoch == 2 and mem.subscribed_topics == [topic_name]
        assert mem.member_type == "consumer"  # ConsumerGroupDescribe v1
        assert mem.assignment == mem.target_assignment
        assert {tp.partition for tp in mem.assignment} == set(m.assignment(mem.client_id))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pylog",
            "groups",
            "describe",
            group,
            "--members",
            "--verbose",
            "-b",
            bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == [
        "GROUP",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "MEMBER-TYPE",
        "CURRENT-EPOCH",
        "CURRENT-ASSIGNMENT",
        "TARGET-EPOCH",
        "TARGET-ASSIGNMENT",
    ]
    row = next(line.split() for line in lines if " d1 " in line)
    assert row[4:7] == ["3", "consumer", "2"] and row[8] == "2" and row[7] == row[9]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pylog",
            "groups",
            "list",
            "--type",
            "consumer",
            "--state",
            "-b",
            bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()]
    assert rows[0] == ["GROUP", "TYPE", "STATE"] and [group, "consumer", "Stable"] in rows[1:]
    assert all(r[1] == "consumer" for r in rows[1:])
    m.close_all()


def test_the_group_survives_a_broker_restart(
    new_broker: Callable[..., BrokerProcess], topic_name: str
) -> None:
    """kill -9, then a restart: the group comes back from the records its heartbeats wrote."""
    b = new_broker(OVERRIDES).start()
    _create_topic(b.bootstrap, topic_name)
    _produce(b.bootstrap, topic_name, 0, 30)
    group = f"g-{topic_name}"
    m = Members(b.bootstrap, group, topic_name)
    m.add("r1")
    m.add("r2")
    m.until(
        lambda: m.covered() and m.split() == [3, 3] and set(m.seen) >= _values(0, 30),
        "a stable group",
    )

    def epochs() -> tuple[Any, ...]:
        with Admin(bootstrap_servers=b.bootstrap) as padmin:
            d = padmin.describe_groups([group])[group]
        return (
            d.group_epoch,
            d.assignment_epoch,
            sorted((x.member_id, x.member_epoch, tuple(x.assignment)) for x in d.members),
        )

    before = epochs()
    held = {n: m.assignment(n) for n in ("r1", "r2")}
    b.stop(sig=signal.SIGKILL)
    b.start()
    _produce(b.bootstrap, topic_name, 30, 30)
    m.until(lambda: set(m.seen) >= _values(0, 60), "the records after the restart")
    # The members came back at their epochs: same ids, epochs and partitions, no new
    # group epoch (a fenced member would have rejoined and bumped it).
    assert epochs() == before
    assert {n: m.assignment(n) for n in ("r1", "r2")} == held
    assert "loaded" in b.read_log()
    m.close_all()


def test_a_regex_subscription_picks_up_a_new_topic(cbroker: BrokerProcess, topic_name: str) -> None:
    bootstrap = cbroker.bootstrap
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    _create_topic(bootstrap, first)
    _produce(bootstrap, first, 0, 12)
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic_name}",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    c.subscribe([f"^{topic_name}-.*"])
    seen: dict[str, set[str]] = {first: set(), second: set()}

    def read(topic: str, n: int) -> bool:
        msg = c.poll(0.1)
        if msg is not None and msg.error() is None:
            seen[msg.topic()].add(msg.value().decode())
        return len(seen[topic]) >= n

    deadline = time.monotonic() + DEADLINE
    while not read(first, 12):
        assert time.monotonic() < deadline, seen
    _create_topic(bootstrap, second)
    _produce(bootstrap, second, 0, 6)
    while not read(second, 6):
        assert time.monotonic() < deadline, seen
    assert seen == {first: _values(0, 12), second: _values(0, 6)}
    assert {tp.topic for tp in c.assignment()} == {first, second}
    c.close()
