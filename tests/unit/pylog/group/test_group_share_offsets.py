"""``pylog.group.share.offsets``: the SPSO, leader epoch and lag a share partition reports, a
reset (a new state epoch at the coordinator, the leader's stale share partition dropped) and a
topic's deletion, through the persister's admin calls (ReadShareGroupStateSummary,
InitializeShareGroupState, DeleteShareGroupState), over a stand-in for the broker's share
service and a coordinator kept in a dict with the store's fencing rule."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from pylog import errors
from pylog.group.share import offsets
from pylog.group.share.share_partition import AcknowledgeType, SharePartition, StateBatch
from pylog.group.share.state_store import UNINITIALIZED_START_OFFSET, ShareState, StateResult

TID = uuid.uuid4()
OTHER = uuid.uuid4()  # a topic this broker holds no replica of


class FakeCoordinator:
    """The persister's admin calls over a dict, with ``ShareStateStore``'s rules: an
    initialize needs a state epoch above the held one (FENCED_STATE_EPOCH otherwise);
    ``fail`` makes every call answer that code; ``local`` says whether it is on this broker
    (then ``ShareService.state`` holds its states, batches included)."""

    def __init__(self) -> None:
        self.table: dict[Any, ShareState] = {}
        self.fail = 0
        self.calls: list[str] = []

    async def read_summary(self, key: Any) -> StateResult:
        self.calls.append("summary")
        if self.fail:
            return StateResult(self.fail, "injected")
        st = self.table.get(key)
        return StateResult(0, None, st or ShareState(0, -1, UNINITIALIZED_START_OFFSET, []))

    async def initialize(self, key: Any, state_epoch: int, start_offset: int) -> StateResult:
        self.calls.append("initialize")
        if self.fail:
            return StateResult(self.fail, "injected")
        st = self.table.get(key)
        if st is not None and state_epoch <= st.state_epoch:
            return StateResult(errors.FencedStateEpochError.code, "fenced")
        self.table[key] = ShareState(state_epoch, -1 if st is None else st.leader_epoch, start_offset, [])
        return StateResult(0)

    async def delete_now(self, key: Any) -> StateResult:
        self.calls.append("delete")
        if self.fail:
            return StateResult(self.fail, "injected")
        self.table.pop(key, None)
        return StateResult(0)

    def saved(self, key: Any) -> ShareState | None:
        return self.table.get(key)

    def keys(self) -> list[Any]:
        return list(self.table)


class FakeShare:
    """What ``offsets`` uses of ``ShareService``: a replica of topic ``t`` (leader epoch 3,
    high watermark ``hw``); ``remote`` puts the coordinator on another broker."""

    def __init__(self, hw: int, remote: bool = False) -> None:
        self.coordinator = FakeCoordinator()
        self.persister = self.coordinator
        self.state = None if remote else self.coordinator
        self.partitions: dict[Any, SharePartition] = {}
        self.forgotten: list[Any] = []
        self.topic = SimpleNamespace(name="t", topic_id=TID, partitions=[object(), object()])
        self.broker = SimpleNamespace(replicas=SimpleNamespace(partitions={
            ("t", 0): SimpleNamespace(leader_epoch=3, high_watermark=hw),
            ("t", 1): SimpleNamespace(leader_epoch=4, high_watermark=hw)}))

    def topic_of(self, topic_id: uuid.UUID) -> Any:
        return self.topic if topic_id == TID else None

    def leader_bounds(self, topic: Any, partition: int) -> Any:
        return None

    def forget(self, key: Any) -> None:
        self.forgotten.append(key)
        self.partitions.pop(key, None)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _in_flight(share: FakeShare) -> SharePartition:
    """SPSO 5; 5-9 acquired by m; 7 and 8 accepted, 9 rejected: three done above the start;
    10-11 never delivered. Held by this broker (its leader) and written to the coordinator."""
    sp = SharePartition(5, delivery_count_limit=5, max_in_flight=2000)
    sp.acquire("m", 5, 9, 100, 0, 30_000)
    sp.acknowledge("m", [(7, 9, [AcknowledgeType.ACCEPT, AcknowledgeType.ACCEPT, AcknowledgeType.REJECT])])
    share.partitions[("g", TID, 0)] = sp
    share.coordinator.table[("g", TID, 0)] = ShareState(sp.state_epoch, 3, sp.start_offset, sp.state_batches())
    return sp


def test_lag_counts_what_is_not_done_between_the_start_and_the_high_watermark() -> None:
    share = FakeShare(hw=12)
    _in_flight(share)
    # hw 12 - SPSO 5 = 7 records, of which 7, 8 (accepted) and 9 (rejected) are done.
    assert run(offsets.describe(share, "g", TID, 0)) == offsets.ShareOffset(5, 3, 4)
    assert run(offsets.describe(share, "other", TID, 0)) is None
    assert run(offsets.describe(share, "g", TID, 1)) is None  # never written


def test_the_coordinators_state_is_described_without_a_share_partition_here() -> None:
    share = FakeShare(hw=12)
    share.coordinator.table[("g", TID, 1)] = ShareState(2, 4, 3, [StateBatch(3, 4, 0, 1), StateBatch(5, 6, 2, 1)])
    assert run(offsets.describe(share, "g", TID, 1)) == offsets.ShareOffset(3, 4, 12 - 3 - 2)
    assert run(offsets.initialized_partitions(share, "g", {TID: 2})) == {TID: {1}}
    assert run(offsets.initialized_partitions(share, "h", {TID: 2})) == {}


def test_a_remote_coordinator_without_batches_gives_an_unknown_lag() -> None:
    """ReadShareGroupStateSummary v0 carries no batches: without the share partition here
    the lag is -1; the leader epoch is this broker's replica's; no replica, no lag either."""
    share = FakeShare(hw=12, remote=True)
    share.coordinator.table[("g", TID, 1)] = ShareState(2, -1, 3, [])
    share.coordinator.table[("g", OTHER, 0)] = ShareState(1, -1, 8, [])
    assert run(offsets.describe(share, "g", TID, 1)) == offsets.ShareOffset(3, 4, -1)
    assert run(offsets.describe(share, "g", OTHER, 0)) == offsets.ShareOffset(8, -1, -1)
    _in_flight(share)  # led here: its share partition gives the batches
    assert run(offsets.describe(share, "g", TID, 0)) == offsets.ShareOffset(5, 3, 4)


def test_reset_bumps_the_state_epoch_and_drops_the_share_partition_here() -> None:
    share = FakeShare(hw=12)
    old = _in_flight(share)
    run(offsets.reset(share, "g", TID, 0, 2))
    st = share.coordinator.table[("g", TID, 0)]
    assert (st.state_epoch, st.start_offset, st.batches) == (old.state_epoch + 1, 2, [])
    assert share.forgotten == [("g", TID, 0)] and ("g", TID, 0) not in share.partitions
    assert run(offsets.describe(share, "g", TID, 0)) == offsets.ShareOffset(2, 3, 10)
    run(offsets.reset(share, "g", TID, 1, 0))  # never written: epoch 1
    assert share.coordinator.table[("g", TID, 1)].state_epoch == 1


def test_a_refused_reset_changes_nothing_and_raises_the_clients_error() -> None:
    share = FakeShare(hw=12)
    _in_flight(share)
    share.coordinator.fail = errors.NotEnoughReplicasError.code  # retried by the persister, then given up
    with pytest.raises(errors.CoordinatorNotAvailableError):
        run(offsets.reset(share, "g", TID, 0, 2))
    assert share.coordinator.table[("g", TID, 0)].start_offset == 5 and not share.forgotten
    share.coordinator.fail = errors.GroupAuthorizationFailedError.code  # passed on
    with pytest.raises(errors.GroupAuthorizationFailedError):
        run(offsets.describe(share, "g", TID, 0))


def test_delete_topic() -> None:
    share = FakeShare(hw=12)
    assert run(offsets.delete_topic(share, "g", TID, 2)) is False  # no state: nothing deleted
    assert "delete" not in share.coordinator.calls
    _in_flight(share)
    share.coordinator.table[("g", TID, 1)] = ShareState(1, 4, 0, [])
    share.coordinator.table[("h", TID, 1)] = ShareState(1, 4, 0, [])
    assert run(offsets.delete_topic(share, "g", TID, 2)) is True
    assert set(share.coordinator.table) == {("h", TID, 1)}
    assert share.forgotten == [("g", TID, 0), ("g", TID, 1)] and not share.partitions
