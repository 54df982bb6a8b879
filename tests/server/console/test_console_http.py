"""The web console over HTTP: sign-in, cookie, CSRF, security headers, roles, the DP path, which
chart a release gets, saved queries per analyst, and that no page or endpoint shows an exact
aggregate (docs/console.md)."""

from __future__ import annotations

import json
import re
from functools import partial

import pytest

from dpch.accounting.accountant import Accountant
from dpch.cli.shell import DEFAULT_CONFIRM_SHARE
from dpch.errors import AnalystLocked, QueryFailedAfterCharge
from dpch.server import gateway as gateway_module
from dpch.server.console.analyst import CONFIRM_SHARE
from dpch.server.console.app import ENDPOINTS
from dpch.session import Session
from dpch.store.engine import Engine
from tests.helpers import inject_totality_gap
from tests.server.conftest import USERS
from tests.server.console.console_client import OWNER, Browser
from tests.server.http_post import post

GROUPED = "SELECT region, count() AS n FROM visits GROUP BY region"
STATIC = ["/console/static/console.css", "/console/static/common.js", "/console/static/charts.js",
          "/console/static/completion.js", "/console/static/play.js", "/console/static/admin.js",
          "/console/static/login.js", "/console/static/export.js"]


def ledger(store_dsn: str, database: str, analyst: str) -> list:
    engine = Engine(store_dsn, database=database)
    try:
        return Accountant(engine, analyst).recent(100)
    finally:
        engine.close()


def assert_secure(headers) -> None:
    policy = headers.get("Content-Security-Policy") or ""
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert headers.get("X-Content-Type-Options") == "nosniff"
    assert headers.get("X-Frame-Options") == "DENY"


# -- sign-in and session ---------------------------------------------------------------------------

def test_pages_send_an_unsigned_browser_to_sign_in(browser):
    b = browser(None)
    for page in ("/play", "/admin"):
        status, headers, _ = b.request("GET", page)
        assert status == 303 and headers["Location"] == f"/console/login?next={page}"
        assert_secure(headers)
    status, headers, body = b.request("GET", "/console/login")
    assert status == 200 and b"<script src=\"/console/static/login.js\">" in body
    assert b"<script>" not in body and b"style=" not in body  # no inline script or style: the CSP holds
    assert_secure(headers)


def test_sign_in_sets_a_strict_http_only_cookie(browser):
    b = browser(None)
    status, headers, data = b.request("POST", "/console/api/login", {"user": "ana", "password": "ana-pw"},
                                      headers={"X-Dpch-Console": "1"})
    assert status == 200 and data["analyst"] == "ana" and data["owner"] is False and len(data["csrf"]) >= 32
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain HTTP here; over TLS the cookie is Secure
    assert data["csrf"] not in cookie  # the CSRF token is not the session token
    assert_secure(headers)


def test_wrong_password_and_unknown_user_are_refused_without_a_cookie(browser):
    b = browser(None)
    for user, password in (("ana", "wrong"), ("nobody", "ana-pw"), ("ana", "")):
        status, headers, data = b.request("POST", "/console/api/login", {"user": user, "password": password},
                                          headers={"X-Dpch-Console": "1"})
        assert status == 401 and headers.get("Set-Cookie") is None
        assert "Authentication failed" in data["error"]["message"] and "Traceback" not in json.dumps(data)
    assert b.get("/console/api/session")[0] == 401


def test_sign_in_needs_the_console_header(browser):
    """A cross-site form cannot set a custom header: sign-in without it is refused (login CSRF)."""
    b = browser(None)
    status, headers, _ = b.request("POST", "/console/api/login", {"user": "ana", "password": "ana-pw"})
    assert status == 403 and headers.get("Set-Cookie") is None


def test_every_endpoint_needs_a_session(browser):
    b = browser(None)
    for method, path in [*ENDPOINTS, ("GET", "/console/api/session"), ("POST", "/console/api/logout")]:
        status, headers, data = b.request(method, path, {})
        assert status == 401, path
        assert data["error"]["message"] == "sign in first"
        assert_secure(headers)


def test_a_forged_cookie_is_not_a_session(browser):
    b = browser(None)
    b.cookie = "dpch_console=" + "A" * 43
    assert b.get("/console/api/budget")[0] == 401


