// /admin: budgets, spend over time, recent releases, locked analysts (unlock), set a budget,
// table policies and audit reports. Ledger metadata and annotations only: never a released value.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const { el, clear, append, api, num, cost } = DP;

  function fail(e) { DP.showError($("error"), e); }

  function notice(text) { const n = $("notice"); n.hidden = false; n.textContent = text; }

  function budgetRow(db, a) {
    if (a.error) {
      return el("tr", {}, [el("td", {}, a.analyst), el("td", { colspan: 6, class: "muted" }, a.error),
        el("td", {}, a.locked ? unlockButton(db, a.analyst) : "")]);
    }
    return el("tr", { "data-analyst": a.analyst }, [
      el("td", {}, a.analyst),
      el("td", { class: "num" }, cost(a.budget)),
      el("td", { class: "num" }, cost(a.spent)),
      el("td", { class: "num" }, cost(a.remaining)),
      el("td", { class: "num" }, String(a.releases)),
      el("td", {}, a.filter + (a.renewal ? `, renews ${a.renewal.schedule}` : "")),
      el("td", {}, (a.datasets || []).map((d) => el("div", {}, `${d.dataset}: ${num(d.spent.epsilon)} / ${num(d.budget.epsilon)}`))),
      el("td", {}, a.locked ? [el("span", { class: "bad" }, `locked (${a.locked.reason || "failed after charge"}) `),
        unlockButton(db, a.analyst)] : "—"),
    ]);
  }

  function unlockButton(db, analyst) {
    return el("button", { class: "unlock", "data-analyst": analyst, onclick: async () => {
      try {
        const r = await api("POST", "/console/api/owner/unlock", { analyst, database: db });
        notice(r.unlocked ? `analyst ${analyst} unlocked` : `analyst ${analyst} was not locked`);
        load();
      } catch (e) { fail(e); }
    } }, "Unlock");
  }

  function showDatabase(d) {
    const head = ["analyst", "budget", "spent", "remaining", "releases", "filter", "per dataset (ε spent / budget)", "lock"];
    const series = d.analysts.filter((a) => a.series).map((a) => ({ name: a.analyst, points: a.series }));
    const datasets = Object.entries(d.datasets);
    return el("section", { class: "panel", "data-database": d.database }, [
      el("h2", {}, `Database ${d.database}`),
      el("div", { class: "two" }, [
        el("div", {}, [el("h3", {}, "Spend over time"), Charts.spend({ series, title: "ε spent per analyst (cumulative)", width: 600, height: 240 })]),
        el("div", {}, [el("h3", {}, "Spend per dataset (all analysts)"),
          el("table", { class: "result" }, [el("thead", {}, el("tr", {}, ["dataset", "ε spent", "δ spent", "releases"].map((h) => el("th", {}, h)))),
            el("tbody", {}, datasets.length ? datasets.map(([name, s]) => el("tr", {}, [el("td", {}, name), el("td", { class: "num" }, num(s.epsilon)),
              el("td", { class: "num" }, num(s.delta, 3)), el("td", { class: "num" }, String(s.releases))]))
              : el("tr", {}, el("td", { colspan: 4, class: "muted" }, "no releases yet")))])]),
      ]),
      el("h3", {}, "Analysts"),
      el("div", { class: "table-wrap" }, el("table", { class: "result analysts" }, [
        el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
        el("tbody", {}, d.analysts.map((a) => budgetRow(d.database, a))),
      ])),
      el("h3", {}, "Locked analysts"),
      d.locked.length ? el("ul", { class: "locked" }, d.locked.map((l) => el("li", {}, [
        `${l.analyst} since ${DP.time(l.time)}: release ${l.release_id} failed after its charge (${l.reason || "?"}) `,
        unlockButton(d.database, l.analyst)]))) : el("p", { class: "muted" }, "none"),
      el("h3", {}, "Recent releases"),
      el("div", { class: "table-wrap" }, el("table", { class: "result releases" }, [
        el("thead", {}, el("tr", {}, ["time", "analyst", "datasets", "mechanism", "cost", "status"].map((h) => el("th", {}, h)))),
        el("tbody", {}, d.recent.map((r) => el("tr", {}, [el("td", {}, DP.time(r.time)), el("td", {}, r.analyst),
          el("td", {}, r.datasets.join(", ")), el("td", {}, r.mechanism), el("td", { class: "num" }, cost(r)), el("td", {}, r.status)]))),
      ])),
    ]);
  }

  function showPolicies(p) {
    const box = clear($("policies"));
    for (const d of p.databases) {
      for (const t of d.tables) {
        box.appendChild(el("details", { open: true }, [
          el("summary", {}, [el("strong", {}, `${d.database}.${t.table}`), t.public ? " public" : ` private, unit ${t.privacy_unit}`]),
          el("pre", {}, t.describe),
        ]));
      }
    }
  }

  function showAudits(a) {
    const box = clear($("audits"));
    if (a.reports.length) {
      box.appendChild(el("ul", {}, a.reports.map((r) => el("li", {}, [
        el("a", { href: r.href, target: "_blank", rel: "noopener" }, r.name), ` ${DP.time(r.time)}`]))));
    } else {
      append(box, el("p", { class: "muted" }, (a.directory ? `No report in ${a.directory} yet. ` : "No report directory configured. ") +
        "To produce one: " + a.how + "."));
    }
  }

  async function load() {
    try {
      const [overview, policies, audits] = await Promise.all([
        api("GET", "/console/api/owner/overview"), api("GET", "/console/api/owner/policies"), api("GET", "/console/api/owner/audits")]);
      const box = clear($("databases"));
      for (const d of overview.databases) box.appendChild(showDatabase(d));
      showPolicies(policies);
      showAudits(audits);
    } catch (e) { fail(e); }
  }

  async function main() {
    const session = await DP.start();
    for (const db of session.databases) $("b-database").appendChild(el("option", { value: db }, db));
    $("budget-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const r = await api("POST", "/console/api/owner/budget", {
          analyst: $("b-analyst").value, dataset: $("b-dataset").value, database: $("b-database").value,
          epsilon: parseFloat($("b-epsilon").value), delta: parseFloat($("b-delta").value || "0"),
        });
        notice(`budget of ${r.analyst}${r.dataset ? " on " + r.dataset : ""} set to ${cost(r.budget)}`);
        load();
      } catch (e) { fail(e); }
    });
    await load();
    document.body.dataset.ready = "1";
  }

  main().catch(fail);
})();
