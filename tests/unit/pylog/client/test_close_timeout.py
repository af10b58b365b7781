"""``close(timeout)`` of the blocking clients bounds the whole close, as Kafka's
``close(Duration)`` does: a close still running after ``timeout`` is abandoned, the
client's connections are aborted and its I/O thread is stopped.

(What a close does once its time is up gets ``CLOSE_GRACE`` more: a ``close(timeout=0)``
still sends its LeaveGroup, ``test_client_group_close``.) Each client's close is replaced
by one stuck on a broker that never answers
(``_harness.fake_broker``), which also absorbs the first cancel, as a task whose cancel
Python 3.11's ``wait_for`` swallowed does: only the abort gets it out. Before the bound,
``close(timeout)`` waited for it without end."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from _harness.fake_broker import FakeBroker
from _harness.waiting import wait_until

from pylog.client import Admin, Consumer, Producer, ShareConsumer
from pylog.protocol.messages import MetadataRequest

# A guard against a hang, not a speed assertion: the close returns about ``timeout`` plus
# ``CLOSE_GRACE`` after it is called, or (without the bound) after an hour.
GUARD = 30.0


def _stuck_close(cluster: Any, entered: threading.Event) -> Any:
    async def close(*args: Any, **kwargs: Any) -> None:
        conn = await cluster.any_connection()
        entered.set()
        try:
            await conn.send(MetadataRequest(topics=[], allow_auto_topic_creation=False),
                            timeout=3600)
        except asyncio.CancelledError:
            pass  # absorbed: the abort, not the cancel, must end this close
        await conn.send(MetadataRequest(topics=[], allow_auto_topic_creation=False), timeout=3600)

    return close


def _make(kind: str, bootstrap: str) -> tuple[Any, Any, str, Any]:
    """The client, the object whose close is replaced, that attribute, and the cluster."""
    if kind == "producer":
        p = Producer({"bootstrap.servers": bootstrap})
        return p, p._core, "close", p._core.cluster
    if kind == "consumer":
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
        return c, c._core, "close", c._core.cluster
    if kind == "share-consumer":
        s = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "g"})
        return s, s._core, "close", s._core.cluster
    a = Admin({"bootstrap.servers": bootstrap})
    return a, a._aio, "close", a._aio._core.cluster


@pytest.mark.parametrize("kind", ["producer", "consumer", "share-consumer", "admin"])
def test_close_timeout_abandons_a_stuck_close_and_aborts_the_connections(kind: str) -> None:
    with FakeBroker() as broker:
        client, owner, attr, cluster = _make(kind, broker.bootstrap)
        entered = threading.Event()
        setattr(owner, attr, _stuck_close(cluster, entered))
        errors: list[BaseException] = []

        def closing() -> None:
            try:
                client.close(timeout=0.5)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        closer = threading.Thread(target=closing, name=f"test-close-{kind}")
        closer.start()
        closer.join(GUARD)
        assert not closer.is_alive(), f"{kind}.close(timeout=0.5) did not return"
        assert errors == []
        assert entered.is_set()  # the stuck close did get to wait on the broker
        assert not client._thread.thread.is_alive()  # the I/O thread is stopped
        wait_until(lambda: broker.open_connections() == 0, GUARD,
                   "the client's sockets to be closed", interval=0.01)
        client.close(timeout=0.5)  # idempotent


def test_close_timeout_lets_a_close_that_ends_in_time_finish() -> None:
    """A close done within its timeout is not abandoned: the connections are closed by the
    close itself, and what it raises reaches the caller."""
    with FakeBroker() as broker:
        admin = Admin({"bootstrap.servers": broker.bootstrap})
        real = admin._aio.close

        async def close_then_fail() -> None:
            await real()
            raise RuntimeError("from the close")

        admin._aio.close = close_then_fail  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="from the close"):
            admin.close(timeout=GUARD)
        assert not admin._thread.thread.is_alive()
