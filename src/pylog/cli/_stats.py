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
    """Prints window lines: one per line, or rewritten in place on a terminal."""

    def __init__(self, stream: IO[str], interval: float) -> None:
        self.stream = stream
        self.interval = interval
        self.live = bool(getattr(stream, "isatty", lambda: False)())
        self.next_at = time.perf_counter() + interval
        self._shown = False

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def show(self, text: str, now: float) -> None:
        self.next_at = now + self.interval
        if self.live:
            self.stream.write("\r\x1b[K" + text)
            self._shown = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

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
