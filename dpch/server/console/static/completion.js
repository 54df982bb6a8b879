// Completion of table and column names (and a few SQL words) in a textarea: Tab or Enter accepts,
// arrows choose, Escape closes.
"use strict";
const Completion = (function () {
  const WORDS = ["SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "SETTINGS", "count()",
    "sum(", "avg(", "quantile(0.5)(", "countDistinct(", "toStartOfMonth(", "toStartOfWeek(", "dp_epsilon",
    "dp_delta", "dp_confidence", "dp_accuracy", "dp_relative_error", "EXPLAIN DP"];

  function attach(textarea, list, names) {
    let items = [], chosen = 0, start = 0;

    function word() {
      const before = textarea.value.slice(0, textarea.selectionStart);
      const match = /[A-Za-z_][A-Za-z0-9_]*$/.exec(before);
      return match ? { text: match[0], start: match.index } : null;
    }

    function close() { list.hidden = true; items = []; }

    function show() {
      const w = word();
      if (!w) return close();
      const prefix = w.text.toLowerCase();
      const pool = names().concat(WORDS);
      items = [...new Set(pool)].filter((n) => n.toLowerCase().startsWith(prefix) && n.toLowerCase() !== prefix).slice(0, 8);
      start = w.start;
      DP.clear(list);
      if (!items.length) return close();
      chosen = 0;
      items.forEach((item, i) => list.appendChild(DP.el("li", {
        class: i === chosen ? "chosen" : null,
        onmousedown: (e) => { e.preventDefault(); accept(i); },
      }, item)));
      list.hidden = false;
    }

    function accept(i) {
      const item = items[i];
      const end = textarea.selectionStart;
      textarea.value = textarea.value.slice(0, start) + item + textarea.value.slice(end);
      const caret = start + item.length;
      textarea.setSelectionRange(caret, caret);
      close();
      textarea.focus();
    }

    function mark() {
      Array.from(list.children).forEach((li, i) => li.classList.toggle("chosen", i === chosen));
    }

    textarea.addEventListener("input", show);
    textarea.addEventListener("blur", close);
    textarea.addEventListener("keydown", (e) => {
      if (list.hidden || !items.length || e.ctrlKey || e.metaKey) return;
      if (e.key === "ArrowDown") { chosen = (chosen + 1) % items.length; mark(); e.preventDefault(); }
      else if (e.key === "ArrowUp") { chosen = (chosen + items.length - 1) % items.length; mark(); e.preventDefault(); }
      else if (e.key === "Tab" || e.key === "Enter") { accept(chosen); e.preventDefault(); }
      else if (e.key === "Escape") { close(); e.preventDefault(); }
    });
  }

  return { attach };
})();
