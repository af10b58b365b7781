"""Closing kafka-python 3 producers whose brokers are gone (tests/_harness/kafka_python.py):
kafka-python's own ``close(timeout)`` raises with records pending and leaves its sender
thread running; ``close_producer`` stops it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

import kafka
import kafka.errors
import pytest
from _harness.kafka_python import close_producer

from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.single_broker("kills its broker")


def _sender(client_id: str) -> threading.Thread | None:
    return next((t for t in threading.enumerate() if t.name == f"{client_id}-network-thread"), None)


def test_close_producer_stops_the_sender_of_a_producer_with_records_pending(
        new_broker: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = new_broker({"auto.create.topics.enable": "true"}).start()
    p = kafka.KafkaProducer(bootstrap_servers=b.bootstrap, client_id=topic_name,
                            request_timeout_ms=2000, max_block_ms=5000, retries=1000)
    try:
        p.send(topic_name, b"delivered").get(30)
        b.stop(sig=signal.SIGKILL)
        pending = p.send(topic_name, b"pending")  # the partition's leader is known: queued
        # kafka-python's close gives up on its flush before it stops its sender thread.
        with pytest.raises(kafka.errors.KafkaTimeoutError):
            p.close(timeout=1)
        sender = _sender(topic_name)
        assert sender is not None and sender.is_alive()
    finally:
        close_producer(p, 5)
    assert not sender.is_alive()
    assert pending.is_done and pending.failed()