def test_sign_out_ends_the_session(browser):
    b = browser()
    status, headers, _ = b.request("POST", "/console/api/logout")
    assert status == 200 and "Max-Age=0" in headers["Set-Cookie"]
    stale = Browser(b.srv)
    assert stale.get("/console/api/session")[0] == 401
    assert b.get("/console/api/budget")[0] == 401


# -- CSRF --------------------------------------------------------------------------------------------

def test_posts_without_or_with_a_wrong_csrf_token_are_refused_and_charge_nothing(browser, store_dsn, database):
    b = browser()
    for headers, csrf in (({}, False), ({"X-Dpch-Csrf": "x" * 43}, False), ({"X-Dpch-Csrf": ""}, False)):
        status, _, data = b.request("POST", "/console/api/query", {"sql": GROUPED}, headers=headers, csrf=csrf)
        assert status == 403 and "CSRF" in data["error"]["message"]
    other = browser("bob", "bob-pw")  # another session's token is wrong for this one
    status, _, _ = b.request("POST", "/console/api/query", {"sql": GROUPED}, headers={"X-Dpch-Csrf": other.csrf},
                             csrf=False)
    assert status == 403
    assert ledger(store_dsn, database, "ana") == []
    assert b.post("/console/api/logout", csrf=False)[0] == 403  # sign-out is a POST too


# -- security headers --------------------------------------------------------------------------------

def test_every_page_file_and_endpoint_carries_the_security_headers(browser):
    owner = browser("owner", "owner-pw")
    for path in ["/play", "/admin", "/console/login", *STATIC, "/console/api/session", "/console/api/schema",
                 "/console/api/budget", "/console/api/history", "/console/api/owner/overview",
                 "/console/api/owner/policies", "/console/api/owner/audits", "/console/static/nothing.js",
                 "/console/api/nothing"]:
        status, headers, _ = owner.request("GET", path)
        assert status in (200, 404), path
        assert_secure(headers)
    status, headers, _ = owner.request("GET", "/console/static/console.css")
    assert headers["Content-Type"].startswith("text/css")
    status, headers, _ = owner.request("GET", "/console/static/play.js")
    assert headers["Content-Type"].startswith("text/javascript")


def test_static_files_are_only_the_packaged_ones(browser):
    b = browser()
    for path in ("/console/static/../app.py", "/console/static/%2e%2e/app.py", "/console/static/app.py",
                 "/console/static/static", "/console/audit/../../etc/passwd"):
        status, _, _ = b.request("GET", path)
        assert status in (403, 404), path


# -- the DP path -------------------------------------------------------------------------------------

def test_a_console_query_is_charged_exactly_as_an_http_query(browser, console, store_dsn, database):
    response, _ = post(console, GROUPED, user="bob", password="bob-pw", params={"dp_epsilon": "0.5"})
    assert response.status == 200
    b = browser()
    status, data = b.post("/console/api/query", {"sql": GROUPED, "options": {"epsilon": 0.5}})
    assert status == 200, data
    via_http, via_console = ledger(store_dsn, database, "bob"), ledger(store_dsn, database, "ana")
    assert len(via_http) == len(via_console) == 1
    h, c = via_http[0], via_console[0]
    assert (c.mechanism, c.status, c.scopes, c.cost, c.worst) == (h.mechanism, h.status, h.scopes, h.cost, h.worst)
    assert data["release_id"] == c.release_id and data["cost"]["epsilon"] == pytest.approx(0.5)
    assert data["budget"]["remaining"]["epsilon"] == pytest.approx(2.5)
    # presentation: ± half-widths from the intervals, a bar chart for the grouped result
    assert data["columns"] == ["region", "n"] and len(data["rows"]) == 4
    for row, half in zip(data["intervals"], data["half_widths"], strict=True):
        assert row[0] is None and half[0] is None
        assert half[1] == pytest.approx((row[1][1] - row[1][0]) / 2)
    assert data["chart"] == {"kind": "bar", "key": 0, "keys": [0], "values": [1]}


