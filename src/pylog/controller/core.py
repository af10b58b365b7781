"""The controller's decisions, sans I/O (Kafka's ``KafkaController`` with its partition and
replica state machines, reduced to what ZooKeeper mode needs).

Events go in (``startup``, ``brokers_changed``, ``topics_changed``, ``controlled_shutdown``,
``isr_changed``, ``delete_topics``); out come *plans*: the partition state znode writes to
make (``StateWrite``, conditional on the partition epoch the core last saw) and, once the
service reports which writes went through (``written``) or lost (``reread``), the requests
to send (``requests``: LeaderAndIsr per broker, UpdateMetadata to every live broker,
StopReplica). The asyncio service (``service``) does the ZooKeeper and network I/O; this
module never blocks and takes no clock, so every case is a unit test.

Rules (docs/replication.md, ``pylog.cluster.election``):

- a new partition's leader is its first live replica, the ISR every live replica, epoch 0;
  a partition with no live replica gets no state yet and is started when one registers;
- a dead broker's leaderships are re-elected from the ISR in assignment order (unclean
  election outside the ISR only with ``unclean.leader.election.enable``); a dead follower
  leaves the ISR (the last member stays); every leader change bumps the leader epoch;
- a broker in controlled shutdown hands each leadership to another live ISR member and
  leaves the ISR of the partitions it follows; partitions with no other ISR member stay
  (they are reported as remaining, as Kafka's ControlledShutdownResponse does).

Not thread-safe: the service drives it from its one event task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pylog.cluster import election as el
from pylog.cluster import zk_data as z

TP = tuple[str, int]

# Kafka's LeaderAndIsr.LeaderDuringDelete: UpdateMetadata tells brokers a partition is gone.
LEADER_DURING_DELETE = -2


# Error codes the controller's admin answers carry (pylog.errors has the classes).
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC = 17
INVALID_REPLICA_ASSIGNMENT = 39
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election_type

Outcome = tuple[int, "str | None"]  # (error code, message)


@dataclass(frozen=True)
class StateWrite:
    """Write ``new`` to the partition's state znode if it is still at ``expected_version``
    (-1: create it). ``kind`` names the decision to retake if the write loses a race
    (``replan``): "" (failure handling), "preferred", "unclean" or "reassign"."""

    tp: TP
    new: el.LeaderAndIsr
    expected_version: int
    kind: str = ""


@dataclass
class Plan:
    """A reassignment step: topic assignment znodes to write before the state writes, the
    state writes, StopReplica to send with the resulting requests, and the assignment
    znodes to write once those are sent (Kafka's B6: RS = TRS last)."""

    assignments_before: set[str] = field(default_factory=set)
    writes: list[StateWrite] = field(default_factory=list)
    stops: dict[int, list[tuple[TP, bool]]] = field(default_factory=dict)
    assignments_after: set[str] = field(default_factory=set)

    def empty(self) -> bool:
        return not (self.assignments_before or self.writes or self.stops
                    or self.assignments_after)


def reassign_to(current: z.ReplicaAssignment, target: Sequence[int]) -> z.ReplicaAssignment:
    """Kafka's ``ReplicaAssignment.reassignTo``: RS = (TRS ++ ORS) distinct, adding =
    RS - ORS, removing = ORS - TRS; ORS is the current assignment without its adding
    replicas (so a new target replaces an ongoing reassignment, and ORS cancels it)."""
    origin = origin_replicas(current)
    full = tuple(dict.fromkeys([*target, *origin]))
    return z.ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                               tuple(r for r in origin if r not in target))


def origin_replicas(ra: z.ReplicaAssignment) -> tuple[int, ...]:
    return tuple(r for r in ra.replicas if r not in ra.adding_replicas)


def is_reassigning(ra: z.ReplicaAssignment) -> bool:
    return bool(ra.adding_replicas or ra.removing_replicas)


@dataclass(frozen=True)
class PartitionInfo:
    """What a broker is told about one partition."""

    tp: TP
    state: el.LeaderAndIsr
    replicas: tuple[int, ...]
    offline: tuple[int, ...]
    is_new: bool = False
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass
class Requests:
    """What to send once a plan's writes are done."""

    leader_and_isr: dict[int, list[PartitionInfo]] = field(default_factory=dict)
    update_metadata: dict[int, list[PartitionInfo]] = field(default_factory=dict)
    stop_replica: dict[int, list[tuple[TP, bool]]] = field(default_factory=dict)

    def empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata or self.stop_replica)


