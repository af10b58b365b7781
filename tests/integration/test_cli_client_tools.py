"""`pylog consume` (new options), `pylog cluster info`, `pylog perf produce|consume` and the
errors of every client command, against a real broker, with kcat and confluent-kafka as
the reference peers."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from pylog.client import Admin, Producer, TopicPartition

pytestmark = pytest.mark.integration

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def pylog(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pylog", *args], input=stdin, capture_output=True,
                          timeout=timeout)


def ok(*args: str, stdin: bytes | None = None) -> str:
    res = pylog(*args, stdin=stdin)
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout.decode()


T0 = 1_700_000_000_000


def _fill(bootstrap: str, topic: str, n: int = 20, partitions: int = 1) -> None:
    """n records with keys, headers, a null value and timestamps T0 + 1000 * i."""
    ok("topics", "create", topic, "-p", str(partitions), "-b", bootstrap)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 1}) as p:
        for i in range(n):
            p.send(topic, None if i == 3 else b"v%d" % i, key=b"k%d" % i,
                   headers=[("n", b"%d" % i), ("app", b"cli")], partition=i % partitions,
                   timestamp_ms=T0 + 1000 * i)
        p.flush(30)


def test_consume_format_templates_equal_kcats(broker, topic_name) -> None:
    _fill(broker.bootstrap, topic_name)
    template = r"%t|%p|%o|%k|%s|%K|%S|%T|%h\n"
    ours = ok("consume", topic_name, "--from-beginning", "-e", "-f", template, "-b", broker.bootstrap)
    assert ours.splitlines()[3] == f"{topic_name}|0|3|k3||2|-1|{T0 + 3000}|n=3,app=cli"
    assert len(ours.splitlines()) == 20
    if KCAT is None:
        pytest.skip("kcat is not installed (tools/install-sysdeps.sh)")
    theirs = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", topic_name, "-o", "beginning",
                             "-e", "-q", "-f", template], capture_output=True, check=True, timeout=30)
    assert ours == theirs.stdout.decode()


def test_consume_json_max_messages_and_from_timestamp(broker, topic_name) -> None:
    _fill(broker.bootstrap, topic_name)
    b = ["-b", broker.bootstrap]
    rows = [json.loads(line) for line in
            ok("consume", topic_name, "--from-beginning", "--json", "--max-messages", "5", *b).splitlines()]
    assert len(rows) == 5
    assert rows[3] == {"topic": topic_name, "partition": 0, "offset": 3, "tstype": "create",
                       "ts": T0 + 3000, "headers": [["n", "3"], ["app", "cli"]], "key": "k3",
                       "payload": None}
    # The first record at or after a timestamp, to the end.
    out = ok("consume", topic_name, "--from-timestamp", str(T0 + 16_500), "-e", "-f", r"%o\n", *b)
    assert out.splitlines() == ["17", "18", "19"]
    assert ok("consume", topic_name, "--from-timestamp", str(T0 + 99_000), "-e", *b) == ""
    # -n without -e stops after n records even though the log goes on.
    assert ok("consume", topic_name, "-o", "10", "-n", "2", "-f", r"%s\n", *b).splitlines() == ["v10", "v11"]


def test_consume_in_a_group_commits_what_it_printed_and_resumes_there(broker, topic_name) -> None:
    """`pylog consume T --group G`: subscribes, commits the printed positions (every 5 s and
    on exit); a second run of the group continues exactly where the first stopped."""
    _fill(broker.bootstrap, topic_name, n=30, partitions=3)
    group = f"g-{topic_name}"
    b = ["-b", broker.bootstrap]
    tps = [TopicPartition(topic_name, p) for p in range(3)]

    def printed(out: str) -> list[tuple[int, int, str]]:
        rows = [line.split(" ") for line in out.splitlines()]
        return [(int(p), int(o), v) for p, o, v in rows]

    # --from-beginning in a group: where the group has no committed offset (Kafka's
    # console consumer: auto.offset.reset=earliest).
    first = printed(ok("consume", topic_name, "--group", group, "--from-beginning", "-n", "12",
                       "-f", r"%p %o %s\n", *b))
    assert len(first) == 12
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        committed = admin.list_group_offsets(group)
    # Per partition: just past the last record printed (nothing printed: its start, 0).
    expected = {tp: 1 + max((o for p, o, _ in first if p == tp.partition), default=-1) for tp in tps}
    assert {tp: (om.offset if om is not None else 0) for tp, om in committed.items()
            if tp in expected} == expected
    assert set(committed) <= set(tps)
    for p in range(3):  # in order within a partition, from its start
        offsets = [o for q, o, _ in first if q == p]
        assert offsets == list(range(len(offsets)))
    # The second run (--from-beginning again: a group with commits ignores it) prints the
    # rest: nothing twice, nothing lost.
    second = printed(ok("consume", topic_name, "--group", group, "--from-beginning", "-e",
                        "-f", r"%p %o %s\n", *b))
    assert len(second) == 18
    for p in range(3):
        offsets = [o for q, o, _ in second if q == p]
        assert offsets == list(range(expected[TopicPartition(topic_name, p)], 10))
    values = sorted(v for _, _, v in first + second)
    assert values == sorted("" if i == 3 else f"v{i}" for i in range(30))  # record 3: null value

    def group_offsets() -> dict[TopicPartition, int]:
        with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
            return {tp: om.offset for tp, om in admin.list_group_offsets(group).items()
                    if om is not None}

    assert group_offsets() == {tp: 10 for tp in tps}
    # Running on (no -n, no -e): what it prints is committed within the 5 s interval, while
    # it runs; Ctrl-C commits and exits 130.
    proc = subprocess.Popen([sys.executable, "-m", "pylog", "consume", topic_name, "--group", group,
                             "-f", r"%p %o %s\n", *b], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with Producer({"bootstrap.servers": broker.bootstrap}) as p:
            for i in range(6):
                p.send(topic_name, b"w%d" % i, partition=i % 3)
            p.flush(30)
        deadline = time.monotonic() + 45
        while group_offsets() != {tp: 12 for tp in tps}:
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, group_offsets()
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (130, b"")
    assert sorted(printed(out.decode())) == sorted((i % 3, 10 + i // 3, f"w{i}") for i in range(6))


def test_consume_read_committed_and_partitions(broker, topic_name) -> None:
    _fill(broker.bootstrap, topic_name, n=30, partitions=3)
    b = ["-b", broker.bootstrap]
    # No transactions on this topic: read_committed stops at the last stable offset, which
    # is the high watermark, and reads everything.
    out = ok("consume", topic_name, "--from-beginning", "-e", "--isolation-level", "read_committed",
             "-f", r"%p:%o\n", *b)
    assert sorted(out.splitlines()) == sorted(f"{i % 3}:{i // 3}" for i in range(30))
    out = ok("consume", topic_name, "--from-beginning", "-e", "-p", "2", "-f", r"%k\n", *b)
    assert out.splitlines() == [f"k{i}" for i in range(2, 30, 3)]
    bad = pylog("consume", topic_name, "-p", "7", "-e", *b)
    assert bad.returncode == 1 and b"has no partition 7 (it has 3: 0-2)" in bad.stderr
    bad = pylog("consume", topic_name, "--isolation-level", "serializable", *b)
    assert bad.returncode == 2 and b"invalid choice" in bad.stderr


def test_produce_options_round_trip(broker, topic_name) -> None:
    b = ["-b", broker.bootstrap]
    lines = b"".join(b"k%d,v%d\n" % (i, i) for i in range(300))
    res = pylog("produce", topic_name, "-K", ",", "--linger-ms", "20", "--batch-size", "2000",
                "-X", "enable.idempotence=false", "--acks", "1", "-z", "lz4", "-p", "0", *b, stdin=lines)
    assert res.returncode == 0 and res.stderr == b"Produced 300 records to %s.\n" % topic_name.encode()
    out = ok("consume", topic_name, "--from-beginning", "-e", "--key", "--key-separator", ",", *b)
    assert out.encode() == lines
    bad = pylog("produce", topic_name, "-X", "linger.msec=5", *b, stdin=b"x\n")
    assert bad.returncode == 1 and b"unknown setting 'linger.msec'; did you mean 'linger.ms'?" in bad.stderr
    bad = pylog("produce", topic_name, "-p", "5", *b, stdin=b"x\n")
    assert bad.returncode == 1 and b"has no partition 5" in bad.stderr


def test_cluster_info_matches_confluent_kafkas_view(broker, topic_name) -> None:
    from confluent_kafka.admin import AdminClient

    _fill(broker.bootstrap, topic_name, n=3, partitions=3)
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    out = ok("cluster", "info", "-b", broker.bootstrap)
    assert out.startswith("CLUSTER\n=======\n")
    assert re.search(rf"^ID\s+{re.escape(md.cluster_id)}$", out, re.M)
    assert re.search(rf"^CONTROLLER\s+{md.controller_id}$", out, re.M)
    nodes = sorted(md.brokers.values(), key=lambda n: n.id)
    assert len(nodes) == broker.n
    for node in nodes:
        star = "\\*" if node.id == md.controller_id else ""
        assert re.search(rf"^{node.id}{star}\s+{node.host}\s+{node.port}\s+-$", out, re.M)
    assert re.search(rf"^{re.escape(topic_name)}\s+3\s+{broker.n}$", out, re.M)
    info = json.loads(ok("cluster", "info", "--json", "-b", broker.bootstrap))
    assert info["cluster_id"] == md.cluster_id and info["controller_id"] == md.controller_id
    assert info["brokers"] == [{"node_id": n.id, "host": n.host, "port": n.port, "rack": None,
                                "controller": n.id == md.controller_id} for n in nodes]
    assert {"name": topic_name, "partitions": 3, "replicas": broker.n,
            "internal": False} in info["topics"]
    assert {t["name"] for t in info["topics"]} == {
        n for n, t in md.topics.items() if not n.startswith("__")}


def test_perf_produce_json_then_perf_consume(broker, topic_name) -> None:
    b = ["-b", broker.bootstrap]
    res = json.loads(ok("perf", "produce", "--topic", topic_name, "--num-records", "3000",
                        "--record-size", "100", "--producer-props", "linger.ms=2", "batch.size=32768",
                        "--acks", "all", "--compression", "zstd", "--json", *b))
    assert (res["records"], res["bytes"]) == (3000, 300_000)
    lat = res["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert res["settings"]["compression.type"] == "zstd" and res["settings"]["linger.ms"] == "2"
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        assert admin.list_offsets({(topic_name, 0): "latest"})[TopicPartition(topic_name, 0)][0] == 3000
    for api in ([], ["--poll-columns"]):
        got = json.loads(ok("perf", "consume", "--topic", topic_name, "--messages", "3000", "--json",
                            *api, *b))
        assert (got["records"], got["bytes"]) == (3000, 300_000)
        assert got["api"] == ("poll_columns" if api else "poll") and got["records_per_sec"] > 0
    # Kafka's CSV: a header and one row of ten fields.
    header, row = ok("perf", "consume", "--topic", topic_name, "--messages", "3000", *b).splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg")
    fields = row.split(", ")
    assert len(fields) == 10 and fields[4] == "3000" and float(fields[2]) == pytest.approx(0.2861, abs=1e-4)
    # Exactly --messages are counted, whatever a poll or a fetch hands out (1234 is not a
    # multiple of max.poll.records).
    for api in ([], ["--poll-columns"]):
        got = json.loads(ok("perf", "consume", "--topic", topic_name, "--messages", "1234",
                            "--json", *api, *b))
        assert (got["records"], got["bytes"]) == (1234, 123_400), api
    # --show-detailed-stats: a row per interval and one for the last, partial interval, so
    # that the rows reach the total.
    rows = ok("perf", "consume", "--topic", topic_name, "--messages", "2000",
              "--show-detailed-stats", "--reporting-interval", "60000", *b).splitlines()
    assert rows[0].startswith("time, threadId, data.consumed.in.MB")
    assert rows[-1].split(", ")[4] == "2000"
    # More than the topic holds: gives up after --timeout without a record, exit 1.
    res2 = pylog("perf", "consume", "--topic", topic_name, "--messages", "3001", "--timeout", "300", *b)
    assert res2.returncode == 1 and b"only 3000 of 3001 records arrived" in res2.stderr


def test_perf_produce_paced_and_kafkas_summary_line(broker, topic_name) -> None:
    start = time.monotonic()
    res = pylog("perf", "produce", "--topic", topic_name, "--num-records", "300", "--record-size", "20",
                "--throughput", "100", "--reporting-interval", "1000", "-b", broker.bootstrap)
    took = time.monotonic() - start
    assert res.returncode == 0, res.stderr.decode()
    *windows, summary = res.stdout.decode().splitlines()
    # 300 records at 100/s take about 3 s (the last 1 ms step is not waited for).
    assert 2.5 <= took < 30
    m = re.fullmatch(r"300 records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), [\d.]+ ms avg latency, "
                     r"[\d.]+ ms max latency, [\d.]+ ms 50th, [\d.]+ ms 95th, [\d.]+ ms 99th, [\d.]+ ms 99.9th\.",
                     summary)
    assert m and 60 <= float(m.group(1)) <= 110
    assert len(windows) >= 1 and all(
        re.fullmatch(r"\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                     r"[\d.]+ ms max latency\.", w) for w in windows)


def test_errors_name_what_is_wrong(broker, topic_name, tmp_path) -> None:
    b = ["-b", broker.bootstrap]
    missing = "no-such-" + topic_name
    for cmd in (["topics", "describe", missing],
                ["perf", "consume", "--topic", missing, "--messages", "1"]):
        res = pylog(*cmd, *b)
        assert res.returncode == 1, cmd
        err = res.stderr.decode()
        assert "UNKNOWN_TOPIC_OR_PARTITION" in err and "pylog topics list" in err, (cmd, err)
    res = pylog("consume", missing, "-e", *b)
    assert res.returncode == 1 and res.stderr.decode() == (
        f"pylog consume: topic {missing!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION; list the "
        f"topics with: pylog topics list -b {broker.bootstrap})\n")
    # A name the broker refuses: the rule, as `topics create` gives it.
    res = pylog("produce", "bad topic!", *b, stdin=b"x\n")
    assert res.returncode == 1 and res.stderr.decode().endswith(
        "INVALID_TOPIC_EXCEPTION: topic name 'bad topic!' is illegal: it may contain only ASCII "
        "letters, digits, '.', '_' and '-'\n"), res.stderr
    # Nothing listens on the port: fails at once, naming the address and the option.
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    for cmd in (["consume", topic_name, "-e"], ["produce", topic_name], ["topics", "list"],
                ["groups", "list"], ["cluster", "info"], ["perf", "produce", "--topic", topic_name, "--num-records", "1",
                                      "--record-size", "1"]):
        start = time.monotonic()
        res = pylog(*cmd, "-b", dead, stdin=b"x\n")
        err = res.stderr.decode()
        assert res.returncode == 1 and f"cannot connect to {dead}" in err, (cmd, err)
        assert "-b HOST:PORT" in err and time.monotonic() - start < 20, cmd
    res = pylog("topics", "list", "-b", "localhost")
    assert res.returncode == 1 and b"bootstrap.servers: bad address 'localhost': expected HOST:PORT" in res.stderr
    res = pylog("consume", topic_name, "-f", "%Q", *b)
    assert res.returncode == 1 and b"unknown token %Q" in res.stderr
    res = pylog("consume", topic_name, "--json", "-f", "%s", *b)
    assert res.returncode == 1 and b"--format and --json exclude each other" in res.stderr
    res = pylog("consume", topic_name, "--group", "g", "-o", "3", *b)
    assert res.returncode == 1 and b"need --partition" in res.stderr
    res = pylog("produce", topic_name, "-f", str(tmp_path / "absent.txt"), *b)
    assert res.returncode == 1 and b"absent.txt" in res.stderr
    res = pylog("perf", "produce", "--topic", topic_name, "--num-records", "0", "--record-size", "1", *b)
    assert res.returncode == 1 and b"--num-records must be > 0" in res.stderr


def test_ctrl_c_exits_130_without_a_traceback(broker, topic_name) -> None:
    import signal
    import threading

    ok("topics", "create", topic_name, "-b", broker.bootstrap)
    proc = subprocess.Popen([sys.executable, "-m", "pylog", "consume", topic_name, "-b", broker.bootstrap],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    printed = threading.Event()
    threading.Thread(target=lambda: proc.stdout.readline() and printed.set(), daemon=True).start()
    try:
        with Producer({"bootstrap.servers": broker.bootstrap}) as p:
            deadline = time.monotonic() + 60
            while not printed.wait(0.5) and time.monotonic() < deadline:  # until it polls
                p.send(topic_name, b"ping").result(30)
        assert printed.is_set()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (130, b"")


def test_consume_in_a_new_group_says_where_it_starts_and_sigterm_leaves_the_group(
        broker, topic_name) -> None:
    """A group without commits starts at the end (Kafka's console consumer) and says so on
    stderr; SIGTERM (a plain kill, a supervisor) stops it as Ctrl-C does: it commits what it
    printed and leaves the group at once (no member left until the session times out)."""
    _fill(broker.bootstrap, topic_name, n=5)
    group = f"g-{topic_name}"
    proc = subprocess.Popen([sys.executable, "-m", "pylog", "consume", topic_name, "--group", group,
                             "-f", r"%o %s\n", "-b", broker.bootstrap],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        notice = proc.stderr.readline().decode()  # once it has its partitions
        assert f"group '{group}' has no committed offset for {topic_name}-0" in notice, notice
        assert "--from-beginning" in notice
        with Producer({"bootstrap.servers": broker.bootstrap}) as p:
            for i in range(3):
                p.send(topic_name, b"new%d" % i)
            p.flush(30)
        lines = [proc.stdout.readline().decode() for _ in range(3)]
        assert lines == [f"{5 + i} new{i}\n" for i in range(3)]  # the first 5: before it
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (143, b"", b"")
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        desc = admin.describe_groups([group])[group]
        assert (desc.state, desc.members) == ("Empty", [])
        committed = admin.list_group_offsets(group)
    assert committed[TopicPartition(topic_name, 0)].offset == 8
    # Nobody in the group: its offsets can be reset right away.
    ok("groups", "reset-offsets", group, "--topic", topic_name, "--to-earliest", "--execute",
       "-b", broker.bootstrap)


def test_perf_produce_shows_a_progress_bar_on_a_terminal(broker, topic_name) -> None:
    """On a terminal, a run longer than a second shows a bar (share done, rate, time left)
    without waiting for the 5 s reporting interval; the summary line stays as Kafka's."""
    import os
    import pty

    ok("topics", "create", topic_name, "-b", broker.bootstrap)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "pylog", "perf", "produce", "--topic", topic_name,
                             "--num-records", "6000", "--record-size", "10", "--throughput", "2500",
                             "-b", broker.bootstrap], stdout=follower, stderr=follower)
    os.close(follower)
    screen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        screen += chunk
    os.close(leader)
    assert proc.wait(30) == 0, screen
    text = screen.decode()
    bars = re.findall(r"\[([#.]{24})\] +([\d.]+)% ([\d,]+)/6,000 records, [\d,]+/s, \d+ s left", text)
    assert bars, text
    assert any(0 < float(pct) < 100 for _, pct, _ in bars), bars
    assert re.search(r"6000 records sent, [\d.]+ records/sec", text.splitlines()[-1]), text
