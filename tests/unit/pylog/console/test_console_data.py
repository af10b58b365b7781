"""pylog.console.data over a stand-in admin client: secrets masked, missing APIs said."""

from __future__ import annotations

import asyncio
from typing import Any

from pylog.client import ConfigResource, TopicPartition
from pylog.client.aio.admin import ConfigEntry, PartitionDescription, TopicDescription
from pylog.console.data import ClusterData
from pylog.console.security import MASK


class StandInAdmin:
    """Answers the calls ClusterData.topic makes, as a broker without
    IncrementalAlterConfigs (key 44) would."""

    def __init__(self) -> None:
        self.topic = TopicDescription("t", None, False, [
            PartitionDescription(0, 1, 0, [1, 2], [1, 2]),
            PartitionDescription(1, -1, 0, [2, 1], [1])])

    async def describe_topics(self, names: Any) -> dict[str, TopicDescription]:
        return {"t": self.topic}

    async def list_offsets(self, specs: dict[TopicPartition, str]) -> dict[Any, Any]:
        return {tp: ((3, -1) if spec == "earliest" else (10, -1)) for tp, spec in specs.items()}

    async def describe_configs(self, resources: list[ConfigResource]) -> dict[Any, Any]:
        entries = [ConfigEntry("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG", False, False),
                   ConfigEntry("sasl.jaas.config", "user=x password=y", "DEFAULT_CONFIG",
                               False, False),
                   ConfigEntry("custom.token", "abc", "DYNAMIC_TOPIC_CONFIG", False, True),
                   ConfigEntry("ssl.key.password", None, "DEFAULT_CONFIG", False, True)]
        return {resources[0]: {e.name: e for e in entries}}

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        return {3: (0, 12), 32: (0, 4), 20: (0, 6)}


def test_topic_masks_secrets_and_says_what_is_missing() -> None:
    data = asyncio.run(ClusterData(StandInAdmin()).topic("t"))  # type: ignore[arg-type]
    values = {c["name"]: c["value"] for c in data["configs"]}
    assert values == {"retention.ms": "1000", "sasl.jaas.config": MASK, "custom.token": MASK,
                      "ssl.key.password": None}
    assert "user=x" not in repr(data)
    assert {c["name"] for c in data["configs"] if c["secret"]} == {
        "sasl.jaas.config", "custom.token", "ssl.key.password"}
    (missing,) = data["missing"]
    assert "IncrementalAlterConfigs (API key 44)" in missing and "editing configs" in missing
    p0, p1 = data["partitions"]
    assert (p0["records"], p0["under_replicated"], p0["offline"]) == (7, False, False)
    assert (p1["under_replicated"], p1["offline"]) == (True, True)
    assert data["records"] == 14
