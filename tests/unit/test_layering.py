"""The architecture's import boundaries (docs/architecture.md), checked on the source."""

from __future__ import annotations

import ast
import pathlib
import re

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"

LOGCORE_ALLOWED_THIRD_PARTY = {"numpy", "lz4", "zstandard", "cramjam", "cython", "Cython"}
FORBIDDEN_IN_LOGCORE = {"asyncio", "socket", "selectors", "ssl", "pylog"}
FORBIDDEN_IN_PROTOCOL = {"asyncio", "socket", "selectors", "time", "logcore"}


def _imports(path: pathlib.Path) -> set[str]:
    text = path.read_text()
    names: set[str] = set()
    if path.suffix == ".py":
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    else:  # Cython: a line-level scan of import / cimport statements is enough
        for m in re.finditer(r"^\s*(?:from\s+([\w.]+)\s+c?import|c?import\s+([\w.]+))", text, re.M):
            mod = m.group(1) or m.group(2)
            if not mod.startswith("."):
                names.add(mod.split(".")[0])
    return names


def _files(pkg: str):
    for ext in ("*.py", "*.pyx", "*.pxd"):
        yield from (SRC / pkg).rglob(ext)


def test_logcore_imports_only_stdlib_numpy_and_compression() -> None:
    import sys

    stdlib = set(sys.stdlib_module_names)
    for path in _files("logcore"):
        for name in _imports(path):
            assert name not in FORBIDDEN_IN_LOGCORE, f"{path}: imports {name}"
            assert (
                name in stdlib
                or name == "logcore"
                or name in LOGCORE_ALLOWED_THIRD_PARTY
                or name in ("libc", "cpython", "posix", "libcpp")
            ), f"{path}: imports third-party {name}"


def test_protocol_is_sans_io() -> None:
    proto = SRC / "pylog" / "protocol"
    if not proto.exists():
        return
    for path in _files("pylog/protocol"):
        for name in _imports(path):
            assert name not in FORBIDDEN_IN_PROTOCOL, f"{path}: imports {name}"


def _full_imports(path: pathlib.Path) -> set[str]:
    """Dotted module names imported by a Python file (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_log_layer_does_not_import_the_broker() -> None:
    """pylog.log sits below the broker (docs/architecture.md): it may use pylog.config and
    pylog.errors, never pylog.broker."""
    for path in (SRC / "pylog" / "log").rglob("*.py"):
        for name in _full_imports(path):
            assert not (name == "pylog.broker" or name.startswith("pylog.broker.")), (
                f"{path}: imports {name}")


def test_client_reaches_the_broker_only_in_embedded_mode() -> None:
    """pylog.client speaks the wire protocol; only its embedded-mode transport
    (``client/aio/_embedded.py``, loaded when ``log.dir`` is given) runs the broker in
    process. The broker never imports the client."""
    client = SRC / "pylog" / "client"
    for path in client.rglob("*.py"):
        for name in _full_imports(path):
            if name == "pylog.broker" or name.startswith("pylog.broker."):
                assert path == client / "aio" / "_embedded.py", f"{path}: imports {name}"
    for path in (SRC / "pylog" / "broker").rglob("*.py"):
        for name in _full_imports(path):
            assert not name.startswith("pylog.client"), f"{path}: imports {name}"


def test_cluster_rules_are_sans_io() -> None:
    """pylog.cluster's decisions (elections, assignment, HW/ISR, znode payloads) are pure:
    only ``zk_store`` talks to ZooKeeper (kazoo), and nothing there opens sockets itself."""
    cluster = SRC / "pylog" / "cluster"
    pure = {"election.py", "assignment.py", "isr.py", "zk_data.py", "__init__.py"}
    forbidden = {"asyncio", "socket", "selectors", "threading", "time", "kazoo", "logcore"}
    assert {p.name for p in cluster.glob("*.py")} >= pure
    for path in cluster.glob("*.py"):
        names = _imports(path)
        if path.name in pure:
            assert not names & forbidden, f"{path}: imports {sorted(names & forbidden)}"
        assert not any(n.startswith("pylog.broker") for n in _full_imports(path)), path


def test_kazoo_is_imported_only_by_the_zookeeper_store() -> None:
    """Cluster mode's client library stays optional (the `cluster` extra): the single-node
    broker and everything else must import without it."""
    for path in (SRC / "pylog").rglob("*.py"):
        if "kazoo" in _imports(path):
            assert path == SRC / "pylog" / "cluster" / "zk_store.py", f"{path}: imports kazoo"
