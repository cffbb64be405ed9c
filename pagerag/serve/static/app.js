// PAGE-RAG web page: ask, read the answer with its citations (or the refusal and why), see the
// route, RCS, judge, costs and the entities behind the answer; build a repository.
// Book text is untrusted: it is only ever set as textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { repo: null, lastAnswer: null, version: null };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else if (k.startsWith("on")) node.addEventListener(k.slice(2), v); else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function headers(extra = {}) {
  const key = sessionStorage.getItem("pagerag-key");
  return key ? { ...extra, Authorization: "Bearer " + key } : extra;
}

// With an API key configured, the server's 401 says what a client must send; a person at the
// page needs to know where to type it.
const KEY_NEEDED = "This server needs an API key: enter it in the “API key” box at the top of the page, then press Use.";
const KEY_REFUSED = "The server refused this API key: enter the right one in the “API key” box at the top of the page.";

function askForKey() {
  $("keybox").hidden = false;
  $("apikey").focus();
  return new Error(sessionStorage.getItem("pagerag-key") ? KEY_REFUSED : KEY_NEEDED);
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers || {}) });
  if (response.status === 401) throw askForKey();
  const body = await response.json().catch(() => ({ error: { message: response.statusText } }));
  if (!response.ok) throw new Error((body.error && body.error.message) || response.statusText);
  return { body, response };
}

function setStatus(id, text, isError = false) {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle("error", isError);
}

// ---- repositories -------------------------------------------------------------------------

async function loadRepos() {
  try {
    const { body } = await api("/v1/repos");
    const select = $("repo");
    const chosen = select.value;
    select.replaceChildren(...body.repos.map((r) => el("option", { value: r.name }, r.name)));
    if (chosen && body.repos.some((r) => r.name === chosen)) select.value = chosen;
    $("repo-list").replaceChildren(...body.repos.map((r) => el("li", {},
      `${r.name}: ${(r.stats && r.stats.passages) || "?"} passages, ${(r.stats && r.stats.entities) || "?"} entities, ` +
      `version ${r.version}${r.reloading ? " (new version loading)" : ""}`)));
  } catch (err) {
    setStatus("status", err.message, true);
  }
}

// ---- asking -------------------------------------------------------------------------------

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  $("ask").disabled = true;
  setStatus("status", "Thinking…");
  const started = performance.now();
  try {
    const payload = { question, repo: $("repo").value || null };
    if ($("pipeline").value) payload.pipeline = $("pipeline").value;
    const { body, response } = await api("/v1/ask", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(payload),
    });
    state.repo = payload.repo;
    state.version = response.headers.get("X-PageRAG-Version");
    show(body);
    setStatus("status", `${body.decision} in ${Math.round(performance.now() - started)} ms · ${state.version || ""}`);
  } catch (err) {
    setStatus("status", err.message, true);
  } finally {
    $("ask").disabled = false;
  }
}

function show(a) {
  state.lastAnswer = a;
  $("result").hidden = false;
  const answered = a.decision === "answered";
  $("answer-box").hidden = !answered;
  $("refusal-box").hidden = answered;
  if (answered) showAnswer(a); else { $("reason").textContent = a.reason; $("refusal").textContent = a.answer; }
  showRoute(a);
  showConfidence(a);
  showCosts(a);
  drawGraph(a);
  $("notes").replaceChildren(...(a.notes || []).map((n) => el("li", {}, n)));
}

function showAnswer(a) {
  // offline, the passage closest to the question is shown as such: nothing checked it answers
  $("answer-title").textContent = a.label === "closest_passage" ? "Closest passage" : "Answer";
  $("caveat").hidden = !a.caveat;
  $("caveat").textContent = a.caveat ? `(${a.caveat})` : "";
  const byNumber = Object.fromEntries(a.citations.map((c) => [String(c.n), c]));
  const parts = a.answer.split(/(\[\d+\])/);
  $("answer").replaceChildren(...parts.map((part) => {
    const m = part.match(/^\[(\d+)\]$/);
    return m && byNumber[m[1]] ? citeLink(byNumber[m[1]], part) : document.createTextNode(part);
  }));
  $("citations").replaceChildren(...a.citations.map((c) => el("li", {},
    citeLink(c, `[${c.n}]`), ` ${fileName(c.file)}`, ...placeOf(c), ": ",
    el("span", { class: "quote" }, "\u201c" + shorten(c.quote, 220) + "\u201d"))));
}

