"""What the three share-group offset handlers (DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets) share: finding the group's coordinator and
checking that the group is a share group, and looking a topic up by name.

The share-partition side is ``pylog.group.share.offsets`` (the one seam to the share
coordinator); the group side (does the group exist, is it empty) is the group coordinator's.
Topics are looked up in the metadata (``_groups.topics_view``: the metadata cache in cluster
mode), not in the local logs: the share coordinator answers for partitions led anywhere.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers import _groups

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext
    from pylog.group.coordinator import GroupCoordinator
    from pylog.group.share.share_group import ShareGroup


def share_group(ctx: RequestContext, group_id: str) -> ShareGroup:
    """The share group ``group_id``, hosted by this broker.

    Raises:
        InvalidGroupIdError: an empty group id.
        CoordinatorNotAvailableError, NotCoordinatorError: this broker does not coordinate it.
        CoordinatorLoadInProgressError: its coordinator is loading.
        GroupIdNotFoundError: no share group of that id (unknown, or a classic or consumer
            group), as Kafka answers.
    """
    if not group_id:
        raise errors.InvalidGroupIdError("The group id must not be empty.")
    coord = _groups.coordinator(ctx, group_id)
    if coord is None:
        cls = errors.error_for_code(_groups.not_hosted(ctx)) or errors.UnknownServerError
        raise cls(f"this broker does not coordinate group {group_id}")
    if coord.loading:
        raise errors.CoordinatorLoadInProgressError(f"the coordinator of {group_id} is loading")
    group = coord.share.groups.get(group_id)
    if group is None:
        raise errors.GroupIdNotFoundError(f"Group {group_id} is not a share group.")
    return group


def coordinator(ctx: RequestContext, group_id: str) -> GroupCoordinator:
    """The coordinator of a group ``share_group`` found (it may have resigned since).

    Raises:
        CoordinatorNotAvailableError, NotCoordinatorError: this broker no longer coordinates it.
    """
    coord = _groups.coordinator(ctx, group_id)
    if coord is None:
        cls = errors.error_for_code(_groups.not_hosted(ctx)) or errors.UnknownServerError
        raise cls(f"this broker does not coordinate group {group_id}")
    return coord


def topic_info(ctx: RequestContext, name: str) -> tuple[uuid.UUID, int] | None:
    """(topic id, number of partitions) of topic ``name`` from the metadata, or None."""
    return _groups.topics_view(ctx).get(name)


def topic_id(ctx: RequestContext, name: str) -> Any:
    """The id of topic ``name`` from the metadata (a zero id when unknown)."""
    found = _groups.topics_view(ctx).get(name)
    return found[0] if found is not None else uuid.UUID(int=0)
