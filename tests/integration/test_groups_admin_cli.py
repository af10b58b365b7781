"""Group administration against real group consumers (issues 7 and 8): pylog's Admin
(blocking and asyncio) and the `pylog groups` command, with confluent-kafka consumers as
the members and as the judge of committed offsets.

The broker runs with ``group.initial.rebalance.delay.ms=0`` and a lowered
``group.min.session.timeout.ms``, as in test_groups.py: joins and leaves settle in well
under a second.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from pylog import errors
from pylog.client import Admin, OffsetAndMetadata, TopicPartition
from pylog.client import aio as client_aio
from tests.integration.conftest import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

OVERRIDES = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "3",
}
SESSION_MS = 6000
DEADLINE = 30.0


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("groupscli") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


@pytest.fixture
def admin(cbroker: BrokerProcess):
    with Admin(bootstrap_servers=cbroker.bootstrap) as a:
        yield a


def pylog(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pylog", *args, "-b", broker.bootstrap],
                          capture_output=True, text=True, timeout=90)


def _topic(broker: BrokerProcess, name: str, partitions: int = 3) -> None:
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=10)


def _produce(broker: BrokerProcess, topic: str, counts: dict[int, int],
             timestamps: Callable[[int, int], int] | None = None) -> None:
    """``counts[p]`` records to partition p; record i of p stamped ``timestamps(p, i)``."""
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for part, n in counts.items():
        for i in range(n):
            kw = {"timestamp": timestamps(part, i)} if timestamps else {}
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part, **kw)
    assert p.flush(15) == 0


def _wait(cond: Callable[[], bool], what: str, state: Callable[[], object] | None = None) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f": {state()}" if state else ""))


class Member:
    """A confluent-kafka group consumer polling in a thread. ``commit_first[p]``: it
    commits after each of the first that many records of partition p, then reads on
    without committing."""

    def __init__(self, broker: BrokerProcess, group: str, topics: list[str], *,
                 client_id: str = "member", instance: str | None = None,
                 commit_first: dict[int, int] | None = None) -> None:
        conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
                "client.id": client_id, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 200, "partition.assignment.strategy": "range"}
        if instance is not None:
            conf["group.instance.id"] = instance
        self.consumer = confluent_kafka.Consumer(conf)
        self.consumer.subscribe(topics)
        self.commit_first = dict(commit_first or {})
        self.read: dict[int, list[int]] = {}
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = self.consumer
        try:
            while not self._stop.is_set():
                msg = c.poll(0.05)
                self.assignment = frozenset(TopicPartition(tp.topic, tp.partition)
                                            for tp in c.assignment())
                if msg is None or msg.error():
                    continue
                got = self.read.setdefault(msg.partition(), [])
                got.append(msg.offset())
                if len(got) <= self.commit_first.get(msg.partition(), 0):
                    c.commit(message=msg, asynchronous=False)
        except BaseException as exc:  # noqa: BLE001 - reported by close()
            self.error = exc
        finally:
            c.close()  # LeaveGroup: the group empties without waiting for the session

    def close(self) -> None:
        self._stop.set()
        self._thread.join(20)
        assert not self._thread.is_alive(), "member did not stop"
        if self.error is not None:
            raise self.error


def _wait_state(admin: Admin, group: str, state: str) -> None:
    _wait(lambda: admin.describe_groups([group])[group].state == state, f"{group} {state}",
          state=lambda: admin.describe_groups([group])[group])


def _committed(broker: BrokerProcess, group: str, tps: list[TopicPartition]) -> dict[int, int]:
    """What a confluent-kafka consumer of the group reads as committed (-1001: none)."""
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        got = c.committed([confluent_kafka.TopicPartition(t, p) for t, p in tps], timeout=10)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got}


def _first_offsets(broker: BrokerProcess, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The first offset a new confluent-kafka member of the group reads in each partition."""
    c = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": SESSION_MS})
    c.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + DEADLINE
    try:
        while len(first) < partitions and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                first.setdefault(msg.partition(), msg.offset())
    finally:
        c.close()
    return first


