"""Config resources shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, require_config_access
from pylog.broker.handlers._context import RequestContext
from pylog.config import ConfigError, check_topic_configs

log = logging.getLogger("pylog.broker.handlers")

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32


def check_broker_name(ctx: RequestContext, name: str) -> None:
    """A broker resource is this node's id, or "" for the cluster-wide default."""
    if name not in ("", str(ctx.broker.node_id)):
        raise errors.InvalidRequestError(f"Unexpected broker id, expected {ctx.broker.node_id} but received {name}")


def topic_of(ctx: RequestContext, name: str) -> Any:
    topic = ctx.broker.log_manager.topics.get(name)
    if topic is None:
        raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
    return topic


async def topic_overrides(ctx: RequestContext, name: str) -> dict[str, Any]:
    """A topic's (parsed) overrides: ZooKeeper's in cluster mode, else the local topic's."""
    if ctx.broker.cluster is not None:
        from pylog.controller.configs import topic_overrides as zk_overrides

        return await zk_overrides(ctx.broker, name)
    return dict(topic_of(ctx, name).overrides)


async def store_topic_overrides(ctx: RequestContext, name: str, overrides: Mapping[str, Any],
                                validate_only: bool) -> None:
    """Replace a topic's overrides: through ZooKeeper in cluster mode (every broker applies
    them), else in the local log manager (stored durably, applied to the running logs)."""
    if ctx.broker.cluster is not None:
        from pylog.controller.configs import write_topic_config

        await write_topic_config(ctx.broker, name, overrides, validate_only)
        return
    await ctx.broker.log_manager.set_topic_configs_async(
        ctx.broker.executor, name, overrides, validate_only=validate_only)


def check_implemented(overrides: Mapping[str, Any]) -> list[str]:
    """The warnings for deprecated topic configs pylog accepts and ignores; a config
    ``check_topic_configs`` refuses becomes INVALID_CONFIG naming the key."""
    try:
        return check_topic_configs(overrides)
    except ConfigError as exc:
        raise errors.InvalidConfigError(str(exc)) from None


def log_warnings(ctx: RequestContext, topic: str, warnings: list[str]) -> None:
    for warning in warnings:
        log.warning("topic %s (config from %s): %s", topic, ctx.peer, warning)


def refuse_broker_change(ctx: RequestContext, name: str) -> None:
    check_broker_name(ctx, name)
    raise errors.InvalidRequestError(
        "broker configs are static: change server.properties or --override and restart")


async def alter_each(ctx: RequestContext, request: Any, response_cls: Any, alter: Any) -> Any:
    """Answer AlterConfigs / IncrementalAlterConfigs: ``alter(ctx, request, resource)`` for
    each resource, one result per resource; one resource's error does not stop the rest."""
    out = []
    for resource in request.resources:
        res = response_cls.AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=resource.resource_type,
            resource_name=resource.resource_name)
        try:
            require_config_access(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type,
                                  resource.resource_name)
            await alter(ctx, request, resource)
        except errors.ApiError as exc:
            res.error_code, res.error_message = exc.code, str(exc)
        out.append(res)
    return response_cls(throttle_time_ms=0, responses=out)


def alter_error_response(request: Any, response_cls: Any, code: int, message: str) -> Any:
    """The same error for every resource of an Alter(Incremental)Configs request."""
    return response_cls(throttle_time_ms=0, responses=[
        response_cls.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=r.resource_type,
            resource_name=r.resource_name)
        for r in request.resources
    ])


def group_overrides(ctx: RequestContext, group_id: str) -> dict[str, Any]:
    """A group's overrides (resource type GROUP) as this broker uses them. In cluster mode
    that is its copy of ZooKeeper's ``/config/groups/<group>``, current once the change
    notice has reached it (as a KRaft broker answers from its metadata cache)."""
    check_group_name(group_id)
    return ctx.broker.group_configs.overrides(group_id)


async def change_group_configs(ctx: RequestContext, group_id: str,
                               change: Callable[[dict[str, str]], dict[str, str]],
                               validate_only: bool) -> None:
    """Change a group's configs: ``change`` takes its overrides as strings and returns the
    new whole set as strings, which is parsed and validated (``GroupConfigs.parse_all``:
    INVALID_CONFIG naming the key) and stored: through ZooKeeper in cluster mode (every
    broker applies it), else in the local store."""
    check_group_name(group_id)
    configs = ctx.broker.group_configs

    def changed(current: dict[str, str]) -> dict[str, Any]:
        return configs.parse_all(change(current))
    if ctx.broker.cluster is not None:
        from pylog.controller.configs import write_group_config

        await write_group_config(ctx.broker, group_id, changed, validate_only)
        return
    current = {k: str(v) for k, v in configs.overrides(group_id).items()}
    configs.alter(group_id, changed(current), validate_only)


def check_group_name(group_id: str) -> None:
    if not group_id:
        raise errors.InvalidRequestError("Group name must not be empty")


async def delete_group_configs(ctx: RequestContext, group_id: str) -> None:
    """A deleted group's configs go with it (Kafka 4.x removes them on DeleteGroups): from
    ZooKeeper in cluster mode (every broker drops them on the notice), else locally."""
    if ctx.broker.cluster is not None:
        from pylog.controller.configs import delete_group_config

        await delete_group_config(ctx.broker, group_id)
        return
    ctx.broker.group_configs.delete(group_id)
