"""Group configs (resource type GROUP) through the handlers in process on a single node:
IncrementalAlterConfigs' operations and errors, the legacy AlterConfigs replacing the set,
DescribeConfigs' sources, synonyms and documentation, DeleteGroups removing them."""

from __future__ import annotations

import asyncio
from typing import Any

from test_broker_groups import _call, _start, _stop, _wait_loaded

from pylog import errors
from pylog.protocol.apis import ApiKey
from pylog.protocol.messages import (
    AlterConfigsRequest,
    DeleteGroupsRequest,
    DescribeConfigsRequest,
    FindCoordinatorRequest,
    IncrementalAlterConfigsRequest,
    OffsetCommitRequest,
)

I = IncrementalAlterConfigsRequest  # noqa: E741
A = AlterConfigsRequest
D = DescribeConfigsRequest


def incremental(group: str, *configs: tuple[str, int, str | None], validate_only: bool = False) -> Any:
    return I(resources=[I.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        I.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in configs])],
        validate_only=validate_only)


def legacy(group: str, *configs: tuple[str, str | None]) -> Any:
    return A(resources=[A.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        A.AlterableConfig(name=n, value=v) for n, v in configs])], validate_only=False)


async def describe(b: Any, group: str, keys: list[str] | None = None) -> Any:
    r = await _call(b, ApiKey.DESCRIBE_CONFIGS, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=32, resource_name=group, configuration_keys=keys)],
        include_synonyms=True, include_documentation=True))
    return r.results[0]


def error(r: Any) -> tuple[int, str | None]:
    return r.responses[0].error_code, r.responses[0].error_message


def test_incremental_and_legacy_alter_describe_and_delete_with_the_group(tmp_path) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            r = await _call(b, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, incremental(
                "g", ("consumer.session.timeout.ms", 0, "50000"), ("share.auto.offset.reset", 0, "earliest")))
            assert error(r) == (0, None)
            assert b.group_configs.overrides("g") == {"consumer.session.timeout.ms": 50000,
                                                      "share.auto.offset.reset": "earliest"}
            # errors name the key; nothing of a refused request is kept
            code, msg = error(await _call(b, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, incremental(
                "g", ("share.delivery.count.limit", 0, "3"), ("consumer.heartbeat.interval.ms", 0, "20000"))))
            assert code == errors.InvalidConfigError.code and "consumer.heartbeat.interval.ms" in msg
            code, msg = error(await _call(b, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, incremental(
                "g", ("share.delivery.count.limit", 2, "3"))))
            assert code == errors.InvalidConfigError.code and "append/subtract" in msg
            code, _ = error(await _call(b, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, incremental(
                "g", ("share.delivery.count.limit", 0, "3"), ("share.delivery.count.limit", 1, None))))
            assert code == errors.InvalidRequestError.code
            code, _ = error(await _call(b, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, incremental(
                "", ("share.delivery.count.limit", 0, "3"))))
            assert code == errors.InvalidRequestError.code
            r = await _call(b, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, incremental(
                "g", ("share.delivery.count.limit", 0, "3"), validate_only=True))
            assert error(r) == (0, None) and "share.delivery.count.limit" not in b.group_configs.overrides("g")
            assert b.group_configs.overrides("g")["consumer.session.timeout.ms"] == 50000

            res = await describe(b, "g")
            assert res.error_code == 0
            got = {c.name: c for c in res.configs}
            s = got["consumer.session.timeout.ms"]
            assert (s.value, s.config_source, s.config_type) == ("50000", 8, 3) and s.documentation
            assert [(y.name, y.value, y.source) for y in s.synonyms] == [
                ("consumer.session.timeout.ms", "50000", 8), ("group.consumer.session.timeout.ms", "45000", 5)]
            h = got["consumer.heartbeat.interval.ms"]
            assert (h.value, h.config_source) == ("5000", 5)
            assert got["share.auto.offset.reset"].config_type == 2
            only = await describe(b, "g", ["share.auto.offset.reset"])
            assert [(c.name, c.value) for c in only.configs] == [("share.auto.offset.reset", "earliest")]

            # the legacy API replaces the whole set
            r = await _call(b, ApiKey.ALTER_CONFIGS, 2, legacy("g", ("share.record.lock.duration.ms", "20000")))
            assert error(r) == (0, None)
            assert b.group_configs.overrides("g") == {"share.record.lock.duration.ms": 20000}
            code, msg = error(await _call(b, ApiKey.ALTER_CONFIGS, 2, legacy("g", ("share.nope", "1"))))
            assert code == errors.InvalidConfigError.code and "Unknown group config name: share.nope" == msg
            code, _ = error(await _call(b, ApiKey.ALTER_CONFIGS, 2, legacy("g", ("share.delivery.count.limit", None))))
            assert code == errors.InvalidRequestError.code

            # DeleteGroups: a group that does not exist keeps its configs; a deleted one loses them
            r = await _call(b, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))
            assert r.error_code == 0
            await _wait_loaded(b)
            await b.log_manager.create_topic_async(b.executor, "data", 1)
            r = await _call(b, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["g"]))
            assert r.results[0].error_code == errors.GroupIdNotFoundError.code
            assert b.group_configs.overrides("g") == {"share.record.lock.duration.ms": 20000}
            R = OffsetCommitRequest
            r = await _call(b, ApiKey.OFFSET_COMMIT, 9, R(
                group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
                    R.OffsetCommitRequestTopic(name="data", partitions=[
                        R.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                       committed_metadata="")])]))
            assert r.topics[0].partitions[0].error_code == 0
            r = await _call(b, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["g"]))
            assert r.results[0].error_code == 0
            assert b.group_configs.overrides("g") == {}
            assert {c.name: c.config_source for c in (await describe(b, "g")).configs}[
                "share.record.lock.duration.ms"] == 5
        finally:
            await _stop(b)
        # and the deletion is durable
        b = await _start(tmp_path)
        try:
            assert b.group_configs.overrides("g") == {}
        finally:
            await _stop(b)

    asyncio.run(scenario())
