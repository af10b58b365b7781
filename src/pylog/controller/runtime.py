"""Cluster mode at run time: ``ClusterRuntime`` (``broker.cluster``; None on a single node).

- One ZooKeeper session (``pylog.cluster.zk_store.ZkStore``); every ZooKeeper call runs on
  one worker thread (``zk``), never on the event loop; watch callbacks hop back to the loop.
- Registration: ``/brokers/ids/<broker.id>`` with the advertised listener and rack.
- Controller election: every broker watches ``/controller``; when it is empty each tries
  ``elect_controller`` (one wins, epoch + 1); the winner runs ``ControllerService``.
- ``metadata``: the ``MetadataCache`` fed by UpdateMetadata.

``ControllerService`` is the asyncio side of ``core.ControllerCore``: it serialises events
(Kafka's ControllerEventManager: one at a time), does the ZooKeeper writes the core plans
(fenced by the controller epoch; a lost conditional write is re-read and re-planned), and
sends the resulting requests through one ``BrokerChannel`` per live broker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from collections.abc import Callable
from typing import Any

from pylog import errors
from pylog.cluster import election as el
from pylog.cluster import zk_data as z
from pylog.cluster.zk_store import BadVersion, ControllerMovedError, ZkStore
from pylog.controller.channels import (
    build_leader_and_isr,
    build_stop_replica,
    build_update_metadata,
    inter_broker_endpoint,
)
from pylog.controller.configs import ConfigChangeListener
from pylog.controller.core import TP, ControllerCore, Outcome, Plan, Requests, StateWrite
from pylog.controller.metadata_cache import MetadataCache
from pylog.net.channel import BrokerChannel
from pylog.protocol.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

log = logging.getLogger("pylog.controller")



CHANNEL_CLOSE_S = 2.0  # how long stopping waits for the channels' connections to close


async def close_channels(channels: list[BrokerChannel]) -> None:
    """Close channels together, bounded: a connection whose peer stopped reading (the
    broker's own listener while it shuts down) must not hold the shutdown."""
    if not channels:
        return
    tasks = {asyncio.ensure_future(ch.close()): ch.broker_id for ch in channels}
    _done, pending = await asyncio.wait(tasks, timeout=CHANNEL_CLOSE_S)
    for task in pending:
        task.cancel()
    if pending:
        log.info("controller: the channels to brokers %s did not close within %.0f s; dropped",
                 sorted(tasks[t] for t in pending), CHANNEL_CLOSE_S)


class ControllerService:
    """The elected controller's event loop (stopped when it loses the election)."""

    def __init__(self, runtime: ClusterRuntime, epoch: int, epoch_zk_version: int) -> None:
        self.runtime = runtime
        self.broker_id = runtime.broker_id
        self.epoch = epoch
        self.epoch_zk_version = epoch_zk_version
        # The controller's channels reach the brokers on the inter-broker listener.
        self.listener = runtime.config.inter_broker_listener
        self.ssl_context = runtime.broker.inter_broker_tls()
        self.sasl = runtime.broker.inter_broker_sasl()
        self.core = ControllerCore(self.broker_id, epoch, self._unclean)
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.channels: dict[int, BrokerChannel] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self._watches: list[Any] = []
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Future[Any]] = set()
        self._watched: set[str] = set()
        self._rebalance_task: asyncio.Task[None] | None = None
        self.stopped = False

    def _unclean(self, topic: str) -> bool:
        value = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        if value is not None:
            return value.strip().lower() == "true"
        return bool(self.runtime.config["unclean.leader.election.enable"])

    async def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())
        self.post("startup")
        if self.runtime.config["auto.leader.rebalance.enable"]:
            self._rebalance_task = asyncio.ensure_future(self._rebalance_timer())
        loop = asyncio.get_running_loop()
        store = self.runtime.store

        def hop(kind: str) -> Callable[[Any], Any]:
            def cb(_: Any) -> Any:
                if self.stopped:
                    return False
                loop.call_soon_threadsafe(self.post, kind)
                return None
            return cb
        self._watches = await self.runtime.zk(lambda: [
            store.watch_broker_ids(hop("brokers")),
            store.watch_topics(hop("topics")),
            store.client.ChildrenWatch(z.DELETE_TOPICS_PATH, hop("deletions")),
            store.client.ChildrenWatch(z.ISR_CHANGE_NOTIFICATION_PATH, hop("isr")),
        ])

    async def _rebalance_timer(self) -> None:
        interval = self.runtime.config["leader.imbalance.check.interval.seconds"]
        while not self.stopped:
            await asyncio.sleep(interval)
            self.post("rebalance")

    async def _on_rebalance(self, _: Any) -> None:
        pct = self.runtime.config["leader.imbalance.per.broker.percentage"]
        writes = self.core.auto_rebalance(pct)
        if writes:
            log.info("controller: preferred leader election for %d partitions", len(writes))
            await self._apply(writes)
            self._send(self.core.requests())

    def post(self, kind: str, arg: Any = None) -> None:
        if not self.stopped:
            self.events.put_nowait((kind, arg))

    async def stop(self) -> None:
        self.stopped = True
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
        for fut in list(self._pending):  # ControlledShutdown requests waiting: answer them
            if not fut.done():
                fut.set_exception(errors.NotControllerError(
                    f"broker {self.broker_id} stopped being the controller"))
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await close_channels(list(self.channels.values()))
        self.channels.clear()

    async def _run(self) -> None:
        while True:
            kind, arg = await self.events.get()
            try:
                await getattr(self, f"_on_{kind}")(arg)
            except ControllerMovedError:
                log.warning("controller %d (epoch %d) was replaced; resigning", self.broker_id,
                            self.epoch)
                asyncio.get_running_loop().call_soon(
                    lambda: asyncio.ensure_future(self.runtime.resign()))
                return
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one bad event must not stop the controller
                log.exception("controller event %s failed", kind)

    # -- ZooKeeper reads -----------------------------------------------------------------

    def _read_all(self) -> tuple[Any, Any, Any, Any]:
        store = self.runtime.store
        brokers = store.get_all_brokers()
        assignments, states = {}, {}
        for topic in store.get_topics():
            found = store.get_topic_assignment(topic)
            if found is None:
                continue
            assignments[topic] = found[0]
            self.topic_configs[topic] = store.get_entity_config("topics", topic)
            for p in found[0].partitions:
                st = store.get_partition_state(topic, p)
                if st is not None:
                    states[(topic, p)] = el.LeaderAndIsr.from_partition_state(*st)
        return brokers, assignments, states, store.get_topic_deletions()

    # -- events --------------------------------------------------------------------------

    async def _on_startup(self, _: Any) -> None:
        brokers, assignments, states, deletions = await self.runtime.zk(self._read_all)
        writes = self.core.startup(brokers, assignments, states, deletions)
        self._watch_topics(sorted(assignments))
        self._sync_channels()
        await self._apply(writes)
        self._send(self.core.requests(full_to=self.core.live, notify_all=True))
        await self._run_plan(self.core.resume_reassignments())
        if deletions:
            self.post("deletions")
        log.info("controller %d active (epoch %d): %d brokers, %d topics", self.broker_id,
                 self.epoch, len(brokers), len(assignments))

    async def _on_brokers(self, _: Any) -> None:
        brokers = await self.runtime.zk(self.runtime.store.get_all_brokers)
        writes, new, dead = self.core.brokers_changed(brokers)
        if dead:
            log.info("controller: brokers %s failed", sorted(dead))
        if new:
            log.info("controller: brokers %s started", sorted(new))
        self._sync_channels(dead)
        await self._apply(writes)
        self._send(self.core.requests(full_to=new, notify_all=bool(new or dead)))
        if new:  # a returning broker deletes its replicas of topics being deleted
            self._send(self.core.resume_deletions(new))
        await self._run_plan(self.core.check_reassignments())

    def _watch_topics(self, topics: list[str]) -> None:
        """Kafka's PartitionModificationsHandler: a data watch per topic (partitions added)."""
        loop = asyncio.get_running_loop()
        store = self.runtime.store
        for topic in topics:
            if topic in self._watched:
                continue
            self._watched.add(topic)

            def cb(a: z.TopicAssignment | None, topic: str = topic) -> Any:
                if self.stopped or a is None:
                    loop.call_soon_threadsafe(self._watched.discard, topic)
                    return False
                loop.call_soon_threadsafe(self.post, "partitions", (topic, a))
                return None
            asyncio.ensure_future(self.runtime.zk(store.watch_topic, topic, cb))

    async def _on_partitions(self, arg: Any) -> None:
        topic, assignment = arg
        known = self.core.assignments.get(topic)
        if known is None or len(assignment.partitions) <= len(known.partitions):
            return
        log.info("controller: topic %s grows to %d partitions", topic, len(assignment.partitions))
        await self._apply(self.core.topics_changed({topic: assignment}))
        self._send(self.core.requests())

    async def _on_topics(self, _: Any) -> None:
        store = self.runtime.store

        def read() -> dict[str, z.TopicAssignment]:
            out = {}
            for topic in store.get_topics():
                if topic in self.core.assignments:
                    continue
                found = store.get_topic_assignment(topic)
                if found is not None:
                    out[topic] = found[0]
                    self.topic_configs[topic] = store.get_entity_config("topics", topic)
            return out
        new_topics = await self.runtime.zk(read)
        if not new_topics:
            return
        self._watch_topics(sorted(new_topics))
        writes = self.core.topics_changed(new_topics)
        await self._apply(writes)
        self._send(self.core.requests())

    async def _on_isr(self, _: Any) -> None:
        store = self.runtime.store

        def read() -> dict[Any, el.LeaderAndIsr]:
            notes = store.get_isr_change_notifications()
            out = {}
            for _name, tps in notes:
                for t, p in tps:
                    st = store.get_partition_state(t, p)
                    if st is not None:
                        out[(t, p)] = el.LeaderAndIsr.from_partition_state(*st)
            if notes:
                store.delete_isr_change_notifications([n for n, _ in notes], self.epoch_zk_version)
            return out
        states = await self.runtime.zk(read)
        if states:
            self.core.isr_changed(states)
            req = self.core.requests()
            req.leader_and_isr.clear()  # the leader changed the ISR itself
            self._send(req)
            await self._run_plan(self.core.check_reassignments())

    async def _on_deletions(self, _: Any) -> None:
        """Kafka's TopicDeletionManager: StopReplica(delete) to every live replica; each
        answer comes back as a ``stopped`` event; the znodes go once every replica (a dead
        broker's included, when it returns) has deleted its log."""
        store = self.runtime.store
        topics = await self.runtime.zk(store.get_topic_deletions)
        if not topics:
            return
        unknown = [t for t in topics if t not in self.core.assignments]
        self._send(self.core.delete_topics(topics))
        for topic, down in self.core.ineligible_for_deletion().items():
            log.info("controller: deletion of %s waits for brokers %s to come back", topic, down)
        for topic in unknown:  # a request for a topic that no longer exists: drop it
            await self.runtime.zk(store.client.delete, z.delete_topic_path(topic))
        await self._complete_deletions(self.core.deletable())

    async def _on_stopped(self, arg: Any) -> None:
        broker, sent, resp = arg
        if resp.error_code:
            log.info("controller: broker %d refused StopReplica (error %d)", broker, resp.error_code)
            return
        # A partition absent from the answer succeeded too (the request named it).
        failed = {(e.topic_name, e.partition_index) for e in resp.partition_errors if e.error_code}
        ok = [tp for tp, delete in sent if delete and tp not in failed]
        await self._complete_deletions(self.core.replicas_deleted(broker, ok))

    async def _complete_deletions(self, topics: list[str]) -> None:
        store = self.runtime.store
        for topic in topics:
            await self.runtime.zk(store.complete_topic_deletion, topic, self.epoch_zk_version)
            self.core.topic_deleted(topic)
            self.topic_configs.pop(topic, None)
            log.info("controller: topic %s deleted", topic)

    # -- admin requests (ElectLeaders, partition reassignment) ------------------------------

    async def _ask(self, kind: str, arg: Any) -> Any:
        if self.stopped:
            raise errors.NotControllerError(f"broker {self.broker_id} is no longer the controller")
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.add(done)
        try:
            self.post(kind, (arg, done))
            return await done
        finally:
            self._pending.discard(done)

    async def elect_leaders(self, tps: list[TP] | None, election_type: int
                            ) -> tuple[dict[TP, Outcome], dict[TP, int]]:
        """ElectLeaders: (outcomes of the partitions not elected, expected leader of the
        elected ones); ``tps`` None = every partition."""
        return await self._ask("elect", (tps, election_type))  # type: ignore[no-any-return]

    async def alter_reassignments(self, requested: dict[TP, list[int] | None]
                                  ) -> dict[TP, Outcome]:
        return await self._ask("reassign", requested)  # type: ignore[no-any-return]

    async def list_reassignments(self, tps: list[TP] | None) -> dict[TP, z.ReplicaAssignment]:
        return await self._ask("list_reassignments", tps)  # type: ignore[no-any-return]

    async def _answering(self, done: asyncio.Future[Any], work: Any) -> None:
        try:
            result = await work
            if not done.done():
                done.set_result(result)
        except BaseException as exc:
            if not done.done():
                done.set_exception(errors.NotControllerError(
                    f"broker {self.broker_id} was replaced as the controller; retry")
                    if isinstance(exc, ControllerMovedError | asyncio.CancelledError) else exc)
            raise

    async def _on_elect(self, arg: Any) -> None:
        (tps, election_type), done = arg

        async def work() -> tuple[dict[TP, Outcome], dict[TP, int]]:
            wanted = tps if tps is not None else [  # all: as the metadata shows them
                tp for tp in self.core.partitions() if tp[0] not in self.core.deleting]
            # Decide on the states ZooKeeper holds now, as Kafka's doElectLeaderForPartitions
            # does: a leader's ISR change may not have reached this controller yet (its
            # notification is read asynchronously), and a preferred replica that just
            # rejoined the ISR must not be refused as "not in the ISR".
            store = self.runtime.store

            def read() -> dict[TP, el.LeaderAndIsr]:
                out = {}
                for t, p in wanted:
                    found = store.get_partition_state(t, p)
                    if found is not None:
                        out[(t, p)] = el.LeaderAndIsr.from_partition_state(*found)
                return out
            for tp, fresh in (await self.runtime.zk(read)).items():
                self.core.reread(tp, fresh)
            writes, outcomes = self.core.elect_leaders(wanted, election_type)
            await self._apply(writes)
            self._send(self.core.requests())
            expected = {}
            for w in writes:
                state = self.core.states.get(w.tp)
                if state is not None and state.has_leader and state.leader in self.core.live \
                        and (election_type == 1 or state.leader == self.core.replicas(w.tp)[0]):
                    expected[w.tp] = state.leader
                else:
                    outcomes[w.tp] = self.core.elect_leaders([w.tp], election_type)[1].get(
                        w.tp, (83 if election_type else 80, "the election lost a race; retry"))
            if writes:
                log.info("controller: %s election for %d partitions",
                         "unclean" if election_type else "preferred", len(expected))
            return outcomes, expected
        await self._answering(done, work())

    async def _on_reassign(self, arg: Any) -> None:
        requested, done = arg

        async def work() -> dict[TP, Outcome]:
            plan, outcomes = self.core.alter_reassignments(requested)
            await self._run_plan(plan)
            return outcomes
        await self._answering(done, work())

    async def _on_list_reassignments(self, arg: Any) -> None:
        tps, done = arg

        async def work() -> dict[TP, z.ReplicaAssignment]:
            return self.core.reassignments(tps)
        await self._answering(done, work())

    async def _write_assignment(self, topic: str) -> None:
        """Write the controller's replica lists of ``topic`` into ``/brokers/topics/<t>``,
        conditionally on the version read, keeping partitions the controller has not seen
        yet (a CreatePartitions racing the reassignment)."""
        mine = self.core.assignments.get(topic)
        if mine is None:
            return
        store = self.runtime.store

        def write() -> None:
            for _ in range(10):
                found = store.get_topic_assignment(topic)
                if found is None:
                    return
                current, version = found
                parts = dict(current.partitions)
                parts.update({p: ra for p, ra in mine.partitions.items() if p in parts})
                result = store.set_topic_assignment(
                    topic, z.TopicAssignment(parts, current.topic_id), version,
                    self.epoch_zk_version)
                if not isinstance(result, BadVersion):
                    return
            raise RuntimeError(f"/brokers/topics/{topic} kept changing while being rewritten")
        await self.runtime.zk(write)

    async def _run_plan(self, plan: Plan) -> None:
        """A reassignment step, in Kafka's order: assignment znodes (RS = ORS + TRS), state
        writes, LeaderAndIsr / UpdateMetadata / StopReplica, then the final assignments."""
        if plan.empty():
            return
        for topic in sorted(plan.assignments_before):
            await self._write_assignment(topic)
        await self._apply(plan.writes)
        req = self.core.requests()
        for b, stops in plan.stops.items():
            req.stop_replica.setdefault(b, []).extend(stops)
        self._send(req)
        for topic in sorted(plan.assignments_after):
            await self._write_assignment(topic)
        for tp, ra in self.core.reassignments().items():
            log.info("controller: reassigning %s-%d: replicas %s, adding %s, removing %s",
                     tp[0], tp[1], list(ra.replicas), list(ra.adding_replicas),
                     list(ra.removing_replicas))

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[Any]:
        """ControlledShutdown (7): move the broker's leaderships; returns what it still leads."""
        if self.stopped:
            raise errors.NotControllerError(f"broker {self.broker_id} is no longer the controller")
        done: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._pending.add(done)
        try:
            self.post("shutdown", (broker_id, done))
            return await done
        finally:
            self._pending.discard(done)

    async def _on_shutdown(self, arg: Any) -> None:
        broker_id, done = arg
        try:
            writes, _remaining = self.core.controlled_shutdown(broker_id)
            await self._apply(writes)
            self._send(self.core.requests())
            done.set_result(self.core.still_led_by(broker_id))
        except BaseException as exc:
            if not done.done():
                done.set_exception(exc)
            raise

    # -- writes and sends ----------------------------------------------------------------

    async def _apply(self, writes: list[StateWrite]) -> None:
        store = self.runtime.store
        for write in writes:
            for _attempt in range(5):
                state = write.new.to_partition_state(self.epoch)
                t, p = write.tp
                if write.expected_version == -1:
                    result = await self.runtime.zk(store.create_partition_state, t, p, state,
                                                   self.epoch_zk_version)
                else:
                    result = await self.runtime.zk(store.update_partition_state, t, p, state,
                                                   write.expected_version, self.epoch_zk_version)
                if not isinstance(result, BadVersion):
                    self.core.written(write, result.zk_version)
                    break
                found = await self.runtime.zk(store.get_partition_state, t, p)
                self.core.reread(write.tp, el.LeaderAndIsr.from_partition_state(*found)
                                 if found is not None else None)
                again = self.core.replan(write.tp, write.kind)
                if again is None:
                    break
                write = again

    def _sync_channels(self, dead: set[int] | None = None) -> None:
        for b in list(self.channels):
            if b not in self.core.live or (dead and b in dead):
                asyncio.ensure_future(self.channels.pop(b).close())
        for b, (reg, _) in self.core.live.items():
            if b not in self.channels:
                ep = inter_broker_endpoint(reg, self.listener)
                self.channels[b] = BrokerChannel(b, ep.host, ep.port, f"controller-{self.broker_id}",
                                                 ssl_context=self.ssl_context, sasl=self.sasl)

    def _send(self, req: Requests) -> list[asyncio.Future[Any]]:
        """Queue the requests; returns futures resolved by the StopReplica answers."""
        topic_ids = {t: a.topic_id for t, a in self.core.assignments.items()}
        live = dict(self.core.live)
        me, epoch = self.broker_id, self.epoch
        acks: list[asyncio.Future[Any]] = []
        loop = asyncio.get_running_loop()
        for b, stops in req.stop_replica.items():
            ch = self.channels.get(b)
            if ch is not None:
                ep = live[b][1]
                ack: asyncio.Future[Any] = loop.create_future()
                acks.append(ack)

                def answered(resp: Any, ack: Any = ack, b: int = b, stops: Any = stops) -> None:
                    if not ack.done():
                        ack.set_result(resp)
                    self.post("stopped", (b, stops, resp))
                ch.enqueue(lambda c, stops=stops, ep=ep: build_stop_replica(
                    c.version_for(StopReplicaRequest), me, epoch, ep, stops), answered)
        for b, parts in req.leader_and_isr.items():
            ch = self.channels.get(b)
            if ch is not None:
                ep = live[b][1]
                ch.enqueue(lambda c, parts=parts, ep=ep: build_leader_and_isr(
                    c.version_for(LeaderAndIsrRequest), me, epoch, ep, parts, topic_ids, live,
                    self.listener))
        for b, parts in req.update_metadata.items():
            ch = self.channels.get(b)
            if ch is not None:
                ep = live[b][1]
                ch.enqueue(lambda c, parts=parts, ep=ep: build_update_metadata(
                    c.version_for(UpdateMetadataRequest), me, epoch, ep, parts, topic_ids, live))
        return acks