# --------------------------------------------------------------------------- the Admin


def test_admin_sees_live_members_with_their_assignments(cbroker: BrokerProcess, admin: Admin,
                                                        topic_name: str) -> None:
    _topic(cbroker, topic_name, 4)
    group = f"g-{topic_name}"
    a = Member(cbroker, group, [topic_name], client_id="client-a")
    b = None
    try:
        _wait(lambda: len(a.assignment) == 4, "the first member to hold every partition")
        b = Member(cbroker, group, [topic_name], client_id="client-b", instance="static-b")
        members = [a, b]
        _wait(lambda: all(len(m.assignment) == 2 for m in members), "two members, two each",
              state=lambda: [sorted(m.assignment) for m in members])
        time.sleep(0.3)  # settled: what the members hold is what the coordinator stored

        stable = admin.list_groups(states=["stable"])
        assert group in [g.group_id for g in stable]
        assert all(g.state == "Stable" for g in stable)
        assert group not in [g.group_id for g in admin.list_groups(states=["Empty"])]
        listing = {g.group_id: g for g in admin.list_groups()}[group]
        assert (listing.protocol_type, listing.state) == ("consumer", "Stable")

        desc = admin.describe_groups([group])[group]
        assert (desc.state, desc.protocol_type, desc.protocol) == ("Stable", "consumer", "range")
        by_client = {m.client_id: m for m in desc.members}
        assert sorted(by_client) == ["client-a", "client-b"]
        assert by_client["client-a"].group_instance_id is None
        assert by_client["client-b"].group_instance_id == "static-b"
        assert by_client["client-b"].member_id.startswith("static-b-")
        assert all(m.host.endswith("127.0.0.1") for m in desc.members)
        # The decoded assignments are exactly what each consumer says it holds.
        assert set(by_client["client-a"].assignment) == a.assignment
        assert set(by_client["client-b"].assignment) == b.assignment

        # The asyncio face answers the same.
        async def aio_describe() -> Any:
            async with client_aio.Admin(bootstrap_servers=cbroker.bootstrap) as aadmin:
                return (await aadmin.describe_groups([group]))[group], await aadmin.list_groups()
        adesc, alisted = asyncio.run(aio_describe())
        assert adesc.state == "Stable" and len(adesc.members) == 2
        assert group in [g.group_id for g in alisted]
    finally:
        for m in (b, a):
            if m is not None:
                m.close()
    _wait_state(admin, group, "Empty")
    assert admin.describe_groups([group])[group].members == []