// Where a citation lies: its page and section path (a PDF, EPUB, Word file, web page), or its
// line in a plain text, each in its own element so the page can style them.
function placeOf(c) {
  const out = [];
  if (c.page != null) out.push(", ", el("span", { class: "page" }, `p. ${c.page_label || c.page}`));
  if (c.section && c.section.length) out.push(", ", el("span", { class: "section" }, c.section.join(" \u203a ")));
  if (!out.length) out.push(`, line ${c.line}`);
  return out;
}

const placeText = (c) => placeOf(c).map((part) => (typeof part === "string" ? part : part.textContent)).join("");

function citeLink(c, label) {
  return el("a", { class: "cite", "data-n": c.n, href: "#", onclick: (e) => { e.preventDefault(); openPassage(c); } }, label);
}

const fileName = (path) => String(path).split(/[\\/]/).pop();
const shorten = (text, n) => { const t = text.replace(/\s+/g, " ").trim(); return t.length > n ? t.slice(0, n - 1) + "…" : t; };

async function openPassage(c) {
  const repo = encodeURIComponent(state.repo || $("repo").value);
  const url = `/v1/repos/${repo}/passages/${encodeURIComponent(c.passage_id)}?start=${c.start}&end=${c.end}`;
  $("passage").hidden = false;
  document.body.classList.add("with-passage");
  $("passage-title").textContent = `[${c.n}] ${fileName(c.file)}${placeText(c)}`;
  $("passage-text").textContent = "Loading…";
  try {
    const { body } = await api(url);
    const mark = el("mark", {}, body.quote);
    $("passage-title").textContent = `[${c.n}] ${body.file}${placeText(body)} (characters ${body.start}–${body.end})`;
    $("passage-text").replaceChildren("…" + body.before, mark, body.after + "…");
    mark.scrollIntoView({ block: "center" });
  } catch (err) {
    $("passage-text").textContent = err.message;
  }
}

function showRoute(a) {
  const plan = a.plan || {};
  const analysis = a.analysis || {};
  $("route-need").textContent = `need: ${plan.need || analysis.need || "?"}` +
    (analysis.decided_by ? ` (by ${analysis.decided_by})` : "") + (a.escalated ? " · widened once" : "");
  const shares = Object.entries(plan.budget_use || {});  // share of the budget each operator's passages filled
  $("route").replaceChildren(...shares.map(([op, share]) => el("div", { class: "share" },
    el("span", { class: "name" }, op), el("span", { class: "bar" }, barFill(share)), el("span", {}, share.toFixed(2)))));
  const ops = (plan.operators || []).join(" → ");
  $("route-budget").textContent = `operators: ${ops || "none"} · budget ${plan.budget_tokens ?? "?"} tokens · graph ${plan.graph ?? "?"}`;
}

function barFill(share) {
  const span = el("span");
  span.style.width = Math.round(Math.max(0, Math.min(1, share)) * 100) + "%";
  return span;
}

function showConfidence(a) {
  $("rcs").textContent = a.rcs != null && a.tau != null
    ? `RCS ${a.rcs.toFixed(3)} ${a.rcs >= a.tau ? "≥" : "<"} τ ${a.tau.toFixed(3)}`
    : "RCS: not computed (no calibrated model for this repository)";
  const v = a.verdict;
  $("verdict").textContent = v
    ? `judge (${v.method}): ${v.sufficient ? "sufficient" : "insufficient"}${v.score != null ? `, score ${v.score.toFixed(2)}` : ""}` +
      (v.missing ? ` — missing: ${v.missing}` : "")
    : "judge: not reached";
}

function showCosts(a) {
  const rows = Object.entries(a.latency_ms || {}).map(([stage, ms]) => {
    const t = (a.tokens || {})[stage] || { prompt: 0, completion: 0 };
    return el("tr", {}, el("td", {}, stage), el("td", {}, `${t.prompt}+${t.completion}`), el("td", {}, Math.round(ms)));
  });
  const total = Object.values(a.latency_ms || {}).reduce((s, x) => s + x, 0);
  rows.push(el("tr", {}, el("th", {}, "total"), el("th", {}, ""), el("th", {}, Math.round(total))));
  $("costs").tBodies[0].replaceChildren(...rows);
  $("backend").textContent = `backend ${a.backend} · pipeline ${a.pipeline}`;
}

// ---- the entities and paths behind the answer ----------------------------------------------

