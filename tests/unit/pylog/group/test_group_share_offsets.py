"""``pylog.group.share.offsets``: the SPSO, leader epoch and lag a share partition reports,
a reset and a topic's deletion with their undo, over a stand-in for the broker's share
service (the module only reads its share partitions, state store and leader bounds)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from pylog.errors import NotLeaderOrFollowerError
from pylog.group.share import offsets
from pylog.group.share.share_partition import AcknowledgeType, SharePartition, StateBatch

TID = uuid.uuid4()


class FakeStore:
    """The state store's reading, writing and restoring, over a dict."""

    def __init__(self) -> None:
        self.table: dict[Any, tuple[int, list[StateBatch], int]] = {}

    def read(self, key: Any) -> Any:
        s = self.table.get(key)
        return None if s is None else (s[0], s[1])

    def keys(self) -> set[Any]:
        return set(self.table)

    def state_epoch(self, key: Any) -> int:
        s = self.table.get(key)
        return 0 if s is None else s[2]

    def saved(self, key: Any) -> Any:
        return self.table.get(key)

    def write(self, key: Any, sp: SharePartition) -> None:
        self.table[key] = (sp.start_offset, sp.state_batches(), sp.state_epoch)

    def delete(self, key: Any) -> None:
        self.table.pop(key, None)

    def restore(self, key: Any, saved: Any) -> None:
        if saved is None:
            self.table.pop(key, None)
        else:
            self.table[key] = saved


class FakeShare:
    """What ``offsets`` uses of ``ShareService``; partition 1 is led elsewhere."""

    def __init__(self, hw: int) -> None:
        self.hw = hw
        self.partitions: dict[Any, SharePartition] = {}
        self.state = FakeStore()
        self.broker = SimpleNamespace(
            config={"broker.id": 0, "group.share.partition.max.record.locks": 2000},
            replicas=SimpleNamespace(partitions={("t", 0): SimpleNamespace(leader_epoch=3)}))

    def leader_bounds(self, topic: Any, partition: int) -> Any:
        return None if partition == 1 else (None, self.hw)

    def delivery_count_limit(self, group_id: str) -> int:
        return 5

    def changed(self, key: Any, sp: SharePartition, woke: bool = False) -> None:
        self.state.write(key, sp)

    def arm(self) -> None:
        pass


@pytest.fixture
def share() -> FakeShare:
    return FakeShare(hw=12)


TOPIC = SimpleNamespace(name="t", topic_id=TID, partitions=[object(), object()])


def _in_flight(share: FakeShare) -> SharePartition:
    """SPSO 5; 5-9 acquired by m; 7 and 8 accepted, 9 rejected: two done above the start
    plus one archived; 10-11 never delivered."""
    sp = SharePartition(5, delivery_count_limit=5, max_in_flight=2000)
    sp.acquire("m", 5, 9, 100, 0, 30_000)
    sp.acknowledge("m", [(7, 9, [AcknowledgeType.ACCEPT, AcknowledgeType.ACCEPT, AcknowledgeType.REJECT])])
    share.partitions[("g", TID, 0)] = sp
    return sp


def test_lag_counts_what_is_not_done_between_the_start_and_the_high_watermark(share) -> None:
    _in_flight(share)
    found = offsets.describe(share, "g", TOPIC, 0)
    # hw 12 - SPSO 5 = 7 records, of which 7, 8 (accepted) and 9 (rejected) are done.
    assert found == offsets.ShareOffset(5, 3, 4)
    assert offsets.describe(share, "other", TOPIC, 0) is None
    with pytest.raises(NotLeaderOrFollowerError):
        offsets.describe(share, "g", TOPIC, 1)


def test_saved_state_is_described_without_a_share_partition_in_memory(share) -> None:
    share.state.table[("g", TID, 0)] = (3, [StateBatch(3, 4, 0, 1), StateBatch(5, 6, 2, 1)], 2)
    assert offsets.describe(share, "g", TOPIC, 0) == offsets.ShareOffset(3, 3, 12 - 3 - 2)
    assert offsets.initialized_partitions(share, "g") == {TID: {0}}


def test_reset_and_its_undo(share) -> None:
    old = _in_flight(share)
    share.state.write(("g", TID, 0), old)
    before = share.state.saved(("g", TID, 0))
    undo = offsets.reset(share, "g", TOPIC, 0, 2)
    new = share.partitions[("g", TID, 0)]
    assert (new.start_offset, new.end_offset, new.state_epoch) == (2, 2, old.state_epoch + 1)
    assert offsets.describe(share, "g", TOPIC, 0) == offsets.ShareOffset(2, 3, 10)
    undo()
    assert share.partitions[("g", TID, 0)] is old
    assert share.state.saved(("g", TID, 0)) == before
    with pytest.raises(NotLeaderOrFollowerError):
        offsets.reset(share, "g", TOPIC, 1, 0)


def test_delete_topic_and_its_undo(share) -> None:
    assert offsets.delete_topic(share, "g", TOPIC) is None  # no state: nothing to delete
    sp = _in_flight(share)
    share.state.write(("g", TID, 0), sp)
    undo = offsets.delete_topic(share, "g", TOPIC)
    assert undo is not None
    assert ("g", TID, 0) not in share.partitions and share.state.read(("g", TID, 0)) is None
    undo()
    assert share.partitions[("g", TID, 0)] is sp and share.state.read(("g", TID, 0)) is not None
