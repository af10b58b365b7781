"""The blocking admin client: ``pylog.client.Admin``.

Thin calls over Kafka's admin APIs, run on a private event loop thread (the asyncio core
is ``pylog.client.aio.admin``). Each call raises the ``pylog.errors`` class of the first
error code the broker returned (``TopicAlreadyExistsError``, ``InvalidPartitionsError``,
``UnknownTopicOrPartitionError`` ...), naming the topic or resource.

Example::

    from pylog.client import Admin, NewTopic, ConfigResource, QuotaFilter

    with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        admin.create_topics([NewTopic("events", num_partitions=3,
                                      config={"retention.ms": "86400000"})])
        admin.create_partitions({"events": 6})
        admin.alter_configs(ConfigResource("topic", "events"), {"cleanup.policy": "compact"})
        print(admin.describe_configs([ConfigResource("topic", "events")]))
        print(admin.list_offsets({("events", 0): "latest"}))
        admin.delete_records({("events", 0): 100})
        print(admin.describe_cluster())
        print(admin.list_groups(states=["Stable"]))
        print(admin.describe_groups(["billing"])["billing"].members)
        print(admin.list_group_offsets("billing"))
        admin.alter_group_offsets("billing", {("events", 0): 0})  # group must be empty
        admin.delete_groups(["billing"])
        admin.delete_topics(["events"])
        # Cluster mode (the controller answers):
        admin.elect_leaders("preferred", [("events", 0)])
        admin.alter_partition_reassignments({("events", 0): [1, 2, 3]})
        print(admin.list_partition_reassignments())
        # Client quotas (KIP-546):
        admin.alter_client_quotas({"client-id": "loader"}, {"producer_byte_rate": 1048576})
        print(admin.describe_client_quotas([QuotaFilter.of_type("client-id")]))
        # ACLs (a broker with authorizer.class.name set; the admin needs ALTER / DESCRIBE
        # on the cluster):
        from pylog.client import AclBinding, AclBindingFilter, AccessControlEntry, \
            AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
        admin.create_acls([AclBinding(
            ResourcePattern(ResourceType.TOPIC, "events", PatternType.LITERAL),
            AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))])
        print(admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "events", PatternType.MATCH)))
        admin.delete_acls([AclBindingFilter(principal="User:alice")])

Thread-safety: calls may come from any thread (each runs on the client's loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from pylog.client._loop import LoopThread
from pylog.client.aio.admin import (
    Admin as _AioAdmin,
)
from pylog.client.aio.admin import (
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    GroupDescription,
    GroupListing,
    NewTopic,
    OffsetAndMetadata,
    PartitionReassignment,
    QuotaEntity,
    QuotaFilter,
    TopicDescription,
)
from pylog.client.records import TopicPartition
from pylog.errors import ApiError
from pylog.security.authz.bindings import AclBinding, AclBindingFilter

__all__ = ["Admin"]


class Admin:
    """Kafka admin client (blocking facade).

    Args:
        config: Kafka's dotted names (``{"bootstrap.servers": ...}``).
        **kwargs: the same names with underscores.

    Raises:
        ConfigError: an unknown or mistyped setting.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._thread = LoopThread("pylog-admin-io")
        try:
            self._aio: _AioAdmin = self._thread.run(self._make(config, kwargs))
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False

    @staticmethod
    async def _make(config: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> _AioAdmin:
        admin = _AioAdmin(config, **kwargs)
        try:
            await admin.__aenter__()  # embedded mode: the directory in use fails here
        except BaseException:
            await admin.close()
            raise
        return admin

    def _run(self, coro: Any) -> Any:
        return self._thread.run(coro)

    def create_topics(self, topics: Iterable[NewTopic | str], validate_only: bool = False) -> None:
        """Create topics (``NewTopic`` or a name for broker defaults).

        Raises:
            TopicAlreadyExistsError, InvalidPartitionsError, InvalidReplicationFactorError,
            InvalidConfigError, InvalidTopicError ...: the first topic that failed.
        """
        self._run(self._aio.create_topics(topics, validate_only))

    def delete_topics(self, names: Iterable[str]) -> None:
        """Delete topics. Raises ``UnknownTopicOrPartitionError`` for a missing one."""
        self._run(self._aio.delete_topics(names))

    def create_partitions(self, counts: Mapping[str, int], validate_only: bool = False) -> None:
        """Grow topics to ``{topic: new_total_partition_count}``.

        Raises:
            InvalidPartitionsError: a count not larger than the current one.
        """
        self._run(self._aio.create_partitions(counts, validate_only))

    def describe_configs(self, resources: Iterable[Any]
                         ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Every config of each resource (``ConfigResource("topic", name)`` or
        ``("broker", "0")``) with its value and source."""
        return self._run(self._aio.describe_configs(resources))  # type: ignore[no-any-return]

    def alter_configs(self, resource: Any, changes: Mapping[str, str | None],
                      validate_only: bool = False) -> None:
        """Set (value) or delete (None) configs of one resource (IncrementalAlterConfigs)."""
        self._run(self._aio.alter_configs(resource, changes, validate_only))

    def list_offsets(self, specs: Mapping[Any, Any], isolation_level: str = "read_uncommitted"
                     ) -> dict[TopicPartition, tuple[int, int]]:
        """``{tp: (offset, timestamp)}`` for ``{tp: "earliest" | "latest" | timestamp_ms}``;
        offset -1 when no record is at or after the timestamp."""
        return self._run(self._aio.list_offsets(specs, isolation_level))  # type: ignore[no-any-return]

    def delete_records(self, before: Mapping[Any, int]) -> dict[TopicPartition, int]:
        """Delete records below ``{tp: offset}`` (-1: the high watermark); returns each
        partition's new low watermark (log start offset)."""
        return self._run(self._aio.delete_records(before))  # type: ignore[no-any-return]

    def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller id and brokers."""
        return self._run(self._aio.describe_cluster())  # type: ignore[no-any-return]

    def describe_log_dirs(self, brokers: Iterable[int] | None = None) -> list[Any]:
        """Each broker's log directories (``LogDirDescription``: path, partition sizes on
        disk, the file system's total and usable bytes); all brokers when None."""
        return self._run(self._aio.describe_log_dirs(brokers))  # type: ignore[no-any-return]

    def api_versions(self, node_id: int | None = None) -> dict[int, tuple[int, int]]:
        """``{api_key: (min_version, max_version)}`` a broker (``node_id``, else any) serves."""
        return self._run(self._aio.api_versions(node_id))  # type: ignore[no-any-return]

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of topics (all topics if None)."""
        return self._run(self._aio.describe_topics(names))  # type: ignore[no-any-return]

    def list_topics(self) -> list[str]:
        """Names of the non-internal topics."""
        return self._run(self._aio.list_topics())  # type: ignore[no-any-return]

    def list_groups(self, states: Iterable[str] | None = None,
                    types: Iterable[str] | None = None) -> list[GroupListing]:
        """Groups of every broker, sorted by id; ``states`` (e.g. ``["Stable", "Empty"]``,
        case-insensitive) keeps the groups in those states, ``types`` (``["consumer"]``:
        KIP-848 groups, ``["classic"]``) those of these types.

        Raises:
            ValueError: a state or type Kafka does not have.
        """
        return self._run(self._aio.list_groups(states, types))  # type: ignore[no-any-return]

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """State, protocol type, protocol (the assignor) and members of groups, each member
        with its decoded assignment. An unknown group comes back with state ``"Dead"``."""
        return self._run(self._aio.describe_groups(group_ids))  # type: ignore[no-any-return]

    def list_group_offsets(self, group_id: str, partitions: Iterable[Any] | None = None
                           ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """A group's committed offsets: all of them, or those of ``partitions`` (None for a
        partition without a commit)."""
        return self._run(self._aio.list_group_offsets(group_id, partitions))  # type: ignore[no-any-return]

    def alter_group_offsets(self, group_id: str, offsets: Mapping[Any, Any]) -> None:
        """Set a group's committed offsets: ``{tp: offset}`` or ``{tp: (offset, metadata)}``.
        Only for a group without members (or a new group, which this creates).

        Raises:
            NonEmptyGroupError: the group has members: stop its consumers first.
            UnknownTopicOrPartitionError: a partition that does not exist.
        """
        self._run(self._aio.alter_group_offsets(group_id, offsets))

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ApiError | None]:
        """Delete groups and their committed offsets. Returns ``{group: None}`` for each
        group deleted, else the error (``NonEmptyGroupError``: it has members;
        ``GroupIdNotFoundError``: no such group); nothing is raised for these."""
        return self._run(self._aio.delete_groups(group_ids))  # type: ignore[no-any-return]

    def delete_group_offsets(self, group_id: str, partitions: Iterable[Any]
                             ) -> dict[TopicPartition, ApiError | None]:
        """Delete a group's committed offsets of ``partitions``. Returns ``{tp: None}`` where
        deleted, else the error (``GroupSubscribedToTopicError``: a member consumes it).

        Raises:
            GroupIdNotFoundError: no such group.
        """
        return self._run(self._aio.delete_group_offsets(group_id, partitions))  # type: ignore[no-any-return]

    def list_share_group_offsets(self, group_id: str, partitions: Iterable[Any] | None = None
                                 ) -> dict[TopicPartition, Any]:
        """A share group's start offsets (``SharePartitionOffsetInfo``: start_offset,
        leader_epoch, lag): every partition it has state for, or those of ``partitions``
        (None for a partition without state).

        Raises:
            GroupIdNotFoundError: not a share group.
        """
        return self._run(self._aio.list_share_group_offsets(group_id, partitions))  # type: ignore[no-any-return]

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[Any, int]) -> None:
        """Set a share group's start offsets ``{tp: offset}``: it delivers from there on.
        Only for a share group without members.

        Raises:
            GroupIdNotFoundError: not a share group.
            NonEmptyGroupError: the group has members: stop its consumers first.
            UnknownTopicOrPartitionError: a partition that does not exist.
        """
        self._run(self._aio.alter_share_group_offsets(group_id, offsets))

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]
                                   ) -> dict[str, ApiError | None]:
        """Delete a share group's state of whole topics. Returns ``{topic: None}`` where
        deleted, else the error (``UnknownTopicOrPartitionError``: no such topic or no state).

        Raises:
            GroupIdNotFoundError: not a share group.
            NonEmptyGroupError: the group has members.
        """
        return self._run(self._aio.delete_share_group_offsets(group_id, topics))  # type: ignore[no-any-return]

    def elect_leaders(self, election_type: str = "preferred",
                      partitions: Iterable[Any] | None = None
                      ) -> dict[TopicPartition, ApiError | None]:
        """ElectLeaders at the controller (cluster mode): ``"preferred"`` moves each
        partition's leadership to its preferred replica, ``"unclean"`` elects a leader for
        partitions without one (outside the ISR if needed). ``partitions`` None = all (then
        only partitions that needed an election are listed). Returns ``{partition: None}``
        where elected, the error otherwise (ElectionNotNeededError,
        PreferredLeaderNotAvailableError, EligibleLeadersNotAvailableError ...)."""
        return self._run(self._aio.elect_leaders(election_type, partitions))  # type: ignore[no-any-return]

    def alter_partition_reassignments(self, targets: Mapping[Any, Any]
                                      ) -> dict[TopicPartition, ApiError | None]:
        """Move partitions to new replica lists (``{("t", 0): [1, 2, 3]}``; None cancels an
        ongoing move). Returns ``{partition: None}`` where started, else the error
        (InvalidReplicaAssignmentError, NoReassignmentInProgressError ...)."""
        return self._run(self._aio.alter_partition_reassignments(targets))  # type: ignore[no-any-return]

    def list_partition_reassignments(self, partitions: Iterable[Any] | None = None
                                     ) -> dict[TopicPartition, PartitionReassignment]:
        """The ongoing reassignments (of ``partitions``, or all)."""
        return self._run(self._aio.list_partition_reassignments(partitions))  # type: ignore[no-any-return]

    def describe_client_quotas(self, filters: Iterable[QuotaFilter] = (), strict: bool = False
                               ) -> dict[QuotaEntity, dict[str, float]]:
        """Client quotas (KIP-546): ``{entity: {key: value}}`` of the entities matching
        every filter component (``QuotaFilter.of_entity("client-id", "c1")``,
        ``.of_default("user")``, ``.of_type("client-id")``; none: all). An entity is sorted
        ``(type, name)`` pairs, name None for the default: ``(("client-id", "c1"),)``.
        ``strict``: only entities with no entity type beyond the filter's."""
        return self._run(self._aio.describe_client_quotas(filters, strict))  # type: ignore[no-any-return]

    def alter_client_quotas(self, entity: Mapping[str, str | None],
                            changes: Mapping[str, float | None], validate_only: bool = False) -> None:
        """Set (a number) or remove (None) the quotas of one entity, e.g.
        ``alter_client_quotas({"client-id": "c1"}, {"producer_byte_rate": 1048576})``;
        ``{"user": None}`` is the default user. Keys: ``producer_byte_rate``,
        ``consumer_byte_rate`` (bytes/s), ``request_percentage``.

        Raises:
            InvalidRequestError: an unknown key, a value not above 0, a fractional byte rate.
        """
        self._run(self._aio.alter_client_quotas(entity, changes, validate_only))

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                        ) -> dict[str, dict[str, int]]:
        """SCRAM credentials (KIP-554): ``{user: {mechanism: iterations}}`` of ``users`` (None:
        every user with one). Salts and keys are never shown.

        Raises:
            ResourceNotFoundError: a named user has no SCRAM credential.
        """
        return self._run(self._aio.describe_user_scram_credentials(users))  # type: ignore[no-any-return]

    def alter_user_scram_credentials(self, upsertions: Mapping[str, Mapping[str, Any]] | None = None,
                                     deletions: Mapping[str, list[str]] | None = None) -> None:
        """Set SCRAM credentials, ``{"alice": {"SCRAM-SHA-256": ("secret", 8192)}}`` (or just
        the password: 4096 iterations), and delete some, ``{"bob": ["SCRAM-SHA-512"]}``. The
        password is salted here; the broker stores keys only.

        Raises:
            UnacceptableCredentialError: iterations outside 4096-16384, an empty user.
            ResourceNotFoundError: deleting a credential that does not exist.
        """
        self._run(self._aio.alter_user_scram_credentials(upsertions, deletions))
    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Store ACL bindings (CreateAcls).

        Raises:
            InvalidRequestError: a binding that cannot be stored (the first one).
            SecurityDisabledError: the broker has no authorizer.
            ClusterAuthorizationFailedError: no ALTER on the cluster.
        """
        self._run(self._aio.create_acls(bindings))

    def describe_acls(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        """The bindings ``flt`` matches (default: every binding); pattern type MATCH
        selects every pattern that applies to the named resource (DescribeAcls)."""
        return self._run(self._aio.describe_acls(flt))  # type: ignore[no-any-return]

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        """Remove every binding any filter matches; returns them (DeleteAcls)."""
        return self._run(self._aio.delete_acls(filters))  # type: ignore[no-any-return]

    def close(self, timeout: float | None = None) -> None:
        """Close the connections and stop the I/O thread. Idempotent.

        ``timeout`` bounds the close, as Kafka's ``Admin.close(Duration)``: what is still
        running then is abandoned, the connections are aborted and the I/O thread is
        stopped (``pylog.client._loop``); None waits for the close (each of its steps is
        bounded)."""
        if self._closed:
            return
        self._closed = True
        try:
            fut = asyncio.run_coroutine_threadsafe(self._aio.close(), self._thread.loop)
            self._thread.finish_close(fut, timeout, self._aio._core.cluster.abort)
        finally:
            self._thread.stop()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
