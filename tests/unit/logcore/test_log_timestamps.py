"""logcore.Log: message.timestamp.before.max.ms / message.timestamp.after.max.ms (KIP-937).

Kafka's LogValidator judges EVERY record of a CreateTime leader append against the clock,
not only the batch header: a record older than the batch's base timestamp (a negative
timestamp delta) must be caught too. Runs compiled and with LOGCORE_PUREPYTHON=1.
"""

from __future__ import annotations

import os

import pytest
from _harness.kafka_format import read_batches, segment_path

import logcore
from logcore import (
    BatchBuilder,
    InvalidConfigError,
    InvalidTimestampError,
    Log,
    LogConfig,
    ManualClock,
    RecordBatch,
    iter_batches,
)

T0 = 1_700_000_000_000
LONG_MAX = 2**63 - 1
HOUR = 3_600_000
BEFORE = 60_000
AFTER = 10_000


def build(timestamps: list[int], **kw) -> bytes:
    b = BatchBuilder(**kw)
    for i, ts in enumerate(timestamps):
        b.append(b"value-%d" % i, key=b"k", timestamp_ms=ts)
    return b.build()


def windowed(**kw) -> LogConfig:
    base = dict(message_timestamp_before_max_ms=BEFORE, message_timestamp_after_max_ms=AFTER)
    base.update(kw)
    return LogConfig(**base)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def logdir(tmp_path) -> str:
    return str(tmp_path / "topic-0")


def stored_offsets(logdir: str) -> list[int]:
    path = segment_path(logdir, 0, ".log")
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    return [r.offset for b in iter_batches(data) for r in b]


# --------------------------------------------------------------------------- config


def test_defaults_are_kafka_4() -> None:
    c = LogConfig()
    assert c.message_timestamp_before_max_ms == LONG_MAX
    assert c.message_timestamp_after_max_ms == HOUR  # KIP-1030 (Kafka 4.0): one hour


def test_config_round_trip_with_dotted_names() -> None:
    c = LogConfig.from_properties({"message.timestamp.before.max.ms": "86400000",
                                   "message.timestamp.after.max.ms": 5000})
    assert (c.message_timestamp_before_max_ms, c.message_timestamp_after_max_ms) == (86_400_000, 5000)
    props = c.to_properties()
    assert props["message.timestamp.before.max.ms"] == "86400000"
    assert props["message.timestamp.after.max.ms"] == "5000"
    assert LogConfig.from_properties(props) == c
    assert LogConfig().to_properties()["message.timestamp.before.max.ms"] == str(LONG_MAX)
    assert c.replace(message_timestamp_after_max_ms=0).message_timestamp_after_max_ms == 0


@pytest.mark.parametrize("key", ["message.timestamp.before.max.ms", "message.timestamp.after.max.ms"])
@pytest.mark.parametrize("value", ["-1", "soon", "1.5", str(LONG_MAX + 1)])
def test_config_rejects_non_long_or_negative(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})


def test_config_rejects_bool_kwarg() -> None:
    with pytest.raises(InvalidConfigError, match="message_timestamp_after_max_ms"):
        LogConfig(message_timestamp_after_max_ms=True)


# --------------------------------------------------------------------------- refusals


def test_later_record_older_than_the_window_is_refused(logdir, clock) -> None:
    """The case a header-only check misses: base and max timestamps are recent."""
    old = T0 - BEFORE - 1
    data = build([T0, old, T0 - 5])
    header = RecordBatch(data)
    assert (header.base_timestamp, header.max_timestamp) == (T0, T0)  # the header looks fine
    with Log(logdir, windowed(), clock=clock) as log:
        log.append(build([T0]))
        size = log.size_in_bytes
        with pytest.raises(InvalidTimestampError) as ei:
            log.append(data)
        exc = ei.value
        assert exc.timestamp == old
        assert (exc.low, exc.high) == (T0 - BEFORE, T0 + AFTER)
        assert exc.violations == ((1, old),)
        assert str(old) in str(exc) and f"[{T0 - BEFORE}, {T0 + AFTER}]" in str(exc)
        # nothing written: end offset, size and the file are as before
        assert log.log_end_offset == 1 and log.size_in_bytes == size
        assert stored_offsets(logdir) == [0]
        # the log goes on from where it was
        assert log.append(build([T0, T0 - BEFORE])).first_offset == 1
        assert log.log_end_offset == 3
    assert stored_offsets(logdir) == [0, 1, 2]


def test_compressed_batch_with_negative_delta_is_refused(logdir, clock) -> None:
    old = T0 - BEFORE - 1000
    data = build([T0, T0 + 1, old, T0], compression="gzip")
    with Log(logdir, windowed(), clock=clock) as log:
        with pytest.raises(InvalidTimestampError) as ei:
            log.append(data)
        assert ei.value.violations == ((2, old),)
        assert log.log_end_offset == 0 and log.size_in_bytes == 0
    assert read_batches(segment_path(logdir, 0, ".log")) == ([], 0)


def test_record_too_far_in_the_future_is_refused(logdir, clock) -> None:
    future = T0 + AFTER + 1
    with Log(logdir, windowed(), clock=clock) as log:
        with pytest.raises(InvalidTimestampError) as ei:
            log.append(bytearray(build([T0, future, T0 + 2 * AFTER])))
        assert ei.value.timestamp == future
        assert ei.value.violations == ((1, future), (2, T0 + 2 * AFTER))
        assert "1 more" in str(ei.value)
        assert log.log_end_offset == 0
    assert stored_offsets(logdir) == []