function graphOf(a) {
  const nodes = new Map();
  const edges = [];
  const node = (name, linked = false) => {
    const key = name.toLowerCase();
    if (!nodes.has(key)) nodes.set(key, { id: key, name, linked });
    if (linked) nodes.get(key).linked = true;
    return nodes.get(key);
  };
  for (const link of (a.analysis && a.analysis.links) || []) node(link.name, true);
  for (const hint of a.hints || []) {
    if (hint.kind !== "path") continue;
    // "Scrooge —[partner of]→ Marley ←[meets]— Fred"
    const parts = hint.text.split(/\s(—\[[^\]]*\]→|←\[[^\]]*\]—)\s/);
    for (let i = 0; i + 2 < parts.length; i += 2) {
      const label = parts[i + 1].replace(/^—\[|\]→$|^←\[|\]—$/g, "");
      const forward = parts[i + 1].startsWith("—");
      const [u, v] = [node(parts[i].trim()), node(parts[i + 2].trim())];
      edges.push(forward ? { source: u, target: v, label } : { source: v, target: u, label });
    }
  }
  return { nodes: [...nodes.values()], edges };
}

function drawGraph(a) {
  const svg = $("graph");
  const { nodes, edges } = graphOf(a);
  const ns = "http://www.w3.org/2000/svg";
  const make = (tag, attrs) => { const n = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); return n; };
  svg.replaceChildren();
  const defs = make("defs", {});
  const marker = make("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 19, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(make("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa6bd" }));
  defs.append(marker);
  svg.append(defs);
  $("hints").replaceChildren(...(a.hints || []).map((h) => el("li", {}, `${h.kind}: ${shorten(h.text, 200)}`)));
  if (!nodes.length) {
    const t = make("text", { x: 20, y: 30 });
    t.textContent = "No entity of the graph was linked to this question.";
    svg.append(t);
    return;
  }
  layout(nodes, edges, 760, 300);
  const edgeLabels = [];
  for (const e of edges) {
    svg.append(make("line", { class: "edge", x1: e.source.x, y1: e.source.y, x2: e.target.x, y2: e.target.y, "marker-end": "url(#arrow)" }));
    const label = make("text", { class: "edge-label", x: (e.source.x + e.target.x) / 2, y: (e.source.y + e.target.y) / 2 - 4, "text-anchor": "middle" });
    label.textContent = shorten(e.label, 28);
    label.append(make("title", {}));
    label.lastChild.textContent = e.label;
    edgeLabels.push(label);
  }
  const nodeLabels = [];
  for (const n of nodes) {
    const g = make("g", { class: "node" });
    g.append(make("circle", { cx: n.x, cy: n.y, r: 8, class: n.linked ? "linked" : "" }));
    const label = make("text", { x: n.x, y: n.y + 24, "text-anchor": "middle" });
    label.textContent = shorten(n.name, 30);
    g.append(label);
    svg.append(g);
    nodeLabels.push(label);
  }
  edgeLabels.forEach((label) => svg.append(label));  // drawn last: above the lines and circles
  placeLabels(svg, nodeLabels, edgeLabels, 760, 300);
}

// Labels are placed one by one, node labels first: each at the first free spot near its own
// (below, above, then further out), so no two overlap; an edge label with no free spot is left
// out (the relation stays in the list of paths below the graph, and in the tooltip).
const NUDGES = [[0, 0], [0, -40], [0, 14], [0, -54], [0, 28], [44, 0], [-44, 0], [0, 42], [0, -68], [88, 0], [-88, 0], [44, 28], [-44, 28], [44, -40], [-44, -40]];

function placeLabels(svg, nodeLabels, edgeLabels, width, height) {
  const placed = [];
  const fits = (b) => b.x >= 0 && b.y >= 0 && b.x + b.width <= width && b.y + b.height <= height;
  const free = (b) => placed.every((o) => b.x + b.width <= o.x || o.x + o.width <= b.x || b.y + b.height <= o.y || o.y + o.height <= b.y);
  for (const [labels, required] of [[nodeLabels, true], [edgeLabels, false]]) {
    for (const label of labels) {
      const x0 = Number(label.getAttribute("x")), y0 = Number(label.getAttribute("y"));
      let spot = null;
      for (const [dx, dy] of NUDGES) {
        label.setAttribute("x", x0 + dx);
        label.setAttribute("y", y0 + dy);
        const box = padded(label.getBBox());
        if (fits(box) && free(box)) { spot = box; break; }
      }
      if (spot) { placed.push(spot); continue; }
      if (required) {  // a node's name is never dropped: the smallest overlap, then shortened
        label.textContent = shorten(label.textContent, 12);
        label.setAttribute("x", x0); label.setAttribute("y", y0);
        placed.push(padded(label.getBBox()));
      } else {
        label.remove();
      }
    }
  }
}

