"""The soak's moving parts: a broker, producer and consumer processes, and the final audit.

``Soak`` starts a ``pylog broker`` (the integration suite's ``BrokerProcess``), creates the
topic, starts the producer and consumer scripts next to this file, lets the test kill and
restart the broker, then stops everything and reads the whole topic back. ``audit()`` turns
what the producers were told (delivery reports) and what the log holds into figures and a list
of failures: an acknowledged record missing or at another offset than the one acknowledged,
a record twice, a record that is not byte for byte what was produced, offsets that are not
dense, a producer's records out of order within a partition, a consumer that saw something
the final read does not hold.

Why the offsets of a partition must be dense here: idempotent producers without transactions
write no control batches, and nothing compacts or deletes, so offsets 0..end-1 each hold one
record of ours.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import pathlib
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from integration.conftest import BrokerProcess

from ._records import check

HERE = pathlib.Path(__file__).resolve().parent


def free_port_below_ephemeral() -> int:
    """A free port below the kernel's ephemeral range: while the broker is down, a client's
    reconnect can never be given the broker's port as its own local port (a TCP self-connect
    that would then keep the restarted broker from binding)."""
    try:
        low = int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(max(1025, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


@dataclasses.dataclass
class Settings:
    seed: int
    seconds: float
    min_kills: int
    producers: int = 5
    consumers: int = 2
    partitions: int = 6
    rate: int = 200  # records per second per producer
    max_in_flight: int = 1
    # librdkafka's default. A message that times out makes an idempotent librdkafka
    # producer bump its epoch and send the records it had in flight on other partitions
    # again under new sequence numbers, which no broker can tell from new records (a
    # documented librdkafka limitation): a careful user keeps the timeout long.
    message_timeout_ms: int = 300000
    topic_config: dict[str, str] = dataclasses.field(default_factory=dict)
    broker_config: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Figures:
    produced: int = 0
    acknowledged: int = 0
    not_acknowledged: int = 0
    unacknowledged_present: int = 0
    in_log: int = 0
    lost: int = 0
    duplicates: int = 0
    consumed_live: int = 0
    kills: int = 0
    kills_while_starting: int = 0
    sent_again: int = 0
    errors_seen: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter)


class Soak:
    def __init__(self, tmp: pathlib.Path, settings: Settings, data_dir: pathlib.Path | None = None,
                 topic: str = "soak") -> None:
        self.s = settings
        self.tmp = tmp
        self.topic = topic
        data = data_dir or tmp / "data"
        data.mkdir(parents=True, exist_ok=True)
        overrides = {"num.partitions": "1", "auto.create.topics.enable": "false"}
        overrides.update(settings.broker_config)
        self.broker = BrokerProcess(data, overrides, port=free_port_below_ephemeral())
        # The broker's own log and ready file stay off the data directory's file system
        # (which the disk-full test fills).
        self.broker.log_path = tmp / "broker.log"
        self.broker.ready_path = tmp / "broker-ready"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.consumer_procs: list[subprocess.Popen[bytes]] = []
        self.stop_file = tmp / "stop-producers"
        self.consumer_stop_file = tmp / "stop-consumers"
        self.cfg_path = tmp / "soak.json"
        self.kills = 0
        self.kills_while_starting = 0

    # ------------------------------------------------------------------ lifecycle
    def start_broker(self, attempts: int = 5) -> None:
        for attempt in range(attempts):
            try:
                self.broker.start()
                return
            except RuntimeError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5)

    def kill_and_restart(self, down_s: float, kill_starting_after_s: float | None = None) -> None:
        """SIGKILL the broker, wait ``down_s``, start it again. With
        ``kill_starting_after_s``, the restarted broker is killed again that long after its
        launch (while it loads and recovers its logs, or just after it became ready), and
        then started for good."""
        self.broker.stop(sig=signal.SIGKILL)
        self.kills += 1
        time.sleep(down_s)
        if kill_starting_after_s is not None:
            timer = threading.Timer(kill_starting_after_s, self._kill_now)
            timer.start()
            try:
                self.broker.start()
            except RuntimeError:
                self.kills_while_starting += 1  # it died before it was ready
            timer.join()
            self.broker.stop(sig=signal.SIGKILL)
            self.kills += 1
        self.start_broker()

    def _kill_now(self) -> None:
        proc = self.broker.proc
        if proc is not None:
            proc.kill()

    def start(self) -> None:
        self.start_broker()
        self.create_topic()
        cfg = {
            "seed": self.s.seed, "partitions": self.s.partitions, "topic": self.topic,
            "bootstrap": self.broker.bootstrap, "rate": self.s.rate,
            "max_in_flight": self.s.max_in_flight,
            "message_timeout_ms": self.s.message_timeout_ms,
            # Not the message timeout: records still undelivered this long after the end are
            # reported as a failure instead of waited for.
            "flush_timeout_s": 120,
            "consumers": self.s.consumers, "drain_timeout_s": 60,
            "stop_file": str(self.stop_file), "consumer_stop_file": str(self.consumer_stop_file),
            "out": str(self.tmp / "producer-%d.txt"),
            # SOAK_CLIENT_DEBUG=eos,msg,protocol: librdkafka's debug log in producer-N.log.
            "client_debug": os.environ.get("SOAK_CLIENT_DEBUG", ""),
            "consumer_out": str(self.tmp / "consumer-%d.txt"),
        }
        self.cfg_path.write_text(json.dumps(cfg))
        for i in range(self.s.consumers):
            self.consumer_procs.append(self._spawn("_consumer.py", i))
        for i in range(self.s.producers):
            self.procs.append(self._spawn("_producer.py", i))

    def _spawn(self, script: str, index: int) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{script[1:-3]}-{index}.log", "ab")  # noqa: SIM115
        try:
            return subprocess.Popen([sys.executable, str(HERE / script), str(self.cfg_path),
                                     str(index)], stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()

    def create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap})
        futures = admin.create_topics([NewTopic(self.topic, self.s.partitions, 1,
                                                config=self.s.topic_config)],
                                      request_timeout=20)
        futures[self.topic].result(30)

    def wait_all_producing(self, timeout: float = 60.0) -> None:
        """Until every producer has had a record acknowledged (it has its producer id and
        is connected)."""
        deadline = time.monotonic() + timeout
        waiting = list(range(self.s.producers))
        while waiting:
            waiting = [i for i in waiting
                       if not (self.tmp / f"producer-{i}.txt").exists()
                       or "ok " not in (self.tmp / f"producer-{i}.txt").read_text()]
            if time.monotonic() > deadline:
                raise AssertionError(f"producers {waiting} had nothing acknowledged within "
                                     f"{timeout} s; broker log:\n{self.broker.read_log()[-3000:]}")
            time.sleep(0.1)

    def clients_alive(self) -> list[str]:
        """Names of client processes that exited before being asked to."""
        dead = [f"producer {i} (rc {p.returncode})" for i, p in enumerate(self.procs)
                if p.poll() is not None]
        dead += [f"consumer {i} (rc {p.returncode})" for i, p in enumerate(self.consumer_procs)
                 if p.poll() is not None]
        return dead

    def stop_clients(self, timeout: float = 200.0) -> None:
        """Producers stop producing and flush; then consumers read up to the log end."""
        self.stop_file.touch()
        deadline = time.monotonic() + timeout
        for p in self.procs:
            p.wait(max(deadline - time.monotonic(), 1))
        ends = self.end_offsets()
        tmp = self.consumer_stop_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(ends))
        tmp.rename(self.consumer_stop_file)
        for p in self.consumer_procs:
            p.wait(max(deadline - time.monotonic(), 1))

    def close(self) -> None:
        for p in self.procs + self.consumer_procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        self.broker.stop(sig=signal.SIGKILL)

    # ------------------------------------------------------------------ reading back
    def end_offsets(self) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": "soak-audit"})
        try:
            return {p: c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=20)[1]
                    for p in range(self.s.partitions)}
        finally:
            c.close()

    def read_all(self, timeout: float = 120.0) -> dict[int, list[tuple[int, Any]]]:
        """Every record of the topic, per partition: (offset, (producer, seq) or a sentence
        saying how the record differs from what was produced)."""
        from confluent_kafka import Consumer, TopicPartition

        ends = self.end_offsets()
        got: dict[int, list[tuple[int, Any]]] = {p: [] for p in range(self.s.partitions)}
        c = Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": "soak-audit",
                      "enable.auto.commit": False, "auto.offset.reset": "error",
                      "fetch.wait.max.ms": 50, "check.crcs": True})
        try:
            c.assign([TopicPartition(self.topic, p, 0) for p in range(self.s.partitions)
                      if ends[p] > 0])
            pos = dict.fromkeys(range(self.s.partitions), 0)
            deadline = time.monotonic() + timeout
            while any(pos[p] < ends[p] for p in pos):
                if time.monotonic() > deadline:
                    raise AssertionError(f"read back stalled at {pos}, log ends {ends}")
                for m in c.consume(1000, 0.5):
                    if m.error() is not None:
                        raise AssertionError(f"read back: {m.error()}")
                    p = m.partition()
                    got[p].append((m.offset(), check(self.s.seed, self.s.partitions, p,
                                                     m.key(), m.value(), m.headers())))
                    pos[p] = m.offset() + 1
        finally:
            c.close()
        return got

    # ------------------------------------------------------------------ the audit
    def producer_reports(self) -> tuple[dict[tuple[int, int], tuple[int, int]], int, int, int,
                                        collections.Counter[str], list[str]]:
        """(acknowledged id -> (partition, offset), produced, not acknowledged, records sent
        again, error names, problems)."""
        acked: dict[tuple[int, int], tuple[int, int]] = {}
        produced = failed = retries = 0
        errs: collections.Counter[str] = collections.Counter()
        problems: list[str] = []
        for i in range(self.s.producers):
            path = self.tmp / f"producer-{i}.txt"
            ended = False
            for line in path.read_text().splitlines():
                f = line.split(" ", 3)
                if f[0] == "ok":
                    acked[(i, int(f[1]))] = (int(f[2]), int(f[3]))
                elif f[0] == "err":
                    failed += 1
                    errs[f[3]] += 1
                elif f[0] == "fatal":
                    problems.append(f"producer {i} fatal error: {line}")
                elif f[0] == "end":
                    ended = True
                    produced += int(f[1])
                    retries += max(int(f[3]) - int(f[1]), 0)
                    if int(f[2]):
                        problems.append(f"producer {i}: {f[2]} records never reported after "
                                        f"the flush")
            if not ended:
                problems.append(f"producer {i} did not finish (see {path})")
        return acked, produced, failed, retries, errs, problems

    def audit(self, log: dict[int, list[tuple[int, Any]]]) -> tuple[Figures, list[str]]:
        acked, produced, failed, retries, errs, problems = self.producer_reports()
        fig = Figures(produced=produced, acknowledged=len(acked), not_acknowledged=failed,
                      kills=self.kills,
                      kills_while_starting=self.kills_while_starting, sent_again=retries, errors_seen=errs)
        where: dict[tuple[int, int], list[tuple[int, int]]] = collections.defaultdict(list)
        for p, recs in log.items():
            offsets = [o for o, _ in recs]
            if offsets != list(range(len(offsets))):
                first = next(i for i, o in enumerate(offsets) if o != i)
                problems.append(f"partition {p}: offsets not dense from 0, first wrong at "
                                f"position {first}: {offsets[max(first - 2, 0):first + 3]}")
            last_seq: dict[int, int] = {}
            for o, ident in recs:
                if isinstance(ident, str):
                    problems.append(f"partition {p} offset {o}: {ident}")
                    continue
                where[ident].append((p, o))
                if last_seq.get(ident[0], -1) >= ident[1]:
                    problems.append(f"partition {p} offset {o}: producer {ident[0]} record "
                                    f"{ident[1]} after its record {last_seq[ident[0]]}")
                last_seq[ident[0]] = max(last_seq.get(ident[0], -1), ident[1])
        fig.in_log = sum(len(v) for v in where.values())
        for ident, places in where.items():
            if len(places) > 1:
                fig.duplicates += len(places) - 1
                problems.append(f"record {ident} is in the log {len(places)} times: {places}")
            if ident not in acked:
                fig.unacknowledged_present += 1
        for ident, place in acked.items():
            if place not in where.get(ident, []):
                fig.lost += 1
                if fig.lost <= 20:
                    problems.append(f"acknowledged record {ident} at partition/offset {place} "
                                    f"is in the log at {where.get(ident, [])}")
        problems += self.consumer_problems(log, fig)
        return fig, problems

    def consumer_problems(self, log: dict[int, list[tuple[int, Any]]], fig: Figures) -> list[str]:
        """What the consumers read while the broker was being killed must be what the log
        holds now, with nothing skipped."""
        final = {(p, o): ident for p, recs in log.items() for o, ident in recs}
        problems: list[str] = []
        for i in range(self.s.consumers):
            path = self.tmp / f"consumer-{i}.txt"
            ended = False
            for line in path.read_text().splitlines():
                f = line.split(" ", 3)
                if f[0] == "rec":
                    fig.consumed_live += 1
                    p, o, producer, seq = map(int, line[4:].split())
                    ident = (producer, seq)
                    if final.get((p, o)) != ident:
                        problems.append(f"consumer {i} read {ident} at {p}/{o}, the log now "
                                        f"holds {final.get((p, o))}")
                elif f[0] in ("bad", "jump"):
                    problems.append(f"consumer {i}: {line}")
                elif f[0] == "error":
                    fig.errors_seen[f"consumer {f[1]}"] += 1
                    if "OFFSET_OUT_OF_RANGE" in line:
                        problems.append(f"consumer {i}: {line}")
                elif f[0] == "end":
                    ended = True
                    for pos in line.split()[1:]:
                        p, o = map(int, pos.split(":"))
                        if o != len(log[p]):
                            problems.append(f"consumer {i} stopped at {p}/{o}, the log ends "
                                            f"at {len(log[p])}")
            if not ended:
                problems.append(f"consumer {i} did not finish (see {path})")
        return problems


def report(title: str, fig: Figures, seconds: float, settings: Settings) -> str:
    errs = ", ".join(f"{k} x{v}" for k, v in fig.errors_seen.most_common()) or "none"
    return (f"{title}: seed {settings.seed}, {seconds:.1f} s, kills survived {fig.kills} "
            f"({fig.kills_while_starting} before the broker was ready), "
            f"records produced {fig.produced}, acknowledged {fig.acknowledged}, "
            f"not acknowledged {fig.not_acknowledged} (of which in the log "
            f"{fig.unacknowledged_present}), records sent again {fig.sent_again}, "
            f"read live {fig.consumed_live}, in the log "
            f"{fig.in_log}, lost {fig.lost}, duplicates {fig.duplicates}; client errors: {errs}")
