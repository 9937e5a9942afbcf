// anywave kernel explorer: plain JavaScript, no dependencies (bundled with the package).
"use strict";
const $ = (id) => document.getElementById(id);
const src = $("source"), gutter = $("gutter"), backdrop = $("backdrop");
let lastCompile = null;
// the session token the server wrote into the page; every POST carries it (see server.py)
const tokenMeta = document.querySelector('meta[name="anywave-token"]');
const token = tokenMeta ? tokenMeta.content : "";

function lineCount() { return src.value.split("\n").length; }

function renderGutter(errLine) {
  const n = lineCount();
  gutter.innerHTML = ""; backdrop.innerHTML = "";
  for (let i = 1; i <= n; i++) {
    const g = document.createElement("div");
    g.textContent = i; g.dataset.line = i;
    if (i === errLine) g.classList.add("err");
    g.addEventListener("mouseenter", () => highlight(i));
    g.addEventListener("mouseleave", () => highlight(null));
    gutter.appendChild(g);
    const b = document.createElement("div");
    b.dataset.line = i; b.textContent = " ";
    backdrop.appendChild(b);
  }
  src.style.height = (n * 17 + 14) + "px";
}

function highlight(line, origin) {
  document.querySelectorAll(".hl").forEach((e) => e.classList.remove("hl"));
  if (line === null || line === undefined) return;
  document.querySelectorAll(`[data-src="${line}"], #gutter [data-line="${line}"], #backdrop [data-line="${line}"]`)
    .forEach((e) => e.classList.add("hl"));
  // bring the linked lines into view in every other panel
  document.querySelectorAll(".panel .body").forEach((body) => {
    if (body === origin) return;
    const first = body.querySelector(".hl");
    if (first) body.scrollTop = first.offsetTop - body.offsetTop - 30;
  });
}

function setStatus(text) { $("status").textContent = text; }

async function post(path, extra) {
  const body = { source: src.value, kernel: $("kernel").value || null,
                 wave_width: parseInt($("wave-width").value, 10), ...extra };
  const r = await fetch(path, { method: "POST", body: JSON.stringify(body),
                                headers: { "Content-Type": "application/json", "X-Anywave-Token": token } });
  try { return await r.json(); } catch (e) {
    return { ok: false, error: { message: `HTTP ${r.status}: the server's answer is not JSON`, line: null } };
  }
}

function showError(err) {
  const box = $("error");
  if (!err) { box.hidden = true; box.textContent = ""; renderGutter(null); return; }
  box.hidden = false;
  box.textContent = (err.line ? `line ${err.line}${err.col ? ", column " + err.col : ""}: ` : "") + err.message;
  renderGutter(err.line || null);
}

function renderPanels(outputs) {
  const root = $("panels");
  root.innerHTML = "";
  for (const [name, out] of Object.entries(outputs)) {
    const panel = document.createElement("div");
    panel.className = "panel"; panel.id = "panel-" + name;
    const h = document.createElement("h3"); h.textContent = out.title; panel.appendChild(h);
    const body = document.createElement("div"); body.className = "body";
    if (out.error) {
      const e = document.createElement("div"); e.className = "perr"; e.textContent = out.error; body.appendChild(e);
    }
    for (const [text, line] of out.lines) {
      const d = document.createElement("div");
      d.textContent = text || " ";
      if (line !== null && line !== undefined) {
        d.dataset.src = line; d.title = `source line ${line}`;
        d.addEventListener("mouseenter", () => highlight(line, body));
        d.addEventListener("mouseleave", () => highlight(null));
      } else d.className = "nosrc";
      body.appendChild(d);
    }
    panel.appendChild(body);
    root.appendChild(panel);
  }
}

async function compile() {
  setStatus("compiling…");
  const res = await post("/api/compile");
  lastCompile = res;
  if (!res.ok) { showError(res.error); setStatus("compile error"); return res; }
  showError(null);
  const sel = $("kernel"), keep = sel.value;
  sel.innerHTML = "";
  for (const k of res.kernels) { const o = document.createElement("option"); o.textContent = k; sel.appendChild(o); }
  sel.value = res.kernels.includes(keep) ? keep : res.kernel;
  renderPanels(res.outputs);
  setStatus(`compiled ${res.kernel}`);
  return res;
}

async function run() {
  setStatus("running…");
  const res = await post("/api/run", { n: parseInt($("n").value, 10) || 1000 });
  const tbody = $("results").querySelector("tbody");
  tbody.innerHTML = "";
  $("printed").textContent = "";
  if (!res.ok) { showError(res.error); setStatus("error"); return; }
  showError(null);
  let printed = [];
  for (const r of res.results) {
    const tr = document.createElement("tr");
    const cells = r.error ? [r.target, r.wave_width ?? "", "", r.error, "", ""]
      : [r.target, r.wave_width ?? "", r.ms, r.sha256,
         r.identical === true ? "yes" : r.identical === false ? "NO" : "n/a (no emulator result)",
         r.preview.map((v) => typeof v === "number" ? +v.toPrecision(6) : v).join(", ")];
    cells.forEach((c, i) => {
      const td = document.createElement("td"); td.textContent = c;
      if (i === 4 && !r.error && r.identical !== null) td.className = r.identical ? "yes" : "no";
      tr.appendChild(td);
    });
    tr.dataset.target = r.target;
    tbody.appendChild(tr);
    if (r.printed && r.printed.length) printed.push(`[${r.target}] ` + r.printed.join(`\n[${r.target}] `));
  }
  $("printed").textContent = printed.join("\n");
  const ok = res.results.filter((r) => !r.error);
  const same = ok.every((r) => r.identical === true);
  const compared = ok.every((r) => r.identical !== null);
  setStatus(`ran on ${ok.length} target(s): ` + (!compared ? "no emulator result to compare with"
    : same ? "all bit-identical" : "results differ"));
}

src.addEventListener("input", () => renderGutter(null));
src.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); compile(); }
  if (e.key === "Tab") {
    e.preventDefault();
    const s = src.selectionStart;
    src.setRangeText("    ", s, src.selectionEnd, "end");
    renderGutter(null);
  }
});
$("compile").addEventListener("click", compile);
$("run").addEventListener("click", run);
$("wave-width").addEventListener("change", compile);
$("kernel").addEventListener("change", compile);

(async () => {
  const r = await fetch("/api/example");
  src.value = (await r.json()).source;
  renderGutter(null);
  await compile();
  document.body.dataset.ready = "1";
})();
