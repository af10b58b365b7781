"""Helpers for the requests only the controller answers (ElectLeaders, Alter/List
PartitionReassignments): in Kafka's ZooKeeper mode any other broker answers NOT_CONTROLLER
and the admin clients send them to the controller named in Metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

NOT_CONTROLLER = errors.NotControllerError.code


def controller(ctx: RequestContext) -> Any:
    """This broker's running controller (``ControllerService``), None when it is not the
    controller (or not in cluster mode)."""
    cluster = ctx.broker.cluster
    return cluster.controller if cluster is not None else None


def not_controller_message(api: str) -> str:
    return f"this broker is not the controller; send {api} to the controller"
