/* T2T Insights: the page's logic. Plain JavaScript, no dependencies.
 *
 * Talks to GET /api/runs and POST /api/translate (see the API contract) and
 * renders, per run: translation, n-best list, tokenization, the beam search
 * graph (SVG, zoom and pan) and three attention heatmaps.
 * All text from the API goes through textContent / createTextNode.
 */
(function () {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";

  /** Runs from /api/runs, by label. */
  const runsByLabel = new Map();

  /** Increases with every query, so a late answer of an old query is ignored. */
  let querySerial = 0;

  // ---------------------------------------------------------------- helpers

  /** An HTML element with optional class and text. */
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  /** An SVG element with attributes. */
  function svgEl(tag, attrs) {
    const node = document.createElementNS(SVG_NS, tag);
    if (attrs) {
      for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    }
    return node;
  }

  function $(id) {
    return document.getElementById(id);
  }

  /** A number with fixed decimals, or a dash for null/undefined. */
  function fixed(value, digits) {
    return typeof value === "number" && isFinite(value) ? value.toFixed(digits) : "—";
  }

  /** A string shortened to at most max characters. */
  function shorten(text, max) {
    const s = String(text);
    return s.length > max ? s.slice(0, max - 1) + "…" : s;
  }

  function clamp(value, low, high) {
    return Math.min(high, Math.max(low, value));
  }

  // ---------------------------------------------------------------- tooltip

  const tooltip = {
    node: null,

    show(text, event) {
      const tip = this.node;
      tip.textContent = text;
      tip.hidden = false;
      this.move(event);
    },

    move(event) {
      const tip = this.node;
      if (tip.hidden || !event) return;
      const pad = 14;
      let x = event.clientX + pad;
      let y = event.clientY + pad;
      const w = tip.offsetWidth;
      const h = tip.offsetHeight;
      if (x + w > window.innerWidth - 4) x = Math.max(4, event.clientX - w - pad);
      if (y + h > window.innerHeight - 4) y = Math.max(4, event.clientY - h - pad);
      tip.style.left = x + "px";
      tip.style.top = y + "px";
    },

    hide() {
      this.node.hidden = true;
    },
  };

  /**
   * Shows the tooltip over the items of container that match selector.
   * textOf(item) gives the text. One set of listeners per container.
   */
  function attachTooltip(container, selector, textOf) {
    function itemOf(event) {
      const target = event.target;
      return target && target.closest ? target.closest(selector) : null;
    }
    function onOver(event) {
      const item = itemOf(event);
      if (item && container.contains(item)) tooltip.show(textOf(item), event);
    }
    container.addEventListener("mouseover", onOver);
    container.addEventListener("mousemove", onOver);
    container.addEventListener("mouseout", (event) => {
      const item = itemOf(event);
      if (!item) return;
      const next = event.relatedTarget;
      if (next && next.closest && next.closest(selector) === item) return;
      tooltip.hide();
    });
  }

  // ---------------------------------------------------------------- messages

  function showError(text) {
    const box = $("error");
    box.textContent = text;
    box.hidden = false;
  }

  function clearError() {
    const box = $("error");
    box.textContent = "";
    box.hidden = true;
  }

  function setStatus(text) {
    $("status").textContent = text;
  }

  // ---------------------------------------------------------------- API

  /** Reads a response's JSON, or null when the body is not JSON. */
  async function readJson(response) {
    try {
      return await response.json();
    } catch (err) {
      return null;
    }
  }

  /**
   * fetch + JSON. Resolves {ok: true, data} or {ok: false, error};
   * never rejects (a network failure becomes an error message).
   */
  async function callApi(url, body) {
    const options = body === undefined
      ? { method: "GET", headers: { Accept: "application/json" } }
      : {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify(body),
        };
    let response;
    try {
      response = await fetch(url, options);
    } catch (err) {
      return { ok: false, error: "Network error: could not reach the server (" + err.message + ")." };
    }
    const data = await readJson(response);
    if (!response.ok) {
      const message = data && typeof data.error === "string"
        ? data.error
        : "HTTP " + response.status + " " + response.statusText;
      return { ok: false, error: message };
    }
    if (data === null) return { ok: false, error: "The server's answer is not JSON." };
    return { ok: true, data };
  }

  // ---------------------------------------------------------------- form

  /** Fills the two run selects from /api/runs. */
  async function loadRuns() {
    const answer = await callApi("/api/runs");
    if (!answer.ok) {
      showError("Could not load the runs: " + answer.error);
      $("translate").disabled = true;
      return;
    }
    const runs = Array.isArray(answer.data.runs) ? answer.data.runs : [];
    const runSelect = $("run");
    const compareSelect = $("compare-run");
    for (const run of runs) {
      runsByLabel.set(run.label, run);
      runSelect.appendChild(optionOf(run.label, run.label));
      compareSelect.appendChild(optionOf(run.label, run.label));
    }
    if (runs.length === 0) {
      showError("The server has no runs to translate with.");
      $("translate").disabled = true;
      return;
    }
    onRunChange();
  }

  function optionOf(value, text) {
    const option = el("option", null, text);
    option.value = value;
    return option;
  }

  /** Pre-fills beam size and alpha from the chosen run's default settings. */
  function onRunChange() {
    const run = runsByLabel.get($("run").value);
    if (!run) return;
    const settings = run.settings || {};
    $("beam_size").value = settings.beam_size !== undefined && settings.beam_size !== null
      ? String(settings.beam_size) : "";
    $("alpha").value = settings.alpha !== undefined && settings.alpha !== null
      ? String(settings.alpha) : "";
    $("run-info").textContent = describeRun(run);
  }

  /** One line about a run: model, problem, vocabulary, languages. */
  function describeRun(run) {
    const parts = [];
    if (run.model) parts.push(run.model);
    if (run.problem) parts.push(run.problem);
    if (run.vocabulary) parts.push(run.vocabulary);
    if (run.source_language || run.target_language) {
      parts.push((run.source_language || "?") + " → " + (run.target_language || "?"));
    }
    if (run.layers) parts.push((run.layers.encoder ?? "?") + "+" + (run.layers.decoder ?? "?") + " layers");
    if (run.heads) parts.push(run.heads + " heads");
    return parts.join(" · ");
  }

  /** The request body for /api/translate, without the run. */
  function readQuery() {
    const constraints = $("constraints").value
      .split(/\r?\n/)
      .map((line) => line.trim())
      .filter((line) => line.length > 0);
    return {
      sentence: $("sentence").value,
      beam_size: $("beam_size").value.trim(),
      alpha: $("alpha").value.trim(),
      prefix: $("prefix").value,
      constraints,
      decode_hparams: $("decode_hparams").value.trim(),
    };
  }

  /** Marks the page busy (or not): status text, button, stale results. */
  function setBusy(busy) {
    $("translate").disabled = busy;
    $("results").classList.toggle("stale", busy);
    $("results").setAttribute("aria-busy", busy ? "true" : "false");
    if (busy) setStatus("Translating…");
  }

  /** Sends the query for the run and the compare run, then renders. */
  async function translate() {
    const button = $("translate");
    if (button.disabled) return;
    const labels = [$("run").value];
    const compare = $("compare-run").value;
    if (compare !== "") labels.push(compare);
    const query = readQuery();
    const serial = ++querySerial;

    setBusy(true);
    tooltip.hide();
    const answers = await Promise.all(
      labels.map((label) => callApi("/api/translate", Object.assign({ run: label }, query))));
    if (serial !== querySerial) return; // a newer query owns the page
    setBusy(false);
    showAnswers(labels, answers);
  }

  /** Renders the successful answers; shows the errors of the others. */
  function showAnswers(labels, answers) {
    const results = $("results");
    results.replaceChildren();
    const errors = [];
    const done = [];
    answers.forEach((answer, index) => {
      if (answer.ok) {
        done.push({ label: labels[index], data: answer.data });
      } else {
        errors.push(index === 0 ? answer.error : "Compare run " + labels[index] + ": " + answer.error);
      }
    });
    if (errors.length) showError(errors.join("\n"));
    else clearError();

    results.classList.toggle("compare", done.length > 1);
    for (const item of done) {
      const section = el("section", "result");
      section.dataset.run = item.label;
      results.appendChild(section); // in the page first, so the graph knows its width
      renderResult(section, item.label, item.data);
    }
    if (done.length) {
      setStatus(done.map((d) => d.label + ": " + fixed(d.data.seconds, 2) + " s").join(" · "));
    } else {
      setStatus("");
    }
  }

  // ---------------------------------------------------------------- a result

  /** Fills one section.result with everything about one answer. */
  function renderResult(section, label, data) {
    const head = el("header", "result-header");
    head.appendChild(el("h2", "run-label", label));
    const run = runsByLabel.get(label);
    if (run) head.appendChild(el("p", "run-info", describeRun(run)));
    section.appendChild(head);

    section.appendChild(renderSummary(data));
    const nbest = renderNbest(data.nbest || []);
    section.appendChild(nbest);
    section.appendChild(renderTokens(data.source || {}, data.target || {}));
    const graph = renderBeamGraph(section, data);
    if (graph) linkNbestToGraph(nbest, graph);
    section.appendChild(renderAttention(data));
  }

  /** Translation, time and the settings used. */
  function renderSummary(data) {
    const box = el("div", "summary");
    const translation = el("p", "translation", data.translation ?? "");
    if (!data.translation) translation.classList.add("empty");
    box.appendChild(translation);

    const meta = el("p", "meta");
    meta.appendChild(document.createTextNode("Time: "));
    meta.appendChild(el("span", "seconds", fixed(data.seconds, 2) + " s"));
    box.appendChild(meta);

    box.appendChild(renderSettings(data.settings || {}));
    return box;
  }

  /** The decode settings as a definition list. */
  function renderSettings(settings) {
    const list = el("dl", "settings");
    const constraints = Array.isArray(settings.constraints) ? settings.constraints : [];
    const rows = [
      ["beam_size", "beam", settings.beam_size],
      ["alpha", "alpha", settings.alpha],
      ["max_decode_length", "max decode length", settings.max_decode_length],
      ["extra_length", "extra length", settings.extra_length],
      ["early_stop", "early stop", settings.early_stop],
      ["prefix", "prefix", settings.prefix ? settings.prefix : "(none)"],
      ["constraints", "constraints", constraints.length ? constraints.join(" | ") : "(none)"],
    ];
    for (const [key, name, value] of rows) {
      if (value === undefined || value === null) continue;
      const item = el("div", "setting");
      item.appendChild(el("dt", null, name));
      const dd = el("dd", null, value);
      dd.dataset.setting = key;
      item.appendChild(dd);
      list.appendChild(item);
    }
    return list;
  }

  /** The n-best list. */
  function renderNbest(nbest) {
    const box = el("div", "block nbest-block");
    box.appendChild(el("h3", null, "N-best"));
    const list = el("ol", "nbest");
    for (const entry of nbest) {
      const item = el("li");
      if (entry.node !== undefined && entry.node !== null) item.dataset.node = String(entry.node);
      const text = el("span", "text", entry.text ?? "");
      if (!entry.text) text.classList.add("empty");
      item.appendChild(text);
      const meta = el("span", "nbest-meta");
      meta.appendChild(document.createTextNode("score "));
      meta.appendChild(el("span", "score", fixed(entry.score, 4)));
      meta.appendChild(document.createTextNode(" · log_prob "));
      meta.appendChild(el("span", "log-prob", fixed(entry.log_prob, 4)));
      item.appendChild(meta);
      list.appendChild(item);
    }
    box.appendChild(list);
    return box;
  }

  /** Source and target pieces with their ids. */
  function renderTokens(source, target) {
    const box = el("div", "block tokens-block");
    box.appendChild(el("h3", null, "Tokenization"));
    box.appendChild(tokenRow("Source", "tokens-source", source));
    box.appendChild(tokenRow("Target", "tokens-target", target));
    return box;
  }

  function tokenRow(title, className, side) {
    const row = el("div", "token-row");
    row.appendChild(el("span", "token-row-title", title));
    const pieces = el("div", "tokens " + className);
    const list = Array.isArray(side.pieces) ? side.pieces : [];
    const ids = Array.isArray(side.ids) ? side.ids : [];
    list.forEach((piece, index) => {
      const span = el("span", "piece", piece);
      const id = ids[index] !== undefined ? String(ids[index]) : "?";
      span.dataset.id = id;
      span.title = "id " + id;
      pieces.appendChild(span);
    });
    row.appendChild(pieces);
    return row;
  }

  // ---------------------------------------------------------------- beam graph

  const GRAPH = { colWidth: 120, rowHeight: 24, marginX: 30, marginY: 20, radius: 6 };

  /**
   * Node positions, computed once. Column = step + 1. In a column the kept
   * nodes (root, live, finished) come first, then the pruned ones; each group
   * ordered by its parent's place, then by log_prob (best first). So the beam
   * reads as a band along the top and the pruned proposals hang below it.
   */
  function layoutBeamGraph(nodes) {
    const byId = new Map(nodes.map((node) => [node.id, node]));
    const columns = [];
    for (const node of nodes) {
      const col = (typeof node.step === "number" ? node.step : -1) + 1;
      (columns[col] = columns[col] || []).push(node);
    }
    const place = new Map(); // node id -> index in its column
    const positions = new Map();
    let tallest = 1;
    let tallestKept = 1;
    const pruned = (node) => (node.state === "pruned" ? 1 : 0);
    columns.forEach((column, col) => {
      if (!column) return;
      column.sort((a, b) => {
        const pa = place.has(a.parent) ? place.get(a.parent) : -1;
        const pb = place.has(b.parent) ? place.get(b.parent) : -1;
        return pruned(a) - pruned(b) || pa - pb
          || (b.log_prob ?? -Infinity) - (a.log_prob ?? -Infinity) || a.id - b.id;
      });
      column.forEach((node, index) => {
        place.set(node.id, index);
        positions.set(node.id, {
          x: GRAPH.marginX + col * GRAPH.colWidth,
          y: GRAPH.marginY + index * GRAPH.rowHeight,
        });
      });
      tallest = Math.max(tallest, column.length);
      tallestKept = Math.max(tallestKept, column.filter((n) => !pruned(n)).length);
    });
    const height = (rows) => GRAPH.marginY * 2 + (rows - 1) * GRAPH.rowHeight;
    return {
      byId,
      positions,
      width: GRAPH.marginX * 2 + Math.max(0, columns.length - 1) * GRAPH.colWidth + 90,
      height: height(tallest),
      keptHeight: height(tallestKept),
    };
  }

  /** The pieces from the root to a node (the root's own piece left out). */
  function pathPieces(node, byId) {
    const pieces = [];
    let current = node;
    let guard = 0;
    while (current && current.parent !== null && current.parent !== undefined && guard++ < 100000) {
      pieces.push(current.piece ?? "");
      current = byId.get(current.parent);
    }
    return pieces.reverse();
  }

  /** The tooltip text of a beam graph node. */
  function nodeTooltip(node, byId) {
    const lines = [];
    if (node.state === "root") {
      lines.push("path: (root) " + (node.piece ?? ""));
    } else {
      lines.push("path: " + pathPieces(node, byId).join(" "));
    }
    lines.push("step: " + node.step + " · piece: " + (node.piece ?? ""));
    lines.push("token id: " + (node.token ?? "—"));
    lines.push("log_prob: " + fixed(node.log_prob, 4));
    if (node.score !== null && node.score !== undefined) lines.push("score: " + fixed(node.score, 4));
    lines.push("state: " + node.state + (node.reason ? " (" + node.reason + ")" : ""));
    if (node.rank !== null && node.rank !== undefined) lines.push("rank: " + node.rank);
    if (node.winner) lines.push("on the winner path");
    return lines.join("\n");
  }

  /** Draw order: pruned first, winners last (on top). */
  function drawOrder(node) {
    if (node.winner) return 2;
    return node.state === "pruned" ? 0 : 1;
  }

  /** An edge path from parent to child, a smooth curve. */
  function edgePath(from, to) {
    const r = GRAPH.radius;
    const x1 = from.x + r;
    const x2 = to.x - r;
    const mid = (x1 + x2) / 2;
    return "M" + x1 + "," + from.y + " C" + mid + "," + from.y + " " + mid + "," + to.y + " " + x2 + "," + to.y;
  }

  /** One node: a g with a shape and a label. */
  function graphNode(node, pos) {
    const g = svgEl("g", {
      class: "node" + (node.winner ? " winner" : ""),
      transform: "translate(" + pos.x + "," + pos.y + ")",
      "data-node": node.id,
      "data-step": node.step,
      "data-state": node.state,
      "data-score": node.score === null || node.score === undefined ? "" : node.score,
      "data-log-prob": node.log_prob === null || node.log_prob === undefined ? "" : node.log_prob,
    });
    const r = GRAPH.radius;
    const label = shorten(node.piece ?? "", 14);
    // An invisible box over shape and label, so the whole node is easy to hover.
    g.appendChild(svgEl("rect", {
      class: "hit", x: -r - 3, y: -GRAPH.rowHeight / 2 + 1,
      width: 2 * r + 10 + 7 * label.length, height: GRAPH.rowHeight - 2,
    }));
    const shape = node.state === "finished"
      ? svgEl("rect", { x: -r, y: -r, width: 2 * r, height: 2 * r, rx: 1.5 })
      : svgEl("circle", { r });
    shape.setAttribute("class", "shape");
    g.appendChild(shape);
    const text = svgEl("text", { x: r + 4, y: 4, class: "label" });
    text.textContent = label;
    g.appendChild(text);
    return g;
  }

  /** Draws edges and nodes into the viewport group. */
  function drawBeamGraph(viewport, nodes, layout) {
    const ordered = nodes.slice().sort((a, b) => drawOrder(a) - drawOrder(b));
    const edges = svgEl("g", { class: "edges" });
    const dots = svgEl("g", { class: "nodes" });
    for (const node of ordered) {
      const pos = layout.positions.get(node.id);
      const parentPos = layout.positions.get(node.parent);
      if (parentPos) {
        edges.appendChild(svgEl("path", {
          d: edgePath(parentPos, pos),
          class: "edge" + (node.winner ? " winner" : ""),
          "data-state": node.state,
          "data-from": node.parent,
          "data-to": node.id,
        }));
      }
      dots.appendChild(graphNode(node, pos));
    }
    viewport.appendChild(edges);
    viewport.appendChild(dots);
  }

  /** The colour legend of the beam graph. */
  function graphLegend() {
    const legend = el("ul", "legend");
    const items = [
      ["root", "root"], ["live", "live (kept in the beam)"],
      ["finished", "finished (EOS)"], ["pruned", "pruned"], ["winner", "winner path"],
    ];
    for (const [kind, text] of items) {
      const item = el("li", "legend-item");
      item.appendChild(el("span", "swatch swatch-" + kind));
      item.appendChild(document.createTextNode(text));
      legend.appendChild(item);
    }
    return legend;
  }

  /**
   * The beam search block (summary line, legend, zoom buttons, SVG), appended
   * to parent. Returns {svg, layout}, or null when the answer has no graph.
   */
  function renderBeamGraph(parent, data) {
    const box = el("div", "block graph-block");
    parent.appendChild(box);
    box.appendChild(el("h3", null, "Beam search graph"));
    const graph = data.beam_graph || {};
    const nodes = Array.isArray(graph.nodes) ? graph.nodes : [];
    const info = [];
    if (graph.beam_size !== undefined) info.push("beam " + graph.beam_size);
    if (graph.steps !== undefined) info.push(graph.steps + " steps");
    info.push(nodes.length + " nodes");
    if (graph.stopped) info.push("stopped: " + graph.stopped);
    box.appendChild(el("p", "graph-info", info.join(" · ")));
    if (!nodes.length) {
      box.appendChild(el("p", "empty-note", "No beam search graph in this answer."));
      return null;
    }

    const controls = graphToolbar();
    box.appendChild(controls.toolbar);

    const frame = el("div", "graph-frame");
    const svg = svgEl("svg", { class: "beam-graph", role: "img", "aria-label": "Beam search graph" });
    const viewport = svgEl("g", { class: "viewport" });
    svg.appendChild(viewport);
    frame.appendChild(svg);
    box.appendChild(frame);

    const layout = layoutBeamGraph(nodes);
    drawBeamGraph(viewport, nodes, layout);
    attachTooltip(svg, "g.node", (g) => {
      const node = layout.byId.get(Number(g.dataset.node));
      return node ? nodeTooltip(node, layout.byId) : "";
    });
    const zoom = makeZoom(svg, viewport, layout);
    controls.zoomIn.addEventListener("click", () => zoom.zoomBy(1.25));
    controls.zoomOut.addEventListener("click", () => zoom.zoomBy(0.8));
    controls.zoomReset.addEventListener("click", () => zoom.reset());
    controls.showPruned.addEventListener("change", () => {
      svg.classList.toggle("hide-pruned", !controls.showPruned.checked);
      zoom.reset();
    });
    zoom.reset(); // the block is in the page, so the frame has a width to fit to
    return { svg, layout };
  }

  /** Legend, "show pruned" checkbox and the zoom buttons above the graph. */
  function graphToolbar() {
    const toolbar = el("div", "graph-toolbar");
    toolbar.appendChild(graphLegend());
    const buttons = el("div", "zoom-buttons");
    const prunedLabel = el("label", "control");
    const showPruned = el("input", "show-pruned");
    showPruned.type = "checkbox";
    showPruned.checked = true;
    prunedLabel.append(showPruned, document.createTextNode(" show pruned"));
    const zoomIn = zoomButton("zoom-in", "+", "Zoom in");
    const zoomOut = zoomButton("zoom-out", "−", "Zoom out");
    const zoomReset = zoomButton("zoom-reset", "reset", "Fit the graph");
    buttons.append(prunedLabel, zoomIn, zoomOut, zoomReset);
    toolbar.appendChild(buttons);
    return { toolbar, showPruned, zoomIn, zoomOut, zoomReset };
  }

  function zoomButton(className, text, title) {
    const button = el("button", "zoom " + className, text);
    button.type = "button";
    button.title = title;
    button.setAttribute("aria-label", title);
    return button;
  }

  /** Wheel zoom, drag pan and fit for an SVG whose content is in viewport. */
  function makeZoom(svg, viewport, layout) {
    const view = { k: 1, x: 0, y: 0 };
    const MIN_K = 0.05;
    const MAX_K = 8;
    const MAX_HEIGHT = 520; // px of the SVG on the page

    function apply() {
      viewport.setAttribute("transform", "translate(" + view.x + "," + view.y + ") scale(" + view.k + ")");
    }

    function size() {
      const box = svg.getBoundingClientRect();
      return { w: box.width || 600, h: box.height || 300 };
    }

    /** Zooms by factor around the point (px, py) of the SVG. */
    function zoomAt(factor, px, py) {
      const k = clamp(view.k * factor, MIN_K, MAX_K);
      const real = k / view.k;
      view.x = px - (px - view.x) * real;
      view.y = py - (py - view.y) * real;
      view.k = k;
      apply();
    }

    /**
     * Fits the graph (at most 100 %) while its labels stay legible (85 % at
     * least) and shows its start and top, where the beam is; a long or tall
     * graph is panned (drag) or zoomed out (wheel, "−") to see the rest.
     */
    function reset() {
      const { w } = size();
      const contentHeight = svg.classList.contains("hide-pruned") ? layout.keptHeight : layout.height;
      const fitAll = Math.min(1, w / layout.width, MAX_HEIGHT / contentHeight);
      view.k = Math.max(fitAll, 0.85);
      const height = clamp(Math.ceil(contentHeight * view.k), 140, MAX_HEIGHT);
      svg.setAttribute("height", String(height));
      view.x = Math.max(0, (w - layout.width * view.k) / 2);
      view.y = 0;
      apply();
    }

    svg.addEventListener("wheel", (event) => {
      event.preventDefault();
      const box = svg.getBoundingClientRect();
      zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - box.left, event.clientY - box.top);
    }, { passive: false });

    let drag = null;
    svg.addEventListener("pointerdown", (event) => {
      if (event.button !== 0) return;
      drag = { x: event.clientX, y: event.clientY, vx: view.x, vy: view.y };
      tooltip.hide();
      svg.setPointerCapture(event.pointerId);
      svg.classList.add("dragging");
    });
    svg.addEventListener("pointermove", (event) => {
      if (!drag) return;
      view.x = drag.vx + event.clientX - drag.x;
      view.y = drag.vy + event.clientY - drag.y;
      apply();
    });
    const endDrag = () => {
      drag = null;
      svg.classList.remove("dragging");
    };
    svg.addEventListener("pointerup", endDrag);
    svg.addEventListener("pointercancel", endDrag);

    return {
      zoomBy(factor) {
        const { w, h } = size();
        zoomAt(factor, w / 2, h / 2);
      },
      reset,
    };
  }

  /** Highlights the graph path of an n-best entry while its item is hovered. */
  function linkNbestToGraph(nbestBlock, { svg, layout }) {
    function mark(item, on) {
      let id = item.dataset.node === undefined ? null : Number(item.dataset.node);
      let guard = 0;
      while (id !== null && id !== undefined && layout.byId.has(id) && guard++ < 100000) {
        const g = svg.querySelector('g.node[data-node="' + id + '"]');
        if (g) g.classList.toggle("hl", on);
        const edge = svg.querySelector('path.edge[data-to="' + id + '"]');
        if (edge) edge.classList.toggle("hl", on);
        id = layout.byId.get(id).parent;
      }
    }
    for (const item of nbestBlock.querySelectorAll("ol.nbest > li")) {
      item.addEventListener("mouseenter", () => mark(item, true));
      item.addEventListener("mouseleave", () => mark(item, false));
    }
  }

  // ---------------------------------------------------------------- attention

  const HEATMAPS = [
    { kind: "encoder", title: "Encoder self-attention", rows: (d) => d.source.pieces, cols: (d) => d.source.pieces },
    { kind: "decoder", title: "Decoder self-attention", rows: (d) => d.target.pieces, cols: (d) => d.target.decoder_inputs },
    { kind: "cross", title: "Encoder-decoder attention", rows: (d) => d.target.pieces, cols: (d) => d.source.pieces },
  ];

  /** The three heatmap panels. */
  function renderAttention(data) {
    const box = el("div", "block attention-block");
    box.appendChild(el("h3", null, "Attention"));
    const grid = el("div", "heatmaps");
    const attention = data.attention || {};
    const sides = { source: data.source || {}, target: data.target || {} };
    for (const spec of HEATMAPS) {
      grid.appendChild(renderHeatmapPanel(spec, attention[spec.kind], sides, data.alignment));
    }
    box.appendChild(grid);
    return box;
  }

  /** A labelled select with the given [value, text] options. */
  function selectOf(className, title, options) {
    const label = el("label", "control");
    label.appendChild(document.createTextNode(title + " "));
    const select = el("select", className);
    for (const [value, text] of options) select.appendChild(optionOf(value, text));
    label.appendChild(select);
    return { label, select };
  }

  function range(n) {
    return Array.from({ length: n }, (_, i) => i);
  }

  /** One panel: title, layer/head selects, the SVG grid (and the alignment). */
  function renderHeatmapPanel(spec, weights, sides, alignment) {
    const panel = el("div", "heatmap");
    panel.dataset.kind = spec.kind;
    panel.appendChild(el("h4", null, spec.title));
    const layers = Array.isArray(weights) ? weights.length : 0;
    const heads = layers && Array.isArray(weights[0]) ? weights[0].length : 0;
    if (!layers || !heads) {
      panel.appendChild(el("p", "empty-note", "No attention weights in this answer."));
      return panel;
    }

    const controls = el("div", "heatmap-controls");
    const layer = selectOf("layer", "Layer", range(layers).map((i) => [String(i), String(i)]));
    const head = selectOf("head", "Head",
      [["mean", "mean of heads"]].concat(range(heads).map((i) => [String(i), String(i)])));
    controls.append(layer.label, head.label);

    let alignCheck = null;
    if (spec.kind === "cross") {
      const label = el("label", "control");
      alignCheck = el("input", "show-alignment");
      alignCheck.type = "checkbox";
      alignCheck.checked = true;
      label.append(alignCheck, document.createTextNode(" show alignment"));
      controls.appendChild(label);
    }
    panel.appendChild(controls);

    const frame = el("div", "heatmap-frame");
    const svg = svgEl("svg", { class: "heatmap-grid" });
    frame.appendChild(svg);
    panel.appendChild(frame);

    const rowLabels = safePieces(spec.rows, sides);
    const colLabels = safePieces(spec.cols, sides);
    const aligned = spec.kind === "cross" ? alignedCells(alignment, sides) : new Set();
    attachTooltip(svg, "rect.cell", (cell) => cellTooltip(cell, rowLabels, colLabels));

    const redraw = () => drawHeatmap(svg, {
      matrix: headMatrix(weights[Number(layer.select.value)], head.select.value),
      rowLabels,
      colLabels,
      aligned: alignCheck && alignCheck.checked ? aligned : new Set(),
    });
    layer.select.addEventListener("change", redraw);
    head.select.addEventListener("change", redraw);
    if (alignCheck) alignCheck.addEventListener("change", redraw);
    redraw();

    if (spec.kind === "cross") panel.appendChild(alignmentText(alignment));
    return panel;
  }

  /** The pieces a label function picks, or [] when the answer lacks them. */
  function safePieces(pick, sides) {
    try {
      const pieces = pick(sides);
      return Array.isArray(pieces) ? pieces : [];
    } catch (err) {
      return [];
    }
  }

  /** The [row][col] matrix of a head, or the mean over heads. */
  function headMatrix(layerWeights, head) {
    if (head !== "mean") return layerWeights[Number(head)];
    const count = layerWeights.length;
    const first = layerWeights[0];
    return first.map((row, i) => row.map((_, j) => {
      let sum = 0;
      for (let h = 0; h < count; h++) sum += layerWeights[h][i][j];
      return sum / count;
    }));
  }

  /** "row,col" keys of the cross cells inside an alignment link. */
  function alignedCells(alignment, sides) {
    const cells = new Set();
    const links = alignment && Array.isArray(alignment.links) ? alignment.links : [];
    const rowWords = Array.isArray(sides.target.piece_words) ? sides.target.piece_words : [];
    const colWords = Array.isArray(sides.source.piece_words) ? sides.source.piece_words : [];
    for (const [s, t] of links) {
      rowWords.forEach((rowWord, i) => {
        if (rowWord !== t) return;
        colWords.forEach((colWord, j) => {
          if (colWord === s) cells.add(i + "," + j);
        });
      });
    }
    return cells;
  }

  function alignmentText(alignment) {
    const line = el("p", "alignment-text");
    line.appendChild(document.createTextNode("Word alignment (source-target): "));
    const pharaoh = alignment && alignment.pharaoh ? alignment.pharaoh : "";
    const code = el("code", "pharaoh", pharaoh);
    if (!pharaoh) code.classList.add("empty");
    line.appendChild(code);
    return line;
  }

  function cellTooltip(cell, rowLabels, colLabels) {
    const weight = Number(cell.dataset.weight);
    const row = rowLabels[Number(cell.dataset.row)] ?? "?";
    const col = colLabels[Number(cell.dataset.col)] ?? "?";
    return "weight " + weight.toFixed(7) + " · " + row + " → " + col;
  }

  /** White (0) to dark blue (1). */
  function weightColour(w) {
    const t = clamp(Number(w) || 0, 0, 1);
    const mix = (from, to) => Math.round(from + (to - from) * t);
    return "rgb(" + mix(255, 8) + "," + mix(255, 48) + "," + mix(255, 107) + ")";
  }

  /** Cell size and label room for a grid. */
  function heatmapGeometry(rows, cols, rowLabels, colLabels) {
    const cell = clamp(Math.floor(420 / Math.max(rows, cols, 1)), 8, 28);
    const longest = (labels) => labels.reduce((m, s) => Math.max(m, String(s).length), 0);
    const fontSize = clamp(cell * 0.5, 8, 11);
    const charWidth = fontSize * 0.62; // monospace
    const left = 10 + charWidth * Math.min(12, longest(rowLabels));
    // Column labels are slanted 45°: they need room above and to the right.
    const slant = 8 + 0.72 * charWidth * Math.min(12, longest(colLabels));
    return { cell, left, top: slant, right: slant, fontSize };
  }

  /** Draws (replaces) one heatmap's SVG content. */
  function drawHeatmap(svg, { matrix, rowLabels, colLabels, aligned }) {
    svg.replaceChildren();
    const rows = matrix.length;
    const cols = rows ? matrix[0].length : 0;
    const g = heatmapGeometry(rows, cols, rowLabels, colLabels);
    svg.setAttribute("width", String(g.left + cols * g.cell + g.right));
    svg.setAttribute("height", String(g.top + rows * g.cell + 4));
    svg.appendChild(heatmapLabels(rows, cols, rowLabels, colLabels, g));

    const plain = svgEl("g", { class: "cells" });
    const outlined = svgEl("g", { class: "cells aligned" }); // on top, so outlines show whole
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        const w = matrix[i][j];
        const isAligned = aligned.has(i + "," + j);
        const rect = svgEl("rect", {
          class: isAligned ? "cell align" : "cell",
          x: g.left + j * g.cell,
          y: g.top + i * g.cell,
          width: g.cell,
          height: g.cell,
          fill: weightColour(w),
          "data-row": i,
          "data-col": j,
          "data-weight": w,
        });
        (isAligned ? outlined : plain).appendChild(rect);
      }
    }
    svg.append(plain, outlined);
  }

  /** Row labels (right-aligned, left) and column labels (slanted, top). */
  function heatmapLabels(rows, cols, rowLabels, colLabels, g) {
    const group = svgEl("g", { class: "labels", "font-size": g.fontSize });
    for (let i = 0; i < rows; i++) {
      const text = svgEl("text", {
        class: "row-label", x: g.left - 4, y: g.top + (i + 0.5) * g.cell, "text-anchor": "end",
        "dominant-baseline": "central", "data-row": i,
      });
      text.textContent = shorten(rowLabels[i] ?? "?", 12);
      group.appendChild(text);
    }
    for (let j = 0; j < cols; j++) {
      const x = g.left + (j + 0.5) * g.cell;
      const y = g.top - 4;
      const text = svgEl("text", {
        class: "col-label", x, y, transform: "rotate(-45 " + x + " " + y + ")", "data-col": j,
      });
      text.textContent = shorten(colLabels[j] ?? "?", 12);
      group.appendChild(text);
    }
    return group;
  }

  // ---------------------------------------------------------------- start

  function init() {
    tooltip.node = $("tooltip");
    $("run").addEventListener("change", onRunChange);
    $("query-form").addEventListener("submit", (event) => {
      event.preventDefault();
      translate();
    });
    $("sentence").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        translate();
      }
    });
    loadRuns();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
