"""pylog.testing: a real Kafka broker inside the test process (docs/testing.md).

``KafkaBroker`` runs pylog's broker on a thread of its own, on 127.0.0.1 with an OS-picked
port and a temporary data directory, with fault injection and an optional virtual clock;
``KafkaCluster`` runs three of them on a ZooKeeper server. The pytest plugin
(``pylog.testing.plugin``, registered through the ``pytest11`` entry point) turns them into
fixtures: ``kafka_broker``, ``kafka_broker_session``, ``kafka_topic``, ``kafka_cluster``.

This package sits on top of the broker (like the CLI): it imports the broker; nothing below
imports it. The broker's side of fault injection is the generic ``pylog.broker.intercept``.
"""

from __future__ import annotations

from pylog.testing.broker import BrokerNotRunningError, KafkaBroker, Record
from pylog.testing.clock import VirtualClock

__all__ = ["BrokerNotRunningError", "KafkaBroker", "Record", "VirtualClock"]
