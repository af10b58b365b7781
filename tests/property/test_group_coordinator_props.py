"""The group coordinator under random joins, syncs, heartbeats, leaves, commits, failed writes
and clock advances (Hypothesis RuleBasedStateMachine), with Kafka's invariants checked after
every step:

- one generation at a time: every successful JoinGroup answer of a generation names the same
  leader and protocol, and a group's generation never goes back;
- in Stable every member holds an assignment the leader sent for the current generation, and
  nobody is parked;
- the leader is a member (and there is one exactly when there are members);
- group.max.size holds as Kafka enforces it: never more members parked in a join than the
  limit, and a generation (CompletingRebalance, Stable) of dynamic members never over it (a
  rebalance may briefly count old members that have not rejoined yet; static members that do
  not rejoin are kept, as Kafka keeps them);
- replaying the records and transaction markers written so far rebuilds the same committed
  offsets, the same pending transactional offsets per producer (TxnOffsetCommit, ended by
  random COMMIT/ABORT markers) and, for Stable groups, the same generation, protocol,
  leader, members and assignments;
- and the run can go on against a coordinator reloaded from the log (a broker restart).
"""

from __future__ import annotations

from typing import Any

from _harness.groups import GroupHarness, subscription
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pylog.group.classic import GroupState
from pylog.group.offsets import OffsetCommitPartition

