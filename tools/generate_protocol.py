#!/usr/bin/env python3
"""Generate ``pylog.protocol._schema`` from Kafka's JSON message specs.

Usage::

    python tools/generate_protocol.py [SCHEMA_DIR] [--out OUT_DIR]

With no arguments it regenerates two packages: ``src/pylog/protocol/_schema`` from
``tools/kafka-protocol/message`` (the vendored copy of Kafka's
``clients/src/main/resources/common/message/*.json``, Apache-2.0 data) and
``src/pylog/protocol/_records`` from ``tools/kafka-protocol/records`` (the key/value schemas of
the records Kafka's group and transaction coordinators write to ``__consumer_offsets`` and
``__transaction_state``). With SCHEMA_DIR it regenerates only that folder (into OUT_DIR, which
defaults to the package matching the folder). The output is deterministic: a unit test regenerates it into
a temporary directory and fails on any difference with the committed modules.

What is generated, per JSON file, one module (``FetchResponse.json`` ->
``_schema/fetch_response.py``) holding:

- one class per message (``FetchResponse``) and per nested or common struct
  (``FetchResponse.PartitionData``), subclasses of ``pylog.protocol.codec.Message`` with
  ``__slots__`` = the spec's field names snake_cased, and a constructor whose keyword
  defaults are the spec's defaults;
- straight-line encode and decode functions per struct *per version* (no schema is
  interpreted at run time). Versions whose layout is identical share one function: the
  generator dedupes function bodies. Consecutive fixed-width fields are packed and
  unpacked with one precompiled ``struct.Struct``.

Semantics follow Kafka's own generator (``generator/src/main/java/org/apache/kafka/message``):
a field exists at version v when v is in ``versions``; it is nullable when v is in
``nullableVersions``; it is tagged when v is in ``taggedVersions`` (then it is written in
the struct's TAGGED_FIELDS section only when it differs from its default); strings and
bytes are compact in flexible versions unless the field overrides ``flexibleVersions``
(the request header's ClientId); a nullable struct is an int8 presence marker (-1 null)
then the struct.

``_schema/__init__.py`` is the index: every message's module, API key, type, valid and
flexible versions, with lazy loading of the modules.
"""

from __future__ import annotations

import argparse
import json
import keyword
import pathlib
import re
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_SCHEMA_DIR = ROOT / "tools" / "kafka-protocol" / "message"
DEFAULT_OUT = ROOT / "src" / "pylog" / "protocol" / "_schema"
# The coordinators' internal-topic record schemas (``__consumer_offsets``,
# ``__transaction_state``): same dialect, generated the same way into their own package.
RECORDS_SCHEMA_DIR = ROOT / "tools" / "kafka-protocol" / "records"
RECORDS_OUT = ROOT / "src" / "pylog" / "protocol" / "_records"
# Where each input family lives in Apache Kafka's tree (named in every module header).
SOURCE_MESSAGES = "clients/src/main/resources/common/message/"
SOURCE_GROUP_RECORDS = "group-coordinator/src/main/resources/common/message/"
SOURCE_TXN_RECORDS = "transaction-coordinator/src/main/resources/common/message/"
GENERATOR = "tools/generate_protocol.py"

INF = 1 << 30

FIXED = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}
SCALAR = set(FIXED) | {"string", "bytes", "records", "uuid"}

# Names a field may not take (they are Message attributes or methods).
RESERVED = {
    "encode",
    "decode",
    "encode_into",
    "decode_from",
    "to_dict",
    "is_flexible",
}


# --------------------------------------------------------------------------- parsing


