"""pylog.console.formatting: record bytes as text, JSON, hex."""

from __future__ import annotations

import pytest

from pylog.console.formatting import as_json_value, hexdump, searchable, show


def test_auto_pretty_prints_json_and_keeps_text_and_falls_back_to_hex() -> None:
    assert show(b'{"a":1,"b":[1,2]}').text == '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ]\n}'
    assert show(b'{"a":1}').format == "json"
    assert show(b"plain words").text == "plain words"
    assert show(b"plain words").format == "text"
    binary = show(b"\xff\xfe\x00")
    assert binary.format == "hex" and "ff fe 00" in binary.text
    assert show(b"{not json").format == "text"  # looks like JSON, is not: text


def test_asked_formats() -> None:
    assert show(b"x", "json") == ("x", "text", "not valid JSON")
    assert show(b"\xffA", "text").text == "\ufffdA"
    assert show(b"AB", "hex").text.startswith("00000000  41 42")
    assert show(None, "hex") == ("", "hex", "null")
    with pytest.raises(ValueError, match="expected one of"):
        show(b"x", "yaml")


def test_hexdump_lines_of_sixteen() -> None:
    dump = hexdump(bytes(range(20)))
    lines = dump.splitlines()
    assert len(lines) == 2
    assert lines[1].startswith("00000010  10 11 12 13")
    assert lines[0].endswith("|................|")


def test_markup_is_returned_as_is_for_the_template_to_escape() -> None:
    # Escaping is the template's job (autoescape): the text keeps the characters.
    assert show(b"<script>alert(1)</script>").text == "<script>alert(1)</script>"


def test_json_values_and_search_text() -> None:
    assert as_json_value(b"hi") == {"encoding": "utf-8", "data": "hi"}
    assert as_json_value(b"\xff") == {"encoding": "base64", "data": "/w=="}
    assert as_json_value(None) is None
    assert searchable(b"a\xffb") == "a\ufffdb"
    assert searchable(None) == ""
