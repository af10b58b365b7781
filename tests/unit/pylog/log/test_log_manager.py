"""LogManager: topic directories, IDs, durable configs, deletion, adoption, retention."""

from __future__ import annotations

import os

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.config import BrokerConfig, ConfigError
from pylog.log import LogManager
from pylog.log import topics as t


def _batch(n: int = 3, ts: int | None = None) -> bytes:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(b"v%d" % i, key=b"k", timestamp_ms=ts)
    return b.build()


@pytest.fixture
def config(tmp_path) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "2"})


def _manager(config: BrokerConfig, clock=None) -> LogManager:
    m = LogManager(config, clock or ManualClock())
    m.startup()
    return m


def test_create_layout_and_restart(config: BrokerConfig) -> None:
    m = _manager(config)
    topic = m.create_topic("orders", 3, configs={"retention.ms": "1000"})
    assert [p.index for p in topic.partitions] == [0, 1, 2]
    for p in topic.partitions:
        assert os.path.isdir(p.directory)
        assert os.path.basename(p.directory) == f"orders-{p.index}"
        assert t.read_partition_metadata(p.directory) == topic.topic_id
        assert p.config["retention.ms"] == 1000
        assert p.log.config.retention_ms == 1000
    # record timestamps near the manager's clock (message.timestamp.after.max.ms is 1 hour)
    topic.partitions[1].log.append(bytearray(_batch(ts=m.clock.time_ms())))
    cluster = m.cluster_id
    m.shutdown()
    m2 = _manager(config)
    again = m2.topics["orders"]
    assert again.topic_id == topic.topic_id and len(again.partitions) == 3
    assert again.overrides == {"retention.ms": 1000}
    assert again.partitions[1].log.log_end_offset == 3
    assert m2.cluster_id == cluster
    m2.shutdown()


def test_default_partitions_and_errors(config: BrokerConfig) -> None:
    m = _manager(config)
    assert len(m.create_topic("a.b").partitions) == 2
    with pytest.raises(errors.TopicAlreadyExistsError):
        m.create_topic("a.b")
    with pytest.raises(errors.InvalidTopicError, match="collides"):
        m.create_topic("a_b")
    with pytest.raises(errors.InvalidTopicError):
        m.create_topic("bad name")
    with pytest.raises(errors.InvalidPartitionsError):
        m.create_topic("zero", 0)
    with pytest.raises(errors.InvalidReplicationFactorError):
        m.create_topic("rf", 1, replication_factor=2)
    with pytest.raises(errors.InvalidConfigError):
        m.create_topic("cfg", 1, configs={"retention.ms": "soon"})
    with pytest.raises(errors.InvalidConfigError):
        m.create_topic("cfg", 1, configs={"no.such": "1"})
    assert set(m.topics) == {"a.b"}
    m.shutdown()


def test_delete_renames_then_removes(config: BrokerConfig) -> None:
    m = _manager(config)
    m.create_topic("gone", 2)
    m.delete_topic("gone")
    assert "gone" not in m.topics
    pending = m.take_pending_deletes()
    assert len(pending) == 2 and all(p.endswith("-delete") for p in pending)
    assert all(os.path.isdir(p) for p in pending)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        m.delete_topic("gone")
    # The name can be reused at once, with a new ID.
    m.create_topic("gone", 1)
    LogManager.remove_deleted_dirs(pending)
    assert not any(os.path.exists(p) for p in pending)
    m.shutdown()


def test_leftover_delete_dirs_are_found_at_start(config: BrokerConfig) -> None:
    m = _manager(config)
    m.create_topic("x", 1)
    m.delete_topic("x")
    m.shutdown()
    m2 = _manager(config)
    assert len(m2.take_pending_deletes()) == 1
    assert "x" not in m2.topics
    m2.shutdown()


def test_orphan_partition_dirs_are_adopted(config: BrokerConfig) -> None:
    m = _manager(config)
    topic = m.create_topic("orphan", 2)
    m.shutdown()
    os.unlink(os.path.join(m.log_dir, t.STORE_NAME))
    m2 = _manager(config)
    assert m2.topics["orphan"].topic_id == topic.topic_id
    assert len(m2.topics["orphan"].partitions) == 2
    m2.shutdown()


