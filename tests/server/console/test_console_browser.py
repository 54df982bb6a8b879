"""The web console in a real browser: headless Chromium (Debian's chromium + chromium-driver)
driven by selenium signs in, runs queries, sees the ± table and the chart SVG (one line per series,
labels that do not overlap), downloads a release as CSV, shares a query by its URL, saves queries,
and opens the owner view; the tests save screenshots, console-*.png, that docs/console.md shows (to
docs/img with DPCH_SCREENSHOTS=docs/img; else to a scratch directory).

Skipped, with the reason printed, only where Chromium or its driver is absent. The browser's
console log must hold no error: a Content-Security-Policy violation (an inline script or style)
or a script error would be one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from dpch.errors import QueryFailedAfterCharge
from dpch.pipeline.report import Release
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


def _start_chrome(*, network: bool = False):
    """A headless Chromium; with ``network``, its log of network events too (to read a response's body)."""
    if CHROMIUM is None or DRIVER is None:
        _skip("Chromium or chromedriver is not installed (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1440,1000", "--force-device-scale-factor=1", "--lang=en-US"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", **({"performance": "ALL"} if network else {})})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    driver.set_page_load_timeout(60)
    return driver


@pytest.fixture
def chrome():
    driver = _start_chrome()
    yield driver
    driver.quit()


@pytest.fixture
def chrome_network(tmp_path):
    """A browser that logs its network events and saves downloads into ``driver.downloads``."""
    driver = _start_chrome(network=True)
    driver.downloads = tmp_path / "downloads"
    driver.downloads.mkdir()
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(driver.downloads)})
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


# -- charts: one line per series, readable labels -------------------------------------------------------

