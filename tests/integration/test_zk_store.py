"""pylog.cluster.zk_store against a real ZooKeeper server (Debian's package, started by the
``_harness.zookeeper`` fixture on a free port with its own data directory).

Each test works under its own chroot so tests sharing the module's server do not see each
other's znodes. The restart test runs its own server.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from _harness.zookeeper import (  # noqa: F401
    ZooKeeperServer,
    zookeeper,
    zookeeper_factory,
)

pytestmark = pytest.mark.integration

kazoo = pytest.importorskip("kazoo", reason="kazoo is a test dependency: pip install kazoo")

from kazoo.client import KazooClient  # noqa: E402

from pylog._clock import ManualClock  # noqa: E402
from pylog.cluster import zk_data as z  # noqa: E402
from pylog.cluster.zk_store import (  # noqa: E402
    BadVersion,
    BrokerIdInUseError,
    ControllerElection,
    ControllerMovedError,
    TopicExistsError,
    Updated,
    ZkStore,
)

TIMEOUT = 30.0


def _wait_for(pred: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def connect(zookeeper: ZooKeeperServer) -> str:  # noqa: F811
    return f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def stores(connect: str) -> Iterator[Callable[..., ZkStore]]:
    opened: list[ZkStore] = []

    def open_store(**kwargs: object) -> ZkStore:
        store = ZkStore(connect, **kwargs)  # type: ignore[arg-type]
        store.start()
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        try:
            store.close()
        except Exception:
            pass


def _registration(broker_id: int, port: int = 9092, rack: str | None = None) -> z.BrokerRegistration:
    return z.BrokerRegistration(broker_id, (z.EndPoint("PLAINTEXT", "127.0.0.1", port),),
                                rack=rack, timestamp_ms=1_700_000_000_000)


def _expire_session(store: ZkStore, connect: str) -> None:
    """End ``store``'s session from the server side, as a long GC pause or partition would:
    a second client joins the same session and closes it (ZooKeeper's documented way)."""
    session_id, password = store.client.client_id
    hosts = connect.partition("/")[0]
    twin = KazooClient(hosts=hosts, client_id=(session_id, password))
    twin.start(timeout=TIMEOUT)
    twin.stop()
    twin.close()


def test_persistent_paths_exist_after_start(stores: Callable[..., ZkStore]) -> None:
    store = stores()
    for path in z.PERSISTENT_PATHS:
        assert store.client.exists(path) is not None, path


def test_registration_vanishes_when_the_session_closes(stores: Callable[..., ZkStore]) -> None:
    a, b, observer = stores(), stores(), stores()
    seen: list[list[int]] = []
    observer.watch_broker_ids(lambda ids: seen.append(ids))
    epoch1 = a.register_broker(_registration(1, 9092, rack="r1"))
    epoch2 = b.register_broker(_registration(2, 9093))
    assert epoch2 > epoch1 > 0  # czxids grow
    assert observer.get_broker_ids() == [1, 2]
    reg, epoch = observer.get_broker(1)  # type: ignore[misc]
    assert (reg.rack, reg.endpoints[0].port, epoch) == ("r1", 9092, epoch1)
    raw, stat = observer.client.get(z.broker_id_path(1))
    assert json.loads(raw)["version"] == 5 and stat.ephemeralOwner == a.session_id
    # Registering again from the same session is accepted (a retry); another session is not.
    assert a.register_broker(_registration(1, 9092, rack="r1")) == epoch1
    with pytest.raises(BrokerIdInUseError, match="broker.id=1"):
        b.register_broker(_registration(1))
    _wait_for(lambda: bool(seen) and seen[-1] == [1, 2], "the watch to see brokers 1 and 2")
    a.close()
    assert observer.get_broker_ids() == [2]
    assert observer.get_broker(1) is None
    _wait_for(lambda: seen[-1] == [2], "the watch to see broker 1 leave")
    # The id is free again; a new registration is a new broker epoch (a bounce).
    c = stores()
    assert c.register_broker(_registration(1)) > epoch2


def test_registration_vanishes_when_the_session_expires(
        stores: Callable[..., ZkStore], connect: str) -> None:
    a, observer = stores(session_timeout_ms=4000), stores()
    a.register_broker(_registration(7))
    _expire_session(a, connect)
    _wait_for(lambda: observer.get_broker(7) is None, "broker 7's registration to vanish")


def test_topic_creation_writes_config_then_assignment(stores: Callable[..., ZkStore]) -> None:
    store, observer = stores(), stores()
    seen: list[list[str]] = []
    observer.watch_topics(lambda topics: seen.append(topics))
    topic_id = z.new_uuid_text()
    assignment = z.TopicAssignment({0: z.ReplicaAssignment((1, 2)), 1: z.ReplicaAssignment((2, 1))},
                                   topic_id=topic_id)
    store.create_topic("orders", assignment, {"cleanup.policy": "compact"})
    assert store.get_topics() == ["orders"]
    _wait_for(lambda: seen[-1:] == [["orders"]], "the topics watch to see the new topic")
    found, version = store.get_topic_assignment("orders")  # type: ignore[misc]
    assert (found, version) == (assignment, 0)
    assert store.get_entity_config("topics", "orders") == {"cleanup.policy": "compact"}
    with pytest.raises(TopicExistsError, match="'orders' already exists"):
        store.create_topic("orders", assignment)
    assert store.get_topic_assignment("missing") is None
    # A malformed payload is refused with its path named.
    store.client.create(z.topic_path("broken"), b'{"version":3,"partitions":{"0":[1,1]}}')
    with pytest.raises(z.ZkDataError, match="/brokers/topics/broken: .*twice"):
        store.get_topic_assignment("broken")


def test_conditional_partition_state_update_conflicts(stores: Callable[..., ZkStore]) -> None:
    controller, leader_a, leader_b = stores(), stores(), stores()
    won = controller.elect_controller(1)
    assert won.won
    state = z.PartitionState(leader=1, leader_epoch=0, isr=(1, 2, 3),
                             controller_epoch=won.epoch)
    assert controller.create_partition_state("t", 0, state, won.epoch_zk_version) == Updated(0)
    assert controller.create_partition_state("t", 0, state, won.epoch_zk_version) == BadVersion(-1)
    # Two writers both read version 0: the first wins, the second must re-read.
    shrunk_a = z.PartitionState(1, 0, (1, 2), won.epoch)
    shrunk_b = z.PartitionState(1, 0, (1, 3), won.epoch)
    assert leader_a.update_partition_state("t", 0, shrunk_a, 0) == Updated(1)
    assert leader_b.update_partition_state("t", 0, shrunk_b, 0) == BadVersion(0)
    current, version = leader_b.get_partition_state("t", 0)  # type: ignore[misc]
    assert (current, version) == (shrunk_a, 1)
    # Fenced controller writes are conditional too.
    new_leader = z.PartitionState(2, 1, (2,), won.epoch)
    assert controller.update_partition_state("t", 0, new_leader, 0, won.epoch_zk_version) \
        == BadVersion(0)
    assert controller.update_partition_state("t", 0, new_leader, 1, won.epoch_zk_version) \
        == Updated(2)
    assert controller.get_partition_state("t", 0) == (new_leader, 2)
    # The leader's notice of its ISR change, consumed by the controller (fenced).
    name = leader_a.notify_isr_change([("t", 0)]).rsplit("/", 1)[1]
    assert name.startswith("isr_change_")
    assert controller.get_isr_change_notifications() == [(name, [("t", 0)])]
    with pytest.raises(ControllerMovedError):
        controller.delete_isr_change_notifications([name], won.epoch_zk_version + 1)
    controller.delete_isr_change_notifications([name], won.epoch_zk_version)
    assert controller.get_isr_change_notifications() == []


def test_controller_election_two_contenders_and_epoch_fencing(
        stores: Callable[..., ZkStore], connect: str) -> None:
    a = stores(session_timeout_ms=4000, clock=ManualClock())
    b = stores(session_timeout_ms=4000)
    results: dict[int, object] = {}
    barrier = threading.Barrier(2)

    def contend(store: ZkStore, broker_id: int) -> None:
        barrier.wait(TIMEOUT)
        results[broker_id] = store.elect_controller(broker_id)

    threads = [threading.Thread(target=contend, args=(s, i)) for s, i in ((a, 1), (b, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    winners = [r for r in results.values() if r.won]  # type: ignore[attr-defined]
    losers = [r for r in results.values() if not r.won]  # type: ignore[attr-defined]
    assert len(winners) == 1 and len(losers) == 1, results
    first = winners[0]
    assert first.epoch == 1  # /controller_epoch was created as 0 and bumped once
    assert losers[0].controller_id == first.controller_id
    assert a.get_controller_epoch() == (1, first.epoch_zk_version)
    leader_store = a if first.controller_id == 1 else b
    other_store, other_id = (b, 2) if leader_store is a else (a, 1)
    raw, _ = other_store.client.get(z.CONTROLLER_PATH)
    assert json.loads(raw)["brokerid"] == first.controller_id
    assert other_store.elect_controller(other_id).won is False

    state = z.PartitionState(first.controller_id, 0, (1, 2), first.epoch)
    assert leader_store.create_partition_state("t", 0, state, first.epoch_zk_version) == Updated(0)

    # The controller's session expires (a long pause); the other broker takes over.
    seen: list[int | None] = []
    other_store.watch_controller(lambda reg: seen.append(reg.broker_id if reg else None))
    _expire_session(leader_store, connect)
    _wait_for(lambda: other_store.get_controller() is None, "/controller to vanish")
    second = other_store.elect_controller(other_id)
    assert second.won and second.epoch == 2
    assert second.epoch_zk_version > first.epoch_zk_version
    _wait_for(lambda: seen[-1:] == [other_id], "the controller watch to see the new controller")

    # The old controller wakes up and writes with its stale fencing token: refused, nothing
    # written. Its kazoo client reconnects with a new session first.
    _wait_for(lambda: leader_store.connected, "the old controller's client to reconnect")
    stale = z.PartitionState(first.controller_id, 1, (1,), first.epoch)
    with pytest.raises(ControllerMovedError, match="newer controller"):
        leader_store.update_partition_state("t", 0, stale, 0, first.epoch_zk_version)
    with pytest.raises(ControllerMovedError):
        leader_store.create_partition_state("t", 1, stale, first.epoch_zk_version)
    assert leader_store.resign_controller(first.epoch_zk_version) is False
    assert other_store.get_partition_state("t", 0) == (state, 0)
    assert other_store.get_partition_state("t", 1) is None
    # The new controller's writes pass, and it can resign cleanly.
    moved = z.PartitionState(other_id, 1, (other_id,), second.epoch)
    assert other_store.update_partition_state("t", 0, moved, 0, second.epoch_zk_version) \
        == Updated(1)
    assert other_store.resign_controller(second.epoch_zk_version) is True
    assert other_store.get_controller() is None


def test_repeated_elections_have_one_winner_and_consecutive_epochs(
        stores: Callable[..., ZkStore]) -> None:
    contenders = {broker_id: stores() for broker_id in (1, 2, 3)}
    epochs = []
    for _round in range(5):
        barrier = threading.Barrier(len(contenders))
        results: dict[int, ControllerElection] = {}

        def contend(broker_id: int, store: ZkStore, barrier: threading.Barrier = barrier,
                    results: dict[int, ControllerElection] = results) -> None:
            barrier.wait(TIMEOUT)
            results[broker_id] = store.elect_controller(broker_id)

        threads = [threading.Thread(target=contend, args=item) for item in contenders.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        winners = [b for b, r in results.items() if r.won]
        assert len(results) == len(contenders) and len(winners) == 1, results
        winner = winners[0]
        epochs.append(results[winner].epoch)
        assert all(r.controller_id == winner for r in results.values())
        # The winner's broker goes away; a fresh session takes its place for the next round.
        contenders[winner].close()
        contenders[winner] = stores()
    assert epochs == list(range(1, 6))


def test_producer_id_blocks_are_unique_across_concurrent_claimers(
        stores: Callable[..., ZkStore]) -> None:
    claimers = [stores(), stores()]
    per_claimer = 40
    claimed: dict[int, list[z.ProducerIdBlock]] = {1: [], 2: []}
    barrier = threading.Barrier(2)

    def claim(store: ZkStore, broker_id: int) -> None:
        barrier.wait(TIMEOUT)
        for _ in range(per_claimer):
            claimed[broker_id].append(store.claim_producer_id_block(broker_id))

    threads = [threading.Thread(target=claim, args=(s, i + 1)) for i, s in enumerate(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 2)
    blocks = sorted(claimed[1] + claimed[2], key=lambda b: b.block_start)
    assert len(blocks) == 2 * per_claimer
    assert all(b.size == z.PRODUCER_ID_BLOCK_SIZE for b in blocks)
    # Dense and disjoint: block k covers [1000k, 1000k + 999].
    assert [b.block_start for b in blocks] == [1000 * k for k in range(2 * per_claimer)]
    assert all(b.broker_id in (1, 2) for b in blocks)
    assert claimed[1] and claimed[2]
    last = z.ProducerIdBlock.decode(claimers[0].client.get(z.PRODUCER_ID_BLOCK_PATH)[0])
    assert last == blocks[-1]


def test_cluster_id_is_created_once(stores: Callable[..., ZkStore]) -> None:
    a, b = stores(), stores()
    first = z.new_uuid_text()
    assert a.get_cluster_id() is None
    assert a.create_or_get_cluster_id(first) == first
    assert b.create_or_get_cluster_id(z.new_uuid_text()) == first
    raw, _ = b.client.get(z.CLUSTER_ID_PATH)
    assert json.loads(raw) == {"version": "1", "id": first}


def test_config_change_notices_in_order_and_expired_ones_deleted(
        stores: Callable[..., ZkStore]) -> None:
    a, b = stores(), stores()
    a.set_entity_config("topics", "orders", {"retention.ms": "1000"})
    b.set_entity_config("topics", "orders", {"retention.ms": "2000"})
    a.set_entity_config("topics", "audit", {"cleanup.policy": "compact"}, notify=False)
    a.client.create(z.CONFIG_CHANGE_PREFIX, b'{"version":9}', sequence=True)  # unreadable
    notices = b.get_config_changes()
    assert [(e, n.startswith("config_change_")) for _s, n, e, _c in notices] == [
        ("topics/orders", True), ("topics/orders", True), (None, True)]
    assert [s for s, *_ in notices] == sorted(s for s, *_ in notices)
    assert len({s for s, *_ in notices}) == 3
    assert b.get_entity_config("topics", "orders") == {"retention.ms": "2000"}
    assert b.get_entity_config("topics", "audit") == {"cleanup.policy": "compact"}
    b.delete_config_changes([notices[0][1], notices[0][1]])  # one already gone is skipped
    assert [n for _s, n, _e, _c in a.get_config_changes()] == [n for _s, n, _e, _c in notices[1:]]


def test_topic_deletion_is_fenced_and_complete(stores: Callable[..., ZkStore]) -> None:
    store = stores()
    won = store.elect_controller(0)
    store.create_topic("gone", z.TopicAssignment({0: z.ReplicaAssignment((0,))}), {"a": "b"})
    store.create_partition_state("gone", 0, z.PartitionState(0, 0, (0,), won.epoch),
                                 won.epoch_zk_version)
    store.request_topic_deletion("gone")
    store.request_topic_deletion("gone")  # idempotent
    assert store.get_topic_deletions() == ["gone"]
    with pytest.raises(ControllerMovedError):
        store.complete_topic_deletion("gone", won.epoch_zk_version + 1)
    assert store.get_topic_assignment("gone") is not None
    store.complete_topic_deletion("gone", won.epoch_zk_version)
    assert store.get_topics() == [] and store.get_topic_deletions() == []
    assert store.get_entity_config("topics", "gone") == {}


def test_zookeeper_restart_keeps_persistent_znodes(
        zookeeper_factory: Callable[[], ZooKeeperServer]) -> None:  # noqa: F811
    server = zookeeper_factory()
    store = ZkStore(server.connect_string, session_timeout_ms=20_000)
    gone = ZkStore(server.connect_string)
    try:
        store.start()
        gone.start()
        won = store.elect_controller(3)
        store.create_topic("kept", z.TopicAssignment({0: z.ReplicaAssignment((3,))}))
        state = z.PartitionState(3, 0, (3,), won.epoch)
        store.create_partition_state("kept", 0, state, won.epoch_zk_version)
        cluster_id = store.create_or_get_cluster_id(z.new_uuid_text())
        block = store.claim_producer_id_block(3)
        epoch = store.register_broker(_registration(3))
        gone.register_broker(_registration(4))
        gone.close()  # its ephemeral registration goes with its session, before the restart

        port = server.port
        server.stop()
        assert not server.running
        server.start()
        assert server.port == port

        # The same client reconnects and resumes its session (shorter outage than its timeout):
        # its ephemeral znodes survive, and persistent ones are all there.
        _wait_for(lambda: store.connected, "the client to reconnect after the restart")
        assert store.get_partition_state("kept", 0) == (state, 0)
        assert store.get_topic_assignment("kept") == (
            z.TopicAssignment({0: z.ReplicaAssignment((3,))}), 0)
        assert store.get_cluster_id() == cluster_id
        assert store.get_controller_epoch() == (won.epoch, won.epoch_zk_version)
        assert store.claim_producer_id_block(3).block_start == block.block_end + 1
        assert store.get_broker_ids() == [3]
        assert store.get_broker(3)[1] == epoch  # type: ignore[index]
        # A fresh session sees the same.
        fresh = ZkStore(server.connect_string)
        fresh.start()
        try:
            assert fresh.get_topics() == ["kept"]
            assert fresh.get_controller() is not None
        finally:
            fresh.close()
        # A SIGKILLed server (no clean shutdown) also keeps what it acknowledged.
        server.kill()
        server.start()
        _wait_for(lambda: store.connected, "the client to reconnect after SIGKILL")
        assert store.get_partition_state("kept", 0) == (state, 0)
    finally:
        store.close()
