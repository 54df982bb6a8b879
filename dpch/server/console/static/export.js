// CSV of a release as the page received it: after each noisy column c, c_lo and c_hi with the bounds of
// its interval (the shape of Release.interval_table() in Python and of dp_intervals = 'columns').
// Made in the browser from the release shown: nothing is asked of the server, nothing is charged.
"use strict";
const Export = (function () {
  /** Indexes of the columns that carry an interval in some row (the noisy statistics). */
  function noisy(release) {
    const out = new Set();
    for (const row of release.intervals || []) {
      row.forEach((iv, j) => { if (iv !== null && iv !== undefined) out.add(j); });
    }
    return out;
  }

  /** { names, rows }: the release's columns with c_lo, c_hi after each noisy column c. */
  function table(release) {
    const bounded = noisy(release);
    const names = [];
    release.columns.forEach((c, j) => { names.push(...(bounded.has(j) ? [c, `${c}_lo`, `${c}_hi`] : [c])); });
    const rows = release.rows.map((row, i) => {
      const line = [];
      row.forEach((value, j) => {
        line.push(value);
        if (bounded.has(j)) {
          const iv = release.intervals[i][j];
          line.push(iv ? iv[0] : null, iv ? iv[1] : null);
        }
      });
      return line;
    });
    return { names, rows };
  }

  /** One CSV field (RFC 4180): NULL is empty, an empty text is "", quotes where needed. */
  function field(value) {
    if (value === null || value === undefined) return "";
    const textOf = typeof value === "object" ? JSON.stringify(value) : String(value);
    return textOf === "" || /[",\r\n]/.test(textOf) ? `"${textOf.replace(/"/g, '""')}"` : textOf;
  }

  /** The CSV text: a header of names, then one line per row (CRLF line ends). */
  function csv(release) {
    const { names, rows } = table(release);
    return [names, ...rows].map((row) => row.map(field).join(",")).join("\r\n") + "\r\n";
  }

  function fileName(release) {
    return `dpch-release-${String(release.release_id || "answer").slice(0, 8)}.csv`;
  }

  return { table, csv, fileName };
})();
