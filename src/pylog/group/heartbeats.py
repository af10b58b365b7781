"""The group coordinator's entry points for the heartbeat-driven protocols: KIP-848's
ConsumerGroupHeartbeat (``pylog.group.consumer_coordinator``) and KIP-932's
ShareGroupHeartbeat (``pylog.group.share.coordinator``). A mixin of ``GroupCoordinator``,
kept apart for size; the shard-wide checks (loading, protocols enabled, group type) are
here, the rules in the components.

Not thread-safe: called from the coordinator's thread only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.errors import (
    CoordinatorLoadInProgressError,
    GroupIdNotFoundError,
    UnsupportedVersionError,
)

from .consumer_coordinator import HeartbeatResult, TopicsView
from .results import Pending
from .share.coordinator import ShareHeartbeatResult

if TYPE_CHECKING:
    from .config import GroupCoordinatorConfig
    from .consumer_coordinator import ConsumerGroups
    from .share.coordinator import ShareGroups


class HeartbeatsMixin:
    if TYPE_CHECKING:
        config: GroupCoordinatorConfig
        consumer: ConsumerGroups
        share: ShareGroups
        _loading: bool

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat

    def consumer_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                                 topics: TopicsView, **fields: Any) -> Pending[HeartbeatResult]:
        """ConsumerGroupHeartbeat (KIP-848): ``pylog.group.consumer_coordinator``. ``topics``
        is the broker's topic metadata; ``fields`` the request's other fields."""
        if self._loading:
            return Pending.completed(HeartbeatResult(CoordinatorLoadInProgressError.code))
        if "consumer" not in self.config.rebalance_protocols:
            return Pending.completed(HeartbeatResult(UnsupportedVersionError.code,
                                                     "The consumer group protocol is not enabled."))
        if group_id in self.share.groups:
            return Pending.completed(HeartbeatResult(GroupIdNotFoundError.code,
                                                     f"Group {group_id} is not a consumer group."))
        return self.consumer.heartbeat(group_id, member_id, member_epoch, topics=topics, **fields)

    # ------------------------------------------------------------------ ShareGroupHeartbeat

    def share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                              topics: TopicsView, **fields: Any) -> Pending[ShareHeartbeatResult]:
        """ShareGroupHeartbeat (KIP-932): ``pylog.group.share.coordinator``."""
        if self._loading:
            return Pending.completed(ShareHeartbeatResult(CoordinatorLoadInProgressError.code, None))
        return self.share.heartbeat(group_id, member_id, member_epoch, topics=topics, **fields)
