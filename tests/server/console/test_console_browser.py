"""The web console in a real browser: headless Chromium (Debian's chromium + chromium-driver)
driven by selenium signs in, runs queries, sees the ± table and the chart SVG, and opens the owner
view; each test saves a screenshot, console-*.png, that docs/console.md shows (to docs/img with
DPCH_SCREENSHOTS=docs/img; else to a scratch directory).

Skipped, with the reason printed, only where Chromium or its driver is absent. The browser's
console log must hold no error: a Content-Security-Policy violation (an inline script or style)
or a script error would be one.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import inject_totality_gap
from tests.server.http_post import post

#: where the screenshots go: docs/img when refreshing the docs' images
#: (``DPCH_SCREENSHOTS=docs/img pytest tests/server/console/test_console_browser.py``), else a scratch
#: directory, so that a test run leaves the checkout as it was
SHOTS = Path(os.environ.get("DPCH_SCREENSHOTS") or Path(tempfile.gettempdir()) / "dpch-console-screenshots")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")


@pytest.fixture
def database(keeper):
    """A short database name for the screenshots (one test at a time per store, dropped after)."""
    from dpch.accounting.accountant import forget_cached_state

    keeper.command("DROP DATABASE IF EXISTS shop")
    forget_cached_state(keeper)  # no filter state of an earlier test's "shop" survives
    yield "shop"
    keeper.command("DROP DATABASE IF EXISTS shop")
    forget_cached_state(keeper)


def _skip(reason: str) -> None:
    print(f"SKIPPED (web console browser tests): {reason}", file=sys.__stderr__)
    pytest.skip(reason)


@pytest.fixture
def chrome():
    if CHROMIUM is None or DRIVER is None:
        _skip("Chromium or chromedriver is not installed (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1440,1000", "--force-device-scale-factor=1", "--lang=en-US"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def wait(driver, condition, timeout: float = 60):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # a page re-rendering (the owner view reloads after an action) can replace an element mid-check
    return WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=[StaleElementReferenceException]).until(condition)


def css(selector: str):
    def found(driver):
        elements = driver.find_elements("css selector", selector)
        return elements[0] if elements and elements[0].is_displayed() else False
    return found


def sign_in(driver, srv, user: str, password: str, page: str = "/play") -> None:
    driver.get(f"http://127.0.0.1:{srv.port}{page}")
    wait(driver, css("#login-form"))  # redirected to sign-in
    driver.find_element("id", "user").send_keys(user)
    driver.find_element("id", "password").send_keys(password)
    driver.find_element("id", "sign-in").click()
    # a script, not an element: the sign-in page's body goes stale when the console page loads
    wait(driver, lambda d: d.execute_script("return !!document.body && document.body.dataset.ready === '1'"))


def no_console_errors(driver, *, allowed: tuple[str, ...] = ()) -> None:
    """No error in the browser's log (a CSP violation, a script error, a failed request), except
    the ``allowed`` ones (e.g. the 401 of a sign-in the test meant to fail)."""
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
              and not any(a in e["message"] for a in allowed)]
    assert errors == [], errors


def shot(driver, name: str) -> None:
    """The whole page (not only the window) as console-NAME.png in :data:`SHOTS`."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 1440, "height": min(int(height), 2400), "deviceScaleFactor": 1, "mobile": False})
    try:
        driver.save_screenshot(str(SHOTS / f"console-{name}.png"))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def run_query(driver, sql: str) -> None:
    from selenium.webdriver.common.keys import Keys

    editor = driver.find_element("id", "sql")
    editor.clear()
    editor.send_keys(sql)
    editor.send_keys(Keys.ESCAPE)  # close the completion list
    editor.send_keys(Keys.CONTROL, Keys.ENTER)  # Ctrl-Enter runs (EXPLAIN DP first)


