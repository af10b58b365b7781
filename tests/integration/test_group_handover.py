"""Partition handover in a consumer group loses no record (issue 7), with real clients.

For each of confluent-kafka, kafka-python and aiokafka: three group members, each in its own
process (tests/_harness/group_member.py), consume a 6-partition topic that a producer keeps
writing to (value ``"<partition>:<n>"``, n counting from 0 in each partition, so that the
value of a record names its offset). Each member writes every record it processes to a file
before committing the offset after it (every 500 ms), and commits synchronously what it
processed of a partition when the partition is revoked. Then one member leaves (close:
LeaveGroup), or is killed (SIGKILL) between two commits; the other two take over its
partitions within the session timeout (plus a rebalance); the producer stops; the two drain
to the end offsets. Eager rebalances for all three clients, incremental (KIP-429
cooperative-sticky) ones for confluent-kafka and kafka-python.

What must hold: the processed records of every partition cover every offset from 0 to the
end offset, each with its own value; the new owners of the moved partitions start at the
offsets committed for them (after a kill: as the broker has them once the member is dead);
so a record is processed twice only if the member that went away processed it after its
last commit (none after a clean leave; counted and printed after a kill); and the group's
committed offsets are the end offsets once everybody has stopped (lag 0).

The broker runs with ``group.initial.rebalance.delay.ms=0`` and a lowered
``group.min.session.timeout.ms``, as in test_groups.py. Run with ``-s`` to see the counts.
"""

from __future__ import annotations

import collections
import pathlib
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from pylog.client import Admin, NewTopic, TopicPartition
from tests.integration.conftest import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka

pytestmark = pytest.mark.integration

OVERRIDES = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "3",
}
MEMBER = pathlib.Path(__file__).resolve().parents[1] / "_harness" / "group_member.py"
PARTITIONS = 6
# A killed member holds its partitions for its session timeout: short, so that the test is
# quick, but a few heartbeats long (kafka-python heartbeats once a second, see below).
KILL_SESSION_MS = 4000
# A leaving member does not wait for it: a long one shows the handover comes from the
# LeaveGroup (the takeover is asserted to happen well within it).
LEAVE_SESSION_MS = 12000
# After the session timeout (or the LeaveGroup): the survivors learn of the rebalance at
# their next heartbeat, rejoin and sync. Wide, for a loaded 2-core machine.
REBALANCE_SLACK_S = 10.0
# kafka-python 3.0.12 leaders stalled now and then after a rejoin with 200 ms heartbeats
# (KP_HEARTBEAT_MS in test_groups.py); 1 s did not.
HEARTBEAT_MS = {"confluent": 500, "kafka-python": 1000, "aiokafka": 500}
# Periodic commits, as applications make them: a killed member has processed records since
# its last one, which its partitions' new owners read again.
COMMIT_INTERVAL_MS = 500
PRODUCE_EVERY_S = 0.02  # one record per partition each time: 300 records/s in all
DEADLINE = 60.0


@pytest.fixture(scope="module")
def hbroker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("handover") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


def _wait(cond: Callable[[], bool], what: str, timeout: float = DEADLINE,
          state: Callable[[], object] | None = None, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}" + (f": {state()}" if state else ""))


# --------------------------------------------------------------------------- the producer


class SequenceProducer:
    """Writes ``"<p>:<n>"`` to each partition p in turn, n = 0, 1, ..., until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer: Any = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.delivered: dict[int, dict[int, str]] = collections.defaultdict(dict)
        self.errors: list[Any] = []
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.delivered[msg.partition()][msg.offset()] = msg.value().decode()

    def _run(self) -> None:
        try:
            n = 0
            while not self.stopping.is_set():
                for p in range(PARTITIONS):
                    self.producer.produce(self.topic, value=f"{p}:{n}".encode(), partition=p,
                                          on_delivery=self._on_delivery)
                n += 1
                self.producer.poll(0)
                time.sleep(PRODUCE_EVERY_S)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.failure = exc

    def start(self) -> SequenceProducer:
        self.thread.start()
        return self

    def stop(self) -> dict[int, int]:
        """Stop, deliver everything, and return each partition's end offset."""
        self.stopping.set()
        self.thread.join(30)
        if self.failure is not None:
            raise self.failure
        assert self.producer.flush(30) == 0, "the producer could not deliver everything"
        assert not self.errors, self.errors
        ends = {}
        for p in range(PARTITIONS):
            got = self.delivered[p]
            # An idempotent producer writes each partition in order: offset n holds "p:n".
            assert got == {o: f"{p}:{o}" for o in range(len(got))}, f"partition {p} out of order"
            ends[p] = len(got)
        return ends

    def close(self) -> None:
        """Stop and drop whatever is undelivered (a failed test: the broker may be gone)."""
        if self.producer is None:
            return
        self.stopping.set()
        self.thread.join(30)
        self.producer.purge()
        self.producer.close()
        self.producer = None


