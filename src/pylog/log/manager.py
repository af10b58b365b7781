"""LogManager: the partition logs of one log directory, their topics, IDs and configs.

Modelled on Kafka's ``LogManager`` (core/src/main/scala/kafka/log/LogManager.scala) with the
embedded single-node controller's topic store folded in:

- ``<log.dir>/<topic>-<partition>/`` holds one ``logcore.Log`` plus ``partition.metadata``
  (the topic ID);
- ``<log.dir>/pylog-topics.json`` records topics, partition counts, IDs and per-topic config
  overrides (durable: AlterConfigs survive restarts);
- ``<log.dir>/meta.properties`` holds ``cluster.id`` and ``node.id`` (a directory written by
  another node id is refused, as Kafka does);
- deleting a topic closes its logs and renames each directory to
  ``<topic>-<partition>.<uuid>-delete``; the directories are removed later in the background
  (``remove_deleted_dirs``, run by the broker in its thread pool after
  ``file.delete.delay.ms``); leftovers are removed at the next start.

Event-loop affinity: methods are called from the broker's event loop thread (the loop and one
asyncio lock serialise topic changes); the ``*_async`` variants run their blocking file work
(opening logs, fsync, renames) in the executor they are given. ``remove_deleted_dirs`` and
``apply_retention`` with a partition snapshot run on worker threads. Logs themselves allow
concurrent readers on other threads (see logcore.Log).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import logcore
from pylog import errors
from pylog._clock import SYSTEM_CLOCK, Clock
from pylog.config import (
    DOUBLE_MAX,
    TOPIC_CONFIG_DEFS,
    BrokerConfig,
    ConfigError,
    format_value,
    parse_topic_configs,
)
from pylog.log import topics as _topics
from pylog.log.cleaner import LogCleaner
from pylog.log.dir_lock import DataDirLock
from pylog.log.limits import check_limits
from pylog.log.scheduler import Scheduler
from pylog.metrics.registry import LockedHistogram

log = logging.getLogger("pylog.log")

_LONG_MAX = 2**63 - 1
# How often inactive segments' index mappings are looked at; one untouched for a whole
# period is unmapped (logcore.Log.release_idle_indexes). Not a Kafka setting: Kafka keeps
# a lazily opened index mapped until the segment goes.
INDEX_IDLE_CHECK_MS = 60_000
# With log.flush.scheduler.interval.ms at its default (Long.MAX_VALUE, Kafka's "never"),
# partitions whose flush.ms is set are still looked at this often, so that flush.ms is
# honoured on idle partitions.
DEFAULT_FLUSH_CHECK_MS = 1_000

_PARTITION_DIR = re.compile(r"(.+)-(\d+)")
_DELETE_DIR = re.compile(r".+-\d+\.[0-9a-f]{32}-delete")

# Topic configs a logcore.LogConfig understands (dotted names); the others
# (min.insync.replicas, compression.type, ...) are enforced by the broker.
_LOGCORE_KEYS = (
    "segment.bytes",
    "segment.ms",
    "segment.jitter.ms",
    "segment.index.bytes",
    "index.interval.bytes",
    "flush.messages",
    "flush.ms",
    "retention.ms",
    "retention.bytes",
    "file.delete.delay.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "preallocate",
    "cleanup.policy",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
)
# How long a topic deletion or a truncation waits for a clean of the log in progress to stop
# (it is aborted at its next batch or swap) before it goes ahead anyway (the clean then fails
# on the closed log, which is not an error).
_PAUSE_TIMEOUT_S = 30.0


@dataclasses.dataclass(eq=False)
class Partition:
    """One partition: its log and the effective topic config (a dict of dotted names)."""

    topic: str
    index: int
    topic_id: uuid.UUID
    log: Any  # logcore.Log
    directory: str
    config: dict[str, Any]


@dataclasses.dataclass(eq=False)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition]
    overrides: dict[str, Any]  # per-topic config overrides, typed values

    @property
    def config(self) -> dict[str, Any]:
        return self.partitions[0].config if self.partitions else {}


class LogManager:
    """All partition logs of a (single) log directory.

    Args:
        config: the broker configuration (log dir, topic defaults).
        clock: injected time (retention, log rolls).

    Raises (``startup``):
        logcore.LogDirError, OSError: the log dir cannot be used.
        ConfigError: ``meta.properties`` belongs to another node id.
    """

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.broker_config = config
        self.clock = clock
        self.log_dir = os.path.abspath(config.log_dir)
        self.topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._store = _topics.TopicStore(self.log_dir)
        self.cluster_id = ""
        self.pending_deletes: list[str] = []
        self._lock: asyncio.Lock | None = None
        self._dir_lock: DataDirLock | None = None
        #: Background work (Kafka's KafkaScheduler): flushes of rolled segments, flush.ms,
        #: checkpoints, idle index mappings. Started by startup, stopped by shutdown.
        self.scheduler = Scheduler(config["background.threads"], clock, name="pylog-background")
        #: The log cleaner (Kafka's LogCleaner): compacts cleanup.policy=compact logs. None
        #: when log.cleaner.enable is false. Started by startup, stopped by shutdown.
        self.cleaner: LogCleaner | None = None
        #: Milliseconds each log flush took (Kafka's LogFlushRateAndTimeMs), from the
        #: background and I/O threads that flush; read by pylog.metrics.
        self.flush_times = LockedHistogram()
        if config["log.cleaner.enable"]:
            rate = config["log.cleaner.io.max.bytes.per.second"]
            self.cleaner = LogCleaner(
                self._open_logs, threads=config["log.cleaner.threads"],
                dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
                load_factor=config["log.cleaner.io.buffer.load.factor"],
                io_buffer_size=config["log.cleaner.io.buffer.size"],
                # Kafka's default, Double.MAX_VALUE, means no limit.
                max_io_bytes_per_second=(float("inf") if rate >= DOUBLE_MAX else rate),
                backoff_ms=config["log.cleaner.backoff.ms"],
                # The last stable offset at the high watermark (Kafka's cleanableOffsets):
                # the replica manager reports the high watermark of replicated logs; a
                # single node's is its log end offset.
                upper_bound=lambda plog: plog.cleanable_upper_bound())

    # --- lifecycle -----------------------------------------------------------------------

    def startup(self) -> None:
        """Open (and recover) every partition log; load the topic store.

        Raises LogDirInUseError before anything else when another broker holds the dir.
        """
        os.makedirs(self.log_dir, exist_ok=True)
        self._dir_lock = DataDirLock(self.log_dir)  # first: nothing is read or written unlocked
        try:
            self._startup_locked()
        except BaseException:
            # A failed start leaves the directory free for the next try (the logs opened so
            # far are closed by _open_all).
            self._dir_lock.release()
            self._dir_lock = None
            raise

    def _startup_locked(self) -> None:
        self._load_meta_properties()
        stored = self._store.load()
        found: dict[str, dict[int, str]] = {}
        for entry in sorted(os.listdir(self.log_dir)):
            path = os.path.join(self.log_dir, entry)
            if not os.path.isdir(path):
                continue
            if _DELETE_DIR.fullmatch(entry):
                self.pending_deletes.append(path)
                continue
            m = _PARTITION_DIR.fullmatch(entry)
            if m:
                found.setdefault(m.group(1), {})[int(m.group(2))] = path
        changed = False
        # Directories without a store entry (a crash between creating the directories and
        # saving the store) are adopted, as Kafka discovers logs from its directories.
        for name, parts in found.items():
            if name in stored:
                continue
            try:
                _topics.validate_topic_name(name)
            except _topics.TopicNameError:
                log.warning("ignoring directory of illegal topic name %r", name)
                continue
            ids = {i for i in (_topics.read_partition_metadata(p) for p in parts.values()) if i is not None}
            topic_id = ids.pop() if len(ids) == 1 else _topics.new_topic_id()
            if sorted(parts) != list(range(len(parts))):
                log.warning("topic %r has partition directories %s; adopting 0..%d", name,
                            sorted(parts), max(parts))
            stored[name] = {
                "topic_id": _topics.topic_id_str(topic_id),
                "partitions": max(parts) + 1,
                "configs": {},
            }
            changed = True
        topics: list[Topic] = []
        for name, spec in sorted(stored.items()):
            topic_id = _topics.topic_id_from_str(spec["topic_id"])
            try:
                overrides = parse_topic_configs(spec.get("configs", {}))
            except ConfigError as exc:
                raise ConfigError(exc.key, f"stored config of topic {name!r}: {exc}") from None
            topic = Topic(name, topic_id, [], overrides)
            topic.partitions.extend([None] * int(spec["partitions"]))  # type: ignore[list-item]
            topics.append(topic)
        self.check_limits([os.path.join(self.log_dir, f"{t.name}-{i}")
                           for t in topics for i in range(len(t.partitions))])
        self._open_all(topics)
        for topic in topics:
            self._add(topic)
        if changed:
            self._save()
        self._start_background()

    def _open_all(self, topics: list[Topic]) -> None:
        """Open every partition, ``num.recovery.threads.per.data.dir`` at a time (Kafka's
        recovery thread pool). A failure closes what was opened and is raised."""
        jobs = [(t, i) for t in topics for i in range(len(t.partitions))]
        threads = max(1, min(self.broker_config["num.recovery.threads.per.data.dir"], len(jobs)))
        started = self.clock.monotonic()
        with concurrent.futures.ThreadPoolExecutor(threads, "pylog-recovery") as pool:
            futures = {pool.submit(self._open_partition, t, i): (t, i) for t, i in jobs}
            error: BaseException | None = None
            for fut in concurrent.futures.as_completed(futures):
                t, i = futures[fut]
                try:
                    t.partitions[i] = fut.result()
                except BaseException as exc:  # noqa: BLE001 - re-raised below
                    error = error or exc
        if error is not None:
            for t in topics:
                for p in t.partitions:
                    if p is not None:
                        p.log.close()
            raise error
        if jobs:
            log.info("opened %d partition logs with %d threads in %.3f s", len(jobs), threads,
                     self.clock.monotonic() - started)

    def shutdown(self) -> None:
        """Stop the background work, then close every log cleanly (flush, checkpoints,
        clean-shutdown marker). A clean in progress finishes its round first."""
        if self.cleaner is not None:
            self.cleaner.shutdown()
        self.scheduler.shutdown()
        parts = self.all_partitions()

        def close(p: Partition) -> None:
            try:
                p.log.close()
            except Exception:  # noqa: BLE001 - keep closing the others
                log.exception("closing %s-%d failed", p.topic, p.index)

        # Closing fsyncs what is not flushed yet: as in Kafka, the recovery threads
        # (num.recovery.threads.per.data.dir) do it in parallel.
        threads = max(1, min(self.broker_config["num.recovery.threads.per.data.dir"], len(parts)))
        if threads == 1:
            for p in parts:
                close(p)
        else:
            with concurrent.futures.ThreadPoolExecutor(threads, "pylog-shutdown") as pool:
                list(pool.map(close, parts))
        if self._dir_lock is not None:
            self._dir_lock.release()

    def _load_meta_properties(self) -> None:
        props = _topics.read_meta_properties(self.log_dir)
        node_id = str(self.broker_config.node_id)
        if props:
            if props.get("node.id", node_id) != node_id:
                raise ConfigError(
                    "node.id",
                    f"{self.log_dir} belongs to node {props.get('node.id')}, this broker is node {node_id}",
                )
            self.cluster_id = props.get("cluster.id", "")
        if not self.cluster_id and not self.broker_config.cluster_mode:
            # In cluster mode the id comes from ZooKeeper's /cluster/id (adopt_cluster_id).
            self.adopt_cluster_id(_topics.topic_id_str(_topics.new_topic_id()))

    def adopt_cluster_id(self, cluster_id: str) -> None:
        """Write ``meta.properties`` of a fresh log dir with this cluster id (blocking)."""
        self.cluster_id = cluster_id
        _topics.write_meta_properties(
            self.log_dir, {"version": "1", "cluster.id": cluster_id,
                           "node.id": str(self.broker_config.node_id)})

    # --- limits ----------------------------------------------------------------------------

    def check_limits(self, partition_dirs: list[str]) -> dict[str, int]:
        """See :func:`pylog.log.limits.check_limits` (for this manager's data directory)."""
        return check_limits(self.log_dir, partition_dirs)

    # --- background work (Kafka's LogManager.startup schedules the same) ----------------------

    def _start_background(self) -> None:
        cfg = self.broker_config
        flush_check = cfg["log.flush.scheduler.interval.ms"]
        if flush_check >= _LONG_MAX:
            flush_check = DEFAULT_FLUSH_CHECK_MS
        sched = self.scheduler
        sched.schedule("log-flusher", self.flush_dirty_logs, delay_ms=flush_check, period_ms=flush_check)
        for name, key, fn in (
            ("recovery-point-checkpoint", "log.flush.offset.checkpoint.interval.ms",
             self.checkpoint_recovery_points),
            ("log-start-offset-checkpoint", "log.flush.start.offset.checkpoint.interval.ms",
             self.checkpoint_log_start_offsets),
        ):
            interval = cfg[key]
            if interval > 0:  # 0: only at shutdown and when a log asks for it
                sched.schedule(name, fn, delay_ms=interval, period_ms=interval)
        sched.schedule("release-idle-indexes", self.release_idle_indexes,
                       delay_ms=INDEX_IDLE_CHECK_MS, period_ms=INDEX_IDLE_CHECK_MS)
        if not sched.is_started:
            sched.startup()
        if self.cleaner is not None:
            self.cleaner.startup()

    def _partitions_snapshot(self) -> list[Partition]:
        """All partitions, from a background thread (topics change on the loop meanwhile)."""
        for _ in range(10):
            try:
                return [p for t in list(self.topics.values()) for p in t.partitions]
            except RuntimeError:  # the dict changed size during the copy: try again
                continue
        return []

    def _open_logs(self) -> list[Any]:
        """The open partition logs (the cleaner's view; any thread)."""
        return [p.log for p in self._partitions_snapshot() if not p.log.closed]

    def _each_log(self, what: str, fn: Callable[[Partition], object]) -> int:
        done = 0
        for p in self._partitions_snapshot():
            if p.log.closed:
                continue
            try:
                if fn(p):
                    done += 1
            except logcore.LogcoreError as exc:
                if not p.log.closed:  # closed meanwhile (topic deleted): not an error
                    log.error("%s of %s-%d failed: %s", what, p.topic, p.index, exc)
        return done

    def flush_dirty_logs(self) -> int:
        """Flush every log whose ``flush.ms`` has passed since its last flush (Kafka's
        ``flushDirtyLogs``; the ``log-flusher`` task). Returns how many were flushed."""
        now = self.clock.time_ms()

        def flush(p: Partition) -> bool:
            flush_ms = p.config.get("flush.ms", _LONG_MAX)
            if flush_ms is None or flush_ms >= _LONG_MAX or now - p.log.last_flush_ms < flush_ms:
                return False
            return bool(p.log.flush_up_to(p.log.log_end_offset))

        return self._each_log("flush", flush)

    def checkpoint_recovery_points(self) -> int:
        """Write every changed recovery point (``log.flush.offset.checkpoint.interval.ms``)."""
        return self._each_log("recovery-point checkpoint", lambda p: p.log.checkpoint_recovery_point())

    def checkpoint_log_start_offsets(self) -> int:
        """Write every changed log start offset (``log.flush.start.offset.checkpoint.interval.ms``)."""
        return self._each_log("log-start-offset checkpoint",
                              lambda p: p.log.checkpoint_log_start_offset())

    def release_idle_indexes(self) -> int:
        """Unmap index mappings of old segments no read used for a whole period."""
        released = 0
        for p in self._partitions_snapshot():
            released += p.log.release_idle_indexes()
        return released

    def _on_roll(self, plog: Any, base_offset: int) -> None:
        """A log rolled (called on the appending thread): flush the segments below the new
        one in the background, as Kafka's ``UnifiedLog.roll`` schedules ``flush-log``. A
        compacted log's rolled segment is cleanable now: the cleaner is woken (Kafka's
        threads only look again after ``log.cleaner.backoff.ms``; under a commit storm on
        ``__consumer_offsets`` that is 15 s of segments piling up)."""
        self.scheduler.schedule_once("flush-log", functools.partial(self._flush_rolled, plog, base_offset))
        if self.cleaner is not None and plog.config.compact:
            self.cleaner.wake()

    def _on_flush(self, seconds: float) -> None:
        self.flush_times.observe(seconds * 1000.0)

    @staticmethod
    def _flush_rolled(plog: Any, base_offset: int) -> None:
        try:
            plog.flush_up_to(base_offset)
        except logcore.LogcoreError as exc:
            if not plog.closed:
                log.error("flushing %s up to offset %d failed: %s", plog.directory, base_offset, exc)

    # --- lookups ---------------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all_partitions(self) -> list[Partition]:
        return [p for t in self.topics.values() for p in t.partitions]

    # --- topic changes ---------------------------------------------------------------------

    def check_new_topic(self, name: str, num_partitions: int, replication_factor: int,
                        configs: Mapping[str, Any]) -> dict[str, Any]:
        """Validate a CreateTopics entry; returns the parsed overrides. Raises ApiError."""
        try:
            _topics.validate_topic_name(name)
        except _topics.TopicNameError as exc:
            raise errors.InvalidTopicError(str(exc)) from None
        if name in self.topics:
            raise errors.TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        key = _topics.collision_key(name)
        for other in self.topics:
            if _topics.collision_key(other) == key:
                raise errors.InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")
        if num_partitions < 1:
            raise errors.InvalidPartitionsError("Number of partitions must be larger than 0.")
        if replication_factor < 1:
            raise errors.InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if replication_factor > 1:
            raise errors.InvalidReplicationFactorError(f"Unable to replicate the partition {replication_factor} time(s): "
                "the number of brokers is 1.",
            )
        try:
            overrides = parse_topic_configs(configs)
            self._effective(overrides)
        except (ConfigError, logcore.InvalidConfigError) as exc:
            raise errors.InvalidConfigError(str(exc)) from None
        return overrides

    def _resolve_defaults(self, num_partitions: int | None, replication_factor: int) -> tuple[int, int]:
        if num_partitions is None or num_partitions == -1:
            num_partitions = self.broker_config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.broker_config["default.replication.factor"]
        return num_partitions, replication_factor

    def create_topic(self, name: str, num_partitions: int | None = None,
                     replication_factor: int = 1, configs: Mapping[str, Any] | None = None) -> Topic:
        """Create a topic with its partition directories. Raises ApiError (see check_new_topic)."""
        num_partitions, replication_factor = self._resolve_defaults(num_partitions, replication_factor)
        overrides = self.check_new_topic(name, num_partitions, replication_factor, configs or {})
        topic = Topic(name, _topics.new_topic_id(), [], overrides)
        topic.partitions.extend(self._open_partitions(topic, 0, num_partitions))
        self._add(topic)
        self._save()
        self._log_created(topic)
        return topic

    def _log_created(self, topic: Topic) -> None:
        log.info("created topic %s (%d partitions, id %s)", topic.name, len(topic.partitions),
                 _topics.topic_id_str(topic.topic_id))

    def delete_topic(self, name: str) -> None:
        """Close the topic's logs and rename their directories ``...-delete``."""
        topic = self._detach(name)
        self.pending_deletes.extend(self._close_and_rename(topic, self._store_doc()))

    def _detach(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError("This server does not host this topic-partition.")
        if not self.broker_config["delete.topic.enable"]:
            raise errors.TopicDeletionDisabledError("Topic deletion is disabled.")
        del self.topics[name]
        self._by_id.pop(topic.topic_id, None)
        return topic

    def _close_and_rename(self, topic: Topic, doc: dict[str, Any]) -> list[str]:
        """Blocking part of a deletion (any thread): save the store, close, rename."""
        self._store.save(doc)
        targets = []
        for p in topic.partitions:
            # Kafka's abortAndPauseCleaning: no clean runs while the log closes and its
            # directory is renamed.
            with self._cleaning_paused(p):
                p.log.close()
                target = f"{p.directory}.{uuid.uuid4().hex}-delete"
                os.rename(p.directory, target)
            if self.cleaner is not None:
                self.cleaner.forget(p.log)
            targets.append(target)
        log.info("deleted topic %s", topic.name)
        return targets

    @contextlib.contextmanager
    def _cleaning_paused(self, p: Partition) -> Iterator[None]:
        """Keep the cleaner off ``p``'s log (waiting for a clean in progress to end, up to
        ``_PAUSE_TIMEOUT_S``), then let it back on. Blocking: a worker thread."""
        cleaner = self.cleaner
        if cleaner is None:
            yield
            return
        if not cleaner.pause(p.log, _PAUSE_TIMEOUT_S):
            log.warning("%s-%d: the clean in progress did not end within %.0f s; going ahead",
                        p.topic, p.index, _PAUSE_TIMEOUT_S)
        try:
            yield
        finally:
            cleaner.resume(p.log)

    def truncate_to(self, p: Partition, offset: int) -> bool:
        """Truncate ``p``'s log to ``offset`` with its cleaning paused (Kafka's
        ``LogManager.truncateTo``: abortAndPauseCleaning, truncate, resume). Returns
        whether anything was removed. Blocking: a worker thread."""
        with self._cleaning_paused(p):
            return bool(p.log.truncate_to(offset))

    def _check_partition_count(self, name: str, count: int) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        if count < current:
            raise errors.InvalidPartitionsError(
                f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise errors.InvalidPartitionsError(f"Topic already has {current} partitions.")
        return topic

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> Topic:
        topic = self._check_partition_count(name, count)
        if not validate_only:
            topic.partitions.extend(self._open_partitions(topic, len(topic.partitions), count))
            self._save()
        return topic

    def _check_configs(self, name: str, overrides: Mapping[str, Any]) -> tuple[Topic, dict[str, Any], Any]:
        topic = self.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        effective, log_config = self.check_topic_overrides(overrides)
        return topic, effective, log_config

    def check_topic_overrides(self, overrides: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
        """(effective config, logcore config) for these parsed overrides, or INVALID_CONFIG."""
        try:
            return self._effective(overrides)
        except (ConfigError, logcore.InvalidConfigError) as exc:
            raise errors.InvalidConfigError(str(exc)) from None

    def _apply_configs(self, topic: Topic, effective: dict[str, Any], log_config: Any) -> None:
        for p in topic.partitions:
            p.config = effective
            _set_log_config(p.log, log_config)
        if self.cleaner is not None and log_config.compact:
            # The topic may have become compacted, or its compaction settings changed.
            self.cleaner.wake()

    def set_topic_configs(self, name: str, overrides: Mapping[str, Any], validate_only: bool = False) -> None:
        """Replace a topic's overrides (already parsed) and apply them to the running logs."""
        topic, effective, log_config = self._check_configs(name, overrides)
        if validate_only:
            return
        topic.overrides = dict(overrides)
        self._save()
        self._apply_configs(topic, effective, log_config)

    # --- the same changes from the event loop: blocking file work in a worker thread ---------
    #
    # Checks and every change to ``topics`` happen on the loop; opening logs, fsyncing the
    # store and renaming directories run in ``executor``. One asyncio lock serialises topic
    # changes, so a deletion's rename finishes before a topic of the same name is created.

    def _admin_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def create_topic_async(self, executor: Any, name: str, num_partitions: int | None = None,
                                 replication_factor: int = 1,
                                 configs: Mapping[str, Any] | None = None, *,
                                 topic_id: uuid.UUID | None = None) -> Topic:
        """Create a topic (``topic_id``: the cluster's id of it, for a replica; new when None)."""
        async with self._admin_lock():
            loop = asyncio.get_running_loop()
            num_partitions, replication_factor = self._resolve_defaults(num_partitions, replication_factor)
            overrides = self.check_new_topic(name, num_partitions, replication_factor, configs or {})
            topic = Topic(name, topic_id or _topics.new_topic_id(), [], overrides)
            parts = await loop.run_in_executor(executor, self._open_partitions, topic, 0, num_partitions)
            topic.partitions.extend(parts)
            self._add(topic)
            await loop.run_in_executor(executor, self._store.save, self._store_doc())
            self._log_created(topic)
            return topic

    async def delete_topic_async(self, executor: Any, name: str) -> Topic:
        async with self._admin_lock():
            topic = self._detach(name)
            targets = await asyncio.get_running_loop().run_in_executor(
                executor, self._close_and_rename, topic, self._store_doc())
            self.pending_deletes.extend(targets)
            return topic

    async def create_partitions_async(self, executor: Any, name: str, count: int,
                                      validate_only: bool = False) -> Topic:
        async with self._admin_lock():
            topic = self._check_partition_count(name, count)
            if not validate_only:
                loop = asyncio.get_running_loop()
                parts = await loop.run_in_executor(executor, self._open_partitions, topic,
                                                   len(topic.partitions), count)
                topic.partitions.extend(parts)
                await loop.run_in_executor(executor, self._store.save, self._store_doc())
            return topic

    async def set_topic_configs_async(self, executor: Any, name: str, overrides: Mapping[str, Any],
                                      validate_only: bool = False) -> None:
        async with self._admin_lock():
            topic, effective, log_config = self._check_configs(name, overrides)
            if validate_only:
                return
            previous = topic.overrides
            topic.overrides = dict(overrides)
            try:
                await asyncio.get_running_loop().run_in_executor(executor, self._store.save, self._store_doc())
            except BaseException:
                topic.overrides = previous
                raise
            self._apply_configs(topic, effective, log_config)

    # --- retention ---------------------------------------------------------------------------

    def apply_retention(self, now_ms: int | None = None,
                        partitions: list[Partition] | None = None) -> int:
        """Run retention on every log the cleaner does not look after. Returns the number
        of segments deleted (as reported by the logs).

        logcore applies the policy: time and size retention only with ``delete``; every log
        loses the segments below its log start offset (DeleteRecords) and the ``.deleted``
        files whose ``file.delete.delay.ms`` passed. Compacted logs are left to the cleaner
        threads while the cleaner runs (Kafka's ``cleanupLogs`` takes the non-compacted
        logs; its cleaner threads delete old segments of the compacted ones), so that
        retention never runs on a log while it is cleaned.

        May run on a worker thread when given ``partitions``, a snapshot taken on the loop
        (topics may be created or deleted meanwhile; a log closed by a deletion is skipped).
        """
        now = self.clock.time_ms() if now_ms is None else now_ms
        deleted = 0
        cleaner_runs = self.cleaner is not None and self.cleaner.running
        for p in self.all_partitions() if partitions is None else partitions:
            if p.log.closed or (cleaner_runs and "compact" in p.config["cleanup.policy"]):
                continue
            try:
                n = p.log.apply_retention(now)
            except logcore.LogcoreError as exc:
                if not p.log.closed:
                    log.error("retention on %s-%d failed: %s", p.topic, p.index, exc)
                continue
            deleted += n if isinstance(n, int) else 0
        return deleted

    def take_pending_deletes(self) -> list[str]:
        out, self.pending_deletes = self.pending_deletes, []
        return out

    @staticmethod
    def remove_deleted_dirs(paths: list[str]) -> None:
        """Remove renamed ``-delete`` directories (blocking: run in a worker thread)."""
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)

    # --- helpers -----------------------------------------------------------------------------

    def _effective(self, overrides: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
        effective = self.broker_config.topic_defaults()
        effective.update(overrides)
        props = {k: str(format_value(TOPIC_CONFIG_DEFS[k].type, effective[k])) for k in _LOGCORE_KEYS}
        if effective["retention.ms"] is not None and effective["retention.ms"] < -1:
            raise ConfigError("retention.ms", "must be at least -1")
        return effective, logcore.LogConfig.from_properties(props)

    def _open_partitions(self, topic: Topic, start: int, stop: int) -> list[Partition]:
        """Open (creating) partitions ``start..stop-1`` (blocking; any thread)."""
        return [self._open_partition(topic, index) for index in range(start, stop)]

    def _open_partition(self, topic: Topic, index: int) -> Partition:
        directory = os.path.join(self.log_dir, f"{topic.name}-{index}")
        effective, log_config = self._effective(topic.overrides)
        os.makedirs(directory, exist_ok=True)
        stored_id = _topics.read_partition_metadata(directory)
        if stored_id != topic.topic_id:
            _topics.write_partition_metadata(directory, topic.topic_id)
        plog = logcore.Log(directory, log_config, clock=self.clock)
        plog.on_roll = functools.partial(self._on_roll, plog)
        plog.on_flush = self._on_flush
        stats = plog.recovery_stats
        if plog.recovered:
            log.info("recovered %s-%d after an unclean shutdown: scanned %d of %d segments "
                     "(%d bytes) from recovery point %d, truncated %d bytes", topic.name, index,
                     stats.segments_scanned, stats.segments, stats.bytes_scanned,
                     stats.recovery_point, stats.truncated_bytes)
        return Partition(topic.name, index, topic.topic_id, plog, directory, effective)

    def _add(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def _store_doc(self) -> dict[str, Any]:
        """The store's content, built on the loop (a snapshot a worker thread may write)."""
        doc = {}
        for name, t in self.topics.items():
            doc[name] = {
                "topic_id": _topics.topic_id_str(t.topic_id),
                "partitions": len(t.partitions),
                "configs": {k: format_value(TOPIC_CONFIG_DEFS[k].type, v) for k, v in t.overrides.items()},
            }
        return doc

    def _save(self) -> None:
        self._store.save(self._store_doc())


def _set_log_config(plog: Any, log_config: Any) -> None:
    """Give a running log its new config (the storage layer's update hook)."""
    update = getattr(plog, "update_config", None)
    if update is not None:
        update(log_config)
    else:
        plog.config = log_config

