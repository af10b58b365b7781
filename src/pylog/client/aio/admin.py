"""The asyncio admin client (``pylog.client.aio.Admin``): thin calls over Kafka's admin APIs.

Topic creation, deletion and partition growth go to the controller (from Metadata);
configs of a topic to any broker, of a broker to that broker; offsets and record deletion
to each partition's leader; group calls to the group's coordinator (``_group_admin``).
Every call raises the ``pylog.errors`` class of the first error code the broker returned,
with the topic or resource named in the message, except ``delete_groups`` and
``delete_group_offsets``, which answer per group / partition (some may succeed).

In embedded mode (``log.dir``) the same requests go to the broker run in this process
(``_embedded``): topics, configs, offsets and record deletion behave as on a broker.

Event-loop affinity: an asyncio ``Admin`` belongs to the loop it is used on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from pylog import errors
from pylog.client.aio import _acl_admin, _quota_admin, _replica_admin, _share_offsets_admin
from pylog.client.aio._cluster import make_cluster
from pylog.client.aio._group_admin import (
    GroupAdmin,
    GroupDescription,
    GroupListing,
    MemberDescription,
)
from pylog.client.aio._offsets import EARLIEST, LATEST, list_offsets
from pylog.client.aio._quota_admin import QuotaEntity, QuotaFilter
from pylog.client.aio._replica_admin import PartitionReassignment
from pylog.client.aio.consumer import as_partitions
from pylog.client.config import ADMIN, Resolved, resolve
from pylog.client.records import OffsetAndMetadata, TopicPartition
from pylog.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from pylog.security.authz.bindings import AclBinding, AclBindingFilter

__all__ = ["Admin", "NewTopic", "ConfigResource", "ConfigEntry", "BrokerDescription",
           "ClusterDescription", "LogDirDescription", "TopicDescription", "PartitionDescription", "AdminCore",
           "GroupListing", "GroupDescription", "MemberDescription", "OffsetAndMetadata",
           "QuotaEntity", "QuotaFilter"]

_ids = itertools.count(1)

RESOURCE_TYPES = {"topic": 2, "broker": 4, "group": 32}
CONFIG_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                  5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                  7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


class NewTopic(NamedTuple):
    """A topic to create; -1 means the broker's default (``num.partitions``,
    ``default.replication.factor``)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] | None = None


class ConfigResource(NamedTuple):
    """``ConfigResource("topic", "events")`` or ``ConfigResource("broker", "0")``."""

    type: str
    name: str


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    source: str
    read_only: bool
    is_sensitive: bool


class BrokerDescription(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerDescription]


class LogDirDescription(NamedTuple):
    """One log directory of one broker (DescribeLogDirs): its hosted partitions' sizes on
    disk in bytes, and its file system's total and usable bytes (-1 when not reported)."""

    broker: int
    path: str
    error: errors.ApiError | None
    total_bytes: int
    usable_bytes: int
    sizes: dict[TopicPartition, int]


class PartitionDescription(NamedTuple):
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


class TopicDescription(NamedTuple):
    name: str
    topic_id: Any
    is_internal: bool
    partitions: list[PartitionDescription]


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        cls = errors.error_for_code(code) or errors.UnknownServerError
        raise cls(f"{what}: {cls.name}" + (f": {message}" if message else ""))


def _resource(r: Any) -> ConfigResource:
    if isinstance(r, tuple) and len(r) == 2:
        r = ConfigResource(str(r[0]).lower(), str(r[1]))
    if not isinstance(r, ConfigResource) or r.type not in RESOURCE_TYPES:
        raise ValueError(f"expected ConfigResource('topic'|'broker', name), got {r!r}")
    return r


