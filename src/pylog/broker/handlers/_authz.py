"""Authorization checks for the handlers (Kafka's ``AuthHelper``), one helper per kind of
check. Every helper answers "allowed" at once when no authorizer is configured
(``broker.authorizer`` is None); the hot handlers (Produce, Fetch) test that attribute
themselves before calling, so that without ACLs a request pays one attribute read.

Denials are logged on ``kafka.authorizer.logger`` at INFO in Kafka's sentence
(``Principal = User:alice is Denied operation = READ from host = 127.0.0.1 on resource =
Topic:LITERAL:orders for request = Fetch with resourceRefCount = 1``); checks Kafka makes
with ``logIfDenied = false`` (filters, probes) pass ``log_denied=False``.

Event-loop affinity: the broker's loop.
"""

from __future__ import annotations

from collections.abc import Iterable

from pylog import errors
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import api_name
from pylog.security.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AclOperation,
    ResourceType,
    authorized_operations,
)
from pylog.security.authz.authorizer import authz_log
from pylog.security.authz.bindings import CLUSTER_NAME, pascal

__all__ = ["CLUSTER_NAME", "AclOperation", "ResourceType", "allowed", "authorized_ops",
           "client_ip", "filter_allowed", "require_cluster"]


def client_ip(ctx: RequestContext) -> str:
    """The client's IP address, as ACL hosts name it (``ctx.peer`` is ``host:port``)."""
    return ctx.peer.rsplit(":", 1)[0].strip("[]")


def _log_denied(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str,
                count: int = 1) -> None:
    authz_log.info(
        "Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s "
        "for request = %s with resourceRefCount = %d", ctx.principal, op.name, client_ip(ctx),
        pascal(rtype.name), name, api_name(ctx.api_key), count)


def allowed(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str, *,
            log_denied: bool = True) -> bool:
    """Whether the request's principal may do ``op`` on the resource (True without an
    authorizer)."""
    authz = ctx.broker.authorizer
    if authz is None:
        return True
    ok = authz.authorize(ctx.principal, client_ip(ctx), op, rtype, name or "")
    if not ok and log_denied:
        _log_denied(ctx, op, rtype, name)
    return ok


def cluster_allowed(ctx: RequestContext, op: AclOperation, *, log_denied: bool = True) -> bool:
    return allowed(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)


def require_cluster(ctx: RequestContext, op: AclOperation) -> None:
    """Kafka's ``authorizeClusterOperation``: raise CLUSTER_AUTHORIZATION_FAILED (the API's
    ``error_response`` answers it everywhere) unless ``op`` on the cluster is allowed."""
    if not cluster_allowed(ctx, op):
        raise errors.ClusterAuthorizationFailedError(
            f"Request {api_name(ctx.api_key)} is not authorized.")


def filter_allowed(ctx: RequestContext, op: AclOperation, rtype: ResourceType,
                   names: Iterable[str], *, log_denied: bool = True) -> set[str]:
    """The names among ``names`` the principal may do ``op`` on, each distinct name checked
    once (Kafka's ``filterByAuthorized``)."""
    authz = ctx.broker.authorizer
    distinct = set(names)
    if authz is None:
        return distinct
    principal, host = ctx.principal, client_ip(ctx)
    ok = {n for n in distinct if authz.authorize(principal, host, op, rtype, n or "")}
    if log_denied:
        for n in distinct - ok:
            _log_denied(ctx, op, rtype, n)
    return ok


def allowed_by_type(ctx: RequestContext, op: AclOperation, rtype: ResourceType) -> bool:
    """Kafka's ``authorizeByResourceType``: ``op`` allowed on at least one resource."""
    authz = ctx.broker.authorizer
    if authz is None:
        return True
    return authz.authorize_by_resource_type(ctx.principal, client_ip(ctx), op, rtype)


