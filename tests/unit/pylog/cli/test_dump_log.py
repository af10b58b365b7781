"""`pylog dump-log`: Kafka's kafka-dump-log.sh output and checks on logs logcore wrote.

Logs are written by ``logcore.Log`` (or laid out by the independent Kafka-layout writer in
tests/_harness/kafka_format.py), then damaged byte by byte where a test needs it; the
command runs in-process through ``pylog.cli.main.main``.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from _harness.kafka_format import read_batches, write_kafka_partition

from logcore import BatchBuilder, Log, LogConfig, iter_batches
from pylog.cli.main import main

SEG = f"{0:020d}"
T0 = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
RECORD_RE = re.compile(
    r"^\| offset: (\d+) (CreateTime|LogAppendTime): (-?\d+) keySize: (-?\d+) "
    r"valueSize: (-?\d+) sequence: (-?\d+) headerKeys: \[(.*?)\]"
    r"(?: key: (.*?))?(?: payload: (.*))?$")


def dump(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["dump-log", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def dump_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict]]:
    rc, out, err = dump(capsys, "--json", *args)
    assert err == ""
    return rc, [json.loads(line) for line in out.splitlines()]


def write_log(directory: Path, n_batches: int = 30, *, compression: str = "none",
              producer_id: int = -1, **config: int) -> None:
    """A closed log of ``n_batches`` 3-record batches with keys, values and a header."""
    cfg = LogConfig(**config) if config else LogConfig()
    log = Log(directory, cfg)
    try:
        for i in range(n_batches):
            b = BatchBuilder(compression=compression, producer_id=producer_id,
                             producer_epoch=0 if producer_id >= 0 else -1,
                             base_sequence=3 * i if producer_id >= 0 else -1)
            for j in range(3):
                b.append(b"value-%d-%d" % (i, j) * 4, key=b"k%d" % j,
                         timestamp_ms=T0 + 3 * i + j, headers=[("h", b"x")])
            log.append(bytearray(b.build()), leader_epoch=0)
    finally:
        log.close()


# ------------------------------------------------------------------ the test


def test_torn_tail_and_corrupt_index_are_both_reported(tmp_path: Path, capsys) -> None:
    part = tmp_path / "events-0"
    write_log(part, 40, segment_bytes=2000, index_interval_bytes=100)
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 2
    # A crash mid-append: the first 37 bytes of a batch after the last one.
    active = logs[-1]
    clean_size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(logs[0].read_bytes()[:37])
    # A scribbled offset index entry in the first segment: right position, wrong offset.
    index = logs[0].with_suffix(".index")
    data = bytearray(index.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, 16)
    struct.pack_into(">i", data, 16, rel + 1)
    index.write_bytes(bytes(data))

    rc, out, err = dump(capsys, str(part))
    assert rc == 1
    assert (f"Found 37 invalid bytes at the end of {active.name} (position {clean_size}): "
            "a batch of") in out
    assert f"Mismatches in :{index.resolve()}\n  Index offset: {rel + 1}, log offset: {rel}\n" in err
    assert "Found 2 problems in 2 of" in err
    assert f"  {active}: Found 37 invalid bytes at the end of {active.name}" in err
    assert "Traceback" not in out + err

    rc, objs = dump_json(capsys, str(part))
    assert rc == 1
    problems = [(o["kind"], Path(o["file"]).name) for o in objs if o["type"] == "problem"]
    assert sorted(problems) == [("index_mismatch", index.name), ("invalid_bytes", active.name)]
    torn = next(o for o in objs if o["type"] == "problem" and o["kind"] == "invalid_bytes")
    assert (torn["position"], torn["bytes"]) == (clean_size, 37)
    assert objs[-1] == {"type": "summary", "files": objs[-1]["files"], "problems": 2,
                        "problemsByFile": {str(index): 1, str(active): 1}}


# ------------------------------------------------------------------ batches and records


def test_clean_log_batches_match_the_independent_reader(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 12, producer_id=42)
    rc, out, err = dump(capsys, str(part / f"{SEG}.log"))
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {part / f'{SEG}.log'}", "Log starting offset: 0"]
    expected, _end = read_batches(str(part / f"{SEG}.log"))
    assert len(lines) == 2 + len(expected)
    for line, b in zip(lines[2:], expected, strict=True):
        seq = 3 * (b.base_offset // 3)
        assert line == (
            f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: 3 "
            f"baseSequence: {seq} lastSequence: {seq + 2} producerId: 42 producerEpoch: 0 "
            f"partitionLeaderEpoch: 0 isTransactional: false isControl: false "
            f"deleteHorizonMs: OptionalLong.empty position: {b.position} CreateTime: "
            f"{b.max_timestamp} size: {b.size} magic: 2 compresscodec: none "
            f"crc: {struct.unpack_from('>I', (part / f'{SEG}.log').read_bytes(), b.position + 17)[0]} "
            "isvalid: true")


@pytest.mark.parametrize("codec", CODECS)
def test_deep_iteration_prints_what_was_written(tmp_path: Path, capsys, codec: str) -> None:
    part = tmp_path / "t-0"
    written = []
    with Log(part) as log:
        for i in range(4):
            b = BatchBuilder(compression=codec, producer_id=9 + i, producer_epoch=1,
                             base_sequence=2**31 - 3 if i == 3 else 10 * i)
            for j in range(5):
                key = None if j == 0 else b"key-%d" % j
                value = None if j == 4 else b"v%d-%d " % (i, j) * (j + 1)
                headers = [("a", b"1"), ("b", None)] if j == 2 else []
                b.append(value, key=key, timestamp_ms=T0 + 100 * i + j, headers=headers)
                written.append((key, value, T0 + 100 * i + j, [h for h, _v in headers]))
            log.append(bytearray(b.build()), leader_epoch=3)
    rc, out, err = dump(capsys, "--print-data-log", str(part / f"{SEG}.log"))
    assert rc == 0, out + err
    assert out.count(f"compresscodec: {codec} ") == 4
    records = [RECORD_RE.match(line) for line in out.splitlines() if line.startswith("| ")]
    assert len(records) == len(written) == 20
    for offset, (m, (key, value, ts, hkeys)) in enumerate(zip(records, written, strict=True)):
        assert m is not None
        batch, j = divmod(offset, 5)
        base_seq = 2**31 - 3 if batch == 3 else 10 * batch
        seq = base_seq + j if base_seq + j < 2**31 else base_seq + j - 2**31  # wraps
        assert m.groups() == (
            str(offset), "CreateTime", str(ts), str(-1 if key is None else len(key)),
            str(-1 if value is None else len(value)), str(seq), ",".join(hkeys),
            None if key is None else key.decode(), None if value is None else value.decode())
    # Shallow by default; --deep adds the records without keys and values.
    rc, out, _ = dump(capsys, str(part / f"{SEG}.log"))
    assert rc == 0 and "| offset" not in out
    rc, out, _ = dump(capsys, "--deep", str(part / f"{SEG}.log"))
    assert out.count("| offset") == 20 and " payload: " not in out and " key: " not in out
    # Kafka's --skip-record-metadata: "| key: K payload: V", " payload: V" without a key.
    rc, out, _ = dump(capsys, "--print-data-log", "--skip-record-metadata", str(part))
    data = [line for line in out.splitlines() if not line.startswith(("Dumping", "Log", "base"))]
    assert data[:5] == [" payload: v0-0 ", "| key: key-1 payload: v0-1 v0-1 ",
                        "| key: key-2 payload: v0-2 v0-2 v0-2 ",
                        "| key: key-3 payload: v0-3 v0-3 v0-3 v0-3 ", "| key: key-4"]


def test_keys_and_values_are_escaped_on_one_line(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    value = b"line1\nline2\ttab\\back\xff\x00caf\xc3\xa9"
    with Log(part) as log:
        b = BatchBuilder()
        b.append(value, key=b"\x01k", timestamp_ms=T0)
        log.append(bytearray(b.build()))
    rc, out, _ = dump(capsys, "--print-data-log", str(part))
    assert rc == 0
    assert (" key: \\x01k payload: line1\\nline2\\ttab\\\\back\\xff\\x00café\n") in out
    rc, objs = dump_json(capsys, "--print-data-log", str(part / f"{SEG}.log"))
    rec = next(o for o in objs if o["type"] == "record")
    assert rec["key"] == "\x01k" and "payload" not in rec
    assert rec["payloadBase64"] == "bGluZTEKbGluZTIJdGFiXGJhY2v/AGNhZsOp"


def test_log_append_time_and_control_batches(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    with Log(part, LogConfig(message_timestamp_type="LogAppendTime")) as log:
        b = BatchBuilder(producer_id=5, producer_epoch=2, base_sequence=0, transactional=True)
        b.append(b"in-txn", timestamp_ms=T0)
        log.append(bytearray(b.build()))
        marker = BatchBuilder(producer_id=5, producer_epoch=2, transactional=True, is_control=True)
        # Kafka's EndTransactionMarker: key (version 0, type 1 = COMMIT),
        # value (version 0, coordinator epoch 7).
        marker.append(struct.pack(">hi", 0, 7), key=struct.pack(">hh", 0, 1), timestamp_ms=T0)
        log.append(bytearray(marker.build()))
    rc, out, _ = dump(capsys, "--print-data-log", str(part))
    assert rc == 0
    lines = [line for line in out.splitlines() if line.startswith(("baseOffset", "|"))]
    assert "isTransactional: true isControl: false" in lines[0] and " LogAppendTime: " in lines[0]
    assert lines[1].startswith("| offset: 0 LogAppendTime: ") and lines[1].endswith("payload: in-txn")
    assert "isTransactional: true isControl: true" in lines[2]
    assert lines[3].endswith("endTxnMarker: COMMIT coordinatorEpoch: 7")
    assert "payload" not in lines[3]  # Kafka prints no data for control records


def test_max_bytes_reads_only_the_first_batches(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 10)
    batches, _ = read_batches(str(part / f"{SEG}.log"))
    limit = batches[3].position + batches[3].size + 10  # cuts the fifth batch
    rc, out, err = dump(capsys, "--max-bytes", str(limit), str(part / f"{SEG}.log"))
    assert rc == 0 and out.count("baseOffset:") == 4 and "invalid bytes" not in out + err


# ------------------------------------------------------------------ damage


def test_crc_mismatch_is_invalid_and_the_walk_goes_on(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 5, compression="zstd")
    path = part / f"{SEG}.log"
    batches, _ = read_batches(str(path))
    data = bytearray(path.read_bytes())
    data[batches[2].position + 70] ^= 0x5A  # inside the compressed records
    path.write_bytes(bytes(data))
    rc, out, err = dump(capsys, "--deep", str(path))
    assert rc == 1
    valid = re.findall(r"position: (\d+) .* isvalid: (\w+)", out)
    assert valid == [(str(b.position), "false" if i == 2 else "true")
                     for i, b in enumerate(batches)]
    assert f"CRC mismatch in the batch at position {batches[2].position} of {SEG}.log" in out
    assert out.count("| offset") >= 12  # the other four batches' records


def test_garbage_length_stops_the_walk_with_its_position(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 6)
    path = part / f"{SEG}.log"
    batches, end = read_batches(str(path))
    data = bytearray(path.read_bytes())
    struct.pack_into(">i", data, batches[4].position + 8, 7)  # batch_length 7
    path.write_bytes(bytes(data))
    rc, out, _ = dump(capsys, str(path))
    assert rc == 1 and out.count("baseOffset:") == 4
    assert (f"Found {end - batches[4].position} invalid bytes at the end of {SEG}.log "
            f"(position {batches[4].position}): batch_length 7 is below the minimum 49") in out


def test_a_legacy_magic_batch_is_reported_and_stepped_over(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 3)
    path = part / f"{SEG}.log"
    batches, _ = read_batches(str(path))
    data = bytearray(path.read_bytes())
    data[batches[1].position + 16] = 1
    path.write_bytes(bytes(data))
    rc, out, _ = dump(capsys, str(path))
    assert rc == 1
    assert f"offset: 3 position: {batches[1].position} size: {batches[1].size} magic: 1" in out
    assert "uses message format v1 (magic 1)" in out
    assert out.count("baseOffset:") == 2  # the batches before and after


def test_offsets_that_go_backwards_are_problems(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 3)
    path = part / f"{SEG}.log"
    batches, _ = read_batches(str(path))
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, batches[2].position, 1)  # outside the CRC
    path.write_bytes(bytes(data))
    rc, out, _ = dump(capsys, str(path))
    assert rc == 1
    assert (f"Batch at position {batches[2].position} of {SEG}.log has base offset 1, not "
            "after the previous batch's last offset 5") in out


def test_index_entries_past_the_log_are_not_found(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 30, index_interval_bytes=100)
    index = part / f"{SEG}.index"
    entries = index.read_bytes()
    n = len(entries) // 8
    size = (part / f"{SEG}.log").stat().st_size
    data = bytearray(entries)
    rel, _pos = struct.unpack_from(">ii", data, 8 * (n - 1))
    struct.pack_into(">ii", data, 8 * (n - 1), rel, size + 100)
    index.write_bytes(bytes(data) + b"\x01\x02\x03")  # and a torn entry
    rc, out, err = dump(capsys, "--verify-index-only", str(index))
    assert rc == 1
    assert "offset:" not in out  # --verify-index-only prints no entries
    assert (f"Index entry {n - 1} of {SEG}.index (offset {rel}, position {size + 100}) not found "
            f"in {SEG}.log: position {size + 100} is at or past the end ({size})") in out
    assert f"Found 3 invalid bytes at the end of {SEG}.index (position {8 * n})" in out
    rc, out, _ = dump(capsys, "--index-sanity-check", str(index))
    assert rc == 1 and "failed sanity check" in out


def test_time_index_checks(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 30, index_interval_bytes=100)
    tindex = part / f"{SEG}.timeindex"
    rc, out, err = dump(capsys, str(tindex))
    assert rc == 0 and out.count("timestamp: ") > 5
    good = tindex.read_bytes()
    data = bytearray(good)
    ts1, rel1 = struct.unpack_from(">qi", data, 12)
    ts3, _ = struct.unpack_from(">qi", data, 36)
    struct.pack_into(">q", data, 12, ts1 + 1000)  # later than the batch says, and than entry 2
    struct.pack_into(">qi", data, 36, ts3, 10_000)  # an offset the segment does not have
    tindex.write_bytes(bytes(data))
    rc, out, err = dump(capsys, str(tindex))
    assert rc == 1
    assert (f"Found timestamp mismatch in :{tindex.resolve()}\n"
            f"  Index timestamp: {ts1 + 1000}, log timestamp: {ts1}\n") in err
    assert f"Found out of order timestamp in :{tindex.resolve()}\n" in err
    assert ("The following indexed offsets are not found in the log.\n"
            "Indexed offset: 10000, found log offset: -1\n") in err


def test_kafka_layout_has_no_problem_and_no_notice(tmp_path: Path, capsys) -> None:
    """A partition laid out as a Kafka broker leaves it (time index entries name the last
    offset of their batch) dumps clean, and so does the same log written by logcore, whose
    largest timestamps sit in the middle of their batches."""
    batches = []
    for i in range(40):
        b = BatchBuilder(compression=CODECS[i % 5])
        for j in range(3):
            b.append(b"x%d" % j * 30, timestamp_ms=T0 + 10 * i + (5 if j == 1 else j))
        batches.append(b.build())
    part = tmp_path / "kafka-0"
    write_kafka_partition(str(part), batches, segment_bytes=3000, index_interval_bytes=200)
    for snap in part.glob("*.snapshot"):
        snap.unlink()  # the writer's placeholder is not a real snapshot
    rc, out, err = dump(capsys, "--deep", str(part))
    assert rc == 0 and err == "", err
    assert out.count("timestamp: ") > 5 and out.count("| offset") == 120

    mine = tmp_path / "mine-0"
    with Log(mine, LogConfig(index_interval_bytes=200, segment_bytes=3000)) as log:
        for raw in batches:
            log.append(bytearray(raw))
    rc, out, err = dump(capsys, "--deep", str(mine))
    assert rc == 0 and err == "", err
    assert out.count("timestamp: ") > 5 and out.count("| offset") == 120
    rc, objs = dump_json(capsys, str(mine))
    assert rc == 0 and not [o for o in objs if o["type"] in ("notice", "problem")]
    assert sum(o["type"] == "timeindex_entry" for o in objs) > 5


def test_record_offsets_in_a_time_index_are_reported_as_kafka_does(tmp_path: Path,
                                                                    capsys) -> None:
    """Older pylog versions wrote the offset of the record holding the timestamp, inside
    its batch. Kafka's tool reports such an entry as an indexed offset not found; pylog
    still looks timestamps up with it, and rebuilds the index once it is deleted."""
    part = tmp_path / "old-0"
    with Log(part, LogConfig(index_interval_bytes=150, segment_bytes=2000)) as log:
        for i in range(40):
            b = BatchBuilder(compression=CODECS[i % 5])
            for j, d in enumerate((0, 7, 3)):  # the largest timestamp is record 1
                b.append(b"v%d" % j * 20, key=b"k", timestamp_ms=T0 + 10 * i + d)
            log.append(bytearray(b.build()))
    recs = [(r.offset, r.timestamp) for seg in sorted(part.glob("*.log"))
            for batch in iter_batches(seg.read_bytes()) for r in batch]
    exact = {}  # timestamp -> offset of the first record holding it
    for off, ts in recs:
        exact.setdefault(ts, off)
    moved = []
    for tindex in sorted(part.glob("*.timeindex")):
        base = int(tindex.name.split(".")[0])
        data = bytearray(tindex.read_bytes())
        for i in range(len(data) // 12):
            ts, rel = struct.unpack_from(">qi", data, 12 * i)
            assert base + rel == exact[ts] + 1  # Kafka's: the last offset of the batch
            struct.pack_into(">qi", data, 12 * i, ts, exact[ts] - base)
            moved.append((tindex, exact[ts], exact[ts] + 1))
        tindex.write_bytes(bytes(data))
    assert len(moved) > 5

    rc, out, err = dump(capsys, "--verify-index-only", str(part))
    assert rc == 1
    assert ("The following indexed offsets are not found in the log.\n"
            + "".join(f"Indexed offset: {off}, found log offset: {last}\n"
                      for t, off, last in moved if t == moved[0][0])) in err
    for _t, off, last in moved:
        assert f"Indexed offset: {off}, found log offset: {last}\n" in err
    assert "timestamp mismatch" not in err and "out of order" not in err
    tindex, off, last = moved[0]
    # the summary names the first problems in full, with what to do
    assert (f"Time index entry 0 of {tindex.name} names offset {off}, inside the batch of "
            f"offsets {off - 1}..{last} of ") in err
    assert f"stop the broker and delete {tindex.name}" in err
    rc, objs = dump_json(capsys, str(part))
    problems = [o for o in objs if o["type"] == "problem"]
    assert rc == 1 and {o["kind"] for o in problems} == {"timeindex_offset_not_found"}
    assert [(o["offset"], o["logOffset"]) for o in problems] == [(o, la) for _t, o, la in moved]

    # logcore reads the old form: exact lookups, then rebuilds the deleted indexes
    with Log(part, LogConfig(index_interval_bytes=150, segment_bytes=2000)) as log:
        for ts in exact:  # the first record at or after each time
            assert tuple(log.offset_for_timestamp(ts)) == next((o, t) for o, t in recs
                                                              if t >= ts)
        assert tuple(log.offset_for_timestamp(-3)) == (exact[max(exact)], max(exact))
    for tindex in part.glob("*.timeindex"):
        tindex.unlink()
    with Log(part, LogConfig(index_interval_bytes=150, segment_bytes=2000)) as log:
        assert tuple(log.offset_for_timestamp(-3)) == (exact[max(exact)], max(exact))
    rc, out, err = dump(capsys, str(part))
    assert rc == 0 and err == "", err


# ------------------------------------------------------------------ other files


def test_producer_snapshot(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 10, producer_id=77, segment_bytes=1000)
    snap = sorted(part.glob("*.snapshot"))[-1]
    rc, out, _ = dump(capsys, str(snap))
    assert rc == 0
    assert ("producerId: 77 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
            "OptionalLong.empty lastTimestamp: ") in out
    assert "firstSequence: 27 lastSequence: 29 lastOffset: 29 offsetDelta: 2" in out
    data = bytearray(snap.read_bytes())
    data[-3] ^= 1
    snap.write_bytes(bytes(data))
    rc, out, _ = dump(capsys, str(snap))
    assert rc == 1 and f"Corrupt producer snapshot {snap.name} (position 2): stored CRC" in out
    snap.write_bytes(bytes(data[:-5]))
    rc, out, _ = dump(capsys, str(snap))
    assert rc == 1 and "the header counts 1 producers but 41 bytes of entries follow" in out


def test_checkpoints_and_partition_metadata(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 3)
    (part / "partition.metadata").write_text("version: 0\ntopic_id: kp4RX0l1QJuJ6otSp79sFQ\n")
    (part / "cleaner-offset-checkpoint").write_text("0\n2\nt 0 3\nu 4 9\n")
    rc, out, _ = dump(capsys, str(part))
    assert rc == 0
    assert ("leader-epoch-checkpoint\nversion: 0 entries: 1\nepoch: 0 startOffset: 0\n") in out
    assert "recovery-point-offset-checkpoint\nversion: 0 entries: 1\ntopic: t partition: 0" in out
    assert "version: 0 entries: 2\ntopic: t partition: 0 offset: 3\ntopic: u partition: 4 " in out
    assert "version: 0 topicId: kp4RX0l1QJuJ6otSp79sFQ" in out
    (part / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n")
    rc, out, _ = dump(capsys, str(part / "leader-epoch-checkpoint"))
    assert rc == 1 and "at line 2: count says 2 entries, file has 1" in out
    (part / "leader-epoch-checkpoint").write_text("0\n2\n3 10\n2 20\n")
    rc, out, _ = dump(capsys, str(part / "leader-epoch-checkpoint"))
    assert rc == 1 and "epochs must increase" in out


def test_transaction_index(tmp_path: Path, capsys) -> None:
    path = tmp_path / f"{100:020d}.txnindex"
    entries = [(0, 7, 100, 120, 130), (0, 8, 125, 140, 150), (1, 9, 150, 160, 170),
               (0, 10, 90, 95, 99)]
    path.write_bytes(b"".join(struct.pack(">hqqqq", *e) for e in entries) + b"\0" * 5)
    rc, out, _ = dump(capsys, str(path))
    assert rc == 1
    assert ("version: 0 producerId: 7 firstOffset: 100 lastOffset: 120 lastStableOffset: 130\n"
            "version: 0 producerId: 8 firstOffset: 125") in out
    assert "Aborted transaction at position 68 of" in out and "version 1, expected 0" in out
    assert "position 102 of" in out and "lastOffset 95 is below the segment's base offset 100" in out
    assert f"Found 5 invalid bytes at the end of {path.name} (position 136)" in out
    path.write_bytes(b"".join(struct.pack(">hqqqq", *e) for e in entries[:2]))
    rc, objs = dump_json(capsys, str(path))
    assert rc == 0 and [o["producerId"] for o in objs if o["type"] == "aborted_txn"] == [7, 8]


# ------------------------------------------------------------------ __consumer_offsets


def _subscription(version: int, topics: list[str]) -> bytes:
    from pylog.protocol._schema import ConsumerProtocolSubscription

    return struct.pack(">h", version) + ConsumerProtocolSubscription(topics=topics).encode(version)


def _assignment(topic: str, partitions: list[int]) -> bytes:
    from pylog.protocol._schema import ConsumerProtocolAssignment

    tp = ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=partitions)
    return struct.pack(">h", 0) + ConsumerProtocolAssignment(assigned_partitions=[tp]).encode(0)


def test_consumer_offsets_records_decode_as_kafka_prints_them(tmp_path: Path, capsys) -> None:
    from pylog.group.records import encode_group_metadata, encode_offset_commit
    from pylog.protocol._records import GroupMetadataValue

    member = GroupMetadataValue.MemberMetadata(
        member_id="m-1", group_instance_id=None, client_id="c", client_host="/127.0.0.1",
        rebalance_timeout=300000, session_timeout=45000,
        subscription=_subscription(1, ["ev"]), assignment=_assignment("ev", [0, 1]))
    group = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range",
                               leader="m-1", current_state_timestamp=T0, members=[member])
    records = [
        encode_offset_commit("g1", "ev", 0, offset=42, leader_epoch=0, commit_timestamp=T0),
        encode_group_metadata("g1", group),
        encode_offset_commit("g1", "ev", 0, offset=None),
        (struct.pack(">h", 16) + b"newer", b"\x00\x00"),  # a newer Kafka's record type
    ]
    part = tmp_path / "__consumer_offsets-7"
    with Log(part) as log:
        for key, value in records:
            b = BatchBuilder()
            b.append(value, key=key, timestamp_ms=T0)
            log.append(bytearray(b.build()))
    rc, out, err = dump(capsys, "--print-data-log", str(part))
    assert rc == 0, out + err
    rec = [line for line in out.splitlines() if line.startswith("| ")]
    assert rec[0].endswith(
        ' key: {"type":"1","data":{"group":"g1","topic":"ev","partition":0}} payload: '
        '{"version":"3","data":{"offset":42,"leaderEpoch":0,"metadata":"",'
        f'"commitTimestamp":{T0}}}}}')
    payload = json.loads(rec[1].split(" payload: ", 1)[1])
    assert payload["version"] == "3"
    m = payload["data"]["members"][0]
    assert m["subscription"] == {"topics": ["ev"], "userData": None, "ownedPartitions": []}
    assert m["assignment"] == {"assignedPartitions": [{"topic": "ev", "partitions": [0, 1]}],
                               "userData": None}
    assert (m["memberId"], m["groupInstanceId"], m["rebalanceTimeout"]) == ("m-1", None, 300000)
    assert rec[2].endswith(' payload: <DELETE>')
    assert rec[3].endswith(" key: Unknown record type 16 at offset 3, skipping.")

    # Explicitly, on a file outside a __consumer_offsets directory; a broken key is a problem.
    other = tmp_path / "copy-0"
    with Log(other) as log:
        for key, value in [records[0], (b"\x00", b"junk")]:
            b = BatchBuilder()
            b.append(value, key=key, timestamp_ms=T0)
            log.append(bytearray(b.build()))
    rc, out, _ = dump(capsys, "--print-data-log", str(other))
    assert rc == 0 and "payload: value" not in out and ' key: {"type"' not in out
    rc, objs = dump_json(capsys, "--offsets-decoder", str(other / f"{SEG}.log"))
    assert rc == 1
    recs = [o for o in objs if o["type"] == "record"]
    assert recs[0]["key"] == {"type": "1", "data": {"group": "g1", "topic": "ev", "partition": 0}}
    assert recs[0]["payload"]["data"]["offset"] == 42
    assert recs[1]["key"].startswith("Error at offset 1, skipping. record key of 1 bytes")
    assert "payload" not in recs[1]
    assert [o["kind"] for o in objs if o["type"] == "problem"] == ["undecodable_offsets_record"]


def test_camel_case_names_round_trip_to_the_generated_ones() -> None:
    """Kafka's JSON names come back from the snake_cased generated names unchanged."""
    from pylog.cli._dump_offsets import camel
    from pylog.protocol import _records

    def snake(name: str) -> str:  # tools/generate_protocol.py's rule
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()

    seen = 0
    for name in _records.MESSAGES:
        stack = [_records.load(name)]
        while stack:
            cls = stack.pop()
            for field in cls.FIELDS:
                assert snake(camel(field[0])) == field[0], field[0]
                seen += 1
            stack += [v for v in vars(cls).values() if isinstance(v, type) and hasattr(v, "FIELDS")]
    assert seen > 50


