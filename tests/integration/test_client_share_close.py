"""``pylog.client.ShareConsumer.close()`` at random moments never hangs and leaves no
socket open: members of one share group with 100 ms heartbeats are closed after a random
number of polls and a random pause (so that the close lands as a heartbeat, a ShareFetch
or an acknowledgement is in flight, or as the member is still joining), with and without
a ``close(timeout)``. A close that hung once for the whole pytest timeout (event loop idle)
is what this looks for; each close gets a guard, not a speed assertion."""

from __future__ import annotations

import random
import sys
import threading
import traceback
import uuid

import pytest

from pylog.client import Admin, Producer, ShareConsumer
from pylog.client.aio.admin import ConfigResource
from tests.integration.conftest import BrokerProcess, cluster_size

pytestmark = pytest.mark.skipif(bool(cluster_size()), reason="share groups: single node only")

OVERRIDES = {
    "group.share.heartbeat.interval.ms": "100",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.min.record.lock.duration.ms": "1000",
    "offsets.topic.num.partitions": "1",
}
CLOSES = 24
# The guard against a hang (a close ends within a few seconds, or, hung, never).
GUARD = 60.0


@pytest.fixture(scope="module")
def hbroker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("share-close") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


def _close_guarded(c: ShareConsumer, timeout: float | None) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            c.close(timeout)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=run, name="test-share-close")
    t.start()
    t.join(GUARD)
    if t.is_alive():
        frames = sys._current_frames()
        loop_thread = c._thread.thread
        stacks = "".join(traceback.format_stack(frames[i]) for i in (t.ident, loop_thread.ident)
                         if i in frames)
        pytest.fail(f"ShareConsumer.close({timeout}) hung; stacks:\n{stacks}")
    assert errors == []
    assert not c._thread.thread.is_alive()


@pytest.mark.parametrize("with_timeout", [False, True], ids=["close()", "close(timeout)"])
def test_share_consumer_closes_at_random_moments(hbroker: BrokerProcess, with_timeout: bool) -> None:
    bs = hbroker.bootstrap
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    topic = f"share-close-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    with Admin(bootstrap_servers=bs) as admin:
        admin.create_topics([topic])
        admin.alter_configs(ConfigResource("group", group), {"share.auto.offset.reset": "earliest"})
    with Producer({"bootstrap.servers": bs, "linger.ms": 5}) as p:
        for i in range(300):
            p.send(topic, value=b"v%d" % i)
        p.flush()
    polled = 0
    for i in range(CLOSES):
        mode = "explicit" if i % 3 == 2 else "implicit"
        c = ShareConsumer({"bootstrap.servers": bs, "group.id": group,
                           "share.acknowledgement.mode": mode})
        try:
            c.subscribe([topic])
            for _ in range(rng.randrange(4)):
                records = c.poll(rng.uniform(0.0, 0.3), max_records=5)
                polled += len(records)
                if mode == "explicit":
                    for r in records:
                        c.acknowledge(r)
            if rng.random() < 0.3:
                c.commit_async()
            threading.Event().wait(rng.uniform(0.0, 0.25))  # lands the close anywhere
        finally:
            _close_guarded(c, rng.choice([0.2, 1.0, 5.0]) if with_timeout else None)
    assert polled > 0, f"no member got a record (seed {seed})"