def test_sign_in_run_a_grouped_query_see_the_table_and_the_chart(console, chrome):
    sign_in(chrome, console, "ana", "ana-pw")
    no_console_errors(chrome)
    run_query(chrome, "SELECT region, count() AS visits, avg(spend) AS avg_spend FROM visits GROUP BY region")
    wait(chrome, css("#result-table tbody tr"))
    rows = chrome.find_elements("css selector", "#result-table tbody tr")
    assert len(rows) == 4
    cells = [c.text for c in rows[0].find_elements("tag name", "td")]
    assert cells[0] in {"north", "south", "east", "west"} and "±" in cells[1] and "±" in cells[2]
    bars = chrome.find_elements("css selector", "#chart svg.bars rect.bar")
    assert len(bars) == 4 and len(chrome.find_elements("css selector", "#chart svg line.error-bar")) == 12
    assert "spent ε" in chrome.find_element("id", "result-cost").text
    assert "budget left ε" in chrome.find_element("id", "result-left").text
    assert chrome.find_element("id", "explanation").is_displayed()  # EXPLAIN DP was shown before the run
    wait(chrome, css("#history li code.sql"))
    assert chrome.find_elements("css selector", "#budget-gauge svg.gauge")
    # a time-bucketed query: a line with a band
    run_query(chrome, "SELECT toStartOfMonth(visit_date) AS month, count() AS n FROM visits "
                      "WHERE visit_date >= '2026-01-01' AND visit_date < '2026-07-01' GROUP BY month")
    wait(chrome, css("#chart svg.band polygon.band-area"))
    assert len(chrome.find_elements("css selector", "#chart svg.band circle.band-dot")) == 6
    shot(chrome, "timeseries")
    run_query(chrome, "SELECT region, count() AS visits, avg(spend) AS avg_spend FROM visits GROUP BY region")
    wait(chrome, css("#chart svg.bars"))
    no_console_errors(chrome)
    shot(chrome, "play")


def test_completion_and_the_confirmation_above_the_share(console, chrome, store_dsn, database):
    from selenium.webdriver.common.keys import Keys

    sign_in(chrome, console, "bob", "bob-pw")
    editor = chrome.find_element("id", "sql")
    editor.clear()
    editor.send_keys("SELECT count() FROM vis")
    wait(chrome, css("#completion li"))
    assert [li.text for li in chrome.find_elements("css selector", "#completion li")] == ["visits", "visit_date"]
    editor.send_keys(Keys.TAB)
    assert editor.get_attribute("value") == "SELECT count() FROM visits"
    editor.send_keys(" SETTINGS dp_epsilon = 1.5")
    editor.send_keys(Keys.ESCAPE)
    editor.send_keys(Keys.CONTROL, Keys.ENTER)
    wait(chrome, css("#confirm-run"))  # 50% of what is left: above the shell's 25%
    assert "confirmation threshold" in chrome.find_element("id", "confirm").text
    shot(chrome, "confirm")
    chrome.find_element("id", "confirm-cancel").click()
    assert not chrome.find_element("id", "result").is_displayed()  # cancelled: nothing ran
    from dpch.accounting.accountant import Accountant
    from dpch.store.engine import Engine
    engine = Engine(store_dsn, database=database)
    try:
        assert Accountant(engine, "bob").recent(10) == []
    finally:
        engine.close()
    editor.send_keys(Keys.CONTROL, Keys.ENTER)
    wait(chrome, css("#confirm-run")).click()
    wait(chrome, css("#result-table tbody tr"))
    assert "ε 1.5" in chrome.find_element("id", "result-cost").text
    no_console_errors(chrome)


