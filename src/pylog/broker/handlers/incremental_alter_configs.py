"""IncrementalAlterConfigs (key 44), versions 0-1 (KIP-339): SET, DELETE, APPEND, SUBTRACT.

APPEND and SUBTRACT apply to list configs only (``cleanup.policy``). The result is validated
as a whole, stored durably and applied to the running logs (in cluster mode: written to
ZooKeeper, from where every broker applies it). Broker configs are static here. Group
configs (resource type GROUP, 32: ``consumer.*`` and ``share.*``, ``pylog.group.group_configs``)
are SET or DELETEd; the group's whole result is validated, then stored (ZooKeeper's
``/config/groups/<group>`` in cluster mode).
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
from pylog.config import TOPIC_CONFIG_DEFS, ConfigError, parse_topic_configs
from pylog.group.group_configs import GROUP_CONFIG_DEFS
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import IncrementalAlterConfigsResponse

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = IncrementalAlterConfigsResponse
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _group_ops(resource: Any) -> Any:
    """A GROUP resource's operations as a change of its stored strings: SET and DELETE
    only (no group config is a list)."""
    names = [c.name for c in resource.configs]
    if len(names) != len(set(names)):
        raise errors.InvalidRequestError("Error due to duplicate config keys")
    for c in resource.configs:
        if c.name not in GROUP_CONFIG_DEFS:
            raise errors.InvalidConfigError(f"Unknown group config name: {c.name}")
        if c.config_operation in (APPEND, SUBTRACT):
            raise errors.InvalidConfigError(
                f"Config value append/subtract is not allowed for config key: {c.name}")
        if c.config_operation not in (SET, DELETE):
            raise errors.InvalidRequestError(f"unknown config operation {c.config_operation}")
        if c.config_operation == SET and c.value is None:
            raise errors.InvalidRequestError(f"Null value not supported for : {c.name}")

    def change(current: dict[str, str]) -> dict[str, str]:
        for c in resource.configs:
            if c.config_operation == SET:
                current[c.name] = c.value
            else:
                current.pop(c.name, None)
        return current
    return change


async def _alter(ctx: RequestContext, request: Any, resource: Any) -> None:
    if resource.resource_type == RESOURCE_GROUP:
        await change_group_configs(ctx, resource.resource_name, _group_ops(resource),
                                   request.validate_only)
        return
    if resource.resource_type == RESOURCE_BROKER:
        refuse_broker_change(ctx, resource.resource_name)
    if resource.resource_type != RESOURCE_TOPIC:
        raise errors.InvalidRequestError(f"unsupported resource type {resource.resource_type}")
    name = resource.resource_name
    names = [c.name for c in resource.configs]
    if len(names) != len(set(names)):
        raise errors.InvalidRequestError("Error due to duplicate config keys")
    overrides = await topic_overrides(ctx, name)
    try:
        for c in resource.configs:
            d = TOPIC_CONFIG_DEFS.get(c.name)
            if d is None:
                raise ConfigError(c.name, "unknown topic configuration")
            op = c.config_operation
            if op == SET:
                if c.value is None:
                    raise errors.InvalidRequestError(f"Null value not supported for : {c.name}")
                overrides[c.name] = d.parse(c.value)
            elif op == DELETE:
                overrides.pop(c.name, None)
            elif op in (APPEND, SUBTRACT):
                if d.type != "list":
                    raise errors.InvalidConfigError(
                        f"Config value append/subtract is not allowed for config key: {c.name}")
                current = list(overrides.get(c.name, ctx.broker.config.topic_default(c.name)))
                items = d.parse(c.value or "")
                if op == APPEND:
                    current += [i for i in items if i not in current]
                else:
                    current = [i for i in current if i not in items]
                overrides[c.name] = current
            else:
                raise errors.InvalidRequestError(f"unknown config operation {op}")
        overrides = parse_topic_configs(overrides)
    except ConfigError as exc:
        raise errors.InvalidConfigError(str(exc)) from None
    check_implemented(overrides)
    await store_topic_overrides(ctx, name, overrides, request.validate_only)
    if not request.validate_only:
        # Warn about what this request set, not again about what was set before.
        changed = {c.name: overrides[c.name] for c in resource.configs if c.name in overrides}
        log_warnings(ctx, name, check_implemented(changed))


async def handle_incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    return await alter_each(ctx, request, _R, _alter)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return alter_error_response(request, _R, code, message)
