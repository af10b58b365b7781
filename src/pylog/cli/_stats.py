"""Throughput and latency bookkeeping for ``pylog perf``: windows, totals, percentiles.

Units follow Kafka's perf tools: "MB" is 2**20 bytes, latencies are milliseconds, and a
percentile is the nearest-rank value of the sorted sample (index ``int(p * n)``), as
``ProducerPerformance.Stats.percentiles`` computes it. Latencies are kept whole (one
float64 per record) rather than sampled.
"""

from __future__ import annotations

import time
from typing import IO, Any

import numpy as np

__all__ = ["MB", "PERCENTILES", "Window", "percentiles", "latency_summary", "Progress"]

MB = 1024 * 1024
PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999))


def percentiles(values: np.ndarray, ps: tuple[float, ...]) -> list[float]:
    """Nearest-rank percentiles of ``values`` (empty: zeros)."""
    n = len(values)
    if n == 0:
        return [0.0] * len(ps)
    idx = [min(n - 1, int(p * n)) for p in ps]
    part = np.partition(values, idx)
    return [float(part[i]) for i in idx]


def latency_summary(values: np.ndarray) -> dict[str, float]:
    """``avg``, ``max`` and the ``PERCENTILES`` of a latency sample, in ms."""
    if len(values) == 0:
        return {"avg": 0.0, "max": 0.0, **{name: 0.0 for name, _ in PERCENTILES}}
    pcs = percentiles(values, tuple(p for _, p in PERCENTILES))
    return {"avg": float(values.mean()), "max": float(values.max()),
            **{name: v for (name, _), v in zip(PERCENTILES, pcs, strict=True)}}


class Window:
    """Counts of one reporting interval (or of the whole run)."""

    __slots__ = ("start", "count", "bytes", "latency_sum", "latency_max")

    def __init__(self, start: float | None = None) -> None:
        self.start = time.perf_counter() if start is None else start
        self.count = 0
        self.bytes = 0
        self.latency_sum = 0.0
        self.latency_max = 0.0

    def add(self, count: int, nbytes: int, latencies: np.ndarray | None = None) -> None:
        self.count += count
        self.bytes += nbytes
        if latencies is not None and len(latencies):
            self.latency_sum += float(latencies.sum())
            self.latency_max = max(self.latency_max, float(latencies.max()))

    def rates(self, now: float) -> tuple[float, float]:
        """(records/s, MB/s) since the window started."""
        elapsed = max(now - self.start, 1e-9)
        return self.count / elapsed, self.bytes / elapsed / MB

    def line(self, verb: str, now: float, latency: str = "latency") -> str:
        """Kafka's window line: ``N records sent, X records/sec (Y MB/sec), Z ms avg
        latency, W ms max latency.``"""
        rps, mbps = self.rates(now)
        avg = self.latency_sum / self.count if self.count else 0.0
        return (f"{self.count} records {verb}, {rps:.1f} records/sec ({mbps:.2f} MB/sec), "
                f"{avg:.1f} ms avg {latency}, {self.latency_max:.1f} ms max {latency}.")


class Progress:
    """Progress of a run: Kafka's window lines every ``interval`` seconds, and on a
    terminal a bar.

    Not on a terminal (a pipe, a file, CI) each window line is printed on a line of its own,
    as Kafka's tools print them. On a terminal one line is rewritten in place: once the run
    has gone on for ``BAR_DELAY`` seconds and its ``total`` is known, a bar with the share
    done, the rate and the time left, followed by the last window line.
    """

    BAR_DELAY = 1.0  # seconds before a bar appears: short runs stay quiet
    BAR_EVERY = 0.2  # seconds between redraws
    BAR_WIDTH = 24

    def __init__(self, stream: IO[str], interval: float, total: int | None = None,
                 unit: str = "records") -> None:
        self.stream = stream
        self.interval = interval
        self.total = total
        self.unit = unit
        self.live = bool(getattr(stream, "isatty", lambda: False)())
        self.started = time.perf_counter()
        self.next_at = self.started + interval
        self._shown = False
        self._text = ""
        self._done = 0
        self._bar_next = self.started + self.BAR_DELAY

    def restart(self, now: float) -> None:
        """The run's clock starts now (after set-up such as metadata or a group join)."""
        self.started = now
        self.next_at = now + self.interval
        self._bar_next = now + self.BAR_DELAY

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def show(self, text: str, now: float) -> None:
        self.next_at = now + self.interval
        if self.live:
            self._text = text
            self._draw(now)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def advance(self, done: int, now: float) -> None:
        """``done`` of ``total`` are through: redraw the bar when one is due (a terminal)."""
        self._done = done
        if self.live and self.total and now >= self._bar_next:
            self._bar_next = now + self.BAR_EVERY
            self._draw(now)

    def bar(self, now: float) -> str:
        """``[#####.......]  41.7% 417,000/1,000,000 records, 208,391/s, 3 s left``"""
        total = max(self.total or 0, 1)
        frac = min(self._done / total, 1.0)
        filled = int(frac * self.BAR_WIDTH)
        elapsed = max(now - self.started, 1e-9)
        rate = self._done / elapsed
        left = f"{(total - self._done) / rate:.0f} s left" if rate > 0 else "waiting"
        return (f"[{'#' * filled}{'.' * (self.BAR_WIDTH - filled)}] {frac:6.1%} "
                f"{self._done:,}/{total:,} {self.unit}, {rate:,.0f}/s, {left}")

    def _draw(self, now: float) -> None:
        parts = []
        if self.total and now - self.started >= self.BAR_DELAY:
            parts.append(self.bar(now))
        if self._text:
            parts.append(self._text)
        if parts:
            self.stream.write("\r\x1b[K" + "  ".join(parts))
            self.stream.flush()
            self._shown = True

    def end(self) -> None:
        """Leave the live line (if any) so that the summary starts on a line of its own."""
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


def jsonable(obj: Any) -> Any:
    """Round floats for JSON output (microsecond-level precision is noise here)."""
    if isinstance(obj, float):
        return round(obj, 4)
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [jsonable(v) for v in obj]
    return obj
