"""Messages a BI user can act on (issue 15, part 5): every refusal a remote client receives is short,
in ClickHouse's or dpch's words — no sqlglot class or token names, no raw ClickHouse exception, no
traceback — and a hint names something a remote user can do in SQL, not only a dpch command."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from sqlglot import exp

from tests.server.http_post import post as http_post

CORPUS = tomllib.loads((Path(__file__).parents[2] / "dpch" / "fixtures" / "corpus.toml").read_text())
#: the corpus's refusals that read only the gateway's table (visits), and bad input of other kinds
REFUSED = [c["sql"] for c in CORPUS["rejected"] if re.search(r"\bFROM visits\b", c["sql"])
           and not re.search(r"\b(people|regions|FORMAT)\b", c["sql"])] + [  # FORMAT: the gateway's to serve
    "SELECT count( FROM visits",
    "SELECT $__timeInterval(visit_date) AS t, count() FROM visits GROUP BY t",
    "SELECT toStartOfInterval(visit_date, INTERVAL 5 second) AS t, count() FROM visits GROUP BY t",
    "SELECT count() FROM visits WHERE visit_date > toDate('not a date')",
    "SELECT count() FROM nowhere",
    "SELECT count() FROM visits WHERE nosuchcolumn = 1",
    "SELECT * FROM visits",
    "SELECT count() FROM system.parts",
    "INSERT INTO visits VALUES (1)",
    "SELECT count() FROM visits WHERE match(region, '(')",
    "SELECT count() FROM visits WHERE region LIKE 'a\\'",
    "SELECT count() FROM visits WHERE age = 'x'",
    "SELECT sum(region) FROM visits",
]
#: sqlglot's node classes whose names are not also ordinary words or ClickHouse names
_CLASSES = {name for name, cls in vars(exp).items() if isinstance(cls, type) and issubclass(cls, exp.Expr)
            and sum(ch.isupper() for ch in name) >= 2 and name not in {"DateTime", "DataType", "ILike", "CTE"}}
#: ``Code: N. DB::Exception: dpch: …`` is ClickHouse's error framing, which clients parse; what must not
#: appear is ClickHouse's own text about the emitted query (its scope dump, stack) or Python's
_RAW = re.compile(r"In scope SELECT|Stack trace|e\.what\(\)|Traceback|sqlglot|<class |TokenType|\bexp\.[A-Z]|"
                  r"__rows|__unit|DB::Exception: (?!dpch)")


def post(srv, sql: str) -> tuple[int, str]:
    response, data = http_post(srv, sql)
    return response.status, data.decode()


def problems(status: int, body: str) -> list[str]:
    """What is wrong with a refusal's answer (empty: nothing)."""
    found = []
    if status == 200:
        found.append("accepted")
    if len(body) >= 1200:
        found.append(f"{len(body)} characters")
    if _RAW.search(body):
        found.append("a raw exception or parser name")
    if "internal error" in body or status >= 500:
        found.append("an internal error, not a refusal the user can act on")
    named = sorted(c for c in _CLASSES if re.search(rf"\b{c}\b", body))
    if named:
        found.append(f"sqlglot class names {named}")
    if "dpch policy show" in body and not re.search(r"SHOW TABLES|DESCRIBE|SELECT name", body):
        found.append("a dpch command as the only hint")
    return found


def test_every_refusal_is_short_and_in_the_users_words(serve):
    srv = serve()
    bad = {}
    for sql in REFUSED:
        status, body = post(srv, sql)
        if problems(status, body):
            bad[sql] = (problems(status, body), body)
    assert not bad, "\n".join(f"{sql}\n  {found}\n  {body}" for sql, (found, body) in bad.items())


def test_the_checks_catch_a_raw_message():
    """Negative control: the checks find what they are meant to find."""
    assert problems(500, "Code: 62. DB::Exception: Syntax error: In scope SELECT …")
    assert problems(400, "unexpected TimestampTrunc node")
    assert problems(400, "(hint: see `dpch policy show`)")
    assert problems(200, "")
    assert problems(500, "Code: 1002. DB::Exception: dpch: internal error (DatabaseError).")
    assert not problems(400, "Code: 497. dpch: toDate() is not allowed (hint: SHOW TABLES lists them)")