# --------------------------------------------------------------------------- members


@dataclass
class Ledger:
    """What a member's file says (see tests/_harness/group_member.py)."""

    assignments: list[tuple[float, frozenset[int]]]
    processed: list[tuple[int, int, str]]
    commits: list[tuple[int, int]]
    commit_errors: list[str]
    exited: bool
    # Settled: a commit succeeded since the last assignment change, and the last commit
    # attempt did (a client mid-rebalance fails them: kafka-python refuses them itself).
    settled: bool


class MemberProcess:
    def __init__(self, client: str, broker: BrokerProcess, group: str, topic: str, assignor: str,
                 session_ms: int, workdir: pathlib.Path, name: str) -> None:
        self.name = name
        self.out = workdir / f"{name}.out"
        self.stop_file = workdir / f"{name}.stop"
        self.err = workdir / f"{name}.err"
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(MEMBER), client, broker.bootstrap, group, topic, assignor,
                 str(session_ms), str(HEARTBEAT_MS[client]), str(COMMIT_INTERVAL_MS), str(self.out),
                 str(self.stop_file)],
                stdout=err, stderr=subprocess.STDOUT)

    def ledger(self) -> Ledger:
        try:
            text = self.out.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        led = Ledger([], [], [], [], False, False)
        # A SIGKILL can cut the last line: only whole lines count.
        for line in text.split("\n")[:-1]:
            kind, _, rest = line.partition(" ")
            led.settled = kind == "C" or (led.settled and kind == "R")
            if kind == "A":
                stamp, _, parts = rest.partition(" ")
                led.assignments.append((float(stamp), frozenset(int(p) for p in parts.split(",") if p)))
            elif kind == "R":
                p, o, value = rest.split(" ", 2)
                led.processed.append((int(p), int(o), value))
            elif kind == "C":
                p, o = rest.split(" ")
                led.commits.append((int(p), int(o)))
            elif kind == "E":
                led.commit_errors.append(rest)
            elif kind == "X":
                led.exited = True
        return led

    def assignment(self) -> tuple[float, frozenset[int]]:
        """(when, partitions) of the latest assignment change; (0, {}) before the first."""
        a = self.ledger().assignments
        return a[-1] if a else (0.0, frozenset())

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"member {self.name} exited with {self.proc.returncode}:\n{self.stderr()}")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")[-4000:]

    def close(self, timeout: float = 30.0) -> None:
        """Ask the member to commit and leave; it must exit 0."""
        self.stop_file.touch()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"member {self.name} did not stop within {timeout:.0f}s:\n{self.stderr()}") from None
        assert rc == 0, f"member {self.name} exited with {rc}:\n{self.stderr()}"
        assert self.ledger().exited, f"member {self.name} did not finish cleanly:\n{self.stderr()}"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def reap(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _shared(members: list[MemberProcess]) -> bool:
    """Every partition owned by exactly one member, every member owning some."""
    for m in members:
        m.check_alive()
    sets = [m.assignment()[1] for m in members]
    return (all(sets) and frozenset().union(*sets) == frozenset(range(PARTITIONS))
            and sum(len(s) for s in sets) == PARTITIONS)


def _stable(admin: Admin, group: str, members: list[MemberProcess]) -> bool:
    return (_shared(members) and all(m.ledger().settled for m in members)
            and admin.describe_groups([group])[group].state == "Stable")


def _committed(admin: Admin, group: str, topic: str) -> dict[int, int | None]:
    got = admin.list_group_offsets(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    return {tp.partition: (om.offset if om is not None else None) for tp, om in got.items()}


def _drained(admin: Admin, group: str, topic: str, ends: dict[int, int]) -> bool:
    committed = _committed(admin, group, topic)
    past = {p: o for p, o in committed.items() if o is not None and o > ends[p]}
    assert not past, f"committed offsets past the end offsets {ends}: {past}"
    return committed == ends


# --------------------------------------------------------------------------- the scenario


# Eager rebalances (every member gives up everything and commits first) for each client;
# incremental ones (KIP-429: only the moved partitions are revoked, the others are consumed
# and committed throughout) for the two clients that have them.
CLIENTS = [("confluent", "range"), ("confluent", "cooperative-sticky"), ("kafka-python", "range"),
           ("kafka-python", "cooperative-sticky"), ("aiokafka", "range")]


@pytest.mark.parametrize("how", ["leave", "kill"])
@pytest.mark.parametrize(("client", "assignor"), CLIENTS, ids=[f"{c}-{a}" for c, a in CLIENTS])
def test_handover_skips_no_record(hbroker: BrokerProcess, topic_name: str, tmp_path: pathlib.Path,
                                  client: str, assignor: str, how: str) -> None:
    group = f"g-{topic_name}"
    session_ms = KILL_SESSION_MS if how == "kill" else LEAVE_SESSION_MS
    members: list[MemberProcess] = []
    with Admin(bootstrap_servers=hbroker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, PARTITIONS, 1)])
        producer = SequenceProducer(hbroker.bootstrap, topic_name).start()
        try:
            for i in range(3):
                members.append(MemberProcess(client, hbroker, group, topic_name, assignor, session_ms,
                                             tmp_path, f"m{i}"))
            # Each owns a share and commits: the group is at work, no rebalance under way.
            _wait(lambda: _stable(admin, group, members), "3 members to share the partitions and commit",
                  state=lambda: [(m.name, sorted(m.assignment()[1]), m.ledger().settled) for m in members])
            victim, survivors = members[2], members[:2]
            h = _hand_over(admin, group, topic_name, victim, survivors, how, session_ms)
            ends = producer.stop()
            _wait(lambda: _drained(admin, group, topic_name, ends), "the survivors to drain to the end",
                  state=lambda: (_committed(admin, group, topic_name), ends), every=0.5)
            for m in survivors:
                m.close()
            # Lag 0 once everybody is gone: the committed offsets are the log end offsets.
            assert admin.describe_groups([group])[group].state == "Empty"
            assert _committed(admin, group, topic_name) == ends
            latest = admin.list_offsets({TopicPartition(topic_name, p): "latest" for p in range(PARTITIONS)})
            assert {tp.partition: off for tp, (off, _) in latest.items()} == ends
        finally:
            producer.close()
            for m in members:
                m.reap()

    ledgers = {m.name: m.ledger() for m in members}
    _check_every_record_processed(ledgers, ends)
    # The new owners started each moved partition at the offset committed for it.
    for p, offset in h.resume.items():
        firsts = [o for m in survivors for q, o, _ in ledgers[m.name].processed[h.seen[m.name]:] if q == p]
        assert firsts and min(firsts) == offset, f"partition {p}: resumed at {min(firsts, default=None)}, not {offset}"
    # So the records the old owner processed after its last commit were read again (none
    # after a clean leave), and nothing else was.
    again = sum(1 for p, o, _ in ledgers[victim.name].processed if p in h.resume and o >= h.resume[p])
    duplicates = _duplicates(ledgers, victim.name, h.resume)
    assert duplicates == again, (duplicates, again)
    if how == "leave":
        assert duplicates == 0
    failed = {n: len(led.commit_errors) for n, led in ledgers.items() if led.commit_errors}
    print(f"\n{client} {assignor} {how}: {sum(ends.values())} records, handover of {sorted(h.moved)} in "
          f"{h.seconds:.2f}s, {duplicates} processed twice, failed commits {failed or 'none'}")


