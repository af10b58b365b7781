"""logcore.LogConfig: Kafka's topic configs, defaults and validation (docs/configuration.md)."""

from __future__ import annotations

import pytest

import logcore
from logcore import InvalidConfigError, LogConfig


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_jitter_ms == 0
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.flush_messages == 2**63 - 1
    assert c.flush_ms == 2**63 - 1
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.file_delete_delay_ms == 60000
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.preallocate is False


def test_from_properties_dotted_names() -> None:
    c = LogConfig.from_properties(
        {"segment.bytes": "1048576", "retention.ms": "-1", "message.timestamp.type": "LogAppendTime",
         "index.interval.bytes": 100, "preallocate": "true"}
    )
    assert c.preallocate is True
    assert c.segment_bytes == 1048576
    assert c.retention_ms == -1
    assert c.message_timestamp_type == "LogAppendTime"
    assert c.index_interval_bytes == 100
    assert LogConfig.from_properties(c.to_properties()) == c


@pytest.mark.parametrize(
    "props, match",
    [
        ({"segment.byte": "1"}, "unknown"),
        ({"segment.bytes": "ten"}, "integer"),
        ({"segment.bytes": "1.5"}, "integer"),
        ({"segment.bytes": "0"}, r"segment_bytes \(segment.bytes\) must be in"),
        ({"retention.ms": "-2"}, "retention_ms"),
        ({"message.timestamp.type": "WallTime"}, "message_timestamp_type"),
        ({"segment.index.bytes": "4"}, "segment_index_bytes"),
        ({"max.message.bytes": str(2**31)}, "max_message_bytes"),
        ({"preallocate": "yes"}, "true or false"),
    ],
)
def test_from_properties_rejects(props: dict, match: str) -> None:
    with pytest.raises(InvalidConfigError, match=match):
        LogConfig.from_properties(props)


def test_kwargs_rejected() -> None:
    with pytest.raises(InvalidConfigError, match="unknown log config nope"):
        LogConfig(nope=1)
    with pytest.raises(InvalidConfigError, match="must be an integer"):
        LogConfig(segment_bytes="100")
    with pytest.raises(InvalidConfigError, match="must be an integer"):
        LogConfig(segment_bytes=True)
    with pytest.raises(InvalidConfigError, match="boolean"):
        LogConfig(preallocate=1)
    assert isinstance(InvalidConfigError("x"), ValueError)


def test_immutable_replace_eq_hash_repr() -> None:
    c = LogConfig(segment_bytes=2048)
    with pytest.raises(AttributeError):
        c.segment_bytes = 1  # type: ignore[misc]
    d = c.replace(retention_bytes=10)
    assert d.segment_bytes == 2048 and d.retention_bytes == 10 and c.retention_bytes == -1
    assert c == LogConfig(segment_bytes=2048) and hash(c) == hash(LogConfig(segment_bytes=2048))
    assert c != d
    assert repr(c) == "LogConfig(segment_bytes=2048)"
    with pytest.raises(InvalidConfigError):
        c.replace(segment_ms=0)
    assert logcore.LogConfig is LogConfig
