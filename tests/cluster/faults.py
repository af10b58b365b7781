"""The seeded fault run: faults at random moments under running producers and consumers, then
the verification of every acknowledged record and of every replica.

``run_seed(seed, duration, base, workload=...)`` starts a cluster (``harness.Cluster``), a
topic with replication factor 3 and ``min.insync.replicas=2``, the workload's producers and
consumers (one confluent-kafka and one kafka-python of each), then injects faults chosen
by ``random.Random(seed)`` until ``duration`` seconds have passed and at least ``min_faults``
faults were injected. The workloads (``WORKLOADS``):

- ``plain``: idempotent acks=all producers, read_uncommitted consumers, the checks below;
- ``compact``: keyed idempotent acks=all producers (tombstones too) on a
  ``cleanup.policy=compact`` topic with small segments and a cleaner that runs every 200 ms,
  checked per key (``compacted.py``);
- ``txn``: transactional producers committing most transactions and aborting some, across
  the partitions, read_committed consumers, checked per transaction (``transactional.py``);
  the faults include ``kill-coordinator`` (SIGKILL of the producers' transaction
  coordinator, the leader of their ``__transaction_state`` partition).
 The kinds are drawn as shuffled rounds (every kind once per round, in a
seeded order) so a short run still covers them all; the moment of each fault is a seeded delay
after the cluster is healthy again. One fault at a time: with three replicas and min ISR 2 no
acknowledged record may be lost, whichever single broker (or ZooKeeper) fails.

At the end of a ``plain`` run (producers flushed, every broker back): each partition is read
from its leader from offset 0 and must hold every acknowledged record exactly once at the offset its delivery
report gave, each producer's records in order, offsets dense; what the live consumers saw must
agree with it offset by offset; then the brokers are stopped and every replica's log is read
with logcore below the high watermark: the bytes must be identical on all three brokers.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import pathlib
import random
import socket
import time
import warnings
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

import logcore
from pylog.txn.config import partition_for

from .compacted import check_compacted, check_compacted_consumers, compare_compacted_replicas
from .harness import SESSION_MS, Cluster, wait_for
from .transactional import (
    ConfluentTxnProducer,
    KafkaPythonTxnProducer,
    Ledger,
    check_transactions,
    check_txn_consumers,
)
from .workload import (
    Acks,
    ConfluentConsumer,
    ConfluentProducer,
    KafkaPythonConsumer,
    KafkaPythonProducer,
    Record,
    Seen,
    parse_value,
)

TOPIC = "harness"
PARTITIONS = 3
RATE = 150.0  # records per second per producer
TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 3


@dataclasses.dataclass
class Figures:
    """What one seed did and found. ``ok`` when nothing was lost, duplicated, reordered or
    diverged and every consumer agreed with the final log."""

    seed: int
    workload: str = "plain"
    seconds: float = 0.0
    faults: list[str] = dataclasses.field(default_factory=list)
    sent: int = 0
    acknowledged: int = 0
    failed: int = 0
    lost: int = 0
    # acknowledged with no offset (confluent-kafka's msg.offset() None): librdkafka does
    # that when a retried batch is answered DUPLICATE_SEQUENCE_NUMBER, which pylog never
    # sends; seen once in CI under a load average of 20. Such a record is looked up by
    # value in its partition: lost only if it is not there.
    acked_without_offset: int = 0
    duplicates: int = 0
    reordered: int = 0
    gaps: int = 0
    diverged_replicas: int = 0
    consumer_mismatches: int = 0
    # compact: keys checked, tombstones acknowledged, acknowledged records the cleaner
    # removed (superseded), replicas compared by bytes / by records
    keys: int = 0
    tombstones: int = 0
    cleaned: int = 0
    replicas_identical: int = 0
    replicas_by_records: int = 0
    # txn: transactions by outcome, records of committed ones, aborted records visible,
    # in-doubt transactions partly visible, producers made again
    transactions: dict[str, int] = dataclasses.field(default_factory=dict)
    aborted_visible: int = 0
    partial_transactions: int = 0
    restarts: int = 0
    consumed: dict[str, int] = dataclasses.field(default_factory=dict)
    client_errors: list[str] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)  # delivery errors
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.reordered or self.gaps
                    or self.diverged_replicas or self.consumer_mismatches
                    or self.aborted_visible or self.partial_transactions or self.problems)

    def summary(self) -> str:
        kinds = collections.Counter(f.split(" ", 1)[0] for f in self.faults)
        lines = [
            f"seed {self.seed} ({self.workload}): {self.seconds:.0f} s, faults injected "
            f"{len(self.faults)} ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})",
        ]
        if self.workload == "txn":
            t = self.transactions
            lines.append(f"  transactions committed {t.get('committed', 0)} "
                         f"({self.acknowledged} records), aborted {t.get('aborted', 0)}, "
                         f"in doubt {t.get('in-doubt', 0)}; producers made again "
                         f"{self.restarts}")
        else:
            lines.append(f"  records sent {self.sent}, acknowledged {self.acknowledged}, "
                         f"not acknowledged {self.failed}")
        if self.workload == "compact":
            lines.append(f"  keys {self.keys}, tombstones acknowledged {self.tombstones}, "
                         f"acknowledged records cleaned away (superseded) {self.cleaned}, "
                         f"replicas byte-identical {self.replicas_identical}, compared by "
                         f"records {self.replicas_by_records}")
        lines += [
            f"  lost {self.lost}, duplicates {self.duplicates}, reordered {self.reordered}, "
            f"offset gaps {self.gaps}, diverged replicas {self.diverged_replicas}, "
            f"consumer mismatches {self.consumer_mismatches}"
            + (f", acknowledged without an offset {self.acked_without_offset}"
               if self.acked_without_offset else "")
            + (f", aborted records visible {self.aborted_visible}, in-doubt transactions "
               f"partly visible {self.partial_transactions}" if self.workload == "txn" else ""),
            f"  consumed {', '.join(f'{k} {v}' for k, v in sorted(self.consumed.items()))}",
        ]
        if self.failures:
            lines.append(f"  {'client errors met' if self.workload == 'txn' else 'not acknowledged because'}: "
                         f"{'; '.join(sorted(set(self.failures))[:3])}")
        if self.client_errors:
            lines.append(f"  client exceptions worked around {len(self.client_errors)}: "
                         f"{'; '.join(sorted(set(self.client_errors))[:5])}")
        lines += [f"  PROBLEM: {p}" for p in self.problems[:20]]
        lines.append(f"  {'OK' if self.ok else 'FAILED'}")
        return "\n".join(lines)


# -- faults ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Scope:
    """What the faults aim at: ``targets``, the (topic, partition)s whose leaders and
    followers are killed; ``topics``, whose partitions must be led with a full ISR before
    the next fault; ``transactional_ids``, whose coordinators ``kill-coordinator`` kills."""

    targets: list[tuple[str, int]]
    topics: dict[str, int]
    transactional_ids: list[str] = dataclasses.field(default_factory=list)


def _kill_leader_of(cluster: Cluster, rng: random.Random, topic: str, p: int) -> int:
    victim = cluster.state(topic, p).leader
    cluster.brokers[victim].kill()
    wait_for(lambda: (st := cluster.state(topic, p)) and st.leader not in (victim, -1),
             SESSION_MS / 1000 + 60, f"a new leader for {topic}-{p}")
    time.sleep(rng.uniform(0, 2))
    cluster.restart(victim)
    return victim


def fault_kill_leader(cluster: Cluster, rng: random.Random, scope: Scope) -> str:
    topic, p = scope.targets[rng.randrange(len(scope.targets))]
    victim = _kill_leader_of(cluster, rng, topic, p)
    where = f"partition {p}" if topic == TOPIC else f"{topic}-{p}"
    return f"kill-leader broker {victim} (leader of {where})"


def fault_kill_coordinator(cluster: Cluster, rng: random.Random, scope: Scope) -> str:
    tid = rng.choice(scope.transactional_ids)
    p = partition_for(tid, TXN_STATE_PARTITIONS)
    victim = _kill_leader_of(cluster, rng, TXN_STATE, p)
    return f"kill-coordinator broker {victim} (coordinator of {tid}, {TXN_STATE}-{p})"


def fault_kill_controller(cluster: Cluster, rng: random.Random, scope: Scope) -> str:
    victim = wait_for(lambda: (c := cluster.controller()) is not None and (c,), 30,
                      "a controller")[0]
    cluster.brokers[victim].kill()
    wait_for(lambda: (c := cluster.controller()) is not None and c != victim,
             SESSION_MS / 1000 + 60, "a new controller")
    time.sleep(rng.uniform(0, 2))
    cluster.restart(victim)
    return f"kill-controller broker {victim}"


def fault_kill_follower(cluster: Cluster, rng: random.Random, scope: Scope) -> str:
    topic, p = scope.targets[rng.randrange(len(scope.targets))]
    st = cluster.state(topic, p)
    followers = [b for b in st.isr if b != st.leader]
    victim = rng.choice(followers)
    cluster.brokers[victim].kill()
    time.sleep(rng.uniform(0, SESSION_MS / 1000 + 2))
    cluster.restart(victim)
    where = f"partition {p}" if topic == TOPIC else f"{topic}-{p}"
    return f"kill-follower broker {victim} (follower of {where})"


def fault_pause(cluster: Cluster, rng: random.Random, scope: Scope) -> str:
    victim = rng.choice(cluster.ids)
    hang = SESSION_MS / 1000 + rng.uniform(1, 4)
    cluster.brokers[victim].pause()
    time.sleep(hang)
    cluster.brokers[victim].resume()
    return f"pause broker {victim} SIGSTOP for {hang:.1f} s then SIGCONT"


def fault_zookeeper_restart(cluster: Cluster, rng: random.Random, scope: Scope) -> str:
    hard = rng.random() < 0.5
    if hard:
        cluster.zk.kill()
    else:
        cluster.zk.stop()
    down = rng.uniform(0.5, 3)
    time.sleep(down)
    cluster.zk.start()
    return f"zookeeper-restart ({'SIGKILL' if hard else 'SIGTERM'}, down {down:.1f} s)"


def fault_rolling_restart(cluster: Cluster, rng: random.Random, scope: Scope) -> str:
    order = rng.sample(cluster.ids, len(cluster.ids))
    codes = []
    for b in order:
        rc = cluster.brokers[b].stop()
        codes.append(rc)
        cluster.restart(b)
        cluster.wait_healthy(scope.topics)
    bad = [(b, rc) for b, rc in zip(order, codes, strict=True) if rc != 0]
    if bad:
        raise AssertionError(f"rolling restart: brokers exited uncleanly on SIGTERM: {bad}")
    return f"rolling-restart order {order} (controlled shutdown)"


Fault = Callable[[Cluster, random.Random, Scope], str]

FAULTS: dict[str, Fault] = {
    "kill-leader": fault_kill_leader,
    "kill-controller": fault_kill_controller,
    "kill-follower": fault_kill_follower,
    "pause": fault_pause,
    "zookeeper-restart": fault_zookeeper_restart,
    "rolling-restart": fault_rolling_restart,
}
TXN_FAULTS: dict[str, Fault] = {**FAULTS, "kill-coordinator": fault_kill_coordinator}


def fault_plan(rng: random.Random, faults: dict[str, Fault]):  # type: ignore[no-untyped-def]
    """Kinds in shuffled rounds: every kind once per round, the order seeded."""
    while True:
        kinds = sorted(faults)
        rng.shuffle(kinds)
        yield from kinds


# -- verification ---------------------------------------------------------------------------

def read_all(bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS,
             isolation: str = "read_uncommitted", timeout: float = 120.0,
             ) -> tuple[dict[int, list[Record]], dict[int, int]]:
    """Every record of every partition from offset 0 up to the high watermark (for
    read_committed: the last stable offset, the same once no transaction is open), and the
    high watermarks. A partition is read when the consumer reaches its end (partition EOF
    at or past the high watermark taken before)."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "harness-verify",
                                  "enable.auto.commit": False, "enable.partition.eof": True,
                                  "isolation.level": isolation})
    try:
        ends = {p: c.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p),
                                           timeout=30)[1] for p in range(partitions)}
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in range(partitions)])
        got: dict[int, list[Record]] = {p: [] for p in range(partitions)}
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"final read of {topic} incomplete: high watermarks "
                                     f"{ends}, read {({p: len(v) for p, v in got.items()})}, "
                                     f"at the end of {sorted(done)}")
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF and \
                        m.offset() >= ends[m.partition()]:
                    done.add(m.partition())
                continue
            got[m.partition()].append((m.offset(), m.key(), m.value()))
        return got, ends
    finally:
        c.close()


