"""Checks that two versions of tests/sql/fixtures/emitted_sql.json differ only in the cap's ORDER BY.

Usage: python tools/emit_fixture_diff.py OLD.json NEW.json
(e.g. ``git show HEAD~1:tests/sql/fixtures/emitted_sql.json > /tmp/old.json``).

Every ``ORDER BY … LIMIT k BY`` (the per-unit cap; the group limit's order too) is replaced by one
token in both texts; anything else that differs is printed and the exit status is 1. Parsed with
sqlglot, so the comparison is of the trees, not of spacing.
"""

from __future__ import annotations

import json
import sys

import sqlglot
from sqlglot import exp


def _normalized(sql: str) -> str:
    tree = sqlglot.parse_one(sql.replace("{db}", "db"), read="clickhouse")
    for select in tree.find_all(exp.Select):
        limit = select.args.get("limit")
        if select.args.get("order") is not None and limit is not None and limit.args.get("expressions"):
            select.set("order", exp.Order(expressions=[exp.Ordered(this=exp.column("CAP_ORDER"))]))
    return tree.sql("clickhouse")


def main(old_path: str, new_path: str) -> int:
    old, new = json.load(open(old_path)), json.load(open(new_path))
    problems = [f"cases differ: {sorted(set(old) ^ set(new))}"] if set(old) != set(new) else []
    changed = 0
    for case in sorted(set(old) & set(new)):
        for field in sorted(set(old[case]) | set(new[case])):
            a, b = old[case].get(field), new[case].get(field)
            if a == b:
                continue
            changed += 1
            if a is None or b is None or _normalized(a) != _normalized(b):
                problems.append(f"{case} [{field}]: differs outside the cap's ORDER BY")
    print(f"{changed} texts changed; {len(problems)} differ outside the cap's ORDER BY")
    for p in problems:
        print(" ", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
