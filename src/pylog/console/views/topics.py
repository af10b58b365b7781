"""The topic list (search, create) and a topic's page (partitions, configs, delete)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pylog.console.views.cluster import chart_context
from pylog.console.web import Console, checked_form, kafka_errors, redirect, render

__all__ = ["routes"]


def _int_field(value: object, what: str, default: int) -> int:
    text = str(value or "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{what}: expected a whole number, got {text!r}") from None


@kafka_errors
async def topic_list(request: Request) -> Response:
    console: Console = request.app.state.console
    query = request.query_params.get("q", "").strip()
    internal = request.query_params.get("internal") == "1"
    fresh = console.sampler.fresh_offsets()
    rows, sampled = await console.data.topic_rows(query, internal, fresh[:2] if fresh else None)
    sizes = console.history.log_size or await console.data.log_sizes()
    for r in rows:
        r.update(console.history.rates(r["name"]))
        r["size"] = sizes.get(r["name"])
    return render(request, "topics.jinja", {
        "topics": rows, "q": query, "internal": internal, "sizes_known": bool(sizes),
        "offsets_sampled": sampled, "offsets_age_s": round(fresh[2], 1) if fresh else 0.0,
        "chart_produce": chart_context(console, "produce:*"),
        "chart_consume": chart_context(console, "consume:*")})


@kafka_errors
async def topic_create(request: Request) -> Response:
    console: Console = request.app.state.console
    form = await checked_form(request)
    name = str(form.get("name", "")).strip()
    if not name:
        raise ValueError("a topic needs a name")
    partitions = _int_field(form.get("partitions"), "partitions", -1)
    replication = _int_field(form.get("replication_factor"), "replication factor", -1)
    await console.data.create_topic(name, partitions, replication)
    return redirect(f"/topics/{name}", f"Topic {name} created.")


@kafka_errors
async def topic_page(request: Request) -> Response:
    console: Console = request.app.state.console
    name = request.path_params["name"]
    fresh = console.sampler.fresh_offsets()
    ctx = await console.data.topic(name, fresh[:2] if fresh else None)
    ctx["offsets_age_s"] = round(fresh[2], 1) if fresh else 0.0
    ctx["rates"] = console.history.rates(name)
    ctx["size"] = (console.history.log_size or await console.data.log_sizes()).get(name)
    ctx["chart_produce"] = chart_context(console, f"produce:{name}")
    ctx["chart_consume"] = chart_context(console, f"consume:{name}")
    ctx["chart_bytes"] = ([chart_context(console, f"bytes_in:{name}"),
                           chart_context(console, f"bytes_out:{name}")]
                          if console.metrics_urls else [])
    return render(request, "topic.jinja", ctx)


@kafka_errors
async def topic_config(request: Request) -> Response:
    console: Console = request.app.state.console
    name = request.path_params["name"]
    form = await checked_form(request)
    key = str(form.get("key", "")).strip()
    if not key:
        raise ValueError("which config? give its name")
    if form.get("action") == "delete":
        await console.data.alter_topic_config(name, key, None)
        return redirect(f"/topics/{name}", f"{key} is back to its default.")
    value = str(form.get("value", ""))
    await console.data.alter_topic_config(name, key, value)
    return redirect(f"/topics/{name}", f"{key} set.")


@kafka_errors
async def topic_delete(request: Request) -> Response:
    console: Console = request.app.state.console
    name = request.path_params["name"]
    form = await checked_form(request)
    if str(form.get("confirm", "")).strip() != name:
        raise ValueError(f"to delete the topic, type its name ({name}) in the confirmation "
                         "box")
    await console.data.delete_topic(name)
    return redirect("/topics", f"Topic {name} deleted.")


def routes(read_only: bool) -> list[Route]:
    out = [Route("/topics", topic_list), Route("/topics.json", topic_list),
           Route("/topics/{name}.json", topic_page), Route("/topics/{name}", topic_page)]
    if not read_only:
        out += [Route("/topics", topic_create, methods=["POST"]),
                Route("/topics/{name}/config", topic_config, methods=["POST"]),
                Route("/topics/{name}/delete", topic_delete, methods=["POST"])]
    return out