def check_log(figures: Figures, acks: Acks, final: dict[int, list[Record]]) -> None:
    for p, recs in final.items():
        offsets = [o for o, _k, _v in recs]
        if offsets != list(range(len(offsets))):
            figures.gaps += sum(1 for i, o in enumerate(offsets) if o != i)
            figures.problems.append(f"partition {p}: offsets not dense from 0")
        by_offset = {o: v for o, _k, v in recs}
        counts = collections.Counter(v for _o, _k, v in recs)
        dups = [v for v, n in counts.items() if n > 1]
        figures.duplicates += sum(counts[v] - 1 for v in dups)
        for v in dups[:3]:
            figures.problems.append(f"partition {p}: {v!r:.24} appears {counts[v]} times")
        last: dict[str, int] = {}
        for o, _k, v in recs:
            assert v is not None
            producer, seq = parse_value(v)
            if seq <= last.get(producer, -1):
                figures.reordered += 1
                figures.problems.append(f"partition {p} offset {o}: {producer} seq {seq} "
                                        f"after seq {last[producer]}")
            last[producer] = seq
        values = None
        for o, _k, v in acks.acked.get(p, []):
            if o is None:
                figures.acked_without_offset += 1
                if values is None:
                    values = set(counts)
                if v in values:
                    continue
            if by_offset.get(o) != v:
                figures.lost += 1
                if figures.lost <= 5:
                    figures.problems.append(
                        f"partition {p}: acknowledged {v!r:.24} at offset {o}, the log has "
                        f"{by_offset.get(o, b'nothing')!r:.24}")


