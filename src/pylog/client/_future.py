"""Futures of produced records, one shared result per batch (as the Java client's
``ProduceRequestResult`` / ``FutureRecordMetadata``).

A ``concurrent.futures.Future`` per record costs a lock, a condition and a notify on
completion for every record. Here the sender completes one ``BatchResult`` per batch (base
offset, append time or error), and ``send()`` hands out a small ``RecordFuture`` per record
that computes its ``RecordMetadata`` (base offset + index) when asked.

``RecordFuture`` has the ``concurrent.futures.Future`` calls a producer's user needs:
``result(timeout)``, ``exception(timeout)``, ``done()``, ``add_done_callback(fn)``,
``cancelled()`` (records cannot be cancelled once sent). Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pylog.client.errors import KafkaTimeoutError
from pylog.client.records import RecordMetadata

__all__ = ["BatchResult", "RecordFuture"]


class BatchResult:
    """The outcome of one batch: set once by the sender, waited on by callers.

    The ``threading.Event`` a waiter blocks on is made only when someone waits before the
    batch completed: a producer that never waits on a record (the usual case) pays one
    lock per batch, not an Event (a Condition and two locks).
    """

    __slots__ = ("_event", "_lock", "_callbacks", "_done", "base_offset", "log_append_time",
                 "error")

    def __init__(self) -> None:
        self._event: threading.Event | None = None
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], Any]] = []
        self._done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._done

    def wait(self, timeout: float | None) -> bool:
        if self._done:
            return True
        with self._lock:
            if self._done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def set(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        """Complete (first call wins) and run the callbacks, in registration order."""
        with self._lock:
            if self._done:
                return
            self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, error
            self._done = True
            event = self._event
            callbacks, self._callbacks = self._callbacks, []
        if event is not None:
            event.set()
        for fn in callbacks:
            _run_callback(fn)

    def add_callback(self, fn: Callable[[], Any]) -> None:
        with self._lock:
            if not self._done:
                self._callbacks.append(fn)
                return
        _run_callback(fn)


def _run_callback(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - a user's callback must not break the sender
        import logging

        logging.getLogger("pylog.client.producer").exception("delivery callback failed")


class RecordFuture:
    """The future ``RecordMetadata`` of one record of a batch."""

    __slots__ = ("_batch", "_index", "_topic", "_partition", "_timestamp", "_key_size",
                 "_value_size")

    def __init__(self, batch: BatchResult, index: int, topic: str, partition: int,
                 timestamp: int, key_size: int, value_size: int) -> None:
        self._batch = batch
        self._index = index
        self._topic = topic
        self._partition = partition
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def done(self) -> bool:
        return self._batch.done

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        return False

    def _wait(self, timeout: float | None) -> None:
        if not self._batch.wait(timeout):
            raise KafkaTimeoutError(f"the record was not delivered within {timeout:g} s")

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata, waiting up to ``timeout`` s (None: until it completes).

        Raises:
            the delivery error; KafkaTimeoutError if not complete in time.
        """
        self._wait(timeout)
        b = self._batch
        if b.error is not None:
            raise b.error
        return RecordMetadata(
            self._topic, self._partition, b.base_offset + self._index if b.base_offset >= 0 else -1,
            b.log_append_time if b.log_append_time >= 0 else self._timestamp,
            self._key_size, self._value_size)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._batch.error

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        """Call ``fn(self)`` once complete (on the client's I/O thread, or now if done)."""
        self._batch.add_callback(lambda: fn(self))

    def __repr__(self) -> str:
        state = "pending" if not self.done() else ("failed" if self._batch.error else "done")
        return f"<RecordFuture {self._topic}-{self._partition} {state}>"
