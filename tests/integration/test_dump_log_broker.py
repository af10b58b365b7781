"""`pylog dump-log` on a data directory a real broker wrote for real clients.

confluent-kafka (librdkafka) produces with every codec through idempotent producers and
commits offsets through a consumer group, so the directory holds client-built batches
and the group coordinator's ``__consumer_offsets`` records. The dump runs while the
broker serves (live, preallocated indexes) and after it stopped.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 20


def dump_log(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pylog", "dump-log", *args],
                          capture_output=True, text=True, timeout=120)


def test_dump_a_broker_data_directory(new_broker) -> None:
    broker = new_broker().start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ev", 1, 1)])["ev"].result(30)
    produced = []
    for codec in CODECS:
        p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                      "compression.type": codec, "enable.idempotence": True,
                                      "linger.ms": 20})
        for i in range(PER_CODEC):
            key, value = f"{codec}-{i}".encode(), f"value {i}\nof {codec}".encode()
            p.produce("ev", key=key, value=value, headers=[("hdr", b"x")])
            produced.append((key, value))
        assert p.flush(30) == 0
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-dump",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["ev"])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < len(produced) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen += 1
    assert seen == len(produced)
    c.commit(asynchronous=False)
    c.close()
    data = broker.data_dir

    live = dump_log("--deep", str(data))  # the broker still has every log open
    assert live.returncode == 0, live.stdout[-2000:] + live.stderr
    assert "Traceback" not in live.stderr
    # Live (preallocated) indexes are noticed on stderr, each line naming its file.
    notices = [x for x in live.stderr.splitlines() if "zero entries" in x]
    assert all(x.startswith(f"{data}/") for x in notices), notices

    assert broker.stop() == 0
    done = dump_log("--print-data-log", "--json", str(data))
    assert done.returncode == 0, done.stderr
    objs = [json.loads(line) for line in done.stdout.splitlines()]
    assert objs[-1]["type"] == "summary" and objs[-1]["problems"] == 0
    ev = [o for o in objs if o["type"] == "record" and "/ev-0/" in o["file"]]
    assert [(o["key"].encode(), o["payload"].encode()) for o in ev] == produced
    assert all(o["headerKeys"] == ["hdr"] and o["sequence"] >= 0 for o in ev)
    assert [o["offset"] for o in ev] == list(range(len(produced)))
    codecs = {o["compresscodec"] for o in objs if o["type"] == "batch" and "/ev-0/" in o["file"]}
    assert codecs == set(CODECS)
    commits = [o for o in objs if o["type"] == "record" and "/__consumer_offsets-" in o["file"]
               and isinstance(o["key"], dict) and o["key"]["type"] == "1"]
    assert commits, "no offset commit record in __consumer_offsets"
    last = commits[-1]
    assert last["key"]["data"] == {"group": "g-dump", "topic": "ev", "partition": 0}
    assert last["payload"]["data"]["offset"] == len(produced)
    groups = [o for o in objs if o["type"] == "record" and isinstance(o.get("key"), dict)
              and o["key"]["type"] == "2"]
    assert any(g["payload"] and g["payload"]["data"]["protocolType"] == "consumer"
               and g["payload"]["data"]["members"]
               and g["payload"]["data"]["members"][0]["subscription"]["topics"] == ["ev"]
               for g in groups)

    text = dump_log(str(data / "ev-0"))
    assert text.returncode == 0
    assert text.stdout.count("baseOffset:") >= len(CODECS)
    assert "isvalid: false" not in text.stdout