@dataclass
class Handover:
    moved: frozenset[int]
    resume: dict[int, int]  # moved partition -> the committed offset its new owner starts at
    seen: dict[str, int]  # survivor -> how many records it had processed before
    seconds: float


def _hand_over(admin: Admin, group: str, topic: str, victim: MemberProcess, survivors: list[MemberProcess],
               how: str, session_ms: int) -> Handover:
    """The victim leaves or is killed; the survivors take over its partitions in time and
    consume them."""
    moved = victim.assignment()[1]
    seen = {m.name: len(m.ledger().processed) for m in survivors}
    if how == "leave":
        start = time.monotonic()
        victim.close()
        left = victim.ledger()
        # Its close committed all it had processed: its last commits are where the others resume.
        resume = {p: o for p, o in left.commits if p in moved}
        for p in moved:
            done = [o for q, o, _ in left.processed if q == p]
            assert not done or resume.get(p) == max(done) + 1, (
                f"partition {p}: last commit {resume.get(p)}, processed up to {max(done)}; "
                f"failed commits: {left.commit_errors[-2:]}")
    else:
        # Killed between two periodic commits, with records processed since the last one.
        n = len(victim.ledger().commits)
        _wait(lambda: len(victim.ledger().commits) > n, "a periodic commit of the victim")
        time.sleep(COMMIT_INTERVAL_MS / 2000)
        start = time.monotonic()
        victim.kill()
        # Its partitions stay unowned for the session timeout: what is committed for them
        # now is what it committed last (the broker's word, not the member's log).
        time.sleep(1.0)
        committed = _committed(admin, group, topic)
        assert not any(m.assignment()[1] & moved for m in survivors), "moved within 1s of the kill"
        resume = {p: o for p, o in committed.items() if p in moved and o is not None}
        logged = {p: o for p, o in victim.ledger().commits if p in moved}
        assert all(resume.get(p, 0) >= o for p, o in logged.items()), (resume, logged)
    limit = REBALANCE_SLACK_S + (session_ms / 1000 if how == "kill" else 0)
    _wait(lambda: _shared(survivors), f"the survivors to take over {sorted(moved)}", timeout=limit + 30,
          state=lambda: [(m.name, sorted(m.assignment()[1])) for m in survivors])
    seconds = max(m.assignment()[0] for m in survivors) - start
    assert seconds < limit, f"took {seconds:.1f}s to move {sorted(moved)} (limit {limit:.0f}s)"
    if how == "leave":
        # Well within the session timeout: LeaveGroup, not expiry, moved them.
        assert seconds < session_ms / 1000, seconds
    # The new owners consume the moved partitions while records keep coming.
    commits = {m.name: len(m.ledger().commits) for m in survivors}
    _wait(lambda: moved <= {p for m in survivors for p, _ in m.ledger().commits[commits[m.name]:]},
          "the new owners to commit the moved partitions")
    return Handover(moved, resume, seen, seconds)


