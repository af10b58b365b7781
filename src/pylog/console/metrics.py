"""Reading a broker's ``/metrics`` (Prometheus text format) for the console's rates and sizes.

The names are Kafka's as the JMX exporter renders them, which is what pylog's metrics
endpoint exposes: ``kafka_server_brokertopicmetrics_messagesin_total{topic=...}`` (records
appended), ``..._bytesin_total`` and ``..._bytesout_total`` (bytes appended and fetched) and
``kafka_log_log_size{topic=...,partition=...}`` (bytes on disk). Counters are summed over
every sample with the same topic (several brokers behind several URLs, or one exporter
labelling samples by broker); rates come from the difference of two scrapes (``history``).

Only the sample lines matter here: ``# HELP``/``# TYPE`` are skipped, label values are
unescaped (``\\\\``, ``\\"``, ``\\n``), and a line that does not parse is ignored rather than
failing the page.
"""

from __future__ import annotations

import asyncio
import math
import re
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from typing import NamedTuple

__all__ = ["Sample", "parse_text", "TopicCounters", "topic_counters", "scrape",
           "MESSAGES_IN", "BYTES_IN", "BYTES_OUT", "LOG_SIZE", "MetricsUnavailable"]

MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
LOG_SIZE = "kafka_log_log_size"

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class MetricsUnavailable(Exception):
    """The metrics URL could not be read (its message says which and why)."""


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


def _labels(text: str) -> dict[str, str] | None:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            return None if text[pos:].strip() else out
        out[m.group(1)] = re.sub(r"\\[\\\"n]", lambda e: _UNESCAPE[e.group(0)], m.group(2))
        pos = m.end()
    return out


def parse_text(text: str) -> Iterator[Sample]:
    """Samples of a Prometheus text exposition, in order; malformed lines are skipped."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        labels = _labels(m.group(3) or "")
        if labels is None:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        yield Sample(m.group(1), labels, value)


class TopicCounters(NamedTuple):
    """Per topic: records in, bytes in, bytes out (counters) and bytes on disk (a gauge)."""

    messages_in: dict[str, float]
    bytes_in: dict[str, float]
    bytes_out: dict[str, float]
    log_size: dict[str, float]

    @property
    def empty(self) -> bool:
        return not (self.messages_in or self.bytes_in or self.bytes_out or self.log_size)


def topic_counters(samples: Iterable[Sample]) -> TopicCounters:
    """Sum the console's four families per ``topic`` label (samples without one are the
    broker-wide totals and are left out)."""
    out = TopicCounters({}, {}, {}, {})
    table = {MESSAGES_IN: out.messages_in, BYTES_IN: out.bytes_in, BYTES_OUT: out.bytes_out,
             LOG_SIZE: out.log_size}
    for s in samples:
        target = table.get(s.name)
        topic = s.labels.get("topic")
        if target is not None and topic:
            target[topic] = target.get(topic, 0.0) + s.value
    return out


def _fetch(url: str, timeout: float) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - the user's URL
            return str(resp.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise MetricsUnavailable(f"cannot read {url}: {reason}") from None


async def scrape(urls: list[str], timeout: float = 2.0) -> TopicCounters:
    """Fetch every URL (on worker threads) and sum their counters per topic.

    Raises:
        MetricsUnavailable: a URL could not be read.
    """
    texts = await asyncio.gather(*(asyncio.to_thread(_fetch, u, timeout) for u in urls))
    return topic_counters(s for text in texts for s in parse_text(text))
