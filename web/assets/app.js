// csdlab dashboard: plain JavaScript, SVG drawn by hand, no network beyond this server.
// Every chart has a table with the same numbers beneath it.
"use strict";

const STAGE_COLORS = {
  retrieve_layout: "#2f5bd3", dma: "#f59f00", read_file: "#12b886",
  compute: "#7048e8", others: "#868e96",
};
const EXTRA_COLORS = ["#e8590c", "#0c8599", "#c2255c", "#5c940d"];
// One colour per series (design) in the line and range charts, in order.
const SERIES_COLORS = ["#2f5bd3", "#f59f00", "#12b886", "#7048e8", "#e8590c", "#0c8599", "#c2255c", "#5c940d", "#868e96"];
const SVG_NS = "http://www.w3.org/2000/svg";

// ---- helpers ---------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick" || k === "onsubmit" || k === "onchange") e[k] = v;
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function api(path, init) {
  const r = await fetch("/api" + path, init);
  let body;
  try { body = await r.json(); } catch (_) { body = { error: r.statusText }; }
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

const us = (ns) => (ns / 1000).toFixed(1);
// A metric as every page shows it: one kept in nanoseconds reads in microseconds.
const inUs = (metric) => (metric.endsWith("_ns")
  ? { name: metric.slice(0, -3), unit: "µs", scale: (v) => v / 1000 }
  : { name: metric, unit: "", scale: (v) => v });
const pct = (x) => (x * 100).toFixed(1) + "%";
const num = (x) => (Number.isInteger(x) ? x.toLocaleString("en") : x.toFixed(2));
const when = (secs) => new Date(secs * 1000).toISOString().replace("T", " ").slice(0, 16);

function stageColor(name, i) {
  return STAGE_COLORS[name] || EXTRA_COLORS[i % EXTRA_COLORS.length];
}

function table(head, rows, opts) {
  const t = el("table", opts && opts.id ? { id: opts.id } : {});
  t.append(el("thead", {}, el("tr", {}, head.map((h, i) =>
    el("th", { class: i === 0 ? "text" : undefined }, h)))));
  t.append(el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c, i) =>
    el("td", { class: i === 0 ? "text" : undefined }, c))))));
  return t;
}

function show(...nodes) {
  const main = document.getElementById("main");
  // Pages pass null for a part they leave out; replaceChildren would print it as "null".
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined));
}

// ---- charts ----------------------------------------------------------------------------

// LightFS Fig. 3: one stacked bar per design, PAO written on each bar.
function breakdownChart(chart) {
  const bars = chart.bars;
  const names = [];
  for (const b of bars) for (const s of b.stages) if (!names.includes(s.name)) names.push(s.name);
  const barW = 56, gap = 44, left = 64, top = 46, plotH = 220;
  const width = Math.max(420, left + bars.length * (barW + gap) + 20);
  const height = top + plotH + 48;
  const max = Math.max(...bars.map((b) => b.total_ns), 1);
  const y = (ns) => (ns / max) * plotH;
  const root = svg("svg", {
    class: "chart breakdown", width, height, viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-label": `latency breakdown: ${chart.title}`,
  });
  root.append(svg("line", { class: "axis", x1: left - 6, y1: top + plotH, x2: width - 10, y2: top + plotH }));
  root.append(svg("line", { class: "axis", x1: left - 6, y1: top, x2: left - 6, y2: top + plotH }));
  for (const f of [0, 0.5, 1]) {
    const yy = top + plotH - f * plotH;
    root.append(svg("text", { x: left - 10, y: yy + 4, "text-anchor": "end" }, us(max * f)));
  }
  root.append(svg("text", { x: 4, y: 14 }, chart.unit));
  bars.forEach((b, i) => {
    const x = left + i * (barW + gap) + gap / 2;
    const g = svg("g", { class: "bar", "data-design": b.design, "data-pao": b.pao });
    let acc = 0;
    b.stages.forEach((s) => {
      const h = y(s.ns);
      const r = svg("rect", {
        x, y: top + plotH - y(acc) - h, width: barW, height: Math.max(h, 0),
        fill: stageColor(s.name, names.indexOf(s.name)), "data-stage": s.name,
      }, svg("title", {}, `${b.design} ${s.name}: ${us(s.ns)} µs`));
      g.append(r);
      acc += s.ns;
    });
    const labelY = top + plotH - y(acc) - 8;
    if (b.pao != null) g.append(svg("text", { class: "pao-label", x: x + barW / 2, y: labelY, "text-anchor": "middle" },
      "PAO " + pct(b.pao)));
    g.append(svg("text", { class: "design-label", x: x + barW / 2, y: top + plotH + 18, "text-anchor": "middle" }, b.design));
    g.append(svg("text", { x: x + barW / 2, y: top + plotH + 34, "text-anchor": "middle", class: "muted" }, us(b.total_ns) + " µs"));
    root.append(g);
  });
  const legend = el("div", { class: "legend" }, names.map((n, i) =>
    el("span", {}, el("i", { style: `background:${stageColor(n, i)}` }), n)));
  const hasPao = bars.some((b) => b.pao != null);
  const t = table(["design", ...names.map((n) => n + " µs"), "total µs", ...(hasPao ? ["PAO"] : [])],
    bars.map((b) => [b.design,
      ...names.map((n) => { const s = b.stages.find((s) => s.name === n); return s ? us(s.ns) : "–"; }),
      us(b.total_ns), ...(hasPao ? [b.pao == null ? "–" : pct(b.pao)] : [])]));
  t.classList.add("breakdown-table");
  return [el("h3", {}, chart.title), root, legend, t];
}