function padded(b) {  // room around each label, so two side by side do not read as one
  return { x: b.x - 6, y: b.y - 1, width: b.width + 12, height: b.height + 2 };
}

function layout(nodes, edges, width, height) {
  // a small deterministic force layout: nodes on a circle, then springs and repulsion
  const cx = width / 2, cy = height / 2;
  nodes.forEach((n, i) => {
    const angle = (2 * Math.PI * i) / nodes.length;
    n.x = cx + Math.cos(angle) * Math.min(width, height) * 0.35;
    n.y = cy + Math.sin(angle) * Math.min(width, height) * 0.35;
  });
  for (let step = 0; step < 200; step++) {
    for (const a of nodes) { a.fx = (cx - a.x) * 0.01; a.fy = (cy - a.y) * 0.01; }
    for (const a of nodes) for (const b of nodes) {
      if (a === b) continue;
      const dx = a.x - b.x, dy = a.y - b.y, d2 = Math.max(dx * dx + dy * dy, 25);
      a.fx += (dx / d2) * 1500; a.fy += (dy / d2) * 1500;
    }
    for (const e of edges) {
      const dx = e.target.x - e.source.x, dy = e.target.y - e.source.y;
      const d = Math.max(Math.hypot(dx, dy), 1), pull = (d - 140) * 0.02;
      e.source.fx += (dx / d) * pull; e.source.fy += (dy / d) * pull;
      e.target.fx -= (dx / d) * pull; e.target.fy -= (dy / d) * pull;
    }
    for (const n of nodes) {
      n.x = Math.min(width - 60, Math.max(60, n.x + Math.max(-10, Math.min(10, n.fx))));
      n.y = Math.min(height - 30, Math.max(15, n.y + Math.max(-10, Math.min(10, n.fy))));
    }
  }
}

// ---- building -----------------------------------------------------------------------------

async function startBuild(event) {
  event.preventDefault();
  const form = new FormData();
  form.append("repo", $("build-name").value.trim());
  for (const file of $("build-files").files) form.append("files", file, file.name);
  $("build-start").disabled = true;
  $("build-progress").hidden = false;
  $("build-bar").value = 0;
  setStatus("build-status", "Uploading…");
  try {
    const { body: job } = await api("/v1/builds", { method: "POST", body: form });
    setStatus("build-status", `Build ${job.id}: ${job.status}`);
    await followBuild(job.id);
  } catch (err) {
    setStatus("build-status", err.message, true);
  } finally {
    $("build-start").disabled = false;
  }
}

async function followBuild(id) {
  // fetch, not EventSource: EventSource cannot send the API key
  const response = await fetch(`/v1/builds/${id}/events`, { headers: headers({ Accept: "text/event-stream" }) });
  if (response.status === 401) throw askForKey();
  if (!response.ok) throw new Error(`build ${id}: ${response.statusText}`);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data) onBuildEvent(JSON.parse(data));
    }
  }
}

function onBuildEvent(ev) {
  if (ev.event === "progress") {
    $("build-bar").value = ev.overall;
    $("build-stage").textContent = `${ev.stage} ${ev.completed}/${ev.total ?? "?"}`;
  } else if (ev.event === "status") {
    if (ev.status === "done") {
      $("build-bar").value = 1;
      setStatus("build-status", `Built: ${ev.stats ? ev.stats.passages + " passages, " + ev.stats.entities + " entities" : "done"} (version ${ev.version})`);
      loadRepos();
    } else if (ev.status === "failed") {
      setStatus("build-status", `Build failed: ${ev.error}`, true);
    } else {
      setStatus("build-status", `Build: ${ev.status}`);
    }
  }
}

// ---- start --------------------------------------------------------------------------------

$("ask-form").addEventListener("submit", ask);
$("build-form").addEventListener("submit", startBuild);
$("passage-close").addEventListener("click", () => { $("passage").hidden = true; document.body.classList.remove("with-passage"); });
function useKey() {
  sessionStorage.setItem("pagerag-key", $("apikey").value.trim());
  $("keybox").hidden = true;
  setStatus("status", "");
  loadRepos();
}
$("savekey").addEventListener("click", useKey);
$("apikey").addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); useKey(); } });
loadRepos();
