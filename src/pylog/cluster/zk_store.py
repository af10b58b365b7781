"""A thin, blocking ZooKeeper store over ``kazoo``: the reads and writes cluster mode needs.

Kafka's counterpart is ``KafkaZkClient.scala``; payloads and paths come from
``pylog.cluster.zk_data``. Every decision (who leads, which ISR) is made elsewhere
(``election``, ``isr``); this module only reads and writes znodes, conditionally where Kafka
does:

- ``register_broker``: ephemeral ``/brokers/ids/<id>``; the broker epoch is its czxid. A node
  left by this same session (a retry after connection loss) is accepted, another owner's is
  refused (``BrokerIdInUseError``).
- ``elect_controller``: Kafka's ``registerControllerAndIncrementControllerEpoch``: read
  ``/controller_epoch`` (created as ``0``), then one ZooKeeper multi {create ephemeral
  ``/controller``; set ``/controller_epoch`` = epoch + 1 at the version read}. Losing either
  half means another broker won.
- Fencing: controller writes take the ``epoch_zk_version`` the election returned and run as a
  multi prefixed by a check of ``/controller_epoch``'s version (Kafka's
  ``wrapRequestWithControllerEpochCheck``); a mismatch raises ``ControllerMovedError`` and
  writes nothing.
- ``update_partition_state``: conditional on the state znode's version (the partition epoch);
  returns ``Updated(new_version)`` or ``BadVersion`` (someone else wrote first; re-read).
- ``claim_producer_id_block``: read ``/latest_producer_id_block`` and its version, write the
  next block of 1000 at that version, retry on conflict (``ZkProducerIdManager``).

Thread-safety: a ``ZkStore`` may be shared between threads (kazoo's client is thread-safe);
every method blocks until ZooKeeper answers and may raise kazoo's ``ConnectionLoss`` or
``SessionExpiredError`` (the caller decides whether to retry). Watch callbacks run on
kazoo's event thread and must not block.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pylog._clock import SYSTEM_CLOCK, Clock
from pylog.cluster import MissingKazooError
from pylog.cluster import zk_data as z

try:
    from kazoo.client import KazooClient, KazooState
    from kazoo.exceptions import (
        BadVersionError,
        NodeExistsError,
        NoNodeError,
        NotEmptyError,
        RolledBackError,
    )
    from kazoo.recipe.watchers import ChildrenWatch, DataWatch
except ImportError as exc:  # the optional extra is not installed (or is broken)
    raise MissingKazooError(
        f"cluster mode (zookeeper.connect) needs kazoo, which cannot be imported ({exc}); "
        "install it with: pip install 'pylog-kafka[cluster]'"
    ) from exc
from pylog.errors import KafkaError

log = logging.getLogger(__name__)

# KafkaController.InitialControllerEpoch / InitialControllerEpochZkVersion
INITIAL_CONTROLLER_EPOCH = 0
DEFAULT_SESSION_TIMEOUT_MS = 18_000  # zookeeper.session.timeout.ms


class ZkStoreError(KafkaError):
    """A ZooKeeper operation could not be done as asked (the message says what to do)."""


class ControllerMovedError(ZkStoreError):
    """``/controller_epoch`` moved on: a newer controller exists. Resign and stop writing."""


class BrokerIdInUseError(ZkStoreError):
    """Another live session holds ``/brokers/ids/<id>``."""


class TopicExistsError(ZkStoreError):
    """``/brokers/topics/<topic>`` already exists."""


@dataclass(frozen=True)
class Updated:
    """A conditional write went through; ``zk_version`` is the znode's new data version."""

    zk_version: int


@dataclass(frozen=True)
class BadVersion:
    """A conditional write lost: the znode is no longer at ``expected_zk_version``."""

    expected_zk_version: int


@dataclass(frozen=True)
class ControllerElection:
    """The outcome of one ``elect_controller`` attempt.

    ``won`` with ``epoch`` and ``epoch_zk_version`` (the fencing token for every later
    write); otherwise ``controller_id`` is the winner as read afterwards (-1 if the winner's
    session already ended).
    """

    won: bool
    controller_id: int
    epoch: int
    epoch_zk_version: int


def _first_error(results: list[Any]) -> tuple[int, Exception] | None:
    """The failing operation of a ZooKeeper multi (its index and error), or None if it passed."""
    for i, r in enumerate(results):
        if isinstance(r, Exception) and not isinstance(r, RolledBackError):
            return i, r
    return None