def test_node_id_mismatch_is_refused(config: BrokerConfig, tmp_path) -> None:
    _manager(config).shutdown()
    other = BrokerConfig({"log.dirs": config.log_dir, "node.id": "5"})
    with pytest.raises(ConfigError, match="node.id"):
        LogManager(other).startup()


def test_alter_configs_apply_to_running_logs_and_persist(config: BrokerConfig) -> None:
    m = _manager(config)
    m.create_topic("c", 1)
    m.set_topic_configs("c", {"max.message.bytes": 100, "cleanup.policy": ["compact"]})
    p = m.get_partition("c", 0)
    assert p is not None and p.log.config.max_message_bytes == 100
    with pytest.raises(logcore.RecordTooLargeError):
        p.log.append(bytearray(_batch(50)))
    with pytest.raises(errors.InvalidConfigError):
        m.set_topic_configs("c", {"segment.bytes": 1})
    m.shutdown()
    m2 = _manager(config)
    assert m2.topics["c"].overrides == {"max.message.bytes": 100, "cleanup.policy": ["compact"]}
    m2.shutdown()


def test_create_partitions(config: BrokerConfig) -> None:
    m = _manager(config)
    m.create_topic("grow", 1)
    m.create_partitions("grow", 3)
    assert len(m.topics["grow"].partitions) == 3
    with pytest.raises(errors.InvalidPartitionsError):
        m.create_partitions("grow", 2)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        m.create_partitions("nope", 2)
    m.shutdown()
    assert len(_manager(config).topics["grow"].partitions) == 3


def test_retention_by_time_with_injected_clock(config: BrokerConfig) -> None:
    clock = ManualClock(time_ms=1_700_000_000_000)
    m = _manager(config, clock)
    m.create_topic("r", 1, configs={"retention.ms": "1000", "segment.bytes": "200",
                                    "file.delete.delay.ms": "0"})
    p = m.get_partition("r", 0)
    assert p is not None
    for _ in range(5):
        p.log.append(bytearray(_batch(3, ts=clock.time_ms())))
    assert p.log.num_segments > 1
    assert m.apply_retention() == 0
    clock.advance(10_000)
    assert m.apply_retention() > 0
    assert p.log.log_start_offset > 0
    m.shutdown()


def test_async_changes_serialise_and_run_file_work_in_the_executor(config: BrokerConfig) -> None:
    import asyncio
    import concurrent.futures
    import threading

    m = _manager(config)
    threads: set[str] = set()
    real_open = m._open_partitions

    def spy(*args):
        threads.add(threading.current_thread().name)
        return real_open(*args)

    m._open_partitions = spy  # type: ignore[method-assign]
    pool = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="io")

    async def scenario() -> list:
        # Two creations of one name race: one wins, the other sees TOPIC_ALREADY_EXISTS.
        results = await asyncio.gather(m.create_topic_async(pool, "race", 2), m.create_topic_async(pool, "race", 2),
                                       return_exceptions=True)
        # Delete and recreate at once: the rename finishes before the new directories exist.
        old_id = m.topics["race"].topic_id
        await asyncio.gather(m.delete_topic_async(pool, "race"), m.create_topic_async(pool, "race", 1))
        assert m.topics["race"].topic_id != old_id and len(m.topics["race"].partitions) == 1
        await m.create_partitions_async(pool, "race", 3)
        await m.set_topic_configs_async(pool, "race", {"retention.ms": 5})
        return results

    try:
        results = asyncio.run(asyncio.wait_for(scenario(), 20))
    finally:
        pool.shutdown()
    assert sum(isinstance(r, errors.TopicAlreadyExistsError) for r in results) == 1
    assert threads and all(t.startswith("io") for t in threads)
    assert len(m.take_pending_deletes()) == 2
    m.shutdown()
    again = _manager(config)
    assert len(again.topics["race"].partitions) == 3 and again.topics["race"].overrides == {"retention.ms": 5}
    again.shutdown()
