"""The glue contract of the sans-IO coordinator: Pending handles, Writes, timers and ticks."""

from __future__ import annotations

import pytest
from _harness.groups import GroupHarness

from pylog.group.offsets import OffsetCommitPartition
from pylog.group.results import Pending, Write
from pylog.group.timers import Timers


def test_pending_completes_once_and_runs_callbacks() -> None:
    p: Pending[int] = Pending()
    seen: list[int] = []
    p.add_done_callback(seen.append)
    with pytest.raises(RuntimeError):
        _ = p.result
    assert p._complete(1) is True and p._complete(2) is False
    p.add_done_callback(seen.append)  # already done: runs at once
    assert seen == [1, 1] and p.result == 1 and Pending.completed(5).done


def test_write_settles_exactly_once() -> None:
    codes: list[int] = []
    w = Write("g", [(b"k", None)], codes.append)
    with pytest.raises(ValueError):
        w.fail(0)
    w.fail(6)
    with pytest.raises(RuntimeError):
        w.complete()
    assert codes == [6] and w.settled


def test_timers_replace_cancel_and_order() -> None:
    t = Timers()
    fired: list[str] = []
    t.schedule("a", 30, lambda: fired.append("a"))
    t.schedule("b", 10, lambda: fired.append("b"))
    t.schedule("a", 20, lambda: fired.append("a2"))  # replaces the first "a"
    t.schedule("c", 15, lambda: fired.append("c"))
    t.cancel("c")
    assert t.next_deadline() == 10
    while (fn := t.pop_due(25)) is not None:
        fn()
    assert fired == ["b", "a2"] and t.next_deadline() is None


def test_glue_contract_deadlines_ticks_and_writes_in_order() -> None:
    h = GroupHarness()
    coord = h.coord
    # The offset-expiry timer is always there.
    assert coord.next_deadline_ms() == h.config.offsets_retention_check_interval_ms
    first = coord.join_group("g", "", "consumer", [("range", b"")], 10_000, api_version=3)
    assert coord.next_deadline_ms() == h.config.initial_rebalance_delay_ms
    c1 = coord.offset_commit("s", -1, "", [OffsetCommitPartition("t", 0, 1)])
    c2 = coord.offset_commit("s", -1, "", [OffsetCommitPartition("t", 0, 2)])
    writes = coord.take_writes()
    assert [w.group_id for w in writes] == ["g", "s", "s"] and coord.take_writes() == []
    for w in writes:
        w.complete()
    assert c1.result[0].error_code == c2.result[0].error_code == 0
    assert coord.offset_fetch("s", None).partitions[0].committed_offset == 2
    h.clock.advance(2_999)
    coord.tick()
    assert not first.done
    h.clock.advance(1)
    coord.tick()
    assert first.result.generation_id == 1
