"""A share consumer's close is bounded and leaves no socket open, against a broker that
answers ApiVersions and then nothing (``_harness.fake_broker``); and a coordinator
connection the heartbeat loop drops (NOT_COORDINATOR, a failed request) is closed, not
left open for the garbage collector to report as an "unclosed transport"."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _harness.fake_broker import FakeBroker

from pylog import errors
from pylog.client.aio.share_consumer import ShareConsumer, _Session
from pylog.client.errors import KafkaTimeoutError
from pylog.protocol.messages import ShareGroupHeartbeatResponse

# A guard against a hang, not a speed assertion (each case ends within a few loop turns,
# or with the bug far later or never).
GUARD = 15.0


class StubConnection:
    """A coordinator connection answering each request with the next canned outcome (a
    response, or an exception to raise)."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.closed = False

    async def send(self, body: Any, version: int | None = None, *, timeout: float | None = None) -> Any:
        out = self.outcomes.pop(0) if self.outcomes else errors.UnknownServerError("no more")
        if isinstance(out, BaseException):
            raise out
        return out

    async def close(self, error: BaseException | None = None) -> None:
        self.closed = True


async def _until(pred: Any, what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + GUARD
    while not pred():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def _consumer(broker: FakeBroker) -> ShareConsumer:
    # Requests are given far longer than the test's guard: only close's own bounds count.
    return ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                          "request.timeout.ms": 600_000, "retry.backoff.ms": 10})


@pytest.mark.parametrize("outcome", [
    ShareGroupHeartbeatResponse(error_code=errors.NotCoordinatorError.code),
    ShareGroupHeartbeatResponse(error_code=errors.CoordinatorNotAvailableError.code),
    errors.UnsupportedVersionError("the coordinator does not serve ShareGroupHeartbeat"),
], ids=["not-coordinator", "coordinator-not-available", "api-error"])
def test_a_dropped_coordinator_connection_is_closed(outcome: Any) -> None:
    async def main(broker: FakeBroker) -> None:
        c = _consumer(broker)
        stub = StubConnection(outcome)
        c._coordinator = stub
        await c.subscribe(["jobs"])
        await _until(lambda: stub.closed, "the dropped coordinator connection to be closed")
        await asyncio.wait_for(c.close(0.5), GUARD)
        await _until(lambda: broker.open_connections() == 0, "every socket closed")

    with FakeBroker() as broker:
        asyncio.run(main(broker))


def test_close_is_bounded_when_the_acknowledgement_and_the_leave_get_no_answer() -> None:
    """A share session with the (silent) broker and a joined member: the final
    ShareAcknowledge and the leave both wait on a broker that never answers; close gives
    them its timeout between them, then closes every socket."""
    async def main(broker: FakeBroker) -> None:
        c = _consumer(broker)
        c.cluster.brokers[0] = (broker.host, broker.port)
        c._sessions[0] = _Session()
        c._sessions[0].epoch = 3
        c._coordinator = await c.cluster.coordinator_connection(0, broker.host, broker.port)
        c.member_epoch = 5
        await asyncio.wait_for(c.close(0.3), GUARD)
        assert 79 in broker.requests  # the ShareAcknowledge went out, unanswered
        await _until(lambda: broker.open_connections() == 0, "every socket closed")

    with FakeBroker() as broker:
        asyncio.run(main(broker))


def test_close_during_a_coordinator_lookup_leaves_no_socket_open() -> None:
    """The heartbeat loop is looking the coordinator up (FindCoordinator unanswered) when
    close begins: the lookup is stopped and its socket closed."""
    async def main(broker: FakeBroker) -> None:
        c = _consumer(broker)
        await c.subscribe(["jobs"])
        await _until(lambda: 10 in broker.requests, "the FindCoordinator request")
        await asyncio.wait_for(c.close(0.3), GUARD)
        await _until(lambda: broker.open_connections() == 0, "every socket closed")

    with FakeBroker() as broker:
        asyncio.run(main(broker))


class RacingCoordinator:
    """A coordinator connection whose heartbeat answer the test releases: it waits as a
    ``BrokerConnection`` does (``wait_for(shield(answer))``), so that the answer and
    close's cancel can land in the same loop turn (Python 3.11's ``wait_for`` then
    swallows the cancel: ``pylog.client.aio._tasks``)."""

    def __init__(self) -> None:
        self.sent: list[int] = []  # member epochs
        self.answer: asyncio.Future[Any] | None = None
        self.closed = False

    async def send(self, body: Any, version: int | None = None, *, timeout: float | None = None) -> Any:
        self.sent.append(body.member_epoch)
        ok = ShareGroupHeartbeatResponse(error_code=0, member_id=body.member_id,
                                         member_epoch=1 if body.member_epoch >= 0 else -1,
                                         heartbeat_interval_ms=100)
        if body.member_epoch == 0 or body.member_epoch == -1:
            return ok
        self.answer = asyncio.get_running_loop().create_future()
        try:
            got = await asyncio.wait_for(asyncio.shield(self.answer), 5.0)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError("no answer") from None  # as BrokerConnection.wait
        self.answer = None
        return got

    async def close(self, error: BaseException | None = None) -> None:
        self.closed = True


@pytest.mark.parametrize("turns", range(4))
def test_close_as_a_heartbeat_answer_arrives_stops_the_heartbeat_and_leaves(turns: int) -> None:
    """The close that hung with its loop idle: the heartbeat's answer arrives ``turns``
    loop turns before close cancels the heartbeat task (0 to 3: where the race falls is
    CPython's business). Close must stop the loop, send the leave (epoch -1) and end."""
    async def main(broker: FakeBroker) -> None:
        c = _consumer(broker)
        coord = RacingCoordinator()
        c._coordinator = coord
        await c.subscribe(["jobs"])
        await _until(lambda: coord.answer is not None, "a heartbeat waiting for its answer")
        assert coord.answer is not None
        coord.answer.set_result(ShareGroupHeartbeatResponse(error_code=0, member_id=c.member_id,
                                                            member_epoch=1, heartbeat_interval_ms=100))
        for _ in range(turns):
            await asyncio.sleep(0)
        await asyncio.wait_for(c.close(1.0), GUARD)
        assert coord.sent[-1] == -1 and coord.closed
        assert c._heartbeat is None

    with FakeBroker() as broker:
        asyncio.run(main(broker))
