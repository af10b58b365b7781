"""Disk full: the broker's data directory lives on a 32 MiB tmpfs (a loop-mounted ext4 file
system where tmpfs cannot be mounted) that a filler file fills while idempotent producers
run. Appends that do not fit must be answered with KAFKA_STORAGE_ERROR (56), not crash or
hang the broker; reads keep being served; once the filler is deleted, appends succeed again;
every other cycle the broker is also killed -9 while the disk is full and restarted on the
full disk. At the end nothing acknowledged is lost or doubled (the audit of the kill soak),
before and after a clean restart.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import random
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import ProduceRequest

from ._soak import Settings, Soak, report

KAFKA_STORAGE_ERROR = 56
SIZE_MB = 32


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@contextlib.contextmanager
def small_filesystem(where: pathlib.Path) -> Iterator[str]:
    """Mount a SIZE_MB file system on ``where``; yields what was mounted. Skips the test (with
    the reasons) only when neither a tmpfs nor a loop device can be mounted (not root, or a
    container without the capability)."""
    where.mkdir()
    tried = _run("mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m,mode=0755", "tmpfs", str(where))
    kind = "tmpfs"
    loop_dev = None
    if tried.returncode != 0:
        image = where.parent / "disk.img"
        kind = "ext4 on a loop device"
        steps = [("truncate", "-s", f"{SIZE_MB}M", str(image)),
                 ("mkfs.ext4", "-q", "-F", "-m", "0", str(image))]
        reasons = [f"tmpfs: {tried.stderr.strip()}"]
        for step in steps:
            r = _run(*step)
            if r.returncode != 0:
                pytest.skip(f"cannot mount a small file system: {reasons[0]}; "
                            f"{step[0]}: {r.stderr.strip()}")
        r = _run("losetup", "--find", "--show", str(image))
        if r.returncode != 0:
            pytest.skip(f"cannot mount a small file system: {reasons[0]}; "
                        f"losetup: {r.stderr.strip()}")
        loop_dev = r.stdout.strip()
        r = _run("mount", loop_dev, str(where))
        if r.returncode != 0:
            _run("losetup", "-d", loop_dev)
            pytest.skip(f"cannot mount a small file system: {reasons[0]}; "
                        f"mount {loop_dev}: {r.stderr.strip()}")
    try:
        yield kind
    finally:
        r = _run("umount", str(where))
        if r.returncode != 0:
            _run("umount", "-l", str(where))
        if loop_dev:
            _run("losetup", "-d", loop_dev)


def fill(path: pathlib.Path) -> int:
    """Write ``path`` until the file system has no byte left; returns the bytes written."""
    written = 0
    chunk = 1 << 20
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while chunk:
            try:
                written += os.write(fd, b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    finally:
        os.close(fd)
    return written


def raw_produce(bootstrap: str, topic: str, partition: int) -> int:
    """One small non-idempotent acks=all batch; the partition's error code."""
    host, port = bootstrap.rsplit(":", 1)
    b = logcore.BatchBuilder()
    b.append(b"probe" * 200, key=b"probe")
    R = ProduceRequest
    body = R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=partition, records=b.build())])])
    conn = BrokerConnection(host, int(port), timeout=10)  # a hang fails the test
    try:
        resp = conn.request(body)
    finally:
        conn.close()
    return resp.responses[0].partition_responses[0].error_code


def confluent_storage_error(bootstrap: str, topic: str) -> str:
    """What a plain (not idempotent) confluent-kafka producer with retries=0 is told."""
    from confluent_kafka import Producer

    seen: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all",
                  "retries": 0, "message.timeout.ms": 10000})
    p.produce(topic, value=b"x" * 5000, partition=0,
              on_delivery=lambda err, msg: seen.append(err.name() if err else "ok"))
    p.flush(15)
    return seen[0] if seen else "no delivery report"


def wait_for(what: str, check, timeout: float, interval: float = 0.2):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} did not happen within {timeout} s (last: {last!r})")


