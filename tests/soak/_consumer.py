"""One soak consumer process: ``python _consumer.py CONFIG.json INDEX``.

Reads its share of the topic's partitions from offset 0 with ``assign()`` (consumer groups
are not served yet) while the broker is killed and restarted, checking every record byte for
byte against ``_records`` as it arrives. Writes one line per event to ``out``:

    rec <partition> <offset> <producer> <seq>   a record that is exactly what was produced
    bad <partition> <offset> <what differs>     a record that is not
    jump <partition> <expected> <got>           offsets not dense (a gap or a step back)
    error <name> <reason>                       an error event from the client

It stops once ``consumer_stop_file`` exists and holds ``{"<partition>": end offset}`` and it has read up
to those ends (or ``drain_timeout_s`` passed), writing ``end <partition>:<position> ...``.
"""

from __future__ import annotations

import json
import os
import sys
import time

from _records import check
from confluent_kafka import Consumer, KafkaError, TopicPartition


def main() -> int:
    cfg = json.loads(open(sys.argv[1]).read())
    index, consumers = int(sys.argv[2]), cfg["consumers"]
    seed, partitions, topic = cfg["seed"], cfg["partitions"], cfg["topic"]
    mine = [p for p in range(partitions) if p % consumers == index]
    out = open(cfg["consumer_out"] % index, "a", buffering=1 << 16)
    errors: list[str] = []

    def on_error(err: KafkaError) -> None:
        errors.append(f"error {err.name()} {err.str()!r}")

    c = Consumer({
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": "soak-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # A position beyond the log end after a restart would mean the broker lost records
        # it had served: say so instead of silently starting over.
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 100,
        "fetch.error.backoff.ms": 50,
        "check.crcs": True,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 300,
        "topic.metadata.refresh.interval.ms": 1000,
        "error_cb": on_error,
    })
    c.assign([TopicPartition(topic, p, 0) for p in mine])
    nxt = dict.fromkeys(mine, 0)
    ends: dict[int, int] | None = None
    deadline = None
    parent = os.getppid()
    try:
        while os.getppid() == parent:  # the test died without stopping us: no orphans
            if ends is None and os.path.exists(cfg["consumer_stop_file"]):
                text = open(cfg["consumer_stop_file"]).read()
                if text.strip():
                    ends = {int(p): o for p, o in json.loads(text).items()}
                    deadline = time.monotonic() + cfg["drain_timeout_s"]
            if ends is not None and (all(nxt[p] >= ends[p] for p in mine)
                                     or time.monotonic() > deadline):  # type: ignore[operator]
                break
            for m in c.consume(500, 0.2):
                err = m.error()
                if err is not None:
                    errors.append(f"error {err.name()} {err.str()!r}")
                    continue
                p, off = m.partition(), m.offset()
                if off != nxt[p]:
                    out.write(f"jump {p} {nxt[p]} {off}\n")
                nxt[p] = off + 1
                got = check(seed, partitions, p, m.key(), m.value(), m.headers())
                if isinstance(got, str):
                    out.write(f"bad {p} {off} {got}\n")
                else:
                    out.write(f"rec {p} {off} {got[0]} {got[1]}\n")
            if errors:
                out.write("\n".join(errors) + "\n")
                errors.clear()
    finally:
        c.close()
    out.write("end " + " ".join(f"{p}:{o}" for p, o in sorted(nxt.items())) + "\n")
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