def authorized_ops(ctx: RequestContext, requested: bool, rtype: ResourceType, name: str) -> int:
    """The KIP-430 ``authorized_operations`` field: omitted unless asked; without an
    authorizer every operation the type supports; else what the principal may do."""
    authz = ctx.broker.authorizer
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    if authz is None:
        return authorized_operations(True, rtype)
    return authz.authorized_operations(ctx.principal, client_ip(ctx), rtype, name)


def denied(ctx: RequestContext, op: AclOperation, rtype: ResourceType,
           names: Iterable[str]) -> set[str]:
    """The distinct names among ``names`` the principal may not do ``op`` on (empty without
    an authorizer); denials are logged."""
    if ctx.broker.authorizer is None:
        return set()
    distinct = set(names)
    return distinct - filter_allowed(ctx, op, rtype, distinct)


def topic_denied_error(name: str) -> errors.TopicAuthorizationFailedError:
    return errors.TopicAuthorizationFailedError(f"Not authorized to access topics: [{name}]")


def require_group(ctx: RequestContext, op: AclOperation, group_id: str | None) -> None:
    """Raise GROUP_AUTHORIZATION_FAILED (the API's ``error_response`` answers it) unless
    ``op`` on the group is allowed."""
    if not allowed(ctx, op, ResourceType.GROUP, group_id or ""):
        raise errors.GroupAuthorizationFailedError(f"Not authorized to access group: {group_id}")


def require_subscription(ctx: RequestContext, group_id: str | None,
                         topics: Iterable[str] | None) -> None:
    """A KIP-848 or share group heartbeat: READ on the group, then DESCRIBE on every
    subscribed topic (TOPIC_AUTHORIZATION_FAILED), as Kafka checks them."""
    require_group(ctx, AclOperation.READ, group_id)
    if topics and denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics):
        raise errors.TopicAuthorizationFailedError(
            "Not authorized to describe every subscribed topic.")


def require_transactional_id(ctx: RequestContext, transactional_id: str | None) -> None:
    """Raise TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless WRITE on the id is allowed."""
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id or ""):
        raise errors.TransactionalIdAuthorizationFailedError(
            "Transactional Id authorization failed.")


def coordinator_key_error(ctx: RequestContext, key: str, key_type: int) -> int:
    """FindCoordinator: DESCRIBE on the group (key type 0) or the transactional id (1),
    CLUSTER_ACTION on the cluster for a share partition (2, Kafka's rule for the share
    coordinator); the error code for ``key``, 0 when allowed."""
    if key_type == 0:
        ok = allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key)
        return 0 if ok else errors.GroupAuthorizationFailedError.code
    if key_type == 1:
        ok = allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)
        return 0 if ok else errors.TransactionalIdAuthorizationFailedError.code
    if key_type == 2:  # share coordinator: brokers only
        return 0 if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION) else errors.ClusterAuthorizationFailedError.code
    return 0


#: Config resource types (``ConfigResource.Type``) and what guards them.
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_GROUP = 2, 4, 8, 32


def require_config_access(ctx: RequestContext, op: AclOperation, config_type: int,
                          name: str) -> None:
    """DescribeConfigs (DESCRIBE_CONFIGS) / AlterConfigs (ALTER_CONFIGS): brokers and
    broker loggers need ``op`` on the cluster (CLUSTER_AUTHORIZATION_FAILED), topics on the
    topic (TOPIC_AUTHORIZATION_FAILED), groups on the group (GROUP_AUTHORIZATION_FAILED)."""
    if ctx.broker.authorizer is None:
        return
    if config_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER):
        if not cluster_allowed(ctx, op):
            raise errors.ClusterAuthorizationFailedError("Cluster authorization failed.")
    elif config_type == _CONFIG_TOPIC:
        if not allowed(ctx, op, ResourceType.TOPIC, name):
            raise topic_denied_error(name)
    elif config_type == _CONFIG_GROUP:
        require_group(ctx, op, name)
