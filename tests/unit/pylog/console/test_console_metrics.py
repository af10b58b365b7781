"""pylog.console.metrics: the Prometheus text the console reads."""

from __future__ import annotations

import http.server
import threading

import pytest

from pylog.console.metrics import (
    BYTES_OUT,
    LOG_SIZE,
    MESSAGES_IN,
    MetricsUnavailable,
    parse_text,
    scrape,
    topic_counters,
)

TEXT = f"""# HELP {MESSAGES_IN} Records appended.
# TYPE {MESSAGES_IN} counter
{MESSAGES_IN}{{topic="orders"}} 120.0
{MESSAGES_IN}{{topic="pay\\"ments",broker="1"}} 3
{MESSAGES_IN}{{topic="pay\\"ments",broker="2"}} 4 1700000000000
{MESSAGES_IN} 999
{BYTES_OUT}{{topic="orders"}} 2.5e3
{LOG_SIZE}{{topic="orders",partition="0"}} 100
{LOG_SIZE}{{topic="orders",partition="1"}} 50
kafka_other{{topic="orders"}} 7
broken{{topic="x" 1
nan_metric{{topic="orders"}} NaN
"""


def test_parse_samples() -> None:
    samples = list(parse_text(TEXT))
    names = [s.name for s in samples]
    assert names.count(MESSAGES_IN) == 4
    assert "broken" not in names and "nan_metric" not in names
    assert samples[1].labels == {"topic": 'pay"ments', "broker": "1"}
    assert samples[3].labels == {} and samples[3].value == 999


def test_counters_sum_per_topic_and_skip_totals() -> None:
    c = topic_counters(parse_text(TEXT))
    assert c.messages_in == {"orders": 120.0, 'pay"ments': 7.0}
    assert c.bytes_out == {"orders": 2500.0}
    assert c.log_size == {"orders": 150.0}
    assert c.bytes_in == {}
    assert not c.empty
    assert topic_counters([]).empty


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = TEXT.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_scrape_two_urls_sums_them() -> None:
    import asyncio

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        c = asyncio.run(scrape([url, url]))
        assert c.messages_in["orders"] == 240.0
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_an_unreachable_url_says_which() -> None:
    import asyncio
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MetricsUnavailable, match=f"127.0.0.1:{port}"):
        asyncio.run(scrape([f"http://127.0.0.1:{port}/metrics"], timeout=1.0))