def boxes(driver, selector: str) -> list[dict]:
    """The rendered boxes (page pixels) and texts of the elements ``selector`` finds."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map((e) => {"
        " const r = e.getBoundingClientRect();"
        " return {text: e.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom}; });", selector)


def overlapping(found: list[dict]) -> list[tuple[str, str]]:
    """The pairs of boxes that overlap (touching edges do not)."""
    return [(a["text"], b["text"]) for i, a in enumerate(found) for b in found[i + 1:]
            if a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]]


def polyline_points(line) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in line.get_attribute("points").split()]


def test_a_date_and_a_second_key_are_one_line_per_key_with_a_legend_and_readable_labels(console, chrome):
    sign_in(chrome, console, "ana", "ana-pw")
    run_query(chrome, "SELECT toStartOfMonth(visit_date) AS month, region, count() AS n FROM visits "
                      "WHERE visit_date >= '2026-01-01' AND visit_date < '2026-07-01' GROUP BY month, region")
    wait(chrome, css("#chart svg.lines"))
    series = chrome.find_elements("css selector", "#chart svg g.series")
    assert sorted(g.get_attribute("data-series") for g in series) == ["east", "north", "south", "west"]
    for g in series:  # each region's line: its 6 months, left to right, with its band and dots
        points = polyline_points(g.find_element("css selector", "polyline.band-line"))
        assert len(points) == 6 and [x for x, _ in points] == sorted({x for x, _ in points})
        assert len(g.find_elements("css selector", "polygon.band-area")) == 1
        assert len(g.find_elements("css selector", "circle.band-dot")) == 6
    # each line has its own colour, and the legend names them in the same colours
    colours = [g.find_element("css selector", "polyline.band-line").get_attribute("class") for g in series]
    assert len(set(colours)) == 4
    legend = boxes(chrome, "#chart svg text.legend")
    assert [e["text"] for e in legend] == ["east", "north", "south", "west"]
    labels = boxes(chrome, "#chart svg text.x-label")
    assert [e["text"] for e in labels] == ["2026-01", "2026-02", "2026-03", "2026-04", "2026-05", "2026-06"]
    assert overlapping(labels + legend) == []
    assert "n by month, one line per region" in chrome.find_element("css selector", "#chart svg .chart-title").text
    shot(chrome, "series")
    # weekly buckets: more weeks than fit as labels; those drawn do not overlap, and they are in order
    run_query(chrome, "SELECT toStartOfWeek(visit_date) AS week, device, count() AS n FROM visits "
                      "WHERE visit_date >= '2026-01-01' AND visit_date < '2026-07-01' GROUP BY week, device")
    wait(chrome, lambda d: len(d.find_elements("css selector", "#chart svg g.series")) == 3)
    assert len(polyline_points(chrome.find_element("css selector", "#chart svg g.series polyline"))) >= 25
    labels = boxes(chrome, "#chart svg text.x-label")
    assert 4 <= len(labels) < 25 and [e["text"] for e in labels] == sorted(e["text"] for e in labels)
    assert overlapping(labels + boxes(chrome, "#chart svg text.legend")) == []
    # two more keys: a series per pair; at most 10 lines, said below the chart; the legend wraps, unoverlapped
    run_query(chrome, "SELECT toStartOfMonth(visit_date) AS month, region, device, count() AS n FROM visits "
                      "WHERE visit_date >= '2026-01-01' AND visit_date < '2026-04-01' GROUP BY month, region, device "
                      "SETTINGS dp_epsilon = 0.2")  # below the confirmation share
    wait(chrome, lambda d: len(d.find_elements("css selector", "#chart svg g.series")) == 10)
    assert chrome.find_element("css selector", "#chart p").text == (
        "12 series: the first 10 are drawn (all are in the table)")
    legend = boxes(chrome, "#chart svg text.legend")
    assert [e["text"] for e in legend][:4] == ["east · desktop", "east · mobile", "east · tablet", "north · desktop"]
    assert len(legend) == 10 and len({e["top"] for e in legend}) > 1
    assert overlapping(legend + boxes(chrome, "#chart svg text.x-label")) == []
    no_console_errors(chrome)


# -- a refused query clears the previous answer -----------------------------------------------------------

GROUPED = "SELECT region, count() AS visits, avg(spend) AS avg_spend FROM visits GROUP BY region"


def answered(driver) -> None:
    """A grouped answer is on screen with its chart and its admissible explanation."""
    wait(driver, css("#chart svg.bars"))
    assert len(driver.find_elements("css selector", "#result-table tbody tr")) == 4
    assert driver.find_element("css selector", "#explanation .pill.ok").text == "admissible"


def cleared(driver) -> None:
    """Nothing of the previous answer is on screen: no table, chart, CSV link or 'admissible'."""
    assert not driver.find_element("id", "result").is_displayed()
    assert driver.find_elements("css selector", "#chart *, #result-table *, #download-csv") == []
    assert driver.find_elements("css selector", "#explanation .pill.ok") == []
    assert "admissible" not in driver.find_element("tag name", "main").text.replace("not admissible", "")


def test_a_refused_query_clears_the_previous_answer(console, chrome, monkeypatch):
    cheap = GROUPED + " SETTINGS dp_epsilon = 0.1"  # four of them, each below the confirmation share
    sign_in(chrome, console, "ana", "ana-pw")
    # refused by EXPLAIN DP: a raw column
    run_query(chrome, cheap)
    answered(chrome)
    run_query(chrome, "SELECT user_id FROM visits")
    wait(chrome, css("#error"))
    cleared(chrome)
    assert not chrome.find_element("id", "explanation").is_displayed()
    shot(chrome, "refused")
    # not admissible: more than the budget left (the explanation says why; the old answer is gone)
    run_query(chrome, cheap)
    answered(chrome)
    run_query(chrome, GROUPED + " SETTINGS dp_epsilon = 50")
    wait(chrome, lambda d: "refused" in d.find_element("id", "explanation").text)
    cleared(chrome)
    # an answer on screen, then Explain alone of a query that is not admissible: the answer goes too
    run_query(chrome, cheap)
    answered(chrome)
    editor = chrome.find_element("id", "sql")
    editor.clear()
    editor.send_keys("SELECT count() FROM visits SETTINGS dp_epsilon = 50")
    chrome.find_element("id", "explain").click()
    wait(chrome, lambda d: "refused" in d.find_element("id", "explanation").text)
    cleared(chrome)
    # admissible, then failing when run (after its charge: the tripwire): the 'admissible' goes too
    run_query(chrome, cheap)
    answered(chrome)
    inject_totality_gap(monkeypatch)
    run_query(chrome, "SELECT count(*) FROM visits WHERE age > 30")
    wait(chrome, css("#error"))
    monkeypatch.undo()
    assert QueryFailedAfterCharge.MESSAGE in chrome.find_element("id", "error").text  # explained, admitted, run
    cleared(chrome)
    assert not chrome.find_element("id", "explanation").is_displayed()
    no_console_errors(chrome, allowed=("/console/api/explain", "/console/api/query"))  # the refusals' 4xx and 500


# -- CSV export -----------------------------------------------------------------------------------------------

def release_of(wire: dict) -> Release:
    """A Release with the columns, rows and intervals of a release as the console received it (what
    its interval table needs; the rest is not used by it)."""
    return Release(columns=wire["columns"], rows=[tuple(r) for r in wire["rows"]],
                   intervals=[[tuple(iv) if iv is not None else None for iv in row] for row in wire["intervals"]],
                   cost=None, confidence=wire.get("confidence", 0.95), mechanism="", measures=[], budget=None,
                   release_id=wire.get("release_id", ""))


def assert_csv_is_the_interval_table(text: str, release: Release) -> None:
    """``text`` is ``release.interval_table()``: the same names, and the same values (numbers parsed, NULL empty)."""
    names, expected = release.interval_table()
    lines = list(csv.reader(io.StringIO(text, newline="")))
    assert lines[0] == names
    assert len(lines) - 1 == len(expected)
    for got, want in zip(lines[1:], expected, strict=True):
        assert len(got) == len(want)
        for cell, value in zip(got, want, strict=True):
            if value is None:
                assert cell == ""
            elif isinstance(value, bool | str):
                assert cell == str(value).lower() if isinstance(value, bool) else cell == value
            else:
                assert float(cell) == value, (cell, value)


def response_body(driver, path: str) -> dict:
    """The JSON body of the page's latest response from ``path`` (from the browser's network log)."""
    request_id = None
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.responseReceived" and urlsplit(params["response"]["url"]).path == path:
            request_id = params["requestId"]
    assert request_id is not None, f"no response from {path}"
    return json.loads(driver.execute_cdp_cmd("Network.getResponseBody", {"requestId": request_id})["body"])


def test_download_a_release_as_csv_with_its_interval_bounds(console, chrome_network):
    chrome = chrome_network
    sign_in(chrome, console, "ana", "ana-pw")
    run_query(chrome, GROUPED)
    wait(chrome, css("#result-table tbody tr"))
    wire = response_body(chrome, "/console/api/query")  # the release exactly as the page received it
    link = chrome.find_element("id", "download-csv")
    name = link.get_attribute("download")
    assert name == f"dpch-release-{wire['release_id'][:8]}.csv" and link.get_attribute("href").startswith("blob:")
    link.click()
    target = chrome.downloads / name
    wait(chrome, lambda d: target.exists() and not list(d.downloads.glob("*.crdownload")))
    text = target.read_text(encoding="utf-8")
    assert text.splitlines()[0] == "region,visits,visits_lo,visits_hi,avg_spend,avg_spend_lo,avg_spend_hi"
    assert_csv_is_the_interval_table(text, release_of(wire))
    # the rows the table shows, in its order
    shown = [row.find_element("tag name", "td").text
             for row in chrome.find_elements("css selector", "#result-table tbody tr")]
    assert [line["region"] for line in csv.DictReader(io.StringIO(text))] == shown
    no_console_errors(chrome)


def test_csv_fields_are_quoted_and_nulls_are_empty(console, chrome):
    """The page's CSV of a release with awkward keys (a comma, a quote, a line break, an empty text,
    NULL), a noisy column NULL in one row, and a key after the noisy ones: the interval table's values."""
    sign_in(chrome, console, "ana", "ana-pw")
    wire = {"columns": ["key", "n", "label", "s"], "release_id": "0123456789abcdef",
            "rows": [["a,b", 10.5, "x", -0.125], ['say "hi"', 1e-07, "", None], ["line\nbreak", -3.0, None, 2e21],
                     ["", 0.0, "plain", 1.0], [None, 12345678.9, "z", 7.0]],
            "intervals": [[None, [9.0, 12.0], None, [-1.5, 1.25]], [None, [-1.0, 1.0], None, None],
                          [None, [-4.5, -1.5], None, [1e21, 3e21]], [None, [-0.5, 0.5], None, [0.0, 2.0]],
                          [None, [12345670.0, 12345680.0], None, [6.0, 8.0]]]}
    text = chrome.execute_script("return Export.csv(arguments[0])", wire)
    assert text.split("\r\n")[:2] == ["key,n,n_lo,n_hi,label,s,s_lo,s_hi", '"a,b",10.5,9,12,x,-0.125,-1.5,1.25']
    assert '"say ""hi""",1e-7,-1,1,"",,,' in text and '"line\nbreak",' in text
    assert_csv_is_the_interval_table(text, release_of(wire))
    assert chrome.execute_script("return Export.fileName(arguments[0])", wire) == "dpch-release-01234567.csv"
    no_console_errors(chrome)