def test_default_config_bounds_the_future_to_one_hour(logdir, clock) -> None:
    with Log(logdir, LogConfig(), clock=clock) as log:
        with pytest.raises(InvalidTimestampError):
            log.append(build([T0 + HOUR + 1]))
        log.append(build([T0 + HOUR, T0 - 10 * 365 * 86_400_000, 0]))  # the past is unbounded
        assert log.log_end_offset == 3


def test_boundaries_exactly_at_the_limits_are_accepted(logdir, clock) -> None:
    with Log(logdir, windowed(), clock=clock) as log:
        info = log.append(build([T0, T0 - BEFORE, T0 + AFTER]))
        assert (info.first_offset, info.last_offset) == (0, 2)
        with pytest.raises(InvalidTimestampError):
            log.append(build([T0 - BEFORE - 1]))
        with pytest.raises(InvalidTimestampError):
            log.append(build([T0 + AFTER + 1]))
        # zero-width windows: only the clock's own millisecond passes
        log.config = windowed(message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0)
        log.append(build([T0]))
        with pytest.raises(InvalidTimestampError):
            log.append(build([T0, T0 - 1]))
        assert log.log_end_offset == 4


def test_the_window_follows_the_injected_clock(logdir, clock) -> None:
    with Log(logdir, windowed(), clock=clock) as log:
        with pytest.raises(InvalidTimestampError):
            log.append(build([T0, T0 + 5 * AFTER]))
        clock.advance(4 * AFTER)
        log.append(build([T0, T0 + 5 * AFTER]))
        clock.advance(BEFORE)
        with pytest.raises(InvalidTimestampError) as ei:
            log.append(build([T0 + 5 * AFTER, T0]))
        assert ei.value.low == clock.time_ms() - BEFORE == T0 + 4 * AFTER
        assert ei.value.violations == ((1, T0),)
        assert log.log_end_offset == 2


def test_several_batches_count_records_across_the_set(logdir, clock) -> None:
    old = T0 - BEFORE - 1
    data = build([T0, T0]) + build([T0, old], base_offset=2)
    with Log(logdir, windowed(), clock=clock) as log:
        with pytest.raises(InvalidTimestampError) as ei:
            log.append(data)
        assert ei.value.violations == ((3, old),)
        assert log.log_end_offset == 0


def test_records_without_a_timestamp_are_not_judged(logdir, clock) -> None:
    """Kafka skips RecordBatch.NO_TIMESTAMP (-1) in the window check."""
    with Log(logdir, windowed(), clock=clock) as log:
        log.append(build([T0, -1, T0]))
        assert log.log_end_offset == 3
        with pytest.raises(InvalidTimestampError) as ei:
            log.append(build([-1, T0, -2]))
        assert ei.value.violations == ((2, -2),)
        assert log.log_end_offset == 3


def test_update_config_changes_the_window_live(logdir, clock) -> None:
    data = build([T0, T0 - 2 * BEFORE])
    with Log(logdir, windowed(), clock=clock) as log:
        with pytest.raises(InvalidTimestampError):
            log.append(data)
        log.update_config(windowed(message_timestamp_before_max_ms=LONG_MAX))
        log.append(data)
        assert log.log_end_offset == 2


# --------------------------------------------------------------------------- not checked


def test_log_append_time_logs_accept_any_timestamp(logdir, clock) -> None:
    cfg = windowed(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=0,
                   message_timestamp_after_max_ms=0)
    with Log(logdir, cfg, clock=clock) as log:
        info = log.append(build([T0 + 10**12, 0, -(2**40), T0 - BEFORE * 10]))
        assert info.log_append_time_ms == T0 and log.log_end_offset == 4
    with open(segment_path(logdir, 0, ".log"), "rb") as f:
        (b,) = list(iter_batches(f.read()))
    assert [r.timestamp for r in b] == [T0] * 4


def test_replica_appends_are_not_checked(logdir, clock) -> None:
    with Log(logdir, windowed(), clock=clock) as log:
        log.append(build([T0 - 10 * BEFORE, T0 + 10 * AFTER]), assign_offsets=False)
        assert log.log_end_offset == 2


def test_happy_path_walks_no_records(logdir, clock, monkeypatch) -> None:
    """Accepted appends use validate_for_append's min/max; only a refusal walks records."""
    import logcore.append as log_module

    walked: list[int] = []
    real = log_module.iter_batches

    def counting(buf):
        walked.append(1)
        return real(buf)

    monkeypatch.setattr(log_module, "iter_batches", counting)
    with Log(logdir, windowed(), clock=clock) as log:
        for _ in range(5):
            log.append(build([T0, T0 - BEFORE, T0 + AFTER, T0 - 1]))
        assert walked == []
        with pytest.raises(InvalidTimestampError):
            log.append(build([T0, T0 - BEFORE - 1]))
        assert walked == [1]


def test_error_is_a_logcore_error_with_defaults() -> None:
    e = InvalidTimestampError("plain")
    assert isinstance(e, logcore.LogcoreError) and isinstance(e, ValueError)
    assert (e.timestamp, e.low, e.high, e.violations) == (None, None, None, ())