class ClusterRuntime:
    """``broker.cluster``: the ZooKeeper session, registration, election, metadata cache."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.config = broker.config
        self.broker_id: int = broker.node_id
        timeout = self.config["zookeeper.session.timeout.ms"]
        self.store = ZkStore(self.config["zookeeper.connect"], session_timeout_ms=timeout)
        self.metadata = MetadataCache(self.config.inter_broker_listener)
        self.cluster_id: str | None = None
        self.broker_epoch = -1
        self.controller: ControllerService | None = None
        self.configs: ConfigChangeListener | None = None
        self._zk_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pylog-zk")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._controller_watch: Any = None
        self._stopping = False
        self._electing = False

    async def find_coordinator(self, key: str, key_type: int) -> tuple[int, str | None, Any]:
        """FindCoordinator's answer for one key (``pylog.controller.admin.find_coordinator``),
        for the layers below that are handed the broker (the share persister)."""
        from pylog.controller.admin import find_coordinator

        return await find_coordinator(self.broker, key, key_type)

    async def zk(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking ZooKeeper call on the ZooKeeper thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._zk_thread, lambda: fn(*args))

    def registration(self) -> z.BrokerRegistration:
        # Every advertised listener, with its security protocol (Kafka's endpoints and
        # listener_security_protocol_map): clients get the one they connect on, brokers
        # the inter-broker one.
        protocols = {ll.name: ll.security_protocol for ll in self.config.advertised_listeners}
        endpoints = tuple(z.EndPoint(name, host, port, protocols[name])
                          for name, host, port in self.broker.advertised_endpoints())
        return z.BrokerRegistration(
            broker_id=self.broker_id, endpoints=endpoints,
            rack=self.config["broker.rack"], timestamp_ms=self.broker.clock.time_ms())

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        connect_ms = (self.config["zookeeper.connection.timeout.ms"]
                      or self.config["zookeeper.session.timeout.ms"])
        await self.zk(self.store.start, connect_ms / 1000.0)
        self.cluster_id = await self._check_cluster_id()
        self.configs = ConfigChangeListener(self.broker)
        await self.configs.start()
        if self.broker.acls is not None:  # ACLs before registering: no request sees none
            await self.broker.acls.start_cluster()
        self.broker_epoch = await self.zk(self.store.register_broker, self.registration())
        log.info("broker %d registered in ZooKeeper %s (broker epoch %d, cluster %s)",
                 self.broker_id, self.store.connect, self.broker_epoch, self.cluster_id)
        self.store.add_session_listener(self._on_session)
        loop = self._loop

        def on_controller(reg: z.ControllerRegistration | None) -> Any:
            if self._stopping:
                return False
            loop.call_soon_threadsafe(self._controller_changed, reg)
            return None
        self._controller_watch = await self.zk(self.store.watch_controller, on_controller)

    async def _check_cluster_id(self) -> str:
        """``/cluster/id`` (created with a new id by the first broker) against the log dir's
        ``meta.properties``: a fresh log dir takes ZooKeeper's id; another id refuses to
        start (Kafka's InconsistentClusterIdException)."""
        manager = self.broker.log_manager
        stored = manager.cluster_id
        found = await self.zk(self.store.create_or_get_cluster_id,
                              stored or z.new_uuid_text())
        if stored and stored != found:
            raise errors.InconsistentClusterIdError(
                f"The Cluster ID {found} doesn't match stored clusterId Some({stored}) in "
                f"meta.properties ({os.path.join(manager.log_dir, 'meta.properties')}). The broker is trying to join "
                "the wrong cluster. Configured zookeeper.connect may be wrong.")
        if not stored:
            await asyncio.get_running_loop().run_in_executor(
                self.broker.executor, manager.adopt_cluster_id, found)
        return str(found)

    def _on_session(self, state: str) -> None:
        # kazoo's thread. LOST = the session expired: the registration (and /controller, if
        # ours) are gone; kazoo reconnects with a new session, then we register again.
        if state == "LOST" and self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._session_lost()))

    async def _session_lost(self) -> None:
        log.warning("ZooKeeper session expired: registering again")
        await self.resign()
        for _ in range(600):
            if self._stopping:
                return
            if self.store.connected:
                break
            await asyncio.sleep(0.1)
        self.broker_epoch = await self.zk(self.store.register_broker, self.registration())
        self._controller_changed(await self.zk(self.store.get_controller))

    def _controller_changed(self, reg: z.ControllerRegistration | None) -> None:
        if self._stopping:
            return
        if reg is None:
            if not self._electing:
                asyncio.ensure_future(self._elect())
        elif reg.broker_id != self.broker_id and self.controller is not None:
            asyncio.ensure_future(self.resign())

    async def _elect(self) -> None:
        self._electing = True
        try:
            while True:
                try:
                    current = await self.zk(self.store.get_controller)
                    if current is not None:  # someone won meanwhile
                        self._electing = False
                        self._controller_changed(current)
                        return
                    result = await self.zk(self.store.elect_controller, self.broker_id)
                    break
                except Exception as exc:  # noqa: BLE001 - ZooKeeper hiccup: try again
                    log.warning("controller election attempt failed (%s); retrying in 1 s", exc)
                    await asyncio.sleep(1.0)
                    if self._stopping:
                        return
        finally:
            self._electing = False
        if result.won and not self._stopping:
            if self.controller is not None:
                await self.controller.stop()
            self.controller = ControllerService(self, result.epoch, result.epoch_zk_version)
            await self.controller.start()

    async def resign(self) -> None:
        controller, self.controller = self.controller, None
        if controller is not None:
            await controller.stop()

    async def topic_config(self, topic: str) -> dict[str, str]:
        return dict(await self.zk(self.store.get_entity_config, "topics", topic))

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaderships (Kafka's
        ``KafkaServer.controlledShutdown``): up to ``controlled.shutdown.max.retries`` + 1
        attempts, ``controlled.shutdown.retry.backoff.ms`` apart. True when it succeeded
        (no partition left that only this broker can lead)."""
        from pylog.net.connection import BrokerConnection
        from pylog.protocol.messages import ControlledShutdownRequest

        attempts = self.config["controlled.shutdown.max.retries"] + 1
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(backoff)
            try:
                if self.controller is not None:
                    remaining = await asyncio.wait_for(self.controller.controlled_shutdown(
                        self.broker_id, self.broker_epoch), 30.0)
                    code = 0
                else:
                    reg = await self.zk(self.store.get_controller)
                    found = await self.zk(self.store.get_broker, reg.broker_id) if reg else None
                    if found is None:
                        log.info("controlled shutdown: no controller yet")
                        continue
                    ep = inter_broker_endpoint(found[0], self.config.inter_broker_listener)
                    conn = BrokerConnection(ep.host, ep.port, node_id=reg.broker_id,
                                            client_id=f"broker-{self.broker_id}-shutdown",
                                            request_timeout=30.0,
                                            ssl_context=self.broker.inter_broker_tls(),
                                            sasl=self.broker.inter_broker_sasl())
                    await conn.connect(30.0)
                    try:
                        resp = await conn.send(ControlledShutdownRequest(
                            broker_id=self.broker_id, broker_epoch=self.broker_epoch))
                    finally:
                        await conn.close()
                    code = resp.error_code
                    remaining = [(r.topic_name, r.partition_index)
                                 for r in resp.remaining_partitions]
            except Exception as exc:  # noqa: BLE001 - retried, then shut down anyway
                log.info("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
                continue
            if code == 0 and not remaining:
                log.info("controlled shutdown succeeded")
                return True
            log.info("controlled shutdown attempt %d: error %d, still leading %d partitions",
                     attempt + 1, code, len(remaining))
        log.warning("controlled shutdown failed after %d attempts; shutting down anyway", attempts)
        return False

    async def shutdown(self) -> None:
        if self.broker_epoch >= 0 and self.config["controlled.shutdown.enable"] \
                and not self._stopping:
            if await self.controlled_shutdown():
                await self.broker.replicas.stop_fetchers()
        self._stopping = True
        controller, self.controller = self.controller, None
        if controller is not None:
            await controller.stop()
            try:
                await self.zk(self.store.resign_controller, controller.epoch_zk_version)
            except Exception:  # noqa: BLE001 - the session close removes it anyway
                log.debug("resigning the controller failed", exc_info=True)
        if self.configs is not None:
            await self.configs.stop()
        await self.zk(self.store.close)
        self._zk_thread.shutdown(wait=True)