# -- the query in the URL ----------------------------------------------------------------------------------

def test_a_query_is_in_the_url_and_a_shared_url_fills_the_editor_without_running_it(console, chrome, store_dsn,
                                                                                     database):
    from dpch.accounting.accountant import Accountant
    from dpch.store.engine import Engine

    sql = "SELECT region, count() AS n FROM visits WHERE age > 30 GROUP BY region"
    sign_in(chrome, console, "ana", "ana-pw")
    chrome.find_element("id", "opt-epsilon").send_keys("0.3")
    run_query(chrome, sql)
    wait(chrome, css("#result-table tbody tr"))
    url = chrome.current_url
    parts = urlsplit(url)
    assert parts.path == "/play" and parts.query == ""
    assert parse_qs(parts.fragment) == {"q": [sql], "epsilon": ["0.3"]}  # the query and its options: no result
    shown = [c.text for c in chrome.find_elements("css selector", "#result-table td.num")]
    assert shown and not any(value.split(" ± ")[0] in url for value in shown)
    # another analyst opens the link: it survives signing in, fills the editor, and runs nothing
    chrome.find_element("id", "sign-out").click()
    wait(chrome, css("#login-form"))
    sign_in(chrome, console, "bob", "bob-pw", page=f"/play#{parts.fragment}")
    assert chrome.find_element("id", "sql").get_attribute("value") == sql
    assert chrome.find_element("id", "opt-epsilon").get_attribute("value") == "0.3"
    assert not chrome.find_element("id", "result").is_displayed()
    engine = Engine(store_dsn, database=database)
    try:
        assert Accountant(engine, "bob").recent(10) == []
        chrome.find_element("id", "run").click()  # the analyst's click runs it
        wait(chrome, css("#result-table tbody tr"))
        assert [e.cost.epsilon for e in Accountant(engine, "bob").recent(10)] == [pytest.approx(0.3)]
    finally:
        engine.close()
    # a link opened in a signed-in tab fills the editor too
    other = "SELECT count() AS n FROM visits"
    chrome.get(f"http://127.0.0.1:{console.port}/play#q=" + other.replace(" ", "+"))
    wait(chrome, lambda d: d.find_element("id", "sql").get_attribute("value") == other)
    no_console_errors(chrome)


