"""Three ``pylog broker`` processes on one ZooKeeper, for the cluster integration tests."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

from _harness.waiting import wait_until

from pylog.cluster.zk_store import ZkStore

#: What a test leaves in ZooKeeper, removed after it so the next one starts from nothing.
CLUSTER_ZNODES = ("/brokers", "/controller", "/controller_epoch", "/admin", "/config",
                  "/isr_change_notification", "/cluster", "/kafka-acl", "/kafka-acl-extended",
                  "/kafka-acl-changes", "/kafka-acl-extended-changes")


@contextlib.contextmanager
def zk_cluster(zookeeper: Any, new_broker: Any, session_ms: int,
               overrides: dict[str, str] | None = None) -> Iterator[tuple[list[Any], ZkStore]]:
    """Brokers 0, 1, 2 (``controlled.shutdown.enable=false`` unless ``overrides`` say
    otherwise) registered in ``zookeeper``; yields (brokers, a ZkStore). Afterwards the
    brokers are SIGKILLed and the cluster's znodes deleted."""
    brokers = []
    for i in range(3):
        b = new_broker({"zookeeper.connect": zookeeper.connect_string, "broker.id": str(i),
                        "node.id": str(i), "zookeeper.session.timeout.ms": str(session_ms),
                        "controlled.shutdown.enable": "false", **(overrides or {})})
        brokers.append(b.start())
    store = ZkStore(zookeeper.connect_string, session_timeout_ms=session_ms)
    store.start()
    try:
        wait_until(lambda: store.get_broker_ids() == [0, 1, 2], 30, "3 registrations")
        yield brokers, store
    finally:
        store.close()
        for b in brokers:
            b.stop(sig=signal.SIGKILL)
        cleaner = ZkStore(zookeeper.connect_string)
        cleaner.start()
        for path in CLUSTER_ZNODES:
            cleaner.delete_all(path)
        cleaner.close()
