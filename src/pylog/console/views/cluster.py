"""The cluster overview, the brokers page and the live chart fragments."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pylog.console.charts import line_chart
from pylog.console.web import Console, kafka_errors, render

__all__ = ["routes", "chart_context", "CHART_KINDS"]

#: series prefix -> (title, unit)
CHART_KINDS = {"produce": ("Produced", "records/s"), "consume": ("Consumed", "records/s"),
               "bytes_in": ("Bytes in", "B/s"), "bytes_out": ("Bytes out", "B/s"),
               "lag": ("Total lag", "records"), "broker": ("Appended to its partitions",
                                                           "records/s")}


def chart_context(console: Console, series: str) -> dict[str, Any]:
    """A chart of one ``History`` series (``produce:<topic>``, ``lag:<group>``...).

    Raises:
        ValueError: an unknown kind of series.
    """
    kind, _, key = series.partition(":")
    if kind not in CHART_KINDS or not key:
        raise ValueError(f"series {series!r}: expected KIND:NAME with KIND one of "
                         f"{', '.join(CHART_KINDS)}")
    title, unit = CHART_KINDS[kind]
    name = "all topics" if key == "*" else key
    return {"series": series, **line_chart(console.history.points(series),
                                           f"{title}: {name}", unit)}


@kafka_errors
async def overview(request: Request) -> Response:
    console: Console = request.app.state.console
    ctx = await console.data.overview()
    ctx["groups_missing"] = await console.data.missing(16)
    return render(request, "overview.jinja", ctx)


@kafka_errors
async def brokers(request: Request) -> Response:
    console: Console = request.app.state.console
    rows = await console.data.brokers()
    for r in rows:
        r["produce_rate"] = console.history.latest(f"broker:{r['node_id']}")
    return render(request, "brokers.jinja", {"brokers": rows})


@kafka_errors
async def chart(request: Request) -> Response:
    console: Console = request.app.state.console
    series = request.query_params.get("series", "")
    return render(request, "_chart.jinja", {"chart": chart_context(console, series)})


def routes(read_only: bool) -> list[Route]:
    return [Route("/", overview), Route("/overview.json", overview),
            Route("/brokers", brokers), Route("/brokers.json", brokers),
            Route("/chart", chart), Route("/chart.json", chart)]
