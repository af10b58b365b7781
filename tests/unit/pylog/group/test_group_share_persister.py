"""The share-partition leader's persister (pylog.group.share.persister) against a remote share
coordinator, with a fake cluster lookup and fake inter-broker channels: reads, writes grouped
per group and coordinator, retries of a moved or unreachable coordinator, the deadline,
fenced writes reported, and flushes that reach the coordinator in order."""

from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace
from typing import Any

from pylog import errors
from pylog.controller.metadata_cache import BrokerInfo
from pylog.group.share.persister import SharePersister
from pylog.group.share.share_partition import StateBatch
from pylog.group.share.state_store import ShareState
from pylog.log.topics import topic_id_str
from pylog.protocol.messages import ReadShareGroupStateResponse, WriteShareGroupStateResponse

T = uuid.UUID(int=9)
REMOTE = BrokerInfo(1, "10.0.0.1", 9092, None)


class _Clock:
    def monotonic(self) -> float:
        return time.monotonic()


class FakeChannels:
    """Answers each request with ``answer(body)`` (a response or an exception)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.sent: list[Any] = []

    async def request(self, broker: Any, body: Any, version: Any = None) -> Any:
        assert broker is REMOTE
        self.sent.append(body)
        return await self.answer(body)

    async def close(self) -> None:
        pass


def persister(answer: Any, *, timeout_ms: int = 5000, lookups: list[int] | None = None) -> tuple[SharePersister, FakeChannels]:
    async def find_coordinator(key: str, key_type: int) -> tuple[int, str | None, Any]:
        group, topic_id, partition = key.split(":")  # groupId:topicId:partition, Kafka's base64 id
        assert key_type == 2 and group in ("g", "h") and topic_id == topic_id_str(T) and int(partition) >= 0
        if lookups is not None:
            lookups.append(1)
        return 0, None, REMOTE

    broker = SimpleNamespace(config={"share.coordinator.write.timeout.ms": timeout_ms}, clock=_Clock(),
                             stopping=False, node_id=0, cluster=SimpleNamespace(find_coordinator=find_coordinator))
    p = SharePersister(broker, store=None)  # type: ignore[arg-type] - never local here
    ch = FakeChannels(answer)
    p._channels = ch
    return p, ch


def _write_answer(codes: dict[tuple[str, int], int]) -> Any:
    R = WriteShareGroupStateResponse

    async def answer(body: Any) -> Any:
        return R(results=[R.WriteStateResult(topic_id=t.topic_id, partitions=[
            R.PartitionResult(partition=p.partition, error_code=codes.get((body.group_id, p.partition), 0))
            for p in t.partitions]) for t in body.topics])
    return answer


def test_read_retries_a_moved_coordinator_and_looks_it_up_again() -> None:
    R = ReadShareGroupStateResponse
    answers = [errors.NotCoordinatorError.code, errors.CoordinatorLoadInProgressError.code, 0]

    async def answer(body: Any) -> Any:
        code = answers.pop(0)
        (t,) = body.topics
        (p,) = t.partitions
        assert p.leader_epoch == 7
        return R(results=[R.ReadStateResult(topic_id=t.topic_id, partitions=[R.PartitionResult(
            partition=p.partition, error_code=code, error_message=None, state_epoch=2, start_offset=40,
            state_batches=[R.StateBatch(first_offset=40, last_offset=41, delivery_state=2, delivery_count=1)])])])

    async def go() -> None:
        lookups: list[int] = []
        p, ch = persister(answer, lookups=lookups)
        r = await p.read(("g", T, 3), 7)
        assert r.error_code == 0 and r.state == ShareState(2, 7, 40, [StateBatch(40, 41, 2, 1)])
        assert len(ch.sent) == 3 and len(lookups) == 3

    asyncio.run(go())


def test_writes_are_grouped_per_group_and_fenced_ones_reported() -> None:
    async def go() -> None:
        p, ch = persister(_write_answer({("h", 1): errors.FencedLeaderEpochError.code}))
        st = ShareState(0, 5, 10, [StateBatch(10, 12, 0, 1)])
        p.write(("g", T, 0), st)
        p.write(("g", T, 1), st)
        p.write(("h", T, 1), st)
        p.write(("g", T, 0), st._replace(start_offset=11, batches=[StateBatch(11, 12, 0, 1)]))  # latest wins
        failed = await p.flushed()
        assert failed == {("h", T, 1): errors.FencedLeaderEpochError.code}
        assert sorted(b.group_id for b in ch.sent) == ["g", "h"]
        g = next(b for b in ch.sent if b.group_id == "g")
        parts = {x.partition: x for t in g.topics for x in t.partitions}
        assert parts[0].start_offset == 11 and parts[0].leader_epoch == 5
        assert [(b.first_offset, b.last_offset) for b in parts[0].state_batches] == [(11, 12)]
        assert parts[1].start_offset == 10

    asyncio.run(go())


def test_a_broken_connection_is_retried_and_the_deadline_ends_retries() -> None:
    calls = []

    async def flaky(body: Any) -> Any:
        calls.append(body)
        if len(calls) == 1:
            return ConnectionResetError("gone")  # what a no-retry channel hands back
        return await _write_answer({})(body)

    async def unavailable(body: Any) -> Any:
        return await _write_answer({("g", 0): errors.CoordinatorNotAvailableError.code})(body)

    async def go() -> None:
        p, _ = persister(flaky)
        p.write(("g", T, 0), ShareState(0, 0, 0, []))
        assert await p.flushed() == {}
        assert len(calls) == 2
        p, ch = persister(unavailable, timeout_ms=300)
        p.write(("g", T, 0), ShareState(0, 0, 0, []))
        assert await p.flushed() == {("g", T, 0): errors.CoordinatorNotAvailableError.code}
        assert len(ch.sent) >= 2  # retried until the deadline

    asyncio.run(go())


def test_flushes_reach_the_coordinator_in_order() -> None:
    release = None
    order: list[int] = []

    async def answer(body: Any) -> Any:
        order.append(body.topics[0].partitions[0].start_offset)
        if len(order) == 1:
            await release.wait()  # the first flush is slow
        return await _write_answer({})(body)

    async def go() -> None:
        nonlocal release
        release = asyncio.Event()
        p, _ = persister(answer)
        p.write(("g", T, 0), ShareState(0, 0, 1, []))
        first = asyncio.ensure_future(p.flushed())
        while not order:
            await asyncio.sleep(0)
        p.write(("g", T, 0), ShareState(0, 0, 2, []))  # noted while the first is in flight
        second = asyncio.ensure_future(p.flushed())
        for _ in range(20):
            await asyncio.sleep(0)
        assert order == [1] and not second.done()  # not sent before the first is answered
        release.set()
        assert await first == {} and await second == {}
        assert order == [1, 2]

    asyncio.run(go())


def test_a_write_that_failed_before_flushed_was_called_is_still_reported() -> None:
    """A request marks, notes its writes, and awaits something else (a load) while their
    flush fails; its ``flushed(since)`` still reports the failure (``flushed()`` without a
    mark waits only for flushes in progress). A later success of the same share partition
    clears it; ``on_failed`` sees every failed flush."""
    codes: dict[tuple[str, int], int] = {("g", 0): errors.FencedStateEpochError.code}
    seen: list[dict[Any, int]] = []

    async def go() -> None:
        p, _ = persister(_write_answer(codes))
        p.on_failed = seen.append
        since = p.mark()
        p.write(("g", T, 0), ShareState(0, 0, 1, []))
        p.write(("g", T, 1), ShareState(0, 0, 1, []))
        await p.flushed()  # someone else's wait: this flush is over
        assert await p.flushed() == {}  # nothing in progress any more
        assert await p.flushed(since) == {("g", T, 0): errors.FencedStateEpochError.code}
        assert seen == [{("g", T, 0): errors.FencedStateEpochError.code}]
        later = p.mark()
        assert later > since
        assert await p.flushed(later) == {}  # an older flush's failure is not a later request's
        codes.clear()
        p.write(("g", T, 0), ShareState(1, 0, 2, []))
        await p.flushed()
        assert await p.flushed(since) == {}  # written since: the failure is gone

    asyncio.run(go())


def test_the_admin_calls_over_the_rpcs() -> None:
    """ReadShareGroupStateSummary (state epoch and start offset only), InitializeShareGroupState
    (a fenced state epoch is not retried; a moved coordinator is) and DeleteShareGroupState."""
    from pylog.protocol.messages import (
        DeleteShareGroupStateResponse,
        InitializeShareGroupStateResponse,
        ReadShareGroupStateSummaryResponse,
    )
    init_codes = [errors.NotCoordinatorError.code, 0, errors.FencedStateEpochError.code]

    async def answer(body: Any) -> Any:
        (t,) = body.topics
        (p,) = t.partitions
        name = type(body).__name__
        if name == "ReadShareGroupStateSummaryRequest":
            S = ReadShareGroupStateSummaryResponse
            assert p.leader_epoch == -1
            return S(results=[S.ReadStateSummaryResult(topic_id=t.topic_id, partitions=[S.PartitionResult(
                partition=p.partition, error_code=0, state_epoch=4, start_offset=17)])])
        if name == "InitializeShareGroupStateRequest":
            I = InitializeShareGroupStateResponse  # noqa: E741
            assert (p.state_epoch, p.start_offset) == (5, 3)
            return I(results=[I.InitializeStateResult(topic_id=t.topic_id, partitions=[I.PartitionResult(
                partition=p.partition, error_code=init_codes.pop(0))])])
        D = DeleteShareGroupStateResponse
        return D(results=[D.DeleteStateResult(topic_id=t.topic_id, partitions=[D.PartitionResult(
            partition=p.partition, error_code=0)])])

    async def go() -> None:
        p, ch = persister(answer)
        r = await p.read_summary(("g", T, 2))
        assert r.error_code == 0 and r.state == ShareState(4, -1, 17, [])
        assert (await p.initialize(("g", T, 2), 5, 3)).error_code == 0  # after one retry
        assert (await p.initialize(("g", T, 2), 5, 3)).error_code == errors.FencedStateEpochError.code
        assert not init_codes  # the fenced answer was not retried
        assert (await p.delete_now(("g", T, 2))).error_code == 0
        assert [type(b).__name__ for b in ch.sent] == [
            "ReadShareGroupStateSummaryRequest", "InitializeShareGroupStateRequest",
            "InitializeShareGroupStateRequest", "InitializeShareGroupStateRequest",
            "DeleteShareGroupStateRequest"]

    asyncio.run(go())
