// /play: the analyst's editor, EXPLAIN DP before running, results with ± and error bars (and their CSV),
// budget, history, saved queries, and the query in the page's URL (its fragment) to share it.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const { el, clear, append, api, num, cost, valueFor } = DP;
  const MAX_TABLE_ROWS = 1000;  // rows shown in the table
  const MAX_CHART_ROWS = 200;   // groups drawn in a chart
  const MAX_SERIES = 10;        // lines drawn in one time chart (one per value of the other keys)
  let schema = { tables: [] };
  let lastRelease = null;
  let csvUrl = null;            // the blob: URL of the shown release's CSV

  function database() { return $("database").value || undefined; }

  function queryOptions() {
    const options = {};
    const eps = parseFloat($("opt-epsilon").value);
    if (eps > 0) options.epsilon = eps;
    const conf = parseFloat($("opt-confidence").value);
    if (conf > 0) options.confidence = conf;
    return options;
  }

  function request() { return { sql: $("sql").value, database: database(), options: queryOptions() }; }

  function hideError() { $("error").hidden = true; }

  function fail(error) { DP.showError($("error"), error); }

  /** Hides the shown answer: its table, chart, notes and CSV. */
  function clearResult() {
    lastRelease = null;
    $("result").hidden = true;
    for (const id of ["result-meta", "chart", "result-table", "result-notes"]) clear($(id));
    if (csvUrl) URL.revokeObjectURL(csvUrl);
    csvUrl = null;
  }

  /** Hides everything shown for the previous query: its explanation, confirmation and answer. */
  function clearAnswer() {
    for (const id of ["explanation", "confirm"]) { clear($(id)); $(id).hidden = true; }
    clearResult();
  }

  /** A refused query (an error): only the error stays, nothing of the previous answer. */
  function refused(error) {
    clearAnswer();
    fail(error);
  }

  // -- explain and confirmation --------------------------------------------------------------------

  /** Whether the analyst's filter counts ρ (zCDP): then costs show their ρ too. */
  function zcdp(remaining) { return !!remaining && remaining.rho !== null && remaining.rho !== undefined; }

  function showExplanation(data) {
    const box = clear($("explanation"));
    box.hidden = false;
    const measures = (data.measures || []).map((m) => el("li", {}, [
      el("code", { title: m.expression || "" }, m.name), ` ${m.mechanism || ""}`,
      m.half_width ? ` — expected ± ${num(m.half_width, 3)}` : "",
      m.epsilon !== undefined ? ` (ε ${num(m.epsilon)}, sensitivity ${num(m.sensitivity)})` : "",
    ]));
    append(box, [
      el("h2", {}, "EXPLAIN DP"),
      el("p", { class: "meta" }, [
        el("span", { class: "pill" }, "cost " + cost(data.cost, zcdp(data.remaining))),
        el("span", { class: "pill" }, "mechanism " + data.mechanism),
        el("span", { class: "pill" }, `${Math.round((data.confidence || 0.95) * 100)}% intervals`),
        el("span", { class: "pill" }, `${Math.round(Math.min(data.share, 9.99) * 100)}% of what is left`),
        el("span", { class: data.admissible ? "pill ok" : "pill bad" }, data.admissible ? "admissible" : "refused: " + data.reason),
      ]),
      measures.length ? el("ul", { class: "measures" }, measures) : null,
      el("details", {}, [el("summary", {}, "plan"), el("pre", {}, data.describe || "")]),
    ]);
  }

  async function explainOnly() {
    hideError();
    $("confirm").hidden = true;
    let data;
    try { data = await api("POST", "/console/api/explain", request()); } catch (e) { return refused(e); }
    if (!data.admissible) clearResult();  // refused: the previous answer is not this query's
    showExplanation(data);
  }

  async function runFlow() {
    hideError();
    clearAnswer();  // a new query: nothing of the previous one stays on screen
    const body = request();
    putInUrl(body);
    if (/^\s*explain\b/i.test(body.sql)) return run(body);  // EXPLAIN DP typed in: free, shown as text
    let data;
    try { data = await api("POST", "/console/api/explain", body); } catch (e) { return refused(e); }
    showExplanation(data);
    if (!data.admissible) return;
    if (data.confirm) return askFirst(data, body);
    return run(body);
  }

  function askFirst(data, body) {
    const box = clear($("confirm"));
    box.hidden = false;
    const share = Math.round(Math.min(data.share, 9.99) * 100);
    append(box, [
      el("p", {}, `This query costs ${cost(data.cost, zcdp(data.remaining))}: ${share}% of your remaining ε ${num(data.remaining.epsilon)}, ` +
        `above the ${Math.round(data.confirm_share * 100)}% confirmation threshold. Run it?`),
      el("button", { id: "confirm-run", class: "primary", onclick: () => { box.hidden = true; run(body); } }, "Run and spend it"),
      " ",
      el("button", { id: "confirm-cancel", onclick: () => { box.hidden = true; } }, "Cancel (nothing is charged)"),
    ]);
  }

  // -- running and results -------------------------------------------------------------------------

  async function run(body) {
    $("run").disabled = true;
    try {
      showRelease(await api("POST", "/console/api/query", body));
    } catch (e) { refused(e); } finally { $("run").disabled = false; refreshSide(); }
  }

  async function refine() {
    hideError();
    try {
      showRelease(await api("POST", "/console/api/refine", { release_id: lastRelease.release_id, database: database() }));
    } catch (e) { refused(e); } finally { refreshSide(); }
  }

  function showRelease(data) {
    clearResult();
    lastRelease = data;
    $("result").hidden = false;
    const meta = clear($("result-meta"));
    const explainRows = data.columns.length === 1 && data.columns[0] === "explain" && !data.release_id;
    append(meta, [
      el("span", { class: "pill spent", id: "result-cost" }, (data.cached ? "cached — spent " : "spent ") + cost(data.cost, zcdp(data.remaining))),
      el("span", { class: "pill", id: "result-left" }, "budget left " + cost(data.remaining, true)),
      el("span", { class: "pill" }, "mechanism " + data.mechanism),
      el("span", { class: "pill" }, `${Math.round(data.confidence * 100)}% intervals`),
      data.release_id ? el("span", { class: "pill muted" }, "release " + data.release_id.slice(0, 8)) : null,
      explainRows ? null : csvLink(data),
    ]);
    if (data.accuracy_text) {
      // only a Gaussian (Brownian) answer continues its noise path; Laplace cannot go below its scale
      const refinable = data.accuracy && /gauss|brown/i.test(String(data.accuracy.mechanism || ""));
      append(meta, [el("p", { class: "accuracy", id: "accuracy" }, data.accuracy_text),
        refinable ? el("button", { id: "refine", onclick: refine }, "Refine (halve the ±; charged the increment)") : null]);
    }
    const table = clear($("result-table"));
    if (explainRows) {
      table.appendChild(el("tbody", {}, el("tr", {}, el("td", {}, el("pre", {}, data.rows.map((r) => r[0]).join("\n"))))));
    } else {
      table.appendChild(el("thead", {}, el("tr", {}, data.columns.map((c, j) =>
        el("th", { class: isNoisy(data, j) ? "num" : null }, c)))));
      table.appendChild(el("tbody", {}, data.rows.slice(0, MAX_TABLE_ROWS).map((row, i) =>
        el("tr", {}, row.map((v, j) => cell(data, i, j, v))))));
    }
    drawChart(data);
    const notes = clear($("result-notes"));
    if (data.rows.length > MAX_TABLE_ROWS) notes.appendChild(el("li", {}, `the first ${MAX_TABLE_ROWS} of ${data.rows.length} rows are shown`));
    const squash = (t) => String(t || "").replace(/\s+/g, " ").trim();
    for (const n of data.notes || []) {
      if (squash(n) !== squash(data.accuracy_text)) notes.appendChild(el("li", {}, n));  // shown above already
    }
  }

  /** A link that downloads the release as CSV (made here from the release shown; nothing is charged). */
  function csvLink(data) {
    csvUrl = URL.createObjectURL(new Blob([Export.csv(data)], { type: "text/csv;charset=utf-8" }));
    return el("a", { id: "download-csv", class: "button", href: csvUrl, download: Export.fileName(data),
      title: "the release with each noisy column's interval bounds (c_lo, c_hi)" }, "Download CSV");
  }

  function isNoisy(data, j) { return data.intervals.some((row) => row[j] !== null); }

  function cell(data, i, j, value) {
    const half = data.half_widths[i][j];
    if (half === null || half === undefined) return el("td", {}, value === null ? "NULL" : String(value));
    const [lo, hi] = data.intervals[i][j];
    return el("td", { class: "num", title: `${Math.round(data.confidence * 100)}% interval [${num(lo, 6)}, ${num(hi, 6)}]` },
      [valueFor(value, half), el("span", { class: "pm" }, ` ± ${num(half, 2)}`)]);
  }

  function drawChart(data) {
    const box = clear($("chart"));
    const spec = data.chart;
    if (!spec) return;
    if (data.rows.length > MAX_CHART_ROWS) {
      box.appendChild(el("p", { class: "muted" }, `${data.rows.length} groups: too many to draw (at most ${MAX_CHART_ROWS})`));
      return;
    }
    const column = spec.values[0];
    const label = (row) => spec.keys.map((k) => String(row[k])).join(" · ");
    const rows = data.rows.map((row, i) => ({ row, i }));
    const common = {
      title: `${data.columns[column]} by ${spec.keys.map((k) => data.columns[k]).join(", ")}`,
      labels: rows.map(({ row }) => label(row)),
      values: rows.map(({ row }) => row[column]),
      lo: rows.map(({ i }) => (data.intervals[i][column] || [null])[0]),
      hi: rows.map(({ i }) => (data.intervals[i][column] || [null, null])[1]),
      half: rows.map(({ i }) => data.half_widths[i][column]),
    };
    if (spec.kind === "line") {
      // one line per value of the other keys (the series), each over the time key
      const seriesKeys = spec.series || [];
      const groups = new Map();
      rows.forEach(({ row }, k) => {
        const name = seriesKeys.map((j) => String(row[j])).join(" · ");
        if (!groups.has(name)) groups.set(name, []);
        groups.get(name).push(k);
      });
      const names = [...groups.keys()].sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
      const series = names.slice(0, MAX_SERIES).map((name) => {
        const pick = (xs) => groups.get(name).map((k) => xs[k]);
        return { name, xs: pick(rows.map(({ row }) => timeOf(row[spec.key]))), labels: pick(rows.map(({ row }) => String(row[spec.key]))),
          values: pick(common.values), lo: pick(common.lo), hi: pick(common.hi), half: pick(common.half) };
      });
      const by = seriesKeys.length ? `, one line per ${seriesKeys.map((k) => data.columns[k]).join(" · ")}` : "";
      box.appendChild(Charts.band({ title: `${data.columns[column]} by ${data.columns[spec.key]}${by}`, series }));
      if (names.length > MAX_SERIES) {
        box.appendChild(el("p", { class: "muted" }, `${names.length} series: the first ${MAX_SERIES} are drawn (all are in the table)`));
      }
    } else {
      box.appendChild(Charts.errorBars(common));
    }
  }

  /** A time key as a number for the x axis: ClickHouse's "YYYY-MM-DD[ hh:mm:ss]" read as UTC. */
  function timeOf(value) {
    if (typeof value === "number") return value;
    const textOf = String(value);
    const t = Date.parse(/^\d{4}-\d{2}-\d{2}[ T]\d/.test(textOf) && !/(Z|[+-]\d{2}:?\d{2})$/.test(textOf)
      ? textOf.replace(" ", "T") + "Z" : textOf);
    return Number.isNaN(t) ? 0 : t;
  }

  // -- the query in the URL (its fragment: never sent to the server, never a result) -------------

  /** Puts the query being run (and its database and options) into the page's URL, to share it. */
  function putInUrl(body) {
    const params = new URLSearchParams();
    params.set("q", body.sql);
    if (body.database && DP.session && body.database !== DP.session.database) params.set("db", body.database);
    for (const name of ["epsilon", "confidence"]) {
      if (body.options[name] !== undefined) params.set(name, String(body.options[name]));
    }
    window.history.replaceState(null, "", "#" + params.toString());
  }

  /** Fills the editor from a shared URL's fragment; it does not run the query (running spends budget:
   * that is the analyst's click, never a link's). Returns whether the URL held a query. */
  async function fromUrl() {
    const params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    if (!params.has("q")) return false;
    $("sql").value = params.get("q");
    const db = params.get("db");
    if (db && db !== $("database").value && [...$("database").options].some((o) => o.value === db)) {
      $("database").value = db;
      await Promise.all([loadSchema(), refreshSide()]);
    }
    $("opt-epsilon").value = params.get("epsilon") || "";
    $("opt-confidence").value = params.get("confidence") || "";
    clearAnswer();
    hideError();
    return true;
  }

  // -- saved queries (the analyst's own, kept by the server) ---------------------------------------

  function savedError(error) {
    const box = clear($("saved-error"));
    if (error) box.textContent = error.message || String(error);
  }

  function showSaved(data) {
    const list = clear($("saved"));
    if (!data.queries.length) list.appendChild(el("li", { class: "muted" }, "no saved queries"));
    for (const q of data.queries) {
      list.appendChild(el("li", { "data-name": q.name }, [
        el("button", { class: "saved-load", title: q.sql, onclick: () => loadSaved(q) }, q.name),
        el("button", { class: "saved-delete", title: `delete ${q.name}`, "aria-label": `delete ${q.name}`,
          onclick: () => removeSaved(q.name) }, "×"),
      ]));
    }
  }

  async function loadSaved(q) {
    savedError(null);
    $("sql").value = q.sql;
    if (q.database && q.database !== $("database").value && [...$("database").options].some((o) => o.value === q.database)) {
      $("database").value = q.database;
      await Promise.all([loadSchema(), refreshSide()]);
    }
    $("sql").focus();
  }

  async function saveQuery() {
    savedError(null);
    try {
      const data = await api("POST", "/console/api/saved", { name: $("save-name").value, sql: $("sql").value, database: database() });
      $("save-name").value = "";
      showSaved(data);
    } catch (e) { savedError(e); }
  }

  async function removeSaved(name) {
    savedError(null);
    try { showSaved(await api("POST", "/console/api/saved/delete", { name })); } catch (e) { savedError(e); }
  }

  async function refreshSaved() {
    try { showSaved(await api("GET", "/console/api/saved")); } catch (e) { savedError(e); }
  }

  // -- side panels ---------------------------------------------------------------------------------

  async function refreshSide() {
    try {
      const [budget, history] = await Promise.all([
        api("GET", "/console/api/budget", database() ? { database: database() } : null),
        api("GET", "/console/api/history", database() ? { database: database(), limit: 30 } : { limit: 30 }),
      ]);
      showBudget(budget);
      showHistory(history);
    } catch (e) { fail(e); }
  }

  function showBudget(b) {
    // used = what the filter no longer admits (spent, and reservations at their worst). A zCDP
    // filter counts ρ, so its gauge is in ρ (its remaining ε is the largest pure-ε release, not linear)
    const rho = zcdp(b.remaining) && b.spent.rho !== undefined && b.spent.rho !== null;
    const gauge = rho
      ? { spent: b.spent.rho + ((b.reserved || {}).rho || 0), total: b.spent.rho + ((b.reserved || {}).rho || 0) + Math.max(0, b.remaining.rho), label: "of ρ used" }
      : { spent: Math.max(0, b.budget.epsilon - Math.max(0, b.remaining.epsilon)), total: b.budget.epsilon, label: "of ε used" };
    clear($("budget-gauge")).appendChild(Charts.gauge(gauge));
    const text = clear($("budget-text"));
    append(text, [
      rho ? el("div", {}, `ρ left ${num(b.remaining.rho)} of ${num(gauge.total)}`) : null,
      el("div", { id: "budget-left", class: rho ? "muted" : null },
        `ε left ${num(b.remaining.epsilon)} of ${num(b.budget.epsilon)}` + (rho ? " (the largest pure-ε release still admitted)" : "")),
      el("div", { class: "muted" }, `δ left ${num(b.remaining.delta, 3)} · ${b.releases} releases · ${b.filter}`),
      b.renewal ? el("div", { class: "muted" }, `renews ${b.renewal.schedule}; period ${b.renewal.period}`) : null,
      b.locked ? el("div", { class: "bad" }, "locked: a release failed after its charge; ask the data owner to unlock you") : null,
      b.warning ? el("div", { class: "bad" }, b.warning) : null,
    ]);
    for (const d of b.datasets || []) {
      text.appendChild(el("div", { class: "muted" }, `${d.dataset}: ε left ${num(d.remaining.epsilon)} of ${num(d.budget.epsilon)}`));
    }
    clear($("budget-spend")).appendChild(Charts.spend({ series: [{ name: "ε", points: b.series }], budget: b.budget.epsilon,
      title: "ε charged over time (summed)", width: 320, height: 170 }));
  }

  function showHistory(h) {
    const list = clear($("history"));
    if (!h.releases.length) list.appendChild(el("li", { class: "muted" }, "no releases yet"));
    for (const r of h.releases) {
      list.appendChild(el("li", {}, [
        el("div", {}, [el("span", { class: "muted" }, DP.time(r.time)), " ", el("span", { class: "pill small" }, r.mechanism),
          " ", el("strong", {}, "ε " + num(r.epsilon)), r.status !== "charged" ? el("span", { class: "bad" }, " " + r.status) : null]),
        el("div", { class: "muted clip", title: r.datasets.join(", ") }, r.datasets.join(", ")),
        r.sql ? el("code", { class: "sql", title: "put into the editor", onclick: () => { $("sql").value = r.sql; } }, r.sql) : null,
      ]));
    }
  }

  function showSchema(s) {
    const box = clear($("schema"));
    for (const t of s.tables) {
      box.appendChild(el("details", {}, [
        el("summary", {}, [el("strong", {}, t.name), t.public ? " (public)" : ` (unit ${t.privacy_unit})`]),
        el("ul", {}, t.columns.map((c) => el("li", {}, [el("code", {}, c.name), " ", el("span", { class: "muted" }, c.type)]))),
      ]));
    }
  }

  async function loadSchema() {
    try {
      schema = await api("GET", "/console/api/schema", database() ? { database: database() } : null);
      showSchema(schema);
    } catch (e) { fail(e); }
  }

  function names() {
    return schema.tables.flatMap((t) => [t.name, ...t.columns.map((c) => c.name)]);
  }

  async function main() {
    const session = await DP.start();
    const select = $("database");
    for (const db of session.databases) select.appendChild(el("option", { value: db }, db));
    select.addEventListener("change", () => { loadSchema(); refreshSide(); });
    Completion.attach($("sql"), $("completion"), names);
    $("sql").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); runFlow(); }
    });
    $("run").addEventListener("click", runFlow);
    $("explain").addEventListener("click", explainOnly);
    $("save").addEventListener("click", saveQuery);
    $("save-name").addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); saveQuery(); } });
    window.addEventListener("hashchange", () => { fromUrl().catch(fail); });  // a shared URL pasted into this tab
    await Promise.all([loadSchema(), refreshSide(), refreshSaved()]);
    await fromUrl();
    document.body.dataset.ready = "1";
  }

  main().catch(fail);
})();