def strip_comments(text: str) -> str:
    """Remove ``//`` comments outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    if spec is None:
        return None
    spec = spec.strip()
    if spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), INF)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def vin(v: int, r: tuple[int, int] | None) -> bool:
    return r is not None and r[0] <= v <= r[1]


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    if keyword.iskeyword(s) or s in RESERVED:
        s += "_"
    return s


def module_name(msg_name: str) -> str:
    return snake(msg_name).rstrip("_")


class Field:
    def __init__(self, spec: dict, msg: MessageSpec) -> None:
        self.name: str = spec["name"]
        self.py = snake(self.name)
        self.type: str = spec["type"]
        self.about: str = spec.get("about", "")
        self.nullable = parse_versions(spec.get("nullableVersions"))
        self.tagged = parse_versions(spec.get("taggedVersions"))
        # A tagged field may omit "versions": it then exists exactly in its tagged versions
        # (as in Kafka's generator; TransactionLogValue's tagged fields rely on it).
        if "versions" not in spec and self.tagged is None:
            raise SystemExit(f"{msg.file}: field {self.name} has neither versions nor taggedVersions")
        self.versions = parse_versions(spec["versions"]) if "versions" in spec else self.tagged
        self.tag: int | None = spec.get("tag")
        self.flex_override = "flexibleVersions" in spec
        self.flex_versions = parse_versions(spec.get("flexibleVersions"))
        self.default_raw = spec.get("default")
        self.is_array = self.type.startswith("[]")
        self.elem = self.type[2:] if self.is_array else self.type
        self.struct: Struct | None = None
        if self.elem not in SCALAR:
            if "fields" in spec:
                self.struct = msg.add_struct(self.elem, spec["fields"])
            else:
                msg.pending_refs.append(self)

    @property
    def kind(self) -> str:
        if self.is_array:
            return "array"
        if self.struct is not None:
            return "struct"
        if self.type in FIXED:
            return "fixed"
        return self.type

    def nullable_at(self, v: int) -> bool:
        return vin(v, self.nullable)

    def tagged_at(self, v: int, flex: bool) -> bool:
        return flex and vin(v, self.tagged)

    def compact_at(self, flex: bool, v: int) -> bool:
        # ClientId in the request header: "flexibleVersions": "none" keeps the int16 length.
        if self.flex_override:
            return flex and vin(v, self.flex_versions)
        return flex

    # --- defaults -------------------------------------------------------------

    def default_is_null(self) -> bool:
        return self.default_raw == "null"

    def default_literal(self) -> str | None:
        """Python literal of an immutable default, None when mutable (list or struct)."""
        d = self.default_raw
        k = self.kind
        if k == "array":
            return "None" if d == "null" else None
        if k == "struct":
            return "None" if d == "null" else None
        if k == "fixed":
            if self.type == "bool":
                return "True" if str(d).lower() == "true" else "False"
            if d is None or d == "":
                return "0.0" if self.type == "float64" else "0"
            if self.type == "float64":
                return repr(float(d))
            return str(int(str(d), 0))
        if k == "string":
            if d == "null":
                return "None"
            return repr(d if d is not None else "")
        if k == "bytes":
            return "None" if d == "null" else "b''"
        if k == "records":
            return "None"
        if k == "uuid":
            return "ZERO_UUID"
        raise ValueError(self.type)

    def default_expr(self) -> str:
        """Expression building a fresh default value."""
        lit = self.default_literal()
        if lit is not None:
            return lit
        if self.kind == "array":
            return "[]"
        assert self.struct is not None
        return f"{self.struct.cls}()"


class Struct:
    def __init__(self, name: str, cls: str, qualname: str, fields: list[Field]) -> None:
        self.name = name
        self.cls = cls
        self.qualname = qualname
        self.fields = fields


class MessageSpec:
    def __init__(self, path: pathlib.Path) -> None:
        data = json.loads(strip_comments(path.read_text()))
        self.file = path.name
        self.name: str = data["name"]
        self.type: str = data["type"]
        self.api_key: int | None = data.get("apiKey")
        self.valid = parse_versions(data["validVersions"])
        assert self.valid is not None, self.name
        self.flexible = parse_versions(data.get("flexibleVersions", "none"))
        self.unstable: bool = bool(data.get("latestVersionUnstable", False))
        self.listeners: list[str] = data.get("listeners", [])
        self.structs: dict[str, Struct] = {}
        self.pending_refs: list[Field] = []
        self.common_specs = {s["name"]: s for s in data.get("commonStructs", [])}
        self.top = Struct(self.name, self.name, self.name, [])
        self.top.fields = [Field(f, self) for f in data.get("fields", [])]
        # Resolve references to commonStructs (defining each once, lazily).
        while self.pending_refs:
            f = self.pending_refs.pop()
            if f.elem not in self.structs:
                spec = self.common_specs.get(f.elem)
                if spec is None:
                    raise SystemExit(f"{self.file}: unknown type {f.type} of field {f.name}")
                self.add_struct(f.elem, spec["fields"])
            f.struct = self.structs[f.elem]

    def add_struct(self, name: str, fields: list[dict]) -> Struct:
        if name in self.structs:
            raise SystemExit(f"{self.file}: struct {name} defined twice")
        s = Struct(name, f"{self.name}_{name}", f"{self.name}.{name}", [])
        self.structs[name] = s
        s.fields = [Field(f, self) for f in fields]
        return s

    def flex_at(self, v: int) -> bool:
        return vin(v, self.flexible)

    @property
    def versions(self) -> range:
        lo, hi = self.valid  # type: ignore[misc]
        return range(lo, hi + 1)

    def all_structs(self) -> list[Struct]:
        """Top-level struct last, nested structs in definition order before it."""
        return list(self.structs.values()) + [self.top]


# --------------------------------------------------------------------------- code generation


class ModuleWriter:
    """Generates one module's encode/decode functions with per-version deduplication."""

    def __init__(self, msg: MessageSpec, source: str = SOURCE_MESSAGES) -> None:
        self.msg = msg
        self.source = source
        self.formats: dict[str, int] = {}
        self.functions: list[str] = []
        self.enc_cache: dict[tuple[str, int], str] = {}
        self.dec_cache: dict[tuple[str, int], str] = {}
        self.enc_bodies: dict[tuple[str, str], str] = {}
        self.dec_bodies: dict[tuple[str, str], str] = {}
        self.tmp = 0

    def fmt(self, codes: str) -> int:
        if codes not in self.formats:
            self.formats[codes] = len(self.formats)
        return self.formats[codes]

    def fresh(self, prefix: str) -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    # ------------------------------------------------------------------ sizes

    def min_size(self, s: Struct, v: int) -> int:
        flex = self.msg.flex_at(v)
        total = 1 if flex else 0
        for f in s.fields:
            if not vin(v, f.versions) or f.tagged_at(v, flex):
                continue
            total += self.field_min_size(f, v, flex)
        return total

    def field_min_size(self, f: Field, v: int, flex: bool) -> int:
        k = f.kind
        compact = f.compact_at(flex, v)
        if k == "fixed":
            return FIXED[f.type][1]
        if k == "uuid":
            return 16
        if k == "string":
            return 1 if compact else 2
        if k in ("bytes", "records"):
            return 1 if compact else 4
        if k == "array":
            return 1 if compact else 4
        assert f.struct is not None
        if f.nullable_at(v):
            return 1
        return self.min_size(f.struct, v)

    def elem_min_size(self, f: Field, v: int, flex: bool) -> int:
        if f.struct is not None:
            return max(1, self.min_size(f.struct, v))
        e = f.elem
        if e in FIXED:
            return FIXED[e][1]
        if e == "uuid":
            return 16
        return 1 if flex else (2 if e == "string" else 4)

    # ------------------------------------------------------------------ encode

    def enc_fn(self, s: Struct, v: int) -> str:
        key = (s.cls, v)
        if key in self.enc_cache:
            return self.enc_cache[key]
        saved, self.tmp = self.tmp, 0
        body = self.enc_body(s, v)
        self.tmp = saved
        text = "\n".join("    " + line for line in body)
        bkey = (s.cls, text)
        name = self.enc_bodies.get(bkey)
        if name is None:
            name = f"_e_{s.cls}_{v}"
            self.enc_bodies[bkey] = name
            self.functions.append(f"def {name}(o, b, out):\n{text}\n")
        self.enc_cache[key] = name
        return name

    def enc_body(self, s: Struct, v: int) -> list[str]:
        flex = self.msg.flex_at(v)
        lines: list[str] = []
        group: list[tuple[str, str]] = []

        def flush() -> None:
            if group:
                codes = "".join(c for c, _ in group)
                idx = self.fmt(codes)
                args = ", ".join(e for _, e in group)
                lines.append(f"b += _P{idx}({args})")
                group.clear()

        tagged: list[Field] = []
        for f in s.fields:
            if not vin(v, f.versions):
                continue
            if f.tagged_at(v, flex):
                tagged.append(f)
                continue
            if f.kind == "fixed":
                group.append((FIXED[f.type][0], f"o.{f.py}"))
                continue
            flush()
            lines += self.enc_value(f, v, flex, f"o.{f.py}", "b")
        flush()
        if flex:
            if not tagged:
                lines.append("b += b'\\x00'")
            else:
                # Tagged fields are written only when they differ from their default
                # (Kafka does the same; old librdkafka cannot parse unexpected ones). The
                # common case, none set, costs one combined test and one byte.
                tagged.sort(key=lambda f: f.tag)  # type: ignore[arg-type,return-value]
                conds = []
                for f in tagged:
                    if contains_records(f):
                        raise SystemExit(f"{self.msg.file}: tagged field {f.name} holds records")
                    x = self.fresh("x")
                    lines.append(f"{x} = o.{f.py}")
                    conds.append((f, x, self.non_default_cond(f, x)))
                lines.append("if " + " or ".join(f"({c})" for _, _, c in conds) + ":")
                lines.append("    tg = []")
                for f, x, cond in conds:
                    lines.append(f"    if {cond}:")
                    # out=None: records never sit in tagged fields (checked when generating),
                    # and cut positions in ``tb`` would not be positions in ``b``.
                    inner = ["tb = bytearray()"]
                    inner += [ln.replace(", out)", ", None)") for ln in self.enc_value(f, v, flex, x, "tb")]
                    inner.append(f"tg.append(({f.tag}, tb))")
                    lines += ["        " + line for line in inner]
                lines.append("    write_tagged(b, tg)")
                lines.append("else:")
                lines.append("    b += b'\\x00'")
        if not lines:
            lines.append("pass")
        return lines

    def non_default_cond(self, f: Field, x: str) -> str:
        k = f.kind
        lit = f.default_literal()
        if k == "array":
            return f"{x} is not None" if lit == "None" else f"{x}"
        if k == "struct":
            if lit == "None":
                return f"{x} is not None"
            assert f.struct is not None
            fields = f.struct.fields
            if fields and all(g.kind not in ("array", "struct") for g in fields):
                # Inline comparison with the literal defaults: no method call per struct.
                diffs = " or ".join(
                    f"{x}.{g.py} is not None" if g.default_literal() == "None"
                    else f"{x}.{g.py} != {g.default_literal()}"
                    for g in fields
                )
                return f"{x} is not None and ({diffs})"
            return f"{x} is not None and not {x}._is_default()"
        if lit == "None":
            return f"{x} is not None"
        return f"{x} != {lit}"

    def enc_scalar(self, typ: str, compact: bool, nullable: bool, x: str, b: str) -> list[str]:
        if typ in FIXED:
            idx = self.fmt(FIXED[typ][0])
            return [f"{b} += _P{idx}({x})"]
        if typ == "uuid":
            return [f"{b} += uuid_bytes({x})"]
        if typ == "records":
            fn = "write_crecords" if compact else "write_records"
            return [f"{fn}({b}, out, {x})"]
        base = {"string": "string", "bytes": "bytes"}[typ]
        fn = "write_" + ("n" if nullable else "") + ("c" if compact else "") + base
        return [f"{fn}({b}, {x})"]

    def enc_value(self, f: Field, v: int, flex: bool, x: str, b: str) -> list[str]:
        compact = f.compact_at(flex, v)
        nullable = f.nullable_at(v)
        k = f.kind
        if k in ("fixed", "uuid", "records", "string", "bytes"):
            return self.enc_scalar(f.type, compact, nullable, x, b)
        if k == "struct":
            assert f.struct is not None
            fn = self.enc_fn(f.struct, v)
            if nullable:
                return [
                    f"if {x} is None:",
                    f"    {b} += b'\\xff'",
                    "else:",
                    f"    {b} += b'\\x01'",
                    f"    {fn}({x}, {b}, out)",
                ]
            return [f"{fn}({x}, {b}, out)"]
        # array
        lines: list[str] = []
        if compact:
            count = [f"write_uvarint({b}, len({x}) + 1)"]
            null = f"{b} += b'\\x00'"
        else:
            count = [f"{b} += _p_i32(len({x}))"]
            null = f"{b} += b'\\xff\\xff\\xff\\xff'"
        e = self.fresh("e")
        if f.struct is not None:
            fn = self.enc_fn(f.struct, v)
            loop = [f"for {e} in {x}:", f"    {fn}({e}, {b}, out)"]
        elif f.elem in FIXED:
            loop = [f"write_fixed_array({b}, {x}, {FIXED[f.elem][0]!r})"]
        else:
            inner = self.enc_scalar(f.elem, compact, False, e, b)
            loop = [f"for {e} in {x}:"] + ["    " + line for line in inner]
        body = count + loop
        if nullable:
            lines.append(f"if {x} is None:")
            lines.append("    " + null)
            lines.append("else:")
            lines += ["    " + line for line in body]
        else:
            lines += body
        return lines

    # ------------------------------------------------------------------ decode

    def dec_fn(self, s: Struct, v: int) -> str:
        key = (s.cls, v)
        if key in self.dec_cache:
            return self.dec_cache[key]
        saved, self.tmp = self.tmp, 0
        body = self.dec_body(s, v)
        self.tmp = saved
        text = "\n".join("    " + line for line in body)
        bkey = (s.cls, text)
        name = self.dec_bodies.get(bkey)
        if name is None:
            name = f"_d_{s.cls}_{v}"
            self.dec_bodies[bkey] = name
            self.functions.append(f"def {name}(b, p):\n{text}\n")
        self.dec_cache[key] = name
        return name

    def dec_body(self, s: Struct, v: int) -> list[str]:
        flex = self.msg.flex_at(v)
        lines: list[str] = []
        group: list[tuple[str, str]] = []
        args: list[str] = []

        def flush() -> None:
            if group:
                codes = "".join(c for c, _ in group)
                idx = self.fmt(codes)
                names = ", ".join(n for _, n in group)
                size = struct.calcsize(">" + codes)
                if len(group) == 1:
                    names += ","
                lines.append(f"{names} = _U{idx}(b, p)")
                lines.append(f"p += {size}")
                group.clear()

        tagged: list[tuple[Field, str]] = []
        for i, f in enumerate(s.fields):
            var = f"v{i}"
            if not vin(v, f.versions):
                args.append(f.default_expr())
                continue
            args.append(var)
            if f.tagged_at(v, flex):
                tagged.append((f, var))
                continue
            if f.kind == "fixed":
                group.append((FIXED[f.type][0], var))
                continue
            flush()
            lines += self.dec_value(f, v, flex, var)
        flush()
        if flex:
            if not tagged:
                # Fast path: an empty tagged-fields section is one zero byte.
                lines.append("if b[p]:")
                lines.append("    p = skip_tags(b, p)")
                lines.append("else:")
                lines.append("    p += 1")
            else:
                tagged.sort(key=lambda t: t[0].tag)  # type: ignore[arg-type,return-value]
                for f, var in tagged:
                    lines.append(f"{var} = {f.default_expr()}")
                lines.append("nt, p = read_tag_header(b, p)")
                lines.append("for _ in range(nt):")
                lines.append("    tag, p, end = read_tag(b, p)")
                kw = "if"
                for f, var in tagged:
                    lines.append(f"    {kw} tag == {f.tag}:")
                    inner = self.dec_value(f, v, flex, var)
                    inner.append(f"p = check_tag_end(p, end, {f.tag})")
                    lines += ["        " + line for line in inner]
                    kw = "elif"
                lines.append("    else:")
                lines.append("        p = end")
        lines.append(f"return {s.cls}({', '.join(args)}), p")
        return lines

    def dec_scalar(self, typ: str, compact: bool, nullable: bool, var: str) -> list[str]:
        if typ in FIXED:
            idx = self.fmt(FIXED[typ][0])
            size = FIXED[typ][1]
            return [f"{var}, = _U{idx}(b, p)", f"p += {size}"]
        if typ == "uuid":
            return [f"{var}, p = read_uuid(b, p)"]
        if typ == "records":
            fn = "read_crecords" if compact else "read_records"
            return [f"{var}, p = {fn}(b, p)"]
        fn = "read_" + ("n" if nullable else "") + ("c" if compact else "") + typ
        return [f"{var}, p = {fn}(b, p)"]

    def dec_value(self, f: Field, v: int, flex: bool, var: str) -> list[str]:
        compact = f.compact_at(flex, v)
        nullable = f.nullable_at(v)
        k = f.kind
        if k in ("fixed", "uuid", "records", "string", "bytes"):
            return self.dec_scalar(f.type, compact, nullable, var)
        if k == "struct":
            assert f.struct is not None
            fn = self.dec_fn(f.struct, v)
            if nullable:
                idx = self.fmt("b")
                pres = self.fresh("t")
                return [
                    f"{pres}, = _U{idx}(b, p)",
                    "p += 1",
                    f"if {pres} < 0:",
                    f"    {var} = None",
                    "else:",
                    f"    {var}, p = {fn}(b, p)",
                ]
            return [f"{var}, p = {fn}(b, p)"]
        # array
        n = self.fresh("n")
        ms = self.elem_min_size(f, v, compact)
        counter = ("read_" + ("n" if nullable else "") + ("c" if compact else "") + "count")
        lines = [f"{n}, p = {counter}(b, p, {ms})"]
        if f.struct is not None:
            fn = self.dec_fn(f.struct, v)
            e = self.fresh("e")
            body = [
                f"{var} = []",
                f"for _ in range({n}):",
                f"    {e}, p = {fn}(b, p)",
                f"    {var}.append({e})",
            ]
        elif f.elem in FIXED:
            code, size = FIXED[f.elem]
            body = [f"{var}, p = read_fixed_array(b, p, {n}, {code!r}, {size})"]
        else:
            e = self.fresh("e")
            inner = self.dec_scalar(f.elem, compact, False, e)
            body = [f"{var} = []", f"for _ in range({n}):"]
            body += ["    " + line for line in inner]
            body.append(f"    {var}.append({e})")
        if nullable:
            lines.append(f"if {n} < 0:")
            lines.append(f"    {var} = None")
            lines.append("else:")
            lines += ["    " + line for line in body]
        else:
            lines += body
        return lines

    # ------------------------------------------------------------------ classes

    def class_text(self, s: Struct) -> str:
        msg = self.msg
        lines = [f"class {s.cls}(Message):"]
        doc = [f'"""{s.qualname} ({"message" if s is msg.top else "struct"}).', ""]
        doc.append("Fields (versions; ? = nullable; tag N = tagged field):")
        doc.append("")
        for f in s.fields:
            doc.append("    " + describe(f))
        doc.append('"""')
        lines += ["    " + line if line else "" for line in doc]
        slots = ", ".join(repr(f.py) for f in s.fields)
        if len(s.fields) == 1:
            slots += ","
        lines.append("")
        lines.append(f"    __slots__ = ({slots})")
        lines.append(f"    NAME = {s.qualname!r}")
        if s is msg.top:
            lines.append(f"    API_KEY = {msg.api_key!r}")
            lines.append(f"    MESSAGE_TYPE = {msg.type!r}")
        lo, hi = msg.valid  # type: ignore[misc]
        lines.append(f"    VALID_VERSIONS = ({lo}, {hi})")
        fmin = msg.flexible[0] if msg.flexible else None
        if fmin is not None and fmin > hi:
            fmin = None
        lines.append(f"    FLEXIBLE_MIN = {fmin!r}")
        if s is msg.top:
            lines.append(f"    LATEST_VERSION_UNSTABLE = {msg.unstable!r}")
        # Field metadata for reflection (tests, tools): name, spec type, versions,
        # nullable versions, tagged versions, tag. Open ranges end at 32767.
        lines.append("    FIELDS = (")
        for f in s.fields:
            lines.append(
                f"        ({f.py!r}, {f.type!r}, {rng(f.versions)}, {rng(f.nullable)}, "
                f"{rng(f.tagged)}, {f.tag!r}),"
            )
        lines.append("    )")
        lines.append("")
        # constructor
        params = []
        assigns = []
        for f in s.fields:
            lit = f.default_literal()
            if lit is not None:
                params.append(f"{f.py}={lit}")
                assigns.append(f"self.{f.py} = {f.py}")
            else:
                params.append(f"{f.py}=_D")
                assigns.append(f"self.{f.py} = {f.default_expr()} if {f.py} is _D else {f.py}")
        if params:
            lines.append(f"    def __init__(self, {', '.join(params)}):")
            lines += ["        " + a for a in assigns]
        else:
            lines.append("    def __init__(self):")
            lines.append("        pass")
        lines.append("")
        # _is_default: used to omit tagged struct fields equal to their default
        conds = []
        for f in s.fields:
            k = f.kind
            lit = f.default_literal()
            if k == "array":
                conds.append(f"self.{f.py} is None" if lit == "None" else f"not self.{f.py}")
            elif k == "struct":
                conds.append(
                    f"self.{f.py} is None" if lit == "None" else f"self.{f.py}._is_default()"
                )
            elif lit == "None":
                conds.append(f"self.{f.py} is None")
            else:
                conds.append(f"self.{f.py} == {lit}")
        lines.append("    def _is_default(self):")
        if conds:
            lines.append("        return (" + "\n                and ".join(conds) + ")")
        else:
            lines.append("        return True")
        return "\n".join(lines) + "\n"

    def module_text(self) -> str:
        msg = self.msg
        structs = msg.all_structs()
        enc_tables: dict[str, list[str]] = {}
        dec_tables: dict[str, list[str]] = {}
        for s in structs:
            enc_tables[s.cls] = [self.enc_fn(s, v) for v in msg.versions]
            dec_tables[s.cls] = [self.dec_fn(s, v) for v in msg.versions]
        lo = msg.valid[0]  # type: ignore[index]
        out = [
            f"# Generated by {GENERATOR} from {msg.file}. DO NOT EDIT.",
            f"# Source: Apache Kafka {self.source} (Apache-2.0).",
            "# ruff: noqa",
            "# mypy: ignore-errors",
            f'"""{msg.name}: Kafka {msg.type}'
            + (f" (API key {msg.api_key})" if msg.api_key is not None else "")
            + f", versions {msg.valid[0]}-{msg.valid[1]}"  # type: ignore[index]
            + (f", flexible from {msg.flexible[0]}" if msg.flexible else ", never flexible")
            + '."""',
            "",
            "from struct import Struct as _Struct",
            "",
            "from pylog.protocol.codec import (",
        ]
        names = sorted(
            {
                "Message", "ZERO_UUID", "_D", "_p_i32",
                "read_count", "read_ncount", "read_ccount", "read_nccount",
                "read_string", "read_nstring", "read_cstring", "read_ncstring",
                "read_bytes", "read_nbytes", "read_cbytes", "read_ncbytes",
                "read_records", "read_crecords", "read_uuid", "read_fixed_array",
                "read_tag_header", "read_tag", "check_tag_end", "skip_tags",
                "write_string", "write_nstring", "write_cstring", "write_ncstring",
                "write_bytes", "write_nbytes", "write_cbytes", "write_ncbytes",
                "write_records", "write_crecords", "uuid_bytes", "write_fixed_array",
                "write_uvarint", "write_tagged",
            }
        )
        used = [n for n in names if re.search(r"\b" + re.escape(n) + r"\b", "\n".join(self.functions) + "\n".join(self.class_text(s) for s in structs))]
        if "Message" not in used:
            used.append("Message")
        out += [f"    {n}," for n in sorted(used)]
        out.append(")")
        out.append("")
        for codes, idx in sorted(self.formats.items(), key=lambda kv: kv[1]):
            out.append(f"_S{idx} = _Struct({'>' + codes!r})")
            out.append(f"_P{idx} = _S{idx}.pack")
            out.append(f"_U{idx} = _S{idx}.unpack_from")
        out.append("")
        out.append("")
        for s in structs:
            out.append(self.class_text(s))
            out.append("")
        # Nested structs hang off the message class and off every struct that uses them:
        # FetchResponse.PartitionData and FetchResponse.FetchableTopicResponse.PartitionData.
        for s in structs[:-1]:
            out.append(f"{msg.name}.{s.name} = {s.cls}")
            out.append(f"{s.cls}.__qualname__ = {s.qualname!r}")
        for s in structs:
            seen = set()
            for f in s.fields:
                c = f.struct
                if c is not None and c.name not in seen and s is not msg.top:
                    seen.add(c.name)
                    out.append(f"{s.cls}.{c.name} = {c.cls}")
        out.append("")
        out.append("")
        out += [fn + "\n" for fn in self.functions]
        for s in structs:
            pad = ["None"] * lo
            out.append(f"{s.cls}._ENC = ({', '.join(pad + enc_tables[s.cls])},)")
            out.append(f"{s.cls}._DEC = ({', '.join(pad + dec_tables[s.cls])},)")
        out.append("")
        return "\n".join(out)