GROUPS = ("g1", "g2")
SLOTS = 5
MAX_SIZE = 3
PROTOCOLS = (
    [("range", subscription("t")), ("roundrobin", subscription("t"))],
    [("roundrobin", subscription("t", "u")), ("range", subscription("t", "u"))],
    [("range", subscription("u"))],
)


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = GroupHarness(max_size=MAX_SIZE, initial_rebalance_delay_ms=1_000,
                              offsets_retention_ms=120_000, offsets_retention_check_interval_ms=30_000)
        # (group, slot) -> the member id that slot's client believes it has, and its generation
        self.ids: dict[tuple[str, int], str] = {}
        self.gens: dict[tuple[str, int], int] = {}
        self.pending: list[tuple[tuple[str, int], Any]] = []
        self.by_generation: dict[tuple[str, int], tuple[str, str | None]] = {}
        self.last_generation: dict[str, int] = {}
        self.leaders: dict[tuple[str, int], list[str]] = {}  # generation -> members the leader got

    # ------------------------------------------------------------------ helpers

    def _collect(self) -> None:
        still = []
        for key, p in self.pending:
            if not p.done:
                still.append((key, p))
                continue
            r = p.result
            if r.error_code == 0:
                gid = key[0]
                seen = self.by_generation.setdefault((gid, r.generation_id), (r.leader, r.protocol_name))
                # One generation at a time: same leader and protocol for everyone in it (a
                # pre-KIP-814 static leader is told the previous leader id on purpose).
                assert seen[1] == r.protocol_name, (seen, r)
                self.ids[key] = r.member_id
                self.gens[key] = r.generation_id
                if r.members:
                    self.leaders[(gid, r.generation_id)] = [m.member_id for m in r.members]
            elif r.member_id:
                self.ids[key] = r.member_id  # MEMBER_ID_REQUIRED hands one out
            else:
                self.ids.pop(key, None)
        self.pending = still

    # ------------------------------------------------------------------ rules

    @rule(g=st.sampled_from(GROUPS), slot=st.integers(0, SLOTS - 1), proto=st.integers(0, len(PROTOCOLS) - 1),
          static=st.booleans(), version=st.sampled_from([3, 5, 9]))
    def join(self, g: str, slot: int, proto: int, static: bool, version: int) -> None:
        key = (g, slot)
        mid = self.ids.get(key, "")
        instance = f"inst-{slot}" if static else None
        p = self.h.join(g, mid, protocols=PROTOCOLS[proto], instance=instance, client_id=f"c{slot}",
                        version=version, session=10_000, rebalance=15_000)
        self.pending.append((key, p))
        self._collect()

    @rule(g=st.sampled_from(GROUPS), slot=st.integers(0, SLOTS - 1))
    def sync(self, g: str, slot: int) -> None:
        key = (g, slot)
        if key not in self.ids or key not in self.gens:
            return
        mid, gen = self.ids[key], self.gens[key]
        members = self.leaders.get((g, gen), [])
        assignments = [(m, f"gen{gen}:{m}".encode()) for m in members]
        p = self.h.call("sync_group", g, gen, mid, assignments)
        if p.done and p.result.error_code != 0:
            self.gens.pop(key, None)

    @rule(g=st.sampled_from(GROUPS))
    def everyone_syncs(self, g: str) -> None:
        """Every slot of the group that has a generation syncs (a well-behaved round)."""
        slots = [k for k in self.gens if k[0] == g]
        slots.sort(key=lambda k: (k[0], self.gens[k], k[1]))
        for key in slots:
            self.sync(g, key[1])

    @rule(g=st.sampled_from(GROUPS))
    def everyone_heartbeats(self, g: str) -> None:
        for key in [k for k in self.gens if k[0] == g]:
            self.heartbeat(g, key[1])

    @rule(g=st.sampled_from(GROUPS), slot=st.integers(0, SLOTS - 1))
    def heartbeat(self, g: str, slot: int) -> None:
        key = (g, slot)
        if key in self.ids and key in self.gens:
            self.h.call("heartbeat", g, self.gens[key], self.ids[key])

    @rule(g=st.sampled_from(GROUPS), slot=st.integers(0, SLOTS - 1))
    def leave(self, g: str, slot: int) -> None:
        key = (g, slot)
        if key in self.ids:
            self.h.call("leave_group", g, [(self.ids.pop(key), None)])
            self.gens.pop(key, None)
            self._collect()

    @rule(g=st.sampled_from(GROUPS), slot=st.integers(0, SLOTS - 1), partition=st.integers(0, 2),
          offset=st.integers(0, 1000), fail=st.sampled_from([None, None, None, 6, 15]))
    def commit(self, g: str, slot: int, partition: int, offset: int, fail: int | None) -> None:
        key = (g, slot)
        generation, mid = (self.gens[key], self.ids[key]) if key in self.gens else (-1, "")
        self.h.fail_code = fail
        try:
            self.h.call("offset_commit", g, generation, mid, [OffsetCommitPartition("t", partition, offset)])
        finally:
            self.h.fail_code = None

    @rule(partition=st.integers(0, 2), offset=st.integers(0, 1000))
    def simple_commit(self, partition: int, offset: int) -> None:
        self.h.call("offset_commit", "simple", -1, "", [OffsetCommitPartition("u", partition, offset)])

    @rule(g=st.sampled_from((*GROUPS, "simple")), slot=st.integers(0, SLOTS - 1), producer=st.integers(1, 2),
          partition=st.integers(0, 2), offset=st.integers(0, 1000), fail=st.sampled_from([None, None, None, 6]),
          member=st.booleans())
    def txn_commit(self, g: str, slot: int, producer: int, partition: int, offset: int, fail: int | None,
                   member: bool) -> None:
        key = (g, slot)
        generation, mid = (self.gens[key], self.ids[key]) if member and key in self.gens else (-1, "")
        self.h.fail_code = fail
        try:
            self.h.call("txn_offset_commit", g, producer, 0, [OffsetCommitPartition("t", partition, offset)],
                        generation_id=generation, member_id=mid)
        finally:
            self.h.fail_code = None

    @rule(producer=st.integers(1, 2), commit=st.booleans())
    def end_transaction(self, producer: int, commit: bool) -> None:
        self.h.marker(producer, commit)

    @rule(ms=st.sampled_from([0, 100, 1_000, 3_000, 9_000, 16_000, 40_000]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)
        self._collect()

    @rule()
    def restart(self) -> None:
        """The broker restarts: the partition is unloaded (parked requests answered) and a
        new coordinator loads it from the log, then the run goes on against it."""
        self.h.coord.unload()
        self._collect()
        self.h.coord = self.h.replayed()
        # A generation that was chosen but never synced is not in the log, so its number
        # may be chosen again after the restart (as in Kafka): start the books afresh.
        self.by_generation.clear()
        self.leaders.clear()
        self.last_generation.clear()

    @rule(g=st.sampled_from(GROUPS))
    def delete(self, g: str) -> None:
        self.h.call("delete_groups", [g])

    # ------------------------------------------------------------------ invariants

    @invariant()
    def groups_are_consistent(self) -> None:
        for gid in GROUPS:
            if self.h.coord.group(gid) is None:
                # Deleted (DeleteGroups, or expired while empty): a new group of that name
                # starts again at generation 0.
                self.last_generation.pop(gid, None)
                for k in [k for k in self.by_generation if k[0] == gid]:
                    del self.by_generation[k]
                for k in [k for k in self.leaders if k[0] == gid]:
                    del self.leaders[k]
        for gid in self.h.coord.group_ids():
            grp = self.h.coord.group(gid)
            assert grp is not None
            assert grp.generation_id >= self.last_generation.get(gid, 0)
            self.last_generation[gid] = grp.generation_id
            assert grp.awaiting_join_count() <= MAX_SIZE
            if grp.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and not grp.static_members:
                assert len(grp.members) <= MAX_SIZE
            if grp.members:
                assert grp.leader_id in grp.members
            else:
                assert grp.leader_id is None
            for inst, mid in grp.static_members.items():
                assert grp.members[mid].group_instance_id == inst
            if grp.state == GroupState.STABLE:
                prefix = f"gen{grp.generation_id}:".encode()
                for m in grp.members.values():
                    assert m.assignment.startswith(prefix), (gid, grp.generation_id, m)
                    assert not m.awaiting_join and not m.awaiting_sync
            if grp.state == GroupState.COMPLETING_REBALANCE:
                assert not any(m.awaiting_join for m in grp.members.values())
            if grp.state == GroupState.EMPTY:
                assert not grp.members

    @invariant()
    def replay_rebuilds_the_same_state(self) -> None:
        loaded = self.h.replayed()
        live = self.h.coord
        for gid in set(live.group_ids()) | set(loaded.group_ids()):
            assert loaded.committed_offsets(gid) == live.committed_offsets(gid), gid
            assert loaded.pending_transactional_offsets(gid) == live.pending_transactional_offsets(gid), gid
            assert (loaded.offset_fetch(gid, [("t", [0, 1, 2])], True)
                    == live.offset_fetch(gid, [("t", [0, 1, 2])], True)), gid
            g = live.group(gid)
            if g is None or g.state != GroupState.STABLE:
                continue
            lg = loaded.group(gid)
            assert lg is not None and lg.state == GroupState.STABLE
            assert (lg.generation_id, lg.protocol_type, lg.protocol_name, lg.leader_id) == (
                g.generation_id, g.protocol_type, g.protocol_name, g.leader_id)
            assert {m: x.assignment for m, x in lg.members.items()} == {m: x.assignment for m, x in g.members.items()}
            assert lg.static_members == g.static_members


TestGroupMachine = GroupMachine.TestCase
TestGroupMachine.settings = settings(max_examples=200, stateful_step_count=50, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