class ZkStore:
    """Kafka's ZooKeeper layout through one kazoo session (``connect`` may carry a chroot)."""

    def __init__(self, connect: str, *, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        if not connect:
            raise ZkStoreError("zookeeper.connect is empty: set it to host:port[,host:port][/chroot]")
        self.connect = connect
        self.clock = clock
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000.0)

    # -- session -------------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> None:
        """Connect (and create the chroot and Kafka's persistent paths if missing)."""
        try:
            self._create_chroot(timeout_s)
            self.client.start(timeout=timeout_s)
        except Exception as exc:
            self.client.close()
            raise ZkStoreError(f"cannot reach ZooKeeper at {self.connect} within {timeout_s:.0f} s"
                               f" ({exc}); is it running? (zookeeper.connect)") from exc
        self.ensure_persistent_paths()

    def _create_chroot(self, timeout_s: float) -> None:
        # As Kafka's createChrootIfNecessary: a short session without the chroot creates it.
        hosts, slash, chroot = self.connect.partition("/")
        if not slash or not chroot.strip("/"):
            return
        bootstrap = KazooClient(hosts=hosts)
        bootstrap.start(timeout=timeout_s)
        try:
            bootstrap.ensure_path("/" + chroot.strip("/"))
        finally:
            bootstrap.stop()
            bootstrap.close()

    def close(self) -> None:
        """End the session (its ephemeral znodes vanish at once) and release the client."""
        try:
            self.client.stop()
        finally:
            self.client.close()

    @property
    def session_id(self) -> int:
        return int(self.client.client_id[0]) if self.client.client_id else 0

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    def add_session_listener(self, func: Callable[[str], None]) -> None:
        """``func(state)`` with state ``"CONNECTED"``, ``"SUSPENDED"`` or ``"LOST"`` (expired)."""
        def listener(state: KazooState) -> None:
            func(str(state))
        self.client.add_listener(listener)

    def ensure_persistent_paths(self) -> None:
        for path in z.PERSISTENT_PATHS:
            self.client.ensure_path(path)

    # -- brokers -------------------------------------------------------------------------

    def register_broker(self, registration: z.BrokerRegistration) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns the broker epoch (its czxid).

        Raises:
            BrokerIdInUseError: another session holds the id (another broker runs with this
                ``broker.id``, or this broker's previous session has not expired yet).
        """
        path = z.broker_id_path(registration.broker_id)
        for _ in range(3):
            try:
                _, stat = self.client.create(path, registration.encode(), ephemeral=True,
                                             makepath=True, include_data=True)
                return int(stat.czxid)
            except NodeExistsError:
                try:
                    _, stat = self.client.get(path)
                except NoNodeError:
                    continue  # the previous owner's session just ended: try again
            if stat.ephemeralOwner == self.session_id:
                return int(stat.czxid)
            raise BrokerIdInUseError(
                f"{path} is held by ZooKeeper session {stat.ephemeralOwner:#x}: another broker "
                f"runs with broker.id={registration.broker_id}, or this broker's previous "
                "session has not expired yet (wait zookeeper.session.timeout.ms)")
        raise ZkStoreError(f"{path} kept appearing and vanishing while registering; retry")

    def get_broker_ids(self) -> list[int]:
        return sorted(int(c) for c in self.client.get_children(z.BROKER_IDS_PATH) if c.isdigit())

    def get_broker(self, broker_id: int) -> tuple[z.BrokerRegistration, int] | None:
        """The registration and broker epoch (czxid) of a live broker, or None."""
        try:
            data, stat = self.client.get(z.broker_id_path(broker_id))
        except NoNodeError:
            return None
        return z.BrokerRegistration.decode(broker_id, data), int(stat.czxid)

    def get_all_brokers(self) -> dict[int, tuple[z.BrokerRegistration, int]]:
        out = {}
        for broker_id in self.get_broker_ids():
            found = self.get_broker(broker_id)
            if found is not None:
                out[broker_id] = found
        return out

    def watch_broker_ids(self, func: Callable[[list[int]], Any]) -> ChildrenWatch:
        """Call ``func(sorted ids)`` now and whenever brokers register or vanish.

        ``func`` returning False stops the watch (kazoo's convention)."""
        def on_children(children: list[str]) -> Any:
            return func(sorted(int(c) for c in children if c.isdigit()))
        return ChildrenWatch(self.client, z.BROKER_IDS_PATH, on_children)

    # -- topics and configs --------------------------------------------------------------

    def create_topic(self, topic: str, assignment: z.TopicAssignment,
                     config: Mapping[str, str] | None = None) -> None:
        """Write ``/config/topics/<topic>`` and then ``/brokers/topics/<topic>``, as Kafka's
        ``AdminZkClient.createTopicWithAssignment`` does (the controller reacts to the latter).

        Raises:
            TopicExistsError: the topic's assignment znode exists.
        """
        assignment_path = z.topic_path(topic)
        payload = assignment.encode(assignment_path)
        if self.client.exists(assignment_path) is not None:
            raise TopicExistsError(f"Topic '{topic}' already exists.")
        self.set_entity_config("topics", topic, dict(config or {}), notify=False)
        try:
            self.client.create(assignment_path, payload, makepath=True)
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None

    def get_topics(self) -> list[str]:
        return sorted(self.client.get_children(z.TOPICS_PATH))

    def get_topic_assignment(self, topic: str) -> tuple[z.TopicAssignment, int] | None:
        """The assignment and its znode version, or None if the topic does not exist."""
        try:
            data, stat = self.client.get(z.topic_path(topic))
        except NoNodeError:
            return None
        return z.TopicAssignment.decode(topic, data), int(stat.version)

    def watch_topics(self, func: Callable[[list[str]], Any]) -> ChildrenWatch:
        return ChildrenWatch(self.client, z.TOPICS_PATH, lambda c: func(sorted(c)))

    def set_topic_assignment(self, topic: str, assignment: z.TopicAssignment,
                             expected_version: int, epoch_zk_version: int) -> Updated | BadVersion:
        """Controller write of a reassignment step, conditional and fenced."""
        path = z.topic_path(topic)
        return self._fenced_set(path, assignment.encode(path), expected_version, epoch_zk_version)

    def add_partitions(self, topic: str, assignment: z.TopicAssignment,
                       expected_version: int) -> Updated | BadVersion:
        """Admin (CreatePartitions): write the grown assignment if ``/brokers/topics/<t>`` is
        still at ``expected_version`` (the controller watches it and starts the new
        partitions)."""
        path = z.topic_path(topic)
        try:
            stat = self.client.set(path, assignment.encode(path), version=expected_version)
        except BadVersionError:
            return BadVersion(expected_version)
        except NoNodeError:
            raise ZkStoreError(f"topic {topic!r} does not exist") from None
        return Updated(int(stat.version))

    def watch_topic(self, topic: str,
                    func: Callable[[z.TopicAssignment | None], Any]) -> DataWatch:
        """Call ``func(assignment or None)`` now and whenever ``/brokers/topics/<t>`` changes
        (None once it is deleted); ``func`` returning False stops the watch."""
        def on_data(data: bytes | None, stat: Any) -> Any:
            return func(z.TopicAssignment.decode(topic, data) if stat is not None else None)
        return DataWatch(self.client, z.topic_path(topic), on_data)

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        path = z.config_entity_path(entity_type, name)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return {}
        return z.decode_entity_config(path, data)

    def set_entity_config(self, entity_type: str, name: str, config: Mapping[str, str],
                          notify: bool = True) -> None:
        """Write ``/config/<type>/<name>`` and (``notify``) a ``config_change_`` notice."""
        path = z.config_entity_path(entity_type, name)
        data = z.encode_entity_config(config)
        try:
            self.client.set(path, data)
        except NoNodeError:
            try:
                self.client.create(path, data, makepath=True)
            except NodeExistsError:  # another writer created it meanwhile: ours is last
                self.client.set(path, data)
        if notify:
            self.client.create(z.CONFIG_CHANGE_PREFIX,
                               z.encode_config_change(f"{entity_type}/{name}"), sequence=True)

    def update_entity_config(self, entity_type: str, name: str,
                             change: Callable[[dict[str, str]], None]) -> dict[str, str]:
        """Read ``/config/<type>/<name>``, apply ``change`` (in place) and write it back only
        if nobody wrote it meanwhile (else read again: a znode shared by several writers,
        such as a user's quotas and SCRAM credentials), then write a change notice.
        Returns the config as written."""
        path = z.config_entity_path(entity_type, name)
        while True:
            try:
                data, stat = self.client.get(path)
                config = z.decode_entity_config(path, data)
            except NoNodeError:
                config, stat = {}, None
            change(config)
            encoded = z.encode_entity_config(config)
            try:
                if stat is None:
                    self.client.create(path, encoded, makepath=True)
                else:
                    self.client.set(path, encoded, version=stat.version)
            except (BadVersionError, NodeExistsError):
                continue
            self.client.create(z.CONFIG_CHANGE_PREFIX,
                               z.encode_config_change(f"{entity_type}/{name}"), sequence=True)
            return config

    def get_quota_entity_config(self, entity_path: str) -> dict[str, str]:
        """``/config/<entity_path>`` of a quota entity (``clients/<c>``, ``users/<u>``,
        ``users/<u>/clients/<c>``; sanitized names); {} when absent."""
        kind, _, name = entity_path.partition("/")
        return self.get_entity_config(kind, name)

    def set_quota_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        """Write a quota entity's config and its change notice (``entity_path`` as in
        ``get_quota_entity_config``; the notice names the same path, as Kafka's)."""
        kind, _, name = entity_path.partition("/")
        self.set_entity_config(kind, name, config)

    def get_quota_entity_configs(self) -> dict[str, dict[str, str]]:
        """Every entity under ``/config/clients`` and ``/config/users`` (users' client
        children included): {entity path: config}. Unreadable znodes are skipped with a
        warning."""
        out: dict[str, dict[str, str]] = {}
        paths = [f"clients/{c}" for c in self._children(f"{z.CONFIG_PATH}/clients")]
        for user in self._children(f"{z.CONFIG_PATH}/users"):
            paths.append(f"users/{user}")
            paths += [f"users/{user}/clients/{c}"
                      for c in self._children(f"{z.CONFIG_PATH}/users/{user}/clients")]
        for path in paths:
            try:
                out[path] = self.get_quota_entity_config(path)
            except z.ZkDataError as exc:
                log.warning("ignoring quota entity: %s", exc)
        return out

    def get_group_configs(self) -> dict[str, dict[str, str]]:
        """Every ``/config/groups/<sanitized group>``: {sanitized group: config}. Unreadable
        znodes are skipped with a warning."""
        out: dict[str, dict[str, str]] = {}
        for name in self._children(f"{z.CONFIG_PATH}/groups"):
            try:
                out[name] = self.get_entity_config("groups", name)
            except z.ZkDataError as exc:
                log.warning("ignoring group config: %s", exc)
        return out

    def delete_entity_config(self, entity_type: str, name: str) -> bool:
        """Remove ``/config/<type>/<name>`` and write a change notice (every broker then
        reads it as gone). False when there was none."""
        path = z.config_entity_path(entity_type, name)
        try:
            self.client.delete(path)
        except NoNodeError:
            return False
        self.client.create(z.CONFIG_CHANGE_PREFIX,
                           z.encode_config_change(f"{entity_type}/{name}"), sequence=True)
        return True

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return []

    def get_config_changes(self) -> list[tuple[int, str, str | None, int]]:
        """The ``/config/changes`` notices, oldest first: (sequence number, znode name,
        entity path like ``topics/orders`` or None when unreadable, creation time ms)."""
        out = []
        prefix = z.CONFIG_CHANGE_PREFIX.rsplit("/", 1)[1]
        for name in self.client.get_children(z.CONFIG_CHANGES_PATH):
            if not name.startswith(prefix) or not name[len(prefix):].isdigit():
                continue
            path = f"{z.CONFIG_CHANGES_PATH}/{name}"
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                continue
            entity: str | None
            try:
                entity = z.decode_config_change(path, data)
            except z.ZkDataError as exc:
                log.warning("ignoring config change notice: %s", exc)
                entity = None
            out.append((int(name[len(prefix):]), name, entity, int(stat.ctime)))
        return sorted(out)

    def watch_config_changes(self, func: Callable[[list[str]], Any]) -> ChildrenWatch:
        return ChildrenWatch(self.client, z.CONFIG_CHANGES_PATH, func)

    def delete_config_changes(self, names: list[str]) -> None:
        """Remove expired notices (any broker may; one already gone is skipped)."""
        for name in names:
            try:
                self.client.delete(f"{z.CONFIG_CHANGES_PATH}/{name}")
            except NoNodeError:
                pass

    def request_topic_deletion(self, topic: str) -> None:
        """Create ``/admin/delete_topics/<topic>`` (idempotent) for the controller to act on."""
        if self.client.exists(z.topic_path(topic)) is None:
            raise ZkStoreError(f"topic {topic!r} does not exist (nothing to delete)")
        try:
            self.client.create(z.delete_topic_path(topic), b"", makepath=True)
        except NodeExistsError:
            pass

    def get_topic_deletions(self) -> list[str]:
        return sorted(self.client.get_children(z.DELETE_TOPICS_PATH))

    def complete_topic_deletion(self, topic: str, epoch_zk_version: int) -> None:
        """Controller: remove the topic's znodes, its config and the deletion request, in one
        multi fenced by the controller epoch (all or nothing).

        Raises:
            ControllerMovedError: a newer controller exists (nothing was deleted).
        """
        paths = self._subtree(z.topic_path(topic))
        for extra in (z.config_entity_path("topics", topic), z.delete_topic_path(topic)):
            if self.client.exists(extra) is not None:
                paths.append(extra)
        txn = self.client.transaction()
        txn.check(z.CONTROLLER_EPOCH_PATH, epoch_zk_version)
        for path in paths:
            txn.delete(path)
        failed = _first_error(txn.commit())
        if failed is None:
            return
        index, exc = failed
        if index == 0:
            raise ControllerMovedError(self._moved_message(epoch_zk_version))
        raise ZkStoreError(f"deleting topic {topic!r} raced with another writer ({exc!r}); "
                           "retry") from exc

    def _subtree(self, root: str) -> list[str]:
        """``root`` and its descendants, children before parents (the order deletes need)."""
        out: list[str] = []
        try:
            children = self.client.get_children(root)
        except NoNodeError:
            return out
        for child in children:
            out.extend(self._subtree(f"{root}/{child}"))
        out.append(root)
        return out

    # -- partition state -----------------------------------------------------------------

    def create_partition_state(self, topic: str, partition: int, state: z.PartitionState,
                               epoch_zk_version: int) -> Updated | BadVersion:
        """Controller: create a new partition's state znode (zkVersion 0), fenced.

        Returns ``BadVersion(-1)`` when the state already exists (read it instead)."""
        path = z.partition_state_path(topic, partition)
        self.client.ensure_path(z.partition_path(topic, partition))
        txn = self.client.transaction()
        txn.check(z.CONTROLLER_EPOCH_PATH, epoch_zk_version)
        txn.create(path, state.encode())
        failed = _first_error(txn.commit())
        if failed is None:
            return Updated(0)
        index, exc = failed
        if index == 0:
            raise ControllerMovedError(self._moved_message(epoch_zk_version))
        if isinstance(exc, NodeExistsError):
            return BadVersion(-1)
        raise exc

    def get_partition_state(self, topic: str, partition: int) -> tuple[z.PartitionState, int] | None:
        """The partition's state and zkVersion (partition epoch), or None if absent."""
        try:
            data, stat = self.client.get(z.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return z.PartitionState.decode(topic, partition, data), int(stat.version)

    def update_partition_state(self, topic: str, partition: int, state: z.PartitionState,
                               expected_zk_version: int,
                               epoch_zk_version: int | None = None) -> Updated | BadVersion:
        """Write the state if its znode is still at ``expected_zk_version``.

        Args:
            epoch_zk_version: the controller's fencing token; None for a partition leader's
                own ISR write (Kafka's ZK-mode ISR update is not epoch-checked).

        Raises:
            ControllerMovedError: the controller epoch moved (nothing was written).
            ZkStoreError: the state znode does not exist.
        """
        path = z.partition_state_path(topic, partition)
        if epoch_zk_version is None:
            try:
                stat = self.client.set(path, state.encode(), version=expected_zk_version)
            except BadVersionError:
                return BadVersion(expected_zk_version)
            except NoNodeError:
                raise ZkStoreError(f"{path} does not exist: create the partition first") from None
            return Updated(int(stat.version))
        return self._fenced_set(path, state.encode(), expected_zk_version, epoch_zk_version)

    def notify_isr_change(self, partitions: list[tuple[str, int]]) -> str:
        """A leader's notice that these partitions' ISR changed (the controller reloads them
        and sends UpdateMetadata); returns the sequential znode's path."""
        return str(self.client.create(z.ISR_CHANGE_PREFIX, z.encode_isr_change(partitions),
                                      sequence=True))

    def get_isr_change_notifications(self) -> list[tuple[str, list[tuple[str, int]]]]:
        """Pending ISR change notices, oldest first: (znode name, partitions)."""
        out = []
        for name in sorted(self.client.get_children(z.ISR_CHANGE_NOTIFICATION_PATH)):
            path = f"{z.ISR_CHANGE_NOTIFICATION_PATH}/{name}"
            try:
                data, _ = self.client.get(path)
            except NoNodeError:
                continue
            out.append((name, z.decode_isr_change(path, data)))
        return out

    def delete_isr_change_notifications(self, names: list[str], epoch_zk_version: int) -> None:
        """Controller: drop processed notices in one fenced multi (notices already gone are
        skipped)."""
        paths = [f"{z.ISR_CHANGE_NOTIFICATION_PATH}/{name}" for name in names]
        for _ in range(3):
            paths = [p for p in paths if self.client.exists(p) is not None]
            txn = self.client.transaction()
            txn.check(z.CONTROLLER_EPOCH_PATH, epoch_zk_version)
            for path in paths:
                txn.delete(path)
            failed = _first_error(txn.commit())
            if failed is None:
                return
            if failed[0] == 0:
                raise ControllerMovedError(self._moved_message(epoch_zk_version))
            if not isinstance(failed[1], NoNodeError):
                raise failed[1]
        raise ZkStoreError("ISR change notices kept vanishing while being deleted; retry")

    def _fenced_set(self, path: str, data: bytes, expected_version: int,
                    epoch_zk_version: int) -> Updated | BadVersion:
        txn = self.client.transaction()
        txn.check(z.CONTROLLER_EPOCH_PATH, epoch_zk_version)
        txn.set_data(path, data, expected_version)
        results = txn.commit()
        failed = _first_error(results)
        if failed is None:
            return Updated(int(results[1].version))
        index, exc = failed
        if index == 0:
            raise ControllerMovedError(self._moved_message(epoch_zk_version))
        if isinstance(exc, BadVersionError):
            return BadVersion(expected_version)
        if isinstance(exc, NoNodeError):
            raise ZkStoreError(f"{path} does not exist: create it first") from None
        raise exc

    # -- controller ----------------------------------------------------------------------

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(controller epoch, its zkVersion), or None before the first election."""
        try:
            data, stat = self.client.get(z.CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return None
        return z.decode_controller_epoch(data), int(stat.version)

    def get_controller(self) -> z.ControllerRegistration | None:
        try:
            data, _ = self.client.get(z.CONTROLLER_PATH)
        except NoNodeError:
            return None
        return z.ControllerRegistration.decode(data)

    def watch_controller(
            self, func: Callable[[z.ControllerRegistration | None], Any]) -> DataWatch:
        """Call ``func(registration or None)`` now and on every change of ``/controller``."""
        def on_data(data: bytes | None, stat: Any) -> Any:
            return func(z.ControllerRegistration.decode(data) if stat is not None else None)
        return DataWatch(self.client, z.CONTROLLER_PATH, on_data)

    def _ensure_controller_epoch(self) -> tuple[int, int]:
        try:
            self.client.create(z.CONTROLLER_EPOCH_PATH,
                               z.encode_controller_epoch(INITIAL_CONTROLLER_EPOCH))
            return INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            found = self.get_controller_epoch()
            assert found is not None
            return found

    def elect_controller(self, broker_id: int) -> ControllerElection:
        """One attempt to become the controller (see the module docstring)."""
        found = self.get_controller_epoch()
        epoch, epoch_version = found if found is not None else self._ensure_controller_epoch()
        new_epoch = epoch + 1
        registration = z.ControllerRegistration(broker_id, self.clock.time_ms())
        txn = self.client.transaction()
        txn.create(z.CONTROLLER_PATH, registration.encode(), ephemeral=True)
        txn.set_data(z.CONTROLLER_EPOCH_PATH, z.encode_controller_epoch(new_epoch), epoch_version)
        results = txn.commit()
        if _first_error(results) is None:
            log.info("broker %d is the controller, epoch %d", broker_id, new_epoch)
            return ControllerElection(True, broker_id, new_epoch, int(results[1].version))
        # Lost, unless /controller is ours from an earlier attempt whose answer was lost
        # (Kafka's checkControllerAndEpoch).
        current = self.get_controller()
        now = self.get_controller_epoch()
        if current is not None and current.broker_id == broker_id and now is not None \
                and now[0] == new_epoch and self._owns(z.CONTROLLER_PATH):
            return ControllerElection(True, broker_id, new_epoch, now[1])
        return ControllerElection(False, current.broker_id if current else -1,
                                  now[0] if now else epoch, now[1] if now else epoch_version)

    def _owns(self, path: str) -> bool:
        stat = self.client.exists(path)
        return stat is not None and stat.ephemeralOwner == self.session_id

    def resign_controller(self, epoch_zk_version: int) -> bool:
        """Delete ``/controller`` if this controller's epoch still holds (fenced)."""
        txn = self.client.transaction()
        txn.check(z.CONTROLLER_EPOCH_PATH, epoch_zk_version)
        txn.delete(z.CONTROLLER_PATH)
        return _first_error(txn.commit()) is None

    def _check_epoch(self, epoch_zk_version: int) -> None:
        stat = self.client.exists(z.CONTROLLER_EPOCH_PATH)
        if stat is None or stat.version != epoch_zk_version:
            raise ControllerMovedError(self._moved_message(epoch_zk_version))

    @staticmethod
    def _moved_message(epoch_zk_version: int) -> str:
        return (f"{z.CONTROLLER_EPOCH_PATH} is no longer at version {epoch_zk_version}: a newer "
                "controller was elected; resign and reload state")

    # -- producer ids and cluster id -----------------------------------------------------

    def claim_producer_id_block(self, broker_id: int, max_attempts: int = 1000) -> z.ProducerIdBlock:
        """Claim the next block of 1000 producer ids for ``broker_id`` (cluster-unique).

        Raises:
            ZkStoreError: ``max_attempts`` conditional writes in a row lost to other brokers.
        """
        self.client.ensure_path(z.PRODUCER_ID_BLOCK_PATH)
        for _ in range(max_attempts):
            data, stat = self.client.get(z.PRODUCER_ID_BLOCK_PATH)
            previous = z.ProducerIdBlock.decode(data) if data else None
            block = z.ProducerIdBlock.next_after(previous, broker_id)
            try:
                self.client.set(z.PRODUCER_ID_BLOCK_PATH, block.encode(), version=stat.version)
            except BadVersionError:
                continue
            return block
        raise ZkStoreError(f"could not claim a producer id block in {max_attempts} attempts "
                           "(heavy contention on /latest_producer_id_block); retry")

    def create_or_get_cluster_id(self, proposed: str) -> str:
        """Create ``/cluster/id`` with ``proposed`` unless it exists; return the cluster's id."""
        try:
            self.client.create(z.CLUSTER_ID_PATH, z.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            found = self.get_cluster_id()
            assert found is not None
            return found

    def get_cluster_id(self) -> str | None:
        try:
            data, _ = self.client.get(z.CLUSTER_ID_PATH)
        except NoNodeError:
            return None
        return z.decode_cluster_id(data)

    def delete_all(self, path: str) -> None:
        """Remove a subtree (tests and ``pylog cluster`` clean-up)."""
        try:
            self.client.delete(path, recursive=True)
        except (NoNodeError, NotEmptyError):
            pass

    # -- versioned nodes (the ACL store, pylog.security.authz.store) -------------------------

    def children(self, path: str) -> list[str]:
        """The sorted children of ``path`` ([] when it does not exist)."""
        return self._children(path)

    def get_versioned(self, path: str) -> tuple[bytes, int, int] | None:
        """(data, version, creation time in ms) of ``path``, or None when it does not exist."""
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return None
        return data or b"", stat.version, stat.ctime

    def write_versioned(self, path: str, data: bytes | None, version: int) -> bool:
        """Write ``path`` only if it is still at ``version`` (-1: only if absent); ``data``
        None deletes it. False when another writer came first (re-read and retry)."""
        try:
            if data is None:
                self.client.delete(path, version=version)
            elif version < 0:
                self.client.create(path, data, makepath=True)
            else:
                self.client.set(path, data, version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False
        return True

    def create_sequential(self, prefix: str, data: bytes) -> str:
        """A persistent sequential node ``<prefix><10 digits>`` (a change notice)."""
        return str(self.client.create(prefix, data, sequence=True, makepath=True))

    def delete_if_exists(self, path: str) -> None:
        try:
            self.client.delete(path)
        except NoNodeError:
            pass
