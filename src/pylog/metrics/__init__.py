"""Observability: the broker's metrics in Prometheus's text format, its health checks and
Kafka's request log (docs/metrics.md).

- ``registry``: what the request path counts (``BrokerMetrics``: plain ints on the event
  loop, per request, never per record), the histograms and the text format.
- ``collectors``: one scrape; gauges computed at scrape time from the broker's own state.
- ``http``: ``metrics.listener``'s endpoint (``/metrics``, ``/healthz``, ``/readyz``) on
  the broker's loop.
- ``request_log``: the ``kafka.request.logger`` logger.

This package sits beside ``pylog.config`` in the layers: it imports nothing of the broker,
which hands itself in (tests/unit/test_layering.py).
"""

from pylog.metrics.collectors import render
from pylog.metrics.registry import BrokerMetrics, Histogram, LockedHistogram

__all__ = ["BrokerMetrics", "Histogram", "LockedHistogram", "render"]