def check_consumers(figures: Figures, seen: dict[str, Seen],
                    final: dict[int, list[Record]]) -> None:
    for name, s in seen.items():
        total = 0
        for p, recs in s.records.items():
            by_offset = {o: v for o, _k, v in final[p]}
            for o, _k, v in recs:
                if by_offset.get(o) != v:
                    figures.consumer_mismatches += 1
                    if figures.consumer_mismatches <= 5:
                        figures.problems.append(f"{name} read {v!r:.24} at partition {p} "
                                                f"offset {o}; the final log differs there")
            total += len(recs)
            if s.position(p) != len(final[p]):
                figures.problems.append(f"{name} stopped at offset {s.position(p)} of "
                                        f"partition {p}, the high watermark is {len(final[p])}")
        figures.consumed[name] = total
        figures.problems += [f"{name}: {e}" for e in s.errors]
        figures.client_errors += [f"{name}: {e}" for e in s.client_errors]


def read_replica(figures: Figures, directory: pathlib.Path, hw: int) -> bytes:
    """A replica's batches below the high watermark, every segment (brokers stopped)."""
    chunks = []
    with logcore.ReadOnlyLog(str(directory), max_offset=hw) as log:
        if log.log_end_offset < hw:
            figures.problems.append(f"{directory.parent.name} {directory.name}: log ends at "
                                    f"{log.log_end_offset}, below the high watermark {hw}")
        offset = log.log_start_offset
        while offset < min(hw, log.log_end_offset):
            region = log.read(offset, 1 << 30)
            if not region:
                break
            chunks.append(region.read())
            offset = region.last_offset + 1
    return b"".join(chunks)


