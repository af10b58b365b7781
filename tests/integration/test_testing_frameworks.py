"""Stream-processing frameworks against ``pylog.testing.KafkaBroker``: FastStream (on
aiokafka) publishes and its subscriber consumes in a group; Quix Streams (on
confluent-kafka) runs an application that reads a topic into its dataframe. Skipped when
the framework is not installed (neither is a pylog dependency)."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
import warnings

import pytest

from pylog.testing import KafkaBroker

pytestmark = pytest.mark.integration


def _import(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # their import-time deprecation warnings
        pytest.importorskip(name, reason=f"{name} is not installed (pip install {name})")


def test_faststream() -> None:
    _import("faststream")
    from faststream.kafka import KafkaBroker as FastStreamBroker

    topic = f"fs-{uuid.uuid4().hex[:8]}"
    received: list[dict[str, int]] = []

    async def main(bootstrap: str) -> None:
        app = FastStreamBroker(bootstrap)
        done = asyncio.Event()

        @app.subscriber(topic, group_id="fs-group", auto_offset_reset="earliest")
        async def handle(body: dict[str, int]) -> None:
            received.append(body)
            if len(received) == 3:
                done.set()

        async with app:
            await app.start()
            for i in range(3):
                await app.publish({"n": i}, topic)
            await asyncio.wait_for(done.wait(), 30)

    with KafkaBroker() as broker:
        broker.create_topic(topic)
        asyncio.run(main(broker.bootstrap_servers))
        assert [json.loads(r.value or b"") for r in broker.records(topic)] == [
            {"n": 0}, {"n": 1}, {"n": 2}]
    assert received == [{"n": 0}, {"n": 1}, {"n": 2}]


@pytest.mark.filterwarnings("ignore:The httpx module is deprecated")  # authlib, imported lazily
def test_quixstreams(tmp_path) -> None:
    _import("quixstreams")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from quixstreams import Application

    topic_name = f"qx-{uuid.uuid4().hex[:8]}"
    with KafkaBroker() as broker:
        app = Application(broker_address=broker.bootstrap_servers, consumer_group="qx-group",
                          auto_offset_reset="earliest", state_dir=str(tmp_path / "state"))
        topic = app.topic(topic_name, value_serializer="json", value_deserializer="json")
        with app.get_producer() as producer:
            for i in range(3):
                msg = topic.serialize(key=f"k{i}", value={"n": i})
                producer.produce(topic=topic.name, key=msg.key, value=msg.value)
        app.dataframe(topic).apply(lambda v: {"doubled": v["n"] * 2})  # run() finds it
        # run() sets SIGINT and SIGTERM handlers bound to the app and never puts the old
        # ones back: the app, and its librdkafka clients, stayed alive (and in charge of
        # the xdist worker's SIGTERM) for the rest of the process.
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            rows = app.run(count=3, timeout=30)
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        assert sorted(r["doubled"] for r in rows) == [0, 2, 4]
        assert len(broker.records(topic_name)) == 3
