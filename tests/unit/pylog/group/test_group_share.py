"""KIP-932 share groups in the coordinator (pylog.group.share.coordinator): joining with the
simple assignor (every member gets every partition), epochs, fencing, leaving, session
timeouts, the namespace shared with classic and consumer groups, ListGroups, and replay
from the log. Driven with a manual clock.
"""

from __future__ import annotations

import uuid
from typing import Any

from _harness.groups import GroupHarness

from pylog.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    InconsistentGroupProtocolError,
    InvalidRequestError,
    UnknownMemberIdError,
)
from pylog.group.share.state_metadata import InitEntry, StatePartitionMetadata

T = uuid.UUID(int=7)
U = uuid.UUID(int=8)
TOPICS = {"t": (T, 3), "u": (U, 2)}


def _initialized(h: GroupHarness, group: str) -> None:
    """Every partition of TOPICS has share-partition state for ``group`` (what the
    heartbeat handler's InitializeShareGroupState calls leave; those are tested in
    test_group_share_state_metadata.py), so that the assignment comes at once."""
    if group not in h.coord.share.state_metadata:
        h.coord.share.state_metadata[group] = StatePartitionMetadata(initialized={
            tid: InitEntry(name, frozenset(range(n)), 0) for name, (tid, n) in TOPICS.items()})


def hb(h: GroupHarness, member: str, epoch: int, *, names: list[str] | None = None,
       group: str = "sg", topics: Any = None) -> Any:
    if epoch == 0 and names is None:
        names = ["t"]
    _initialized(h, group)
    pending = h.call("share_group_heartbeat", group, member, epoch,
                     TOPICS if topics is None else topics, rack_id=None,
                     subscribed_topic_names=names, client_id="c", client_host="/127.0.0.1")
    assert pending.done
    return pending.result


def test_every_member_gets_every_partition_of_its_topics() -> None:
    h = GroupHarness()
    a = hb(h, "a", 0)
    assert a.error_code == 0 and a.member_epoch == 1 and a.assignment == {T: {0, 1, 2}}
    b = hb(h, "b", 0, names=["t", "u"])
    assert b.member_epoch == 2 and b.assignment == {T: {0, 1, 2}, U: {0, 1}}
    # a catches up with the new epoch; its assignment did not change: not sent again.
    a2 = hb(h, "a", 1)
    assert a2.member_epoch == 2 and a2.assignment is None
    g = h.coord.share.groups["sg"]
    assert g.state.value == "Stable" and g.group_epoch == 2 == g.assignment_epoch


def test_epochs_are_checked() -> None:
    h = GroupHarness()
    hb(h, "a", 0)
    hb(h, "b", 0)
    assert hb(h, "a", 5).error_code == FencedMemberEpochError.code
    assert hb(h, "zz", 1).error_code == UnknownMemberIdError.code
    # The previous epoch is accepted (the answer that moved it on was lost).
    assert hb(h, "a", 1).error_code == 0
    assert hb(h, "a", 1).member_epoch == 2


def test_bad_requests() -> None:
    h = GroupHarness()
    assert hb(h, "", 0).error_code == InvalidRequestError.code
    assert hb(h, "a", 0, names=[]).error_code == InvalidRequestError.code
    assert hb(h, "a", -2).error_code == InvalidRequestError.code
    assert hb(h, "a", 1).error_code == GroupIdNotFoundError.code


def test_leave_and_session_timeout_remove_members_and_report_them() -> None:
    h = GroupHarness()
    removed: list[tuple[str, str]] = []
    h.coord.share.on_member_removed = lambda g, m: removed.append((g, m))
    hb(h, "a", 0)
    hb(h, "b", 0)
    left = hb(h, "a", -1)
    assert left.error_code == 0 and left.member_epoch == -1
    assert removed == [("sg", "a")]
    h.advance(h.coord.config.share_session_timeout_ms + 1)
    assert removed == [("sg", "a"), ("sg", "b")]
    g = h.coord.share.groups["sg"]
    assert g.state.value == "Empty" and g.group_epoch == 4


def test_share_groups_share_the_namespace() -> None:
    h = GroupHarness()
    hb(h, "a", 0, group="shared")
    r = h.join("shared")
    assert r.done and r.result.error_code == InconsistentGroupProtocolError.code
    listed = h.call("list_groups", None, None)
    assert [(lg.group_id, lg.protocol_type, lg.group_type) for lg in listed] == [("shared", "share", "share")]
    assert h.call("list_groups", None, ["consumer"]) == []


def test_replay_rebuilds_the_groups() -> None:
    h = GroupHarness()
    hb(h, "a", 0)
    hb(h, "b", 0, names=["t", "u"])
    hb(h, "a", 1)
    hb(h, "b", -1)
    coord = h.replayed()
    g = coord.share.groups["sg"]
    assert set(g.members) == {"a"}
    a = g.members["a"]
    # b's leaving bumped the group epoch; the assignment follows on a's next heartbeat.
    assert a.member_epoch == 2 and a.assigned == {T: {0, 1, 2}}
    assert g.group_epoch == 3 and g.assignment_epoch == 2
    assert g.subscription_metadata == {"t": (T, 3)}
