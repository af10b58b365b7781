"""Online migration between the classic and consumer group protocols with real clients:
confluent-kafka consumers (librdkafka) with ``group.protocol=classic`` and
``group.protocol=consumer`` in one group against a pylog broker (``pylog.group.migration``,
``pylog.group.classic_members``).

A producer writes one record per partition every poll round while members are replaced one
at a time; every record must be read (at least once: the union of the offsets read covers
every offset written, so no partition was left stuck), and the group's type must follow:
``consumer`` once a consumer-protocol member joined, ``classic`` again once the last one
left. All consumers are polled from the test thread, one after the other, with the
producer; no state is shared with librdkafka's threads except through the clients' APIs.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from _harness.wire import BrokerConnection

from pylog.client import Admin
from pylog.client import Consumer as PylogConsumer
from pylog.protocol.messages import ConsumerGroupDescribeRequest, FindCoordinatorRequest
from tests.integration.conftest import BrokerProcess, start_target

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka
    from confluent_kafka import ConsumerGroupType, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
}
PARTITIONS = 6
DEADLINE = 60.0
CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
CONSUMER = {"group.protocol": "consumer"}


@pytest.fixture(scope="module")
def mbroker(tmp_path_factory: pytest.TempPathFactory):
    b = start_target(tmp_path_factory, "migration", OVERRIDES)
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


def _create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(timeout=10)


def group_type(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=10).valid}
    return listed[group].type if group in listed else None


class Mixed:
    """Consumers of one group (either protocol) and a producer, driven in rounds from the
    test thread. ``written`` and ``read`` are sets of (partition, offset)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.consumers: dict[str, Any] = {}
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.written: set[tuple[int, int]] = set()
        self.read: set[tuple[int, int]] = set()
        self.failed_commits = 0
        self.errors: list[int] = []  # non-fatal consumer errors seen

    def _delivered(self, err: Any, msg: Any) -> None:
        # Called from producer.poll/flush on the test thread.
        assert err is None, err
        self.written.add((msg.partition(), msg.offset()))

    def add(self, name: str, conf: dict[str, Any]) -> None:
        c = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "client.id": name, **conf})
        c.subscribe([self.topic], on_assign=lambda *a: None, on_revoke=lambda *a: None)
        self.consumers[name] = c

    def close(self, name: str) -> None:
        self.consumers.pop(name).close()

    def produce(self) -> None:
        for p in range(PARTITIONS):
            self.producer.produce(self.topic, value=b"x", partition=p, on_delivery=self._delivered)
        self.producer.poll(0)

    def round(self, produce: bool = True) -> None:
        if produce:
            self.produce()
        for c in self.consumers.values():
            got = False
            msg = c.poll(0.02)
            while msg is not None:
                if msg.error() is not None:
                    # librdkafka reports a JoinGroup answered REBALANCE_IN_PROGRESS (a parked
                    # join when the group converts, as in Kafka) and rejoins; fatal is a failure.
                    assert not msg.error().fatal(), msg.error()
                    self.errors.append(msg.error().code())
                else:
                    self.read.add((msg.partition(), msg.offset()))
                    got = True
                msg = c.poll(0)
            if got:
                try:
                    c.commit(asynchronous=False)
                except KafkaException:
                    # A commit refused during a rebalance (ILLEGAL_GENERATION, REBALANCE_IN_
                    # PROGRESS): the records are read again by their next owner.
                    self.failed_commits += 1

    def until(self, cond: Callable[[], bool], what: str, produce: bool = True) -> None:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            self.round(produce)
            if cond():
                return
        raise AssertionError(f"timed out waiting for {what}: "
                             f"{ {n: sorted(tp.partition for tp in c.assignment()) for n, c in self.consumers.items()} }"
                             f" unread {len(self.written - self.read)}")

    def covered(self) -> bool:
        held = [frozenset(tp.partition for tp in c.assignment()) for c in self.consumers.values()]
        return (sum(len(h) for h in held) == PARTITIONS
                and frozenset().union(*held) == frozenset(range(PARTITIONS)))

    def all_read(self) -> bool:
        self.producer.flush(10)
        return bool(self.written) and self.written <= self.read

    def drain(self, what: str) -> None:
        """Stop producing and wait until every record written was read."""
        assert self.producer.flush(15) == 0
        self.until(self.all_read, f"every record read ({what})", produce=False)

    def close_all(self) -> None:
        for name in list(self.consumers):
            self.close(name)
        # Records still queued hold their delivery callback (this object, which holds the
        # producer): a cycle the garbage collector cannot see into, so librdkafka's threads
        # would outlive the test. Deliver them and drop the producer.
        self.producer.flush(10)
        self.producer = None