def test_time_buckets_are_drawn_as_a_line(browser):
    b = browser()
    status, data = b.post("/console/api/query", {
        "sql": "SELECT toStartOfMonth(visit_date) AS month, count() AS n FROM visits "
               "WHERE visit_date >= '2026-01-01' AND visit_date < '2026-04-01' GROUP BY month"})
    assert status == 200, data
    assert data["chart"] == {"kind": "line", "key": 0, "keys": [0], "values": [1], "series": []}


def test_time_buckets_with_a_second_key_are_one_series_per_value_of_it(browser):
    """A date plus a second key: a line over the date per value of the other key (wherever the date
    key stands), decided from the columns' types."""
    b = browser()
    for sql, chart in (
            ("SELECT toStartOfMonth(visit_date) AS month, region, count() AS n FROM visits "
             "WHERE visit_date >= '2026-01-01' AND visit_date < '2026-04-01' GROUP BY month, region",
             {"kind": "line", "key": 0, "keys": [0, 1], "values": [2], "series": [1]}),
            ("SELECT region, device, toStartOfMonth(visit_date) AS month, count() AS n, avg(spend) AS s "
             "FROM visits WHERE visit_date >= '2026-01-01' AND visit_date < '2026-03-01' "
             "GROUP BY region, device, month",
             {"kind": "line", "key": 2, "keys": [0, 1, 2], "values": [3, 4], "series": [0, 1]}),
            ("SELECT region, device, count() AS n FROM visits GROUP BY region, device",
             {"kind": "bar", "key": 0, "keys": [0, 1], "values": [2]})):
        status, data = b.post("/console/api/query", {"sql": sql, "options": {"epsilon": 0.2}})
        assert status == 200, data
        assert data["chart"] == chart, sql


def test_explain_is_free_and_asks_above_the_shells_share(browser, store_dsn, database):
    assert CONFIRM_SHARE == DEFAULT_CONFIRM_SHARE
    b = browser()
    status, cheap = b.post("/console/api/explain", {"sql": GROUPED, "options": {"epsilon": 0.3}})
    assert status == 200 and cheap["admissible"] and cheap["confirm"] is False
    assert cheap["cost"]["epsilon"] == pytest.approx(0.3) and cheap["share"] == pytest.approx(0.1)
    assert cheap["measures"] and cheap["measures"][0]["half_width"] > 0 and cheap["mechanism"]
    status, dear = b.post("/console/api/explain", {"sql": GROUPED, "options": {"epsilon": 1.0}})
    assert status == 200 and dear["confirm"] is True and dear["share"] == pytest.approx(1 / 3)
    status, refused = b.post("/console/api/explain", {"sql": GROUPED, "options": {"epsilon": 5}})
    assert status == 200 and refused["admissible"] is False and refused["confirm"] is False
    assert ledger(store_dsn, database, "ana") == []


def test_accuracy_first_and_refine_show_their_cost(browser, store_dsn, database, monkeypatch):
    monkeypatch.setenv("DPCH_FILTER", "zcdp_bm")  # charges the realized cost (as test_cache_and_remote does)
    b = browser()
    status, first = b.post("/console/api/query", {
        "sql": "SELECT count() AS n FROM visits SETTINGS dp_accuracy = 400, dp_max_epsilon = 2"})
    assert status == 200, first
    assert first["accuracy_text"] and first["cost"]["epsilon"] > 0
    status, refined = b.post("/console/api/refine", {"release_id": first["release_id"]})
    assert status == 200, refined
    assert refined["cost"]["rho"] > 0 and refined["half_widths"][0][0] < first["half_widths"][0][0]
    assert refined["accuracy_text"]
    status, history = b.get("/console/api/history")
    assert [(r["sql"], r["mechanism"]) for r in history["releases"]] == [  # newest first
        (f"refine {first['release_id']}", "brownian-refine"),
        ("SELECT count() AS n FROM visits SETTINGS dp_accuracy = 400, dp_max_epsilon = 2", "gaussian")]


def test_errors_are_short_and_charge_nothing(browser, store_dsn, database):
    b = browser()
    for body in ({"sql": "SELECT user_id FROM visits"}, {"sql": "SELECT count( FROM"},
                 {"sql": "SELECT count() FROM unannotated"}, {"sql": GROUPED, "options": {"epsilon": 99}},
                 {"sql": 5}, {"sql": GROUPED, "options": {"nonsense": [1]}}, b"not json"):
        status, data = b.post("/console/api/query", body)
        assert 400 <= status < 500, (body, data)
        text = json.dumps(data)
        assert "Traceback" not in text and "sqlglot" not in text and len(data["error"]["message"]) < 600
    assert ledger(store_dsn, database, "ana") == []


