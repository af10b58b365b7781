"""Partition logs of a broker: LogManager, topic store, topic IDs, background work
(docs/architecture.md)."""

from pylog.log.manager import LogManager, Partition, Topic
from pylog.log.topics import TopicNameError, validate_topic_name

__all__ = ["LogManager", "Partition", "Topic", "TopicNameError", "validate_topic_name"]
