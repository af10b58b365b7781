"""Options of the soak tests (``tests/soak/README.md`` says how to run them by hand).

``--soak-seconds`` / ``SOAK_SECONDS``: how long the broker is killed and restarted (the run
goes on until at least ``--soak-kills`` / ``SOAK_KILLS`` kills too). ``--soak-seed`` /
``SOAK_SEED``: the seed of the records and of the kill moments (random when not given; it is
printed, and a failure names it). The defaults are the short budget the normal test run uses.
"""

from __future__ import annotations

import os
import pathlib
import random

import pytest

DEFAULT_SECONDS = 20.0
DEFAULT_KILLS = 12


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("soak", "kill -9 soak test (tests/soak)")
    group.addoption("--soak-seconds", type=float, default=None,
                    help=f"seconds of kills and restarts (env SOAK_SECONDS; default "
                         f"{DEFAULT_SECONDS:g})")
    group.addoption("--soak-kills", type=int, default=None,
                    help=f"at least this many kills (env SOAK_KILLS; default {DEFAULT_KILLS})")
    group.addoption("--soak-seed", type=int, default=None,
                    help="seed of the records and the kill moments (env SOAK_SEED; random)")


def _opt(config: pytest.Config, name: str, env: str, cast, default):  # type: ignore[no-untyped-def]
    value = config.getoption(name)
    if value is None and os.environ.get(env):
        value = cast(os.environ[env])
    return default if value is None else value


@pytest.fixture(scope="session")
def soak_budget(pytestconfig: pytest.Config) -> tuple[float, int]:
    return (_opt(pytestconfig, "--soak-seconds", "SOAK_SECONDS", float, DEFAULT_SECONDS),
            _opt(pytestconfig, "--soak-kills", "SOAK_KILLS", int, DEFAULT_KILLS))


@pytest.fixture
def soak_seed(pytestconfig: pytest.Config) -> int:
    return _opt(pytestconfig, "--soak-seed", "SOAK_SEED", int, random.randrange(1 << 32))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = pathlib.Path(__file__).parent
    seconds = _opt(config, "--soak-seconds", "SOAK_SECONDS", float, DEFAULT_SECONDS)
    for item in items:
        if here in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.soak)
            # A long run by hand must not trip the suite's 300 s timeout.
            item.add_marker(pytest.mark.timeout(int(seconds) + 600))


# The figures of every soak run, shown at the end of the session (also when it passes, so
# that CI logs carry them).
_FIGURES: list[str] = []


@pytest.fixture
def soak_figures() -> list[str]:
    return _FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FIGURES:
        terminalreporter.section("soak figures")
        for line in _FIGURES:
            terminalreporter.write_line(line)