# ------------------------------------------------------------------ directories, JSON, exit codes


def test_data_directory_and_json_schema(tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    write_log(data / "b-1", 3)
    write_log(data / "b-0", 2, compression="lz4")
    write_log(data / "a-10", 1)
    write_log(data / "a-2", 1)
    (data / "meta.properties").write_text("version=1\n")
    (data / "a-2" / "stray.bin").write_bytes(b"?")
    rc, out, err = dump(capsys, str(data))
    assert rc == 0
    assert err == f"Ignoring unknown file {data / 'a-2' / 'stray.bin'}\n"
    order = [Path(line.split()[1]).parent.name for line in out.splitlines()
             if line.startswith("Dumping") and line.endswith(".log")]
    assert order == ["a-2", "a-10", "b-0", "b-1"]
    rc, objs = dump_json(capsys, "--print-data-log", str(data))
    assert rc == 0
    kinds = {o["type"] for o in objs}
    assert {"file", "batch", "record", "checkpoint", "leader_epoch_entry", "checkpoint_entry",
            "notice", "summary"} <= kinds
    batch = next(o for o in objs if o["type"] == "batch")
    assert set(batch) == {"type", "file", "baseOffset", "lastOffset", "count", "baseSequence",
                          "lastSequence", "producerId", "producerEpoch", "partitionLeaderEpoch",
                          "isTransactional", "isControl", "deleteHorizonMs", "position",
                          "timestampType", "maxTimestamp", "size", "magic", "compresscodec",
                          "crc", "isvalid"}
    records = [o for o in objs if o["type"] == "record"]
    assert len(records) == 3 * 7
    assert records[0] == {"type": "record", "file": str(data / "a-2" / f"{SEG}.log"),
                          "offset": 0, "timestampType": "CreateTime", "timestamp": T0,
                          "keySize": 2, "valueSize": 36, "sequence": -1, "headerKeys": ["h"],
                          "key": "k0", "payload": "value-0-0" * 4}
    assert objs[-1]["type"] == "summary" and objs[-1]["problems"] == 0


def test_exit_codes_and_usage_errors(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 2)
    assert dump(capsys, str(part))[0] == 0
    rc, _, err = dump(capsys, str(tmp_path / "nope"))
    assert rc == 2 and "no such file or directory" in err
    rc, _, err = dump(capsys)
    assert rc == 2 and "name at least one file" in err
    (tmp_path / "empty").mkdir()
    rc, _, err = dump(capsys, str(tmp_path / "empty"))
    assert rc == 2 and "holds no log files" in err
    rc, out, _ = dump(capsys, "--files", f"{part / (SEG + '.log')},{part / (SEG + '.index')}")
    assert rc == 0 and out.count("Dumping") == 2
    with pytest.raises(SystemExit) as exc:
        main(["dump-log", "--max-bytes", "0", str(part)])
    assert exc.value.code == 2
    capsys.readouterr()


def test_the_command_runs_as_a_program(tmp_path: Path) -> None:
    part = tmp_path / "t-0"
    write_log(part, 2)
    log = part / f"{SEG}.log"
    log.write_bytes(log.read_bytes() + b"\xff" * 20)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-m", "pylog", "dump-log", str(part)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert f"Found 20 invalid bytes at the end of {SEG}.log" in run.stdout
    helped = subprocess.run([sys.executable, "-m", "pylog", "dump-log", "--help"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert helped.returncode == 0 and "Exit status: 0" in helped.stdout


def test_memory_does_not_grow_with_the_batch(tmp_path: Path, capsys) -> None:
    """A shallow dump of a 24 MiB batch streams its CRC: Python allocations stay small."""
    import tracemalloc

    part = tmp_path / "t-0"
    big = os.urandom(1 << 20)
    with Log(part, LogConfig(max_message_bytes=64 << 20, segment_bytes=256 << 20)) as log:
        b = BatchBuilder()
        for i in range(24):
            b.append(big, key=b"%d" % i, timestamp_ms=T0)
        log.append(bytearray(b.build()))
        del b
    size = (part / f"{SEG}.log").stat().st_size
    assert size > 24 << 20
    tracemalloc.start()
    try:
        rc, out, _ = dump(capsys, str(part / f"{SEG}.log"))
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rc == 0 and f"size: {size} " in out and "isvalid: true" in out
    assert peak < 4 << 20, peak


def test_pure_python_logcore_gives_the_same_output(tmp_path: Path) -> None:
    part = tmp_path / "t-0"
    write_log(part, 8, compression="gzip", producer_id=3, index_interval_bytes=100)
    outs = []
    for pure in ("0", "1"):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), LOGCORE_PUREPYTHON=pure)
        run = subprocess.run([sys.executable, "-m", "pylog", "dump-log", "--print-data-log",
                              str(part)], capture_output=True, text=True, timeout=60, env=env)
        assert run.returncode == 0, run.stderr
        outs.append(run.stdout)
    assert outs[0] == outs[1] and outs[0].count("| offset") == 24


def test_scribbled_files_never_stop_the_dump(tmp_path: Path) -> None:
    """Seeded scribbles, truncations and garbage over every file of a partition (and a
    __consumer_offsets one): each run ends with problems or none, never an unexpected
    exception, and --json stays parseable."""
    import io
    import random
    import shutil

    from pylog.cli._dump_output import DumpOptions, DumpReport
    from pylog.cli.dump_log import dump_file, expand
    from pylog.group.records import encode_offset_commit

    src = tmp_path / "src-0"
    write_log(src, 12, compression="lz4", producer_id=4, segment_bytes=1500,
              index_interval_bytes=100)
    with Log(tmp_path / "offsets-src") as log:
        for i in range(6):
            b = BatchBuilder()
            key, value = encode_offset_commit("g", "t", i, offset=i, commit_timestamp=T0)
            b.append(value, key=key, timestamp_ms=T0)
            log.append(bytearray(b.build()))
    rng = random.Random(20251125)
    for it in range(80):
        origin = src if it % 2 else tmp_path / "offsets-src"
        part = tmp_path / "run" / ("events-0" if it % 2 else "__consumer_offsets-0")
        shutil.rmtree(tmp_path / "run", ignore_errors=True)
        shutil.copytree(origin, part)
        for path in part.iterdir():
            data = bytearray(path.read_bytes())
            mode = rng.random()
            if mode < 0.35 and data:
                for _ in range(rng.randint(1, 6)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
            elif mode < 0.5:
                data = data[:rng.randint(0, len(data))]
            elif mode < 0.6:
                data = bytearray(rng.randbytes(rng.randint(0, 200)))
            path.write_bytes(bytes(data))
        out, err = io.StringIO(), io.StringIO()
        report = DumpReport(it % 3 == 0, out, err)
        opts = DumpOptions(deep=True, print_data=it % 4 == 0, index_sanity_check=it % 10 == 9)
        for f in expand(str(part), report):
            dump_file(report, f, opts)
        assert report.finish() in (0, 1)
        text = out.getvalue() + err.getvalue()
        assert "internal_error" not in text and "Stopped dumping" not in text, text
        if it % 3 == 0:
            for line in out.getvalue().splitlines():
                json.loads(line)


def test_a_checkpoint_that_is_not_text_is_a_problem(tmp_path: Path, capsys) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(b"0\n1\nt\xff 0 5\n")
    rc, out, _ = dump(capsys, str(path))
    assert rc == 1 and f"malformed checkpoint file {path}: byte 5 is not UTF-8 text" in out


def test_grouped_reports_are_capped_and_json_has_them_all(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    with Log(part, LogConfig(index_interval_bytes=0)) as log:
        for i in range(1102):
            b = BatchBuilder()
            b.append(b"v", timestamp_ms=T0 + i)
            log.append(bytearray(b.build()))
    index = part / f"{SEG}.index"
    entries = [struct.unpack_from(">ii", index.read_bytes(), i) for i in range(0, 1101 * 8, 8)]
    assert len(entries) == 1101
    index.write_bytes(b"".join(struct.pack(">ii", rel + 1, pos) for rel, pos in entries))
    rc, out, err = dump(capsys, "--verify-index-only", str(index))
    assert rc == 1 and out == f"Dumping {index}\n"
    lines = err.splitlines()
    assert lines[0] == f"Mismatches in :{index.resolve()}"
    assert lines[1:1001] == [f"  Index offset: {rel + 1}, log offset: {rel}" for rel, _ in entries[:1000]]
    assert lines[1001] == "  ... and 101 more (all of them with --json)"
    assert lines[1002] == "Found 1101 problems in 1 of 1 files:"
    assert len(lines) == 1003 + 20 + 1 and lines[-1].startswith("  ... and 1081 more")
    rc, objs = dump_json(capsys, "--verify-index-only", str(index))
    assert rc == 1 and sum(o["type"] == "problem" for o in objs) == 1101


def test_a_directory_named_like_a_segment_is_a_problem(tmp_path: Path, capsys) -> None:
    part = tmp_path / "t-0"
    write_log(part, 2)
    (part / f"{99:020d}.log").mkdir()
    rc, out, _ = dump(capsys, str(part))
    assert rc == 1 and f"Cannot read {part / f'{99:020d}.log'}: not a regular file" in out


def test_the_preallocated_tail_of_a_live_index_is_noticed_naming_the_file(tmp_path: Path,
                                                                           capsys) -> None:
    """A log still open (as a broker keeps it) has indexes preallocated with zeros: one
    stderr line per index says so and names the file, since several are dumped at once."""
    part = tmp_path / "live-0"
    log = Log(part, LogConfig(index_interval_bytes=100))
    try:
        for i in range(20):
            b = BatchBuilder()
            b.append(b"v%d" % i * 20, key=b"k", timestamp_ms=T0 + i)
            log.append(bytearray(b.build()), leader_epoch=0)
        rc, out, err = dump(capsys, str(part))
    finally:
        log.close()
    assert rc == 0, err
    lines = [x for x in err.splitlines() if "zero entries" in x]
    assert sorted(x.split(": ")[0] for x in lines) == [str(part / f"{SEG}.index"),
                                                      str(part / f"{SEG}.timeindex")], err


def test_share_group_state_partition_metadata_decodes_with_its_key_at_version_0() -> None:
    """Record 15's schemas are in Kafka's later dialect (coordinator-key, apiKey 15): the key
    printed from its version-0 fields, the value and the tombstone as Kafka prints them."""
    import uuid

    from pylog.cli._dump_offsets import decode_offsets_record
    from pylog.group.share.records import encode_share_group_state_metadata
    from pylog.group.share.state_metadata import InitEntry, StatePartitionMetadata

    meta = StatePartitionMetadata(initialized={uuid.UUID(int=5): InitEntry("t", frozenset({0, 1}), 123)},
                                  deleting={uuid.UUID(int=6): "x"})
    key, value = encode_share_group_state_metadata("sg", meta)
    k, v, err = decode_offsets_record(7, key, value)
    assert err is None and k == {"type": "15", "data": {"groupId": "sg"}}
    assert v == {"version": "0", "data": {
        "initializingTopics": [],
        "initializedTopics": [{"topicId": "AAAAAAAAAAAAAAAAAAAABQ", "topicName": "t", "partitions": [0, 1],
                               "createTimestamp": 123}],
        "deletingTopics": [{"topicId": "AAAAAAAAAAAAAAAAAAAABg", "topicName": "x"}]}}
    assert decode_offsets_record(8, key, None)[:2] == (k, "<DELETE>")
