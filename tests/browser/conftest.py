"""Browser tests of the console: Debian's Chromium driven by Selenium through
chromium-driver (``make sysdeps`` installs both). One browser session per module; the
tests are marked ``integration`` and skip, saying so, only when Chromium or its driver is
absent."""

from __future__ import annotations

import os
import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import start_target

HERE = pathlib.Path(__file__).parent
INSTALL = "install Debian's chromium and chromium-driver (make sysdeps)"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


def _binaries() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip(f"no {'chromium' if browser is None else 'chromedriver'} on PATH: {INSTALL}")
    return browser, driver


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (one per module), 1200x800, no network but 127.0.0.1 needed."""
    chromium, chromedriver = _binaries()
    os.environ.setdefault("SE_AVOID_STATS", "true")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,800", "--disable-extensions", "--no-first-run",
                "--disable-background-networking"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    b = start_target(tmp_path_factory, "browser", {
        "auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "500", "offsets.topic.num.partitions": "1"})
    yield b
    assert b.stop() == 0, b.read_log()
