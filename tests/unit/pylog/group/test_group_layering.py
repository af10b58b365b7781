"""pylog.group is sans-IO: the coordinator takes an injected clock and emits records; it never
touches sockets, event loops, files or the storage engine, and sits below the broker. The one
exception is ``service.py``, the asyncio glue that drives the coordinators from the broker:
nothing else in the package may import it."""

from __future__ import annotations

import ast
import pathlib

GROUP = pathlib.Path(__file__).resolve().parents[4] / "src" / "pylog" / "group"
FORBIDDEN = {"asyncio", "socket", "selectors", "ssl", "time", "threading", "os", "io", "logcore",
             "pylog.broker", "pylog.log", "pylog.config"}


GLUE = "service.py"


def _imports(path: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            names.add("pylog.group." + node.module)
    return names


def test_group_package_is_sans_io() -> None:
    files = sorted(p for p in GROUP.glob("*.py") if p.name != GLUE)
    assert len(files) >= 8
    for path in files:
        for name in _imports(path):
            assert name != "pylog.group.service", f"{path.name} imports the glue"
            for bad in FORBIDDEN:
                assert not (name == bad or name.startswith(bad + ".")), f"{path.name} imports {name}"


def test_only_the_classic_module_changes_a_group_state() -> None:
    # One _set_state: every other module goes through ClassicGroup.transition_to.
    for path in GROUP.glob("*.py"):
        text = path.read_text()
        if path.name == "classic.py":
            assert text.count("self.state = target") == 1
            continue
        assert ".state = " not in text, path.name
