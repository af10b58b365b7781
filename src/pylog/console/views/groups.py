"""Consumer groups: the list, a group's page (members, offsets and lag, lag chart), the
live offsets fragment and the offset reset (planned, then executed)."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pylog import errors
from pylog.console.reset import MODES, ResetError, plan_reset
from pylog.console.views.cluster import chart_context
from pylog.console.web import Console, checked_form, kafka_errors, redirect, render

__all__ = ["routes"]


@kafka_errors
async def group_list(request: Request) -> Response:
    console: Console = request.app.state.console
    wanted = request.query_params.get("open", "").strip()
    if wanted:
        return redirect(f"/groups/{quote(wanted, safe='')}")
    missing = await console.data.missing(16, 15)
    rows = await console.data.group_rows() if not missing else []
    for r in rows:
        r["lag"] = console.history.latest(f"lag:{r['group_id']}")
    return render(request, "groups.jinja", {"groups": rows, "missing": missing})


async def _group_context(console: Console, group_id: str) -> dict[str, object]:
    ctx = await console.data.group(group_id)
    ctx["chart_lag"] = chart_context(console, f"lag:{group_id}")
    ctx["quoted"] = quote(group_id, safe="")
    ctx["modes"] = MODES
    ctx["plan"] = None
    ctx["reset_error"] = ""
    return ctx


@kafka_errors
async def group_page(request: Request) -> Response:
    """``/groups/G``, ``/groups/G.json`` and the live fragment ``/groups/G/offsets``."""
    console: Console = request.app.state.console
    path: str = request.path_params["group_id"]
    if path.endswith("/offsets"):
        ctx = await _group_context(console, path.removesuffix("/offsets"))
        return render(request, "_group_offsets.jinja", ctx)
    group_id = path.removesuffix(".json")
    return render(request, "group.jinja", await _group_context(console, group_id))


@kafka_errors
async def group_reset(request: Request) -> Response:
    """Plan (``action=preview``) or commit (``action=execute``) an offset reset."""
    console: Console = request.app.state.console
    path: str = request.path_params["group_id"]
    if not path.endswith("/reset"):
        return render(request, "error.jinja", {"title": "Not found",
                                              "detail": "POST to /groups/GROUP/reset"}, 404)
    group_id = path.removesuffix("/reset")
    form = await checked_form(request)
    mode = str(form.get("mode", ""))
    value = str(form.get("value", "")).strip()
    topic = str(form.get("topic", "")).strip() or None
    ctx = await _group_context(console, group_id)
    ctx["form"] = {"mode": mode, "value": value, "topic": topic or ""}
    try:
        plan = await plan_reset(console.data, group_id, mode, value, topic,
                                console.clock.time_ms())
    except ResetError as exc:
        ctx["reset_error"] = str(exc)
        return render(request, "group.jinja", ctx, status=400)
    ctx["plan"] = plan
    if form.get("action") != "execute":
        return render(request, "group.jinja", ctx)
    members: list[dict[str, str]] = ctx["members"]  # type: ignore[assignment]
    if members:
        clients = ", ".join(sorted({m["client_id"] for m in members}))
        ctx["reset_error"] = (
            f"the group has {len(members)} active member(s) ({clients}): Kafka resets "
            "only inactive groups, since a member would overwrite the offsets with its next "
            "commit. Stop its consumers and try again.")
        return render(request, "group.jinja", ctx, status=409)
    try:
        await console.data.admin.alter_group_offsets(
            group_id, {(p["topic"], p["partition"]): p["new"] for p in plan})
    except errors.NonEmptyGroupError as exc:
        ctx["reset_error"] = f"{exc}: stop its consumers and try again."
        return render(request, "group.jinja", ctx, status=409)
    return redirect(f"/groups/{quote(group_id, safe='')}",
                    f"Offsets of {len(plan)} partition(s) reset.")


def routes(read_only: bool) -> list[Route]:
    out = [Route("/groups", group_list), Route("/groups.json", group_list),
           Route("/groups/{group_id:path}", group_page)]
    if not read_only:
        out.append(Route("/groups/{group_id:path}", group_reset, methods=["POST"]))
    return out