def replica_records(data: bytes) -> list[Record]:
    return [(r.offset, r.key, r.value) for b in logcore.iter_batches(data) for r in b]


def check_replicas(figures: Figures, cluster: Cluster, topic: str, hw: dict[int, int],
                   compacted: bool = False) -> None:
    """Every replica's bytes below the high watermark are identical (brokers stopped); for a
    compacted topic whose bytes differ, its records are compared (``compacted.py``)."""
    for p in range(len(hw)):
        datas = {b.broker_id: read_replica(figures, b.data_dir / f"{topic}-{p}", hw[p])
                 for b in cluster.brokers}
        reference = datas[min(datas)]
        if compacted:
            compare_compacted_replicas(
                figures, p, {bid: replica_records(d) for bid, d in datas.items()},
                byte_identical=all(d == reference for d in datas.values()))
            continue
        for bid, data in datas.items():
            if data != reference:
                figures.diverged_replicas += 1
                at = next((i for i, (x, y) in enumerate(zip(data, reference, strict=False))
                           if x != y), min(len(data), len(reference)))
                figures.problems.append(f"{topic}-{p}: broker {bid}'s replica differs from "
                                        f"broker {min(datas)}'s at byte {at} ({len(data)} vs "
                                        f"{len(reference)} bytes below the high watermark)")


