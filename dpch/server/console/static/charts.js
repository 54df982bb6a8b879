// Inline SVG charts, drawn here (no library): bars with error bars, lines with bands (one per series),
// a budget gauge and spend over time. Colours come from console.css classes (no inline style: the CSP forbids it).
"use strict";
const Charts = (function () {
  const NS = "http://www.w3.org/2000/svg";

  function svg(tag, attrs, children) {
    const node = document.createElementNS(NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    for (const child of children || []) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function text(x, y, content, cls, anchor) {
    return svg("text", { x, y, class: cls || "axis-label", "text-anchor": anchor || "middle" }, [String(content)]);
  }

  /** About `count` round tick values covering [lo, hi]. */
  function ticks(lo, hi, count) {
    if (!(hi > lo)) { hi = lo + 1; }
    const raw = (hi - lo) / (count || 5);
    const step = Math.pow(10, Math.floor(Math.log10(raw)));
    const nice = [1, 2, 5, 10].map((m) => m * step).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(lo / nice) * nice; v <= hi + nice * 1e-9; v += nice) out.push(Number(v.toPrecision(12)));
    return out;
  }

  function frame(width, height, margin) {
    return { width, height, m: margin, w: width - margin.left - margin.right, h: height - margin.top - margin.bottom };
  }

  function yAxis(root, f, lo, hi, y) {
    for (const t of ticks(lo, hi, 5)) {
      const yy = y(t);
      root.appendChild(svg("line", { x1: f.m.left, x2: f.m.left + f.w, y1: yy, y2: yy, class: "grid" }));
      root.appendChild(text(f.m.left - 6, yy + 4, DP.num(t, 3), "axis-label", "end"));
    }
  }

  /** Bars with error bars: labels[i], values[i] and its interval [lo[i], hi[i]]. */
  function errorBars(opts) {
    const n = opts.values.length;
    const f = frame(Math.max(560, Math.min(960, 80 + n * 56)), 300, { top: 24, right: 16, bottom: 64, left: 72 });
    const low = Math.min(0, ...opts.lo.map((v, i) => (v === null ? opts.values[i] : v)));
    const high = Math.max(0, ...opts.hi.map((v, i) => (v === null ? opts.values[i] : v)));
    const pad = (high - low) * 0.05 || 1;
    const y0 = low < 0 ? low - pad : 0, y1 = high + pad;
    const y = (v) => f.m.top + f.h - ((v - y0) / (y1 - y0)) * f.h;
    const root = svg("svg", { viewBox: `0 0 ${f.width} ${f.height}`, width: f.width, height: f.height, class: "chart bars",
      role: "img", "aria-label": opts.title || "chart" });
    yAxis(root, f, y0, y1, y);
    const slot = f.w / n, bar = Math.max(4, slot * 0.6);
    opts.values.forEach((value, i) => {
      const cx = f.m.left + slot * (i + 0.5);
      const top = y(Math.max(0, value)), bottom = y(Math.min(0, value));
      const rect = svg("rect", { x: cx - bar / 2, y: top, width: bar, height: Math.max(1, bottom - top), class: "bar" });
      rect.appendChild(svg("title", {}, [`${opts.labels[i]}: ${DP.valueFor(value, opts.half[i])} ± ${DP.num(opts.half[i], 3)}`]));
      root.appendChild(rect);
      if (opts.lo[i] !== null && opts.hi[i] !== null) {
        const a = y(opts.hi[i]), b = y(opts.lo[i]);
        root.appendChild(svg("line", { x1: cx, x2: cx, y1: a, y2: b, class: "error-bar" }));
        root.appendChild(svg("line", { x1: cx - bar / 4, x2: cx + bar / 4, y1: a, y2: a, class: "error-bar" }));
        root.appendChild(svg("line", { x1: cx - bar / 4, x2: cx + bar / 4, y1: b, y2: b, class: "error-bar" }));
      }
      const label = text(cx, f.m.top + f.h + 16, String(opts.labels[i]).slice(0, 14));
      if (n > 8) label.setAttribute("transform", `rotate(-35 ${cx} ${f.m.top + f.h + 16})`);
      root.appendChild(label);
    });
    root.appendChild(svg("line", { x1: f.m.left, x2: f.m.left + f.w, y1: y(0), y2: y(0), class: "axis" }));
    if (opts.title) root.appendChild(text(f.m.left, 14, opts.title, "chart-title", "start"));
    return root;
  }

  const LABEL_GAP = 12;  // the least space between two axis labels or legend entries (px)
  let measurer = null;

  /** The width of `content` drawn in the charts' 11px font (a canvas measures it; the SVG's own
   * text cannot be measured before it is on the page). */
  function textWidth(content) {
    if (measurer === null) {
      const canvas = document.createElement("canvas");
      measurer = canvas.getContext("2d");
      if (measurer) measurer.font = `11px ${getComputedStyle(document.body).fontFamily}`;
    }
    return measurer ? measurer.measureText(String(content)).width : String(content).length * 7;
  }

  /** Time keys as ClickHouse writes them, shortened alike: "2026-03" for months' first days,
   * the date alone at midnight, seconds dropped when all are :00. */
  function timeLabels(raw) {
    let out = raw.map((t) => String(t));
    const date = /^\d{4}-\d{2}-\d{2}$/;
    if (out.every((t) => /^\d{4}-\d{2}-\d{2}[ T]00:00:00(\.0+)?$/.test(t))) out = out.map((t) => t.slice(0, 10));
    if (out.every((t) => date.test(t))) {
      if (new Set(out).size > 1 && out.every((t) => t.endsWith("-01-01"))) return out.map((t) => t.slice(0, 4));
      if (new Set(out).size > 1 && out.every((t) => t.endsWith("-01"))) return out.map((t) => t.slice(0, 7));
      return out;
    }
    if (out.every((t) => /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:00(\.0+)?$/.test(t))) out = out.map((t) => t.slice(0, 16));
    return out;
  }

  /** Lines with bands over time: `series` of { name, xs (Date or number), labels, values, lo, hi,
   * half }, one line each (time buckets, one series per value of the other keys). The x axis labels
   * are placed where they fit, never on top of each other; more than one series gets a legend. */
  function band(opts) {
    const series = opts.series || [{ name: "", ...opts }];
    const multi = series.length > 1;
    const width = 800;
    // the legend: entries laid out in rows below the axis labels
    const legend = [];
    if (multi) {
      let lx = 0, row = 0;
      series.forEach((s, k) => {
        const w = 26 + textWidth(s.name);
        if (lx > 0 && lx + w > width - 72 - 24) { lx = 0; row += 1; }
        legend.push({ k, name: s.name, x: lx, row });
        lx += w + LABEL_GAP + 6;
      });
    }
    const legendRows = legend.length ? legend[legend.length - 1].row + 1 : 0;
    const f = frame(width, 300 + legendRows * 18, { top: 24, right: 24, bottom: 40 + legendRows * 18, left: 72 });
    const all = series.map((s) => ({
      s,
      xs: s.xs.map((x) => (x instanceof Date ? x.getTime() : Number(x))),
      lows: s.lo.map((v, i) => (v === null || v === undefined ? s.values[i] : v)),
      highs: s.hi.map((v, i) => (v === null || v === undefined ? s.values[i] : v)),
    }));
    const xsAll = all.flatMap((a) => a.xs);
    const x0 = Math.min(...xsAll), x1 = Math.max(...xsAll);
    let y0 = Math.min(...all.flatMap((a) => a.lows)), y1 = Math.max(...all.flatMap((a) => a.highs));
    const pad = (y1 - y0) * 0.05 || 1;
    y0 = y0 >= 0 && y0 - pad < 0 ? 0 : y0 - pad; y1 += pad;
    const x = (v) => f.m.left + (x1 > x0 ? ((v - x0) / (x1 - x0)) * f.w : f.w / 2);
    const y = (v) => f.m.top + f.h - ((v - y0) / (y1 - y0)) * f.h;
    const root = svg("svg", { viewBox: `0 0 ${f.width} ${f.height}`, width: f.width, height: f.height,
      class: multi ? "chart band lines" : "chart band", role: "img", "aria-label": opts.title || "chart" });
    yAxis(root, f, y0, y1, y);
    // each x once, in order, with its label; labels drawn left to right where they fit
    const stops = new Map();
    all.forEach((a) => a.xs.forEach((v, i) => { if (!stops.has(v)) stops.set(v, a.s.labels[i]); }));
    const xs = [...stops.keys()].sort((a, b) => a - b);
    const labels = timeLabels(xs.map((v) => stops.get(v)));
    let right = -Infinity;
    xs.forEach((v, i) => {
      const w = textWidth(labels[i]);
      const cx = Math.max(w / 2, Math.min(f.width - w / 2, x(v)));
      if (cx - w / 2 < right + LABEL_GAP) return;
      right = cx + w / 2;
      root.appendChild(svg("line", { x1: x(v), x2: x(v), y1: f.m.top + f.h, y2: f.m.top + f.h + 4, class: "axis" }));
      root.appendChild(text(cx, f.m.top + f.h + 18, labels[i], "axis-label x-label"));
    });
    all.forEach(({ s, xs: sx, lows, highs }, k) => {
      const order = sx.map((_, i) => i).sort((a, b) => sx[a] - sx[b]);
      const colour = multi ? ` series-${k % 10}` : "";
      const group = svg("g", { class: "series", "data-series": s.name });
      const upper = order.map((i) => `${x(sx[i])},${y(highs[i])}`);
      const lower = order.map((i) => `${x(sx[i])},${y(lows[i])}`).reverse();
      group.appendChild(svg("polygon", { points: upper.concat(lower).join(" "), class: "band-area" + colour }));
      group.appendChild(svg("polyline", { points: order.map((i) => `${x(sx[i])},${y(s.values[i])}`).join(" "),
        class: "band-line" + colour }));
      for (const i of order) {
        const dot = svg("circle", { cx: x(sx[i]), cy: y(s.values[i]), r: 2.5, class: "band-dot" + colour });
        const name = s.name ? `${s.name}, ` : "";
        dot.appendChild(svg("title", {}, [`${name}${s.labels[i]}: ${DP.valueFor(s.values[i], s.half[i])} ± ${DP.num(s.half[i], 3)}`]));
        group.appendChild(dot);
      }
      root.appendChild(group);
    });
    for (const entry of legend) {
      const ly = f.m.top + f.h + 40 + entry.row * 18, lx = f.m.left + entry.x;
      root.appendChild(svg("line", { x1: lx, x2: lx + 18, y1: ly - 4, y2: ly - 4, class: `legend-swatch series-${entry.k % 10}` }));
      root.appendChild(text(lx + 24, ly, entry.name, "legend", "start"));
    }
    if (opts.title) root.appendChild(text(f.m.left, 14, opts.title, "chart-title", "start"));
    return root;
  }

  /** A half-circle gauge: the share of the budget spent. */
  function gauge(opts) {
    const share = opts.total > 0 ? Math.max(0, Math.min(1, opts.spent / opts.total)) : 0;
    const r = 70, cx = 90, cy = 86;
    const point = (s) => [cx - r * Math.cos(Math.PI * s), cy - r * Math.sin(Math.PI * s)];
    const [ex, ey] = point(share);
    const root = svg("svg", { viewBox: "0 0 180 110", width: 180, height: 110, class: "chart gauge", role: "img",
      "aria-label": opts.label || "budget" });
    root.appendChild(svg("path", { d: `M ${cx - r} ${cy} A ${r} ${r} 0 0 1 ${cx + r} ${cy}`, class: "gauge-track" }));
    if (share > 0) {
      root.appendChild(svg("path", { d: `M ${cx - r} ${cy} A ${r} ${r} 0 0 1 ${ex} ${ey}`,
        class: share > 0.9 ? "gauge-fill low" : "gauge-fill" }));
    }
    root.appendChild(text(cx, cy - 16, `${Math.round(share * 100)}%`, "gauge-value"));
    root.appendChild(text(cx, cy + 18, opts.label || "spent", "axis-label"));
    return root;
  }

  /** Cumulative spend over time, one step line per series, and the budget as a dashed line. */
  function spend(opts) {
    const f = frame(opts.width || 420, opts.height || 200, { top: 20, right: 12, bottom: 32, left: 52 });
    const series = opts.series.filter((s) => s.points.length);
    const all = series.flatMap((s) => s.points);
    const root = svg("svg", { viewBox: `0 0 ${f.width} ${f.height}`, width: f.width, height: f.height, class: "chart spend",
      role: "img", "aria-label": opts.title || "spend over time" });
    if (opts.title) root.appendChild(text(f.m.left, 12, opts.title, "chart-title", "start"));
    if (!all.length) {
      root.appendChild(text(f.width / 2, f.height / 2, "no releases yet", "axis-label"));
      return root;
    }
    const ts = all.map((p) => Date.parse(p.time));
    let t0 = Math.min(...ts), t1 = Math.max(...ts);
    if (t1 === t0) { t0 -= 60000; t1 += 60000; }
    const top = Math.max(opts.budget || 0, ...all.map((p) => p.epsilon)) * 1.08 || 1;
    const x = (t) => f.m.left + ((t - t0) / (t1 - t0)) * f.w;
    const y = (v) => f.m.top + f.h - (v / top) * f.h;
    yAxis(root, f, 0, top, y);
    if (opts.budget) {
      root.appendChild(svg("line", { x1: f.m.left, x2: f.m.left + f.w, y1: y(opts.budget), y2: y(opts.budget), class: "budget-line" }));
      root.appendChild(text(f.m.left + f.w, y(opts.budget) - 4, "budget ε " + DP.num(opts.budget, 3), "axis-label", "end"));
    }
    series.forEach((s, k) => {
      let prev = 0;
      const points = [`${x(t0)},${y(0)}`];
      for (const p of s.points) {
        const t = x(Date.parse(p.time));
        points.push(`${t},${y(prev)}`, `${t},${y(p.epsilon)}`);
        prev = p.epsilon;
      }
      points.push(`${x(t1)},${y(prev)}`);
      const line = svg("polyline", { points: points.join(" "), class: `spend-line series-${k % 6}` });
      line.appendChild(svg("title", {}, [`${s.name}: ε ${DP.num(prev)}`]));
      root.appendChild(line);
      if (series.length > 1) root.appendChild(text(f.m.left + 8 + k * 90, f.height - 6, s.name, `legend series-${k % 6}`, "start"));
    });
    root.appendChild(text(f.m.left, f.m.top + f.h + 14, DP.time(new Date(t0).toISOString()).slice(5, 16), "axis-label", "start"));
    root.appendChild(text(f.m.left + f.w, f.m.top + f.h + 14, DP.time(new Date(t1).toISOString()).slice(5, 16), "axis-label", "end"));
    return root;
  }

  return { errorBars, band, gauge, spend, ticks, timeLabels };
})();