# -- history, budget, and who sees what -------------------------------------------------------------

def test_an_analyst_sees_only_its_own_history_and_budget(browser):
    ana, bob = browser(), browser("bob", "bob-pw")
    assert ana.post("/console/api/query", {"sql": GROUPED, "options": {"epsilon": 0.4}})[0] == 200
    status, mine = ana.get("/console/api/history")
    assert status == 200 and mine["analyst"] == "ana" and len(mine["releases"]) == 1
    assert mine["releases"][0]["sql"] == GROUPED and mine["releases"][0]["epsilon"] == pytest.approx(0.4)
    status, theirs = bob.get("/console/api/history", analyst="ana")  # no parameter names another analyst
    assert status == 200 and theirs["analyst"] == "bob" and theirs["releases"] == []
    status, budget = bob.get("/console/api/budget", analyst="ana")
    assert budget["analyst"] == "bob" and budget["spent"]["epsilon"] == 0 and budget["series"] == []
    status, budget = ana.get("/console/api/budget")
    assert budget["spent"]["epsilon"] == pytest.approx(0.4) and len(budget["series"]) == 1
    assert budget["series"][0]["epsilon"] == pytest.approx(0.4)


def test_schema_lists_the_policys_tables_and_columns(browser):
    status, data = browser().get("/console/api/schema")
    assert status == 200
    tables = {t["name"]: t for t in data["tables"]}
    assert "visits" in tables and "unannotated" not in tables
    assert {"region", "spend", "visit_date"} <= {c["name"] for c in tables["visits"]["columns"]}


def test_a_non_owner_gets_403_on_the_owner_view_and_its_endpoints(browser):
    b = browser()
    status, headers, body = b.request("GET", "/admin")
    assert status == 403 and b"data owners" in body
    assert_secure(headers)
    for method, path in ENDPOINTS:
        if "/owner/" in path:
            status, data = (b.get(path) if method == "GET" else b.post(path, {"analyst": "bob", "epsilon": 9}))
            assert status == 403, path


# -- the owner view ----------------------------------------------------------------------------------

def test_owner_sees_budgets_spend_and_releases_and_sets_a_budget(browser, store_dsn, database):
    ana = browser()
    assert ana.post("/console/api/query", {"sql": GROUPED, "options": {"epsilon": 0.5}})[0] == 200
    owner = browser("owner", "owner-pw")
    status, _, page = owner.request("GET", "/admin")
    assert status == 200 and b"/console/static/admin.js" in page
    status, data = owner.get("/console/api/owner/overview")
    assert status == 200
    db = data["databases"][0]
    analysts = {a["analyst"]: a for a in db["analysts"]}
    assert {"ana", "bob", "bi", "dora"} <= set(analysts)
    assert analysts["ana"]["spent"]["epsilon"] == pytest.approx(0.5) and len(analysts["ana"]["series"]) == 1
    assert db["datasets"][f"{database}.visits"]["releases"] == 1
    assert [r["analyst"] for r in db["recent"]] == ["ana"]
    status, result = owner.post("/console/api/owner/budget", {"analyst": "bob", "epsilon": 5, "delta": 1e-6})
    assert status == 200, result
    status, result = owner.post("/console/api/owner/budget", {"analyst": "bob", "dataset": "visits", "epsilon": 1})
    assert status == 200 and result["dataset"] == f"{database}.visits"
    engine = Engine(store_dsn, database=database)
    try:
        status_bob = Accountant(engine, "bob").status(recent=0)
    finally:
        engine.close()
    assert status_bob.budget.epsilon == 5 and status_bob.datasets[0].budget.epsilon == 1
    status, bad = owner.post("/console/api/owner/budget", {"analyst": "bob", "epsilon": -1})
    assert status == 400 and "epsilon" in bad["error"]["message"]