def _check_every_record_processed(ledgers: dict[str, Ledger], ends: dict[int, int]) -> None:
    seen: dict[int, set[int]] = collections.defaultdict(set)
    for name, led in ledgers.items():
        for p, o, value in led.processed:
            assert value == f"{p}:{o}", f"{name} read {value!r} at offset {o} of partition {p}"
            seen[p].add(o)
    for p in range(PARTITIONS):
        missing = sorted(set(range(ends[p])) - seen[p])
        assert not missing, f"partition {p}: {len(missing)} records never processed, first {missing[:10]}"
        assert max(seen[p]) == ends[p] - 1, f"partition {p}: read past the end offset {ends[p]}"


def _duplicates(ledgers: dict[str, Ledger], victim: str, resume: dict[int, int]) -> int:
    """How many records were processed twice. Only records the victim processed after the
    last commit of their partition (``resume``) may be: anything else fails the test."""
    times: collections.Counter[tuple[int, int]] = collections.Counter()
    for led in ledgers.values():
        times.update((p, o) for p, o, _ in led.processed)
    by_victim = {(p, o) for p, o, _ in ledgers[victim].processed}
    extra = 0
    for (p, o), n in sorted(times.items()):
        if n == 1:
            continue
        assert n == 2 and (p, o) in by_victim and p in resume and o >= resume[p], (
            f"offset {o} of partition {p} processed {n} times "
            f"({'' if (p, o) in by_victim else 'not '}by the member that left, whose last commit "
            f"there was {resume.get(p)})")
        extra += 1
    return extra
