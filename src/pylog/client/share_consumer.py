"""The blocking share consumer (KIP-932): ``pylog.client.ShareConsumer``, with
confluent-kafka's calls (``subscribe``, ``poll``/``consume``, ``acknowledge``,
``commit_sync``, ``commit_async``, ``close``).

The asyncio core (``pylog.client.aio.share_consumer.ShareConsumer``) runs on a private event
loop in a daemon thread (``pylog.client._loop.LoopThread``); each call runs one coroutine
there and waits for it, so heartbeats go on while the application works on its records.

Example::

    from pylog.client import ShareConsumer, AcknowledgeType

    with ShareConsumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "workers",
                        "share.acknowledgement.mode": "explicit"}) as c:
        c.subscribe(["jobs"])
        for record in c.poll(timeout=1.0):
            c.acknowledge(record, AcknowledgeType.ACCEPT if handle(record)
                          else AcknowledgeType.RELEASE)
        c.commit_sync()

Thread-safety: one thread at a time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Iterable
from typing import Any

from pylog.client._loop import LoopThread
from pylog.client.aio.share_consumer import AcknowledgeType
from pylog.client.aio.share_consumer import ShareConsumer as _Core
from pylog.client.records import ConsumerRecord, TopicPartition

__all__ = ["AcknowledgeType", "ShareConsumer"]


class ShareConsumer:
    """A member of a share group (see ``pylog.client.aio.share_consumer``)."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._thread = LoopThread("pylog-share-consumer")
        try:
            self._core: _Core = self._thread.run(self._make(config, kwargs))
        except BaseException:
            self._thread.stop()
            raise
        self._pending: list[concurrent.futures.Future[Any]] = []
        self._closed = False

    @staticmethod
    async def _make(config: dict[str, Any] | None, kwargs: dict[str, Any]) -> _Core:
        return _Core(config, **kwargs)

    def subscribe(self, topics: Iterable[str]) -> None:
        self._thread.run(self._core.subscribe(list(topics)))

    def subscription(self) -> list[str]:
        return list(self._core.subscription)

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """The records acquired for this member (see the core's ``poll``)."""
        return self._thread.run(self._core.poll(timeout, max_records))

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[ConsumerRecord]:
        """confluent-kafka's ``consume``: up to ``num_messages`` records."""
        return self.poll(1e9 if timeout < 0 else timeout, num_messages)

    def acknowledge(self, record: ConsumerRecord, ack_type: int = AcknowledgeType.ACCEPT) -> None:
        self._thread.run(self._ack(record, ack_type))

    async def _ack(self, record: ConsumerRecord, ack_type: int) -> None:
        self._core.acknowledge(record, ack_type)

    def delivery_count(self, record: ConsumerRecord) -> int | None:
        """How many times the record has been delivered (1 the first time); None once it
        is acknowledged."""
        return self._core.delivery_counts.get((TopicPartition(record.topic, record.partition),
                                              record.offset))

    def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, BaseException | None]:
        """Send the pending acknowledgements and wait: per partition None or its error."""
        return self._thread.run(self._core.commit(timeout))

    def commit_async(self) -> None:
        """Send the pending acknowledgements without waiting."""
        fut = asyncio.run_coroutine_threadsafe(self._core.commit(), self._thread.loop)
        self._pending = [f for f in self._pending if not f.done()] + [fut]

    def close(self, timeout: float | None = None) -> None:
        """Wait for the ``commit_async`` calls, accept (implicit mode) and send what is
        pending, close the share sessions and leave the group; stop the I/O thread.
        Idempotent.

        ``timeout`` bounds the whole close, as Kafka's ``close(Duration)``: what is still
        running then is abandoned, the connections are aborted and the I/O thread is
        stopped (``pylog.client._loop``); None lets each step take its own bound
        (``default.api.timeout.ms``)."""
        if self._closed:
            return
        self._closed = True
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        try:
            fut = asyncio.run_coroutine_threadsafe(self._close(list(self._pending), timeout),
                                                   self._thread.loop)
            self._pending = []
            self._thread.finish_close(fut, None if deadline is None
                                      else max(0.0, deadline - time.monotonic()),
                                      self._core.cluster.abort)
        finally:
            self._thread.stop()

    async def _close(self, pending: list[concurrent.futures.Future[Any]],
                     timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for f in pending:
            try:
                await asyncio.wrap_future(f)
            except Exception:  # noqa: BLE001 - an async commit's outcome is its own
                pass
        left = None if timeout is None else max(0.0, timeout - (loop.time() - start))
        await self._core.close(left)

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