def test_owner_unlocks_an_analyst_locked_by_the_tripwire(browser, monkeypatch):
    ana = browser()
    inject_totality_gap(monkeypatch)
    status, data = ana.post("/console/api/query", {"sql": "SELECT count(*) FROM visits WHERE age > 30",
                                                   "options": {"epsilon": 0.01}})
    assert status == 500 and data["error"]["message"] == QueryFailedAfterCharge.MESSAGE
    monkeypatch.undo()
    status, data = ana.post("/console/api/query", {"sql": GROUPED})
    assert status == 403 and data["error"]["kind"] == AnalystLocked.kind
    status, budget = ana.get("/console/api/budget")
    assert budget["locked"] and "reason" not in budget["locked"]  # the reason is the owner's
    owner = browser("owner", "owner-pw")
    status, overview = owner.get("/console/api/owner/overview")
    locked = overview["databases"][0]["locked"]
    assert [lock["analyst"] for lock in locked] == ["ana"] and "reason" in locked[0]
    status, result = owner.post("/console/api/owner/unlock", {"analyst": "ana"})
    assert status == 200 and result["unlocked"] is True
    assert ana.post("/console/api/query", {"sql": GROUPED})[0] == 200
    assert owner.post("/console/api/owner/unlock", {"analyst": "ana"})[1]["unlocked"] is False


def test_owner_sees_policies_and_audit_reports(browser, monkeypatch, tmp_path):
    owner = browser("owner", "owner-pw")
    status, policies = owner.get("/console/api/owner/policies")
    tables = {t["table"]: t for t in policies["databases"][0]["tables"]}
    assert tables["visits"]["privacy_unit"] == "user_id" and "bounds" in json.dumps(tables["visits"]["columns"])
    status, audits = owner.get("/console/api/owner/audits")
    assert audits["reports"] == [] and "dpch audit" in audits["how"]
    (tmp_path / "audit.html").write_text("<html><body><svg></svg>report</body></html>")
    (tmp_path / "notes.txt").write_text("not a report")
    monkeypatch.setenv("DPCH_AUDIT_REPORTS", str(tmp_path))
    status, audits = owner.get("/console/api/owner/audits")
    assert [r["name"] for r in audits["reports"]] == ["audit.html"]
    status, headers, body = owner.request("GET", audits["reports"][0]["href"])
    assert status == 200 and b"report" in body and "script-src" not in headers["Content-Security-Policy"]
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert owner.request("GET", "/console/audit/notes.txt")[0] == 404
    assert browser().request("GET", "/console/audit/audit.html")[0] == 403


# -- no exact aggregate anywhere ---------------------------------------------------------------------

#: a date or time (the ledger's times, the policy's date bounds): its digits are not a released number
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ][0-9:.+]*)?$")
#: a number standing alone in a text (not digits inside an id, a name or a date)
_NUMBER = re.compile(r"(?<![\w.:-])-?\d+(?:\.\d+)?(?![\w.:-])")


