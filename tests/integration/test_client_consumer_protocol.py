"""pylog.client's Consumer on the consumer group protocol (KIP-848, ``group.protocol=consumer``)
against a pylog broker: members share partitions and every record is read once, a member
leaving or dying moves only its partitions, static members, regex subscriptions, a group
mixed with confluent-kafka, commits with a stale epoch, transactions, the asyncio Consumer
and the fatal errors.

The broker runs with a 500 ms heartbeat interval and a 10 s session timeout (below Kafka's
minimums, lowered here) so that reconciliation takes tenths of a second.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from pylog import errors
from pylog.client import (
    AbortableTransactionError,
    Admin,
    CommitFailedError,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
    aio,
)
from tests.integration.conftest import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka

OVERRIDES = {
    "auto.create.topics.enable": "true",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "3",
}
PARTITIONS = 6
DEADLINE = 45.0
MEMBER = {"group.protocol": "consumer", "auto.offset.reset": "earliest"}


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("kip848-client") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)])


def produce(bootstrap: str, topic: str, n: int, start: int = 0, partitions: int = PARTITIONS) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for i in range(start, start + n):
            p.send(topic, b"v%d" % i, key=b"%d" % i, partition=i % partitions)
        p.flush(30)


def wait_for(cond: Callable[[], bool], what: str, timeout: float = DEADLINE,
             state: Callable[[], object] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f": {state()}" if state else ""))


def group_epoch(bootstrap: str, group: str) -> int:
    with Admin(bootstrap_servers=bootstrap) as admin:
        desc = admin.describe_groups([group])[group]
    assert desc.group_type == "consumer", desc
    return int(desc.group_epoch)


class Member:
    """A pylog consumer of the group polling in its own thread, committing after every
    batch. ``consumed`` has each record (topic, partition, offset) it was handed,
    ``uncommitted`` the records of batches whose commit failed (only those may be read
    again by another member), ``history`` its assignment after each poll, ``events`` the
    callbacks."""

    def __init__(self, bootstrap: str, group: str, topics: Any = None, *, pattern: str | None = None,
                 commit: bool = True, **conf: Any) -> None:
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, **MEMBER,
                     "enable.auto.commit": False, **conf}
        self.topics, self.pattern, self.commit = topics, pattern, commit
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.history: list[frozenset[TopicPartition]] = []
        self.consumed: list[tuple[str, int, int]] = []
        self.uncommitted: set[tuple[str, int, int]] = set()
        self.events: list[tuple[str, list[TopicPartition]]] = []
        self.metadata: Any = None
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("assigned", partitions))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("lost", partitions))

    def _run(self) -> None:
        try:
            with Consumer(self.conf) as c:
                if self.pattern is not None:
                    c.subscribe(pattern=self.pattern, listener=self)
                else:
                    c.subscribe(self.topics, listener=self)
                while not self.stop.is_set():
                    batch = c.poll(0.2)
                    self.assignment = frozenset(c.assignment())
                    if not self.history or self.history[-1] != self.assignment:
                        self.history.append(self.assignment)
                    self.metadata = c.consumer_group_metadata()
                    self.consumed += [(r.topic, r.partition, r.offset) for r in batch]
                    if batch and self.commit:
                        try:
                            c.commit()
                        except (CommitFailedError, errors.RebalanceInProgressError):
                            self.uncommitted |= {(r.topic, r.partition, r.offset) for r in batch}
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            self.error = exc

    def partitions(self) -> list[int]:
        return sorted(tp.partition for tp in self.assignment)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(DEADLINE)
        assert not self.thread.is_alive(), "member did not stop"
        if self.error is not None:
            raise self.error


def balanced(members: list[Member], partitions: int = PARTITIONS) -> bool:
    for m in members:
        if m.error is not None:
            raise m.error
    sets = [m.assignment for m in members]
    if any(not s for s in sets):
        return False
    return len(frozenset().union(*sets)) == partitions and sum(len(s) for s in sets) == partitions


def split(members: list[Member]) -> list[list[int]]:
    return [m.partitions() for m in members]


def check_once(members: list[Member], topic: str, n: int) -> None:
    counts = collections.Counter(r for m in members for r in m.consumed)
    assert set(counts) == {(topic, i % PARTITIONS, i // PARTITIONS) for i in range(n)}
    repeated = {r for r, c in counts.items() if c > 1}
    allowed = set().union(*(m.uncommitted for m in members))
    assert repeated <= allowed, f"records read twice although committed: {sorted(repeated - allowed)[:10]}"


def test_three_members_share_six_partitions_and_read_every_record_once(
        kbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(kbroker.bootstrap, topic_name)
    n = 600
    produce(kbroker.bootstrap, topic_name, n // 2)
    group = f"g-{topic_name}"
    members: list[Member] = []
    try:
        marks: list[int] = []
        for _ in range(3):
            marks = [len(m.history) for m in members]
            members.append(Member(kbroker.bootstrap, group, [topic_name]))
            wait_for(lambda: balanced(members), f"{len(members)} members to share 6 partitions",
                     state=lambda: split(members))
        wait_for(lambda: all(len(m.assignment) == 2 for m in members), "2 partitions each",
                 state=lambda: split(members))
        # The third member's join took from the other two only what moved: each kept the
        # partitions it ends with all along (no stop-the-world).
        for m, mark in zip(members[:2], marks, strict=True):
            assert all(m.assignment <= h for h in m.history[mark - 1:]), (m.assignment, m.history)
        produce(kbroker.bootstrap, topic_name, n // 2, start=n // 2)
        wait_for(lambda: len({r for m in members for r in m.consumed}) >= n, f"all {n} records",
                 state=lambda: len({r for m in members for r in m.consumed}))
        time.sleep(0.5)
        for m in members:  # the member epoch is the generation a transaction names
            assert m.metadata.group_id == group and m.metadata.generation_id > 0
            assert m.metadata.member_id and len(m.metadata.member_id) == 22
    finally:
        for m in members:
            m.close()
    check_once(members, topic_name, n)
    for m in members:
        assert any(kind == "assigned" and parts for kind, parts in m.events), m.events
        assert not any(kind == "lost" for kind, _ in m.events), m.events
    with Admin(bootstrap_servers=kbroker.bootstrap) as admin:
        committed = admin.list_group_offsets(group)
    assert sum(om.offset for om in committed.values()) == n


def test_a_member_leaving_moves_only_its_partitions(kbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(kbroker.bootstrap, topic_name)
    produce(kbroker.bootstrap, topic_name, 120)
    group = f"g-{topic_name}"
    members = [Member(kbroker.bootstrap, group, [topic_name]) for _ in range(3)]
    try:
        wait_for(lambda: balanced(members) and all(len(m.assignment) == 2 for m in members),
                 "3 members with 2 partitions each", state=lambda: split(members))
        stayers, leaver = members[:2], members[2]
        before = [m.assignment for m in stayers]
        marks = [len(m.history) for m in stayers]
        events = [len(m.events) for m in stayers]
        leaver_held = leaver.assignment
        leaver.close()
        wait_for(lambda: balanced(stayers), "the 2 others to take over the leaver's partitions",
                 state=lambda: split(stayers))
        produce(kbroker.bootstrap, topic_name, 120, start=120)
        wait_for(lambda: len({r for m in members for r in m.consumed}) >= 240, "all 240 records")
        for m, held, mark, ev in zip(stayers, before, marks, events, strict=True):
            # No stop-the-world: each kept what it had at every step, and gave up nothing.
            assert all(held <= h for h in m.history[mark:]), (held, m.history[mark:])
            assert not any(kind in ("revoked", "lost") for kind, _ in m.events[ev:]), m.events[ev:]
        # The leaver gave its partitions up through its revoke callback.
        assert ("revoked", sorted(leaver_held, key=lambda tp: tp.partition)) in leaver.events
    finally:
        for m in members[:2]:
            m.close()
    check_once(members, topic_name, 240)


_KILLED_MEMBER = """
import sys, time
from pylog.client import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.2)
    if c.assignment():
        print("ASSIGNED", ",".join(str(tp.partition) for tp in sorted(c.assignment())), flush=True)