class AdminCore:
    """Admin requests over a ``Cluster``. Built and used on one loop."""

    def __init__(self, settings: Resolved) -> None:
        self.settings = settings
        self.cluster = make_cluster(settings, settings["client.id"] or f"pylog-admin-{next(_ids)}")
        self.timeout = settings["default.api.timeout.ms"] / 1000
        self.timeout_ms = int(settings["request.timeout.ms"])
        self.groups = GroupAdmin(self.cluster, self.timeout)

    async def _controller(self) -> Any:
        if self.cluster.controller_id < 0 or self.cluster.needs_update():
            await self.cluster.update()
        if self.cluster.controller_id >= 0 and self.cluster.controller_id in self.cluster.brokers:
            return await self.cluster.connection(self.cluster.controller_id)
        return await self.cluster.any_connection()

    async def create_topics(self, topics: list[NewTopic], validate_only: bool) -> None:
        R = CreateTopicsRequest
        req = R(topics=[R.CreatableTopic(
            name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
            assignments=[], configs=[R.CreatableTopicConfig(name=k, value=str(v))
                                     for k, v in (t.config or {}).items()]) for t in topics],
            timeout_ms=self.timeout_ms, validate_only=validate_only)
        resp = await (await self._controller()).send(req)
        for r in resp.topics:
            _check(r.error_code, f"create topic {r.name!r}", r.error_message)
        self.cluster.request_update()

    async def delete_topics(self, names: list[str]) -> None:
        conn = await self._controller()
        R = DeleteTopicsRequest
        version = conn.version_for(R)
        req = R(timeout_ms=self.timeout_ms)
        if version >= 6:
            req.topics = [R.DeleteTopicState(name=n) for n in names]
        else:
            req.topic_names = list(names)
        resp = await conn.send(req, version)
        for r in resp.responses:
            _check(r.error_code, f"delete topic {r.name!r}", r.error_message)
        self.cluster.request_update()

    async def create_partitions(self, counts: Mapping[str, int], validate_only: bool) -> None:
        R = CreatePartitionsRequest
        req = R(topics=[R.CreatePartitionsTopic(name=t, count=int(n), assignments=None)
                        for t, n in counts.items()],
                timeout_ms=self.timeout_ms, validate_only=validate_only)
        resp = await (await self._controller()).send(req)
        for r in resp.results:
            _check(r.error_code, f"create partitions of {r.name!r}", r.error_message)
        self.cluster.request_update()

    async def _conn_for(self, res: ConfigResource) -> Any:
        if res.type == "broker" and res.name:
            if not self.cluster.brokers:
                await self.cluster.update()
            node = int(res.name)
            if node in self.cluster.brokers:
                return await self.cluster.connection(node)
        return await self.cluster.any_connection()

    async def describe_configs(self, resources: list[ConfigResource]
                               ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        R = DescribeConfigsRequest
        for res in resources:
            conn = await self._conn_for(res)
            req = R(resources=[R.DescribeConfigsResource(
                resource_type=RESOURCE_TYPES[res.type], resource_name=res.name,
                configuration_keys=None)], include_synonyms=False, include_documentation=False)
            resp = await conn.send(req)
            for r in resp.results:
                _check(r.error_code, f"describe configs of {res.type} {res.name!r}",
                       r.error_message)
                out[res] = {c.name: ConfigEntry(c.name, c.value,
                                                CONFIG_SOURCES.get(c.config_source, "UNKNOWN"),
                                                c.read_only, c.is_sensitive)
                            for c in r.configs}
        return out

    async def alter_configs(self, resource: ConfigResource, changes: Mapping[str, str | None],
                            validate_only: bool) -> None:
        R = IncrementalAlterConfigsRequest
        conn = await self._conn_for(resource)
        req = R(resources=[R.AlterConfigsResource(
            resource_type=RESOURCE_TYPES[resource.type], resource_name=resource.name,
            configs=[R.AlterableConfig(name=k, config_operation=0 if v is not None else 1,
                                       value=None if v is None else str(v))
                     for k, v in changes.items()])], validate_only=validate_only)
        resp = await conn.send(req)
        for r in resp.responses:
            _check(r.error_code, f"alter configs of {resource.type} {resource.name!r}",
                   r.error_message)

    async def list_offsets(self, specs: Mapping[Any, Any], isolation_level: int
                           ) -> dict[TopicPartition, tuple[int, int]]:
        wanted: dict[TopicPartition, int] = {}
        for k, spec in specs.items():
            (tp,) = as_partitions([k])
            if spec == "earliest":
                wanted[tp] = EARLIEST
            elif spec == "latest":
                wanted[tp] = LATEST
            elif isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
                wanted[tp] = spec
            else:
                raise ValueError(f"{tp}: expected 'earliest', 'latest' or a timestamp in ms, "
                                 f"got {spec!r}")
        return await list_offsets(self.cluster, wanted, isolation_level=isolation_level,
                                  timeout=self.timeout, backoff=self.cluster.retry_backoff)

    async def delete_records(self, before: Mapping[Any, int]) -> dict[TopicPartition, int]:
        wanted = {as_partitions([k])[0]: int(v) for k, v in before.items()}
        await self.cluster.update({tp.topic for tp in wanted})
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            info = self.cluster.topic(tp.topic)
            p = info.partitions.get(tp.partition) if info is not None else None
            if p is None:
                raise errors.UnknownTopicOrPartitionError(
                    f"{tp.topic}-{tp.partition}: UNKNOWN_TOPIC_OR_PARTITION")
            by_leader.setdefault(p.leader, []).append(tp)
        out: dict[TopicPartition, int] = {}
        R = DeleteRecordsRequest
        for node, tps in by_leader.items():
            conn = await self.cluster.connection(node)
            topics: dict[str, list[Any]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(
                    R.DeleteRecordsPartition(partition_index=tp.partition, offset=wanted[tp]))
            resp = await conn.send(R(topics=[R.DeleteRecordsTopic(name=t, partitions=ps)
                                             for t, ps in topics.items()],
                                     timeout_ms=self.timeout_ms))
            for t in resp.topics:
                for p in t.partitions:
                    _check(p.error_code, f"delete records of {t.name}-{p.partition_index}")
                    out[TopicPartition(t.name, p.partition_index)] = p.low_watermark
        return out

    async def describe_cluster(self) -> ClusterDescription:
        conn = await self.cluster.any_connection()
        if 60 in conn.versions:
            resp = await conn.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
            _check(resp.error_code, "describe cluster", resp.error_message)
            brokers = [BrokerDescription(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers]
            return ClusterDescription(resp.cluster_id, resp.controller_id, brokers)
        meta = await conn.send(MetadataRequest(topics=[], allow_auto_topic_creation=False))
        return ClusterDescription(meta.cluster_id, meta.controller_id,
                                  [BrokerDescription(b.node_id, b.host, b.port, b.rack)
                                   for b in meta.brokers])

    async def describe_log_dirs(self, brokers: list[int] | None) -> list[LogDirDescription]:
        if not self.cluster.brokers:
            await self.cluster.update()
        out = []
        for node in sorted(self.cluster.brokers) if brokers is None else brokers:
            resp = await (await self.cluster.connection(node)).send(
                DescribeLogDirsRequest(topics=None))
            _check(resp.error_code, f"describe log dirs of broker {node}")
            for r in resp.results:
                err = errors.error_for_code(r.error_code) if r.error_code else None
                out.append(LogDirDescription(
                    node, r.log_dir, err(f"log dir {r.log_dir}") if err else None,
                    r.total_bytes, r.usable_bytes,
                    {TopicPartition(t.name, p.partition_index): p.partition_size
                     for t in r.topics for p in t.partitions}))
        return out

    async def api_versions(self, node_id: int | None) -> dict[int, tuple[int, int]]:
        conn = (await self.cluster.any_connection() if node_id is None
                else await self.cluster.connection(node_id))
        return dict(conn.versions)

    async def describe_topics(self, names: list[str] | None) -> dict[str, TopicDescription]:
        conn = await self.cluster.any_connection()
        R = MetadataRequest
        req = R(topics=None if names is None else [R.MetadataRequestTopic(name=n) for n in names],
                allow_auto_topic_creation=False)
        resp = await conn.send(req)
        out = {}
        for t in resp.topics:
            _check(t.error_code, f"describe topic {t.name!r}")
            parts = sorted((PartitionDescription(p.partition_index, p.leader_id, p.leader_epoch,
                                                 list(p.replica_nodes), list(p.isr_nodes))
                            for p in t.partitions), key=lambda p: p.partition)
            out[t.name] = TopicDescription(t.name, t.topic_id, t.is_internal, parts)
        return out

    async def describe_client_quotas(self, filters: list[QuotaFilter], strict: bool
                                     ) -> dict[QuotaEntity, dict[str, float]]:
        conn = await self.cluster.any_connection()
        return await _quota_admin.describe_client_quotas(conn, filters, strict)

    async def alter_client_quotas(self, entity: Mapping[str, str | None],
                                  changes: Mapping[str, float | None], validate_only: bool) -> None:
        conn = await self.cluster.any_connection()
        await _quota_admin.alter_client_quotas(conn, entity, changes, validate_only)

    async def describe_user_scram_credentials(self, users: list[str] | None) -> dict[str, dict[str, int]]:
        from pylog.client.aio import _scram_admin

        conn = await self.cluster.any_connection()
        return await _scram_admin.describe_user_scram_credentials(conn, users)

    async def alter_user_scram_credentials(self, upsertions: Mapping[str, Mapping[str, Any]],
                                           deletions: Mapping[str, list[str]]) -> None:
        from pylog.client.aio import _scram_admin

        conn = await self.cluster.any_connection()
        await _scram_admin.alter_user_scram_credentials(conn, upsertions, deletions)
    async def create_acls(self, bindings: list[AclBinding]) -> None:
        await _acl_admin.create_acls(await self.cluster.any_connection(), bindings)

    async def describe_acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return await _acl_admin.describe_acls(await self.cluster.any_connection(), flt)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        return await _acl_admin.delete_acls(await self.cluster.any_connection(), filters)

    async def close(self) -> None:
        await self.cluster.close()


class Admin:
    """Kafka admin client, asyncio API. See ``pylog.client.Admin`` for the calls."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._core = AdminCore(resolve(ADMIN, config, kwargs))

    async def create_topics(self, topics: Iterable[NewTopic | str], validate_only: bool = False
                            ) -> None:
        await self._core.create_topics(_new_topics(topics), validate_only)

    async def delete_topics(self, names: Iterable[str]) -> None:
        await self._core.delete_topics(list(names))

    async def create_partitions(self, counts: Mapping[str, int], validate_only: bool = False
                                ) -> None:
        await self._core.create_partitions(counts, validate_only)

    async def describe_configs(self, resources: Iterable[Any]
                               ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        return await self._core.describe_configs([_resource(r) for r in resources])

    async def alter_configs(self, resource: Any, changes: Mapping[str, str | None],
                            validate_only: bool = False) -> None:
        await self._core.alter_configs(_resource(resource), changes, validate_only)

    async def list_offsets(self, specs: Mapping[Any, Any], isolation_level: str = "read_uncommitted"
                           ) -> dict[TopicPartition, tuple[int, int]]:
        return await self._core.list_offsets(specs, 1 if isolation_level == "read_committed" else 0)

    async def delete_records(self, before: Mapping[Any, int]) -> dict[TopicPartition, int]:
        return await self._core.delete_records(before)

    async def describe_cluster(self) -> ClusterDescription:
        return await self._core.describe_cluster()

    async def describe_topics(self, names: Iterable[str] | None = None
                              ) -> dict[str, TopicDescription]:
        return await self._core.describe_topics(None if names is None else list(names))

    async def describe_log_dirs(self, brokers: Iterable[int] | None = None
                                ) -> list[LogDirDescription]:
        """Each broker's (``brokers``, else all) log directories with the size on disk of
        every partition it hosts (DescribeLogDirs; a broker without it raises
        UnsupportedVersionError)."""
        return await self._core.describe_log_dirs(None if brokers is None else list(brokers))

    async def api_versions(self, node_id: int | None = None) -> dict[int, tuple[int, int]]:
        """The APIs a broker serves (``node_id``, else any), as its ApiVersions answer
        gave them: ``{api_key: (min_version, max_version)}``."""
        if node_id is not None and not self._core.cluster.brokers:
            await self._core.cluster.update()
        return await self._core.api_versions(node_id)

    async def list_topics(self) -> list[str]:
        return sorted(n for n, t in (await self._core.describe_topics(None)).items()
                      if not t.is_internal)

    async def list_groups(self, states: Iterable[str] | None = None,
                          types: Iterable[str] | None = None) -> list[GroupListing]:
        return await self._core.groups.list_groups(states, types)

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        return await self._core.groups.describe_groups(group_ids)

    async def list_group_offsets(self, group_id: str, partitions: Iterable[Any] | None = None
                                 ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await self._core.groups.list_group_offsets(group_id, partitions)

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[Any, Any]) -> None:
        await self._core.groups.alter_group_offsets(group_id, offsets)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, errors.ApiError | None]:
        return await self._core.groups.delete_groups(group_ids)

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[Any]
                                   ) -> dict[TopicPartition, errors.ApiError | None]:
        return await self._core.groups.delete_group_offsets(group_id, partitions)

    async def list_share_group_offsets(self, group_id: str, partitions: Iterable[Any] | None = None
                                       ) -> dict[TopicPartition, Any]:
        return await _share_offsets_admin.list_share_group_offsets(self._core.groups, group_id,
                                                                   partitions)

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[Any, int]) -> None:
        await _share_offsets_admin.alter_share_group_offsets(self._core.groups, group_id, offsets)

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]
                                         ) -> dict[str, errors.ApiError | None]:
        return await _share_offsets_admin.delete_share_group_offsets(self._core.groups, group_id,
                                                                     topics)

    async def elect_leaders(self, election_type: str = "preferred",
                            partitions: Iterable[Any] | None = None
                            ) -> dict[TopicPartition, errors.ApiError | None]:
        return await _replica_admin.elect_leaders(self._core, election_type, partitions)

    async def alter_partition_reassignments(self, targets: Mapping[Any, Any]
                                            ) -> dict[TopicPartition, errors.ApiError | None]:
        return await _replica_admin.alter_partition_reassignments(self._core, targets)

    async def list_partition_reassignments(self, partitions: Iterable[Any] | None = None
                                           ) -> dict[TopicPartition, PartitionReassignment]:
        return await _replica_admin.list_partition_reassignments(self._core, partitions)

    async def describe_client_quotas(self, filters: Iterable[QuotaFilter] = (), strict: bool = False
                                     ) -> dict[QuotaEntity, dict[str, float]]:
        return await self._core.describe_client_quotas(list(filters), strict)

    async def alter_client_quotas(self, entity: Mapping[str, str | None],
                                  changes: Mapping[str, float | None],
                                  validate_only: bool = False) -> None:
        await self._core.alter_client_quotas(entity, changes, validate_only)

    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                              ) -> dict[str, dict[str, int]]:
        return await self._core.describe_user_scram_credentials(
            None if users is None else list(users))

    async def alter_user_scram_credentials(
            self, upsertions: Mapping[str, Mapping[str, Any]] | None = None,
            deletions: Mapping[str, list[str]] | None = None) -> None:
        await self._core.alter_user_scram_credentials(upsertions or {}, deletions or {})
    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        await self._core.create_acls(list(bindings))

    async def describe_acls(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        return await self._core.describe_acls(flt or AclBindingFilter())

    async def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        return await self._core.delete_acls(list(filters))

    async def close(self) -> None:
        await self._core.close()

    async def __aenter__(self) -> Admin:
        await self._core.cluster.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _new_topics(topics: Iterable[NewTopic | str]) -> list[NewTopic]:
    out = []
    for t in topics:
        if isinstance(t, str):
            t = NewTopic(t)
        if not isinstance(t, NewTopic):
            raise TypeError(f"expected NewTopic or a topic name, got {t!r}")
        out.append(t)
    return out