# -- saved queries ----------------------------------------------------------------------------------------

def saved_names(driver) -> list[str]:
    return [li.get_attribute("data-name") for li in driver.find_elements("css selector", "#saved li[data-name]")]


def test_saved_queries_are_the_analysts_own(console, chrome):
    from selenium.webdriver.common.keys import Keys

    sign_in(chrome, console, "ana", "ana-pw")
    assert chrome.find_element("id", "saved").text == "no saved queries"
    editor, name = chrome.find_element("id", "sql"), chrome.find_element("id", "save-name")
    for label, sql in (("by region", GROUPED), ("adults", "SELECT count() AS n FROM visits WHERE age >= 18")):
        editor.clear()
        editor.send_keys(sql)
        name.send_keys(label)
        chrome.find_element("id", "save").click()
        wait(chrome, lambda d, label=label: label in saved_names(d))
    assert saved_names(chrome) == ["adults", "by region"] and name.get_attribute("value") == ""
    # a bad name: the server's message, nothing saved
    chrome.find_element("id", "save").click()
    wait(chrome, lambda d: d.find_element("id", "saved-error").text == "the name of a saved query must not be empty")
    name.send_keys("x" * 101)
    chrome.find_element("id", "save").click()
    wait(chrome, lambda d: "at most 100 characters" in d.find_element("id", "saved-error").text)
    assert saved_names(chrome) == ["adults", "by region"]
    # loading one puts it into the editor (and clears the message); running it offers its CSV
    editor.clear()
    name.clear()
    chrome.find_element("css selector", "#saved li[data-name='by region'] button.saved-load").click()
    assert editor.get_attribute("value") == GROUPED
    assert chrome.find_element("id", "saved-error").text == ""
    editor.send_keys(Keys.CONTROL, Keys.ENTER)
    wait(chrome, css("#download-csv"))
    shot(chrome, "saved")
    chrome.find_element("css selector", "#saved li[data-name='adults'] button.saved-delete").click()
    wait(chrome, lambda d: saved_names(d) == ["by region"])
    # another analyst, in the same browser, sees none of them
    chrome.find_element("id", "sign-out").click()
    wait(chrome, css("#login-form"))
    sign_in(chrome, console, "bob", "bob-pw")
    wait(chrome, lambda d: d.find_element("id", "saved").text == "no saved queries")
    assert saved_names(chrome) == []
    assert "by region" not in chrome.find_element("tag name", "body").text
    no_console_errors(chrome, allowed=("/console/api/saved",))  # the bad names' 400