// Grouped bars: one group per design, one bar per series.
function groupedChart(title, unitLabel, groups, series, fmt) {
  const barW = 18, inner = 4, gap = 36, left = 70, top = 20, plotH = 180;
  const groupW = series.length * (barW + inner);
  const width = Math.max(420, left + groups.length * (groupW + gap) + 20);
  const height = top + plotH + 60;
  const max = Math.max(...groups.flatMap((g) => series.map((s) => g[s.key])), 1);
  const colors = ["#2f5bd3", "#f59f00", "#e8590c", "#b42318"];
  const root = svg("svg", { class: "chart grouped", width, height, role: "img", "aria-label": title });
  root.append(svg("line", { class: "axis", x1: left - 6, y1: top + plotH, x2: width - 10, y2: top + plotH }));
  for (const f of [0, 0.5, 1]) {
    root.append(svg("text", { x: left - 10, y: top + plotH - f * plotH + 4, "text-anchor": "end" }, fmt(max * f)));
  }
  root.append(svg("text", { x: 4, y: 12 }, unitLabel));
  groups.forEach((g, i) => {
    const x0 = left + i * (groupW + gap) + gap / 2;
    series.forEach((s, j) => {
      if (g[s.key] == null) return; // no value: no bar (a zero would read as a result)
      const h = (g[s.key] / max) * plotH;
      root.append(svg("rect", { x: x0 + j * (barW + inner), y: top + plotH - h, width: barW, height: h, fill: colors[j % colors.length],
        "data-group": g.design, "data-series": s.label, "data-value": g[s.key] },
        svg("title", {}, `${g.design} ${s.label}: ${fmt(g[s.key])}`)));
    });
    root.append(svg("text", { x: x0 + groupW / 2, y: top + plotH + 18, "text-anchor": "middle" }, g.design));
  });
  const legend = el("div", { class: "legend" }, series.map((s, j) =>
    el("span", {}, el("i", { style: `background:${colors[j % colors.length]}` }), s.label)));
  return [root, legend];
}

