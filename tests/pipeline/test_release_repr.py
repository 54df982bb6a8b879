"""Release's notebook (HTML) and text reprs, and to_pandas() keeping the intervals."""

from __future__ import annotations

import dataclasses
import html
import math
import re

import pytest

from dpch.pipeline.report import Release, estimate_text

SQL = "SELECT region, count(*) AS n, avg(x) AS m FROM t GROUP BY region ORDER BY region"


@pytest.fixture
def release(session) -> Release:
    return session.query(SQL)


def test_html_repr_shows_each_noisy_cell_with_its_half_width_and_the_cost(release):
    out = release._repr_html_()
    assert out.startswith("<table") and out.endswith("</table>")
    cells = re.findall(r"<td[^>]*>(.*?)</td>", out)
    n_cols = len(release.columns)
    body = [cells[i * n_cols:(i + 1) * n_cols] for i in range(len(release.rows))]
    for row, ivs, shown in zip(release.rows, release.intervals, body, strict=True):
        assert shown[0] == row[0]  # the key: plain, exact
        lo, hi = ivs[1]
        assert html.unescape(shown[1]) == estimate_text(row[1], (lo, hi))
        assert "±" in html.unescape(shown[1]) or "[" in shown[1]
    footer = html.unescape(cells[-1])
    assert f"ε {release.cost.epsilon:.4g}" in footer and release.mechanism in footer, footer


def test_half_width_rounding_matches_the_interval():
    # symmetric intervals: about two significant digits of the half-width
    assert estimate_text(100.123, (90.0, 110.246)) == "100 ± 10"
    assert estimate_text(100.123, (99.1107, 101.1353)) == "100.1 ± 1.0"
    # not symmetric (a clipped average): both bounds shown
    assert estimate_text(1.0, (0.0, 5.0)) == "1.0 [0.0, 5.0]"


def test_html_escapes_keys_column_names_and_notes(release):
    evil = dataclasses.replace(
        release, columns=["<script>k</script>", *release.columns[1:]],
        rows=[("<img src=x onerror=alert(1)>&", *release.rows[0][1:])], intervals=[release.intervals[0]],
        notes=["a <b>note</b>"])
    out = evil._repr_html_()
    assert "<script>" not in out and "<img" not in out and "<b>note" not in out
    assert "&lt;script&gt;k&lt;/script&gt;" in out and "&lt;img src=x onerror=alert(1)&gt;&amp;" in out
    # negative control: without escaping the tag would be there verbatim
    assert "<img" in str(evil.rows[0][0])


def test_text_repr_lists_rows_up_to_the_limit_then_counts_the_rest(release):
    text = repr(release)
    lines = text.splitlines()
    assert lines[0].startswith(f"Release: {len(release.rows)} rows")
    assert len(lines) == 1 + len(release.rows) + 1
    assert lines[1].startswith(f"  region={release.rows[0][0]}, n=")
    assert lines[-1].startswith(f"cost ε {release.cost.epsilon:.4g}")
    assert str(release) == text
    many = dataclasses.replace(release, rows=release.rows * 10, intervals=release.intervals * 10)
    assert len(many.rows) > Release.REPR_ROWS
    lines = repr(many).splitlines()
    assert len(lines) == 1 + Release.REPR_ROWS + 2
    assert lines[-2] == f"  … {len(many.rows) - Release.REPR_ROWS} more rows"
    html_out = many._repr_html_()
    assert f"… {len(many.rows) - Release.REPR_ROWS} more rows" in html_out
    assert html_out.count("<tr>") == 1 + Release.REPR_ROWS + 1 + 1  # head, rows, "more", footer


def test_to_pandas_keeps_the_intervals_as_lo_hi_columns(release):
    df = release.to_pandas()
    assert list(df.columns) == ["region", "n", "n_lo", "n_hi", "m", "m_lo", "m_hi"]
    for i, (row, ivs) in enumerate(zip(release.rows, release.intervals, strict=True)):
        assert df["region"][i] == row[0]
        for j, name in ((1, "n"), (2, "m")):
            assert df[name][i] == row[j]
            assert (df[f"{name}_lo"][i], df[f"{name}_hi"][i]) == ivs[j]
            assert df[f"{name}_lo"][i] <= df[f"{name}_hi"][i]
    assert df.attrs["epsilon"] == release.cost.epsilon and df.attrs["mechanism"] == release.mechanism
    assert math.isclose(df.attrs["confidence"], release.confidence)


def test_to_pandas_of_a_release_without_noisy_columns_adds_no_bounds(session):
    explain = session.query("EXPLAIN DP SELECT count(*) FROM t")
    df = explain.to_pandas()
    assert list(df.columns) == ["explain"] and len(df) == len(explain.rows)
