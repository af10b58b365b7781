"""``pylog cluster start`` gives the internal topics Kafka's default replication."""

from __future__ import annotations

from pylog.config import BrokerConfig
from pylog.controller.launcher import internal_topic_defaults


def test_three_brokers_get_kafkas_internal_topic_defaults() -> None:
    config = BrokerConfig.from_sources(None, internal_topic_defaults(3))
    assert config["offsets.topic.replication.factor"] == 3
    assert config["transaction.state.log.replication.factor"] == 3
    assert config["transaction.state.log.min.isr"] == 2
    assert config["share.coordinator.state.topic.replication.factor"] == 3
    assert config["share.coordinator.state.topic.min.isr"] == 2


def test_small_clusters_are_capped_and_user_overrides_win() -> None:
    config = BrokerConfig.from_sources(None, internal_topic_defaults(1))
    assert config["offsets.topic.replication.factor"] == 1
    assert config["transaction.state.log.min.isr"] == 1
    assert config["share.coordinator.state.topic.min.isr"] == 1
    two = BrokerConfig.from_sources(
        None, [*internal_topic_defaults(2), "offsets.topic.replication.factor=1"])
    assert two["offsets.topic.replication.factor"] == 1
    assert two["transaction.state.log.replication.factor"] == 2