def test_admin_offsets_on_live_and_empty_groups(cbroker: BrokerProcess, admin: Admin,
                                                topic_name: str) -> None:
    _topic(cbroker, topic_name, 2)
    other = f"{topic_name}-other"
    _topic(cbroker, other, 1)
    _produce(cbroker, topic_name, {0: 10, 1: 10})
    _produce(cbroker, other, {0: 5})
    group = f"g-{topic_name}"
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    # Offsets of a topic no member consumes, committed while the group does not exist.
    admin.alter_group_offsets(group, {(other, 0): (4, "by admin")})
    member = Member(cbroker, group, [topic_name], commit_first={0: 3, 1: 6})
    try:
        def offsets() -> dict[TopicPartition, int | None]:
            return {tp: om.offset if om else None
                    for tp, om in admin.list_group_offsets(group, tps).items()}
        _wait(lambda: offsets() == {tps[0]: 3, tps[1]: 6}, "the member's commits", state=offsets)
        everything = admin.list_group_offsets(group)
        assert everything[TopicPartition(other, 0)] == OffsetAndMetadata(4, "by admin", -1)
        assert sorted(everything) == sorted([*tps, TopicPartition(other, 0)])
        # A group with members: offsets cannot be altered, the group cannot be deleted, the
        # offsets of its topic cannot be deleted; those of the other topic can.
        with pytest.raises(errors.NonEmptyGroupError, match="stop its consumers first"):
            admin.alter_group_offsets(group, {tps[0]: 0})
        (err,) = admin.delete_groups([group]).values()
        assert isinstance(err, errors.NonEmptyGroupError)
        res = admin.delete_group_offsets(group, [tps[0], (other, 0)])
        assert isinstance(res[tps[0]], errors.GroupSubscribedToTopicError)
        assert res[TopicPartition(other, 0)] is None
        assert admin.list_group_offsets(group, [(other, 0)]) == {TopicPartition(other, 0): None}
    finally:
        member.close()
    _wait_state(admin, group, "Empty")
    admin.alter_group_offsets(group, {tps[0]: 1, tps[1]: (2, "meta")})
    assert _committed(cbroker, group, tps) == {0: 1, 1: 2}
    assert admin.list_group_offsets(group, tps)[tps[1]] == OffsetAndMetadata(2, "meta", -1)
    assert admin.delete_group_offsets(group, [tps[0]]) == {tps[0]: None}
    assert _committed(cbroker, group, tps) == {0: confluent_kafka.OFFSET_INVALID, 1: 2}
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.alter_group_offsets(group, {(topic_name, 9): 1})
    deleted = admin.delete_groups([group, f"no-{group}"])
    assert deleted[group] is None
    assert isinstance(deleted[f"no-{group}"], errors.GroupIdNotFoundError)
    assert group not in [g.group_id for g in admin.list_groups()]
    assert _committed(cbroker, group, tps) == {0: confluent_kafka.OFFSET_INVALID,
                                               1: confluent_kafka.OFFSET_INVALID}
    # Unknown groups: described as Dead, no offsets, offset deletion refused.
    dead = admin.describe_groups([group])[group]
    assert (dead.state, dead.members) == ("Dead", [])
    assert admin.list_group_offsets(group) == {}
    with pytest.raises(errors.GroupIdNotFoundError):
        admin.delete_group_offsets(group, tps)
    with pytest.raises(ValueError, match="Kafka's states"):
        admin.list_groups(states=["Sleeping"])
    with pytest.raises(TypeError):
        admin.describe_groups(group)


# --------------------------------------------------------------------------- describe


def _rows(stdout: str) -> list[list[str]]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    return [ln.split() for ln in lines]