// Per-op latency across designs: a row per op, a line per design from p50 to p99 with a
// dot at p50, on a log scale (a close takes a microsecond, an offload milliseconds).
function latencyRangeChart(latency) {
  const ops = [];
  for (const d of latency) for (const o of d.ops) if (!ops.includes(o.op)) ops.push(o.op);
  const designs = latency.map((d) => d.design);
  const lane = 7, rowH = Math.max(26, designs.length * lane + 12), left = 110, top = 24, plotW = 560;
  const width = left + plotW + 30, height = top + ops.length * rowH + 40;
  const vals = latency.flatMap((d) => d.ops.flatMap((o) => [o.p50_ns, o.p99_ns])).filter((v) => v > 0);
  const lo = Math.floor(Math.log10(Math.min(...vals, 1000) / 1000));
  const hi = Math.max(Math.ceil(Math.log10(Math.max(...vals, 1000) / 1000)), lo + 1);
  const x = (ns) => left + ((Math.log10(Math.max(ns, 1) / 1000) - lo) / (hi - lo)) * plotW;
  const colors = SERIES_COLORS;
  const root = svg("svg", { class: "chart latency-range", width, height, role: "img",
    "aria-label": "op latency, p50 to p99, per design" });
  for (let e = lo; e <= hi; e++) {
    const xx = left + ((e - lo) / (hi - lo)) * plotW;
    root.append(svg("line", { class: "axis", x1: xx, y1: top - 6, x2: xx, y2: height - 30, "stroke-dasharray": "2 3" }));
    root.append(svg("text", { x: xx, y: height - 14, "text-anchor": "middle" }, num(10 ** e)));
  }
  root.append(svg("text", { x: left + plotW / 2, y: 12, "text-anchor": "middle" }, "µs (log scale): a dot at p50, the line to p99"));
  ops.forEach((op, i) => {
    const y0 = top + i * rowH;
    root.append(svg("text", { x: left - 10, y: y0 + rowH / 2 + 4, "text-anchor": "end" }, op));
    latency.forEach((d, j) => {
      const o = d.ops.find((r) => r.op === op);
      if (!o) return;
      const y = y0 + 6 + j * lane;
      const c = colors[j % colors.length];
      root.append(svg("g", { class: "op-range", "data-op": op, "data-design": d.design,
        "data-p50": o.p50_ns / 1000, "data-p99": o.p99_ns / 1000 },
        svg("line", { x1: x(o.p50_ns), y1: y, x2: x(o.p99_ns), y2: y, stroke: c, "stroke-width": 2 }),
        svg("circle", { cx: x(o.p50_ns), cy: y, r: 3, fill: c }),
        svg("title", {}, `${d.design} ${op}: p50 ${us(o.p50_ns)} µs, p99 ${us(o.p99_ns)} µs (${o.count} calls)`)));
    });
  });
  const legend = el("div", { class: "legend" }, designs.map((d, j) =>
    el("span", {}, el("i", { style: `background:${colors[j % colors.length]}` }), d)));
  return [root, legend];
}

// ---- pages -----------------------------------------------------------------------------

function emptyState(store) {
  return el("div", { class: "empty" },
    el("h2", {}, "No runs yet"),
    el("p", {}, "This store (", el("code", {}, store), ") holds no runs. Every replay and benchmark is saved here; make one:"),
    el("pre", {}, "csd replay                 # the bundled sample under every design\n" +
      "csd ndp                    # LightFS §IV: one NDP request, four designs\n" +
      "csd replay my.trace --profile cosmos-plus --design frag-s,lightfs"),
    el("p", {}, "or start one here: ", el("a", { href: "/replay" }, "replay a trace"), ". Then reload this page."));
}

function headlineValue(x) {
  const unit = x.unit === "files" && x.value === 1 ? "file" : x.unit;
  return x.unit === "ratio" ? pct(x.value) : x.unit === "ns" ? us(x.value) + " µs" : num(Math.round(x.value)) + " " + unit;
}

function headlineText(h) {
  return h.map((x) => `${x.design} ${x.label} ${headlineValue(x)}`).join(" · ");
}

// The headline as one line per design, its figures after the design's name, so designs
// read down a column instead of running together in one paragraph.
function headlineLines(h) {
  const designs = [...new Set(h.map((x) => x.design))];
  return designs.map((d) => el("div", { class: "headline", "data-design": d },
    el("b", {}, d), " ", h.filter((x) => x.design === d).map((x) => `${x.label} ${headlineValue(x)}`).join(" · ")));
}