def _numbers(value) -> list[float]:
    """Every number in a JSON response: its numbers, and the numbers written in its texts."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    if isinstance(value, str) and not _DATE.match(value):
        return [float(m) for m in _NUMBER.findall(value.replace(",", ""))]
    return []


def test_no_response_carries_an_exact_aggregate(browser, store_dsn, database, monkeypatch):
    """The exact per-region counts and sums (raw, and with the contribution cap the release uses),
    read from chdb directly, appear in no response of either role; the noisy ones differ.

    The gateway's sessions draw noise from a fixed seed here, so the released numbers are the same
    on every run (released counts are integers, so at an unlucky seed a noisy count or its interval's
    end could equal another region's exact count; at this seed none does)."""
    monkeypatch.setattr(gateway_module, "Session", partial(Session, seed=12345))
    engine = Engine(store_dsn, database=database)
    try:
        table = engine.table("visits")
        raw = engine.query_rows(f"SELECT region, count(), round(sum(spend), 2) FROM {table} GROUP BY region")
        capped = engine.query_rows(
            f"SELECT region, count(), round(sum(least(greatest(spend, 0), 500)), 2) FROM "
            f"(SELECT * FROM {table} LIMIT 10 BY user_id) GROUP BY region")
    finally:
        engine.close()
    exact = {float(v) for row in raw + capped for v in row[1:]}
    assert all(v > 100 for v in exact)  # large enough that no cost, count of releases or id digit matches
    ana, owner = browser(), browser("owner", "owner-pw")
    responses = [ana.post("/console/api/query", {"sql": "SELECT region, count() AS n, sum(spend) AS s FROM visits "
                                                        "GROUP BY region", "options": {"epsilon": 1}})[1],
                 ana.post("/console/api/explain", {"sql": GROUPED})[1],
                 ana.get("/console/api/history")[1], ana.get("/console/api/budget")[1],
                 ana.get("/console/api/schema")[1],
                 owner.get("/console/api/owner/overview")[1], owner.get("/console/api/owner/policies")[1]]
    released = responses[0]
    assert len(released["rows"]) == 4
    exact_by_region = {r[0]: (float(r[1]), float(r[2])) for r in capped}
    for region, n, total in released["rows"]:  # each noisy value differs from its own exact one
        assert n != exact_by_region[region][0] and round(total, 2) != exact_by_region[region][1]
    for response in responses:
        text = json.dumps(response)
        # a noisy value rounded could only equal an exact one by chance: none does at this run's noise
        # (continuous noise: the chance that a released float equals an integer count is 0)
        found = exact & set(_numbers(response))
        assert not found, (text[:300], found)


def test_owner_flag_in_the_server_config():
    from dpch.errors import ConfigError
    from dpch.server.config import ServerConfig

    config = ServerConfig.from_mapping({"users": {"o": {"password": "p", "owner": True}, "a": {"password": "p"}}})
    assert config.users["o"].owner is True and config.users["a"].owner is False
    with pytest.raises(ConfigError, match="owner must be true or false"):
        ServerConfig.from_mapping({"users": {"o": {"password": "p", "owner": "yes"}}})


def test_a_partition_selection_query_shows_its_mechanism_and_cost(browser):
    """Keys from the data (a private column) are released by partition selection: the release says
    so and what it cost, like any other, and its keys are drawn as bars."""
    b = browser()
    status, data = b.post("/console/api/query", {
        "sql": "SELECT converted, count() AS n FROM visits GROUP BY converted",
        "options": {"epsilon": 1, "delta": 1e-7}})
    assert status == 200, data
    assert data["cost"]["epsilon"] == pytest.approx(1) and data["cost"]["delta"] > 0
    assert any("partition selection" in note for note in data["notes"])
    assert data["budget"]["remaining"]["epsilon"] == pytest.approx(2)
    assert all(h[0] is None and h[1] > 0 for h in data["half_widths"])


def test_repeated_failed_sign_ins_are_throttled_per_user_name(browser):
    from dpch.server.console.security import MAX_FAILURES

    b = browser(None)

    def attempt(user: str, password: str) -> int:
        return b.request("POST", "/console/api/login", {"user": user, "password": password},
                         headers={"X-Dpch-Console": "1"})[0]

    assert [attempt("ana", f"guess{i}") for i in range(MAX_FAILURES)] == [401] * MAX_FAILURES
    assert attempt("ana", "ana-pw") == 429  # even the right password, until the window passes
    assert attempt("bob", "bob-pw") == 200  # another name is not affected


def test_sign_in_throttle_window():
    from dpch.server.console.security import FAILURE_WINDOW, MAX_FAILURES, SignInThrottle

    now = [1000.0]
    throttle = SignInThrottle(clock=lambda: now[0])
    for _ in range(MAX_FAILURES - 1):
        throttle.failed("ana")
    assert throttle.allowed("ana")
    throttle.failed("ana")
    assert not throttle.allowed("ana") and throttle.allowed("bob")
    now[0] += FAILURE_WINDOW + 1
    assert throttle.allowed("ana")
    throttle.failed("ana")
    throttle.succeeded("ana")
    assert throttle.allowed("ana")


def test_the_console_shares_the_release_cache_with_http(serve, store_dsn, database):
    """With the cache on, a console query identical to an HTTP one a moment before is the same
    release, served free: one ledger row (the same cache key, the same Gateway.answer)."""
    srv = serve(users={**USERS, **OWNER}, cache_ttl=60)
    assert post(srv, GROUPED, params={"dp_epsilon": "0.5"})[0].status == 200
    b = Browser(srv)
    b.sign_in()
    status, data = b.post("/console/api/query", {"sql": GROUPED, "options": {"epsilon": 0.5}})
    assert status == 200 and data["cached"] is True and data["cost"]["epsilon"] == 0
    assert len(ledger(store_dsn, database, "ana")) == 1


def test_selection_queries_show_what_they_cost(browser, console):
    """Top-k and a watch through the console: the picked keys (no interval, no chart value), the
    mechanism and the cost; a watch's answer is 'above' or 'below' and advances the watch."""
    b = browser()
    status, data = b.post("/console/api/query", {
        "sql": "SELECT region FROM visits GROUP BY region ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top'",
        "options": {"epsilon": 0.5}})
    assert status == 200, data
    assert len(data["rows"]) == 2 and data["mechanism"] == "top-k (exponential (gumbel))"
    assert data["cost"]["epsilon"] == pytest.approx(0.5) and data["chart"] is None
    assert any("top 2 of 4 keys" in note for note in data["notes"])
    gateway = console.gateway
    session = gateway.session(gateway.authenticate("ana", "ana-pw"), None)
    session.watch_create("busy", epsilon=1.0, delta=1e-6, threshold=1e6, upper=2e6, tables="visits")
    status, data = b.post("/console/api/query", {"sql": "SELECT count() AS n FROM visits SETTINGS dp_watch = 'busy'"})
    assert status == 200, data
    assert data["rows"] == [["below"]] and session.watch_state("busy").position == 1


# -- saved queries -----------------------------------------------------------------------------------

def saved_rows(store_dsn: str, database: str) -> list[tuple]:
    """The rows of dpch's table of saved queries, read from the store directly."""
    from dpch.server.console.saved import SAVED_TABLE

    engine = Engine(store_dsn, database=database)
    try:
        return engine.query_rows(
            f"SELECT analyst, name, sql, deleted FROM {engine.table(SAVED_TABLE)} ORDER BY version")
    finally:
        engine.close()


def test_saved_queries_are_saved_listed_replaced_and_deleted_per_analyst(browser, store_dsn, database):
    ana, bob, bi = browser(), browser("bob", "bob-pw"), browser("grafana", "bi-pw")
    status, data = ana.get("/console/api/saved")
    assert status == 200 and data == {"analyst": "ana", "queries": []}
    status, data = ana.post("/console/api/saved", {"name": "  by region ", "sql": GROUPED + "\n"})
    assert status == 200, data
    assert data["saved"] == "by region"  # spaces around a name are trimmed
    assert [(q["name"], q["sql"], q["database"]) for q in data["queries"]] == [("by region", GROUPED, None)]
    status, data = ana.post("/console/api/saved", {"name": "average", "sql": "SELECT avg(spend) FROM visits",
                                                   "database": database})
    assert status == 200 and [q["name"] for q in data["queries"]] == ["average", "by region"]
    assert data["queries"][0]["database"] == database
    # the same name again replaces the query
    status, data = ana.post("/console/api/saved", {"name": "average", "sql": "SELECT avg(age) FROM visits"})
    assert [(q["name"], q["sql"]) for q in data["queries"]] == [
        ("average", "SELECT avg(age) FROM visits"), ("by region", GROUPED)]
    # another analyst sees none of them, whatever it asks, and cannot delete them
    assert bob.get("/console/api/saved") == (200, {"analyst": "bob", "queries": []})
    assert bob.get("/console/api/saved", analyst="ana") == (200, {"analyst": "bob", "queries": []})
    assert bob.get("/console/api/saved", name="by region") == (200, {"analyst": "bob", "queries": []})
    status, data = bob.post("/console/api/saved/delete", {"name": "by region", "analyst": "ana"})
    assert status == 404 and data["error"]["message"] == "you have no saved query named 'by region'"
    assert bi.get("/console/api/saved")[1]["queries"] == []  # user grafana is analyst bi
    status, data = bob.post("/console/api/saved", {"name": "by region", "sql": "SELECT count() FROM visits"})
    assert status == 200 and [q["sql"] for q in data["queries"]] == ["SELECT count() FROM visits"]
    assert [q["sql"] for q in ana.get("/console/api/saved")[1]["queries"]] == [
        "SELECT avg(age) FROM visits", GROUPED]
    # deleting
    status, data = ana.post("/console/api/saved/delete", {"name": "average"})
    assert status == 200 and data["deleted"] == "average" and [q["name"] for q in data["queries"]] == ["by region"]
    assert ana.post("/console/api/saved/delete", {"name": "average"})[0] == 404  # gone
    assert [q["sql"] for q in bob.get("/console/api/saved")[1]["queries"]] == ["SELECT count() FROM visits"]
    # saved under the analyst, in dpch's own table; a saved query is SQL text, never a result
    rows = saved_rows(store_dsn, database)
    assert [(r[0], r[1], r[3]) for r in rows] == [("ana", "by region", 0), ("ana", "average", 0), ("ana", "average", 0),
                                                  ("bob", "by region", 0), ("ana", "average", 1)]
    engine = Engine(store_dsn, database=database)
    try:
        from dpch.server.console.saved import SAVED_TABLE

        assert [c.name for c in engine.columns(SAVED_TABLE)] == [
            "analyst", "name", "sql", "database", "time", "version", "deleted"]
    finally:
        engine.close()
    assert ledger(store_dsn, database, "ana") == []  # saving runs nothing


def test_saved_queries_outlive_the_server(serve, store_dsn, database):
    """Kept in the store, not in the server's memory: a restarted gateway lists them."""
    first = Browser(serve(users={**USERS, **OWNER}, cache_ttl=0))
    first.sign_in()
    assert first.post("/console/api/saved", {"name": "kept", "sql": GROUPED})[0] == 200
    first.srv.stop()
    second = Browser(serve(users={**USERS, **OWNER}, cache_ttl=0))
    second.sign_in()
    assert [q["name"] for q in second.get("/console/api/saved")[1]["queries"]] == ["kept"]


def test_saving_a_query_needs_the_csrf_token(browser, store_dsn, database):
    b = browser()
    status, _, data = b.request("POST", "/console/api/saved", {"name": "x", "sql": GROUPED}, csrf=False)
    assert status == 403 and "CSRF" in data["error"]["message"]
    status, _, data = b.request("POST", "/console/api/saved/delete", {"name": "x"}, csrf=False)
    assert status == 403
    assert b.get("/console/api/saved")[1]["queries"] == []


def test_bad_saved_queries_are_refused_with_a_clear_message(browser, monkeypatch):
    from dpch.server.console import saved

    b = browser()
    for body, status, message in (
            ({"sql": GROUPED}, 400, "a saved query needs a name"),
            ({"name": "", "sql": GROUPED}, 400, "the name of a saved query must not be empty"),
            ({"name": "   ", "sql": GROUPED}, 400, "the name of a saved query must not be empty"),
            ({"name": 7, "sql": GROUPED}, 400, "the name of a saved query must be a string"),
            ({"name": "x" * 101, "sql": GROUPED}, 400,
             "the name of a saved query must be at most 100 characters (this one has 101)"),
            ({"name": "tab\there", "sql": GROUPED}, 400,
             "the name of a saved query must not contain control characters"),
            ({"name": "x"}, 400, "the field 'sql' is required"),
            ({"name": "x", "sql": "  \n "}, 400, "there is no SQL to save: write a query first"),
            ({"name": "x", "sql": "S" * 100_001}, 413, "the field 'sql' is longer than 100000 characters"),
            ({"name": "x", "sql": GROUPED, "database": "nowhere"}, 404, "Database nowhere does not exist")):
        got, data = b.post("/console/api/saved", body)
        assert (got, data["error"]["message"][:len(message)]) == (status, message), body
    assert b.post("/console/api/saved/delete", {"name": ""})[1]["error"]["message"] == (
        "the name of a saved query must not be empty")
    assert b.get("/console/api/saved")[1]["queries"] == []
    assert b.post("/console/api/saved", {"name": "x" * 100, "sql": GROUPED})[0] == 200  # the longest name
    monkeypatch.setattr(saved, "MAX_SAVED", 2)
    assert b.post("/console/api/saved", {"name": "second", "sql": GROUPED})[0] == 200
    status, data = b.post("/console/api/saved", {"name": "third", "sql": GROUPED})
    assert status == 400 and data["error"]["message"] == "you have 2 saved queries, the most kept; delete one first"
    assert b.post("/console/api/saved", {"name": "second", "sql": "SELECT count() FROM visits"})[0] == 200  # replacing
