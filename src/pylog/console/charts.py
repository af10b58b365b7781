"""Line charts as SVG drawn on the server: the live charts need no JavaScript library.

``line_chart`` turns a time series into what ``templates/_chart.jinja`` draws: a polyline
in a fixed view box, the latest and highest values, and the time span. The page reloads the
chart's fragment every few seconds (``static/console.js``), so it moves without a reload.
"""

from __future__ import annotations

from typing import Any

__all__ = ["line_chart", "WIDTH", "HEIGHT"]

WIDTH, HEIGHT, PAD = 600, 120, 4


def line_chart(points: list[tuple[int, float]], title: str, unit: str) -> dict[str, Any]:
    """``points``: (wall-clock ms, value), oldest first."""
    if not points:
        return {"title": title, "unit": unit, "empty": True, "points": "", "last": None,
                "max": None, "span_s": 0, "width": WIDTH, "height": HEIGHT}
    t0, t1 = points[0][0], points[-1][0]
    top = max(v for _, v in points)
    scale_y = (HEIGHT - 2 * PAD) / top if top > 0 else 0.0
    span = max(t1 - t0, 1)
    coords = []
    for t, v in points:
        x = PAD + (WIDTH - 2 * PAD) * ((t - t0) / span if len(points) > 1 else 1.0)
        y = HEIGHT - PAD - v * scale_y
        coords.append(f"{x:.1f},{y:.1f}")
    return {"title": title, "unit": unit, "empty": False, "points": " ".join(coords),
            "last": points[-1][1], "max": top, "span_s": round((t1 - t0) / 1000),
            "width": WIDTH, "height": HEIGHT}
