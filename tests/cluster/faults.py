"""The seeded fault run: faults at random moments under running producers and consumers, then
the verification of every acknowledged record and of every replica's bytes.

``run_seed(seed, duration, base)`` starts a cluster (``harness.Cluster``), a topic with
replication factor 3 and ``min.insync.replicas=2``, two idempotent acks=all producers
(confluent-kafka and kafka-python) and two consumers (one of each), then injects faults chosen
by ``random.Random(seed)`` until ``duration`` seconds have passed and at least ``min_faults``
faults were injected. The kinds are drawn as shuffled rounds (every kind once per round, in a
seeded order) so a short run still covers them all; the moment of each fault is a seeded delay
after the cluster is healthy again. One fault at a time: with three replicas and min ISR 2 no
acknowledged record may be lost, whichever single broker (or ZooKeeper) fails.

At the end (producers flushed, every broker back): each partition is read from its leader
from offset 0 and must hold every acknowledged record exactly once at the offset its delivery
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

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

import logcore

from .harness import SESSION_MS, Cluster, wait_for
from .workload import (
    Acks,
    ConfluentConsumer,
    ConfluentProducer,
    KafkaPythonConsumer,
    KafkaPythonProducer,
    Seen,
    parse_value,
)

TOPIC = "harness"
PARTITIONS = 3
RATE = 150.0  # records per second per producer


@dataclasses.dataclass
class Figures:
    """What one seed did and found. ``ok`` when nothing was lost, duplicated, reordered or
    diverged and every consumer agreed with the final log."""

    seed: int
    seconds: float = 0.0
    faults: list[str] = dataclasses.field(default_factory=list)
    sent: int = 0
    acknowledged: int = 0
    failed: int = 0
    lost: int = 0
    duplicates: int = 0
    reordered: int = 0
    gaps: int = 0
    diverged_replicas: int = 0
    consumer_mismatches: int = 0
    consumed: dict[str, int] = dataclasses.field(default_factory=dict)
    client_errors: list[str] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)  # delivery errors
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.reordered or self.gaps
                    or self.diverged_replicas or self.consumer_mismatches or self.problems)

    def summary(self) -> str:
        kinds = collections.Counter(f.split(" ", 1)[0] for f in self.faults)
        lines = [
            f"seed {self.seed}: {self.seconds:.0f} s, faults injected {len(self.faults)} "
            f"({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})",
            f"  records sent {self.sent}, acknowledged {self.acknowledged}, "
            f"not acknowledged {self.failed}",
            f"  lost {self.lost}, duplicates {self.duplicates}, reordered {self.reordered}, "
            f"offset gaps {self.gaps}, diverged replicas {self.diverged_replicas}, "
            f"consumer mismatches {self.consumer_mismatches}",
            f"  consumed {', '.join(f'{k} {v}' for k, v in sorted(self.consumed.items()))}",
        ]
        if self.failures:
            lines.append(f"  not acknowledged because: {'; '.join(sorted(set(self.failures))[:3])}")
        if self.client_errors:
            lines.append(f"  client exceptions worked around {len(self.client_errors)}: "
                         f"{'; '.join(sorted(set(self.client_errors))[:5])}")
        lines += [f"  PROBLEM: {p}" for p in self.problems[:20]]
        lines.append(f"  {'OK' if self.ok else 'FAILED'}")
        return "\n".join(lines)


# -- faults ---------------------------------------------------------------------------------

def _leader_of(cluster: Cluster, rng: random.Random) -> tuple[int, int]:
    p = rng.randrange(PARTITIONS)
    return p, cluster.state(TOPIC, p).leader


def fault_kill_leader(cluster: Cluster, rng: random.Random) -> str:
    p, victim = _leader_of(cluster, rng)
    cluster.brokers[victim].kill()
    wait_for(lambda: (st := cluster.state(TOPIC, p)) and st.leader not in (victim, -1),
             SESSION_MS / 1000 + 60, f"a new leader for partition {p}")
    time.sleep(rng.uniform(0, 2))
    cluster.restart(victim)
    return f"kill-leader broker {victim} (leader of partition {p})"


def fault_kill_controller(cluster: Cluster, rng: random.Random) -> str:
    victim = wait_for(lambda: (c := cluster.controller()) is not None and (c,), 30,
                      "a controller")[0]
    cluster.brokers[victim].kill()
    wait_for(lambda: (c := cluster.controller()) is not None and c != victim,
             SESSION_MS / 1000 + 60, "a new controller")
    time.sleep(rng.uniform(0, 2))
    cluster.restart(victim)
    return f"kill-controller broker {victim}"


def fault_kill_follower(cluster: Cluster, rng: random.Random) -> str:
    p = rng.randrange(PARTITIONS)
    st = cluster.state(TOPIC, p)
    followers = [b for b in st.isr if b != st.leader]
    victim = rng.choice(followers)
    cluster.brokers[victim].kill()
    time.sleep(rng.uniform(0, SESSION_MS / 1000 + 2))
    cluster.restart(victim)
    return f"kill-follower broker {victim} (follower of partition {p})"


def fault_pause(cluster: Cluster, rng: random.Random) -> str:
    victim = rng.choice(cluster.ids)
    hang = SESSION_MS / 1000 + rng.uniform(1, 4)
    cluster.brokers[victim].pause()
    time.sleep(hang)
    cluster.brokers[victim].resume()
    return f"pause broker {victim} SIGSTOP for {hang:.1f} s then SIGCONT"


def fault_zookeeper_restart(cluster: Cluster, rng: random.Random) -> str:
    hard = rng.random() < 0.5
    if hard:
        cluster.zk.kill()
    else:
        cluster.zk.stop()
    down = rng.uniform(0.5, 3)
    time.sleep(down)
    cluster.zk.start()
    return f"zookeeper-restart ({'SIGKILL' if hard else 'SIGTERM'}, down {down:.1f} s)"


def fault_rolling_restart(cluster: Cluster, rng: random.Random) -> str:
    order = rng.sample(cluster.ids, len(cluster.ids))
    codes = []
    for b in order:
        rc = cluster.brokers[b].stop()
        codes.append(rc)
        cluster.restart(b)
        cluster.wait_healthy({TOPIC: PARTITIONS})
    bad = [(b, rc) for b, rc in zip(order, codes, strict=True) if rc != 0]
    if bad:
        raise AssertionError(f"rolling restart: brokers exited uncleanly on SIGTERM: {bad}")
    return f"rolling-restart order {order} (controlled shutdown)"


FAULTS: dict[str, Callable[[Cluster, random.Random], str]] = {
    "kill-leader": fault_kill_leader,
    "kill-controller": fault_kill_controller,
    "kill-follower": fault_kill_follower,
    "pause": fault_pause,
    "zookeeper-restart": fault_zookeeper_restart,
    "rolling-restart": fault_rolling_restart,
}


def fault_plan(rng: random.Random):  # type: ignore[no-untyped-def]
    """Kinds in shuffled rounds: every kind once per round, the order seeded."""
    while True:
        kinds = sorted(FAULTS)
        rng.shuffle(kinds)
        yield from kinds


# -- verification ---------------------------------------------------------------------------

def read_all(bootstrap: str, timeout: float = 120.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every committed record of every partition, from offset 0 up to the high watermark."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "harness-verify",
                                  "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p),
                                           timeout=30)[1] for p in range(PARTITIONS)}
        c.assign([confluent_kafka.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout
        while any((got[p][-1][0] + 1 if got[p] else 0) < ends[p] for p in got):
            if time.monotonic() > deadline:
                raise AssertionError(f"final read incomplete: high watermarks {ends}, read "
                                     f"{ {p: len(v) for p, v in got.items()} }")
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got[m.partition()].append((m.offset(), m.value()))
        return got
    finally:
        c.close()


def check_log(figures: Figures, acks: Acks, final: dict[int, list[tuple[int, bytes]]]) -> None:
    for p, recs in final.items():
        offsets = [o for o, _ in recs]
        if offsets != list(range(len(offsets))):
            figures.gaps += sum(1 for i, o in enumerate(offsets) if o != i)
            figures.problems.append(f"partition {p}: offsets not dense from 0")
        by_offset = dict(recs)
        counts = collections.Counter(v for _, v in recs)
        dups = [v for v, n in counts.items() if n > 1]
        figures.duplicates += sum(counts[v] - 1 for v in dups)
        for v in dups[:3]:
            figures.problems.append(f"partition {p}: {v[:24]!r} appears {counts[v]} times")
        last: dict[str, int] = {}
        for o, v in recs:
            producer, seq = parse_value(v)
            if seq <= last.get(producer, -1):
                figures.reordered += 1
                figures.problems.append(f"partition {p} offset {o}: {producer} seq {seq} "
                                        f"after seq {last[producer]}")
            last[producer] = seq
        for o, v in acks.acked.get(p, []):
            if by_offset.get(o) != v:
                figures.lost += 1
                if figures.lost <= 5:
                    figures.problems.append(
                        f"partition {p}: acknowledged {v[:24]!r} at offset {o}, the log has "
                        f"{by_offset.get(o, b'nothing')[:24]!r}")


def check_consumers(figures: Figures, seen: dict[str, Seen],
                    final: dict[int, list[tuple[int, bytes]]]) -> None:
    for name, s in seen.items():
        total = 0
        for p, recs in s.records.items():
            by_offset = dict(final[p])
            for o, v in recs:
                if by_offset.get(o) != v:
                    figures.consumer_mismatches += 1
                    if figures.consumer_mismatches <= 5:
                        figures.problems.append(f"{name} read {v[:24]!r} at partition {p} "
                                                f"offset {o}; the final log differs there")
            total += len(recs)
            if s.position(p) != len(final[p]):
                figures.problems.append(f"{name} stopped at offset {s.position(p)} of "
                                        f"partition {p}, the high watermark is {len(final[p])}")
        figures.consumed[name] = total
        figures.problems += [f"{name}: {e}" for e in s.errors]
        figures.client_errors += [f"{name}: {e}" for e in s.client_errors]


def check_replicas(figures: Figures, cluster: Cluster, hw: dict[int, int]) -> None:
    """Every replica's bytes below the high watermark are identical (brokers stopped)."""
    for p in range(PARTITIONS):
        datas = {}
        for b in cluster.brokers:
            with logcore.ReadOnlyLog(str(b.data_dir / f"{TOPIC}-{p}"), max_offset=hw[p]) as log:
                if log.log_end_offset < hw[p]:
                    figures.problems.append(f"broker {b.broker_id} partition {p}: log ends at "
                                            f"{log.log_end_offset}, below the high watermark "
                                            f"{hw[p]}")
                datas[b.broker_id] = log.read(0, 1 << 31).read()
        reference = datas[min(datas)]
        for bid, data in datas.items():
            if data != reference:
                figures.diverged_replicas += 1
                at = next((i for i, (x, y) in enumerate(zip(data, reference, strict=False))
                           if x != y), min(len(data), len(reference)))
                figures.problems.append(f"partition {p}: broker {bid}'s replica differs from "
                                        f"broker {min(datas)}'s at byte {at} ({len(data)} vs "
                                        f"{len(reference)} bytes below the high watermark)")