async function runsPage() {
  const data = await api("/runs");
  if (data.runs.length === 0) return show(el("h1", {}, "Runs"), emptyState(data.store));
  const cols = [
    { label: "run", key: (r) => Number(r.id.slice(1)), text: (r) => el("a", { href: "/runs/" + r.id }, r.id) },
    { label: "kind", key: (r) => r.kind, text: (r) => (r.sweep
      ? [r.kind, " · ", el("a", { href: "/sweeps/" + encodeURIComponent(r.sweep.sweep) }, r.sweep.sweep)]
      : r.kind) },
    { label: "trace", cls: "trace", key: (r) => (r.trace ? r.trace.name : ""), text: (r) => (r.trace ? r.trace.name : "–") },
    { label: "profile", key: (r) => r.profile, text: (r) => r.profile },
    { label: "designs", cls: "designs", key: (r) => r.designs.join(","), text: (r) => r.designs.join(", ") },
    { label: "seed", key: (r) => r.seed, text: (r) => r.seed },
    { label: "stored (UTC)", key: (r) => r.stored_at, text: (r) => when(r.stored_at) },
    { label: "headline", key: (r) => headlineText(r.headline), text: (r) => headlineLines(r.headline) },
  ];
  let sortBy = 0, desc = true;
  // A sweep's points are listed on its own page; here they would bury every other run.
  const points = data.runs.filter((r) => r.sweep).length;
  let withPoints = points === data.runs.length;
  const t = el("table", { id: "runs" });
  const compare = el("p", { class: "muted" }, "Compare two runs: tick two boxes.");
  const picked = new Set();
  function render() {
    const rows = data.runs.filter((r) => withPoints || !r.sweep).sort((a, b) => {
      const ka = cols[sortBy].key(a), kb = cols[sortBy].key(b);
      return (ka < kb ? -1 : ka > kb ? 1 : 0) * (desc ? -1 : 1);
    });
    const head = el("tr", {}, el("th", {}, ""), cols.map((c, i) => el("th", {
      class: "sortable text" + (i === sortBy ? (desc ? " sorted-desc" : " sorted-asc") : ""),
      onclick: () => { if (sortBy === i) desc = !desc; else { sortBy = i; desc = false; } render(); },
    }, c.label)));
    const body = rows.map((r) => el("tr", {},
      el("td", {}, el("input", { type: "checkbox", "data-run": r.id, onchange: (e) => {
        if (e.target.checked) picked.add(r.id); else picked.delete(r.id);
        const ids = [...picked].sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
        compare.replaceChildren(ids.length === 2
          ? el("a", { href: `/compare/${ids[0]}/${ids[1]}` }, `compare ${ids[0]} with ${ids[1]}`)
          : "Compare two runs: tick two boxes.");
      } })),
      cols.map((c) => el("td", { class: c.cls ? "text " + c.cls : "text" }, c.text(r)))));
    t.replaceChildren(el("thead", {}, head), el("tbody", {}, body));
    for (const box of t.querySelectorAll("input[data-run]")) box.checked = picked.has(box.dataset.run);
  }
  render();
  const sweeps = await api("/sweeps");
  const sweepList = sweeps.length === 0 ? [] : [el("h2", {}, "Sweeps"),
    table(["sweep", "points stored"], sweeps.map((w) => [
      el("a", { href: "/sweeps/" + encodeURIComponent(w.name), "data-sweep": w.name }, w.name),
      `${w.stored} of ${w.points}`]), { id: "sweeps" })];
  const pointsToggle = points === 0 || points === data.runs.length ? null : el("p", {},
    el("label", {}, el("input", { type: "checkbox", id: "with-points", onchange: (e) => { withPoints = e.target.checked; render(); } }),
      ` also list the ${points} run(s) that are sweep points`));
  show(el("h1", {}, "Runs"), el("p", { class: "muted" }, `${data.runs.length} run(s) in ${data.store}`),
    sweepList, sweepList.length ? el("h2", {}, "Runs") : null, pointsToggle, t, compare);
}

// ---- sweeps ----------------------------------------------------------------------------

function lineChart(title, xs, series, fmt) {
  const left = 80, top = 20, plotW = Math.max(360, xs.length * 90), plotH = 220;
  const width = left + plotW + 30, height = top + plotH + 50;
  const vals = series.flatMap((s) => s.cells.filter(Boolean).map((c) => c.mean));
  const max = Math.max(...vals, 0), min = Math.min(...vals, 0);
  const span = max - min || 1;
  const x = (i) => left + (xs.length === 1 ? plotW / 2 : (i / (xs.length - 1)) * plotW);
  const y = (v) => top + plotH - ((v - min) / span) * plotH;
  const colors = SERIES_COLORS;
  const root = svg("svg", { class: "chart sweep", width, height, role: "img", "aria-label": title });
  root.append(svg("line", { class: "axis", x1: left - 6, y1: top + plotH, x2: left + plotW + 10, y2: top + plotH }));
  root.append(svg("line", { class: "axis", x1: left - 6, y1: top, x2: left - 6, y2: top + plotH }));
  for (const f of [0, 0.5, 1]) {
    root.append(svg("text", { x: left - 10, y: y(min + f * span) + 4, "text-anchor": "end" }, fmt(min + f * span)));
  }
  xs.forEach((v, i) => root.append(svg("text", { x: x(i), y: top + plotH + 18, "text-anchor": "middle" }, v)));
  series.forEach((s, j) => {
    const color = colors[j % colors.length];
    const pts = s.cells.map((c, i) => c && [x(i), y(c.mean)]).filter(Boolean);
    const g = svg("g", { class: "series", "data-series": s.name });
    if (pts.length > 1) g.append(svg("polyline", { points: pts.map((p) => p.join(",")).join(" "), fill: "none", stroke: color, "stroke-width": 2 }));
    s.cells.forEach((c, i) => {
      if (!c) return;
      g.append(svg("circle", { cx: x(i), cy: y(c.mean), r: 4, fill: color, "data-x": xs[i], "data-value": c.mean },
        svg("title", {}, `${s.name} at ${xs[i]}: ${fmt(c.mean)} (${c.runs.join(", ")})`)));
    });
    root.append(g);
  });
  const legend = el("div", { class: "legend" }, series.map((s, j) =>
    el("span", {}, el("i", { style: `background:${colors[j % colors.length]}` }), s.name)));
  return [root, legend];
}

