"""The console's pages over HTTP against a real broker (Starlette's test client, the app's
lifespan run): the data of each page first (its ``.json`` twin), then a few selectors of the
HTML; every write behind CSRF; read-only mode; basic auth."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from pylog.client import Consumer, Producer, TopicPartition
from pylog.console.app import create_app, split_settings
from pylog.console.metrics import BYTES_IN, BYTES_OUT, LOG_SIZE, MESSAGES_IN
from pylog.console.security import CSRF_FIELD, hash_password
from tests._harness.console import ConsoleClient, ConsoleProcess, console_client, csrf, post
from tests.integration.conftest import start_target

pytestmark = pytest.mark.integration

OVERRIDES = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0",
             "group.min.session.timeout.ms": "500", "offsets.topic.num.partitions": "2"}
XSS = "<script>document.title='owned'</script>"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    b = start_target(tmp_path_factory, "console", OVERRIDES)
    yield b
    assert b.stop() == 0, b.read_log()


@pytest.fixture(scope="module")
def client(cluster: Any) -> Iterator[ConsoleClient]:
    with console_client(cluster.bootstrap) as c:
        yield c


def wait_for(check: Any, what: str, timeout: float = 20.0, state: Any = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}"
                                 + (f"; state: {state()}" if state else ""))
        time.sleep(0.1)


def make_topic(client: ConsoleClient, name: str, partitions: int = 2) -> None:
    resp = post(client, "/topics", {"name": name, "partitions": str(partitions)})
    assert resp.status_code == 303, resp.text
    assert resp.headers["location"].startswith(f"/topics/{name}?msg=")


def produce_lines(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(n):
            p.send(topic, b"line %d" % i, key=b"k%d" % i, partition=partition)
        p.flush(30)


def test_overview(client: ConsoleClient, cluster: Any) -> None:
    data = client.get("/overview.json").json()
    assert len(data["brokers"]) == cluster.n
    assert data["controller_id"] in {b["node_id"] for b in data["brokers"]}
    assert data["offline"] == 0
    assert {"Produce", "Fetch", "Metadata"} <= {a["name"] for a in data["apis"]}
    html = client.get("/").text
    assert f'data-test="broker-count">{cluster.n}<' in html
    assert "content-security-policy" in client.get("/").headers
    from pylog.client import Admin  # the client call behind the API table

    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        any_broker = admin.api_versions()
        node = data["brokers"][0]["node_id"]
        assert admin.api_versions(node) == any_broker
        assert any_broker[3][1] >= 9 and any_broker[0][0] <= 3  # Metadata, Produce ranges
        assert {a["key"]: (a["min"], a["max"]) for a in data["apis"]}[3] == any_broker[3]


def test_create_search_and_describe_a_topic(client: ConsoleClient, topic_name: str) -> None:
    make_topic(client, topic_name, 3)
    rows = client.get("/topics.json", params={"q": topic_name[2:12].upper()}).json()["topics"]
    assert [r["name"] for r in rows] == [topic_name]
    assert rows[0]["partitions"] == 3 and rows[0]["records"] == 0
    assert client.get("/topics.json", params={"q": "no-such-thing"}).json()["topics"] == []
    data = client.get(f"/topics/{topic_name}.json").json()
    assert [p["partition"] for p in data["partitions"]] == [0, 1, 2]
    for p in data["partitions"]:
        assert p["leader"] in p["replicas"] and p["isr"] == p["replicas"]
        assert (p["start_offset"], p["end_offset"]) == (0, 0)
    configs = {c["name"]: c for c in data["configs"]}
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["retention.ms"]["source"] in {"DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"}
    html = client.get(f"/topics/{topic_name}").text
    assert html.count('data-test="partition-row"') == 3
    assert 'data-test="delete-topic"' in html


def test_edit_a_config_and_reset_it(client: ConsoleClient, topic_name: str) -> None:
    make_topic(client, topic_name, 1)
    page = f"/topics/{topic_name}"
    resp = post(client, f"{page}/config", {"key": "retention.ms", "value": "3600000",
                                           "action": "set"}, page)
    assert resp.status_code == 303
    configs = {c["name"]: c for c in client.get(f"{page}.json").json()["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert 'value="delete">reset to default' in client.get(page).text
    post(client, f"{page}/config", {"key": "retention.ms", "action": "delete"}, page)
    configs = {c["name"]: c for c in client.get(f"{page}.json").json()["configs"]}
    assert configs["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"
    bad = post(client, f"{page}/config", {"key": "retention.ms", "value": "soon",
                                          "action": "set"}, page)
    assert bad.status_code == 400 and "InvalidConfig" in bad.text


def test_delete_needs_the_name_typed(client: ConsoleClient, topic_name: str) -> None:
    make_topic(client, topic_name, 1)
    page = f"/topics/{topic_name}"
    refused = post(client, f"{page}/delete", {"confirm": "yes"}, page)
    assert refused.status_code == 400 and "type its name" in refused.text
    assert client.get(f"{page}.json").status_code == 200
    done = post(client, f"{page}/delete", {"confirm": topic_name}, page)
    assert done.status_code == 303
    wait_for(lambda: client.get(f"{page}.json").status_code == 404, "the topic to go")
    assert "/topics" in client.get(page).text


def test_every_write_needs_the_csrf_token(client: ConsoleClient, topic_name: str) -> None:
    make_topic(client, topic_name, 1)
    token = csrf(client)
    posts = [r.path_format for r in client.app.routes
             if "POST" in (getattr(r, "methods", None) or ())]
    assert len(posts) == 5
    for path in posts:
        url = (path.replace("{name}", topic_name).replace("{group_id}", "g/reset"))
        missing = client.post(url, data={"name": "x", "confirm": topic_name})
        assert missing.status_code == 403, url
        assert "CSRF" in missing.text
        wrong = client.post(url, data={CSRF_FIELD: token + "x", "confirm": topic_name})
        assert wrong.status_code == 403, url
    other_site = client.post("/topics", data={CSRF_FIELD: token, "name": "x"},
                             headers={"Origin": "http://evil.example"})
    assert other_site.status_code == 403 and "cross-site" in other_site.text
    assert client.get(f"/topics/{topic_name}.json").status_code == 200  # still there


def test_produce_from_the_form_and_browse(client: ConsoleClient, cluster: Any,
                                          topic_name: str) -> None:
    make_topic(client, topic_name, 2)
    form = f"/topics/{topic_name}/produce"
    resp = post(client, form, {"partition": "1", "key": "user-7", "value": '{"n": 1}',
                               "headers": "origin=console\ntrace=abc"}, form)
    assert resp.status_code == 303
    assert "offset=0" in resp.headers["location"] and "partition=1" in resp.headers["location"]
    produce_lines(cluster.bootstrap, topic_name, 30, partition=0)
    base = f"/topics/{topic_name}/messages.json"
    one = client.get(base, params={"partition": "1", "mode": "offset", "offset": "0"}).json()
    (r,) = one["records"]
    assert (r["key"], r["partition"], r["offset"]) == ("user-7", 1, 0)
    assert r["value"] == '{\n  "n": 1\n}' and r["value_format"] == "json"
    assert [(h["name"], h["value"]) for h in r["headers"]] == [("origin", "console"),
                                                                ("trace", "abc")]
    newest = client.get(base, params={"partition": "0", "limit": "5"}).json()
    assert [x["offset"] for x in newest["records"]] == [25, 26, 27, 28, 29]
    both = client.get(base, params={"limit": "3"}).json()
    assert len(both["records"]) == 3 and both["complete"]
    from_offset = client.get(base, params={"partition": "0", "mode": "offset", "offset": "10",
                                           "limit": "4"}).json()
    assert [x["offset"] for x in from_offset["records"]] == [10, 11, 12, 13]
    filtered = client.get(base, params={"partition": "0", "mode": "offset", "offset": "0",
                                        "filter": "line 2", "limit": "50"}).json()
    assert [x["value"] for x in filtered["records"]] == ["line 2"] + [f"line {i}"
                                                                       for i in range(20, 30)]
    hexed = client.get(base, params={"partition": "1", "mode": "offset", "format": "hex"}).json()
    assert hexed["records"][0]["value"].startswith("00000000  7b 22 6e 22")
    future = client.get(base, params={"mode": "timestamp", "timestamp": "2999-01-01T00:00:00"})
    assert future.json()["records"] == []
    past = client.get(base, params={"partition": "0", "mode": "timestamp", "timestamp": "0",
                                    "limit": "2"}).json()
    assert [x["offset"] for x in past["records"]] == [0, 1]
    lines = client.get(f"/topics/{topic_name}/messages.jsonl",
                       params={"partition": "0", "limit": "3"}).text.splitlines()
    assert [json.loads(x)["value"] for x in lines] == [
        {"encoding": "utf-8", "data": f"line {i}"} for i in (27, 28, 29)]
    detail = client.get(f"/topics/{topic_name}/messages/1/0.json").json()
    assert detail["views"]["hex"]["key"].startswith("00000000  75 73 65 72")
    assert detail["raw"]["headers"][0] == ["origin", {"encoding": "utf-8", "data": "console"}]
    assert client.get(f"/topics/{topic_name}/messages/1/5").status_code == 404
    html = client.get(f"/topics/{topic_name}/messages", params={"partition": "0"}).text
    assert html.count('data-test="record-row"') == 30 or html.count('data-test="record-row"') == 50


def test_bad_browse_parameters_say_what_is_wrong(client: ConsoleClient, topic_name: str) -> None:
    make_topic(client, topic_name, 1)
    base = f"/topics/{topic_name}/messages"
    for params, words in [({"partition": "9"}, "no partition 9"),
                          ({"limit": "0"}, "limit 0"), ({"format": "yaml"}, "format"),
                          ({"mode": "timestamp", "timestamp": "soon"}, "date-time"),
                          ({"offset": "x", "mode": "offset"}, "whole number")]:
        resp = client.get(base, params=params)
        assert resp.status_code == 400 and words in resp.text, (params, resp.text[-300:])
    assert client.get("/topics/no-such-topic").status_code == 404


def test_record_values_are_escaped(client: ConsoleClient, cluster: Any, topic_name: str) -> None:
    make_topic(client, topic_name, 1)
    with Producer(bootstrap_servers=cluster.bootstrap) as p:
        p.send(topic_name, XSS.encode(), key=XSS.encode(), headers=[(XSS, XSS.encode())])
        p.flush(30)
    for page in (f"/topics/{topic_name}/messages", f"/topics/{topic_name}/messages/0/0"):
        html = client.get(page).text
        assert "<script>document" not in html
        assert "&lt;script&gt;document.title=&#39;owned&#39;&lt;/script&gt;" in html


def test_groups_lag_and_offset_reset(client: ConsoleClient, cluster: Any, topic_name: str) -> None:
    make_topic(client, topic_name, 2)
    for part in (0, 1):
        produce_lines(cluster.bootstrap, topic_name, 10, partition=part)
    group = f"g-{topic_name}"
    consumer = Consumer(bootstrap_servers=cluster.bootstrap, group_id=group,
                        client_id="lag-reader", auto_offset_reset="earliest",
                        enable_auto_commit=False, session_timeout_ms=6000)
    try:
        consumer.subscribe([topic_name])
        got = 0
        while got < 20:
            got += len(consumer.poll(timeout=1.0))
        consumer.commit({TopicPartition(topic_name, 0): 4, TopicPartition(topic_name, 1): 10})
        rows = client.get("/groups.json").json()["groups"]
        (row,) = [r for r in rows if r["group_id"] == group]
        assert row["state"] == "Stable" and row["members"] == 1
        assert row["protocol_type"] == "consumer"
        data = client.get(f"/groups/{group}.json").json()
        assert data["total_lag"] == 6
        assert [m["client_id"] for m in data["members"]] == ["lag-reader"]
        assert {(o["partition"], o["committed"], o["end_offset"], o["lag"], o["client_id"])
                for o in data["offsets"]} == {(0, 4, 10, 6, "lag-reader"),
                                              (1, 10, 10, 0, "lag-reader")}
        fragment = client.get(f"/groups/{group}/offsets").text
        assert 'data-test="total-lag">6<' in fragment and "<html" not in fragment
        wait_for(lambda: client.get("/chart.json", params={"series": f"lag:{group}"}
                                    ).json()["chart"]["last"] == 6.0, "the lag series")
        page = f"/groups/{group}"
        preview = post(client, f"{page}/reset", {"mode": "to-earliest", "action": "preview"},
                       page)
        assert preview.status_code == 200
        assert preview.text.count('data-test="plan-new">0<') == 2
        busy = post(client, f"{page}/reset", {"mode": "to-earliest", "action": "execute"}, page)
        assert busy.status_code == 409 and "lag-reader" in busy.text
    finally:
        consumer.close()
    page = f"/groups/{group}"
    wait_for(lambda: client.get(f"{page}.json").json()["members"] == [], "the member to leave")
    done = post(client, f"{page}/reset", {"mode": "shift-by", "value": "-3",
                                          "topic": topic_name, "action": "execute"}, page)
    assert done.status_code == 303, done.text
    offsets = {o["partition"]: o["committed"] for o in client.get(f"{page}.json").json()["offsets"]}
    assert offsets == {0: 1, 1: 7}
    bad = post(client, f"{page}/reset", {"mode": "to-offset", "value": "x"}, page)
    assert bad.status_code == 400 and "expected an integer" in bad.text
    other = topic_name + "-other"
    make_topic(client, other, 1)
    no_offsets = post(client, f"{page}/reset", {"mode": "shift-by", "value": "1",
                                                "topic": other, "action": "preview"}, page)
    assert no_offsets.status_code == 400 and "no committed offset" in no_offsets.text
    to_latest = post(client, f"{page}/reset", {"mode": "to-latest", "topic": other,
                                               "action": "preview"}, page)
    assert to_latest.status_code == 200 and 'data-test="plan-new">0<' in to_latest.text


def test_brokers_and_charts(client: ConsoleClient, cluster: Any, topic_name: str) -> None:
    make_topic(client, topic_name, 4)
    brokers = client.get("/brokers.json").json()["brokers"]
    topics = client.get("/topics.json", params={"internal": "1"}).json()["topics"]
    assert sum(b["leaders"] for b in brokers) == sum(t["partitions"] for t in topics)
    series = {"series": f"produce:{topic_name}"}
    # A rate needs the partition in two samples: produce once the sampler knows the topic.
    wait_for(lambda: not client.get("/chart.json", params=series).json()["chart"]["empty"],
             "the sampler to see the new topic")
    produce_lines(cluster.bootstrap, topic_name, 50)
    chart = wait_for(lambda: (c := client.get("/chart.json", params={
        "series": f"produce:{topic_name}"}).json()["chart"]) and c["max"] and c,
        "a produce rate above 0", state=lambda: (client.app.state.console.sampler.status(),
                                                 client.app.state.console.history.series.keys()))
    assert chart["max"] > 0 and not chart["empty"]
    fragment = client.get("/chart", params={"series": "produce:*"}).text
    assert fragment.lstrip().startswith("<figure") and "<polyline" in fragment
    assert client.get("/chart", params={"series": "nonsense"}).status_code == 400


def test_read_only_console_has_no_write_action(cluster: Any, topic_name: str) -> None:
    with console_client(cluster.bootstrap) as rw:
        make_topic(rw, topic_name + "-ro", 1)
    with console_client(cluster.bootstrap, read_only=True) as ro:
        name = topic_name + "-ro"
        for page in ("/", "/topics", f"/topics/{name}", f"/topics/{name}/messages", "/groups",
                     "/brokers"):
            html = ro.get(page).text
            assert 'method="post"' not in html, page
            assert 'data-test="read-only"' in html
        topic_page = ro.get(f"/topics/{name}").text
        assert 'data-test="produce-link"' not in topic_page
        assert 'data-test="browse-link"' in topic_page
        refused = ro.post("/topics", data={"name": "x"})
        assert refused.status_code == 405 and "read-only" in refused.text
        assert ro.get(f"/topics/{name}/produce").status_code == 404


def test_basic_auth(cluster: Any) -> None:
    stored = hash_password("letmein", n=2**4, r=1, p=1)
    from pylog.console.security import Credentials

    with console_client(cluster.bootstrap, auth=Credentials("ops", stored)) as c:
        assert c.get("/").status_code == 401
        assert "basic" in c.get("/").headers["www-authenticate"].lower()
        assert c.get("/", auth=("ops", "wrong")).status_code == 401
        assert c.get("/", auth=("dev", "letmein")).status_code == 401
        assert c.get("/overview.json", auth=("ops", "letmein")).status_code == 200


class GrowingMetrics(http.server.BaseHTTPRequestHandler):
    """A /metrics whose counters for TOPIC grow by 100 records and 10 KiB per scrape."""

    scrapes = 0
    topic = ""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        cls = type(self)
        cls.scrapes += 1
        n, t = cls.scrapes, cls.topic
        body = (f'{MESSAGES_IN}{{topic="{t}"}} {100 * n}\n'
                f'{BYTES_IN}{{topic="{t}"}} {10240 * n}\n'
                f'{BYTES_OUT}{{topic="{t}"}} {5120 * n}\n'
                f'{LOG_SIZE}{{topic="{t}",partition="0"}} {2048 * n}\n').encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_rates_and_sizes_from_a_metrics_url(cluster: Any, topic_name: str) -> None:
    GrowingMetrics.topic = topic_name
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), GrowingMetrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        with console_client(cluster.bootstrap, metrics_urls=[url]) as c:
            make_topic(c, topic_name, 1)
            chart = wait_for(lambda: (x := c.get("/chart.json", params={
                "series": f"bytes_in:{topic_name}"}).json()["chart"]) and not x["empty"] and x,
                "a bytes-in rate from the metrics")
            assert chart["last"] > 0
            row = wait_for(lambda: [r for r in c.get("/topics.json").json()["topics"]
                                    if r["name"] == topic_name and r["size"]], "a size")[0]
            assert row["size"] % 2048 == 0 and row["produce"] > 0  # from messagesin, no records
            page = c.get(f"/topics/{topic_name}").text
            assert f"bytes_in:{topic_name}" in page and "No sizes" not in (
                c.get("/topics").text)
            assert c.get("/").text.count("Charts from metrics") == 1
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_group_id_with_a_slash_and_a_space(client: ConsoleClient, cluster: Any,
                                             topic_name: str) -> None:
    make_topic(client, topic_name, 1)
    group = f"team a/{topic_name}"
    with Consumer(bootstrap_servers=cluster.bootstrap, group_id=group) as c:
        c.commit({TopicPartition(topic_name, 0): 0})
    listing = client.get("/groups").text
    link = "/groups/" + quote(group, safe="")
    assert f'href="{link}"' in listing
    data = client.get(link + ".json").json()
    assert data["group_id"] == group and data["offsets"][0]["committed"] == 0
    assert f'data-refresh="{link}/offsets"' in client.get(link).text
    assert client.get("/groups", params={"open": group}).headers["location"] == link


def test_unknown_client_settings_are_refused() -> None:
    from pylog.client import ConfigError

    admin, consumer, producer = split_settings({"bootstrap.servers": "h:1", "linger.ms": 3,
                                                "fetch.max.wait.ms": 7})
    assert "linger.ms" in producer and "linger.ms" not in consumer and "linger.ms" not in admin
    assert "fetch.max.wait.ms" in consumer
    with pytest.raises(ConfigError, match="lnger.ms"):
        create_app_with({"bootstrap.servers": "h:1", "lnger.ms": 3})


def create_app_with(settings: dict[str, Any]) -> Any:
    from pylog.console import ConsoleConfig

    return create_app(ConsoleConfig(settings))


def test_the_command_serves_and_warns_off_loopback(cluster: Any, tmp_path: Any) -> None:
    proc = ConsoleProcess(tmp_path, cluster.bootstrap, "--host", "0.0.0.0", "--read-only")
    proc.start()
    try:
        port = proc.url.rsplit(":", 1)[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/overview.json", timeout=30) as r:
            assert json.load(r)["brokers"]
    finally:
        assert proc.stop() == 0
    log = proc.log_path.read_text()
    assert "warning: listening on 0.0.0.0, not loopback" in log and "(add --auth)" in log
    assert "add --read-only" not in log


def test_sizes_from_describe_log_dirs_without_metrics(client: ConsoleClient, cluster: Any,
                                                      topic_name: str) -> None:
    """No metrics URL: the topic list and the topic page show sizes on disk from
    DescribeLogDirs (every replica summed)."""
    make_topic(client, topic_name, 1)
    produce_lines(cluster.bootstrap, topic_name, 20)
    row = wait_for(lambda: [r for r in client.get("/topics.json").json()["topics"]
                            if r["name"] == topic_name and r["size"]], "a size")[0]
    assert row["size"] > 20  # 20 records, batch headers on top
    assert "No sizes" not in client.get("/topics").text
    assert client.get(f"/topics/{topic_name}.json").json()["size"] == row["size"]
