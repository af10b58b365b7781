"""Ordered requests to one broker, retried or handed back: the broker-to-broker channel.

``BrokerChannel`` is one queue and one sender task per destination broker, speaking the
Kafka protocol over a ``pylog.net.connection.BrokerConnection``, in order. A request that
fails (connection refused, broken, timed out) is retried on a new connection after a
backoff (100 ms doubling to 1 s) until it is sent or the channel is closed: the
controller's channels (``pylog.controller.channels``, Kafka's
``ControllerChannelManager``). With ``retry=False`` a failure is handed back instead, so
that the caller can send it elsewhere: the transaction coordinator's WriteTxnMarkers and
verification requests (``pylog.txn.markers``). ``BrokerChannels`` keeps one such no-retry
channel per destination broker and turns a request into an awaitable answer: the transaction
coordinator's ``MarkerChannels`` and the share persister (``pylog.group.share.persister``).

Event-loop affinity: the loop that made the channel (the broker's).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from typing import Any

from pylog import errors
from pylog.net.connection import BrokerConnection

__all__ = ["REQUEST_TIMEOUT_S", "RETRY_BACKOFF_S", "BrokerChannel", "BrokerChannels"]

log = logging.getLogger("pylog.net.channel")

RETRY_BACKOFF_S = 0.1  # Kafka retries at once on a new connection; a short pause spares the loop
REQUEST_TIMEOUT_S = 30.0


class BrokerChannel:
    """Ordered delivery of controller requests to one broker.

    ``retry=False`` (the transaction coordinator's marker channels): a request that fails is
    not retried here; ``on_response`` gets the exception instead of a response, so that the
    caller can send it elsewhere (the partition's leader may have moved)."""

    def __init__(self, broker_id: int, host: str, port: int, client_id: str, *,
                 retry: bool = True, ssl_context: Any = None, sasl: Any = None) -> None:
        self.broker_id = broker_id
        self.ssl_context = ssl_context  # the inter-broker listener's TLS (None: PLAINTEXT)
        self.sasl = sasl  # and its SASL client settings (None: not a SASL listener)
        self.host, self.port = host, port
        self.client_id = client_id
        self.retry = retry
        self.queue: asyncio.Queue[tuple[Any, Any, Any]] = asyncio.Queue()
        self._conn: BrokerConnection | None = None
        self._closing = False
        self._task = asyncio.ensure_future(self._run())

    def enqueue(self, builder: Any, on_response: Any = None, version: Any = None) -> None:
        """``builder(conn)`` makes the request once a connection knows the versions;
        ``version(conn)``, when given, picks the version to send (else the highest both sides
        serve within the client's caps)."""
        self.queue.put_nowait((builder, on_response, version))

    async def _connection(self) -> BrokerConnection:
        if self._conn is None or self._conn.closed:
            conn = BrokerConnection(self.host, self.port, node_id=self.broker_id,
                                    client_id=self.client_id, request_timeout=REQUEST_TIMEOUT_S,
                                    ssl_context=self.ssl_context, sasl=self.sasl)
            await conn.connect(REQUEST_TIMEOUT_S)
            self._conn = conn
        return self._conn

    async def _run(self) -> None:
        # ``_closing`` and not only the cancellation ends the loop: Python 3.11's
        # ``asyncio.wait_for`` (under ``conn.send``) returns the answer and drops a cancel that
        # arrives as the answer does, and the loop would then wait in ``queue.get()`` forever
        # (a controller stopping at shutdown hung there, and the broker never exited).
        while not self._closing:
            builder, on_response, version = await self.queue.get()
            failures = 0
            while True:
                try:
                    conn = await self._connection()
                    body = builder(conn)
                    resp = await conn.send(body, None if version is None else version(conn))
                    if on_response is not None:
                        on_response(resp)
                    break
                except asyncio.CancelledError:
                    raise
                except errors.UnsupportedVersionError as exc:
                    # Retrying cannot help (an older broker): drop this request, keep order.
                    log.warning("broker %d cannot take a controller request: %s",
                                self.broker_id, exc)
                    if not self.retry and on_response is not None:
                        on_response(exc)
                    break
                except Exception as exc:  # noqa: BLE001 - retried while the broker lives
                    if not self.retry:
                        log.info("request to broker %d failed: %s", self.broker_id, exc)
                        if self._conn is not None:
                            await self._conn.close()
                        self._conn = None
                        if on_response is not None:
                            on_response(exc)
                        break
                    failures += 1
                    (log.info if failures == 1 else log.debug)(
                        "controller request to broker %d failed (%s); retrying",
                        self.broker_id, exc)
                    if self._conn is not None:
                        await self._conn.close()
                    self._conn = None
                    # 100 ms, doubling up to 1 s: a dead broker is dropped when its session ends.
                    await asyncio.sleep(min(RETRY_BACKOFF_S * 2 ** (failures - 1), 1.0))

    async def close(self) -> None:
        # Cancelled again until it ends: on Python 3.11 an asyncio.wait_for whose inner
        # future completes as it is cancelled swallows the cancellation (bpo-42130), and the
        # task would go back to waiting on its queue forever (seen on the channel to itself).
        self._closing = True
        while not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task], timeout=0.1)
        if self._conn is not None:
            await self._conn.close()


class BrokerChannels:
    """One ordered no-retry ``BrokerChannel`` per destination broker (a ``BrokerInfo``:
    ``broker_id``, ``host``, ``port`` on the inter-broker listener), with the inter-broker
    listener's TLS context and SASL settings (None: PLAINTEXT)."""

    def __init__(self, client_id: str, channel_factory: Any = None, *,
                 ssl_context: Any = None, sasl: Any = None) -> None:
        self.client_id = client_id
        self._factory = channel_factory or functools.partial(_no_retry_channel,
                                                             ssl_context=ssl_context, sasl=sasl)
        self._channels: dict[int, Any] = {}

    def _channel(self, broker_id: int, host: str, port: int) -> Any:
        ch = self._channels.get(broker_id)
        if ch is not None and (ch.host, ch.port) != (host, port):
            # The broker came back at another address: a new channel (the old one is closed).
            asyncio.ensure_future(ch.close())
            ch = None
        if ch is None:
            ch = self._channels[broker_id] = self._factory(broker_id, host, port, self.client_id)
        return ch

    async def request(self, broker: Any, body: Any, version: Any = None) -> Any:
        """Send ``body`` to ``broker`` behind the requests queued for it (at
        ``version(conn)`` when given); its response, or the exception that stopped it."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def answered(resp: Any) -> None:
            if not fut.done():
                fut.set_result(resp)

        ch = self._channel(broker.broker_id, broker.host, broker.port)
        ch.enqueue(lambda _conn: body, answered, version)
        return await fut

    def retain(self, live: Mapping[int, Any]) -> None:
        """Close the channels of brokers no longer live."""
        for broker_id in [b for b in self._channels if b not in live]:
            asyncio.ensure_future(self._channels.pop(broker_id).close())

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        await asyncio.gather(*(ch.close() for ch in channels), return_exceptions=True)


def _no_retry_channel(broker_id: int, host: str, port: int, client_id: str, *,
                      ssl_context: Any = None, sasl: Any = None) -> BrokerChannel:
    return BrokerChannel(broker_id, host, port, client_id, retry=False, ssl_context=ssl_context, sasl=sasl)
