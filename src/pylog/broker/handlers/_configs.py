"""Config resources shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

from typing import Any

from pylog import errors

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8


def check_broker_name(ctx: Any, name: str) -> None:
    """A broker resource is this node's id, or "" for the cluster-wide default."""
    if name not in ("", str(ctx.broker.node_id)):
        raise errors.InvalidRequestError(f"Unexpected broker id, expected {ctx.broker.node_id} but received {name}")


def topic_of(ctx: Any, name: str) -> Any:
    topic = ctx.broker.log_manager.topics.get(name)
    if topic is None:
        raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
    return topic


def refuse_broker_change(ctx: Any, name: str) -> None:
    check_broker_name(ctx, name)
    raise errors.InvalidRequestError(
        "broker configs are static: change server.properties or --override and restart")
