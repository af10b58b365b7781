"""Lint and type checks run as tests, so that CI fails on either."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    path = shutil.which(name) or str(pathlib.Path(sys.executable).with_name(name))
    if not pathlib.Path(path).exists():
        pytest.fail(f"{name} is a test dependency (pyproject [test] extra) but is not installed")
    return path


def test_ruff() -> None:
    out = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "src", "tests", "tools", "benchmarks", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy() -> None:
    out = subprocess.run(
        [_tool("mypy"), "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", "/dev/null"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_test_modules_have_unique_basenames() -> None:
    """pytest imports test modules by basename (rootdir-relative, no packages): two test files
    of one name in different folders stop the whole run's collection ("import file
    mismatch"), which a run of one folder never shows."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {n: ps for n, ps in seen.items() if len(ps) > 1} == {}