def test_describe_lag_is_what_the_members_have_not_committed(cbroker: BrokerProcess,
                                                             admin: Admin, topic_name: str) -> None:
    _topic(cbroker, topic_name, 3)
    ends = {0: 12, 1: 20, 2: 7}
    committed = {0: 5, 1: 20, 2: 0}  # partition 2: read, never committed
    _produce(cbroker, topic_name, ends)
    group = f"g-{topic_name}"
    member = Member(cbroker, group, [topic_name], client_id="lag-client", commit_first=committed)
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    try:
        _wait(lambda: all(len(member.read.get(p, [])) == ends[p] for p in ends),
              "the member to read everything", state=lambda: member.read)
        _wait(lambda: {tp.partition: (o.offset if o else 0)
                       for tp, o in admin.list_group_offsets(group, tps).items()} == committed,
              "the member's commits")
        live = pylog(cbroker, "groups", "describe", group)
        assert live.returncode == 0, live.stderr
        header, *rows = _rows(live.stdout)
        assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                          "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        (member_id,) = [m.member_id for m in admin.describe_groups([group])[group].members]
        assert rows == [
            [group, topic_name, "0", "5", "12", "7", member_id, "/127.0.0.1", "lag-client"],
            [group, topic_name, "1", "20", "20", "0", member_id, "/127.0.0.1", "lag-client"],
            [group, topic_name, "2", "-", "7", "-", member_id, "/127.0.0.1", "lag-client"]]
        members = pylog(cbroker, "groups", "describe", group, "--members", "--verbose")
        assert _rows(members.stdout) == [
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
            [group, member_id, "/127.0.0.1", "lag-client", "3", f"{topic_name}(0,1,2)"]]
        state = pylog(cbroker, "groups", "describe", group, "--state")
        assert _rows(state.stdout)[1] == [group, cbroker.bootstrap, "(0)", "range", "Stable", "1"]
    finally:
        member.close()
    _wait_state(admin, group, "Empty")
    # More records arrive: the lag grows by them; with no member, only committed
    # partitions are listed, without a consumer.
    _produce(cbroker, topic_name, {0: 3})
    after = pylog(cbroker, "groups", "describe", group)
    assert after.returncode == 0 and "has no active members" in after.stderr
    assert _rows(after.stdout)[1:] == [
        [group, topic_name, "0", "5", "15", "10", "-", "-", "-"],
        [group, topic_name, "1", "20", "20", "0", "-", "-", "-"]]
    (doc,) = json.loads(pylog(cbroker, "groups", "describe", group, "--json").stdout)
    assert doc["state"] == "Empty" and doc["members"] == []
    assert [(r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"])
            for r in doc["offsets"]] == [(0, 5, 15, 10), (1, 20, 20, 0)]


def test_describe_and_delete_unknown_groups_say_so(cbroker: BrokerProcess, topic_name: str) -> None:
    _topic(cbroker, topic_name, 1)
    group = f"nobody-{topic_name}"
    for args in (["describe", group], ["describe", group, "--json"], ["delete", group],
                 ["delete-offsets", group, "--topic", topic_name]):
        out = pylog(cbroker, "groups", *args)
        assert out.returncode == 1, (args, out)
        assert f"'{group}' does not exist" in out.stderr and "pylog groups list" in out.stderr


# --------------------------------------------------------------------------- reset-offsets


def _reset(broker: BrokerProcess, group: str, *args: str) -> tuple[dict[tuple[str, int], int], str]:
    out = pylog(broker, "groups", "reset-offsets", group, *args)
    assert out.returncode == 0, out.stderr
    header, *rows = _rows(out.stdout)
    assert header == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert all(r[0] == group for r in rows)
    return {(r[1], int(r[2])): int(r[3]) for r in rows}, out.stderr


def test_reset_offsets_every_mode(cbroker: BrokerProcess, admin: Admin, topic_name: str) -> None:
    _topic(cbroker, topic_name, 3)
    t = topic_name
    base = int(time.time() * 1000) - 20 * 3_600_000
    # Record i of every partition is stamped base + i hours: 20 records, the last one
    # (i = 19) an hour ago.
    _produce(cbroker, t, {0: 20, 1: 20, 2: 20}, timestamps=lambda p, i: base + i * 3_600_000)
    admin.delete_records({(t, 0): 2})  # partition 0 starts at 2 now
    group = f"g-{t}"
    admin.alter_group_offsets(group, {(t, 0): 10, (t, 1): 10})  # partition 2: no commit
    tps = [TopicPartition(t, p) for p in range(3)]

    def committed() -> dict[int, int]:
        return _committed(cbroker, group, tps)

    before = committed()
    assert before == {0: 10, 1: 10, 2: confluent_kafka.OFFSET_INVALID}

    plan, note = _reset(cbroker, group, "--topic", t, "--to-earliest")
    assert plan == {(t, 0): 2, (t, 1): 0, (t, 2): 0} and "--execute" in note
    assert committed() == before  # a dry run by default
    plan, _ = _reset(cbroker, group, "--topic", t, "--to-latest", "--dry-run")
    assert plan == {(t, 0): 20, (t, 1): 20, (t, 2): 20}
    assert committed() == before
    plan, _ = _reset(cbroker, group, "--topic", f"{t}:1,2", "--to-offset", "3")
    assert plan == {(t, 1): 3, (t, 2): 3}
    plan, warned = _reset(cbroker, group, "--topic", t, "--to-offset", "0")
    assert plan == {(t, 0): 2, (t, 1): 0, (t, 2): 0} and "set to 2" in warned
    plan, warned = _reset(cbroker, group, "--topic", f"{t}:0", "--to-offset", "1000")
    assert plan == {(t, 0): 20} and "set to 20" in warned
    plan, _ = _reset(cbroker, group, "--all-topics", "--shift-by", "-4")
    assert plan == {(t, 0): 6, (t, 1): 6}
    plan, warned = _reset(cbroker, group, "--topic", f"{t}:0", "--shift-by", "-9")
    assert plan == {(t, 0): 2} and "set to 2" in warned
    no_commit = pylog(cbroker, "groups", "reset-offsets", group, "--topic", t, "--shift-by", "1")
    assert no_commit.returncode == 1 and f"{t}-2" in no_commit.stderr
    assert "no committed offset" in no_commit.stderr
    # --to-datetime: the first record at or after the time; a naive time is UTC.
    at = datetime.datetime.fromtimestamp((base + 5 * 3_600_000 - 1) / 1000, datetime.timezone.utc)
    plan, _ = _reset(cbroker, group, "--topic", f"{t}:1", "--to-datetime",
                     at.replace(tzinfo=None).isoformat(timespec="milliseconds"))
    assert plan == {(t, 1): 5}
    plus2 = at.astimezone(datetime.timezone(datetime.timedelta(hours=2)))
    plan, _ = _reset(cbroker, group, "--topic", f"{t}:1", "--to-datetime",
                     plus2.isoformat(timespec="milliseconds"))
    assert plan == {(t, 1): 5}
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    plan, warned = _reset(cbroker, group, "--topic", f"{t}:1", "--to-datetime",
                          future.isoformat(timespec="milliseconds"))
    assert plan == {(t, 1): 20} and "latest offset" in warned
    # --by-duration: records of the last 5 h 30 min: i >= 15 (i = 15 is 5 h old).
    plan, _ = _reset(cbroker, group, "--topic", t, "--by-duration", "PT5H30M")
    assert plan == {(t, 0): 15, (t, 1): 15, (t, 2): 15}
    plan, _ = _reset(cbroker, group, "--topic", t, "--by-duration", "P1DT0H")
    assert plan == {(t, 0): 2, (t, 1): 0, (t, 2): 0}
    assert committed() == before  # nothing so far was executed

    plan, _ = _reset(cbroker, group, "--topic", f"{t}:0,2", "--to-offset", "7", "--execute")
    assert committed() == {0: 7, 1: 10, 2: 7}
    plan, _ = _reset(cbroker, group, "--topic", f"{t}:1", "--shift-by", "3", "--execute")
    assert committed() == {0: 7, 1: 13, 2: 7}
    # A consumer of the group resumes where the offsets were reset to.
    assert _first_offsets(cbroker, group, t, 3) == {0: 7, 1: 13, 2: 7}


def test_reset_offsets_refused_while_the_group_has_members(cbroker: BrokerProcess, admin: Admin,
                                                           topic_name: str) -> None:
    _topic(cbroker, topic_name, 1)
    _produce(cbroker, topic_name, {0: 10})
    group = f"g-{topic_name}"
    member = Member(cbroker, group, [topic_name], commit_first={0: 4})
    tp = TopicPartition(topic_name, 0)
    try:
        _wait(lambda: admin.list_group_offsets(group, [tp])[tp] is not None
              and admin.list_group_offsets(group, [tp])[tp].offset == 4,  # type: ignore[union-attr]
              "the member's commits")
        for run in ("--dry-run", "--execute"):
            out = pylog(cbroker, "groups", "reset-offsets", group, "--topic", topic_name,
                        "--to-earliest", run)
            assert out.returncode == 1, out
            assert "inactive" in out.stderr and "Stable" in out.stderr
            assert "stop its consumers first" in out.stderr
            assert out.stdout == ""
        assert _committed(cbroker, group, [tp]) == {0: 4}
    finally:
        member.close()
    _wait_state(admin, group, "Empty")
    _reset(cbroker, group, "--topic", topic_name, "--to-earliest", "--execute")
    assert _committed(cbroker, group, [tp]) == {0: 0}
    assert _first_offsets(cbroker, group, topic_name, 1) == {0: 0}


def test_reset_offsets_of_a_new_group_creates_it(cbroker: BrokerProcess, admin: Admin,
                                                 topic_name: str) -> None:
    _topic(cbroker, topic_name, 2)
    _produce(cbroker, topic_name, {0: 6, 1: 6})
    group = f"new-{topic_name}"
    plan, _ = _reset(cbroker, group, "--topic", topic_name, "--to-latest", "--execute")
    assert plan == {(topic_name, 0): 6, (topic_name, 1): 6}
    assert admin.describe_groups([group])[group].state == "Empty"
    _produce(cbroker, topic_name, {1: 2})
    assert _first_offsets(cbroker, group, topic_name, 1) == {1: 6}


def test_reset_offsets_bad_arguments(cbroker: BrokerProcess, topic_name: str) -> None:
    _topic(cbroker, topic_name, 2)
    g = f"g-{topic_name}"
    cases = {
        ("--topic", f"{topic_name}:x", "--to-earliest"): (2, "partitions are numbers"),
        ("--topic", topic_name, "--to-datetime", "yesterday"): (2, "YYYY-MM-DDTHH:mm:SS.sss"),
        ("--topic", topic_name, "--by-duration", "5 hours"): (2, "PnDTnHnMnS"),
        ("--topic", topic_name): (2, "one of the arguments"),
        ("--topic", topic_name, "--to-earliest", "--to-latest"): (2, "not allowed with"),
        ("--topic", f"{topic_name}:0,5", "--to-earliest"): (1, "has no partition 5"),
        ("--topic", f"no-{topic_name}", "--to-earliest"): (1, "does not exist"),
        ("--all-topics", "--to-earliest"): (1, "no committed offsets"),
    }
    for args, (rc, text) in cases.items():
        out = pylog(cbroker, "groups", "reset-offsets", g, *args)
        assert (out.returncode, text in out.stderr) == (rc, True), (args, out.stderr)


# --------------------------------------------------------------------------- delete


def test_delete_groups_and_offsets(cbroker: BrokerProcess, admin: Admin, topic_name: str) -> None:
    _topic(cbroker, topic_name, 2)
    old = f"{topic_name}-old"
    _topic(cbroker, old, 2)
    _produce(cbroker, topic_name, {0: 5, 1: 5})
    group = f"g-{topic_name}"
    admin.alter_group_offsets(group, {(old, 0): 1, (old, 1): 1})
    member = Member(cbroker, group, [topic_name], commit_first={0: 2, 1: 2})
    try:
        _wait(lambda: len(admin.list_group_offsets(group)) == 4, "the member's commits")
        refused = pylog(cbroker, "groups", "delete", group)
        assert refused.returncode == 1
        assert "NON_EMPTY_GROUP" in refused.stderr and "stop its consumers first" in refused.stderr
        subscribed = pylog(cbroker, "groups", "delete-offsets", group, "--topic", topic_name)
        assert subscribed.returncode == 1 and subscribed.stdout.count("GROUP_SUBSCRIBED_TO_TOPIC") == 2
        # Offsets of a topic the members do not consume go, even while they run.
        gone = pylog(cbroker, "groups", "delete-offsets", group, "--topic", old)
        assert gone.returncode == 0, gone.stderr
        assert _rows(gone.stdout) == [["TOPIC", "PARTITION", "STATUS"], [old, "0", "Successful"],
                                      [old, "1", "Successful"]]
        assert sorted(admin.list_group_offsets(group)) == [TopicPartition(topic_name, 0),
                                                           TopicPartition(topic_name, 1)]
    finally:
        member.close()
    _wait_state(admin, group, "Empty")
    part = pylog(cbroker, "groups", "delete-offsets", group, "--topic", f"{topic_name}:1")
    assert part.returncode == 0 and _committed(cbroker, group, [TopicPartition(topic_name, 1)]) == {
        1: confluent_kafka.OFFSET_INVALID}
    both = pylog(cbroker, "groups", "delete", group, f"never-{group}")
    assert both.returncode == 1
    assert f"('{group}') was successful" in both.stdout
    assert f"'never-{group}' does not exist" in both.stderr
    listed = pylog(cbroker, "groups", "list")
    assert listed.returncode == 0 and group not in listed.stdout.split()
    assert _committed(cbroker, group, [TopicPartition(topic_name, 0)]) == {
        0: confluent_kafka.OFFSET_INVALID}


def test_list_with_states(cbroker: BrokerProcess, admin: Admin, topic_name: str) -> None:
    _topic(cbroker, topic_name, 1)
    empty = f"empty-{topic_name}"
    admin.alter_group_offsets(empty, {(topic_name, 0): 0})
    live = f"live-{topic_name}"
    member = Member(cbroker, live, [topic_name])
    try:
        _wait(lambda: bool(member.assignment), "the member's partition")
        plain = pylog(cbroker, "groups", "list").stdout.split()
        assert empty in plain and live in plain
        rows = dict(r for r in _rows(pylog(cbroker, "groups", "list", "--state").stdout)[1:])
        assert rows[empty] == "Empty" and rows[live] == "Stable"
        stable = _rows(pylog(cbroker, "groups", "list", "--state", "STABLE").stdout)
        assert [live, "Stable"] in stable and empty not in dict(stable[1:])
        bad = pylog(cbroker, "groups", "list", "--state", "asleep")
        assert bad.returncode == 2 and "Stable" in bad.stderr
    finally:
        member.close()


def test_help_and_unreachable_broker(tmp_path: Any) -> None:
    for action in ("list", "describe", "reset-offsets", "delete", "delete-offsets"):
        out = subprocess.run([sys.executable, "-m", "pylog", "groups", action, "--help"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0 and "--bootstrap-server" in out.stdout
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run([sys.executable, "-m", "pylog", "groups", "list", "-b", f"127.0.0.1:{port}"],
                         capture_output=True, text=True, timeout=60)
    # Worded as every other command words it.
    assert out.returncode == 1 and "no broker is reachable" in out.stderr
    assert f"is a broker listening at 127.0.0.1:{port}? Give its address with -b" in out.stderr


def test_admin_waits_out_a_broker_restart(new_broker: Callable[..., BrokerProcess],
                                         topic_name: str) -> None:
    import signal

    b = new_broker(OVERRIDES).start()
    _topic(b, topic_name, 2)
    group = f"g-{topic_name}"
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    with Admin(bootstrap_servers=b.bootstrap, default_api_timeout_ms=60_000) as a:
        for i in range(200):  # records for the restarted coordinator to load
            a.alter_group_offsets(group, {tps[0]: i, tps[1]: 2 * i})
        # The broker is down when the call starts and back 1.5 s later: the call keeps
        # reconnecting and looking the coordinator up until it answers.
        b.stop(sig=signal.SIGKILL)
        restart = threading.Timer(1.5, b.start)
        restart.start()
        started = time.monotonic()
        try:
            assert a.list_group_offsets(group) == {tps[0]: OffsetAndMetadata(199),
                                                   tps[1]: OffsetAndMetadata(398)}
        finally:
            restart.join(60)
        assert time.monotonic() - started >= 1.4
        assert a.describe_groups([group])[group].state == "Empty"
    assert "loaded" in b.read_log()