// A sweep: one metric across one swept axis, a line per design (and per value of every
// other varied axis but the seed); the server builds the table, the mean over seeds with
// their spread, so the CLI prints what the page draws.
async function sweepPage(name) {
  const base = "/sweeps/" + encodeURIComponent(name);
  let page = await api(base);
  const holder = el("div", { id: "sweep-chart" });
  const plain = (v) => Math.abs(v) >= 1000 ? num(Math.round(v)) : Number(v.toPrecision(4)).toString();
  // PAO as a percentage and nanoseconds as microseconds, as on every other page.
  const fmtFor = (metric) => {
    const m = inUs(metric);
    return metric === "pao" ? (v) => Number((v * 100).toPrecision(3)) + "%"
      : m.unit ? (v) => plain(m.scale(v)) + " " + m.unit : plain;
  };
  function render() {
    const { xs, series, axis, metric } = page.table;
    const fmt = fmtFor(metric);
    const rows = series.map((s) => [s.name, ...s.cells.map((c) => c === null ? "–" : el("span", {},
      fmt(c.mean), c.runs.length > 1 ? el("span", { class: "muted" }, ` (${fmt(c.min)}–${fmt(c.max)})`) : null, " ",
      ...c.runs.map((r) => el("a", { href: "/runs/" + r }, r + " "))))]);
    holder.replaceChildren(el("h3", {}, `${metric} by ${axis}`), ...lineChart(`${metric} by ${axis}`, xs, series, fmt),
      table([axis + " →", ...xs], rows, { id: "sweep-table" }));
  }
  async function choose(axis, metric) {
    page = await api(`${base}?axis=${encodeURIComponent(axis)}&metric=${encodeURIComponent(metric)}`);
    render();
  }
  const pick = (label, id, options, value, set) => el("label", {}, label + " ",
    el("select", { id, onchange: (e) => set(e.target.value) },
      options.map((o) => { const opt = el("option", { value: o }, o); if (o === value) opt.selected = true; return opt; })));
  render();
  show(el("h1", {}, `Sweep ${page.name}`),
    el("p", { class: "muted" }, `${page.stored} of ${page.points} point(s) stored here` +
      (page.stored < page.points ? " (run the sweep again, or import the other shards, for the rest)" : "")),
    el("p", {},
      pick("metric", "sweep-metric", page.metrics, page.table.metric, (v) => choose(page.table.axis, v)), " ",
      pick("axis", "sweep-axis", page.axes.map((a) => a.axis), page.table.axis, (v) => choose(v, page.table.metric))),
    holder);
}

