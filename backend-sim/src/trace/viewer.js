// The timeline page's drawing code (embedded by html.rs): reads the trace events from the
// page's JSON block and draws one row per track, a box per complete event and an arrow per
// flow. When done it sets data-tracks-drawn on <body> to the number of rows drawn.
(function () {
  "use strict";
  var doc = JSON.parse(document.getElementById("trace-data").textContent);
  var events = doc.traceEvents || doc;
  var procs = {}, names = {}, order = [], seen = {};
  events.forEach(function (e) {
    if (e.ph === "M" && e.name === "process_name") procs[e.pid] = e.args.name;
    if (e.ph === "M" && e.name === "thread_name") names[e.pid + "/" + e.tid] = e.args.name;
  });
  var t0 = Infinity, t1 = -Infinity;
  events.forEach(function (e) {
    if (e.ph === "M") return;
    var k = e.pid + "/" + e.tid;
    if (!seen[k]) { seen[k] = true; order.push(k); }
    t0 = Math.min(t0, e.ts);
    t1 = Math.max(t1, e.ts + (e.dur || 0));
  });
  order.sort(function (a, b) {
    var pa = a.split("/"), pb = b.split("/");
    return (pa[0] - pb[0]) || (pa[1] - pb[1]);
  });
  if (!isFinite(t0)) { t0 = 0; t1 = 1; }
  var span = Math.max(t1 - t0, 1e-3);
  var LABEL = 300, ROW = 34, W = Math.max(900, window.innerWidth - 20), PLOT = W - LABEL - 20;
  var NS = "http://www.w3.org/2000/svg";
  var svg = document.createElementNS(NS, "svg");
  svg.setAttribute("width", W);
  svg.setAttribute("height", 40 + ROW * order.length);
  function el(tag, attrs, parent) {
    var n = document.createElementNS(NS, tag);
    for (var a in attrs) n.setAttribute(a, attrs[a]);
    (parent || svg).appendChild(n);
    return n;
  }
  var defs = el("defs", {});
  var m = el("marker", { id: "head", markerWidth: 8, markerHeight: 8, refX: 7, refY: 4, orient: "auto" }, defs);
  el("path", { d: "M0,0 L8,4 L0,8 z", fill: "#c0392b" }, m);
  function x(ts) { return LABEL + (ts - t0) / span * PLOT; }
  var row = {};
  var drawn = 0;
  order.forEach(function (k, i) {
    var y = 30 + i * ROW;
    row[k] = y;
    var g = el("g", { "data-track": k });
    el("rect", { x: 0, y: y, width: W, height: ROW - 2, fill: i % 2 ? "#f4f6f8" : "#ffffff" }, g);
    var p = k.split("/")[0];
    var t = el("text", { x: 4, y: y + 20, "font-size": 12, "font-family": "sans-serif" }, g);
    t.textContent = (procs[p] || ("pid " + p)) + " · " + (names[k] || ("thread " + k.split("/")[1]));
    drawn++;
  });
  var colors = { record: "#2e86de", wait: "#f39c12", host: "#8e44ad", memory: "#16a085", event: "#27ae60" };
  events.forEach(function (e) {
    if (e.ph !== "X") return;
    var k = e.pid + "/" + e.tid, y = row[k];
    var kind = (e.name || "").split(" ")[0];
    var r = el("rect", {
      x: x(e.ts), y: y + 4, width: Math.max(2, (e.dur || 0) / span * PLOT), height: ROW - 10,
      fill: colors[kind] || (colors[e.cat] || "#7f8c8d"), "data-name": e.name
    });
    var tip = el("title", {}, r);
    tip.textContent = e.name + " @" + (e.ts - t0).toFixed(3) + " µs, " + (e.dur || 0).toFixed(3) + " µs " + JSON.stringify(e.args || {});
  });
  var starts = {};
  events.forEach(function (e) { if (e.ph === "s") starts[e.cat + ":" + e.id] = e; });
  var arrows = 0;
  events.forEach(function (e) {
    if (e.ph !== "f") return;
    var s = starts[e.cat + ":" + e.id];
    if (!s) return;
    el("line", {
      x1: x(s.ts), y1: row[s.pid + "/" + s.tid] + ROW / 2, x2: x(e.ts), y2: row[e.pid + "/" + e.tid] + ROW / 2,
      stroke: "#c0392b", "stroke-width": 1.5, "marker-end": "url(#head)", "data-flow": e.id
    });
    arrows++;
  });
  var axis = el("text", { x: LABEL, y: 18, "font-size": 12, "font-family": "sans-serif" });
  axis.textContent = "0 µs … " + span.toFixed(1) + " µs   (" + order.length + " tracks, " + arrows + " arrows; hover a box for details)";
  document.getElementById("timeline").appendChild(svg);
  document.body.setAttribute("data-arrows-drawn", arrows);
  document.body.setAttribute("data-tracks-drawn", drawn);
})();