def test_owner_view_shows_spend_and_unlocks_a_locked_analyst(console, chrome, monkeypatch):
    for user, password, sql in (("ana", "ana-pw", "SELECT region, count() FROM visits GROUP BY region"),
                                ("ana", "ana-pw", "SELECT avg(spend) FROM visits"),
                                ("bob", "bob-pw", "SELECT device, sum(spend) FROM visits GROUP BY device"),
                                ("grafana", "bi-pw", "SELECT count() FROM visits")):
        assert post(console, sql, user=user, password=password, params={"dp_epsilon": "0.4"})[0].status == 200
    inject_totality_gap(monkeypatch)  # bob's next query fails after its charge: the tripwire locks bob
    assert post(console, "SELECT count(*) FROM visits WHERE age > 30", user="bob", password="bob-pw",
                params={"dp_epsilon": "0.1"})[0].status == 500
    monkeypatch.undo()
    sign_in(chrome, console, "owner", "owner-pw", page="/admin")
    wait(chrome, css("svg.spend polyline.spend-line"))
    rows = chrome.find_elements("css selector", "table.analysts tr[data-analyst]")
    analysts = [r.get_attribute("data-analyst") for r in rows]
    assert {"ana", "bob", "bi", "dora"} <= set(analysts)
    assert len(chrome.find_elements("css selector", "table.releases tbody tr")) == 5
    assert "bob since" in chrome.find_element("css selector", "ul.locked").text
    assert chrome.find_elements("css selector", "#policies details")
    assert "dpch audit" in chrome.find_element("id", "audits").text
    # set a per-dataset budget through the form (the same action as `dpch budget set --dataset`)
    for field, value in (("b-analyst", "ana"), ("b-dataset", "visits"), ("b-epsilon", "2")):
        chrome.find_element("id", field).send_keys(value)
    chrome.find_element("id", "b-submit").click()
    wait(chrome, lambda d: "budget of ana on shop.visits set to ε 2" in d.find_element("id", "notice").text)
    wait(chrome, lambda d: "shop.visits: 0.8 / 2" in d.find_element("css selector", "tr[data-analyst=ana]").text)
    no_console_errors(chrome)
    shot(chrome, "admin")
    wait(chrome, css("ul.locked button.unlock")).click()
    wait(chrome, lambda d: "analyst bob unlocked" in d.find_element("id", "notice").text)
    wait(chrome, lambda d: not d.find_elements("css selector", "ul.locked"))
    assert post(console, "SELECT count() FROM visits", user="bob", password="bob-pw")[0].status == 200


def test_an_analyst_cannot_open_the_owner_view(console, chrome):
    chrome.get(f"http://127.0.0.1:{console.port}/play")
    wait(chrome, css("#login-form"))
    chrome.find_element("id", "user").send_keys("ana")
    chrome.find_element("id", "password").send_keys("wrong")
    chrome.find_element("id", "sign-in").click()
    wait(chrome, lambda d: "Authentication failed" in d.find_element("id", "login-error").text)
    shot(chrome, "login")
    sign_in(chrome, console, "ana", "ana-pw")
    assert not chrome.find_element("id", "nav-admin").is_displayed()
    no_console_errors(chrome, allowed=("/console/api/login",))  # the wrong password's 401
    chrome.get(f"http://127.0.0.1:{console.port}/admin")
    assert "data owners only" in chrome.find_element("tag name", "body").text


def test_accuracy_first_and_refine_with_their_cost(console, chrome, monkeypatch):
    monkeypatch.setenv("DPCH_FILTER", "zcdp_bm")  # a filter that charges the realized cost
    sign_in(chrome, console, "ana", "ana-pw")
    run_query(chrome, "SELECT count() AS n FROM visits SETTINGS dp_accuracy = 400, dp_max_epsilon = 2")
    # asked first only if its cost is above the confirmation share (under this filter, the share of ρ)
    shown = wait(chrome, lambda d: css("#confirm-run")(d) or css("#accuracy")(d))
    if shown.get_attribute("id") == "confirm-run":
        shown.click()
        wait(chrome, css("#accuracy"))
    assert "target ±400" in chrome.find_element("id", "accuracy").text
    first = chrome.find_element("id", "result-cost").text
    assert first.startswith("spent ε") and "ρ" in first  # the zCDP filter counts ρ: shown too
    half = chrome.find_element("css selector", "#result-table td.num .pm").text
    chrome.find_element("id", "refine").click()
    wait(chrome, lambda d: d.find_element("css selector", "#result-table td.num .pm").text != half)
    wait(chrome, lambda d: len(d.find_elements("css selector", "#history li")) == 2)
    assert "brownian-refine" in chrome.find_element("id", "history").text
    assert "mechanism" in chrome.find_element("id", "result-meta").text
    no_console_errors(chrome)
    shot(chrome, "accuracy")
