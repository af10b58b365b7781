"""Closing kafka-python 3 clients so that their threads end, whatever the brokers do.

kafka-python 3.0.12's ``KafkaProducer.close(timeout)`` flushes first, and raises
``KafkaTimeoutError`` when a record is still unsent after ``timeout`` (its brokers are
gone, or stopped answering) before it stops its sender thread: that thread
(``<client_id>-network-thread``) then runs for the rest of the process, reconnecting to
brokers that no longer exist, and a later test in the same xdist worker pays for it
(tests/_harness/thread_leaks.py). ``close_producer`` force-closes the sender on that error
(the records still pending fail, as Kafka's ``close(Duration.ZERO)`` fails them) and closes
again.
"""

from __future__ import annotations

from typing import Any

__all__ = ["close_producer"]


def close_producer(producer: Any, timeout: float) -> None:
    """Close a kafka-python ``KafkaProducer``: what it cannot deliver within ``timeout``
    seconds fails, and its sender thread is stopped in either case.

    Raises:
        KafkaTimeoutError: the forced close did not finish within ``timeout`` either.
    """
    import kafka.errors

    try:
        producer.close(timeout=timeout)
    except kafka.errors.KafkaTimeoutError:
        producer._sender.force_close()  # no public call: close() raised before it stopped it
        producer.close(timeout=timeout)