"""


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(
        kbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(kbroker.bootstrap, topic_name)
    group = f"g-{topic_name}"
    survivor = Member(kbroker.bootstrap, group, [topic_name])
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_MEMBER, kbroker.bootstrap, group, topic_name],
                            stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any(line.startswith("ASSIGNED") for line in lines) or proc.poll() is not None,
                 "the other process to get partitions")
        assert proc.poll() is None, f"the member process exited with {proc.returncode}"
        wait_for(lambda: len(survivor.assignment) == 3, "the survivor to hold 3 partitions",
                 state=lambda: survivor.partitions())
        held = survivor.assignment
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed_at = time.monotonic()
        wait_for(lambda: len(survivor.assignment) == PARTITIONS, "the survivor to take all 6",
                 state=lambda: survivor.partitions())
        took = time.monotonic() - killed_at
        # The coordinator waits for the session timeout (10 s) before it gives them away.
        assert took > 5.0, took
        assert all(held <= h for h in survivor.history if len(h) >= 3)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(10)
        if proc.stdout:
            proc.stdout.close()
        survivor.close()


def test_a_static_member_rejoins_without_a_rebalance(kbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(kbroker.bootstrap, topic_name)
    group = f"g-{topic_name}"
    a = Member(kbroker.bootstrap, group, [topic_name], **{"group.instance.id": "a"})
    b = Member(kbroker.bootstrap, group, [topic_name], **{"group.instance.id": "b"})
    a2 = None
    try:
        wait_for(lambda: balanced([a, b]) and len(a.assignment) == 3, "a and b with 3 each",
                 state=lambda: split([a, b]))
        epoch = group_epoch(kbroker.bootstrap, group)
        held_a, b_events = a.assignment, len(b.events)
        a.close()  # leaves with epoch -2: its partitions wait for it (the session timeout)
        time.sleep(0.5)
        assert b.assignment == frozenset(b.history[-1]) and len(b.assignment) == 3
        a2 = Member(kbroker.bootstrap, group, [topic_name], **{"group.instance.id": "a"})
        wait_for(lambda: a2.assignment == held_a, "the new instance a to get a's partitions",
                 timeout=9.0, state=lambda: split([a2, b]))
        assert group_epoch(kbroker.bootstrap, group) == epoch, "static rejoin bumped the group epoch"
        assert b.events[b_events:] == [], b.events[b_events:]
        # Another consumer claiming a live instance id is refused.
        with Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, **MEMBER,
                       "group.instance.id": "b"}) as dup:
            dup.subscribe([topic_name])
            with pytest.raises(errors.UnreleasedInstanceIdError):
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    dup.poll(0.2)
    finally:
        if a2 is not None:
            a2.close()
        b.close()


def test_a_regex_subscription_picks_up_a_new_topic(kbroker: BrokerProcess, topic_name: str) -> None:
    prefix = f"rx-{topic_name}"
    create_topic(kbroker.bootstrap, f"{prefix}-a", 2)
    produce(kbroker.bootstrap, f"{prefix}-a", 10, partitions=2)
    m = Member(kbroker.bootstrap, f"g-{topic_name}", pattern=f"{prefix}-.*")
    try:
        wait_for(lambda: len(m.consumed) >= 10, "the first topic's records",
                 state=lambda: (m.partitions(), len(m.consumed)))
        create_topic(kbroker.bootstrap, f"{prefix}-b", 2)
        produce(kbroker.bootstrap, f"{prefix}-b", 10, partitions=2)
        wait_for(lambda: {tp.topic for tp in m.assignment} == {f"{prefix}-a", f"{prefix}-b"},
                 "the new topic's partitions", state=lambda: sorted(m.assignment))
        wait_for(lambda: sum(1 for t, _, _ in m.consumed if t == f"{prefix}-b") >= 10,
                 "the new topic's records")
    finally:
        m.close()


def test_a_changed_subscription_reaches_the_broker(kbroker: BrokerProcess, topic_name: str) -> None:
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(kbroker.bootstrap, a, 2)
    create_topic(kbroker.bootstrap, b, 2)
    events: list[tuple[str, list[TopicPartition]]] = []
    with Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": f"g-{topic_name}",
                   **MEMBER}) as c:

        def topics() -> set[str]:
            return {tp.topic for tp in c.assignment()}

        def until(cond: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + DEADLINE
            while not cond() and time.monotonic() < deadline:
                c.poll(0.1)
            assert cond(), f"{what}: {sorted(c.assignment())}"

        callbacks = {"on_assign": lambda _c, p: events.append(("assigned", p)),
                     "on_revoke": lambda _c, p: events.append(("revoked", p))}
        c.subscribe([a], **callbacks)
        until(lambda: topics() == {a}, "the first topic")
        c.subscribe([a, b], **callbacks)  # sent with the next heartbeat
        until(lambda: topics() == {a, b}, "both topics")
        c.subscribe([b], **callbacks)
        until(lambda: topics() == {b}, "the second topic only")
    assert ("revoked", [TopicPartition(a, 0), TopicPartition(a, 1)]) in events, events
    assert ("assigned", [TopicPartition(b, 0), TopicPartition(b, 1)]) in events, events


def test_a_group_of_pylog_and_confluent_kafka_members(kbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(kbroker.bootstrap, topic_name)
    n = 300
    produce(kbroker.bootstrap, topic_name, n)
    group = f"g-{topic_name}"
    ours = Member(kbroker.bootstrap, group, [topic_name])
    theirs = confluent_kafka.Consumer({
        "bootstrap.servers": kbroker.bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    theirs_seen: list[tuple[str, int, int]] = []
    try:
        theirs.subscribe([topic_name], on_assign=lambda *a: None, on_revoke=lambda *a: None)
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            msg = theirs.poll(0.1)
            if msg is not None and msg.error() is None:
                theirs_seen.append((msg.topic(), msg.partition(), msg.offset()))
                theirs.commit(message=msg, asynchronous=False)
            held = {tp.partition for tp in theirs.assignment()}
            if (len(held) == 3 and len(ours.assignment) == 3
                    and len(set(theirs_seen) | set(ours.consumed)) >= n):
                break
        assert len(ours.assignment) == 3 and len({tp.partition for tp in theirs.assignment()}) == 3, \
            (ours.partitions(), theirs.assignment())
        assert not (ours.assignment & {TopicPartition(tp.topic, tp.partition) for tp in theirs.assignment()})
        assert len(set(theirs_seen) | set(ours.consumed)) == n
    finally:
        theirs.close()
        ours.close()


def test_commits_with_a_stale_epoch_are_fenced(kbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(kbroker.bootstrap, topic_name, 2)
    produce(kbroker.bootstrap, topic_name, 20, partitions=2)
    group = f"g-{topic_name}"
    tp0 = TopicPartition(topic_name, 0)
    with Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, **MEMBER,
                   "enable.auto.commit": False}) as c, \
            Producer({"bootstrap.servers": kbroker.bootstrap, "transactional.id": f"tx-{topic_name}"}) as p:
        c.subscribe([topic_name])
        deadline = time.monotonic() + DEADLINE
        while len(c.assignment()) < 2 and time.monotonic() < deadline:
            c.poll(0.2)
        old = c.consumer_group_metadata()
        assert old.generation_id > 0
        # A second member joins: the first moves to a newer epoch as it gives one up.
        other = Member(kbroker.bootstrap, group, [topic_name])
        try:
            deadline = time.monotonic() + DEADLINE
            while time.monotonic() < deadline:
                c.poll(0.2)
                if c.consumer_group_metadata().generation_id > old.generation_id and other.assignment:
                    break
            new = c.consumer_group_metadata()
            assert new.generation_id > old.generation_id, (old, new)
            # The consumer's own commits name its current epoch and go through.
            c.commit({tp: 1 for tp in c.assignment()})
            # Offsets sent with the old epoch (a zombie's) are refused: STALE_MEMBER_EPOCH.
            p.init_transactions(30)
            p.begin_transaction()
            with pytest.raises(AbortableTransactionError) as info:
                p.send_offsets_to_transaction({tp0: 5}, old, 30)
            assert isinstance(info.value.error, CommitFailedError)
            assert "STALE_MEMBER_EPOCH" in str(info.value)
            p.abort_transaction(30)
        finally:
            other.close()


def test_a_member_that_stops_polling_leaves_and_its_commit_fails(kbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(kbroker.bootstrap, topic_name, 2)
    produce(kbroker.bootstrap, topic_name, 10, partitions=2)
    group = f"g-{topic_name}"
    lost: list[list[TopicPartition]] = []
    with Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, **MEMBER,
                   "enable.auto.commit": False, "max.poll.interval.ms": 2000}) as c:
        c.subscribe([topic_name], on_lost=lambda _c, parts: lost.append(parts))
        got: list[Any] = []
        deadline = time.monotonic() + DEADLINE
        while len(got) < 10 and time.monotonic() < deadline:
            got += c.poll(0.2)
        assert len(got) == 10
        time.sleep(4.0)  # over max.poll.interval.ms: the member leaves the group
        with pytest.raises(CommitFailedError):
            c.commit({TopicPartition(topic_name, 0): 5})
        # The next poll loses the partitions and joins again.
        deadline = time.monotonic() + DEADLINE
        while not (lost and len(c.assignment()) == 2) and time.monotonic() < deadline:
            c.poll(0.2)
        assert lost and sorted(lost[0]) == [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
        assert len(c.assignment()) == 2
        c.commit({TopicPartition(topic_name, 0): 5})


def test_members_carry_on_through_a_broker_restart(new_broker: Callable[..., BrokerProcess],
                                                  topic_name: str) -> None:
    b = new_broker(OVERRIDES).start()
    create_topic(b.bootstrap, topic_name)
    produce(b.bootstrap, topic_name, 60)
    group = f"g-{topic_name}"
    members = [Member(b.bootstrap, group, [topic_name]) for _ in range(2)]
    try:
        wait_for(lambda: balanced(members) and len({r for m in members for r in m.consumed}) >= 60,
                 "2 members to share the partitions and read 60 records", state=lambda: split(members))
        held = [m.assignment for m in members]
        epochs = [m.metadata.generation_id for m in members]
        b.stop(sig=signal.SIGKILL)
        b.start()
        # The coordinator reloads the group from __consumer_offsets; the members find it
        # again, resend their full state and carry on at their epochs, losing nothing.
        produce(b.bootstrap, topic_name, 60, start=60)
        wait_for(lambda: len({r for m in members for r in m.consumed}) >= 120, "all 120 records",
                 state=lambda: len({r for m in members for r in m.consumed}))
        assert [m.assignment for m in members] == held
        assert [m.metadata.generation_id for m in members] == epochs
        assert not any(kind == "lost" for m in members for kind, _ in m.events)
    finally:
        for m in members:
            m.close()
    check_once(members, topic_name, 120)


def test_consume_transform_produce_on_the_consumer_protocol(kbroker: BrokerProcess, topic_name: str) -> None:
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(kbroker.bootstrap, src, 2)
    create_topic(kbroker.bootstrap, dst, 2)
    produce(kbroker.bootstrap, src, 20, partitions=2)
    group = f"g-{topic_name}"
    with Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, **MEMBER,
                   "enable.auto.commit": False, "isolation.level": "read_committed"}) as c, \
            Producer({"bootstrap.servers": kbroker.bootstrap, "transactional.id": f"tx-{topic_name}"}) as p:
        p.init_transactions(30)
        c.subscribe([src])
        done = 0
        deadline = time.monotonic() + DEADLINE
        while done < 20 and time.monotonic() < deadline:
            batch = c.poll(0.5)
            if not batch:
                continue
            p.begin_transaction()
            for r in batch:
                p.send(dst, (r.value or b"").upper(), partition=r.partition)
            p.send_offsets_to_transaction({TopicPartition(r.topic, r.partition): r.offset + 1
                                           for r in batch}, c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            done += len(batch)
        assert done == 20
        committed = c.committed([TopicPartition(src, 0), TopicPartition(src, 1)])
        assert {tp.partition: om.offset for tp, om in committed.items() if om} == {0: 10, 1: 10}
    with Consumer({"bootstrap.servers": kbroker.bootstrap, "auto.offset.reset": "earliest",
                   "isolation.level": "read_committed"}) as reader:
        reader.assign([TopicPartition(dst, 0), TopicPartition(dst, 1)])
        out: list[bytes] = []
        deadline = time.monotonic() + DEADLINE
        while len(out) < 20 and time.monotonic() < deadline:
            out += [r.value for r in reader.poll(0.5)]
    assert sorted(out) == sorted(b"V%d" % i for i in range(20))


def test_asyncio_consumers_share_a_group(kbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(kbroker.bootstrap, topic_name)
    produce(kbroker.bootstrap, topic_name, 60)
    group = f"g-{topic_name}"

    async def main() -> None:
        events: dict[int, list[str]] = {0: [], 1: []}
        seen: list[tuple[int, int]] = []
        consumers = [aio.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group,
                                   **MEMBER}) for _ in range(2)]
        try:
            for i, c in enumerate(consumers):
                async def on_assign(_c: Any, parts: list[TopicPartition], i: int = i) -> None:
                    await asyncio.sleep(0)
                    events[i].append(f"assigned {len(parts)}")
                await c.subscribe([topic_name], on_assign=on_assign)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE
            while loop.time() < deadline:
                for c in consumers:
                    seen.extend((r.partition, r.offset) for r in await c.poll(0.1))
                if len(set(seen)) >= 60 and all(len(c.assignment()) == 3 for c in consumers):
                    break
            assert [len(c.assignment()) for c in consumers] == [3, 3]
            assert len(set(seen)) == 60
            assert all(events[i] for i in events), events
        finally:
            for c in consumers:
                await c.close()

    asyncio.run(asyncio.wait_for(main(), 90))


def test_fatal_heartbeat_errors_surface_from_poll(kbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(kbroker.bootstrap, topic_name, 1)
    base = {"bootstrap.servers": kbroker.bootstrap, "group.id": f"g-{topic_name}", **MEMBER}
    with Consumer({**base, "group.remote.assignor": "no-such-assignor"}) as c:
        c.subscribe([topic_name])
        with pytest.raises(errors.UnsupportedAssignorError, match="no-such-assignor"):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                c.poll(0.2)
    with Consumer({**base, "group.id": f"g2-{topic_name}"}) as c:
        c.subscribe(pattern="^(?=x)abc")  # lookahead: RE2/J has none, the broker refuses it
        with pytest.raises(errors.InvalidRegularExpressionError):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                c.poll(0.2)
    with Consumer({**base, "group.id": f"g3-{topic_name}", "group.remote.assignor": "range"}) as c:
        c.subscribe([topic_name])
        deadline = time.monotonic() + DEADLINE
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment() == {TopicPartition(topic_name, 0)}
        with Admin(bootstrap_servers=kbroker.bootstrap) as admin:
            desc = admin.describe_groups([f"g3-{topic_name}"])[f"g3-{topic_name}"]
        assert desc.group_type == "consumer" and desc.protocol == "range"


def test_embedded_consumers_share_a_group(tmp_path: Any) -> None:
    """Embedded mode (``log.dir``): the in-process coordinator serves the protocol too."""
    conf = {"log.dir": str(tmp_path / "data"),
            "broker.config": {"num.partitions": 4, "group.consumer.heartbeat.interval.ms": 500,
                              "group.consumer.min.heartbeat.interval.ms": 100}}
    with Producer(conf) as p:
        for i in range(40):
            p.send("embedded", b"v%d" % i, partition=i % 4)
        p.flush(30)
        consumers = [Consumer({**conf, "group.id": "g", **MEMBER}) for _ in range(2)]
        try:
            for c in consumers:
                c.subscribe(["embedded"])
            seen: set[tuple[int, int]] = set()
            deadline = time.monotonic() + DEADLINE
            while time.monotonic() < deadline:
                for c in consumers:
                    seen |= {(r.partition, r.offset) for r in c.poll(0.1)}
                if len(seen) == 40 and all(len(c.assignment()) == 2 for c in consumers):
                    break
            assert len(seen) == 40
            assert sorted(len(c.assignment()) for c in consumers) == [2, 2]
            assert all(c.consumer_group_metadata().generation_id > 0 for c in consumers)
        finally:
            for c in consumers:
                c.close()