class ControllerCore:
    """One elected controller's view of the cluster.

    Args:
        broker_id: this broker.
        epoch: the controller epoch won in the election.
        unclean: ``unclean(topic) -> bool``, the topic's ``unclean.leader.election.enable``.
    """

    def __init__(self, broker_id: int, epoch: int, unclean: Callable[[str], bool]) -> None:
        self.broker_id = broker_id
        self.epoch = epoch
        self.unclean = unclean
        self.live: dict[int, tuple[z.BrokerRegistration, int]] = {}
        self.shutting_down: set[int] = set()
        self.assignments: dict[str, z.TopicAssignment] = {}
        self.states: dict[TP, el.LeaderAndIsr] = {}
        self.deleting: set[str] = set()
        # Topics being deleted -> replicas (broker, partition) whose StopReplica(delete) has
        # not been answered yet (Kafka's TopicDeletionManager: the deletion completes when
        # this is empty; a dead broker's replicas wait for it to come back).
        self.deletion_pending: dict[str, set[tuple[int, int]]] = {}
        self._new: set[TP] = set()
        self._changed: set[TP] = set()

    # -- views ---------------------------------------------------------------------------

    def replicas(self, tp: TP) -> tuple[int, ...]:
        a = self.assignments.get(tp[0])
        ra = a.partitions.get(tp[1]) if a is not None else None
        return ra.replicas if ra is not None else ()

    def partitions(self) -> list[TP]:
        return sorted((t, p) for t, a in self.assignments.items() for p in a.partitions)

    def info(self, tp: TP) -> PartitionInfo:
        replicas = self.replicas(tp)
        ra = self._ra(tp)
        return PartitionInfo(tp, self.states[tp], replicas,
                             tuple(r for r in replicas if r not in self.live),
                             is_new=tp in self._new,
                             adding=ra.adding_replicas if ra is not None else (),
                             removing=ra.removing_replicas if ra is not None else ())

    def _ra(self, tp: TP) -> z.ReplicaAssignment | None:
        a = self.assignments.get(tp[0])
        return a.partitions.get(tp[1]) if a is not None else None

    def _set_ra(self, tp: TP, ra: z.ReplicaAssignment) -> None:
        a = self.assignments[tp[0]]
        parts = dict(a.partitions)
        parts[tp[1]] = ra
        self.assignments[tp[0]] = z.TopicAssignment(parts, a.topic_id)

    def offline_partitions(self) -> list[TP]:
        return [tp for tp, s in sorted(self.states.items()) if not s.has_leader
                or s.leader not in self.live]

    # -- planning ------------------------------------------------------------------------

    def _initial(self, tp: TP) -> StateWrite | None:
        state = el.initial_leader_and_isr(self.replicas(tp), self._electable())
        return StateWrite(tp, state, -1) if state is not None else None

    def _electable(self) -> set[int]:
        return set(self.live)

    def _offline_election(self, tp: TP) -> StateWrite | None:
        current = self.states[tp]
        if current.has_leader and current.leader in self.live:
            return None
        result = el.elect_offline(current, self.replicas(tp), self._electable(),
                                  self.unclean(tp[0]))
        if result.leader_and_isr is None:
            # Offline stays offline; still record the dead leader's removal (leader -1).
            if current.has_leader:
                removed = el.remove_replica_from_isr(current, current.leader)
                if removed is not None:
                    return StateWrite(tp, removed, current.partition_epoch)
            return None
        return StateWrite(tp, result.leader_and_isr, current.partition_epoch)

    def startup(self, brokers: Mapping[int, tuple[z.BrokerRegistration, int]],
                assignments: Mapping[str, z.TopicAssignment],
                states: Mapping[TP, el.LeaderAndIsr], deleting: Iterable[str] = ()) -> list[StateWrite]:
        """Failover: load what ZooKeeper holds; plan new partitions' states and offline
        elections (Kafka's ``onControllerFailover``)."""
        self.live = dict(brokers)
        self.assignments = dict(assignments)
        self.states = dict(states)
        self.deleting = set(deleting) & set(assignments)
        self._changed = set(self.states)
        return self._plan_all()

    def _plan_all(self) -> list[StateWrite]:
        writes = []
        for tp in self.partitions():
            if tp[0] in self.deleting:
                continue
            w = self._initial(tp) if tp not in self.states else self._offline_election(tp)
            if w is not None:
                writes.append(w)
        return writes

    def brokers_changed(self, brokers: Mapping[int, tuple[z.BrokerRegistration, int]]
                        ) -> tuple[list[StateWrite], set[int], set[int]]:
        """``/brokers/ids`` changed. Returns (writes, new brokers, dead brokers); a broker
        whose epoch changed (a bounce faster than the watch) counts as dead and new."""
        old = self.live
        new_ids = {b for b, (_, ep) in brokers.items() if b not in old or old[b][1] != ep}
        dead = {b for b, (_, ep) in old.items() if b not in brokers or brokers[b][1] != ep}
        self.live = dict(brokers)
        self.shutting_down &= set(brokers)
        writes: list[StateWrite] = []
        for tp in self.partitions():
            if tp[0] in self.deleting:
                continue
            if tp not in self.states:
                w = self._initial(tp)
            elif not self.states[tp].has_leader or self.states[tp].leader not in self.live:
                w = self._offline_election(tp)
            else:
                cur = self.states[tp]
                gone = [r for r in cur.isr if r not in self.live]
                w = None
                if gone and len(cur.isr) > 1:
                    isr = [r for r in cur.isr if r in self.live] or [cur.isr[0]]
                    w = StateWrite(tp, cur.new_leader_and_isr(cur.leader, isr), cur.partition_epoch)
            if w is not None:
                writes.append(w)
            if any(r in new_ids for r in self.replicas(tp)) and tp in self.states:
                self._changed.add(tp)
        return writes, new_ids, dead

    def topics_changed(self, assignments: Mapping[str, z.TopicAssignment]) -> list[StateWrite]:
        """New topics (or partitions added to one): plan their first states."""
        for topic, a in assignments.items():
            self.assignments[topic] = a
        writes = []
        for topic in sorted(assignments):
            for p in sorted(assignments[topic].partitions):
                if (topic, p) not in self.states and topic not in self.deleting:
                    w = self._initial((topic, p))
                    if w is not None:
                        writes.append(w)
        return writes

    def controlled_shutdown(self, broker_id: int) -> tuple[list[StateWrite], list[TP]]:
        """Plan moving ``broker_id``'s leaderships and ISR memberships away. Returns the
        writes and the partitions it will still lead (no other ISR member is live)."""
        self.shutting_down.add(broker_id)
        writes, remaining = [], []
        for tp in self.partitions():
            state = self.states.get(tp)
            replicas = self.replicas(tp)
            if state is None or broker_id not in replicas or tp[0] in self.deleting:
                continue
            if state.leader == broker_id:
                if len(replicas) == 1:
                    continue  # nowhere to go (Kafka skips replication factor 1)
                result = el.elect_for_controlled_shutdown(state, replicas, self._electable(),
                                                          self.shutting_down)
                if result.leader_and_isr is None:
                    if self._has_taker(tp, broker_id):
                        remaining.append(tp)
                else:
                    writes.append(StateWrite(tp, result.leader_and_isr, state.partition_epoch))
            elif broker_id in state.isr and len(state.isr) > 1:
                isr = [r for r in state.isr if r != broker_id]
                writes.append(StateWrite(tp, state.new_leader_and_isr(state.leader, isr),
                                         state.partition_epoch))
        return writes, remaining

    def preferred_elections(self, tps: Iterable[TP]) -> list[StateWrite]:
        """Move each partition's leadership back to its preferred replica (the assignment's
        head) when that replica is live and in the ISR (Kafka's PreferredReplicaElection)."""
        writes = []
        for tp in sorted(set(tps)):
            state = self.states.get(tp)
            replicas = self.replicas(tp)
            if state is None or tp[0] in self.deleting or not replicas \
                    or replicas[0] in self.shutting_down \
                    or not el.needs_preferred_election(replicas, state):
                continue
            result = el.elect_preferred(state, replicas, self._electable())
            if result.leader_and_isr is not None:
                writes.append(StateWrite(tp, result.leader_and_isr, state.partition_epoch,
                                         "preferred"))
        return writes

    def auto_rebalance(self, imbalance_percentage: int) -> list[StateWrite]:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``: for every live broker whose share
        of preferred partitions led elsewhere exceeds ``leader.imbalance.per.broker.percentage``,
        elect it back where it is in the ISR."""
        assignments: dict[TP, Sequence[int]] = {tp: self.replicas(tp) for tp in self.states
                                                if tp[0] not in self.deleting}
        leaders = {tp: s.leader for tp, s in self.states.items()}
        out: list[TP] = []
        for broker, tps in el.imbalanced_brokers(assignments, leaders,
                                                 imbalance_percentage).items():
            if broker in self.live and broker not in self.shutting_down:
                out.extend(tps)
        return self.preferred_elections(out)

    def still_led_by(self, broker_id: int) -> list[TP]:
        """The partitions a broker in controlled shutdown still leads and that another live
        replica could take over once it is back in the ISR: what ControlledShutdown reports
        as remaining, so that the broker retries.

        Kafka lists every replicated partition the broker leads. Here a partition none of
        whose other replicas is live (and not shutting down itself) is left out: no retry
        can move it, so the last broker of a cluster being stopped succeeds at once
        instead of waiting out ``controlled.shutdown.max.retries`` backoffs."""
        return [tp for tp, s in sorted(self.states.items())
                if s.leader == broker_id and len(self.replicas(tp)) > 1
                and self._has_taker(tp, broker_id)]

    def _has_taker(self, tp: TP, broker_id: int) -> bool:
        """Another replica of ``tp`` is live and not shutting down."""
        return any(r != broker_id and r in self.live and r not in self.shutting_down
                   for r in self.replicas(tp))

    def isr_changed(self, states: Mapping[TP, el.LeaderAndIsr]) -> None:
        """A leader rewrote ISRs (``/isr_change_notification``): take the states read."""
        for tp, s in states.items():
            if tp in self.states and s.partition_epoch >= self.states[tp].partition_epoch:
                self.states[tp] = s
                self._changed.add(tp)

    def delete_topics(self, topics: Iterable[str]) -> Requests:
        """Start deleting (topics already being deleted are left alone): every replica is
        to be stopped and its log deleted; the live ones get StopReplica(delete) now, a dead
        broker's when it registers again (``resume_deletions``); brokers forget the topic
        at once (UpdateMetadata with leader -2)."""
        req = Requests()
        gone: list[PartitionInfo] = []
        for topic in sorted(set(topics) & set(self.assignments)):
            if topic in self.deletion_pending:
                continue
            self.deleting.add(topic)
            pending = self.deletion_pending.setdefault(topic, set())
            for p in sorted(self.assignments[topic].partitions):
                tp = (topic, p)
                for r in self.replicas(tp):
                    pending.add((r, p))
                    if r in self.live:
                        req.stop_replica.setdefault(r, []).append((tp, True))
                state = self.states.get(tp, el.LeaderAndIsr(el.NO_LEADER, 0, self.replicas(tp)))
                gone.append(PartitionInfo(tp, el.LeaderAndIsr(
                    LEADER_DURING_DELETE, state.leader_epoch, state.isr, state.leader_recovery_state,
                    state.partition_epoch), self.replicas(tp), ()))
        if gone:
            for b in self.live:
                req.update_metadata[b] = list(gone)
        return req

    def resume_deletions(self, brokers: Iterable[int]) -> Requests:
        """StopReplica(delete) again to ``brokers`` (live) for every replica of a topic being
        deleted that they have not confirmed (Kafka's ``resumeDeletionForTopics`` when a
        broker starts, or a retry)."""
        req = Requests()
        wanted = set(brokers) & set(self.live)
        for topic, pending in sorted(self.deletion_pending.items()):
            for b, p in sorted(pending):
                if b in wanted:
                    req.stop_replica.setdefault(b, []).append(((topic, p), True))
        return req

    def replicas_deleted(self, broker: int, tps: Iterable[TP]) -> list[str]:
        """``broker`` answered StopReplica(delete) without error for ``tps``; returns the
        topics whose every replica is now deleted (ready for the znodes to go)."""
        for t, p in tps:
            pending = self.deletion_pending.get(t)
            if pending is not None:
                pending.discard((broker, p))
        return self.deletable()

    def deletable(self) -> list[str]:
        return [t for t in sorted(self.deleting)
                if t in self.deletion_pending and not self.deletion_pending[t]]

    def ineligible_for_deletion(self) -> dict[str, list[int]]:
        """Topics whose deletion waits for dead brokers: topic -> those brokers."""
        out = {}
        for t, pending in sorted(self.deletion_pending.items()):
            down = sorted({b for b, _ in pending if b not in self.live})
            if down:
                out[t] = down
        return out

    def topic_deleted(self, topic: str) -> None:
        self.deleting.discard(topic)
        self.deletion_pending.pop(topic, None)
        self.assignments.pop(topic, None)
        for tp in [tp for tp in self.states if tp[0] == topic]:
            del self.states[tp]
            self._changed.discard(tp)
            self._new.discard(tp)

    # -- ElectLeaders (43) ---------------------------------------------------------------

    def elect_leaders(self, tps: Iterable[TP], election_type: int
                      ) -> tuple[list[StateWrite], dict[TP, Outcome]]:
        """Kafka's ``processReplicaLeaderElection`` for an admin request. PREFERRED: a
        partition not led by its preferred replica moves to it if it is live and in the ISR
        (else PREFERRED_LEADER_NOT_AVAILABLE). UNCLEAN: a partition without a live leader
        gets the first live ISR member, else the first live replica (ISR [leader], recovery
        RECOVERING; else ELIGIBLE_LEADERS_NOT_AVAILABLE). Partitions that already have the
        leader asked for answer ELECTION_NOT_NEEDED. Returns the writes and an outcome for
        every partition that is not written (the written ones succeed once written)."""
        writes: list[StateWrite] = []
        out: dict[TP, Outcome] = {}
        for tp in sorted(set(tps)):
            replicas = self.replicas(tp)
            if not replicas:
                out[tp] = (UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            if tp[0] in self.deleting:
                out[tp] = (INVALID_TOPIC, "The topic is being deleted")
                continue
            state = self.states.get(tp)
            led = state is not None and state.has_leader and state.leader in self.live
            if election_type == PREFERRED:
                needed = state is None or state.leader != replicas[0]
            else:
                needed = not led
            if not needed:
                out[tp] = (ELECTION_NOT_NEEDED, None)
                continue
            w = self._election_write(tp, election_type)
            if w is None:
                if election_type == PREFERRED:
                    out[tp] = (PREFERRED_LEADER_NOT_AVAILABLE,
                               f"Failed to elect leader for partition {tp[0]}-{tp[1]}: its "
                               f"preferred replica {replicas[0]} is not live or not in the ISR "
                               f"{list(state.isr) if state else []}")
                else:
                    out[tp] = (ELIGIBLE_LEADERS_NOT_AVAILABLE,
                               f"Failed to elect leader for partition {tp[0]}-{tp[1]}: none "
                               f"of its replicas {list(replicas)} is live")
            else:
                writes.append(w)
        return writes, out

    def _election_write(self, tp: TP, election_type: int) -> StateWrite | None:
        state = self.states.get(tp)
        replicas = self.replicas(tp)
        electable = self._electable() - self.shutting_down
        if election_type == PREFERRED:
            if state is None or not el.needs_preferred_election(replicas, state):
                return None
            result = el.elect_preferred(state, replicas, electable)
            kind = "preferred"
        else:
            if state is None:
                initial = el.initial_leader_and_isr(replicas, electable)
                return StateWrite(tp, initial, -1, "unclean") if initial is not None else None
            if state.has_leader and state.leader in self.live:
                return None
            result = el.elect_offline(state, replicas, electable, True)
            kind = "unclean"
        if result.leader_and_isr is None:
            return None
        return StateWrite(tp, result.leader_and_isr, state.partition_epoch, kind)

    # -- partition reassignment (KIP-455) ------------------------------------------------

    def reassignments(self, tps: Iterable[TP] | None = None) -> dict[TP, z.ReplicaAssignment]:
        """The ongoing reassignments (of ``tps``, or all)."""
        wanted = self.partitions() if tps is None else sorted(set(tps))
        out = {}
        for tp in wanted:
            ra = self._ra(tp)
            if ra is not None and is_reassigning(ra):
                out[tp] = ra
        return out

    def _check_target(self, tp: TP, target: Sequence[int]) -> Outcome | None:
        """Kafka's ``validateReplicas``."""
        if not target:
            return (INVALID_REPLICA_ASSIGNMENT,
                    "Empty replica list specified in partition reassignment.")
        if len(set(target)) != len(target):
            return (INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
        if any(r < 0 for r in target):
            return (INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(target)}")
        current = self._ra(tp) or z.ReplicaAssignment(())
        adding = reassign_to(current, target).adding_replicas
        if not set(adding) <= set(self.live):
            return (INVALID_REPLICA_ASSIGNMENT,
                    f"Replica assignment has brokers that are not alive. Replica list: "
                    f"{list(adding)}, live broker list: {sorted(self.live)}")
        return None

    def alter_reassignments(self, requested: Mapping[TP, Sequence[int] | None]
                            ) -> tuple[Plan, dict[TP, Outcome]]:
        """AlterPartitionReassignments (Kafka's ``processApiPartitionReassignment``): a target
        list starts (or replaces) a reassignment, None cancels the ongoing one (back to the
        original replicas). Returns the first step's plan and an outcome per partition."""
        plan = Plan()
        out: dict[TP, Outcome] = {}
        for tp, target in sorted(requested.items()):
            if target is not None:
                err = self._check_target(tp, target)
                if err is not None:
                    out[tp] = err
                    continue
            ra = self._ra(tp)
            if target is None and (ra is None or not is_reassigning(ra)):
                out[tp] = (NO_REASSIGNMENT_IN_PROGRESS, None)
                continue
            if ra is None or tp[0] in self.deleting or tp not in self.states:
                out[tp] = (UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            new = reassign_to(ra, target if target is not None else origin_replicas(ra))
            self._reassign(tp, new, plan)
            out[tp] = (0, None)
        return plan, out

    def resume_reassignments(self) -> Plan:
        """After a failover: restart every reassignment ZooKeeper shows in progress (Kafka's
        ``initializePartitionReassignments``)."""
        plan = Plan()
        for tp, ra in self.reassignments().items():
            if tp[0] not in self.deleting and tp in self.states:
                self._reassign(tp, ra, plan)
        return plan

    def check_reassignments(self) -> Plan:
        """Complete the reassignments whose target replicas are all in the ISR now (after an
        ISR change or a broker's return; Kafka's ``PartitionReassignmentIsrChangeHandler``)."""
        plan = Plan()
        for tp, ra in self.reassignments().items():
            state = self.states.get(tp)
            if tp[0] not in self.deleting and state is not None \
                    and set(ra.target_replicas) <= set(state.isr):
                self._reassign(tp, ra, plan)
        return plan

    def _reassign(self, tp: TP, new: z.ReplicaAssignment, plan: Plan) -> None:
        """Kafka's ``onPartitionReassignment``: phase A (RS = ORS + TRS written, leader epoch
        bumped so every replica hears it, new replicas start following) until every target
        replica is in the ISR, then phase B (leader from TRS, ISR without the removed
        replicas, StopReplica(delete) to them, RS = TRS written)."""
        old = self._ra(tp) or new
        unneeded = [r for r in old.replicas if r not in new.replicas]
        state = self.states[tp]
        target = new.target_replicas
        if set(target) <= set(state.isr):
            self._set_ra(tp, z.ReplicaAssignment(target))
            w = self._reassign_write(tp)
            if w is None:  # no live target replica in the ISR to lead: stay in phase A
                self._set_ra(tp, new)
                plan.assignments_before.add(tp[0])
                return
            plan.writes.append(w)
            for r in [*unneeded, *(r for r in new.replicas if r not in target)]:
                if r in self.live:
                    plan.stops.setdefault(r, []).append((tp, True))
            plan.assignments_after.add(tp[0])
            return
        self._set_ra(tp, new)
        plan.assignments_before.add(tp[0])
        w = self._reassign_write(tp)
        if w is not None:
            plan.writes.append(w)
        for r in unneeded:
            if r in self.live:
                plan.stops.setdefault(r, []).append((tp, True))

    def _reassign_write(self, tp: TP) -> StateWrite | None:
        """The next leader epoch for the partition's replicas as now assigned: the current
        leader if it is one of them and live, else the first live one in the ISR; the ISR
        keeps only assigned replicas (unchanged if that would empty it)."""
        state = self.states.get(tp)
        replicas = self.replicas(tp)
        if state is None or not replicas:
            return None
        isr = [r for r in state.isr if r in replicas] or list(state.isr)
        if state.leader in replicas and state.leader in self.live:
            leader: int | None = state.leader
        else:
            leader = el.reassign_partition_leader(replicas, isr, self._electable())
        if leader is None:
            return None
        return StateWrite(tp, state.new_leader_and_isr(leader, isr), state.partition_epoch,
                          "reassign")

    # -- results -------------------------------------------------------------------------

    def written(self, write: StateWrite, zk_version: int) -> None:
        """The write went through; ``zk_version`` is the state znode's new version."""
        self.states[write.tp] = write.new.with_partition_epoch(zk_version)
        self._changed.add(write.tp)
        if write.expected_version == -1:
            self._new.add(write.tp)

    def reread(self, tp: TP, state: el.LeaderAndIsr | None) -> None:
        """A conditional write lost: this is the state ZooKeeper holds now."""
        if state is None:
            self.states.pop(tp, None)
        else:
            self.states[tp] = state

    def replan(self, tp: TP, kind: str = "") -> StateWrite | None:
        """After ``reread``: decide again for one partition (the decision ``kind`` the lost
        write made; "" = the shutdown and failure cases)."""
        if kind == "preferred":
            return self._election_write(tp, PREFERRED)
        if kind == "unclean":
            return self._election_write(tp, UNCLEAN)
        if kind == "reassign":
            return self._reassign_write(tp)
        if tp not in self.states:
            return self._initial(tp)
        state = self.states[tp]
        if state.leader in self.shutting_down and len(self.replicas(tp)) > 1:
            result = el.elect_for_controlled_shutdown(state, self.replicas(tp), self._electable(),
                                                      self.shutting_down)
            if result.leader_and_isr is not None:
                return StateWrite(tp, result.leader_and_isr, state.partition_epoch)
            return None
        return self._offline_election(tp)

    def requests(self, full_to: Iterable[int] = (), notify_all: bool = False) -> Requests:
        """The requests for every partition changed since the last call: LeaderAndIsr to its
        live replicas, UpdateMetadata to every live broker; ``full_to`` brokers (new ones, or
        all after a failover) get every partition in both; ``notify_all`` sends every live
        broker an UpdateMetadata even without partition changes (the broker list changed)."""
        req = Requests()
        full = set(full_to) & set(self.live)
        changed = {tp for tp in self._changed if tp in self.states and tp[0] not in self.deleting}
        everything = [tp for tp in self.partitions() if tp in self.states
                      and tp[0] not in self.deleting]
        for tp in everything:
            info = self.info(tp)
            for r in info.replicas:
                if r in self.live and (tp in changed or r in full) and info.state.has_leader:
                    if r in self.shutting_down and r != info.state.leader:
                        # A broker in controlled shutdown stops following (Kafka's
                        # OfflineReplica: StopReplica without delete), so that it does not
                        # fetch itself back into the ISR it was just removed from.
                        req.stop_replica.setdefault(r, []).append((tp, False))
                    else:
                        req.leader_and_isr.setdefault(r, []).append(info)
            for b in sorted(self.live):
                if tp in changed or b in full:
                    req.update_metadata.setdefault(b, []).append(info)
        for b in full:
            req.update_metadata.setdefault(b, [])
        if notify_all:
            for b in self.live:
                req.update_metadata.setdefault(b, [])
        self._changed.clear()
        self._new.clear()
        return req
