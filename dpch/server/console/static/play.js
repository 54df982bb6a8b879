// /play: the analyst's editor, EXPLAIN DP before running, results with ± and error bars, budget, history.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const { el, clear, append, api, num, cost, valueFor } = DP;
  const MAX_TABLE_ROWS = 1000;  // rows shown in the table
  const MAX_CHART_ROWS = 200;   // groups drawn in a chart
  let schema = { tables: [] };
  let lastRelease = null;

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
    try { showExplanation(await api("POST", "/console/api/explain", request())); } catch (e) { fail(e); }
  }

  async function runFlow() {
    hideError();
    $("confirm").hidden = true;
    const body = request();
    if (/^\s*explain\b/i.test(body.sql)) return run(body);  // EXPLAIN DP typed in: free, shown as text
    let data;
    try { data = await api("POST", "/console/api/explain", body); } catch (e) { return fail(e); }
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
    } catch (e) { fail(e); } finally { $("run").disabled = false; refreshSide(); }
  }

  async function refine() {
    hideError();
    try {
      showRelease(await api("POST", "/console/api/refine", { release_id: lastRelease.release_id, database: database() }));
    } catch (e) { fail(e); } finally { refreshSide(); }
  }

  function showRelease(data) {
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
      const order = rows.map((_, k) => k).sort((a, b) => Date.parse(rows[a].row[spec.key]) - Date.parse(rows[b].row[spec.key]));
      const pick = (xs) => order.map((k) => xs[k]);
      box.appendChild(Charts.band({ title: common.title, xs: pick(rows.map(({ row }) => new Date(row[spec.key]))),
        labels: pick(common.labels), values: pick(common.values), lo: pick(common.lo), hi: pick(common.hi), half: pick(common.half) }));
    } else {
      box.appendChild(Charts.errorBars(common));
    }
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
    await Promise.all([loadSchema(), refreshSide()]);
    document.body.dataset.ready = "1";
  }

  main().catch(fail);
})();