def test_members_are_replaced_one_by_one_across_both_protocols(mbroker: BrokerProcess, topic_name: str) -> None:
    bootstrap = mbroker.bootstrap
    _create_topic(bootstrap, topic_name)
    group = f"g-{topic_name}"
    m = Mixed(bootstrap, group, topic_name)
    for i in range(3):
        m.add(f"classic{i}", CLASSIC)
    m.until(m.covered, "three classic members sharing the partitions")
    assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC

    # Upgrade: each classic member is replaced by a consumer-protocol member, while the
    # producer writes and everyone consumes.
    for i in range(3):
        m.add(f"new{i}", CONSUMER)
        m.until(lambda n=f"new{i}": m.covered() and bool(m.consumers[n].assignment()),
                f"new{i} to get partitions")
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        m.close(f"classic{i}")
        m.until(m.covered, f"the partitions of classic{i} to move")
    m.drain("after the upgrade")
    assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER

    # Downgrade: classic members join the consumer group (served there), then the
    # consumer-protocol members leave; when the last leaves the group is classic again.
    for i in range(3, 5):
        m.add(f"classic{i}", CLASSIC)
    m.until(lambda: m.covered() and all(m.consumers[f"classic{i}"].assignment() for i in (3, 4)),
            "the classic members to get partitions in the consumer group")
    assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
    for i in range(3):
        m.close(f"new{i}")
        m.until(m.covered, f"the partitions of new{i} to move")
    m.until(lambda: group_type(bootstrap, group) == ConsumerGroupType.CLASSIC, "the group to be classic again")
    m.until(m.covered, "the classic group to cover the partitions")
    m.drain("after the downgrade")
    with Admin(bootstrap_servers=bootstrap) as padmin:
        d = padmin.describe_groups([group])[group]
    assert (d.state, d.protocol_type) == ("Stable", "consumer")
    assert {x.client_id for x in d.members} == {"classic3", "classic4"}
    m.close_all()


def test_the_policy_disabled_keeps_each_group_its_type(new_broker: Callable[..., BrokerProcess],
                                                       topic_name: str) -> None:
    b = new_broker({**OVERRIDES, "group.consumer.migration.policy": "disabled"}).start()
    _create_topic(b.bootstrap, topic_name)
    group = f"g-{topic_name}"
    m = Mixed(b.bootstrap, group, topic_name)
    m.add("classic0", CLASSIC)
    m.until(m.covered, "the classic member")
    # Kafka refuses the upgrade with GROUP_ID_NOT_FOUND (librdkafka reports it as a
    # consumer error); the classic member keeps its partitions.
    c = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, **CONSUMER})
    c.subscribe([topic_name])
    deadline = time.monotonic() + DEADLINE
    error = None
    while error is None and time.monotonic() < deadline:
        msg = c.poll(0.1)
        if msg is not None and msg.error() is not None:
            error = msg.error()
        m.round()
    c.close()
    # librdkafka makes the heartbeat's GROUP_ID_NOT_FOUND a fatal error of the consumer.
    assert error is not None and error.code() == confluent_kafka.KafkaError._FATAL, error
    assert "The group id does not exist" in error.str(), error
    assert group_type(b.bootstrap, group) == ConsumerGroupType.CLASSIC
    m.drain("with the upgrade refused")
    m.close_all()

    # A consumer group: classic members are served in it (Kafka 4 does, whatever the
    # policy), but when the consumer-protocol member leaves it stays a consumer group.
    group2 = group + "-2"
    m2 = Mixed(b.bootstrap, group2, topic_name)
    m2.add("new0", CONSUMER)
    m2.until(m2.covered, "the consumer member")
    m2.add("classic1", CLASSIC)
    m2.until(lambda: m2.covered() and bool(m2.consumers["classic1"].assignment()), "the classic member")
    m2.close("new0")
    m2.until(m2.covered, "the classic member to take every partition")
    assert group_type(b.bootstrap, group2) == ConsumerGroupType.CONSUMER
    m2.drain("with the downgrade refused")
    m2.close_all()
    assert b.stop() == 0