async function runPage(id) {
  const { run, view } = await api("/runs/" + encodeURIComponent(id));
  const parts = [
    el("h1", {}, `Run ${run.id}`),
    el("p", { class: "muted" }, `${run.kind}` + (run.trace ? ` of ${run.trace.name}` : "") +
      ` · profile ${run.profile} · seed ${run.seed} · csd ${run.csd_version} · stored ${when(run.stored_at)} UTC`),
  ];
  if (run.sweep) parts.push(el("p", { id: "sweep-of" }, "A point of sweep ",
    el("a", { href: "/sweeps/" + encodeURIComponent(run.sweep.sweep) }, run.sweep.sweep), ": ",
    run.sweep.params.map(([a, v]) => `${a}=${v}`).join(" ")));
  if (view.unreadable) parts.push(el("p", { class: "error" }, `This run's report cannot be charted: ${view.unreadable}.`));
  if (view.repro) parts.push(...reproTable(view.repro));
  if (view.breakdowns.length) {
    const offload = view.breakdowns.some((c) => c.bars.some((b) => b.pao != null));
    parts.push(el("h2", {}, offload ? "Latency breakdown of offload requests" : "Latency breakdown"),
      el("p", { class: "muted" }, offload
        ? "Mean per-file latency by stage; PAO = time spent on anything but reading and computing, as a share of the total (LightFS Fig. 3)."
        : "Where each invocation's latency went: flash reads, device or host compute, writes, DMA and command handling."));
    for (const c of view.breakdowns) parts.push(...breakdownChart(c));
  }
  if (view.fsync.length) {
    // fsync and fdatasync (SQLite commits with the latter): a group per design and call,
    // named by the call only when the run has both.
    const calls = [...new Set(view.fsync.map((f) => f.call))];
    const both = calls.length > 1;
    parts.push(el("h2", {}, `${calls.join(" and ")} tail latency`));
    const series = [
      { key: "p50_ns", label: "p50" }, { key: "p99_ns", label: "p99" },
      { key: "p9999_ns", label: "p99.99" }, { key: "max_ns", label: "max" },
    ];
    const groups = view.fsync.map((f) => ({ ...f, design: both ? `${f.design} ${f.call}` : f.design }));
    parts.push(...groupedChart(`${calls.join(" and ")} latency`, "µs", groups, series, us));
    parts.push(table(["design", "call", "calls", "p50 µs", "p99 µs", "p99.99 µs", "max µs"],
      view.fsync.map((f) => [f.design, f.call, f.count, us(f.p50_ns), us(f.p99_ns), us(f.p9999_ns), us(f.max_ns)])));
  }
  if (view.reduction.length) {
    parts.push(el("h2", {}, "Replay reduction"));
    parts.push(...groupedChart("replay reduction", "%", view.reduction.map((r) => ({ design: r.design, v: r.reduction * 100 })),
      [{ key: "v", label: "reduction" }], (x) => x.toFixed(1)));
    parts.push(table(["design", "reduction"], view.reduction.map((r) => [r.design, pct(r.reduction)])));
  }
  for (const c of view.charts) {
    parts.push(el("h2", {}, c.title[0].toUpperCase() + c.title.slice(1)));
    const series = c.series.map((label, j) => ({ key: "s" + j, label }));
    const groups = c.groups.map((g) => Object.assign({ design: g.design },
      ...g.values.map((v, j) => ({ ["s" + j]: v }))));
    const fmt = (x) => (x == null ? "–" : x >= 100 ? num(Math.round(x)) : x.toFixed(2));
    parts.push(...groupedChart(c.title, c.unit, groups, series, fmt));
    parts.push(table(["config", ...c.series.map((s) => `${s} (${c.unit})`)],
      c.groups.map((g) => [g.design, ...g.values.map(fmt)])));
  }
  if (view.latency.length) {
    // Side by side where the page is wide enough, so one op's row reads across designs.
    parts.push(el("h2", {}, "Op latency percentiles"), ...latencyRangeChart(view.latency), el("div", { class: "side-by-side" },
      view.latency.map((d) => el("div", { "data-design": d.design }, el("h3", {}, d.design),
        table(["op", "count", "failed", "p50 µs", "p99 µs", "p99.9 µs", "max µs"],
          d.ops.map((o) => [o.op, o.count, o.failed, us(o.p50_ns), us(o.p99_ns), us(o.p999_ns), us(o.max_ns)]))))));
  }
  if (view.device.length) {
    parts.push(el("h2", {}, "Device counters"));
    const names = view.device[0].counters.map((c) => c[0]);
    parts.push(table(["counter", ...view.device.map((d) => d.design)],
      names.map((n) => [n, ...view.device.map((d) => { const c = d.counters.find((c) => c[0] === n); return c ? num(c[1]) : "–"; })])));
  }
  if (!view.unreadable && !view.repro && !view.breakdowns.length && !view.latency.length && !view.charts.length) {
    parts.push(el("p", { class: "muted" }, "This kind of run has no charts yet; its report follows."));
  }
  parts.push(el("details", {}, el("summary", {}, "report (JSON, as --json prints it)"),
    el("pre", {}, JSON.stringify(run.report, null, 2))));
  show(parts);
}

