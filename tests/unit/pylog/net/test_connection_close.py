"""A ``BrokerConnection`` never leaves its socket open, whatever lands while it connects
or closes: each test forces one race and then checks, on the server's side, that the
client closed every socket it opened (a socket nobody closes is reported as "unclosed
transport" when it is collected, which pytest's filterwarnings turns into a failure).

The races:
- a broker that accepts and never answers ApiVersions: the connect times out;
- close() or abort() landing exactly as the socket opens (the transport comes back to a
  closed connection);
- the caller's cancel landing exactly as the socket opens: Python 3.11's ``wait_for``
  returns the transport and swallows the cancel (CPython gh-86296);
- a close cancelled while the socket is still flushing to a peer that stopped reading;
- a ``Cluster.close`` while a bootstrap connect runs (the connection came back after the
  cluster cleared its tables).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from _harness.fake_broker import FakeBroker

from pylog.client.aio._cluster import Cluster
from pylog.net.connection import BrokerConnection
from pylog.net.errors import KafkaConnectionError, KafkaTimeoutError

# A guard against a hang, not a speed assertion: each condition holds within a few loop
# turns, or, with the bug, never.
GUARD = 15.0


def _connection(broker: FakeBroker) -> BrokerConnection:
    return BrokerConnection(broker.host, broker.port, node_id=-1, client_id="t",
                            request_timeout=30.0)


async def _until(pred: Any, what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + GUARD
    while not pred():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _all_closed(broker: FakeBroker) -> None:
    await _until(lambda: broker.accepted > 0 and broker.open_connections() == 0,
                 f"the client to close its sockets ({broker.accepted} accepted, "
                 f"{broker.ended} closed)")


def test_a_broker_that_never_answers_api_versions_times_out_and_the_socket_is_closed() -> None:
    async def main(broker: FakeBroker) -> None:
        conn = _connection(broker)
        with pytest.raises(KafkaTimeoutError, match="no ApiVersions answer"):
            await conn.connect(0.2)
        assert conn.closed
        await _all_closed(broker)

    with FakeBroker(answer_api_versions=False) as broker:
        asyncio.run(main(broker))


@pytest.mark.parametrize("how", ["close", "abort"])
def test_a_close_as_the_socket_opens_closes_the_socket(how: str) -> None:
    async def main(broker: FakeBroker) -> None:
        loop = asyncio.get_running_loop()
        conn = _connection(broker)
        real = loop.create_connection

        async def opened_then_closed(*args: Any, **kwargs: Any) -> Any:
            got = await real(*args, **kwargs)
            if how == "abort":
                conn.abort()
            else:
                await conn.close()  # the transport is not the connection's yet
            return got

        loop.create_connection = opened_then_closed  # type: ignore[method-assign]
        with pytest.raises(KafkaConnectionError, match="closed"):
            await conn.connect(5.0)
        assert broker.requests == []  # nothing was sent on it
        await _all_closed(broker)

    with FakeBroker() as broker:
        asyncio.run(main(broker))


def test_a_cancel_as_the_socket_opens_leaves_no_socket_open() -> None:
    """The cancel lands in the loop turn in which the connect completes: on 3.11 the
    ``wait_for`` around it returns the transport anyway; the connection goes on and is
    handed out, or is closed, but never dropped open."""
    async def main(broker: FakeBroker) -> None:
        loop = asyncio.get_running_loop()
        conn = _connection(broker)
        real = loop.create_connection
        outer: list[asyncio.Task[Any]] = []

        async def opened_as_cancelled(*args: Any, **kwargs: Any) -> Any:
            got = await real(*args, **kwargs)
            outer[0].cancel()
            return got

        loop.create_connection = opened_as_cancelled  # type: ignore[method-assign]
        task = loop.create_task(conn.connect(5.0))
        outer.append(task)
        try:
            await asyncio.wait({task}, timeout=GUARD)
        finally:
            loop.create_connection = real  # type: ignore[method-assign]
        assert task.done()
        if not task.cancelled() and task.exception() is None:
            assert not conn.closed  # handed out: its owner closes it
            await conn.close()
        else:
            assert conn.closed
        await _all_closed(broker)

    with FakeBroker() as broker:
        asyncio.run(main(broker))


def test_a_cancelled_close_aborts_a_socket_still_flushing() -> None:
    """The peer stops reading; the connection has megabytes queued in its transport when it
    is closed, and that close is cancelled: the socket is aborted, not left flushing with
    nobody to abort it."""
    async def main() -> None:
        accepted: list[socket.socket] = []
        listener = socket.create_server(("127.0.0.1", 0))
        listener.setblocking(False)
        loop = asyncio.get_running_loop()
        host, port = listener.getsockname()[:2]
        conn = BrokerConnection(host, port, node_id=-1, client_id="t", request_timeout=30.0)
        real = loop.create_connection

        async def connect_only(*args: Any, **kwargs: Any) -> Any:
            got = await real(*args, **kwargs)
            peer, _ = await loop.sock_accept(listener)
            accepted.append(peer)
            return got

        loop.create_connection = connect_only  # type: ignore[method-assign]
        conn._negotiate = _no_negotiation  # type: ignore[method-assign]  # nothing to ask
        try:
            await conn.connect(5.0)
            transport = conn._transport
            stream = conn._stream
            assert transport is not None and stream is not None
            transport.write(b"\0" * (64 << 20))  # far more than the socket buffers take
            assert transport.get_write_buffer_size() > 0
            closing = loop.create_task(conn.close())
            await _until(lambda: transport.is_closing(), "close to start")
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
            await _until(lambda: stream.closed.done(), "the socket to be aborted")
        finally:
            loop.create_connection = real  # type: ignore[method-assign]
            for s in accepted:
                s.close()
            listener.close()

    asyncio.run(main())


async def _no_negotiation() -> None:
    return None


def test_a_bootstrap_connection_opened_as_the_cluster_closes_is_closed() -> None:
    """``Cluster.close`` runs while ``any_connection`` (not one of the cluster's own tasks,
    so not cancelled) is still negotiating: the connection it gets is closed, not stored
    in the table close just cleared."""
    async def main(broker: FakeBroker) -> None:
        loop = asyncio.get_running_loop()
        cluster = Cluster([(broker.host, broker.port)], client_id="t", request_timeout=30.0,
                          connect_timeout=5.0, metadata_max_age=300.0)
        gate = asyncio.Event()
        real_negotiate = BrokerConnection._negotiate

        async def slow_negotiate(self: BrokerConnection) -> None:
            await gate.wait()
            await real_negotiate(self)

        BrokerConnection._negotiate = slow_negotiate  # type: ignore[method-assign]
        try:
            task = loop.create_task(cluster.any_connection())
            await _until(lambda: broker.accepted == 1, "the bootstrap connect")
            await cluster.close()
            gate.set()
            with pytest.raises(KafkaConnectionError, match="client is closed"):
                await task
        finally:
            BrokerConnection._negotiate = real_negotiate  # type: ignore[method-assign]
        await _all_closed(broker)

    with FakeBroker() as broker:
        asyncio.run(main(broker))


def test_a_cancelled_cluster_close_aborts_the_connections_left() -> None:
    async def main(broker: FakeBroker) -> None:
        loop = asyncio.get_running_loop()
        cluster = Cluster([(broker.host, broker.port)], client_id="t", request_timeout=30.0,
                          connect_timeout=5.0, metadata_max_age=300.0)
        conns = [await cluster.coordinator_connection(i, broker.host, broker.port)
                 for i in range(3)]
        for i, c in enumerate(conns):
            cluster._conns[i] = c  # type: ignore[assignment]
        first = conns[0]
        assert first._transport is not None
        first._transport.pause_reading()
        # The first close waits for the socket to close; it is cancelled meanwhile.
        flushing = asyncio.Event()
        real_close = BrokerConnection.close

        async def stalled_close(self: BrokerConnection, error: Any = None) -> None:
            if self is first:
                flushing.set()
                await asyncio.sleep(3600)
            await real_close(self, error)

        BrokerConnection.close = stalled_close  # type: ignore[method-assign]
        try:
            closing = loop.create_task(cluster.close())
            await flushing.wait()
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
        finally:
            BrokerConnection.close = real_close  # type: ignore[method-assign]
        assert conns[1].closed and conns[2].closed
        await first.close()
        await _all_closed(broker)

    with FakeBroker() as broker:
        asyncio.run(main(broker))