def test_a_mixed_group_survives_a_broker_restart(new_broker: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = new_broker(OVERRIDES).start()
    _create_topic(b.bootstrap, topic_name)
    group = f"g-{topic_name}"
    m = Mixed(b.bootstrap, group, topic_name)
    # The classic members' session outlasts the restart even on a loaded machine (a broker
    # that takes longer than a 6 s session to come back would rightly expire them, and they
    # would rejoin with new member ids).
    restart_proof = {**CLASSIC, "session.timeout.ms": 30000}
    m.add("classic0", restart_proof)
    m.add("classic1", restart_proof)
    m.until(m.covered, "two classic members")
    m.add("new0", CONSUMER)
    m.until(lambda: m.covered() and all(c.assignment() for c in m.consumers.values()), "a mixed group")

    def members() -> dict[str, tuple[str, int]]:
        with Admin(bootstrap_servers=b.bootstrap) as padmin:
            d = padmin.describe_groups([group])[group]
        return {x.client_id: (x.member_id, x.member_epoch) for x in d.members}

    before = members()
    assert set(before) == {"classic0", "classic1", "new0"}
    b.stop(sig=signal.SIGKILL)
    b.start()
    m.until(lambda: group_type(b.bootstrap, group) == ConsumerGroupType.CONSUMER and m.covered(),
            "the mixed group after the restart")
    # Everyone kept its member id: the group was restored, not rebuilt by new joins.
    assert {n: mid for n, (mid, _e) in members().items()} == {n: mid for n, (mid, _e) in before.items()}
    m.drain("after the restart")
    # And it still downgrades: the consumer member leaves, the classic ones stay.
    m.close("new0")
    m.until(lambda: group_type(b.bootstrap, group) == ConsumerGroupType.CLASSIC and m.covered(),
            "the downgrade after the restart")
    m.drain("after the downgrade")
    m.close_all()
    assert b.stop() == 0


def test_pylog_consumers_on_both_protocols_in_one_group(mbroker: BrokerProcess, topic_name: str) -> None:
    bootstrap = mbroker.bootstrap
    _create_topic(bootstrap, topic_name)
    group = f"g-{topic_name}"
    m = Mixed(bootstrap, group, topic_name)
    for _ in range(3):
        m.produce()
    assert m.producer.flush(10) == 0

    def pylog_consumer(protocol: str) -> PylogConsumer:
        timeouts = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500} if protocol == "classic" else {}
        c = PylogConsumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False, **timeouts})
        c.subscribe([topic_name])
        return c

    read: set[tuple[int, int]] = set()

    def poll(cs: list[PylogConsumer]) -> None:
        for c in cs:
            for rec in c.poll(0.05):
                read.add((rec.partition, rec.offset))
            if c.assignment():
                try:
                    c.commit()
                except Exception:  # noqa: BLE001 - a commit refused in a rebalance is retried by the next owner
                    pass

    def until(cs: list[PylogConsumer], cond: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            poll(cs)
            if cond():
                return
        raise AssertionError(f"timed out waiting for {what}: {[sorted(c.assignment()) for c in cs]}")

    def covers(cs: list[PylogConsumer]) -> bool:
        held = [{tp.partition for tp in c.assignment()} for c in cs]
        return sum(map(len, held)) == PARTITIONS and set().union(*held) == set(range(PARTITIONS))

    classic = pylog_consumer("classic")
    until([classic], lambda: covers([classic]), "the classic pylog consumer")
    modern = pylog_consumer("consumer")
    both = [classic, modern]
    until(both, lambda: covers(both) and bool(modern.assignment()) and bool(classic.assignment()),
          "both pylog consumers to hold partitions")
    assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
    for _ in range(3):
        m.produce()
    assert m.producer.flush(10) == 0
    until(both, lambda: m.written <= read, "every record")
    modern.close()
    until([classic], lambda: covers([classic]) and group_type(bootstrap, group) == ConsumerGroupType.CLASSIC,
          "the downgrade")
    classic.close()


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(
        mbroker: BrokerProcess, topic_name: str) -> None:
    """Kafka's downgrade by replacement: the consumer-protocol static member leaves for a
    while (epoch -2, it keeps its place) and a classic consumer with the same
    group.instance.id takes its place: the group is classic at once, Stable, with every
    partition covered (without the downgrade it would stay a consumer group of classic
    members: nothing else converts it)."""
    bootstrap = mbroker.bootstrap
    _create_topic(bootstrap, topic_name)
    group = f"g-{topic_name}"
    m = Mixed(bootstrap, group, topic_name)
    m.add("classic0", CLASSIC)
    m.until(m.covered, "the classic member")
    m.add("new0", {**CONSUMER, "group.instance.id": "i1"})
    m.until(lambda: m.covered() and all(c.assignment() for c in m.consumers.values()), "a mixed group")
    assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
    m.close("new0")
    m.add("classic-i1", {**CLASSIC, "group.instance.id": "i1"})
    m.until(lambda: group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
            and m.covered() and all(c.assignment() for c in m.consumers.values()),
            "the classic static member to replace the consumer one and the group to be classic")
    m.drain("after the downgrade by replacement")
    with Admin(bootstrap_servers=bootstrap) as padmin:
        d = padmin.describe_groups([group])[group]
    assert (d.state, d.protocol_type) == ("Stable", "consumer")
    assert {x.client_id for x in d.members} == {"classic0", "classic-i1"}
    m.close_all()


def _coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)  # any broker answers FindCoordinator
    with BrokerConnection(host, int(port), timeout=10) as conn:
        r = conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), version=4)
    (c,) = r.coordinators
    assert c.error_code == 0, c
    return c.host, c.port