// csd repro: one line per paper figure, linked to the run of the experiment behind it.
function reproTable(r) {
  const judged = r.lines.filter((l) => l.verdict === "pass" || l.verdict === "fail");
  const pass = judged.filter((l) => l.verdict === "pass").length;
  const mark = { pass: "✓", fail: "✗", input: "input", "not-modelled": "not modelled" };
  const withUnit = (l, t) => (l.unit && t !== "-" && l.check.kind !== "trend" ? `${t} ${l.unit}` : t);
  const rows = r.lines.map((l) => {
    const exp = l.experiment == null ? null : r.experiments[l.experiment];
    const link = exp && exp.run ? el("a", { href: `/runs/${exp.run}` }, exp.run) : "–";
    return [l.paper, l.figure, l.what, withUnit(l, l.paper_text), withUnit(l, l.ours_text),
      l.ratio == null ? "–" : l.ratio.toFixed(2),
      el("span", { class: "verdict " + l.verdict, title: l.lacks ? `${l.id}: ${l.lacks}` : l.id }, mark[l.verdict] || l.verdict), link];
  });
  // Each ✗'s cause once, with the lines it explains, as `csd repro` prints them.
  const causes = [];
  for (const l of r.lines.filter((l) => l.lacks)) {
    const c = causes.find((c) => c.why === l.lacks);
    if (c) c.ids.push(l.id); else causes.push({ why: l.lacks, ids: [l.id] });
  }
  const parts = [el("h2", {}, "The papers' figures, re-measured"),
    el("p", { class: "muted" }, `${pass} of ${judged.length} judged lines within ±15 % or on the paper's trend; ` +
      "input: the paper's value is an input of the model, never a pass."),
    table(["paper", "figure", "what", "paper", "ours", "ratio", "", "run"], rows, { id: "repro" })];
  if (causes.length) {
    parts.push(el("h3", {}, "What each ✗ lacks"),
      el("ul", { id: "repro-causes" }, ...causes.map((c) => el("li", {}, el("code", {}, c.ids.join(", ")), ": " + c.why))));
  }
  return parts;
}

async function comparePage(a, b) {
  const d = await api(`/runs/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}`);
  const parts = [el("h1", {}, `${d.a.id} → ${d.b.id}`),
    el("p", { class: "muted" }, `${d.a.id}: ${d.a.profile}, ${d.a.trace ? d.a.trace.name : d.a.kind} · ${d.b.id}: ${d.b.profile}, ${d.b.trace ? d.b.trace.name : d.b.kind}`)];
  if (!d.designs.length) parts.push(el("p", {}, "The two runs share no design (runs of different kinds, or of csd ndp at different data points, never do), so there is nothing to compare."));
  // The first metric each design reports (a replay's duration, an NDP request's latency)
  // side by side, so which run is faster under which design shows at a glance.
  const lead = d.designs.length && d.designs[0].metrics.length ? d.designs[0].metrics[0].metric : null;
  const leading = d.designs.filter((des) => des.metrics.length && des.metrics[0].metric === lead);
  if (leading.length) {
    const { name, unit, scale } = inUs(lead);
    parts.push(el("div", { id: "compare-chart" }, el("h3", {}, `${name} by design`),
      groupedChart(`${name}: ${d.a.id} against ${d.b.id}`, unit,
        leading.map((des) => ({ design: des.design, a: scale(des.metrics[0].a), b: scale(des.metrics[0].b) })),
        [{ key: "a", label: d.a.id }, { key: "b", label: d.b.id }], (x) => (x >= 100 ? num(Math.round(x)) : x.toFixed(2)))));
  }
  const shown = (m) => {
    const { name, unit } = inUs(m.metric);
    return unit
      ? { label: `${name} (${unit})`, f: (x) => (x === null ? "–" : us(x)) }
      : { label: name, f: (x) => (x === null ? "–" : num(x)) };
  };
  for (const des of d.designs) {
    parts.push(el("h2", {}, des.design), table(["metric", d.a.id, d.b.id, "change", "relative"],
      des.metrics.map((m) => {
        const { label, f } = shown(m);
        return [label, f(m.a), f(m.b),
          // Coloured by better or worse (throughput up is good, latency up is bad), not by sign.
          el("span", { class: m.better === true ? "better" : m.better === false ? "worse" : "" }, (m.delta > 0 ? "+" : "") + f(m.delta)),
          m.relative === null ? "–" : (m.relative > 0 ? "+" : "") + pct(m.relative)];
      })));
  }
  show(parts);
}

