"""DescribeConfigs (key 32), versions 1-4: every entry, with defaults, sources and synonyms.

Topic resources list every topic-level config (the topic's override, else the broker
synonym set explicitly, else the default), broker resources every broker config. In
cluster mode a topic's overrides come from ZooKeeper's ``/config/topics/<t>``
(``pylog.controller.configs``), so every broker answers alike, holding a replica or not. Synonyms
are sent when asked (``include_synonyms``), types and documentation from v3 on. GROUP
resources (32) list the group configs (``pylog.group.group_configs``) with sources 8
(GROUP_CONFIG), 4 (STATIC_BROKER_CONFIG) or 5 (DEFAULT_CONFIG).
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, require_config_access
from pylog.broker.handlers._configs import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    check_broker_name,
    group_overrides,
    topic_overrides,
)
from pylog.broker.handlers._context import RequestContext
from pylog.config import CONFIG_TYPE_CODES
from pylog.group.group_configs import (
    GROUP_CONFIG_DEFS,
    SOURCE_DEFAULT,
    SOURCE_GROUP,
    SOURCE_STATIC_BROKER,
)
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeConfigsResponse

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeConfigsResponse


async def _entries(ctx: RequestContext, request: Any, resource: Any) -> list[Any]:
    if resource.resource_type == RESOURCE_TOPIC:
        overrides = await topic_overrides(ctx, resource.resource_name)
        entries = ctx.broker.config.describe_topic(overrides)
    elif resource.resource_type == RESOURCE_BROKER:
        check_broker_name(ctx, resource.resource_name)
        entries = ctx.broker.config.describe_broker()
    elif resource.resource_type == RESOURCE_BROKER_LOGGER:
        check_broker_name(ctx, resource.resource_name)
        return []
    elif resource.resource_type == RESOURCE_GROUP:
        return await _group_entries(ctx, request, resource)
    else:
        raise errors.InvalidRequestError(f"unsupported resource type {resource.resource_type}")
    keys = resource.configuration_keys
    if keys is not None:
        wanted = set(keys)
        entries = [e for e in entries if e.name in wanted]
    out = []
    for e in entries:
        synonyms = []
        if request.include_synonyms:
            synonyms = [_R.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in e.synonyms]
        out.append(_R.DescribeConfigsResourceResult(
            name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
            is_sensitive=e.is_sensitive, synonyms=synonyms,
            config_type=CONFIG_TYPE_CODES.get(e.type, 0),
            documentation=e.doc if request.include_documentation else None,
        ))
    return out


async def _group_entries(ctx: RequestContext, request: Any, resource: Any) -> list[Any]:
    """A group's configs (``pylog.group.group_configs``): its overrides as this broker uses
    them (in cluster mode: once ZooKeeper's change notice reached it) and the broker's
    settings for the rest."""
    keys = resource.configuration_keys
    own = group_overrides(ctx, resource.resource_name)
    out = []
    for name, value, source, broker_name in ctx.broker.group_configs.describe(
            resource.resource_name, own):
        if keys is not None and name not in keys:
            continue
        synonyms = []
        if request.include_synonyms:
            if source == SOURCE_GROUP:
                synonyms.append(_R.DescribeConfigsSynonym(name=name, value=value, source=source))
            if broker_name is not None:
                explicit = ctx.broker.config.is_explicit(broker_name)
                synonyms.append(_R.DescribeConfigsSynonym(
                    name=broker_name, value=str(ctx.broker.config[broker_name]),
                    source=SOURCE_STATIC_BROKER if explicit else SOURCE_DEFAULT))
        out.append(_R.DescribeConfigsResourceResult(
            name=name, value=value, read_only=False, config_source=source, is_sensitive=False,
            synonyms=synonyms, config_type=CONFIG_TYPE_CODES[GROUP_CONFIG_DEFS[name].type],
            documentation=GROUP_CONFIG_DEFS[name].doc if request.include_documentation else None))
    return out


async def handle_describe_configs(ctx: RequestContext, request: Any) -> Any:
    results = []
    for resource in request.resources:
        res = _R.DescribeConfigsResult(error_code=0, error_message=None,
                                       resource_type=resource.resource_type,
                                       resource_name=resource.resource_name, configs=[])
        try:
            require_config_access(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                                  resource.resource_name)
            res.configs = await _entries(ctx, request, resource)
        except errors.ApiError as exc:
            res.error_code, res.error_message = exc.code, str(exc)
        results.append(res)
    return _R(throttle_time_ms=0, results=results)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, results=[
        _R.DescribeConfigsResult(error_code=code, error_message=message, resource_type=r.resource_type,
                                 resource_name=r.resource_name, configs=[])
        for r in request.resources
    ])