def test_consumer_group_describe_v1_tells_classic_members_from_consumer_members(
        mbroker: BrokerProcess, topic_name: str) -> None:
    """KIP-1099's MemberType in ConsumerGroupDescribe v1: in a group upgraded online, the
    member that joined with JoinGroup is 0 (classic), the consumer-protocol one 1; v0 has
    no such field. pylog's admin client and ``pylog groups describe --members --verbose``
    show it; confluent-kafka's AdminClient describes the group too (librdkafka 2.16 sends
    ConsumerGroupDescribe v0: its describe result has no member type)."""
    bootstrap = mbroker.bootstrap
    _create_topic(bootstrap, topic_name)
    group = f"g-{topic_name}"
    m = Mixed(bootstrap, group, topic_name)
    m.add("old", CLASSIC)
    m.until(m.covered, "the classic member")
    m.add("new", CONSUMER)
    m.until(lambda: m.covered() and all(c.assignment() for c in m.consumers.values()),
            "both members to hold partitions")
    try:
        # Raw requests through pylog's codec, at both versions.
        host, port = _coordinator(bootstrap, group)
        with BrokerConnection(host, port, timeout=10) as conn:
            body = ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)
            v1 = conn.request(body, version=1).groups[0]
            v0 = conn.request(body, version=0).groups[0]
        assert v1.error_code == 0 and v0.error_code == 0
        assert {x.client_id: x.member_type for x in v1.members} == {"old": 0, "new": 1}
        assert {x.member_type for x in v0.members} == {-1}  # not in v0: the default
        # pylog's admin client and CLI
        with Admin(bootstrap_servers=bootstrap) as admin:
            desc = admin.describe_groups([group])[group]
        assert desc.group_type == "consumer"
        assert {x.client_id: x.member_type for x in desc.members} == {"old": "classic", "new": "consumer"}
        out = subprocess.run([sys.executable, "-m", "pylog", "groups", "describe", group, "--members",
                              "--verbose", "-b", bootstrap], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        col = lines[0].split().index("MEMBER-TYPE")
        assert {ln.split()[3]: ln.split()[col] for ln in lines[1:] if ln.strip()} == {
            "old": "classic", "new": "consumer"}
        # confluent-kafka's AdminClient, with the version librdkafka chose from the log
        seen: list[str] = []

        class _Log(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                seen.append(record.getMessage())

        logger = logging.getLogger(f"rdkafka-{group}")
        handler = _Log()
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        admin_c = AdminClient({"bootstrap.servers": bootstrap, "debug": "protocol", "logger": logger})
        try:
            res = admin_c.describe_consumer_groups([group])[group].result(timeout=30)
            admin_c.poll(0)  # serve the log queue on this thread
        finally:
            # The logging module keeps the logger; its handler goes. librdkafka's threads
            # end when the client is freed.
            logger.removeHandler(handler)
            del admin_c
        assert res.type == ConsumerGroupType.CONSUMER
        assert sorted(x.client_id for x in res.members) == ["new", "old"]
        sent = [s for s in seen if "ConsumerGroupDescribeRequest" in s and "Sent" in s]
        assert sent, "librdkafka did not log its ConsumerGroupDescribe"
        assert "(v0," in sent[0], sent[0]  # librdkafka 2.16's highest; pylog advertises 0-1
    finally:
        m.close_all()
