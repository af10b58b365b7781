"""Scraping a broker's metrics endpoint in tests: urllib for HTTP, prometheus_client's parser
for the text, so a malformed exposition fails the test that reads it."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from typing import Any

from _harness.waiting import wait_until
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def metrics_port(broker: Any) -> int:
    """The port of ``metrics.listener`` a broker process logged (its latest start)."""
    found = wait_until(lambda: re.findall(r"metrics on http://127\.0\.0\.1:(\d+)/metrics",
                                          broker.read_log()), 10, "the metrics address in the log")
    return int(found[-1])


def get(port: int, path: str, method: str = "GET") -> tuple[int, str, dict[str, str]]:
    """(status, body, headers) of one request to the metrics listener."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode(), dict(exc.headers)


def parse(text: str) -> Samples:
    """{(sample name, sorted labels): value}; a duplicate sample fails."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in samples, f"duplicate sample {key}"
            samples[key] = s.value
    return samples


def scrape(port: int) -> Samples:
    status, text, headers = get(port, "/metrics")
    assert status == 200, (status, text)
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return parse(text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]
