// xir's partition report: draws the IR graph with dagre (inlined above), module boxes that
// collapse, search, and the node details. The data is the JSON in #xir-data (lowering/html_report.py).
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("xir-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const BUDGET = 260;          // a graph with more visible items opens with module boxes collapsed
  const MAX_VISIBLE = 900;     // "expand all", a search, #node= open boxes while at most this many items show
  const DAGRE_MAX = 1500;      // more visible items: a plain layered layout instead of dagre's, which is
                               // slow there and recurses along paths (a chain of 1,800 nodes overflowed
                               // the browser's stack)
  const LAYERED = { margin: 20, nodesep: 18, ranksep: 30, rowsep: 12, wrap: 40 };
  const MAX_CHARS = 46;        // longest text line in a node box
  const nodes = data.nodes;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const position = new Map(nodes.map((n, i) => [n.id, i]));  // program order: inputs, nodes, output
  const groups = new Map(data.groups.map((g) => [g.index, g]));
  const clusters = new Map(data.clusters.map((c) => [c.id, Object.assign({ children: [], members: [], all: [] }, c)]));
  for (const c of clusters.values()) if (c.parent) clusters.get(c.parent).children.push(c.id);
  for (const n of nodes) {
    if (!n.cluster) continue;
    clusters.get(n.cluster).members.push(n.id);
    for (let c = n.cluster; c; c = clusters.get(c).parent) clusters.get(c).all.push(n.id);
  }
  const collapsed = new Set();
  let zoom = 1;
  let selected = null;
  let matches = new Set();

  const svg = document.getElementById("graph");
  const canvas = document.getElementById("canvas");
  const side = document.getElementById("side");
  const note = document.getElementById("layout-note");

  function el(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function clip(text, n) {
    n = n || MAX_CHARS;
    return text.length > n ? text.slice(0, n - 1) + "\u2026" : text;
  }
  function esc(text) {
    const d = document.createElement("div");
    d.textContent = text == null ? "" : String(text);
    return d.innerHTML;
  }
  function tagOf(n) {
    return n.group === null || n.group === undefined ? "" : "tag" + n.group;
  }

  // ------------------------------------------------------------------ node boxes
  function nodeLines(n) {
    const out = [{ text: n.short, cls: "op-label", size: 7.4 }];
    if (n.kind === "op") out.push({ text: clip((n.name ? n.name + ": " : "") + n.type), cls: "type-label", size: 6.4 });
    else out.push({ text: clip(n.name + (n.kind === "input" ? ": " + n.type : "")), cls: "type-label", size: 6.4 });
    if (n.status === "outside") out.push({ text: clip("\u2717 " + n.rule + ": " + n.reason), cls: "reason-label", size: 6.1 });
    else if (n.status === "folded") out.push({ text: clip("folded into " + tagOf(n)), cls: "name-label", size: 6.1 });
    return out;
  }
  const layers = {
    clusters: el("g", { class: "clusters" }, svg),
    edges: el("g", { class: "edges" }, svg),
    titles: el("g", { class: "titles" }, svg),
    boxes: el("g", { class: "boxes" }, svg),
    nodes: el("g", { class: "nodes" }, svg),
  };
  const nodeEls = new Map();
  for (const n of nodes) {
    const lines = nodeLines(n);
    n.w = Math.ceil(Math.max(...lines.map((l) => l.text.length * l.size)) + 16);
    n.h = 8 + lines.length * 15;
    const cls = ["node", n.kind === "op" ? "op" : "io", n.status || ""].join(" ").trim();
    const g = el("g", { class: cls, id: "node-" + n.id, "data-id": n.id, "data-op": n.op, "data-status": n.status || n.kind,
                        "data-group": tagOf(n), "data-module": n.module || "" }, layers.nodes);
    if (n.rule) g.setAttribute("data-rule", n.rule);
    if (n.reason) g.setAttribute("data-reason", n.reason);
    if (n.check) g.setAttribute("data-check", n.check);
    const group = groups.get(n.group);
    const rect = el("rect", { width: n.w, height: n.h, rx: 5 }, g);
    if (group && (n.status === "delegated" || n.status === "folded")) {
      rect.setAttribute("fill", group.fill);
      rect.setAttribute("stroke", group.stroke);
      if (n.status === "folded") rect.setAttribute("stroke-dasharray", "2 2");
    }
    lines.forEach((l, i) => {
      const t = el("text", { x: 8, y: 17 + i * 15, class: l.cls }, g);
      t.textContent = l.text;
    });
    const title = el("title", {}, g);
    title.textContent = [n.line, n.module ? "module: " + n.module : "", tagOf(n) ? "delegate: " + tagOf(n) : "",
                         n.reason ? "outside: " + (n.rule ? n.rule + ": " : "") + n.reason : "",
                         n.check ? "check: " + n.check : "",
                         n.origin ? "created by pass: " + n.origin : ""].filter(Boolean).join("\n");
    g.addEventListener("click", (event) => { event.stopPropagation(); select(n.id); });
    g.style.display = "none";
    nodeEls.set(n.id, g);
  }

  // ---------------------------------------------------------------- visibility
  function hiddenByAncestor(clusterId) {
    for (let c = clusters.get(clusterId).parent; c; c = clusters.get(c).parent) if (collapsed.has(c)) return true;
    return false;
  }
  function representative(nodeId) {
    let rep = nodeId;
    for (let c = byId.get(nodeId).cluster; c; c = clusters.get(c).parent) if (collapsed.has(c)) rep = c;
    return rep;
  }
  function visibleCount() {
    let count = 0;
    for (const n of nodes) if (representative(n.id) === n.id) count++;
    for (const c of clusters.values()) if (collapsed.has(c.id) && !hiddenByAncestor(c.id)) count++;
    return count;
  }
  // open boxes (breadth first, in order) while at most `limit` items stay visible
  function expandUpTo(limit) {
    let level = [...clusters.values()].filter((c) => !c.parent).map((c) => c.id);
    while (level.length) {
      const next = [];
      for (const id of level) {
        if (collapsed.has(id)) {
          collapsed.delete(id);
          if (visibleCount() > limit) { collapsed.add(id); continue; }
        }
        next.push(...clusters.get(id).children);
      }
      level = next;
    }
  }
  // open the boxes that hide a node; false when that would show too much
  function openPath(id) {
    const opened = [];
    for (let c = byId.get(id).cluster; c; c = clusters.get(c).parent) {
      if (collapsed.delete(c)) opened.push(c);
    }
    if (visibleCount() <= MAX_VISIBLE) return true;
    for (const c of opened) collapsed.add(c);
    return false;
  }
  function showNode(id) {  // open its boxes, closing others when needed
    if (!openPath(id)) {
      for (const c of clusters.keys()) collapsed.add(c);
      openPath(id);
    }
  }

  function boxLines(c) {
    const counts = new Map();
    for (const id of c.all) {
      const n = byId.get(id);
      const key = n.status === "outside" ? "outside" : n.status === "delegated" ? tagOf(n) : null;
      if (key) counts.set(key, (counts.get(key) || 0) + 1);
    }
    const parts = [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => k + " x" + v);
    return {
      title: clip("\u25b8 " + c.label + (c.type ? " (" + c.type + ")" : ""), 52),
      detail: clip(c.all.length + " nodes: " + parts.join(", "), 52),
      counts,
    };
  }

  // -------------------------------------------------------------------- layout
  // What is on screen: the visible nodes, the collapsed boxes (drawn as nodes), the open boxes
  // (drawn around their members) and the edges between the items that represent their ends.
  function visibleGraph() {
    const boxes = new Map(), open = [], items = [];
    for (const c of clusters.values()) {
      if (hiddenByAncestor(c.id)) continue;
      if (!collapsed.has(c.id)) { open.push(c.id); continue; }
      const info = boxLines(c);
      boxes.set(c.id, info);
      items.push({ id: c.id, width: Math.ceil(Math.max(info.title.length * 7.4, info.detail.length * 6.4) + 18),
                   height: 46, parent: c.parent, first: position.get(c.all[0]) });
    }
    for (const n of nodes) {
      if (representative(n.id) !== n.id) continue;
      items.push({ id: n.id, width: n.w, height: n.h, parent: n.cluster, first: position.get(n.id) });
    }
    const edges = new Map();
    for (const e of data.edges) {
      const s = representative(e.source), t = representative(e.target);
      if (s === t) continue;
      const key = s + "\u0000" + t;
      if (!edges.has(key)) edges.set(key, { v: s, w: t, items: [] });
      edges.get(key).items.push(e);
    }
    return { boxes, open, items, edges: [...edges.values()] };
  }

  // dagre's layered layout, with the open boxes as compound nodes; throws when the graph is too
  // deep for it (its recursion overflows the browser's stack)
  function dagreLayout(view) {
    const g = new dagre.graphlib.Graph({ compound: true });
    g.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 30, edgesep: 8, marginx: 20, marginy: 20 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const id of view.open) {  // outer boxes first (the clusters are ordered by depth)
      g.setNode(id, { cluster: true });
      if (clusters.get(id).parent) g.setParent(id, clusters.get(id).parent);
    }
    for (const item of view.items) {
      g.setNode(item.id, { width: item.width, height: item.height });
      if (item.parent) g.setParent(item.id, item.parent);
    }
    for (const e of view.edges) g.setEdge(e.v, e.w, { items: e.items });
    dagre.layout(g);
    const placed = new Map(view.items.map((item) => [item.id, g.node(item.id)]));
    const depth = (id) => { let d = 0; for (let c = clusters.get(id).parent; c; c = clusters.get(c).parent) d++; return d; };
    const boxes = view.open.map((id) => [id, g.node(id)]).filter(([, v]) => v).sort((a, b) => depth(a[0]) - depth(b[0]));
    const edges = g.edges().map((ge) => ({ v: ge.v, w: ge.w, points: g.edge(ge).points || [],
                                           items: g.edge(ge).items }));
    return { placed, boxes, edges, width: g.graph().width, height: g.graph().height };
  }

  // A plain layered layout for graphs dagre cannot take (too many items, or too deep): each item
  // one layer below the lowest item it reads (program order breaks cycles through collapsed
  // boxes), a layer ordered by where its items' inputs sit and wrapped into rows of at most WRAP
  // items. Linear in the graph's size. Open boxes are not drawn: their members need not be
  // next to each other here.
  function layeredLayout(view) {
    const items = view.items.slice().sort((a, b) => a.first - b.first);
    const byItem = new Map(items.map((item) => [item.id, item]));
    const inputs = new Map();
    for (const e of view.edges) {
      if (byItem.get(e.v).first >= byItem.get(e.w).first) continue;
      if (!inputs.has(e.w)) inputs.set(e.w, []);
      inputs.get(e.w).push(e.v);
    }
    const layerOf = new Map(), layers = [];
    for (const item of items) {
      const layer = (inputs.get(item.id) || []).reduce((most, v) => Math.max(most, layerOf.get(v) + 1), 0);
      layerOf.set(item.id, layer);
      (layers[layer] = layers[layer] || []).push(item);
    }
    const placed = new Map();
    const centre = (item) => {
      const xs = (inputs.get(item.id) || []).map((v) => placed.get(v).x);
      return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : -Infinity;
    };
    let y = LAYERED.margin, left = 0, right = 0;
    for (const layer of layers) {
      const keyed = layer.map((item) => [centre(item), item]).sort((a, b) => a[0] - b[0] || a[1].first - b[1].first);
      for (let start = 0; start < keyed.length; start += LAYERED.wrap) {
        const row = keyed.slice(start, start + LAYERED.wrap).map(([, item]) => item);
        const width = row.reduce((sum, item) => sum + item.width, 0) + (row.length - 1) * LAYERED.nodesep;
        const height = Math.max(...row.map((item) => item.height));
        let x = -width / 2;
        for (const item of row) {
          placed.set(item.id, { x: x + item.width / 2, y: y + height / 2, width: item.width, height: item.height });
          x += item.width + LAYERED.nodesep;
        }
        left = Math.min(left, -width / 2);
        right = Math.max(right, width / 2);
        y += height + LAYERED.rowsep;
      }
      y += LAYERED.ranksep - LAYERED.rowsep;
    }
    const shift = LAYERED.margin - left;
    for (const v of placed.values()) v.x += shift;
    const edges = view.edges.map((e) => ({
      v: e.v, w: e.w, items: e.items,
      points: edgePoints(placed.get(e.v), placed.get(e.w), layerOf.get(e.w) - layerOf.get(e.v)),
    }));
    return { placed, boxes: [], edges, width: right - left + 2 * LAYERED.margin,
             height: y - LAYERED.ranksep + LAYERED.margin };
  }
  // from the bottom of s to the top of t; an edge that skips layers bends out to the right, past
  // the items between (in a chain, they are in one column)
  function edgePoints(s, t, span) {
    const from = { x: s.x, y: s.y + s.height / 2 }, to = { x: t.x, y: t.y - t.height / 2 };
    if (span === 1) return [from, to];
    const out = Math.max(s.x + s.width / 2, t.x + t.width / 2) + 16 + 3 * Math.min(Math.abs(span), 60);
    return [from, { x: out, y: from.y + 12 }, { x: out, y: to.y - 12 }, to];
  }

  // dagre's layout, or why there is none
  function tryDagre(view) {
    if (view.items.length > DAGRE_MAX) {
      return { why: view.items.length + " items are more than dagre lays out (" + DAGRE_MAX + ")" };
    }
    try {
      return { laid: dagreLayout(view) };
    } catch (error) {
      return { why: "dagre failed: " + error.message, failed: true };
    }
  }

  function render() {
    let view = visibleGraph(), result = tryDagre(view);
    const notes = [];
    if (result.failed && view.open.length) {  // too deep with these boxes open: every box collapsed
      for (const id of clusters.keys()) collapsed.add(id);
      notes.push("every module box collapsed (" + result.why + ")");
      view = visibleGraph();
      result = tryDagre(view);
    }
    if (!result.laid) {
      notes.push("a plain layered layout" + (view.open.length ? " (open module boxes not drawn)" : "") + ": " + result.why);
    }
    note.textContent = note.title = notes.join("; ");
    draw(view, result.laid || layeredLayout(view));
  }

  function draw(view, laid) {
    for (const layer of [layers.clusters, layers.edges, layers.titles, layers.boxes]) layer.textContent = "";
    // expanded module boxes, outer ones first
    for (const [id, v] of laid.boxes) {
      const c = clusters.get(id);
      const cg = el("g", { class: "cluster", id: "cluster-" + id, "data-path": c.path }, layers.clusters);
      el("rect", { x: v.x - v.width / 2, y: v.y - v.height / 2, width: v.width, height: v.height }, cg);
      // the title sits on the top border, as a legend (dagre leaves little room inside the box)
      const text = "\u25be " + clip(c.label + (c.type ? " (" + c.type + ")" : ""), Math.max(8, Math.floor((v.width - 16) / 6.4)));
      const tg = el("g", { class: "cluster-legend", "data-title-of": id }, layers.titles);  // above the edges
      el("rect", { x: v.x - v.width / 2 + 6, y: v.y - v.height / 2 - 6, width: text.length * 6.4 + 6, height: 12,
                   class: "cluster-title-bg" }, tg);
      const t = el("text", { x: v.x - v.width / 2 + 9, y: v.y - v.height / 2 + 4, class: "cluster-title" }, tg);
      t.textContent = text;
      const title = el("title", {}, t);
      title.textContent = c.path + " \u2014 click to collapse";
      t.addEventListener("click", (event) => { event.stopPropagation(); collapsed.add(id); render(); });
    }
    // edges
    for (const edge of laid.edges) {
      const pts = edge.points;
      if (!pts.length) continue;
      let d = "M" + pts[0].x + "," + pts[0].y;
      if (pts.length === 2) d += " L" + pts[1].x + "," + pts[1].y;
      for (let i = 1; i < pts.length - 1; i++) {
        const p = pts[i], q = pts[i + 1];
        const mx = i === pts.length - 2 ? q.x : (p.x + q.x) / 2, my = i === pts.length - 2 ? q.y : (p.y + q.y) / 2;
        d += " Q" + p.x + "," + p.y + " " + mx + "," + my;
      }
      const eg = el("g", { class: "edge", "data-source": edge.v, "data-target": edge.w }, layers.edges);
      el("path", { d, class: "hit" }, eg);
      el("path", { d, "marker-end": "url(#arrow)" }, eg);
      const label = edge.items.map((e) => e.value + ": " + e.type);
      const mid = pts[Math.floor(pts.length / 2)];
      const text = el("text", { x: mid.x + 5, y: mid.y - 3 }, eg);
      text.textContent = clip(label.join(", "), 60);
      const title = el("title", {}, eg);
      title.textContent = label.join("\n");
    }
    // collapsed module boxes
    for (const [id, info] of view.boxes) {
      const v = laid.placed.get(id);
      const c = clusters.get(id);
      const bg = el("g", { class: "collapsed", id: "box-" + id, "data-path": c.path,
                           transform: "translate(" + (v.x - v.width / 2) + "," + (v.y - v.height / 2) + ")" }, layers.boxes);
      el("rect", { class: "box", width: v.width, height: v.height }, bg);
      let x = 0;
      for (const [key, count] of info.counts) {  // composition stripe: delegates' colours, outside red
        const w = v.width * count / c.all.length;
        const group = key === "outside" ? null : groups.get(Number(key.slice(3)));
        el("rect", { x, y: v.height - 6, width: w, height: 6, fill: group ? group.stroke : "#d0342c" }, bg);
        x += w;
      }
      const t1 = el("text", { x: 9, y: 17, class: "op-label" }, bg);
      t1.textContent = info.title;
      const t2 = el("text", { x: 9, y: 33, class: "type-label" }, bg);
      t2.textContent = info.detail;
      const title = el("title", {}, bg);
      title.textContent = c.path + " \u2014 click to expand";
      if ([...matches].some((m) => c.all.includes(m))) bg.classList.add("match");
      bg.addEventListener("click", (event) => { event.stopPropagation(); collapsed.delete(id); render(); });
    }
    // nodes
    for (const n of nodes) {
      const ne = nodeEls.get(n.id);
      const v = laid.placed.get(n.id);
      if (!v) { ne.style.display = "none"; continue; }
      ne.style.display = "";
      ne.setAttribute("transform", "translate(" + (v.x - v.width / 2) + "," + (v.y - v.height / 2) + ")");
    }
    svg.dataset.width = laid.width;
    svg.dataset.height = laid.height;
    svg.setAttribute("viewBox", "0 0 " + laid.width + " " + laid.height);
    applyZoom();
  }

  function applyZoom() {
    svg.setAttribute("width", Math.ceil(Number(svg.dataset.width) * zoom));
    svg.setAttribute("height", Math.ceil(Number(svg.dataset.height) * zoom));
  }
  const defs = el("defs", {}, svg);
  svg.insertBefore(defs, svg.firstChild);
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#7b8494" }, marker);

  // ------------------------------------------------------------ initial state
  function initialCollapse() {
    if (nodes.length <= BUDGET) return;
    for (const c of clusters.values()) collapsed.add(c.id);
    let visible = nodes.filter((n) => !n.cluster).length + [...clusters.values()].filter((c) => !c.parent).length;
    let level = [...clusters.values()].filter((c) => !c.parent).map((c) => c.id);
    while (level.length) {
      const next = [];
      const expandedTypes = new Set();
      for (const id of level) {
        const c = clusters.get(id);
        const key = (c.parent || "") + "/" + c.type;
        if (c.type && expandedTypes.has(key)) continue;  // a repeated block: the first one open only
        const cost = c.children.length + c.members.length - 1;
        if (visible + cost > BUDGET) continue;
        collapsed.delete(id);
        visible += cost;
        if (c.type) expandedTypes.add(key);
        next.push(...c.children);
      }
      level = next;
    }
  }

  // ----------------------------------------------------------------- details
  function select(id) {
    if (selected) nodeEls.get(selected).classList.remove("selected");
    selected = id;
    const n = byId.get(id);
    nodeEls.get(id).classList.add("selected");
    const group = groups.get(n.group);
    const rows = [
      ["op", n.op], ["result", n.types.join(", ")], ["module", n.module || "\u2014"],
      ["delegate", n.status === "delegated" ? tagOf(n) : n.status === "folded" ? "Q/DQ folded into " + tagOf(n) :
        n.kind === "op" ? "none (outside XNNPACK)" : "\u2014"],
    ];
    if (n.origin) rows.push(["created by", "pass " + n.origin]);
    let html = "<h3>" + esc(n.short) + " <small>" + esc(n.name) + "</small></h3>";
    if (n.status === "outside") html += '<p class="reason">left outside \u2014 ' + esc(n.rule) + ": " + esc(n.reason) +
        (n.check ? ' <span class="check">(check <code>' + esc(n.check) + "</code>)</span>" : "") + "</p>";
    html += "<dl>" + rows.map(([k, v]) => "<dt>" + esc(k) + "</dt><dd>" +
      (k === "delegate" && group ? '<span class="swatch" style="background:' + group.fill + ";border-color:" + group.stroke + '"></span>' : "") +
      esc(v) + "</dd>").join("") + "</dl>";
    html += "<p><b>IR</b></p><pre>" + esc(n.line) + "</pre>";
    if (n.operands && n.operands.length) html += "<p><b>reads</b></p><pre>" + esc(n.operands.join("\n")) + "</pre>";
    side.innerHTML = html;
  }

  function reveal(id) {
    const ne = nodeEls.get(id);
    if (!ne || ne.style.display === "none") return;
    const box = ne.getBBox();
    const m = /translate\(([-\d.e]+),([-\d.e]+)\)/.exec(ne.getAttribute("transform") || "");
    if (!m) return;
    const x = (Number(m[1]) + box.width / 2) * zoom, y = (Number(m[2]) + box.height / 2) * zoom;
    canvas.scrollTo({ left: Math.max(0, x - canvas.clientWidth / 2), top: Math.max(0, y - canvas.clientHeight / 2) });
  }

  // ------------------------------------------------------------------ search
  function haystack(n) {
    return [n.op, n.short, n.name, n.type, n.module, tagOf(n) ? "delegate:" + tagOf(n) + " " + tagOf(n) : "",
            n.status === "outside" ? "outside" : "", n.rule, n.check, n.reason, n.origin, n.line].filter(Boolean).join(" ").toLowerCase();
  }
  for (const n of nodes) n.hay = haystack(n);

  function search(term) {
    term = (term || "").trim().toLowerCase();
    for (const id of matches) nodeEls.get(id).classList.remove("match");
    matches = new Set();
    const count = document.getElementById("search-count");
    if (!term) {
      count.textContent = "";
      render();
      return;
    }
    const exact = term.startsWith("delegate:");
    for (const n of nodes) {
      const hit = exact ? n.hay.split(" ").includes(term) : n.hay.includes(term);
      if (hit) matches.add(n.id);
    }
    let boxed = 0;
    for (const id of matches) {  // open the boxes that hide a match, as far as the layout allows
      if (!openPath(id)) boxed++;
      nodeEls.get(id).classList.add("match");
    }
    count.textContent = matches.size + (matches.size === 1 ? " match" : " matches");
    render();
    const list = [...matches].slice(0, 300).map((id) => {
      const n = byId.get(id);
      return '<li data-id="' + id + '"><b>' + esc(n.short) + "</b> " + esc(n.name) + " <small>" +
        esc(n.status === "outside" ? "outside: " + n.reason : tagOf(n)) + "</small></li>";
    }).join("");
    side.innerHTML = "<h3>" + matches.size + " node(s) match \u201c" + esc(term) + "\u201d</h3>" +
      (boxed ? '<p class="hint">' + boxed + " of them in boxes left collapsed (outlined): click one below, " +
               "or the box, to open it.</p>" : "") +
      '<ul class="results" id="search-results">' + list + "</ul>";
    for (const li of side.querySelectorAll("li[data-id]")) {
      li.addEventListener("click", () => {
        const id = li.dataset.id;
        if (nodeEls.get(id).style.display === "none") { showNode(id); render(); }
        select(id);
        reveal(id);
      });
    }
    const first = [...matches][0];
    if (first) reveal(first);
  }

  // --------------------------------------------------------------- controls
  const input = document.getElementById("search");
  let timer = null;
  input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => search(input.value), 200); });
  function expandAll() {
    collapsed.clear();
    if (visibleCount() > MAX_VISIBLE) {
      for (const id of clusters.keys()) collapsed.add(id);
      expandUpTo(MAX_VISIBLE);
    }
  }
  document.getElementById("expand-all").addEventListener("click", () => { expandAll(); render(); });
  document.getElementById("collapse-all").addEventListener("click", () => {
    for (const c of clusters.values()) collapsed.add(c.id);
    render();
  });
  document.getElementById("zoom-in").addEventListener("click", () => { zoom = Math.min(4, zoom * 1.25); applyZoom(); });
  document.getElementById("zoom-out").addEventListener("click", () => { zoom = Math.max(0.05, zoom / 1.25); applyZoom(); });
  document.getElementById("zoom-fit").addEventListener("click", () => {
    zoom = Math.min(2, (canvas.clientWidth - 20) / Number(svg.dataset.width));
    applyZoom();
  });
  canvas.addEventListener("wheel", (event) => {
    if (!event.ctrlKey) return;
    event.preventDefault();
    zoom = Math.max(0.05, Math.min(4, zoom * (event.deltaY < 0 ? 1.1 : 1 / 1.1)));
    applyZoom();
  }, { passive: false });
  function showTab(name) {
    for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.tab === name);
    for (const p of document.querySelectorAll(".panel")) p.classList.toggle("active", p.id === "tab-" + name);
  }
  for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => showTab(b.dataset.tab));

  const legend = document.getElementById("legend");
  for (const gr of data.groups) {
    const item = document.createElement("span");
    item.className = "item";
    item.innerHTML = '<span class="swatch" style="background:' + gr.fill + ";border-color:" + gr.stroke + '"></span>' +
      esc(gr.tag) + " (" + gr.nodes + ")";
    item.title = "search the nodes of " + gr.tag;
    item.addEventListener("click", () => { input.value = "delegate:" + gr.tag; search(input.value); });
    legend.appendChild(item);
  }
  const outsideCount = nodes.filter((n) => n.status === "outside").length;
  const outsideItem = document.createElement("span");
  outsideItem.className = "item";
  outsideItem.innerHTML = '<span class="swatch outside"></span>outside XNNPACK (' + outsideCount + ")";
  outsideItem.addEventListener("click", () => { input.value = "outside"; search("outside"); });
  legend.appendChild(outsideItem);

  function fromHash() {
    const hash = location.hash.slice(1);
    const params = new Map(hash.split("&").filter(Boolean).map((kv) => {
      const i = kv.indexOf("=");
      return i < 0 ? [decodeURIComponent(kv), ""] : [decodeURIComponent(kv.slice(0, i)), decodeURIComponent(kv.slice(i + 1))];
    }));
    if (params.has("zoom") && Number(params.get("zoom")) > 0) zoom = Math.max(0.05, Math.min(4, Number(params.get("zoom"))));
    if (params.get("expand") === "all") expandAll();
    if (params.get("collapse") === "all") for (const c of clusters.values()) collapsed.add(c.id);
    const term = params.has("search") ? params.get("search") : null;
    if (params.has("tab")) { showTab(params.get("tab")); if (params.get("tab") !== "graph") return false; }
    if (hash.startsWith("pass-")) {  // a pass's diff (the summary links to them)
      showTab("passes");
      const details = document.getElementById(hash);
      if (details) { details.open = true; details.scrollIntoView(); }
      return false;  // (the graph is drawn all the same)
    }
    if (term !== null) {
      showTab("graph");
      input.value = term;
      search(term);
      return true;
    }
    if (params.has("node") && byId.has(params.get("node"))) {  // #node=n12: open, select and show it
      const id = params.get("node");
      showNode(id);
      render();
      select(id);
      reveal(id);
      return true;
    }
    return false;
  }
  window.addEventListener("hashchange", () => { if (!fromHash()) render(); });

  initialCollapse();
  if (!fromHash()) render();
  document.body.dataset.rendered = "true";
})();
