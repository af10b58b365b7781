"""The console's pages against Tansu, an independent Kafka-compatible broker (the shared
``tansu_broker`` of conftest.py; skipped, saying how to install it, when it is missing).

The same flows as test_console_pages.py on pylog's broker: create a topic and produce a
record from the forms, find it in the browser (escaped), see a group's lag and reset it.
Tansu 0.6 lists groups only once offsets were committed and answers some views differently
(state "Unknown" in ListGroups); the pages show what it answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pylog.client import Consumer, TopicPartition
from tests._harness.console import ConsoleClient, console_client, post

pytestmark = pytest.mark.integration

PAGE_APIS = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 9: "OffsetFetch",
             15: "DescribeGroups", 16: "ListGroups", 19: "CreateTopics", 32: "DescribeConfigs"}


@pytest.fixture(scope="module")
def tansu(tansu_broker: Any) -> Iterator[ConsoleClient]:
    versions = tansu_broker.api_versions()
    missing = [name for key, name in PAGE_APIS.items() if key not in versions]
    if missing:
        pytest.skip(f"Tansu does not serve {', '.join(missing)}")
    with console_client(tansu_broker.bootstrap) as c:
        c.bootstrap = tansu_broker.bootstrap  # type: ignore[attr-defined]
        yield c


def test_pages_on_tansu(tansu: ConsoleClient, topic_name: str) -> None:
    resp = post(tansu, "/topics", {"name": topic_name, "partitions": "2"})
    assert resp.status_code == 303, resp.text
    overview = tansu.get("/overview.json").json()
    assert overview["brokers"] and overview["partition_count"] >= 2
    topic = tansu.get(f"/topics/{topic_name}.json").json()
    assert [p["partition"] for p in topic["partitions"]] == [0, 1]
    assert topic["missing"] == []
    assert "/topics" in tansu.get("/topics").text and tansu.get("/brokers").status_code == 200

    form = f"/topics/{topic_name}/produce"
    value = "<img src=x onerror=alert(1)>"
    resp = post(tansu, form, {"partition": "0", "key": "k", "value": value,
                              "headers": "h=1"}, form)
    assert resp.status_code == 303
    found = tansu.get(f"/topics/{topic_name}/messages.json",
                      params={"partition": "0", "mode": "offset", "offset": "0"}).json()
    (r,) = found["records"]
    assert (r["key"], r["value"], r["headers"][0]["value"]) == ("k", value, "1")
    html = tansu.get(f"/topics/{topic_name}/messages", params={"partition": "0"}).text
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_group_lag_and_reset_on_tansu(tansu: ConsoleClient, topic_name: str) -> None:
    post(tansu, "/topics", {"name": topic_name, "partitions": "1"})
    form = f"/topics/{topic_name}/produce"
    for i in range(3):
        post(tansu, form, {"partition": "0", "value": f"v{i}"}, form)
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    bootstrap = tansu.bootstrap  # type: ignore[attr-defined]
    with Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False) as c:
        c.assign([tp])  # a simple commit (generation -1): Tansu's joins take a while
        c.commit({tp: 1})
    data = tansu.get(f"/groups/{group}.json").json()
    assert [(o["committed"], o["end_offset"], o["lag"]) for o in data["offsets"]] == [(1, 3, 2)]
    assert data["total_lag"] == 2
    page = f"/groups/{group}"
    done = post(tansu, f"{page}/reset", {"mode": "to-latest", "action": "execute"}, page)
    assert done.status_code == 303, done.text
    data = tansu.get(f"/groups/{group}.json").json()
    assert [(o["committed"], o["lag"]) for o in data["offsets"]] == [(3, 0)]