def contains_records(f: Field, seen: set[str] | None = None) -> bool:
    """Whether a field's type tree holds a ``records`` field (passed through as a chunk)."""
    if f.type == "records":
        return True
    if f.struct is None:
        return False
    seen = set() if seen is None else seen
    if f.struct.cls in seen:
        return False
    seen.add(f.struct.cls)
    return any(contains_records(g, seen) for g in f.struct.fields)


def rng(r: tuple[int, int] | None) -> str:
    if r is None:
        return "None"
    return f"({r[0]}, {min(r[1], 0x7FFF)})"


def describe(f: Field) -> str:
    def r(x: tuple[int, int] | None) -> str:
        if x is None:
            return "none"
        return f"{x[0]}+" if x[1] == INF else (f"{x[0]}" if x[0] == x[1] else f"{x[0]}-{x[1]}")

    bits = [f"{f.py}: {f.type} v{r(f.versions)}"]
    if f.nullable:
        bits.append(f"?{r(f.nullable)}")
    if f.tagged:
        bits.append(f"tag {f.tag} v{r(f.tagged)}")
    if f.default_raw is not None:
        bits.append(f"default {f.default_raw}")
    return " ".join(bits)


def index_text(specs: list[MessageSpec]) -> str:
    out = [
        f"# Generated by {GENERATOR}. DO NOT EDIT.",
        "# ruff: noqa",
        "# mypy: ignore-errors",
        '"""Index of the generated Kafka message classes (one module per JSON spec, loaded lazily).',
        "",
        "``MESSAGES`` maps a message name to (module, api_key, type, (lo, hi), flexible_min).",
        "``REQUESTS`` / ``RESPONSES`` map an API key to its request / response message name.",
        "``load(name)`` imports and returns the class; ``from pylog.protocol._schema import",
        "FetchRequest`` works too (module ``__getattr__``).",
        '"""',
        "",
        "import importlib",
        "",
        "MESSAGES = {",
    ]
    for m in specs:
        fmin = m.flexible[0] if m.flexible else None
        out.append(
            f"    {m.name!r}: ({module_name(m.name)!r}, {m.api_key!r}, {m.type!r}, "
            f"({m.valid[0]}, {m.valid[1]}), {fmin!r}),"  # type: ignore[index]
        )
    out.append("}")
    out.append("")
    out.append("REQUESTS = {")
    for m in sorted((m for m in specs if m.type == "request"), key=lambda m: m.api_key):
        out.append(f"    {m.api_key}: {m.name!r},")
    out.append("}")
    out.append("")
    out.append("RESPONSES = {")
    for m in sorted((m for m in specs if m.type == "response"), key=lambda m: m.api_key):
        out.append(f"    {m.api_key}: {m.name!r},")
    out.append("}")
    out.append("")
    out.append("_loaded = {}")
    out.append("")
    out.append("")
    out.append("def load(name):")
    out.append('    """The generated class for message ``name`` (e.g. ``"FetchRequest"``)."""')
    out.append("    cls = _loaded.get(name)")
    out.append("    if cls is None:")
    out.append("        module = importlib.import_module(__name__ + '.' + MESSAGES[name][0])")
    out.append("        cls = _loaded[name] = getattr(module, name)")
    out.append("    return cls")
    out.append("")
    out.append("")
    out.append("def __getattr__(name):")
    out.append("    if name in MESSAGES:")
    out.append("        return load(name)")
    out.append("    raise AttributeError(name)")
    out.append("")
    out.append("")
    out.append("__all__ = sorted(MESSAGES)")
    out.append("")
    return "\n".join(out)


