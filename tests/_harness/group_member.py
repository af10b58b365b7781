"""One group consumer in its own process, for tests/integration/test_group_handover.py.

    python group_member.py CLIENT BOOTSTRAP GROUP TOPIC ASSIGNOR SESSION_MS HEARTBEAT_MS \\
        COMMIT_INTERVAL_MS OUT STOP

CLIENT is ``confluent``, ``kafka-python`` or ``aiokafka``; ASSIGNOR is ``range``,
``roundrobin``, ``sticky`` (eager) or ``cooperative-sticky`` (not aiokafka). The member
consumes TOPIC in GROUP the at-least-once way: it writes every record it processes to OUT
(and flushes) before it commits the offset after it, and commits nothing it has not
processed: every COMMIT_INTERVAL_MS (synchronously), and what it processed of a partition
when that partition is revoked (a rebalance or its own close). When the file STOP appears
it commits, closes (LeaveGroup) and exits 0.

OUT is a line log, one ``write`` per line (a SIGKILL leaves at most a partial last line):

- ``A <monotonic s> <p,p,...>``: the partitions it owns from then on (after each change);
- ``R <partition> <offset> <value>``: a record processed;
- ``C <partition> <offset>``: a commit of ``offset`` (the next to read) succeeded;
- ``E <partition> <offset> <error>``: a commit of ``offset`` failed;
- ``X``: a clean exit.

The monotonic clock is the system's (CLOCK_MONOTONIC), so the test compares its own
``time.monotonic()`` with the stamps. With ``GROUP_MEMBER_DEBUG=1`` in the environment the
client logs its group protocol to stderr (librdkafka ``debug=cgrp``; the Python clients'
loggers at DEBUG), for a failure's post-mortem.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterable
from typing import Any, TextIO


class Ledger:
    """What this member owns and has processed, and the OUT file.

    Thread-safe: kafka-python 3 runs rebalance listeners on its IO thread while the main
    thread processes what ``poll`` returned, so a revocation takes the partitions away
    under the lock and processing checks ownership under it: no record of a revoked
    partition is processed after its offsets were chosen for the revocation's commit.
    """

    def __init__(self, out: TextIO, commit_interval_ms: int) -> None:
        self.out = out
        self.commit_interval = commit_interval_ms / 1000
        self.lock = threading.RLock()
        self.owned: set[int] = set()
        self.processed: dict[int, int] = {}  # owned partition -> the next offset to process
        self.committed: dict[int, int] = {}  # owned partition -> the offset committed last
        self.last_commit = 0.0

    def line(self, text: str) -> None:
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()

    def _owned_line(self) -> None:
        self.line(f"A {time.monotonic():.3f} {','.join(map(str, sorted(self.owned)))}")

    def assigned(self, partitions: set[int]) -> None:
        with self.lock:
            self.owned |= partitions
            self._owned_line()

    def lost(self, partitions: set[int]) -> None:
        """Partitions gone without a chance to commit (the member was dropped)."""
        self.give_up(partitions)

    def give_up(self, partitions: set[int]) -> dict[int, int]:
        """Revoked partitions: no more processing of them; returns what to commit of them."""
        with self.lock:
            offsets = self._uncommitted(partitions & self.owned)
            self.owned -= partitions
            for p in partitions:
                self.processed.pop(p, None)
                self.committed.pop(p, None)
            self._owned_line()
            return offsets

    def process(self, records: Iterable[tuple[int, int, bytes | None]]) -> bool:
        """Process a batch (put it on record); True when a periodic commit is due."""
        with self.lock:
            for partition, offset, value in records:
                # A partition no longer owned is not processed: its new owner reads its
                # records from the committed offset.
                if partition in self.owned:
                    text = value.decode() if value is not None else "-"
                    self.out.write(f"R {partition} {offset} {text}\n")
                    self.processed[partition] = offset + 1
            self.out.flush()
            return time.monotonic() - self.last_commit >= self.commit_interval

    def to_commit(self) -> dict[int, int]:
        """Processed offsets of owned partitions not committed yet (a periodic commit)."""
        with self.lock:
            self.last_commit = time.monotonic()
            return self._uncommitted(self.owned)

    def _uncommitted(self, partitions: set[int]) -> dict[int, int]:
        return {p: o for p, o in self.processed.items() if p in partitions and self.committed.get(p) != o}

    def commit_result(self, offsets: dict[int, int], error: object | None) -> None:
        with self.lock:
            for p, o in sorted(offsets.items()):
                if error is None:
                    if p in self.owned:
                        self.committed[p] = o
                    self.line(f"C {p} {o}")
                else:
                    self.line(f"E {p} {o} {str(error).replace(chr(10), ' ')}")


# --------------------------------------------------------------------------- confluent-kafka


def run_confluent(args: Args, ledger: Ledger) -> None:
    import confluent_kafka

    c = confluent_kafka.Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "partition.assignment.strategy": args.assignor,
        "session.timeout.ms": args.session_ms, "heartbeat.interval.ms": args.heartbeat_ms,
        **({"debug": "cgrp"} if DEBUG else {}),
    })

    def commit(offsets: dict[int, int]) -> None:
        if not offsets:
            return
        tps = [confluent_kafka.TopicPartition(args.topic, p, o) for p, o in offsets.items()]
        try:
            result = c.commit(offsets=tps, asynchronous=False)
            failed = [tp for tp in result or [] if tp.error is not None]
            ledger.commit_result(offsets, failed[0].error if failed else None)
        except confluent_kafka.KafkaException as exc:
            ledger.commit_result(offsets, exc)

    # librdkafka calls these from poll/consume/close, on this thread.
    def on_assign(_c: Any, tps: list[Any]) -> None:
        ledger.assigned({tp.partition for tp in tps})

    def on_revoke(_c: Any, tps: list[Any]) -> None:
        commit(ledger.give_up({tp.partition for tp in tps}))

    def on_lost(_c: Any, tps: list[Any]) -> None:
        ledger.lost({tp.partition for tp in tps})

    c.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    try:
        while not os.path.exists(args.stop):
            batch = [(m.partition(), m.offset(), m.value()) for m in c.consume(500, 0.1) if m.error() is None]
            if ledger.process(batch):
                commit(ledger.to_commit())
        commit(ledger.to_commit())
    finally:
        c.close()


# --------------------------------------------------------------------------- kafka-python


def run_kafka_python(args: Args, ledger: Ledger) -> None:
    import kafka
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "sticky": StickyPartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}[args.assignor]
    c = kafka.KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
        enable_auto_commit=False, partition_assignment_strategy=[assignor],
        session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
        request_timeout_ms=args.session_ms + 5000,
    )

    def offsets_of(offsets: dict[int, int]) -> dict[Any, Any]:
        return {kafka.TopicPartition(args.topic, p): kafka.OffsetAndMetadata(o, "", -1)
                for p, o in offsets.items()}

    class Listener(kafka.AsyncConsumerRebalanceListener):
        # Called on kafka-python's IO thread, where the blocking commit() may not be used:
        # its future is awaited there instead.
        async def on_partitions_revoked(self, revoked: Any) -> None:
            offsets = ledger.give_up({tp.partition for tp in revoked})
            if offsets:
                try:
                    await c.commit_async(offsets_of(offsets))
                    ledger.commit_result(offsets, None)
                except Exception as exc:  # noqa: BLE001 - recorded; at-least-once tolerates it
                    ledger.commit_result(offsets, exc)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            ledger.assigned({tp.partition for tp in assigned})

        async def on_partitions_lost(self, lost: Any) -> None:
            ledger.lost({tp.partition for tp in lost})

    def commit(offsets: dict[int, int]) -> None:
        if not offsets:
            return
        try:
            c.commit(offsets_of(offsets))
            ledger.commit_result(offsets, None)
        except kafka.errors.KafkaError as exc:
            ledger.commit_result(offsets, exc)

    # The topic's metadata before subscribing, so that the leader's first assignment
    # covers it (a leader's own rejoin right after an assignment stalled kafka-python 3.x
    # now and then: see KP_HEARTBEAT_MS in tests/integration/test_groups.py).
    c.partitions_for_topic(args.topic)
    c.subscribe([args.topic], listener=Listener())
    try:
        while not os.path.exists(args.stop):
            # A long poll: kafka-python 3.0.12 drops a JoinGroup/SyncGroup round that ends
            # while no poll() waits for it (its join task is done, so the next poll starts
            # another: one more rebalance); with records flowing poll returns early anyway.
            polled = c.poll(timeout_ms=1000, max_records=500)
            if ledger.process([(r.partition, r.offset, r.value) for rs in polled.values() for r in rs]):
                commit(ledger.to_commit())
        commit(ledger.to_commit())
    finally:
        c.close()


# --------------------------------------------------------------------------- aiokafka


async def run_aiokafka(args: Args, ledger: Ledger) -> None:
    import aiokafka
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from aiokafka.errors import KafkaError
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "sticky": StickyPartitionAssignor}[args.assignor]
    c = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
        enable_auto_commit=False, partition_assignment_strategy=(assignor,),
        session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
    )

    async def commit(offsets: dict[int, int]) -> None:
        if not offsets:
            return
        try:
            await c.commit({TopicPartition(args.topic, p): OffsetAndMetadata(o, "")
                            for p, o in offsets.items()})
            ledger.commit_result(offsets, None)
        except KafkaError as exc:
            ledger.commit_result(offsets, exc)

    class Listener(aiokafka.ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            await commit(ledger.give_up({tp.partition for tp in revoked}))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            ledger.assigned({tp.partition for tp in assigned})

    c.subscribe([args.topic], listener=Listener())
    await c.start()
    try:
        while not os.path.exists(args.stop):
            polled = await c.getmany(timeout_ms=100, max_records=500)
            if ledger.process([(r.partition, r.offset, r.value) for rs in polled.values() for r in rs]):
                await commit(ledger.to_commit())
        await commit(ledger.to_commit())
    finally:
        await c.stop()


DEBUG = os.environ.get("GROUP_MEMBER_DEBUG") == "1"


class Args:
    def __init__(self, argv: list[str]) -> None:
        (self.client, self.bootstrap, self.group, self.topic, self.assignor, session_ms,
         heartbeat_ms, commit_interval_ms, self.out, self.stop) = argv
        self.session_ms, self.heartbeat_ms = int(session_ms), int(heartbeat_ms)
        self.commit_interval_ms = int(commit_interval_ms)


def main(argv: list[str]) -> int:
    if len(argv) != 10:
        print(__doc__, file=sys.stderr)
        return 2
    args = Args(argv)
    if DEBUG:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(created).3f %(threadName)s %(name)s %(message)s")
    with open(args.out, "a", encoding="utf-8") as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kafka-python's import-time DeprecationWarning
        ledger = Ledger(out, args.commit_interval_ms)
        if args.client == "confluent":
            run_confluent(args, ledger)
        elif args.client == "kafka-python":
            run_kafka_python(args, ledger)
        elif args.client == "aiokafka":
            asyncio.run(run_aiokafka(args, ledger))
        else:
            print(f"unknown client {args.client!r}: use confluent, kafka-python or aiokafka",
                  file=sys.stderr)
            return 2
        ledger.line("X")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