# -- one seed -------------------------------------------------------------------------------

def run_seed(seed: int, duration: float, base: pathlib.Path, min_faults: int = 0,
             log: Callable[[str], None] = print) -> Figures:
    """One seed (see the module docstring); the figures, whatever they show."""
    # kafka-python keeps the sockets of refused connections (a broker down) without closing
    # them, even after close(); their ResourceWarnings would surface in whatever test runs
    # when they are finally collected. They are the client's, not the cluster's: ignored
    # during the run, and the ones left (never connected, not listening) closed after it.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ResourceWarning,
                                message="unclosed <socket")
        try:
            return _run_seed(seed, duration, base, min_faults, log)
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
              log: Callable[[str], None]) -> Figures:
    rng = random.Random(seed)
    figures = Figures(seed)
    started = time.monotonic()
    with Cluster(base) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3,
                                      config={"min.insync.replicas": "2"})])[TOPIC].result(60)
        cluster.wait_healthy({TOPIC: PARTITIONS})
        acks = Acks()
        seen = {"confluent-consumer": Seen(), "kafka-python-consumer": Seen()}
        producers = [ConfluentProducer("cp", cluster.bootstrap, TOPIC, PARTITIONS, seed, RATE, acks),
                     KafkaPythonProducer("kp", cluster.bootstrap, TOPIC, PARTITIONS, seed, RATE,
                                         acks)]
        consumers = [ConfluentConsumer("confluent-consumer", cluster.bootstrap, TOPIC, PARTITIONS,
                                       seen["confluent-consumer"]),
                     KafkaPythonConsumer("kafka-python-consumer", cluster.bootstrap, TOPIC,
                                         PARTITIONS, seen["kafka-python-consumer"])]
        workers = [*producers, *consumers]
        for w in workers:
            w.start()
        try:
            plan = fault_plan(rng)
            while (time.monotonic() - started < duration or len(figures.faults) < min_faults):
                time.sleep(rng.uniform(0.5, 4.0))  # the moment: a seeded delay once healthy
                kind = next(plan)
                before = acks.count
                what = FAULTS[kind](cluster, rng)
                cluster.wait_healthy({TOPIC: PARTITIONS}, timeout=180)
                figures.faults.append(what)
                log(f"seed {seed}: {what}; acknowledged {acks.count} (+{acks.count - before})")
            for w in producers:
                w.stop()
            for w in producers:
                w.join(240)
                if w.is_alive():
                    figures.problems.append(f"producer {w.name} did not finish flushing")
            final = read_all(cluster.bootstrap)
            # The consumers run until they reach the high watermark (check_consumers
            # reports one that does not).
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and any(c.is_alive() for c in consumers) and \
                    not all(s.position(p) >= len(final[p]) for s in seen.values() for p in final):
                time.sleep(0.5)
        except Exception:
            for w in workers:
                w.stop()
            raise
        finally:
            for w in consumers:
                w.stop()
            for w in workers:
                w.join(60)
        for w in workers:
            if w.error is not None:
                figures.problems.append(f"{w.name} failed: {w.error!r}")
        figures.sent, figures.acknowledged, figures.failed = acks.sent, acks.count, len(acks.failed)
        figures.failures = list(acks.failed)
        figures.problems += [f"fatal producer error: {e}" for e in acks.fatal]
        check_log(figures, acks, final)
        check_consumers(figures, seen, final)
        codes = cluster.stop_brokers()
        if any(rc != 0 for rc in codes.values()):
            figures.problems.append(f"brokers exited uncleanly on SIGTERM: {codes}")
        check_replicas(figures, cluster, {p: len(final[p]) for p in final})
    figures.seconds = time.monotonic() - started
    return figures