def source_for(spec_file: str, schema_dir: pathlib.Path) -> str:
    """Where a spec file lives in Apache Kafka's tree (for the module header)."""
    if schema_dir.name != "records":
        return SOURCE_MESSAGES
    return SOURCE_TXN_RECORDS if spec_file.startswith("TransactionLog") else SOURCE_GROUP_RECORDS


def generate(schema_dir: pathlib.Path) -> dict[str, str]:
    """All generated files: {file name: text}."""
    paths = sorted(schema_dir.glob("*.json"))
    if not paths:
        raise SystemExit(f"no *.json specs in {schema_dir}")
    specs = [MessageSpec(p) for p in paths]
    seen: dict[tuple[int | None, str], str] = {}
    for m in specs:
        if m.type in ("request", "response"):
            key = (m.api_key, m.type)
            if key in seen:
                raise SystemExit(f"API key {m.api_key} {m.type} twice: {seen[key]}, {m.name}")
            seen[key] = m.name
    files = {"__init__.py": index_text(specs)}
    for m in specs:
        files[module_name(m.name) + ".py"] = ModuleWriter(m, source_for(m.file, schema_dir)).module_text()
    return files


def write_package(schema_dir: pathlib.Path, out: pathlib.Path) -> int:
    """Generate one package from one spec folder; returns the number of modules."""
    files = generate(schema_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.py"):
        if old.name not in files:
            old.unlink()
    for name, text in sorted(files.items()):
        path = out / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    print(f"wrote {len(files)} modules to {out}", file=sys.stderr)
    return len(files)


def main(argv: list[str] | None = None) -> int:
    """With no arguments regenerate both packages (messages and coordinator records); with
    SCHEMA_DIR (and optionally --out) only that one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("schema_dir", nargs="?", type=pathlib.Path, default=None)
    parser.add_argument("--out", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    if args.schema_dir is None:
        if args.out is not None:
            parser.error("--out needs SCHEMA_DIR")
        write_package(DEFAULT_SCHEMA_DIR, DEFAULT_OUT)
        write_package(RECORDS_SCHEMA_DIR, RECORDS_OUT)
        return 0
    default_out = RECORDS_OUT if args.schema_dir.name == "records" else DEFAULT_OUT
    write_package(args.schema_dir, args.out or default_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
