"""How the console shows record bytes: as text, pretty-printed JSON or hex.

Pure functions over ``bytes``; the templates escape what they return (Jinja's autoescape),
so a value holding ``<script>`` is shown as those characters, never run.

- ``auto``: JSON pretty-printed when the bytes are a UTF-8 JSON object or array, else
  UTF-8 text, else hex;
- ``text``: UTF-8 with undecodable bytes replaced (U+FFFD);
- ``json``: pretty-printed when the bytes parse as JSON, else as ``text`` (with a note);
- ``hex``: 16 bytes a line, offset, hex and printable ASCII, as ``hexdump -C`` shows them.
"""

from __future__ import annotations

import base64
import json
from typing import Any, NamedTuple

__all__ = ["FORMATS", "Shown", "show", "hexdump", "as_json_value", "searchable"]

FORMATS = ("auto", "text", "json", "hex")
#: Longest value shown in a list row before it is cut (the record's page shows all of it).
PREVIEW_CHARS = 240


class Shown(NamedTuple):
    """Bytes as displayed: ``text`` to print, the ``format`` actually used and a ``note``
    ("not valid JSON", "null") when the asked format could not apply."""

    text: str
    format: str
    note: str = ""


def hexdump(data: bytes) -> str:
    lines = []
    for i in range(0, len(data), 16):
        chunk = data[i:i + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{i:08x}  {hexes:<47}  |{ascii_}|")
    return "\n".join(lines)


def _json(data: bytes) -> str | None:
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return json.dumps(parsed, indent=2, ensure_ascii=False, sort_keys=False)


def show(data: bytes | None, fmt: str = "auto") -> Shown:
    """``data`` as ``fmt`` (one of ``FORMATS``); None (a null key or value) as ``Shown("",
    fmt, "null")``.

    Raises:
        ValueError: an unknown format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if data is None:
        return Shown("", fmt, "null")
    data = bytes(data)
    if fmt == "hex":
        return Shown(hexdump(data), "hex")
    if fmt == "json":
        pretty = _json(data)
        if pretty is not None:
            return Shown(pretty, "json")
        return Shown(data.decode("utf-8", "replace"), "text", "not valid JSON")
    if fmt == "text":
        return Shown(data.decode("utf-8", "replace"), "text")
    stripped = data.lstrip()
    if stripped[:1] in (b"{", b"["):
        pretty = _json(data)
        if pretty is not None:
            return Shown(pretty, "json")
    try:
        return Shown(data.decode("utf-8"), "text")
    except UnicodeDecodeError:
        return Shown(hexdump(data), "hex")


def searchable(data: bytes | None) -> str:
    """The text a substring filter looks in (UTF-8, undecodable bytes replaced)."""
    return "" if data is None else bytes(data).decode("utf-8", "replace")


def as_json_value(data: bytes | None) -> dict[str, Any] | None:
    """Bytes for a JSON document (downloads, ``.json`` views): UTF-8 text when it decodes,
    else base64, saying which; None stays None."""
    if data is None:
        return None
    data = bytes(data)
    try:
        return {"encoding": "utf-8", "data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"encoding": "base64", "data": base64.b64encode(data).decode("ascii")}