# -- workloads ------------------------------------------------------------------------------

class Workload:
    """One workload of the harness: its topic, producers and consumers, what the faults aim
    at, and its checks."""

    name = ""
    topic = TOPIC
    faults: dict[str, Fault] = FAULTS
    broker_overrides: dict[str, str] = {}
    topic_config: dict[str, str] = {"min.insync.replicas": "2"}

    def __init__(self, seed: int, bootstrap: str) -> None:
        self.seed, self.bootstrap = seed, bootstrap
        self.producers: list[Any] = []
        self.consumers: list[Any] = []
        self.seen: dict[str, Seen] = {}
        self.final: dict[int, list[Record]] = {}
        self.hw: dict[int, int] = {}

    def scope(self) -> Scope:
        return Scope([(self.topic, p) for p in range(PARTITIONS)], {self.topic: PARTITIONS})

    def create(self, admin: AdminClient) -> None:
        admin.create_topics([NewTopic(self.topic, PARTITIONS, 3, config=self.topic_config)]
                            )[self.topic].result(60)

    def progress(self) -> int:
        raise NotImplementedError

    def read_final(self) -> None:
        """The final read (producers done, brokers up), then the consumers catch up."""
        self.final, self.hw = read_all(self.bootstrap, self.topic)
        self.wait_consumers()

    def wait_consumers(self, timeout: float = 120) -> None:
        """The consumers run until they reach the last record read (the check reports one
        that does not)."""
        ends = {p: recs[-1][0] + 1 if recs else 0 for p, recs in self.final.items()}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(c.is_alive() for c in self.consumers) and \
                not all(s.position(p) >= ends[p] for s in self.seen.values() for p in ends):
            time.sleep(0.5)

    def verify(self, figures: Figures) -> None:
        """Checks the final read and what the consumers saw (workers stopped)."""
        raise NotImplementedError

    def verify_replicas(self, figures: Figures, cluster: Cluster, hw: dict[int, int]) -> None:
        check_replicas(figures, cluster, self.topic, hw)


class PlainWorkload(Workload):
    """Idempotent acks=all producers (150 records/s each), read_uncommitted consumers."""

    name = "plain"

    def __init__(self, seed: int, bootstrap: str) -> None:
        super().__init__(seed, bootstrap)
        self.acks = Acks()
        self.seen = {"confluent-consumer": Seen(), "kafka-python-consumer": Seen()}
        self.producers = [
            ConfluentProducer("cp", bootstrap, self.topic, PARTITIONS, seed, RATE, self.acks),
            KafkaPythonProducer("kp", bootstrap, self.topic, PARTITIONS, seed, RATE, self.acks)]
        self.consumers = [
            ConfluentConsumer("confluent-consumer", bootstrap, self.topic, PARTITIONS,
                              self.seen["confluent-consumer"]),
            KafkaPythonConsumer("kafka-python-consumer", bootstrap, self.topic, PARTITIONS,
                                self.seen["kafka-python-consumer"])]

    def progress(self) -> int:
        return self.acks.count

    def settle(self, figures: Figures) -> None:
        figures.sent, figures.acknowledged = self.acks.sent, self.acks.count
        figures.failed, figures.failures = len(self.acks.failed), list(self.acks.failed)
        figures.problems += [f"fatal producer error: {e}" for e in self.acks.fatal]

    def verify(self, figures: Figures) -> None:
        self.settle(figures)
        check_log(figures, self.acks, self.final)
        check_consumers(figures, self.seen, self.final)


