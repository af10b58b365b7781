"""A real cluster for the fault harness: one ZooKeeper server and three ``pylog broker``
processes, each on a fixed port and data directory so a killed broker restarts as itself.

``Cluster`` starts and stops everything, answers questions about the cluster from ZooKeeper
(who is the controller, who leads a partition, is everything healthy) and applies signals
to single brokers (SIGKILL, SIGTERM, SIGSTOP/SIGCONT). Nothing here decides which fault comes
next; ``faults.py`` does, from a seed.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from _harness.zookeeper import ZooKeeperServer, free_port

import logcore
from pylog.cluster.zk_store import ZkStore

T = TypeVar("T")

SESSION_MS = 6000          # zookeeper.session.timeout.ms of the brokers
LAG_MS = 4000              # replica.lag.time.max.ms


class ClusterError(AssertionError):
    """The cluster did not reach a state the harness waited for (the message says which)."""


def wait_for(pred: Callable[[], T | None], timeout: float, what: str,
             interval: float = 0.2) -> T:
    """Poll ``pred`` until it returns something truthy; exceptions count as "not yet"."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            got = pred()
            if got:
                return got
        except Exception as e:  # ZooKeeper down, a broker restarting: try again
            last = e
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}"
                               + (f" (last error: {last!r})" if last else ""))
        time.sleep(interval)


class Broker:
    """One ``pylog broker`` subprocess with a fixed id, port and data directory."""

    def __init__(self, broker_id: int, base: pathlib.Path, overrides: dict[str, str]) -> None:
        self.broker_id = broker_id
        self.data_dir = base / f"broker{broker_id}"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = base / f"broker{broker_id}.log"
        self.ready_path = base / f"broker{broker_id}.ready"
        self.port = free_port()
        self.overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                          "log.dirs": str(self.data_dir), "broker.id": str(broker_id),
                          **overrides}
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        if self.ready_path.exists():
            self.ready_path.unlink()
        cmd = [sys.executable, "-m", "pylog", "broker", "--ready-file", str(self.ready_path),
               "--log-level", "INFO"]
        if logcore.IMPLEMENTATION != "c":
            cmd.append("--allow-pure-python")
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        with open(self.log_path, "ab") as log:
            log.write(f"--- start {self.starts}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=dict(os.environ))
        self.starts += 1
        self.paused = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_path.exists() and self.ready_path.read_text().strip():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        rc = self.proc.poll()
        self.kill()
        raise ClusterError(f"broker {self.broker_id} did not start (exit {rc}); log tail:\n"
                           + self.log_tail())

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(10)
            self.proc = None
        self.paused = False

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (controlled shutdown when enabled) and wait; SIGKILL past ``timeout``."""
        if self.proc is None:
            return None
        if self.paused:
            self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(10)
        self.proc = None
        return rc

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class Cluster:
    """ZooKeeper + ``n`` brokers under ``base``; ``store`` is the harness's own ZooKeeper
    session (observation only, and topic creation)."""

    def __init__(self, base: pathlib.Path, n: int = 3,
                 overrides: dict[str, str] | None = None) -> None:
        self.base = base
        self.zk = ZooKeeperServer(base / "zookeeper")
        conf = {"zookeeper.session.timeout.ms": str(SESSION_MS),
                "replica.lag.time.max.ms": str(LAG_MS),
                "controlled.shutdown.enable": "true",
                "controlled.shutdown.retry.backoff.ms": "1000",
                "auto.create.topics.enable": "false",
                "num.partitions": "1",
                # The consumers' group.id creates __consumer_offsets: keep it small.
                "offsets.topic.num.partitions": "3",
                "offsets.topic.replication.factor": "3",
                **(overrides or {})}
        self.brokers = [Broker(i, base, conf) for i in range(n)]
        self.store: ZkStore | None = None

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def ids(self) -> list[int]:
        return [b.broker_id for b in self.brokers]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> None:
        self.zk.start()
        for b in self.brokers:
            b.overrides["zookeeper.connect"] = self.zk.connect_string
            b.start()
        self.store = ZkStore(self.zk.connect_string, session_timeout_ms=30_000)
        self.store.start()
        wait_for(lambda: self.registered() == self.ids, 60, "every broker to register")
        wait_for(lambda: self.controller() is not None, 60, "a controller")

    def close(self) -> None:
        """Kill everything that still runs (the end of a test, or an abort)."""
        if self.store is not None:
            try:
                self.store.close()
            except Exception:
                pass
            self.store = None
        for b in self.brokers:
            b.kill()
        self.zk.kill()

    def stop_brokers(self) -> dict[int, int | None]:
        """Stop every broker with SIGTERM, one after another; returns the exit codes."""
        return {b.broker_id: b.stop() for b in self.brokers}

    # -- observation (from ZooKeeper) --------------------------------------------------------

    def _store(self) -> ZkStore:
        assert self.store is not None, "the cluster is not started"
        return self.store

    def registered(self) -> list[int]:
        return sorted(self._store().get_broker_ids())

    def controller(self) -> int | None:
        reg = self._store().get_controller()
        return None if reg is None else reg.broker_id

    def state(self, topic: str, partition: int) -> Any:
        got = self._store().get_partition_state(topic, partition)
        return None if got is None else got[0]

    def healthy(self, topics: dict[str, int]) -> bool:
        """Every broker registered, a controller, every partition led with a full ISR."""
        return not self.unhealthy(topics)

    def unhealthy(self, topics: dict[str, int]) -> list[str]:
        """What ``healthy`` misses: brokers not registered, no controller, partitions
        without a leader or a full ISR (with their state)."""
        missing: list[str] = []
        registered = self.registered()
        if registered != self.ids:
            missing.append(f"registered brokers {sorted(registered)}")
        if self.controller() is None:
            missing.append("no controller")
        for topic, partitions in topics.items():
            for p in range(partitions):
                st = self.state(topic, p)
                if st is None or st.leader < 0 or len(st.isr) != len(self.brokers):
                    missing.append(f"{topic}-{p} " + ("no state" if st is None else
                                   f"leader {st.leader} epoch {st.leader_epoch} "
                                   f"ISR {list(st.isr)}"))
        return missing

    def wait_healthy(self, topics: dict[str, int], timeout: float = 120.0) -> None:
        try:
            wait_for(lambda: self.healthy(topics), timeout,
                     "every broker registered and every partition led with a full ISR")
        except ClusterError as exc:
            try:
                missing = "; ".join(self.unhealthy(topics))
            except Exception as e:  # noqa: BLE001 - ZooKeeper down: the first message stands
                missing = f"not known: {e!r}"
            raise ClusterError(f"{exc} (missing: {missing})") from None

    def wait_unregistered(self, broker_id: int, timeout: float = SESSION_MS / 1000 + 60) -> None:
        """Until ``/brokers/ids/<id>`` is gone (the old session expired): a broker restarted
        before that is refused its id, as Kafka's is."""
        wait_for(lambda: broker_id not in self.registered(), timeout,
                 f"broker {broker_id}'s registration to expire")

    def restart(self, broker_id: int) -> None:
        self.wait_unregistered(broker_id)
        self.brokers[broker_id].start()
