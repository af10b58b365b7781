"""pylog: a Kafka-compatible partitioned, replicated commit log in Python."""

__version__ = "0.1.0"
