"""AlterConfigs (key 33), versions 0-2: replace a topic's config overrides.

The new set replaces every override of the topic (Kafka's legacy semantics); values are
validated first and the change is stored durably, then applied to the running logs (in
cluster mode: written to ZooKeeper, from where every broker applies it).
Broker configs are static here (INVALID_REQUEST). A GROUP resource (32) replaces the
group's configs the same way (``pylog.group.group_configs``; Kafka's legacy AlterConfigs
accepts GROUP as it does TOPIC).
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._configs import (
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    alter_each,
    alter_error_response,
    change_group_configs,
    check_implemented,
    log_warnings,
    refuse_broker_change,
    store_topic_overrides,
    topic_overrides,
)
from pylog.broker.handlers._context import RequestContext
from pylog.config import ConfigError, parse_topic_configs
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import AlterConfigsResponse

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = AlterConfigsResponse


def _replace_group(ctx: RequestContext, resource: Any) -> Any:
    """A GROUP resource (Kafka accepts it in the legacy API too): the given configs replace
    every override of the group."""
    raw: dict[str, str] = {}
    for c in resource.configs:
        if c.value is None:
            raise errors.InvalidRequestError(f"Null value not supported for : {c.name}")
        if c.name in raw:
            raise errors.InvalidRequestError("Error due to duplicate config keys")
        raw[c.name] = c.value
    return lambda _current: dict(raw)


async def _alter(ctx: RequestContext, request: Any, resource: Any) -> None:
    if resource.resource_type == RESOURCE_GROUP:
        await change_group_configs(ctx, resource.resource_name, _replace_group(ctx, resource),
                                   request.validate_only)
        return
    if resource.resource_type == RESOURCE_BROKER:
        refuse_broker_change(ctx, resource.resource_name)
    if resource.resource_type != RESOURCE_TOPIC:
        raise errors.InvalidRequestError(f"unsupported resource type {resource.resource_type}")
    await topic_overrides(ctx, resource.resource_name)  # UNKNOWN_TOPIC_OR_PARTITION first
    raw = {}
    for c in resource.configs:
        if c.value is None:
            raise errors.InvalidRequestError(f"Null value not supported for : {c.name}")
        raw[c.name] = c.value
    try:
        overrides = parse_topic_configs(raw)
    except ConfigError as exc:
        raise errors.InvalidConfigError(str(exc)) from None
    warnings = check_implemented(overrides)
    await store_topic_overrides(ctx, resource.resource_name, overrides, request.validate_only)
    if not request.validate_only:
        log_warnings(ctx, resource.resource_name, warnings)


async def handle_alter_configs(ctx: RequestContext, request: Any) -> Any:
    return await alter_each(ctx, request, _R, _alter)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return alter_error_response(request, _R, code, message)
