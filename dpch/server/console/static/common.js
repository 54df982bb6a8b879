// Shared by /play and /admin: the session, JSON calls with the CSRF token, DOM helpers, numbers.
"use strict";
const DP = (function () {
  let session = null;

  /** Builds an element: el("td", {class: "num", title: "…"}, "text" | [children]). Text is never parsed as HTML. */
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    if (children === null || children === undefined) return node;
    for (const child of Array.isArray(children) ? children : [children]) {
      if (child === null || child === undefined) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  class ApiError extends Error {
    constructor(status, error) {
      super((error && error.message) || "request failed (" + status + ")");
      this.status = status;
      this.hint = error && error.hint;
      this.kind = error && error.kind;
    }
  }

  /** A JSON call; POSTs carry the session's CSRF token. */
  async function api(method, path, body) {
    const headers = { "Accept": "application/json" };
    const init = { method, headers, credentials: "same-origin" };
    if (method === "POST") {
      headers["Content-Type"] = "application/json";
      headers["X-Dpch-Csrf"] = session ? session.csrf : "";
      init.body = JSON.stringify(body || {});
    } else if (body) {
      path += "?" + new URLSearchParams(body).toString();
    }
    const response = await fetch(path, init);
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (response.status === 401) {
      // the fragment (a shared query, /play#q=…) comes back after signing in
      window.location.assign("/console/login?next=" + encodeURIComponent(window.location.pathname) + window.location.hash);
    }
    if (!response.ok) throw new ApiError(response.status, data && data.error);
    return data;
  }

  /** Loads the session and fills the header (user, links, sign-out). */
  async function start() {
    session = await api("GET", "/console/api/session");
    const who = document.getElementById("who");
    if (who) who.textContent = session.user + (session.analyst !== session.user ? " (analyst " + session.analyst + ")" : "");
    const admin = document.getElementById("nav-admin");
    if (admin && !session.owner) admin.hidden = true;
    const out = document.getElementById("sign-out");
    if (out) out.addEventListener("click", async () => {
      try { await api("POST", "/console/api/logout"); } finally { window.location.assign("/console/login"); }
    });
    return session;
  }

  /** A number with `digits` significant digits, without exponent for ordinary magnitudes. */
  function num(value, digits) {
    if (value === null || value === undefined) return "—";
    if (typeof value !== "number") return String(value);
    if (!isFinite(value)) return "∞";
    if (value === 0) return "0";
    const abs = Math.abs(value);
    if (abs >= 1e-4 && abs < 1e9) return Number(value.toPrecision(digits || 4)).toLocaleString("en-US", { maximumFractionDigits: 6 });
    return value.toExponential((digits || 4) - 1);
  }

  /** A noisy value rounded to what its half-width says is meaningful (two digits of the ±). */
  function valueFor(value, halfWidth) {
    if (typeof value !== "number" || !halfWidth || !isFinite(halfWidth)) return num(value, 6);
    const decimals = Math.max(0, 1 - Math.floor(Math.log10(halfWidth)));
    return value.toLocaleString("en-US", { minimumFractionDigits: Math.min(decimals, 6), maximumFractionDigits: Math.min(decimals, 6) });
  }

  /** "ε 0.5, δ 1e-6" (and ", ρ …" when `rho`: under a zCDP filter, which counts ρ). */
  function cost(c, rho) {
    if (!c) return "—";
    let text = "ε " + num(c.epsilon);
    if (c.delta) text += ", δ " + num(c.delta, 3);
    if (rho && c.rho !== null && c.rho !== undefined) text += ", ρ " + num(c.rho);
    return text;
  }

  function time(iso) {
    if (!iso) return "";
    return String(iso).replace("T", " ").replace(/\.\d+/, "").replace(/\+00:00$/, " UTC");
  }

  function showError(node, error) {
    clear(node);
    node.hidden = false;
    append(node, [el("strong", {}, "Error: "), error.message || String(error)]);
    if (error.hint) append(node, [el("br"), el("span", { class: "hint" }, error.hint)]);
  }

  return { el, append, clear, api, start, num, valueFor, cost, time, showError, get session() { return session; } };
})();
