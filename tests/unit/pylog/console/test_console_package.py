"""The console's templates and static files ship: the wheel's package data takes them and
its exclusions (Cython's ``*.c``/``*.html`` output) leave them alone, and every template a
view or another template names exists."""

from __future__ import annotations

import fnmatch
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[4]
CONSOLE = ROOT / "src" / "pylog" / "console"


def test_templates_and_static_files_are_package_data() -> None:
    tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml with Python 3.11's tomllib")
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools["package-data"]["pylog"]
    excluded = setuptools["exclude-package-data"]["*"]
    files = [p for d in ("templates", "static") for p in (CONSOLE / d).iterdir()]
    assert len(files) > 10
    for path in files:
        rel = path.relative_to(CONSOLE.parent).as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} is not package data"
        assert not any(fnmatch.fnmatch(path.name, g) for g in excluded), f"{rel} is excluded"


def test_every_named_template_exists() -> None:
    names = set()
    for path in [*CONSOLE.rglob("*.py"), *(CONSOLE / "templates").iterdir()]:
        names |= set(re.findall(r'"([\w]+\.jinja)"', path.read_text()))
    assert "base.jinja" in names and len(names) >= 10
    missing = sorted(n for n in names if not (CONSOLE / "templates" / n).exists())
    assert not missing