def test_disk_full_storage_error_then_recovery(tmp_path: pathlib.Path, soak_seed: int,
                                               soak_budget: tuple[float, int],
                                               soak_figures: list[str]) -> None:
    seconds, _ = soak_budget
    again = (f"repeat with: make soak SOAK_SEED={soak_seed} SOAK_SECONDS={seconds:g} "
             f"PYTEST_ARGS='-k disk_full'")
    print(f"disk-full seed {soak_seed} ({again})")
    rng = random.Random(soak_seed)
    # Every fill/free cycle adds a few MiB of records to a 32 MiB file system that has no
    # retention (the audit wants every offset from 0): a long run does more cycles, up to 8.
    cycles = min(max(2, int(seconds // 10)), 8)
    mnt = tmp_path / "mnt"
    settings = Settings(seed=soak_seed, seconds=seconds, min_kills=0, producers=3, consumers=1,
                        partitions=3, rate=50,
                        topic_config={"segment.bytes": str(1 << 20),
                                      "segment.index.bytes": str(64 * 1024)})
    started = time.monotonic()
    with small_filesystem(mnt) as kind:
        soak = Soak(tmp_path, settings, data_dir=mnt / "data")
        bootstrap = soak.broker.bootstrap
        try:
            soak.start()
            bootstrap = soak.broker.bootstrap
            # Producer ids are allocated on disk too: let every producer have one first.
            soak.wait_all_producing()
            time.sleep(0.5)
            filler = mnt / "filler"
            for cycle in range(cycles):
                filled = fill(filler)
                print(f"cycle {cycle}: {kind} of {SIZE_MB} MiB, filler took "
                      f"{filled / 2**20:.1f} MiB")
                # Appends fail now (the producers still running may take the last free
                # bytes first, so ask until they do).
                wait_for("KAFKA_STORAGE_ERROR on a full disk",
                         lambda: raw_produce(bootstrap, soak.topic, 0) == KAFKA_STORAGE_ERROR,
                         timeout=20)
                if cycle == 0:
                    assert confluent_storage_error(bootstrap, soak.topic) == \
                        "KAFKA_STORAGE_ERROR"
                time.sleep(rng.uniform(0.5, 2.0))
                if cycle % 2 == 1:
                    # Killed while the disk is full, and started again on the full disk:
                    # recovery must not need free space, nor lose what is there.
                    soak.kill_and_restart(down_s=rng.uniform(0.0, 0.3))
                assert soak.broker.alive(), f"broker died on a full disk:\n{soak.broker.read_log()}"
                assert not soak.clients_alive(), soak.clients_alive()
                for p in range(settings.partitions):  # still full, still failing, serving
                    # (a partition's last tmpfs page may still hold a probe or two)
                    wait_for(f"KAFKA_STORAGE_ERROR on partition {p}",
                             lambda p=p: raw_produce(bootstrap, soak.topic, p)
                             == KAFKA_STORAGE_ERROR, timeout=10, interval=0.05)
                assert sum(soak.end_offsets().values()) > 0  # reads are served
                filler.unlink()
                wait_for("appends accepted after space returned",
                         lambda: all(raw_produce(bootstrap, soak.topic, p) == 0
                                     for p in range(settings.partitions)), timeout=30)
                time.sleep(rng.uniform(0.5, 2.0))
            soak.stop_clients()
            # The probes are records the audit does not know (they carry no soak.id header):
            # they count in the dense offsets, and are otherwise left out of the check.
            first = soak.read_all()
            fig, problems = soak.audit(first)
            problems = [p for p in problems if "no soak.id header" not in p]
            probes = sum(isinstance(i, str) and "no soak.id header" in i
                         for recs in first.values() for _, i in recs)
            soak_figures.append(report(f"disk full ({kind}, {cycles} fill/free cycles)", fig,
                                       time.monotonic() - started, settings)
                                + f"; probe records {probes}")
            print(soak_figures[-1])
            assert not problems, "\n".join([again, *problems[:40]])
            assert soak.broker.stop() == 0
            soak.start_broker()
            assert soak.read_all() == first, f"the log changed across a clean restart; {again}"
            assert fig.lost == 0 and fig.duplicates == 0 and fig.acknowledged > 0
        except BaseException:
            soak_figures.append(f"disk-full test FAILED: {again}; files in {tmp_path}")
            print(soak_figures[-1])
            with contextlib.suppress(OSError):
                print(shutil.disk_usage(mnt))
            raise
        finally:
            soak.close()