class CompactWorkload(PlainWorkload):
    """Keyed idempotent acks=all producers (100 records/s each over 300 keys, 5 % tombstones,
    batches of 8 KiB at most) on a compacted topic whose segments roll every 32 KiB or 2 s, cleaned as soon as 1 % is
    dirty, by cleaners looking every 200 ms; read_uncommitted consumers."""

    name = "compact"
    topic = "compacted"
    keys = 300
    rate = 100.0
    broker_overrides = {"log.cleaner.backoff.ms": "200"}
    topic_config = {"min.insync.replicas": "2", "cleanup.policy": "compact",
                    "segment.bytes": "32768", "segment.ms": "2000",
                    "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
                    # Longer than any replica is away (a killed broker is back within
                    # the session timeout and a restart): a replica that misses a
                    # tombstone for longer may keep the value it deletes, as in Kafka.
                    "delete.retention.ms": "60000", "file.delete.delay.ms": "1000"}

    def __init__(self, seed: int, bootstrap: str) -> None:
        Workload.__init__(self, seed, bootstrap)
        self.acks = Acks()
        self.seen = {"confluent-consumer": Seen(), "kafka-python-consumer": Seen()}
        self.producers = [
            ConfluentProducer("cp", bootstrap, self.topic, PARTITIONS, seed, self.rate,
                              self.acks, keys=self.keys),
            KafkaPythonProducer("kp", bootstrap, self.topic, PARTITIONS, seed, self.rate,
                                self.acks, keys=self.keys)]
        self.consumers = [
            ConfluentConsumer("confluent-consumer", bootstrap, self.topic, PARTITIONS,
                              self.seen["confluent-consumer"]),
            KafkaPythonConsumer("kafka-python-consumer", bootstrap, self.topic, PARTITIONS,
                                self.seen["kafka-python-consumer"])]

    def verify(self, figures: Figures) -> None:
        self.settle(figures)
        check_compacted(figures, self.acks, self.final, self.hw)
        check_compacted_consumers(figures, self.seen, self.final)

    def verify_replicas(self, figures: Figures, cluster: Cluster, hw: dict[int, int]) -> None:
        check_replicas(figures, cluster, self.topic, hw, compacted=True)


class TxnWorkload(PlainWorkload):
    """Transactional producers (confluent-kafka and kafka-python, 8 transactions/s each at
    most, 2-6 records across the partitions, one in five aborted), read_committed
    consumers; the faults include ``kill-coordinator``."""

    name = "txn"
    topic = "txn"
    rate = 8.0
    faults = TXN_FAULTS
    broker_overrides = {"transaction.state.log.num.partitions": str(TXN_STATE_PARTITIONS),
                        "transaction.state.log.replication.factor": "3",
                        "transaction.state.log.min.isr": "2"}

    def __init__(self, seed: int, bootstrap: str) -> None:
        Workload.__init__(self, seed, bootstrap)
        self.ledger = Ledger()
        self.seen = {"confluent-consumer": Seen(), "kafka-python-consumer": Seen()}
        self.producers = [
            ConfluentTxnProducer("ct", bootstrap, self.topic, PARTITIONS, seed, self.rate,
                                 self.ledger),
            KafkaPythonTxnProducer("kt", bootstrap, self.topic, PARTITIONS, seed, self.rate,
                                   self.ledger)]
        self.consumers = [
            ConfluentConsumer("confluent-consumer", bootstrap, self.topic, PARTITIONS,
                              self.seen["confluent-consumer"], isolation="read_committed"),
            KafkaPythonConsumer("kafka-python-consumer", bootstrap, self.topic, PARTITIONS,
                                self.seen["kafka-python-consumer"], isolation="read_committed")]

    def scope(self) -> Scope:
        return Scope([(self.topic, p) for p in range(PARTITIONS)],
                     {self.topic: PARTITIONS, TXN_STATE: TXN_STATE_PARTITIONS},
                     [p.transactional_id for p in self.producers])

    def progress(self) -> int:
        return self.ledger.count("committed")

    def read_final(self) -> None:
        self.final, self.hw = read_all(self.bootstrap, self.topic, isolation="read_committed")
        self.wait_consumers()

    def verify(self, figures: Figures) -> None:
        committed = [t for t in self.ledger.txns.values() if t.outcome == "committed"]
        figures.acknowledged = sum(len(t.records) for t in committed)
        figures.transactions = dict(collections.Counter(
            t.outcome for t in self.ledger.txns.values()))
        figures.restarts = self.ledger.restarts
        figures.client_errors += [f"init_transactions failed, a new producer made: {e}"
                                  for e in self.ledger.errors if " init: " in e]
        figures.client_errors += [e for w in self.producers
                                  for e in self.ledger.errors
                                  if e.startswith(f"{w.name}: RuntimeError('commit_transaction")]
        figures.failures = list(self.ledger.errors)
        check_transactions(figures, self.ledger, self.final)
        check_txn_consumers(figures, self.ledger, self.seen, self.final)


