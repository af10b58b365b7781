"""The architecture's import boundaries (docs/architecture.md), checked on the source.

``LAYERS`` is the order of the packages, bottom first; ``test_no_import_reaches_up`` walks
every import of every module under ``src/`` (module level and inside functions alike) and
fails on one whose target sits in a higher layer than the importing module. The other tests
add the finer rules within a layer (sans-IO packages, the optional kazoo, embedded mode)."""

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


#: The layers, bottom first. A module may import its own layer and the layers below it.
#: Each entry is a module or package prefix; the longest prefix of a module names its layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("logcore",),  # bytes and files
    ("pylog", "pylog._clock", "pylog.errors"),  # the package, the clock, the error codes
    # Configuration tables; the sans-IO wire codec; the metrics registry, collectors and
    # endpoint (handed the broker as an object, counters updated by any layer above).
    ("pylog.config", "pylog.protocol", "pylog.metrics"),
    # Foundations of the broker's parts: partition logs, the cluster's pure rules and
    # ZooKeeper store, the requesting side of the wire protocol (brokers and clients).
    ("pylog.log", "pylog.cluster", "pylog.net", "pylog.security"),  # + ACL vocabulary
    ("pylog.replication",),  # the replica manager: roles, fetchers, the append path
    ("pylog.coordinator",),  # the internal-topic coordinator runtime, on the append path
    ("pylog.group",),  # the group coordinator (its service on the runtime)
    ("pylog.txn",),  # the transaction coordinator (reuses the group's timers and results)
    ("pylog.controller",),  # cluster mode at run time; creates the coordinators' topics
    ("pylog.broker",),  # the server, its listeners and the request handlers
    ("pylog.client",),  # pylog's client (embedded mode runs a broker in process)
    ("pylog.spark", "pylog.console"),  # the Spark source and sink, the web console: on the client
    # The test kit (a broker in the test process, faults, the virtual clock, the pytest
    # plugin): on the broker and the client; the broker's side of faults is the generic
    # pylog.broker.intercept, which never imports it.
    ("pylog.testing",),
    ("pylog.cli", "pylog.__main__"),  # the command line, on everything
)

#: Deliberate upward imports: (importing module, imported module) -> why. Empty: the
#: broker is handed to the layers below it as an object (``broker.groups``,
#: ``broker.new_producer_id()``, ...), never imported by them; annotations that name it
#: sit under ``if TYPE_CHECKING:``, which is not an import at run time and is not counted.
UPWARD_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _layer(module: str) -> int:
    best, rank = "", -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, rank = prefix, i
    return rank


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(path: pathlib.Path, module: str, known: set[str]) -> set[str]:
    """The modules ``path`` imports at run time (relative imports resolved; ``from a import
    b`` counts as ``a.b`` when that is a module), skipping ``if TYPE_CHECKING:`` blocks."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(ast.parse(path.read_text()))
    return found


def test_every_module_has_a_layer() -> None:
    for path in [*(SRC / "pylog").rglob("*.py"), *(SRC / "logcore").rglob("*.py")]:
        assert _layer(_module_name(path)) >= 0, f"{path}: no layer in LAYERS"


def test_no_import_reaches_up() -> None:
    """docs/architecture.md, "Layers": each layer imports only its own and those below."""
    paths = [*(SRC / "pylog").rglob("*.py"), *(SRC / "logcore").rglob("*.py")]
    known = {_module_name(p) for p in paths}
    upward = []
    used_exceptions = set()
    for path in paths:
        module = _module_name(path)
        rank = _layer(module)
        for name in _runtime_imports(path, module, known):
            target = _layer(name)
            if target <= rank:
                continue  # the standard library, third parties (-1), or not upward
            key = (module, name)
            if key in UPWARD_EXCEPTIONS:
                used_exceptions.add(key)
                continue
            upward.append(f"{module} (layer {rank}) imports {name} (layer {target})")
    assert not upward, "imports that reach up:\n" + "\n".join(sorted(upward))
    assert used_exceptions == set(UPWARD_EXCEPTIONS), "stale entries in UPWARD_EXCEPTIONS"


def test_the_layering_check_sees_lazy_and_relative_imports(tmp_path) -> None:
    """The walk finds imports inside functions and relative ones, and skips only
    ``if TYPE_CHECKING:`` blocks (a guard against the check going blind)."""
    pkg = tmp_path / "pylog" / "log"
    pkg.mkdir(parents=True)
    f = pkg / "mod.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pylog.cli\n"
                 "def f():\n    from pylog.broker import server\n    from ..group import service\n")
    names = _runtime_imports(f, "pylog.log.mod", {"pylog.broker.server", "pylog.group.service"})
    assert {"pylog.broker.server", "pylog.group.service"} <= names
    assert "pylog.cli" not in names


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


def test_nothing_below_imports_the_test_kit() -> None:
    """pylog.testing fills the broker's interception point; the broker (and everything
    else in the package but the kit itself) never imports it, not even lazily."""
    for path in (SRC / "pylog").rglob("*.py"):
        if (SRC / "pylog" / "testing") in path.parents:
            continue
        for name in _full_imports(path):
            assert not name.startswith("pylog.testing"), f"{path}: imports {name}"


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


def test_the_client_private_modules_stay_inside_the_client() -> None:
    """Broker-to-broker requests go through ``pylog.net``; no module outside
    ``pylog.client`` imports the client's private (underscore) modules."""
    for path in (SRC / "pylog").rglob("*.py"):
        if (SRC / "pylog" / "client") in path.parents:
            continue
        for name in _full_imports(path):
            if name.startswith("pylog.client"):
                assert not any(part.startswith("_") for part in name.split(".")[2:]), (
                    f"{path}: imports {name}")