async function replayPage() {
  const c = await api("/traces");
  const traces = [...c.samples.map((s) => ({ value: s, label: `${s} (bundled sample)` })),
    ...c.stored.map((t) => ({ value: t.id, label: `${t.name} (stored, ${t.bytes} B)` }))];
  const status = el("p", { class: "error" });
  const form = el("form", { class: "replay", onsubmit: async (e) => {
    e.preventDefault();
    const f = new FormData(form);
    const designs = f.getAll("design");
    try {
      const r = await api("/replays", {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ trace: f.get("trace"), profile: f.get("profile"), designs,
          seed: Number(f.get("seed")), mode: f.get("mode"), offload: f.get("offload") || null,
          lenient: f.get("lenient") === "on" }),
      });
      history.pushState({}, "", "/replays/" + r.job);
      route();
    } catch (err) { status.textContent = err.message; }
  } },
    el("label", { for: "trace" }, "trace"),
    el("select", { name: "trace", id: "trace" }, traces.map((t) => el("option", { value: t.value }, t.label))),
    el("label", { for: "profile" }, "device profile"),
    el("select", { name: "profile", id: "profile" }, c.profiles.map((p) => el("option", { value: p }, p))),
    el("label", {}, "designs"),
    el("div", { class: "designs" }, c.designs.map((d) => el("label", {},
      el("input", { type: "checkbox", name: "design", value: d, checked: c.default_designs.includes(d) ? "" : undefined }), " " + d))),
    el("label", { for: "offload" }, "offload plan"),
    el("select", { name: "offload", id: "offload" }, el("option", { value: "" }, "none: replay the trace as recorded"),
      c.plans.map((p) => el("option", { value: p }, `${p}: fold its scans into ndp requests (csd replay --offload)`))),
    el("label", {}, el("input", { type: "checkbox", name: "lenient", id: "lenient" }),
      " skip and count ops csd does not know, instead of failing (csd replay --lenient)"),
    el("label", { for: "mode" }, "pace"),
    el("select", { name: "mode", id: "mode" }, el("option", { value: "afap" }, "as fast as possible"), el("option", { value: "timed" }, "timed (honour gaps)")),
    el("label", { for: "seed" }, "seed"),
    el("input", { name: "seed", id: "seed", type: "number", value: "1", min: "0" }),
    el("p", {}, el("button", { type: "submit" }, "replay")), status);
  show(el("h1", {}, "Replay a trace"),
    el("p", { class: "muted" }, "Store your own traces with ", el("code", {}, "csd trace add my.trace"), "."), form);
}

async function jobPage(id) {
  const job = await api("/replays/" + encodeURIComponent(id));
  const p = job.progress;
  const parts = [el("h1", {}, `Replay ${job.id}`),
    el("p", { class: "muted" }, `${job.request.trace}${job.request.offload ? " offloaded by " + job.request.offload : ""} · ${job.request.profile} · ${job.request.designs.join(", ")} · seed ${job.request.seed}`)];
  if (job.state === "queued") {
    parts.push(el("p", {}, "Waiting for a free core (replays run one per core)…"));
    setTimeout(() => { if (location.pathname === "/replays/" + id) route(); }, 400);
  } else if (job.state === "running") {
    parts.push(el("p", {}, p.designs ? `${p.design} (${p.design_index + 1} of ${p.designs}): ${p.events} of ${p.of} events` : "starting…"),
      el("progress", { max: Math.max(p.of, 1), value: p.events }));
    setTimeout(() => { if (location.pathname === "/replays/" + id) route(); }, 400);
  } else if (job.state === "done") {
    parts.push(el("p", {}, "Done: ", el("a", { href: "/runs/" + job.run, id: "job-run" }, `run ${job.run}`)));
    show(parts);
    return runPage(job.run).then(() => document.getElementById("main").prepend(...parts));
  } else {
    parts.push(el("p", { class: "error" }, "Failed: " + job.error));
  }
  show(parts);
}

async function route() {
  const path = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (path.length === 0) await runsPage();
    else if (path[0] === "runs" && path.length === 2) await runPage(path[1]);
    else if (path[0] === "compare" && path.length === 3) await comparePage(path[1], path[2]);
    else if (path[0] === "replay" && path.length === 1) await replayPage();
    else if (path[0] === "replays" && path.length === 2) await jobPage(path[1]);
    else if (path[0] === "sweeps" && path.length === 2) await sweepPage(path[1]);
    else show(el("p", { class: "error" }, "No such page."));
    document.body.dataset.ready = "1";
  } catch (e) {
    show(el("h1", {}, "Error"), el("p", { class: "error", id: "error" }, e.message), el("p", {}, el("a", { href: "/" }, "back to the runs")));
    document.body.dataset.ready = "1";
  }
}

window.addEventListener("popstate", route);
route();