WORKLOADS: dict[str, type[Workload]] = {
    "plain": PlainWorkload, "compact": CompactWorkload, "txn": TxnWorkload}


# -- one seed -------------------------------------------------------------------------------

def run_seed(seed: int, duration: float, base: pathlib.Path, min_faults: int = 0,
             log: Callable[[str], None] = print, workload: str = "plain") -> Figures:
    """One seed (see the module docstring); the figures, whatever they show."""
    # kafka-python keeps the sockets of refused connections (a broker down) without closing
    # them, even after close(); their ResourceWarnings would surface in whatever test runs
    # when they are finally collected. They are the client's, not the cluster's: ignored
    # during the run, and the ones left (never connected, not listening) closed after it.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ResourceWarning,
                                message="unclosed <socket")
        try:
            return _run_seed(seed, duration, base, min_faults, log, workload)
        finally:
            gc.collect()
            _close_stray_sockets()


def _close_stray_sockets() -> None:
    for obj in gc.get_objects():
        # type(), not isinstance(): the heap holds weak proxies whose referent is gone.
        if type(obj) is not socket.socket or obj.fileno() < 0:
            continue
        try:
            if obj.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                continue
            obj.getpeername()
        except OSError:
            obj.close()  # a connect that never succeeded


def _run_seed(seed: int, duration: float, base: pathlib.Path, min_faults: int,
              log: Callable[[str], None], workload_name: str) -> Figures:
    rng = random.Random(seed)
    figures = Figures(seed, workload_name)
    kind = WORKLOADS[workload_name]
    started = time.monotonic()
    with Cluster(base, overrides=kind.broker_overrides) as cluster:
        work = kind(seed, cluster.bootstrap)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        work.create(admin)
        scope = work.scope()
        cluster.wait_healthy({work.topic: PARTITIONS})
        workers = [*work.producers, *work.consumers]
        for w in workers:
            w.start()
        try:
            plan = fault_plan(rng, work.faults)
            while (time.monotonic() - started < duration or len(figures.faults) < min_faults):
                time.sleep(rng.uniform(0.5, 4.0))  # the moment: a seeded delay once healthy
                cluster.wait_healthy(scope.topics)  # internal topics made since
                kind_name = next(plan)
                before = work.progress()
                what = work.faults[kind_name](cluster, rng, scope)
                cluster.wait_healthy(scope.topics, timeout=180)
                figures.faults.append(what)
                log(f"seed {seed}: {what}; acknowledged {work.progress()} "
                    f"(+{work.progress() - before})")
            for w in work.producers:
                w.stop()
            for w in work.producers:
                w.join(240)
                if w.is_alive():
                    figures.problems.append(f"producer {w.name} did not finish flushing")
            work.read_final()
        except Exception:
            for w in workers:
                w.stop()
            raise
        finally:
            for w in work.consumers:
                w.stop()
            for w in workers:
                w.join(60)
        for w in workers:
            if w.error is not None:
                figures.problems.append(f"{w.name} failed: {w.error!r}")
        work.verify(figures)
        codes = cluster.stop_brokers()
        if any(rc != 0 for rc in codes.values()):
            figures.problems.append(f"brokers exited uncleanly on SIGTERM: {codes}")
        work.verify_replicas(figures, cluster, work.hw)
    figures.seconds = time.monotonic() - started
    return figures
