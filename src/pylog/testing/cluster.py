"""``KafkaCluster``: several pylog brokers of one cluster inside the test process.

A ZooKeeper server (``pylog.testing.zookeeper``: Debian's package run as a child process)
and ``size`` ``KafkaBroker``s in cluster mode (``zookeeper.connect``), each on its own
thread, port and data directory, with replication factor ``size`` for new topics and the
internal topics and ``min.insync.replicas`` 2 (1 for a cluster of one or two). Each broker
keeps the ``KafkaBroker`` faults, so a test can fail requests on one broker
(``cluster.brokers[1].fail_next(...)``) or stop and restart it.

Thread-safety: as ``KafkaBroker``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from pylog.testing.broker import BrokerNotRunningError, KafkaBroker
from pylog.testing.zookeeper import ZooKeeperServer
from pylog.testing.zookeeper import missing_reason as _zookeeper_missing

__all__ = ["KafkaCluster", "missing_reason"]


def missing_reason() -> str | None:
    """Why a cluster cannot run here (no ZooKeeper server, no Java, no kazoo), or None."""
    reason = _zookeeper_missing()
    if reason is not None:
        return reason
    # Looked up, not imported: only pylog.cluster.zk_store imports kazoo.
    if importlib.util.find_spec("kazoo") is None:
        return "the kazoo package is not installed: pip install 'pylog-kafka[cluster]'"
    return None


class KafkaCluster:
    """``size`` brokers (ids 0..size-1) on one ZooKeeper server.

    Args:
        size: how many brokers.
        base_dir: where ZooKeeper's and the brokers' data go (default: a temporary
            directory that ``stop`` removes).
        config, **settings: settings for every broker, as for ``KafkaBroker``.

    Raises:
        RuntimeError: ZooKeeper or kazoo is missing (the message says how to install them).
    """

    def __init__(self, size: int = 3, *, base_dir: str | os.PathLike[str] | None = None,
                 config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        reason = missing_reason()
        if reason is not None:
            raise RuntimeError(f"KafkaCluster needs ZooKeeper: {reason}")
        if size < 1:
            raise ValueError(f"size={size}: a cluster has at least one broker")
        self.size = size
        self._given_dir = os.fspath(base_dir) if base_dir is not None else None
        self.base_dir: str | None = None
        self.settings = {**(config or {}), **settings}
        self.zookeeper: ZooKeeperServer | None = None
        self.brokers: list[KafkaBroker] = []

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ``127.0.0.1:PORT``, comma-separated."""
        if not self.brokers:
            raise BrokerNotRunningError("this KafkaCluster is not running: call start()")
        return ",".join(b.bootstrap_servers for b in self.brokers if b.running)

    def start(self, timeout: float = 60.0) -> KafkaCluster:
        """Start ZooKeeper and the brokers; return once every broker sees all the others."""
        if self.brokers:
            raise RuntimeError("this KafkaCluster is already running")
        self.base_dir = self._given_dir or tempfile.mkdtemp(prefix="pylog-test-cluster-")
        self.zookeeper = ZooKeeperServer(_path(self.base_dir, "zookeeper"))
        try:
            self.zookeeper.start(timeout)
            rf = str(self.size)
            common = {
                "zookeeper.connect": self.zookeeper.connect_string,
                "default.replication.factor": rf,
                "offsets.topic.replication.factor": rf,
                "transaction.state.log.replication.factor": rf,
                "min.insync.replicas": "2" if self.size >= 3 else "1",
                "transaction.state.log.min.isr": "2" if self.size >= 3 else "1",
                "share.coordinator.state.topic.replication.factor": rf,
                "share.coordinator.state.topic.min.isr": "2" if self.size >= 3 else "1",
                # The last broker to stop has nobody to hand its leaderships to: one short
                # retry, not Kafka's 3 x 5 s.
                "controlled.shutdown.max.retries": "1",
                "controlled.shutdown.retry.backoff.ms": "200",
                **self.settings,
            }
            for i in range(self.size):
                data = _path(self.base_dir, f"broker{i}")
                broker = KafkaBroker({**common, "broker.id": str(i)}, data_dir=data)
                self.brokers.append(broker)
                broker.start()
            self._wait_for_members(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_members(self, timeout: float) -> None:
        from pylog.client import Admin

        deadline = time.monotonic() + timeout
        for broker in self.brokers:
            with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
                while True:
                    desc = admin.describe_cluster()
                    if len(desc.brokers) == self.size and desc.controller_id >= 0:
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{broker.name} did not see {self.size} brokers and a "
                                           f"controller within {timeout} s; its log:\n"
                                           + broker.log_text()[-5000:])
                    time.sleep(0.1)

    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, Any] | None = None,
                     replication_factor: int | None = None) -> None:
        """Create a topic through the controller (CreateTopics), replicated on
        ``replication_factor`` brokers (default: all), and wait until it has leaders."""
        from pylog.client import Admin, NewTopic

        rf = self.size if replication_factor is None else replication_factor
        configs = {k: str(v).lower() if isinstance(v, bool) else str(v)
                   for k, v in (config or {}).items()}
        with Admin({"bootstrap.servers": self.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic(name, partitions, rf, configs)])
            deadline = time.monotonic() + 30
            while True:
                desc = admin.describe_topics([name]).get(name)
                if desc is not None and all(p.leader >= 0 for p in desc.partitions):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"topic {name!r} has no leader after 30 s")
                time.sleep(0.05)

    def delete_topic(self, name: str) -> None:
        from pylog.client import Admin

        with Admin({"bootstrap.servers": self.bootstrap_servers}) as admin:
            admin.delete_topics([name])

    @property
    def running(self) -> bool:
        return any(b.running for b in self.brokers)

    def stop(self) -> None:
        """Stop every broker, then ZooKeeper; remove the temporary directory."""
        for broker in reversed(self.brokers):
            broker.stop()
        self.brokers = []
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None
        if self.base_dir is not None and self._given_dir is None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
        self.base_dir = None

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _path(base: str, name: str) -> Any:
    import pathlib

    path = pathlib.Path(base) / name
    path.mkdir(parents=True, exist_ok=True)
    return path
