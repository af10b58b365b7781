"""The console in a real browser: create a topic and produce a record from the forms and
find it in the message browser, watch a group's lag appear and drop to zero without a
reload, reset the group's offsets, see an XSS value rendered as text, and a read-only
console without any write control. Outcomes are checked through the Kafka API.

Screenshots of the pages go to ``$PYLOG_CONSOLE_SCREENSHOTS`` when it is set (the docs'
images were made so: ``PYLOG_CONSOLE_SCREENSHOTS=docs/images``), else to a temporary
directory.
"""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pylog.client import Admin, Consumer, Producer, TopicPartition
from tests._harness.console import ConsoleProcess

XSS = "<script>document.title='owned'</script>"


@pytest.fixture(scope="module")
def consoles(broker: Any, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[str, str]]:
    work = tmp_path_factory.mktemp("console")
    rw = ConsoleProcess(work, broker.bootstrap, "--sample-interval", "0.5").start()
    ro = ConsoleProcess(work, broker.bootstrap, "--read-only").start()
    try:
        yield rw.url, ro.url
    finally:
        assert rw.stop() == 0, rw.log_path.read_text()
        assert ro.stop() == 0, ro.log_path.read_text()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    wanted = os.environ.get("PYLOG_CONSOLE_SCREENSHOTS")
    path = pathlib.Path(wanted) if wanted else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def until(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    """``check()``'s first true answer; an element replaced meanwhile (the live fragments
    are) or not there yet counts as a false answer."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
        except (NoSuchElementException, StaleElementReferenceException):
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def all_css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def test_create_topic_produce_and_find_the_record(browser: Any, broker: Any,
                                                  consoles: tuple[str, str],
                                                  shots: pathlib.Path) -> None:
    url, _ = consoles
    browser.get(url + "/topics")
    css(browser, '[data-test="create-topic-name"]').send_keys("orders")
    css(browser, '[data-test="create-topic-partitions"]').send_keys("2")
    css(browser, '[data-test="create-topic-submit"]').click()
    assert until(lambda: css(browser, '[data-test="topic-name"]').text, "the topic page") == "orders"
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert len(admin.describe_topics(["orders"])["orders"].partitions) == 2

    css(browser, '[data-test="produce-link"]').click()
    from selenium.webdriver.support.ui import Select

    Select(css(browser, '[data-test="produce-partition"]')).select_by_value("1")
    css(browser, '[data-test="produce-key"]').send_keys("customer-42")
    css(browser, '[data-test="produce-value"]').send_keys('{"order": 1, "total": 9.5}')
    css(browser, '[data-test="produce-headers"]').send_keys("source=console")
    css(browser, '[data-test="produce-submit"]').click()
    row = until(lambda: all_css(browser, '[data-test="record-row"]'), "the record's row")[0]
    assert row.get_attribute("data-partition") == "1" and row.get_attribute("data-offset") == "0"
    assert css(browser, '[data-test="record-key"]').text == "customer-42"
    assert '"total": 9.5' in css(browser, '[data-test="record-value"]').text
    assert css(browser, '[data-test="record-header"]').text == "source=console"
    with Consumer(bootstrap_servers=broker.bootstrap) as c:  # the record, as Kafka has it
        c.assign([TopicPartition("orders", 1)])
        c.seek(TopicPartition("orders", 1), 0)
        (r,) = until(lambda: c.poll(timeout=1.0), "the record from the broker")
        assert (r.key, r.value, r.headers) == (b"customer-42", b'{"order": 1, "total": 9.5}',
                                                [("source", b"console")])
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(30):
            p.send("orders", b'{"order": %d, "total": %d.25}' % (i + 2, i), key=b"customer-%d" % i,
                   partition=i % 2)
        p.flush(30)
    browser.get(url + "/topics/orders/messages?limit=12")
    browser.save_screenshot(str(shots / "console-messages.png"))
    browser.get(url + "/topics")
    browser.save_screenshot(str(shots / "console-topics.png"))


def test_xss_value_is_text(browser: Any, broker: Any, consoles: tuple[str, str]) -> None:
    url, _ = consoles
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send("orders", XSS.encode(), key=XSS.encode(), partition=0)
        p.flush(30)
    browser.get(url + "/topics/orders/messages?partition=0&limit=1")
    assert css(browser, '[data-test="record-value"]').text == XSS
    assert css(browser, '[data-test="record-key"]').text == XSS
    assert browser.title != "owned"
    assert all_css(browser, "td script") == []


def test_group_lag_appears_drops_to_zero_and_resets(browser: Any, broker: Any,
                                                    consoles: tuple[str, str],
                                                    shots: pathlib.Path) -> None:
    url, _ = consoles
    tp0, tp1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        ends = {tp: off for tp, (off, _) in admin.list_offsets(
            {tp0: "latest", tp1: "latest"}).items()}
    total = sum(ends.values())
    c = Consumer(bootstrap_servers=broker.bootstrap, group_id="billing", client_id="billing-7",
                 auto_offset_reset="earliest", enable_auto_commit=False,
                 session_timeout_ms=6000)
    try:
        c.subscribe(["orders"])
        got = 0
        while got < total:
            got += len(c.poll(timeout=1.0))
        c.commit({tp0: 1, tp1: 1})
        browser.get(url + "/groups/billing")
        assert css(browser, '[data-test="total-lag"]').text == str(total - 2)
        assert until(lambda: css(browser, '[data-test="member-client"]').text,
                     "the member") == "billing-7"
        time.sleep(1.5)  # a few samples for the lag chart
        browser.save_screenshot(str(shots / "console-group.png"))
        c.commit()  # everything polled: the lag drops to 0 on the page, without a reload
        until(lambda: css(browser, '[data-test="total-lag"]').text == "0",
              "the live fragment to show lag 0")
        assert int(css(browser, '[data-test="group-live"]').get_attribute("data-refreshed")) >= 1
    finally:
        c.close()
    browser.get(url + "/groups/billing")
    until(lambda: all_css(browser, '[data-test="no-members"]') or browser.refresh(),
          "the member to leave")
    from selenium.webdriver.support.ui import Select

    Select(css(browser, '[data-test="reset-mode"]')).select_by_value("to-earliest")
    css(browser, '[data-test="reset-execute"]').click()
    assert "reset" in until(lambda: css(browser, '[data-test="flash"]').text, "the flash")
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        committed = admin.list_group_offsets("billing")
    assert {tp: o.offset for tp, o in committed.items()} == {tp0: 0, tp1: 0}
    assert until(lambda: css(browser, '[data-test="total-lag"]').text, "the lag") == str(total)


def test_overview_and_read_only(browser: Any, consoles: tuple[str, str],
                                shots: pathlib.Path) -> None:
    url, ro = consoles
    browser.get(url + "/")
    assert css(browser, '[data-test="broker-count"]').text == "1"
    until(lambda: "loading" not in css(browser, "figure.chart figcaption").text, "the charts")
    browser.save_screenshot(str(shots / "console-overview.png"))
    browser.get(url + "/topics/orders")
    browser.save_screenshot(str(shots / "console-topic.png"))
    for page in ("/", "/topics", "/topics/orders", "/topics/orders/messages",
                 "/groups", "/groups/billing", "/brokers"):
        browser.get(ro + page)
        assert css(browser, '[data-test="read-only"]').text == "read-only"
        assert all_css(browser, 'form[method="post"]') == [], page
        assert all_css(browser, '[data-test="produce-link"]') == [], page
        assert all_css(browser, "button[data-test]") == [] or page == "/topics/orders/messages"
