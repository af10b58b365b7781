"""Closing a group consumer, in both modes (a broker subprocess over TCP, and embedded
mode on a data directory of this process), with the same broker settings:

- a revoke callback that commits (Kafka's ``commitSync`` in ``onPartitionsRevoked``) runs
  inside ``close`` and its commit lands, also while the group is rebalancing, with the
  blocking and the asyncio consumer; ``close``'s timeout bounds that commit;
- a member whose JoinGroup is still parked on the coordinator (the other members have not
  rejoined yet) closes at once: it leaves on a new connection instead of queueing its
  LeaveGroup behind the JoinGroup for the rebalance timeout; ``close(timeout=0)`` waits for
  nothing and still leaves;
- a revoke callback that commits after a pattern-subscribed topic was deleted does not
  hang the rebalance (the deleted topic's positions are left out of the commit);
- a live member closed at any moment of its broker's restart (down, starting, back,
  rejoining) returns within close's timeout plus its connections' close.
"""

from __future__ import annotations

import asyncio
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from pylog.client import Admin, Consumer, KafkaTimeoutError, NewTopic, Producer, TopicPartition, aio
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

BROKER = {
    "num.partitions": "2",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "3",
}
MEMBER = {"auto.offset.reset": "earliest", "enable.auto.commit": False,
          "session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
# Kafka's default close timeout is 30 s: a close that waited for a parked JoinGroup (or
# for a commit retried until default.api.timeout.ms) takes at least that long.
PROMPT = 12.0


class Target:
    def __init__(self, mode: str, settings: dict[str, Any]) -> None:
        self.mode = mode
        self.settings = settings

    def cfg(self, **extra: Any) -> dict[str, Any]:
        return {**self.settings, **extra}


@pytest.fixture(scope="module", params=["network", "embedded"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if request.param == "network":
        data = tmp_path_factory.mktemp("close-network") / "data"
        data.mkdir()
        b = BrokerProcess(data, BROKER).start()
        yield Target("network", {"bootstrap.servers": b.bootstrap})
        rc = b.stop()
        assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"
        return
    data = tmp_path_factory.mktemp("close-embedded") / "data"
    with Admin({"log.dir": str(data), "broker.config": BROKER}) as keep_open:
        yield Target("embedded", {"log.dir": str(data), "broker.config": BROKER})
        assert keep_open.list_topics() is not None


def _setup(settings: dict[str, Any], topic: str, per_partition: int, partitions: int = 2) -> None:
    with Admin(settings) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    with Producer(settings) as p:
        for i in range(per_partition * partitions):
            p.send(topic, b"v%d" % i, partition=i % partitions)
        p.flush(30)


def _wait(cond: Callable[[], bool], what: str, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _drain(c: Consumer, n: int, timeout: float = 45.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"got {len(out)} of {n} records"
        out.extend(c.poll(0.2))
    return out


def _committed(settings: dict[str, Any], group: str) -> dict[TopicPartition, int]:
    with Admin(settings) as admin:
        return {tp: om.offset for tp, om in admin.list_group_offsets(group).items() if om is not None}


def _group_state(settings: dict[str, Any], group: str) -> tuple[str, list[str]]:
    with Admin(settings) as admin:
        d = admin.describe_groups([group])[group]
    return d.state, sorted(m.client_id for m in d.members)


class CommitOnRevoke:
    """kafka-python's listener style; commits the consumed positions when partitions go."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.events: list[tuple[str, list[TopicPartition]]] = []
        self.commits: list[Any] = []

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("assigned", partitions))

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("revoked", partitions))
        if partitions:
            assert self.consumer is not None
            try:
                self.commits.append(self.consumer.commit())
            except Exception as exc:  # noqa: BLE001 - the test looks at it
                self.commits.append(exc)
                raise


def _offsets(committed: Any) -> dict[TopicPartition, int]:
    return {tp: om.offset for tp, om in committed.items()}


def _member(target: Target, group: str, topic: Any, client_id: str,
            listener: Any = None, **extra: Any) -> Consumer:
    c = Consumer(target.cfg(**{"group.id": group, "client.id": client_id, **MEMBER, **extra}))
    if isinstance(listener, CommitOnRevoke):
        listener.consumer = c
    if isinstance(topic, re.Pattern):
        c.subscribe(pattern=topic, listener=listener)
    else:
        c.subscribe([topic], listener=listener)
    return c


def test_commit_in_the_revoke_callback_during_close(target: Target, topic_name: str) -> None:
    _setup(target.cfg(), topic_name, 10)
    group = f"g-{topic_name}"
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    listener = CommitOnRevoke()
    c = _member(target, group, topic_name, "a", listener)
    try:
        assert len(_drain(c, 20)) == 20
    finally:
        start = time.monotonic()
        c.close()
        took = time.monotonic() - start
    assert listener.events == [("assigned", tps), ("revoked", tps)]
    assert [_offsets(x) for x in listener.commits] == [{tp: 10 for tp in tps}]
    assert took < PROMPT
    assert _committed(target.cfg(), group) == {tp: 10 for tp in tps}


def test_commit_in_the_revoke_callback_during_close_while_the_group_rebalances(
        target: Target, topic_name: str) -> None:
    """The member closes after another one joined and before it rejoined itself: the
    group is rebalancing, its generation still stands, so its commit lands; the newcomer
    then starts exactly there."""
    _setup(target.cfg(), topic_name, 30)
    group = f"g-{topic_name}"
    listener = CommitOnRevoke()
    a = _member(target, group, topic_name, "a", listener)
    b = None
    thread = None
    stop = threading.Event()
    b_got: list[Any] = []
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 45
        while len(got) < 12:  # some records, far from all 60
            assert time.monotonic() < deadline
            got += a.poll(0.2, max_records=4)
        tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
        consumed = {tp: a.position(tp) for tp in tps}
        assert sum(consumed.values()) == len(got)
        b = _member(target, group, topic_name, "b")

        def poll_b() -> None:
            while not stop.is_set():
                b_got.extend(b.poll(0.2))

        thread = threading.Thread(target=poll_b, daemon=True)
        thread.start()
        _wait(lambda: _group_state(target.cfg(), group)[0] == "PreparingRebalance",
              "b's JoinGroup to start a rebalance")
        start = time.monotonic()
        a.close()
        assert time.monotonic() - start < PROMPT
        assert _offsets(listener.commits[-1]) == consumed
        assert _committed(target.cfg(), group) == consumed
        _wait(lambda: {TopicPartition(r.topic, r.partition) for r in b_got} == set(tps),
              "b to read both partitions")
        for tp, off in consumed.items():
            assert min(r.offset for r in b_got if (r.topic, r.partition) == tp) == off
    finally:
        stop.set()
        a.close()
        if thread is not None:
            thread.join(20)
        if b is not None:
            b.close()


def test_close_while_the_join_group_is_parked(target: Target, topic_name: str) -> None:
    """b's JoinGroup waits for a, which does not poll (so does not rejoin) for up to the
    rebalance timeout (max.poll.interval.ms, 300 s): b's close leaves on a new
    connection at once, and a then gets every partition back."""
    _setup(target.cfg(), topic_name, 1)
    group = f"g-{topic_name}"
    a = _member(target, group, topic_name, "a")
    b = None
    try:
        _drain(a, 2)
        assert len(a.assignment()) == 2
        b = _member(target, group, topic_name, "b")
        deadline = time.monotonic() + 45
        while _group_state(target.cfg(), group) != ("PreparingRebalance", ["a", "b"]):
            assert time.monotonic() < deadline, "b's JoinGroup did not start a rebalance"
            assert b.poll(0.3) == []
        assert b.assignment() == set()
        start = time.monotonic()
        b.close()
        assert time.monotonic() - start < PROMPT
        assert _group_state(target.cfg(), group)[1] == ["a"]  # b has left
        _wait(lambda: (a.poll(0.2), _group_state(target.cfg(), group))[1] == ("Stable", ["a"]),
              "a to rejoin alone")
        assert len(a.assignment()) == 2
    finally:
        a.close()
        if b is not None:
            b.close()


def test_close_with_no_time_left_still_leaves(target: Target, topic_name: str) -> None:
    """close(timeout=0) waits for nothing, but its LeaveGroup is sent and taken: the other
    member gets a's partitions long before a's session (30 s here) would expire."""
    _setup(target.cfg(), topic_name, 1)
    group = f"g-{topic_name}"
    slow = {"session.timeout.ms": 30000}
    a = _member(target, group, topic_name, "a", **slow)
    b = _member(target, group, topic_name, "b", **slow)
    try:
        _wait(lambda: (a.poll(0.1), b.poll(0.1), len(a.assignment()) == len(b.assignment()) == 1)[2],
              "a and b to share the partitions")
        start = time.monotonic()
        a.close(timeout=0)
        assert time.monotonic() - start < 5
        _wait(lambda: (b.poll(0.2), len(b.assignment()) == 2)[1], "b to take a's partition", timeout=20)
    finally:
        a.close()
        b.close()


def test_asyncio_commit_in_the_revoke_callback_during_close(target: Target, topic_name: str) -> None:
    _setup(target.cfg(), topic_name, 10)
    group = f"g-{topic_name}"
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    commits: list[Any] = []

    async def go() -> float:
        conf = target.cfg(**{"group.id": group, **MEMBER})
        async with aio.Consumer(conf) as c:

            async def on_revoke(consumer: aio.Consumer, partitions: list[TopicPartition]) -> None:
                if partitions:
                    commits.append(await consumer.commit())

            await c.subscribe([topic_name], on_revoke=on_revoke)
            got: list[Any] = []
            while len(got) < 20:
                got += await c.poll(0.2)
            start = asyncio.get_running_loop().time()
        return asyncio.get_running_loop().time() - start

    took = asyncio.run(asyncio.wait_for(go(), 120))
    assert [_offsets(x) for x in commits] == [{tp: 10 for tp in tps}]
    assert took < PROMPT
    assert _committed(target.cfg(), group) == {tp: 10 for tp in tps}


def test_a_revoke_callback_commits_after_a_subscribed_topic_is_deleted(
        target: Target, topic_name: str) -> None:
    """Eager rebalance after the deletion revokes the deleted topic's partitions too; the
    callback's commit leaves them out (the broker answers UNKNOWN_TOPIC_OR_PARTITION for
    them) instead of retrying for default.api.timeout.ms, so the rebalance goes on."""
    gone, kept = f"{topic_name}-a", f"{topic_name}-b"
    _setup(target.cfg(), gone, 2)
    _setup(target.cfg(), kept, 3, partitions=1)
    group = f"g-{topic_name}"
    listener = CommitOnRevoke()
    c = _member(target, group, re.compile(re.escape(topic_name) + "-.*"), "a", listener,
                **{"metadata.max.age.ms": 300})
    try:
        _drain(c, 7)
        _wait(lambda: len(c.assignment()) == 3, "the pattern's three partitions")
        with Admin(target.cfg()) as admin:
            admin.delete_topics([gone])
        start = time.monotonic()
        _wait(lambda: (c.poll(0.2), c.assignment())[1] == {TopicPartition(kept, 0)},
              "the rebalance after the deletion")
        assert time.monotonic() - start < 30  # default.api.timeout.ms is 60 s
        assert _offsets(listener.commits[-1])[TopicPartition(kept, 0)] == 3
    finally:
        c.close()
    assert listener.events[-1] == ("revoked", [TopicPartition(kept, 0)])
    assert not any(isinstance(x, Exception) for x in listener.commits), listener.commits
    assert _committed(target.cfg(), group) == {TopicPartition(kept, 0): 3}


def test_close_timeout_bounds_a_commit_in_the_revoke_callback(new_broker: Any, topic_name: str) -> None:
    """The broker stops answering (SIGSTOP) before close(timeout=3): the callback's commit
    fails with KafkaTimeoutError when close's time is up, and close returns."""
    b: BrokerProcess = new_broker(BROKER).start()
    settings = {"bootstrap.servers": b.bootstrap}
    _setup(settings, topic_name, 5)
    listener = CommitOnRevoke()
    c = Consumer({**settings, "group.id": "g", "client.id": "a", **MEMBER})
    listener.consumer = c
    c.subscribe([topic_name], listener=listener)
    _drain(c, 10)
    assert b.proc is not None
    b.proc.send_signal(signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            c.close(timeout=3)
        took = time.monotonic() - start
    finally:
        b.proc.send_signal(signal.SIGCONT)
    assert 2.5 < took < 3 + 7
    assert len(listener.commits) == 1 and isinstance(listener.commits[0], KafkaTimeoutError)
    assert b.stop() == 0


# When, around a broker restart, close runs: the broker is down; it is starting again; it
# is back but the member has not noticed; the member's poll has started its rejoin.
RESTART_MOMENTS = ["down", "starting", "back", "rejoining"]
CLOSE_TIMEOUT = 5.0
# What close may take past its timeout: its connections' close (at most 5 s each to flush,
# pylog.net.connection) and the tasks it stops (pylog.client.aio._tasks), on a loaded
# machine.
CLOSE_SLACK = 7.0


@pytest.mark.parametrize("moment", RESTART_MOMENTS)
def test_close_around_a_broker_restart_returns_within_its_timeout(
        new_broker: Any, topic_name: str, moment: str) -> None:
    """A live member (heartbeating, auto commit on) of a group whose only broker is killed
    and restarted: close(timeout=5) at each moment of the restart returns within its
    timeout plus its connections' close, raises nothing (the commit and the LeaveGroup
    that fail are logged, as Kafka does), and stops the consumer's I/O thread."""
    b: BrokerProcess = new_broker(BROKER).start()
    settings = {"bootstrap.servers": b.bootstrap}
    _setup(settings, topic_name, 5)
    c = Consumer({**settings, "group.id": f"g-{topic_name}", "client.id": "a", **MEMBER,
                  "enable.auto.commit": True, "auto.commit.interval.ms": 200})
    restarting: threading.Thread | None = None
    try:
        c.subscribe([topic_name])
        _drain(c, 10)
        b.stop(sig=signal.SIGKILL)
        if moment == "starting":
            restarting = threading.Thread(target=b.start, name="broker-restart")
            restarting.start()
            _wait(lambda: b.proc is not None, "the broker process to start")
        elif moment in ("back", "rejoining"):
            b.start()
        if moment == "rejoining":
            c.poll(1.0)  # finds the coordinator again, rejoins (or goes on if it may)
        start = time.monotonic()
        c.close(timeout=CLOSE_TIMEOUT)
        took = time.monotonic() - start
    finally:
        c.close()
        if restarting is not None:
            restarting.join(60)
    assert took < CLOSE_TIMEOUT + CLOSE_SLACK, f"close took {took:.1f} s"
    assert not c._thread.thread.is_alive()


def test_an_interrupted_poll_loses_no_record(target: Target, topic_name: str) -> None:
    """Ctrl-C (or SIGTERM) while poll waits: the poll goes on in the I/O thread and may
    still take records, moving the positions past them. They are not lost: the next poll
    returns them, and a commit does not count them before."""
    _setup(target.settings, topic_name, 0)
    c = _member(target, f"g-{topic_name}", topic_name, "interrupted")
    try:
        _wait(lambda: (c.poll(0.1), len(c.assignment()) == 2)[1], "the assignment")
        waiting = threading.Event()

        def interrupt_then_produce() -> None:
            waiting.wait(10)
            time.sleep(0.5)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.5)
            with Producer(target.settings) as p:
                for i in range(4):
                    p.send(topic_name, b"late%d" % i, partition=i % 2)
                p.flush(30)

        t = threading.Thread(target=interrupt_then_produce)
        t.start()
        waiting.set()
        with pytest.raises(KeyboardInterrupt):
            c.poll(20)  # interrupted before any record came
        t.join(30)
        # Nothing consumed yet: whatever the interrupted poll took is not counted.
        assert all(o == 0 for o in _offsets(c.commit()).values())
        got = _drain(c, 4)
        assert sorted(r.value for r in got) == [b"late%d" % i for i in range(4)]
        assert _offsets(c.commit()) == {TopicPartition(topic_name, p): 2 for p in range(2)}
    finally:
        c.close()


_SIGTERM_MEMBER = """
import sys
from pylog.client import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "client.id": "sigterm-member", "auto.offset.reset": "earliest",
              "auto.commit.interval.ms": 600000})
c.subscribe([sys.argv[3]])
while True:  # no close(), no signal handling: the application of a hurried user
    for r in c.poll(0.5):
        print(r.partition, r.offset, flush=True)
"""


def test_sigterm_leaves_the_group_and_commits(target: Target, topic_name: str) -> None:
    """A blocking consumer whose application leaves SIGTERM at its default: a plain kill
    closes it (auto commit, LeaveGroup) instead of leaving a member behind until
    session.timeout.ms; the process exits 143, as SIGTERM's default action reports."""
    if target.mode != "network":
        pytest.skip("a second process cannot open the embedded data directory")
    import subprocess
    import sys

    _setup(target.settings, topic_name, 3)
    group = f"g-{topic_name}"
    proc = subprocess.Popen([sys.executable, "-c", _SIGTERM_MEMBER, target.settings["bootstrap.servers"],
                             group, topic_name], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = [proc.stdout.readline() for _ in range(6)]
        assert all(lines), lines
        assert _group_state(target.settings, group) == ("Stable", ["sigterm-member"])
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (143, b"")
    assert _group_state(target.settings, group) == ("Empty", [])
    assert _committed(target.settings, group) == {TopicPartition(topic_name, p): 3 for p in range(2)}
