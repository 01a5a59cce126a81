/* trainctl web UI: plain JS over /api/v1 (docs/server.md), charts with uPlot. */
(function () {
  "use strict";
  const view = document.getElementById("view");
  // what the server says of itself (GET /api/v1/info): job, sweep, trial and
  // endpoint states, backends, version; read once before the first page, so
  // the UI keeps no lists of its own (and no state names)
  let INFO = { states: [], sweep_states: [], trial_states: [], endpoint_states: [], backends: [], version: "" };
  // who the browser is (GET /api/v1/whoami): what a page offers (links to jobs, the usage of others)
  let WHO = { user: "", admin: false };
  let cleanup = [];   // what the current page must stop when leaving
  let routeGen = 0;   // bumped on every route: a page whose await outlived it stops

  // ---- the one road from data to the page ----
  // html`...` is the only way the UI writes markup: every value put into it is
  // escaped (text, numbers, anything a server or a job sent), unless it is
  // itself an html`...` (or an array of them).  A value may stand in text or
  // inside a quoted attribute, never where it would name a tag or an
  // attribute, nor in an on* handler, a style or a srcdoc; a URL attribute
  // that a value starts gets only http(s), a path or a fragment.  put(el, t)
  // and node(t) turn the result into DOM; everything else is textContent.
  // scripts/check-web-html.py fails on any other innerHTML, outerHTML,
  // insertAdjacentHTML or document.write (docs/security.md, "The page").
  const SAFE = Symbol("html");
  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, c =>
      ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  const URL_ATTRS = new Set(["href", "src", "action", "formaction", "xlink:href"]);
  const URL_OK = /^(?:https?:\/\/|\/|#)/i;
  function html(strings, ...vals) {
    let out = "", inTag = false, quote = "", attr = "", attrStart = 0;
    for (let i = 0; i < strings.length; i++) {
      const s = strings[i];
      for (let k = 0; k < s.length; k++) {
        const c = s[k];
        if (quote) { if (c === quote) quote = ""; }
        else if (inTag) {
          if (c === '"' || c === "'") {
            quote = c;
            attr = (/([^\s=]+)\s*=\s*$/.exec(s.slice(0, k)) || ["", ""])[1].toLowerCase();
            attrStart = out.length + k + 1;
          } else if (c === ">") inTag = false;
        } else if (c === "<") inTag = true;
      }
      out += s;
      if (i === vals.length) break;
      const v = vals[i];
      if (inTag && !quote) throw new Error("html: a value outside a quoted attribute, before: " + strings[i + 1]);
      if (quote) {
        if (attr.startsWith("on") || attr === "style" || attr === "srcdoc") throw new Error("html: a value in attribute " + attr);
        let t = v && v[SAFE] ? null : String(v == null ? "" : v);
        if (t === null) throw new Error("html: markup in attribute " + attr);
        if (URL_ATTRS.has(attr) && out.length === attrStart && !URL_OK.test(t.trim())) t = "#";
        out += esc(t);
      } else out += text(v);
    }
    // joined with + or .join(), it would lose its escaping's meaning: refuse, loudly
    return Object.freeze({ [SAFE]: true, s: out, toString() { throw new Error("html: put it in html`` (not + or join)"); } });
  }
  function text(v) {
    if (Array.isArray(v)) return v.map(text).join("");
    if (v && v[SAFE]) return v.s;
    return esc(v);
  }
  function fragment(t) {
    if (!t || !t[SAFE]) throw new Error("put: not html`...`");
    const tp = document.createElement("template");
    tp.innerHTML = t.s; // html-sink: the one place markup is parsed; t.s comes only from html`...`
    return tp.content;
  }
  // el's children become t's nodes
  function put(el, t) { el.replaceChildren(fragment(t)); return el; }
  // t's first element (one element of markup)
  function node(t) { return fragment(t).firstElementChild; }

  // ---- helpers ----
  function fmtTime(t) { return t ? new Date(t * 1000).toLocaleString() : "-"; }
  function fmtDur(j) {
    const start = j.started || j.created; if (!start) return "-";
    return fmtSecs((j.ended || Date.now() / 1000) - start);
  }
  // seconds as 4.2s, 5m07s, 3h12m ("-" for none)
  function fmtSecs(d) {
    if (d == null || !isFinite(d)) return "-";
    d = Math.max(0, d);
    if (d < 60) return d.toFixed(1) + "s";
    if (d < 3600) return Math.floor(d / 60) + "m" + String(Math.floor(d % 60)).padStart(2, "0") + "s";
    return Math.floor(d / 3600) + "h" + String(Math.floor(d % 3600 / 60)).padStart(2, "0") + "m";
  }
  function fmtBytes(b) {
    if (b == null) return "-";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return b.toFixed(i ? 1 : 0) + " " + u[i];
  }
  function showError(el, e) { put(el, html`<div class="card error">${e.message}</div>`); }
  function banner(msg) {
    if (msg === "not logged in" && document.getElementById("login")) msg = ""; /* the login page says it all */
    const b = document.getElementById("banner");
    b.hidden = !msg; b.textContent = msg || "";
  }
  async function api(path, opts) {
    opts = opts || {};
    const headers = Object.assign({ "Accept": "application/json" }, opts.headers || {});
    if (opts.body && typeof opts.body !== "string") {
      opts.body = JSON.stringify(opts.body); headers["Content-Type"] = "application/json";
    }
    // the session cookie (HttpOnly, SameSite=Strict) goes with every same-origin request
    const r = await fetch("/api/v1" + path, Object.assign({ credentials: "same-origin" }, opts, { headers }));
    if (r.status === 401) { showLogin(); throw new Error("not logged in"); }
    const type = r.headers.get("Content-Type") || "";
    const body = type.includes("json") ? await r.json() : await r.text();
    if (!r.ok) throw new Error((body && body.error) || ("HTTP " + r.status));
    return body;
  }
  // handlers: event name -> fn(parsed data); "open" runs each time the stream
  // (re)connects, so a page can re-read what changed before it was listening
  function stream(path, handlers) {
    // the cookie authenticates the stream: no token in the URL (browser history, proxy logs)
    const es = new EventSource("/api/v1" + path);
    for (const [ev, fn] of Object.entries(handlers)) es.addEventListener(ev, e => fn(e.data ? JSON.parse(e.data) : null));
    cleanup.push(() => es.close());
    return es;
  }
  // a token is exchanged once for a session cookie; the page never keeps it
  async function askToken(why) {
    const t = prompt((why ? why + "\n\n" : "") + "Bearer token (trainctl token create --user NAME):", "");
    if (!t) return;
    const r = await fetch("/api/v1/session", { method: "POST", credentials: "same-origin",
      headers: { "Authorization": "Bearer " + t.trim(), "Content-Type": "application/json" }, body: "{}" });
    if (r.ok) location.reload(); else banner("The token was not accepted (HTTP " + r.status + ").");
  }
  document.getElementById("token-btn").onclick = () => askToken("");
  // the page of a browser with no session (any 401, or #/login): how to get in
  function showLogin() {
    banner("");
    if (document.getElementById("login")) return;
    stopPage(); /* the page behind it polls no more */
    put(view, html`<div class="card" id="login"><h1>Log in to trainctl</h1>
      <p>This browser is not logged in. The server logs a browser in with a <b>one-time login link</b>:</p>
      <ul>
        <li>the link the server printed when it started, in its output or its log:
          <code>open the web UI (one use): http://HOST:PORT/login?ticket=...</code></li>
        <li>or a new link: run <code>trainctl token login</code> on the server's machine, as your own account
          (it is valid for 5 minutes);</li>
        <li>or a bearer token (<code>trainctl token create --user NAME</code> makes one):
          <button id="login-token" type="button">Log in with a token</button></li>
      </ul>
      <p class="muted">Each link works once: a link used already, or older than 5 minutes, is refused; get a new one.
        The session lasts 7 days.</p></div>`);
    document.getElementById("login-token").onclick = () => askToken("");
  }
  function stateBadge(s) { return html`<span class="state ${s}">${s}</span>`; }
  // the server's row of a state (a job's; kind "sweep_states" etc. for the others)
  function stateRow(state, kind) { return (INFO[kind || "states"] || []).find(x => x.name === state) || {}; }
  // not ended: a state the server calls terminal (unknown states count as not ended)
  function live(state, kind) { return !stateRow(state, kind).terminal; }

  // ---- job actions ----
  // only the buttons that do something in the job's state (no Stop on a finished job)
  function actionButtons(j) {
    const active = live(j.state);
    return html`${active ? html`<button data-act="stop" class="danger">Stop</button> ` : ""}${
      active && !stateRow(j.state).resumable ? html`<button data-act="pause">Pause</button> ` : ""}${
      stateRow(j.state).resumable ? html`<button data-act="resume">Resume</button> ` : ""}<button data-act="clone">Clone</button>`;
  }
  async function act(id, what, after) {
    try {
      const r = await api(`/jobs/${encodeURIComponent(id)}/${what}`, { method: "POST", body: {} });
      banner("");
      if (what === "clone") location.hash = "#/job/" + r.id; else if (after) after();
    } catch (e) { banner(what + ": " + e.message); }
  }
  // the action buttons inside el act on the job idOf(button) names, then call after
  function bindActions(el, idOf, after) {
    el.querySelectorAll("button[data-act]").forEach(b => { b.onclick = () => act(idOf(b), b.dataset.act, after); });
  }
  // the root cause in one line: the exception line where the cause holds a
  // Python traceback (KeyError: 'missing_key'), else its first line
  function causeLine(cause) {
    if (!cause) return "";
    const lines = String(cause).split("\n");
    const tb = lines.findIndex(l => /^Traceback \(most recent call last\):/.test(l));
    let exc = "";
    /* the traceback's last exception line (a chained one ends with the one that ended it),
       up to the end of its section ("--- last lines of rank N ---" follows the error file's) */
    for (const l of tb >= 0 ? lines.slice(tb + 1) : []) {
      if (l.startsWith("--- ")) break;
      if (/^[A-Za-z_][\w.]*(: |$)/.test(l)) exc = l.trim();
    }
    if (exc) return exc;
    return lines[0].trim();
  }
  // the whole root cause of ended jobs whose list entry holds only its start
  // (the list cuts it): an ended job's cause does not change, so once each
  const fullCause = new Map();
  // what a job came to: nothing while it runs, else its exit code and one-line cause
  function resultCell(j) {
    if (live(j.state) || !j.ended) return html`<span class="muted">-</span>`;
    const cause = stateRow(j.state).success ? "" : causeLine(fullCause.get(j.id) || j.root_cause);
    return html`<span class="result">exit ${j.exit_code}</span>${cause ? html`<div class="cause" title="${j.root_cause}">${cause}</div>` : ""}`;
  }

  // ---- jobs page ----
  async function pageJobs(params) {
    const q = new URLSearchParams(params);
    put(view, html`
      <div class="card">
        <div class="toolbar"><h1>Jobs</h1>
          <select id="f-state"><option value="">all states</option>${INFO.states.map(s => html`<option>${s.name}</option>`)}</select>
          <input id="f-user" placeholder="user" style="width:130px">
          <button id="cmp" disabled title="tick two jobs or more">Compare</button>
          <a class="button" href="#/submit">New job</a>
        </div>
        <div class="scroll"><table id="jobs"><thead><tr>
          <th class="pick"></th><th>Name</th><th>State</th><th class="hide-narrow">User</th><th class="hide-narrow">Priority</th>
          <th>Devices</th><th class="hide-narrow">Created</th><th>Duration</th><th>Result</th><th>Actions</th>
        </tr></thead><tbody></tbody></table></div>
        <div class="row muted" id="paging"></div>
      </div>`);
    const fs = document.getElementById("f-state"), fu = document.getElementById("f-user");
    fs.value = q.get("state") || ""; fu.value = q.get("user") || "";
    let offset = Number(q.get("offset") || 0);
    const limit = 50;
    // the jobs ticked for Compare, kept across reloads of the table
    const picked = new Set();
    const cmp = document.getElementById("cmp");
    const jobsBody = view.querySelector("#jobs tbody"), paging = document.getElementById("paging");
    function pickedChanged() { cmp.disabled = picked.size < 2; cmp.textContent = picked.size ? `Compare (${picked.size})` : "Compare"; }
    cmp.onclick = () => { location.hash = "#/compare?jobs=" + [...picked].map(encodeURIComponent).join(","); };
    async function load() {
      if (!jobsBody.isConnected) return; /* a page left behind: no more fetches */
      const p = new URLSearchParams({ limit, offset });
      if (fs.value) p.set("state", fs.value);
      if (fu.value) p.set("user", fu.value);
      let r;
      try { r = await api("/jobs?" + p); } catch (e) { banner(e.message); return; }
      /* this page's own table: a later render of the page (the login redirect and the
         hash change can both render it) must not get rows bound to this closure's picks */
      if (!jobsBody.isConnected) return; /* the user went to another page meanwhile */
      const tb = jobsBody;
      put(tb, r.jobs.length ? html`${r.jobs.map(j => html`<tr data-id="${j.id}">
        <td class="pick"><input type="checkbox" class="pick" aria-label="compare ${j.name}"></td>
        <td><a href="#/job/${j.id}">${j.name}</a><div class="muted">${j.id}</div></td>
        <td>${stateBadge(j.state)}</td><td class="hide-narrow">${j.user}</td>
        <td class="hide-narrow">${j.priority}${j.preemptible ? " · preemptible" : ""}</td>
        <td>${j.device_type} × ${j.device_count}${j.devices ? html` <span class="muted">[${j.devices}]</span>` : ""}</td>
        <td class="hide-narrow">${fmtTime(j.created)}</td><td>${fmtDur(j)}</td>
        <td class="wrap result-cell">${resultCell(j)}</td><td>${actionButtons(j)}</td></tr>`)}` : html`<tr><td colspan="10" class="muted">no jobs</td></tr>`);
      bindActions(tb, b => b.closest("tr").dataset.id, load);
      // a cut cause whose exception line may lie past the cut: read the job's whole cause
      for (const j of r.jobs) {
        if (live(j.state) || stateRow(j.state).success || !j.root_cause || fullCause.has(j.id) ||
            !j.root_cause.includes("\n--- ") || causeLine(j.root_cause) !== causeLine(j.root_cause.split("\n")[0])) continue;
        api("/jobs/" + encodeURIComponent(j.id)).then(full => {
          fullCause.set(j.id, full.root_cause || "");
          const cell = tb.querySelector(`tr[data-id="${CSS.escape(j.id)}"] .result-cell`);
          if (cell) put(cell, resultCell(j));
        }).catch(() => {});
      }
      tb.querySelectorAll("input.pick").forEach(c => c.checked = picked.has(c.closest("tr").dataset.id));
      tb.querySelectorAll("input.pick").forEach(c => c.onchange = () => {
        const id = c.closest("tr").dataset.id;
        if (c.checked) picked.add(id); else picked.delete(id);
        pickedChanged();
      });
      const pg = paging;
      put(pg, html`${r.total} jobs · ${r.total ? offset + 1 : 0}–${Math.min(offset + limit, r.total)}
        <button id="prev">‹ Newer</button><button id="next">Older ›</button>`);
      pg.querySelector("#prev").disabled = !offset;
      pg.querySelector("#next").disabled = !(offset + limit < r.total);
      pg.querySelector("#prev").onclick = () => { offset = Math.max(0, offset - limit); load(); };
      pg.querySelector("#next").onclick = () => { offset += limit; load(); };
    }
    fs.onchange = fu.onchange = () => { offset = 0; load(); };
    const gen = routeGen;
    await load();
    if (gen !== routeGen) return; /* left meanwhile (the login page, when there is no session) */
    let pending = null;
    const later = () => { if (!pending) pending = setTimeout(() => { pending = null; load(); }, 300); };
    stream("/events", { open: later, state: later });
    const t = setInterval(load, 5000); cleanup.push(() => clearInterval(t));
  }

  // ---- submit page ----
  async function pageSubmit() {
    let types = ["cpu"];
    const gen = routeGen;
    try { const d = await api("/devices"); types = [...new Set(d.devices.map(x => x.type))]; } catch (e) { /* keep cpu */ }
    // the teams the user may submit to (GET /api/v1/teams: member), and the one a job gets unasked
    let teams = { teams: [], your_team: null };
    try { teams = await api("/teams"); } catch (e) { /* a server without the teams API: no choice */ }
    if (gen !== routeGen) return;
    const mine = teams.teams.filter(t => t.member).map(t => t.name);
    // a user in one team needs no choice (the server picks it, as `trainctl submit` without --team)
    const teamRow = id => !teams.teams.length ? "" : mine.length > 1 ? html`
        <label for="${id}">Team</label><select id="${id}" name="team" class="team-pick" required>
          ${teams.your_team ? "" : html`<option value="">choose a team</option>`}${mine.map(n => html`<option value="${n}">${n}</option>`)}</select>
        <span class="hint">the team whose guarantee and borrowing limit the job counts against (trainctl submit --team)</span>`
      : html`<label>Team</label><div class="team-only">${mine.length ? html`${mine[0]} <span class="muted">(your only team)</span>`
        : html`<span class="error">you are in none of this server's teams: it refuses your jobs</span>`}</div>`;
    put(view, html`
      <div class="card"><div class="toolbar"><h1>Submit a job</h1></div>
      <form class="grid" id="submit">
        <label for="s-name">Job name</label><input id="s-name" name="name" required pattern="[A-Za-z0-9._-]+">
        <span class="hint">required: letters, digits, '.', '_' and '-', e.g. digits-ddp</span>
        ${teamRow("s-team")}
        <label for="s-kind">Job type</label>
        <select id="s-kind" name="kind"><option value="regular">regular (one node)</option><option value="distributed">distributed (nodes × devices)</option></select>
        <label for="s-backend">Backend</label><select id="s-backend" name="backend">${INFO.backends.map(b => html`<option value="${b.name}">${b.name}</option>`)}</select>
        <span class="hint" id="s-backend-why"></span>
        <label for="s-pre">Preemptible</label><div class="row"><input type="checkbox" id="s-pre" name="preemptible"><span class="muted">may give its devices to a non-preemptible job (resumes from its checkpoint)</span></div>
        <label for="s-prio">Priority</label><input id="s-prio" name="priority" type="number" min="1" max="1000" value="100">
        <label for="s-type">Device type</label><select id="s-type" name="type">${types.map(t => html`<option>${t}</option>`)}</select>
        <label for="s-count">Devices per node</label><input id="s-count" name="count" type="number" min="1" value="1">
        <label for="s-nodes" class="dist">Nodes</label><input id="s-nodes" class="dist" name="nodes" type="number" min="1" value="2">
        <label for="s-cmd">Command</label><textarea id="s-cmd" name="command" required></textarea>
        <span class="hint">e.g. python3 train.py --epochs 3: run with /bin/sh -c in the working directory, one process per device</span>
        <label for="s-image">Image</label><input id="s-image" name="image" placeholder="container image (empty: runs on the host)">
        <label for="s-workdir">Working directory</label><input id="s-workdir" name="workdir" placeholder="/path/to/code (absolute)">
        <label for="s-env">Environment</label><textarea id="s-env" name="env" placeholder="KEY=value, one per line"></textarea>
        <label for="s-restarts">Max restarts</label><input id="s-restarts" name="restarts" type="number" min="0" max="1000" value="0">
        <span></span><div class="row"><button class="primary" type="submit" id="s-go">Submit</button><span id="s-err" class="error"></span></div>
      </form></div>
      <div class="card"><div class="toolbar"><h2>Or paste a spec</h2></div>
      <form class="grid" id="submit-spec">
        ${teamRow("y-team")}
        <label for="y-spec">Spec (YAML or JSON)</label><textarea id="y-spec" name="spec" required rows="12" spellcheck="false"></textarea>
        <span class="hint">the job file you would give <code>trainctl submit</code> (docs/spec.md)</span>
        <label for="y-base">Its folder</label><input id="y-base" name="base">
        <span class="hint">absolute; relative paths in the spec (workdir, files) start here (empty: the server's folder)</span>
        <span></span><div class="row"><button class="primary" type="submit" id="y-go">Submit spec</button><span id="y-err" class="error"></span></div>
      </form></div>`);
    const f = document.getElementById("submit");
    view.querySelectorAll("select.team-pick").forEach(sel => { if (teams.your_team && mine.includes(teams.your_team)) sel.value = teams.your_team; });
    // the team chosen in form el, for the body of POST /api/v1/jobs (none: the server's pick)
    const teamOf = el => { const t = el.querySelector("select.team-pick"); return t && t.value ? { team: t.value } : {}; };
    const kind = document.getElementById("s-kind"), be = document.getElementById("s-backend");
    // the backends this job may use here; the others say why not
    function backends() {
      const distributed = kind.value === "distributed";
      f.querySelectorAll(".dist").forEach(e => e.style.display = distributed ? "" : "none");
      const why = [];
      for (const b of INFO.backends) {
        const no = !b.available ? b.why : distributed && !b.multi_node ? "runs a job on one node only" : "";
        const o = [...be.options].find(x => x.value === b.name);
        o.disabled = !!no; o.textContent = b.name + (no ? " (unavailable)" : "");
        if (no) why.push(`${b.name}: ${no}`);
      }
      const usable = [...be.options].filter(o => !o.disabled);
      if (be.selectedOptions.length === 0 || be.selectedOptions[0].disabled) be.value = usable.length ? usable[0].value : "";
      document.getElementById("s-backend-why").textContent = why.join("; ") +
        (usable.length || !INFO.backends.length ? "" : ` — no backend of this server can run a ${kind.value} job`);
      document.getElementById("s-go").disabled = INFO.backends.length > 0 && !usable.length;
    }
    kind.onchange = backends; backends();
    f.onsubmit = async ev => {
      ev.preventDefault();
      const v = Object.fromEntries(new FormData(f));
      const spec = {
        name: v.name, command: v.command,
        devices: { type: v.type, per_node: Number(v.count) },
        priority: Number(v.priority), preemptible: f.elements.preemptible.checked,
        restart: { max_restarts: Number(v.restarts) },
      };
      if (kind.value === "distributed") spec.nodes = Number(v.nodes);
      if (v.backend) spec.backend = v.backend;
      if (v.workdir) spec.workdir = v.workdir;
      if (v.image) spec.image = v.image.trim();
      const env = {};
      for (const line of (v.env || "").split("\n")) {
        const l = line.trim(); if (!l) continue;
        const i = l.indexOf("=");
        if (i < 1) { document.getElementById("s-err").textContent = "environment: '" + l + "' is not KEY=value"; return; }
        env[l.slice(0, i)] = l.slice(i + 1);
      }
      if (Object.keys(env).length) spec.env = env;
      try {
        const r = await api("/jobs", { method: "POST", body: Object.assign({ spec }, teamOf(f)) });
        location.hash = "#/job/" + r.id;
      } catch (e) { document.getElementById("s-err").textContent = e.message; }
    };
    // the spec's text as it is: the server parses it as `trainctl submit` does (its errors name the line)
    const y = document.getElementById("submit-spec");
    y.onsubmit = async ev => {
      ev.preventDefault();
      const body = Object.assign({ spec: y.elements.spec.value, file: "pasted spec" }, teamOf(y));
      if (y.elements.base.value.trim()) body.base = y.elements.base.value.trim();
      try {
        const r = await api("/jobs", { method: "POST", body });
        location.hash = "#/job/" + r.id;
      } catch (e) { document.getElementById("y-err").textContent = e.message; }
    };
  }

  // ---- charts ----
  // a chart in el (one drawn there before is ended first); series: the lines'
  // labels, or null when opts.series says it all
  function chart(el, title, series, data, opts) {
    if (el.chartEnd) el.chartEnd();
    if (!window.uPlot) { put(el, html`<p class="muted">charts need uPlot (npm ci --prefix web, then rebuild)</p>`); return null; }
    el.replaceChildren();
    const width = Math.max(260, el.clientWidth || 400);
    const u = new uPlot(Object.assign({
      title, width, height: 240,
      scales: { x: { time: false } },
      series: [{ label: "step" }].concat((series || []).map((s, i) => ({ label: s, stroke: METRIC_COLORS[i % METRIC_COLORS.length], width: 1.5, points: { show: false } }))),
      axes: [{ label: "step", size: 40 }, { size: 60 }],
    }, opts || {}), data, el);
    // resize in the next frame, and only on a real change: resizing inside the
    // observer's callback makes "ResizeObserver loop completed" errors
    let frame = 0;
    const ro = new ResizeObserver(() => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => {
        const w = Math.max(260, el.clientWidth);
        if (w !== u.width) u.setSize({ width: w, height: 240 });
      });
    });
    ro.observe(el);
    const end = () => { cancelAnimationFrame(frame); ro.disconnect(); u.destroy(); el.chartEnd = null; cleanup = cleanup.filter(f => f !== end); };
    el.chartEnd = end; cleanup.push(end);
    return u;
  }

  // ---- job page ----
  async function pageJob(id, tab) {
    tab = tab || "brief";
    const gen = routeGen;
    let j;
    try { j = await api("/jobs/" + encodeURIComponent(id)); } catch (e) { if (gen === routeGen) showError(view, e); return; }
    if (gen !== routeGen) return;
    view.dataset.job = j.id;
    put(view, html`
      <div class="card" id="job-head"></div>
      <div id="job-wait"></div>
      <div class="tabs">${["brief", "logs", "metrics", "resources", "checkpoints", "report"].map(t =>
        html`<button data-tab="${t}" class="${t === tab ? "active" : ""}">${t[0].toUpperCase() + t.slice(1)}</button>`)}</div>
      <div id="tab"></div>`);
    jobHeader(j);
    view.querySelectorAll(".tabs button").forEach(b => b.onclick = () => { location.hash = `#/job/${j.id}/${b.dataset.tab}`; });
    const el = document.getElementById("tab");
    const show = { brief: tabBrief, logs: tabLogs, metrics: tabMetrics, resources: tabResources, checkpoints: tabCkpt, report: tabReport }[tab] || tabBrief;
    show(j, el);
    // every tab follows the job while it lives: each event of the job (and a
    // slow poll, for what no event announces: metrics, samples, checkpoints)
    // re-reads it; a tab redraws from the new job (el.update, else whole)
    // when what it shows changed, and a live job's metrics and samples on
    // every read (a redraw for nothing would detach what the user points at)
    const facts = x => JSON.stringify([x.state, x.started, x.ended, x.exit_code, x.restarts, x.root_cause,
      (x.events || []).length, x.checkpoints, x.diagnostics, x.devices, x.rounds]);
    let seen = facts(j), wasLive = live(j.state), busy = false, again = false;
    async function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      try {
        let nj;
        try { nj = await api("/jobs/" + encodeURIComponent(j.id)); } catch (e) { return; /* the next event retries */ }
        if (gen !== routeGen) return;
        jobHeader(nj);
        const text = facts(nj), changed = text !== seen;
        seen = text;
        if (changed || wasLive) {
          if (el.update) el.update(nj, changed); else if (changed) show(nj, el);
        }
        wasLive = live(nj.state);
      } finally {
        busy = false;
        if (again && gen === routeGen) { again = false; refresh(); }
      }
    }
    // the stream starts at the newest event: a change between the first read
    // and the stream's open is caught by the re-read on open (and the poll)
    stream("/events", { open: refresh, state: e => { if (e.job === j.id) refresh(); } });
    const poll = setInterval(refresh, 5000); cleanup.push(() => clearInterval(poll));
  }
  // the job page's header: name, live state, action buttons, devices
  function jobHeader(j) {
    const head = document.getElementById("job-head");
    if (!head || view.dataset.job !== j.id) return; /* the user left this job's page */
    put(head, html`
      <div class="toolbar"><h1>${j.name} ${stateBadge(j.state)}</h1><span id="job-actions">${actionButtons(j)}</span></div>
      <div class="muted">${j.id} · ${j.user}${j.team ? html` · team <span id="job-team">${j.team}</span>` : ""} · ${j.device_type} × ${j.device_count}${j.devices ? " [" + j.devices + "]" : ""} · priority ${j.priority}${j.preemptible ? " · preemptible" : ""}</div>`);
    bindActions(head, () => j.id, () => route());
    waitCard(j);
  }
  function tabBrief(j, el) {
    put(el, html`
      <div class="card"><dl class="kv">
        <dt>state</dt><dd id="b-state">${stateBadge(j.state)}</dd><dt>created</dt><dd>${fmtTime(j.created)}</dd>
        <dt>started</dt><dd>${fmtTime(j.started)}</dd><dt>ended</dt><dd>${fmtTime(j.ended)}</dd>
        <dt>exit code</dt><dd id="b-exit">${j.ended ? j.exit_code : "-"}</dd><dt>restarts</dt><dd>${j.restarts}</dd>
        <dt>run folder</dt><dd>${j.run_dir}</dd>${j.spec && j.spec.image ? html`<dt>image</dt><dd id="j-image">${j.spec.image}</dd>` : ""}</dl></div>
      ${j.root_cause ? html`<div class="card" id="b-cause"><h2>Root cause</h2><p class="cause-line">${causeLine(j.root_cause)}</p><pre>${j.root_cause}</pre></div>` : ""}
      ${diagCard(j.diagnostics)}
      <div id="rounds"></div>
      <div id="endpoints"></div>
      <div class="card"><h2>State history</h2><div class="scroll"><table><thead><tr><th>Time</th><th>State</th><th>Reason</th></tr></thead><tbody>
        ${(j.events || []).map(e => html`<tr><td>${fmtTime(e.time)}</td><td>${stateBadge(e.state)}</td><td class="wrap">${e.kind === "round" && typeof e.reason === "string" ? e.reason.split("\n")[0] : e.reason}</td></tr>`)}
      </tbody></table></div></div>
      <div class="card"><h2>Spec</h2><pre>${JSON.stringify(j.spec, null, 2)}</pre></div>`);
    roundsCard(j.rounds, el.querySelector("#rounds"));
    if (j.spec && j.spec.endpoints && j.spec.endpoints.length) endpointsCard(j);
  }
  // a multi-node job's rounds (docs/slurm.md "Rounds"): who ran each attempt,
  // the nodes left out and why, the spares used, the time from the loss to the
  // first step.  Hosts and causes are the job's: they go in as text only.
  function roundsCard(rounds, box) {
    if (!box || !Array.isArray(rounds) || !rounds.length) return;
    const mk = (tag, txt, cls) => {
      const e = document.createElement(tag);
      if (txt != null) e.textContent = String(txt);
      if (cls) e.className = cls;
      return e;
    };
    const list = v => Array.isArray(v) ? v.filter(x => x && typeof x === "object") : [];
    const card = mk("div", null, "card");
    card.id = "rounds";
    card.append(mk("h2", "Rounds"));
    const table = mk("table"), head = mk("tr"), body = mk("tbody");
    for (const t of ["Attempt", "Nodes", "Members", "Left out", "Spare", "Loss to first step"]) head.append(mk("th", t));
    table.append(mk("thead"), body);
    table.tHead.append(head);
    for (const r of rounds.filter(x => x && typeof x === "object")) {
      const tr = mk("tr");
      tr.dataset.attempt = String(r.attempt);
      const members = (Array.isArray(r.members) ? r.members : []).map((h, i) => `${i}: ${h}`).join(", ");
      const out = list(r.left_out).map(x => `node ${x.node} (${x.host}) ${x.why}${x.cause ? ": " + x.cause : ""}`).join("; ");
      const spares = list(r.spares).map(x => `${x.host} → node ${x.node}${x.in_place_of ? ` in place of ${x.in_place_of}` : ""}`).join("; ");
      const t = r.loss_to_first_step_s;
      const took = typeof t === "number" && isFinite(t) ? `${t.toFixed(1)} s` : "-";
      for (const v of [r.attempt, r.nodes, members || "-", out || "-", spares || "-", took]) tr.append(mk("td", v, "wrap"));
      body.append(tr);
    }
    const scroll = mk("div", null, "scroll");
    scroll.append(table);
    card.append(scroll);
    box.replaceWith(card);
  }
  // the job's endpoints (docs/endpoints.md): Jupyter, TensorBoard, ... through the server's proxy
  async function endpointsCard(j) {
    let r;
    try { r = await api(`/jobs/${encodeURIComponent(j.id)}/endpoints`); } catch (e) { return; }
    const el = document.getElementById("endpoints");
    if (!el || view.dataset.job !== j.id) return;
    const rows = r.endpoints.map(e => html`<tr><td>${e.name}</td><td>${e.kind}</td><td>${e.state}</td><td>${
      e.url && live(e.state, "endpoint_states") ? html`<a href="${e.url}" target="_blank" rel="noopener">${e.url}</a>` : e.note || ""}</td></tr>`);
    put(el, html`<div class="card"><h2>Endpoints</h2><div class="scroll"><table><thead><tr><th>Name</th><th>Kind</th><th>State</th><th>Open</th></tr></thead>
      <tbody>${rows.length ? rows : html`<tr><td colspan="4" class="muted">none yet (they start with the first workers)</td></tr>`}</tbody></table></div></div>`);
  }
  // the watchdog's findings (docs/diagnostics.md): step time per rank, stragglers, hangs.
  // The job wrote the file: the server keeps only the fields of their types, and
  // here too a number is used only where it is one, and all text is escaped.
  function diagCard(d) {
    if (!d || !Array.isArray(d.ranks)) return "";
    const num = v => typeof v === "number" && isFinite(v) ? v : null;
    const list = v => Array.isArray(v) ? v.filter(x => x && typeof x === "object") : [];
    const slow = new Map(list(d.stragglers).map(s => [s.rank, s]));
    const secs = v => num(v) == null ? "-" : (v < 1 ? (v * 1000).toPrecision(3) + " ms" : v.toPrecision(3) + " s");
    const rows = list(d.ranks).map(r => {
      const s = slow.get(r.rank);
      const pct = s && num(s.slower_percent) != null ? Math.round(s.slower_percent) : "?";
      return html`<tr class="${s ? "straggler" : ""}" data-rank="${r.rank}"><td>${r.rank}</td><td>${r.steps}</td>
        <td class="step-time">${secs(r.step_time)}</td><td>${s ? `straggler: ${pct}% slower than the median` : ""}</td></tr>`;
    });
    // plain strings: html`` escapes each whole
    const hangs = list(d.hangs).map(hg => {
      const t = `hang in attempt ${hg.attempt}: no progress for ${num(hg.silent_seconds) == null ? "?" : hg.silent_seconds.toFixed(1)} s` +
        `${hg.culprit != null ? `; likely culprit rank ${hg.culprit}` : ""}` +
        `${hg.culprit_node != null ? ` on node ${hg.culprit_node}${hg.culprit_node_name ? ` (${hg.culprit_node_name})` : ""}` : ""} (${hg.why})`;
      return html`<p class="hang">${t}</p>`;
    });
    return html`<div class="card" id="diag"><h2>Step time per rank</h2>
      <p class="muted">median step time ${secs(d.median_step_time)}${num(d.hang_timeout) ? ` · hang timeout ${Math.round(d.hang_timeout)} s` : ""}
        · stragglers: more than ${d.straggler_percent}% slower over ${d.straggler_steps} steps</p>
      <div class="scroll"><table><thead><tr><th>Rank</th><th>Steps</th><th>Step time</th><th></th></tr></thead><tbody>${rows}</tbody></table></div>
      ${hangs}</div>`;
  }
  function tabLogs(j, el) {
    const ranks = Array.from({ length: Math.max(1, j.device_count) }, (_, i) => i);
    put(el, html`<div class="card"><div class="toolbar">
        <select id="l-rank">${ranks.map(r => html`<option value="${r}">rank ${r}</option>`)}</select>
        <span class="muted">last 2,000 lines, live</span><span style="flex:1"></span>
        <a class="button" id="l-dl" href="#">Download full log</a></div>
      <pre id="l-text"></pre></div>`);
    const pre = document.getElementById("l-text"), sel = document.getElementById("l-rank");
    const dl = document.getElementById("l-dl");
    let es = null, lines = [];
    function open() {
      if (es) es.close();
      lines = []; pre.textContent = "";
      const r = sel.value;
      dl.href = `/api/v1/jobs/${encodeURIComponent(j.id)}/logs?rank=${r}&download=1`;
      es = stream(`/jobs/${encodeURIComponent(j.id)}/logs?follow=1&tail=2000&rank=${r}`, {
        message: d => {
          lines.push(d.line);
          if (lines.length > 2000) lines.splice(0, lines.length - 2000);
          const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 20;
          pre.textContent = lines.join("\n");
          if (stick) pre.scrollTop = pre.scrollHeight;
        },
        end: () => es.close(),
      });
    }
    sel.onchange = open; open();
    el.update = () => {}; /* the log stream is live itself */
  }
  // TensorBoard's smoothing: an exponential moving average with weight w,
  // debiased so that the first points are not pulled toward 0; points that
  // are not finite (or missing) stay as they are.  w = 0: the series itself.
  function smooth(ys, w) {
    let last = 0, n = 0;
    return ys.map(y => {
      if (!(w > 0) || y == null || !isFinite(y)) return y;
      last = last * w + (1 - w) * y; n++;
      return last / (1 - Math.pow(w, n));
    });
  }
  const METRIC_COLORS = ["#2f6fde", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#d6336c"];
  async function tabMetrics(j, el) {
    let list;
    try { list = await api(`/jobs/${encodeURIComponent(j.id)}/metrics`); } catch (e) { showError(el, e); return; }
    const names = [...new Set(list.series.map(s => s.metric))].sort();
    const ranks = [...new Set(list.series.map(s => s.rank))].sort((a, b) => a - b);
    if (!names.length) {
      put(el, html`<div class="card muted">no metrics yet (DLLogger, tcap or MindFormers lines in the workers' output)</div>`);
      /* the job page re-reads a live job: then look again */
      el.update = nj => { if (live(nj.state) || nj.ended) tabMetrics(nj, el); };
      return;
    }
    const pick = names.includes("loss") ? "loss" : (names.find(n => /loss/.test(n)) || names[0]);
    put(el, html`<div class="card"><div class="toolbar">
        <select id="m-name"><option value="*">all metrics</option>${names.map(n => html`<option>${n}</option>`)}</select>
        <select id="m-rank"><option value="-1">all ranks</option>${ranks.map(r => html`<option value="${r}">rank ${r}</option>`)}</select>
        <label class="row" for="m-smooth">smoothing <input id="m-smooth" type="range" min="0" max="0.99" step="0.01" value="0.6" style="width:110px"><span id="m-smooth-v">0.60</span></label>
        <label class="row" for="m-log"><input id="m-log" type="checkbox"> log scale</label>
        <button id="m-reset">Reset zoom</button><span class="muted" id="m-info"></span></div></div>
      <div id="m-charts"></div>`);
    const nameSel = document.getElementById("m-name"), rankSel = document.getElementById("m-rank");
    const sm = document.getElementById("m-smooth"), logBox = document.getElementById("m-log");
    const box = document.getElementById("m-charts");
    nameSel.value = pick;
    const zoom = new Map(); // metric -> [xmin, xmax] dragged to
    let gen = 0;
    // one chart per metric shown: each rank's points (faint when smoothed) and its smoothed line
    async function drawOne(name, cell, g) {
      const [xmin, xmax] = zoom.get(name) || [null, null];
      const p = new URLSearchParams({ name, rank: rankSel.value, points: 2000 });
      if (xmin != null) { p.set("xmin", Math.floor(xmin)); p.set("xmax", Math.ceil(xmax)); }
      const r = await api(`/jobs/${encodeURIComponent(j.id)}/metrics/points?` + p);
      if (g !== gen || !cell.isConnected) return null; /* redrawn or left meanwhile */
      const w = Number(sm.value), log = logBox.checked;
      // the x of each point is the one the API gives: the step the job logged
      const tables = r.series.map(s => {
        const ys = log ? s.y.map(v => v > 0 ? v : null) : s.y;
        return w > 0 ? [s.x, ys, smooth(ys, w)] : [s.x, ys];
      });
      const data = tables.length ? (tables.length === 1 ? tables[0] : uPlot.join(tables)) : [[], []];
      const series = [];
      r.series.forEach((s, i) => {
        const c = METRIC_COLORS[i % METRIC_COLORS.length];
        series.push({ label: "rank " + s.rank + (w > 0 ? " raw" : ""), stroke: w > 0 ? c + "40" : c, width: 1, points: { show: false } });
        if (w > 0) series.push({ label: "rank " + s.rank, stroke: c, width: 1.5, points: { show: false } });
      });
      cell.dataset.metric = name;
      cell.dataset.log = log ? "1" : "0";
      cell.dataset.smoothing = String(w);
      // what uPlot was given, for the browser test: rank 0's steps and last smoothed value
      if (r.series.length) {
        cell.dataset.x = r.series[0].x.slice(0, 200).join(",");
        cell.dataset.n = String(r.series[0].x.length);
        const ys = tables[0][w > 0 ? 2 : 1];
        cell.dataset.last = String(ys.length ? ys[ys.length - 1] : "");
      }
      const u = chart(cell, name, null, data, {
        series: [{ label: "step" }].concat(series),
        scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
        hooks: { setSelect: [uu => {
          if (uu.select.width < 5) return;
          zoom.set(name, [uu.posToVal(uu.select.left, "x"), uu.posToVal(uu.select.left + uu.select.width, "x")]);
          drawOne(name, cell, gen);
        }] },
        cursor: { drag: { x: true, y: false, setScale: false } },
      });
      return r;
    }
    async function draw() {
      const g = ++gen;
      const shown = nameSel.value === "*" ? names : [nameSel.value];
      document.getElementById("m-smooth-v").textContent = Number(sm.value).toFixed(2);
      // the cells stay while their metrics do (no flicker when a live job's charts redraw)
      if (box.dataset.shown !== shown.join("\n")) {
        put(box, html`<div class="${shown.length > 1 ? "charts" : ""}">${shown.map((n, i) => html`<div class="card">${
          i ? html`<div class="chart metric-chart"></div>` : html`<div class="chart metric-chart" id="m-chart"></div>`}</div>`)}</div>`);
        box.dataset.shown = shown.join("\n");
      }
      const cells = [...box.querySelectorAll(".metric-chart")];
      let rs;
      try { rs = await Promise.all(shown.map((n, i) => drawOne(n, cells[i], g))); } catch (e) { banner(e.message); return; }
      const info = document.getElementById("m-info");
      if (g !== gen || !info) return;
      info.textContent = shown.length > 1 ? `${shown.length} charts` :
        (rs[0] ? rs[0].series.map(s => `rank ${s.rank}: ${s.n} points, ${s.x.length} drawn`).join(" · ") : "");
    }
    nameSel.onchange = rankSel.onchange = sm.oninput = logBox.onchange = () => draw();
    document.getElementById("m-reset").onclick = () => { zoom.clear(); draw(); };
    // a live job: new points, and new metrics (then the lists are read again)
    el.update = async nj => {
      let l2;
      try { l2 = await api(`/jobs/${encodeURIComponent(nj.id)}/metrics`); } catch (e) { return; }
      const n2 = [...new Set(l2.series.map(s => s.metric))].sort(), r2 = [...new Set(l2.series.map(s => s.rank))];
      if (!nameSel.isConnected) return;
      if (n2.join("\n") !== names.join("\n") || r2.length !== ranks.length) {
        const keep = [nameSel.value, rankSel.value, sm.value, logBox.checked];
        await tabMetrics(nj, el);
        const ns = document.getElementById("m-name");
        if (!ns) return;
        if ([...ns.options].some(o => o.value === keep[0])) ns.value = keep[0];
        document.getElementById("m-rank").value = keep[1];
        document.getElementById("m-smooth").value = keep[2];
        document.getElementById("m-log").checked = keep[3];
        ns.onchange();
        return;
      }
      draw();
    };
    await draw();
  }
  async function tabResources(j, el) {
    el.update = nj => tabResources(nj, el); /* new samples while the job lives */
    put(el, html`<div class="charts"><div class="card chart" id="r-cpu"></div><div class="card chart" id="r-mem"></div>
      <div class="card chart" id="r-util"></div><div class="card chart" id="r-dmem"></div></div>`);
    let r;
    try { r = await api(`/jobs/${encodeURIComponent(j.id)}/usage`); } catch (e) { showError(el, e); return; }
    const s = r.samples;
    if (!s.length) { put(el, html`<div class="card muted">no samples yet (taken every few seconds while the job runs)</div>`); return; }
    const t0 = s[0].time, xs = s.map(x => x.time - t0);
    const o = { scales: { x: { time: false } }, axes: [{ label: "seconds", size: 40 }, { size: 60 }] };
    chart(document.getElementById("r-cpu"), "CPU % (process tree)", ["cpu %"], [xs, s.map(x => x.cpu)], o);
    chart(document.getElementById("r-mem"), "Memory (MiB, resident)", ["MiB"], [xs, s.map(x => x.mem / 1048576)], o);
    const devs = (s[s.length - 1].devices || []).map(d => d.type + " " + d.id);
    if (devs.length) {
      chart(document.getElementById("r-util"), "Device utilisation %", devs, [xs].concat(devs.map((_, i) => s.map(x => (x.devices[i] || {}).util))), o);
      chart(document.getElementById("r-dmem"), "Device memory (MiB)", devs, [xs].concat(devs.map((_, i) => s.map(x => ((x.devices[i] || {}).mem_used || 0) / 1048576))), o);
    } else {
      put(document.getElementById("r-util"), html`<p class="muted">no device telemetry for ${j.device_type} (NVML or npu-smi report GPUs and NPUs)</p>`);
      document.getElementById("r-dmem").remove();
    }
  }
  function tabCkpt(j, el) {
    const cks = j.checkpoints || [];
    put(el, html`<div class="card scroll"><table><thead><tr><th>Name</th><th>Step</th><th>Epoch</th><th>Files</th><th>Size</th><th>CRC32C</th><th>State</th><th>Created</th></tr></thead><tbody>
      ${cks.length ? cks.map(c => html`<tr><td>${c.name}</td><td>${c.step}</td><td>${c.epoch < 0 ? "-" : c.epoch}</td><td>${c.files}</td><td>${fmtBytes(c.bytes)}</td><td>${c.checksum}</td><td>${c.state}</td><td>${fmtTime(c.created)}</td></tr>`)
      : html`<tr><td colspan="8" class="muted">no checkpoints recorded</td></tr>`}</tbody></table></div>`);
  }
  // a JSON value as tables: an object's fields as rows (nested objects as their
  // own tables), a list of objects as one table with a column per field
  function valueTable(v) {
    if (v == null) return html`<span class="muted">-</span>`;
    if (Array.isArray(v)) {
      if (!v.length) return html`<span class="muted">none</span>`;
      if (!v.every(x => x && typeof x === "object" && !Array.isArray(x))) return v.map(fmtVal).join(", ");
      const cols = [...new Set(v.flatMap(x => Object.keys(x)))];
      return html`<table class="sub"><thead><tr>${cols.map(c => html`<th>${c}</th>`)}</tr></thead>
        <tbody>${v.map(x => html`<tr>${cols.map(c => html`<td>${valueTable(x[c])}</td>`)}</tr>`)}</tbody></table>`;
    }
    if (typeof v === "object") {
      return html`<table class="kvt"><tbody>${Object.entries(v).map(([k, x]) => html`<tr><th>${k}</th><td class="wrap">${valueTable(x)}</td></tr>`)}</tbody></table>`;
    }
    return fmtVal(v);
  }
  async function tabReport(j, el) {
    try {
      const r = await api(`/jobs/${encodeURIComponent(j.id)}/report`);
      put(el, html`<div class="card scroll" id="report"><h2>Report</h2>${valueTable(r)}</div>`);
    } catch (e) {
      put(el, html`<div class="card scroll" id="report"><p class="muted">${e.message}${j.metrics ? " · the metrics so far:" : ""}</p>${j.metrics ? valueTable(j.metrics) : ""}</div>`);
    }
  }

  // ---- compare: several jobs, or a sweep's trials ----
  // one chart per metric, one line per job (rank 0), each downsampled by the
  // server as a single job's chart is (points=2000)
  async function pageCompare(query) {
    const q = new URLSearchParams(query);
    const gen = routeGen;
    let jobs = (q.get("jobs") || "").split(",").filter(Boolean).map(id => ({ id, label: id }));
    let title = "Compare jobs";
    try {
      if (q.get("sweep")) {
        const sw = await api("/sweeps/" + encodeURIComponent(q.get("sweep")));
        title = `Compare the trials of ${sw.name}`;
        jobs = sw.trials.filter(t => t.job).map(t => ({ id: t.job, label: `trial ${t.trial}: ` + Object.entries(t.params).map(([k, v]) => k.split(".").pop() + "=" + v).join(" ") }));
      } else {
        for (const j of jobs) { const d = await api("/jobs/" + encodeURIComponent(j.id)); j.label = d.name; j.id = d.id; }
      }
    } catch (e) { if (gen === routeGen) showError(view, e); return; }
    if (gen !== routeGen) return;
    put(view, html`<div class="card"><div class="toolbar"><h1>${title}</h1><span class="muted" id="c-info"></span></div>
      <div class="muted">${jobs.length ? jobs.map((j, i) => html`${i ? " · " : "reference: "}<a href="#/job/${j.id}">${j.label}</a>`) : "no jobs"}</div></div>
      <div class="charts" id="c-charts"></div>`);
    if (jobs.length < 1) return;
    const lists = await Promise.all(jobs.map(j => api(`/jobs/${encodeURIComponent(j.id)}/metrics`).catch(() => ({ series: [] }))));
    if (gen !== routeGen) return;
    const names = [...new Set(lists.flatMap(l => l.series.map(s => s.metric)))].sort();
    const box = document.getElementById("c-charts");
    document.getElementById("c-info").textContent = `${jobs.length} jobs · ${names.length} metrics`;
    if (!names.length) { put(box, html`<div class="card muted">no metrics in these jobs</div>`); return; }
    for (const name of names) {
      const el = node(html`<div class="card chart compare-chart" data-metric="${name}"></div>`);
      box.appendChild(el);
      const with_ = jobs.filter((_, i) => lists[i].series.some(s => s.metric === name));
      const rs = await Promise.all(with_.map(j => api(`/jobs/${encodeURIComponent(j.id)}/metrics/points?` +
        new URLSearchParams({ name, rank: 0, points: 2000 })).catch(() => ({ series: [] }))));
      if (gen !== routeGen) return;
      const tables = rs.map(r => r.series.length ? [r.series[0].x, r.series[0].y] : [[], []]);
      const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
      el.dataset.series = String(with_.length);
      // points each line has, for the browser test (what uPlot was given to draw)
      el.dataset.points = data.slice(1).map(d => d.filter(v => v != null).length).join(",");
      chart(el, name, with_.map(j => j.label), data);
    }
  }

  // ---- sweeps ----
  async function pageSweeps() {
    let r;
    const gen = routeGen;
    try { r = await api("/sweeps"); } catch (e) { if (gen === routeGen) showError(view, e); return; }
    if (gen !== routeGen) return;
    put(view, html`<div class="card"><div class="toolbar"><h1>Sweeps</h1><span class="muted">trainctl sweep FILE --server URL</span></div>
      <div class="scroll"><table id="sweeps"><thead><tr><th>Name</th><th>State</th><th>Created</th><th>Note</th></tr></thead><tbody>
      ${r.sweeps.length ? r.sweeps.map(x => html`<tr data-id="${x.id}"><td><a href="#/sweep/${x.id}">${x.name}</a><div class="muted">${x.id}</div></td>
        <td>${stateBadge(x.state)}</td><td>${fmtTime(x.created)}</td><td class="wrap">${x.note || ""}</td></tr>`)
      : html`<tr><td colspan="4" class="muted">no sweeps</td></tr>`}</tbody></table></div></div>`);
  }
  function fmtVal(v) { return v == null ? "-" : typeof v === "number" ? String(Number(v.toPrecision(6))) : typeof v === "string" ? v : JSON.stringify(v); }
  async function pageSweep(id) {
    const gen = routeGen;
    let sw;
    try { sw = await api("/sweeps/" + encodeURIComponent(id)); } catch (e) { if (gen === routeGen) showError(view, e); return; }
    if (gen !== routeGen) return;
    const keys = sw.parameters;
    const best = sw.best;
    put(view, html`
      <div class="card"><div class="toolbar"><h1>${sw.name} ${stateBadge(sw.state)}</h1>
        <a class="button" href="#/compare?sweep=${sw.id}">Compare trials</a></div>
        <div class="muted">${sw.id} · objective ${sw.metric} (${sw.mode}) · ${sw.trials.length} trials${sw.note ? " · " + sw.note : ""}</div>
        ${best ? html`<p>Best: trial ${best.trial}, ${sw.metric} ${fmtVal(best.objective)} (<a href="#/job/${best.job || ""}">${best.job || "-"}</a>) · re-run: <code>trainctl clone ${best.job || ""}</code></p>` : ""}</div>
      <div class="card scroll"><table id="trials"><thead><tr>
        <th data-sort="trial">Trial</th><th data-sort="state">State</th><th data-sort="objective">Objective</th><th data-sort="steps">Steps</th>
        ${keys.map(k => html`<th data-sort="p:${k}">${k}</th>`)}<th>Job</th><th>Note</th></tr></thead><tbody></tbody></table></div>
      <div class="charts" id="s-plots"></div>`);
    let sortKey = null, asc = true; // null: the server's order, best first
    const val = (t, k) => k.startsWith("p:") ? t.params[k.slice(2)] : t[k];
    function rows() {
      const v = sw.trials.slice();
      if (sortKey) v.sort((a, b) => {
        const x = val(a, sortKey), y = val(b, sortKey);
        if (x == null && y == null) return 0; if (x == null) return 1; if (y == null) return -1;
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return asc ? c : -c;
      });
      put(view.querySelector("#trials tbody"), html`${v.map(t => html`<tr data-trial="${t.trial}">
        <td>${t.trial}</td><td>${stateBadge(t.state)}</td><td class="objective">${fmtVal(t.objective)}</td><td>${t.steps}</td>
        ${keys.map(k => html`<td>${fmtVal(t.params[k])}</td>`)}
        <td>${t.job ? html`<a href="#/job/${t.job}">${t.job}</a>` : "-"}</td><td class="wrap">${t.note || ""}</td></tr>`)}`);
      view.querySelectorAll("#trials th[data-sort]").forEach(th => th.classList.toggle("sorted", th.dataset.sort === sortKey));
    }
    view.querySelectorAll("#trials th[data-sort]").forEach(th => th.onclick = () => {
      if (sortKey === th.dataset.sort) asc = !asc; else { sortKey = th.dataset.sort; asc = true; }
      rows();
    });
    rows();
    // parameter against objective: one scatter per parameter (text values by their order)
    const box = document.getElementById("s-plots");
    for (const k of keys) {
      const pts = sw.trials.filter(t => t.objective != null).map(t => {
        const v = t.params[k];
        return { v, t };
      });
      const cats = [...new Set(pts.filter(p => typeof p.v !== "number").map(p => fmtVal(p.v)))];
      const xy = pts.map(p => [typeof p.v === "number" ? p.v : cats.indexOf(fmtVal(p.v)), p.t.objective]).sort((a, b) => a[0] - b[0]);
      const el = node(html`<div class="card chart scatter" data-param="${k}"></div>`);
      box.appendChild(el);
      chart(el, `${sw.metric} by ${k}`, [sw.metric], [xy.map(p => p[0]), xy.map(p => p[1])], {
        series: [{ label: k }, { label: sw.metric, stroke: "#2f6fde", width: 0, paths: () => null, points: { show: true, size: 8, fill: "#2f6fde" } }],
        axes: [{ label: k, values: cats.length ? (u, vs) => vs.map(x => cats[x] != null && Number.isInteger(x) ? cats[x] : "") : undefined }, { size: 60 }],
      });
    }
    if (live(sw.state, "sweep_states")) { const t = setTimeout(route, 5000); cleanup.push(() => clearTimeout(t)); }
  }

  // ---- devices page ----
  async function pageDevices() {
    put(view, html`<div class="card"><div class="toolbar"><h1>Devices</h1><span class="muted">refreshed every 5 s</span></div>
      <div class="scroll"><table id="devs"><thead><tr><th>Device</th><th>Name</th><th>Utilisation</th><th>Memory</th><th>Power</th><th>Temp</th><th>Job</th></tr></thead><tbody></tbody></table></div>
      <div id="nodes-sick" hidden><h2>Unhealthy on other nodes</h2><p class="muted">found by the supervisors of multi-node jobs on their own hosts</p>
      <div class="scroll"><table id="nodedevs"><thead><tr><th>Node</th><th>Device</th><th>Health</th><th>Job</th></tr></thead><tbody></tbody></table></div></div></div>`);
    async function load() {
      let d; try { d = await api("/devices"); } catch (e) { banner(e.message); return; }
      const tb = view.querySelector("#devs tbody");
      if (!tb) return; /* left the page meanwhile */
      put(tb, html`${d.devices.map(x => html`<tr>
        <td>${x.type} ${x.id}</td><td>${x.name || ""}</td><td>${x.util == null ? "-" : x.util + " %"}</td>
        <td>${x.mem_total ? fmtBytes(x.mem_used) + " / " + fmtBytes(x.mem_total) : "-"}</td>
        <td>${x.power == null ? "-" : x.power + " W"}</td><td>${x.temp == null ? "-" : x.temp + " °C"}</td>
        <td>${x.job ? html`<a href="#/job/${x.job}">${x.job}</a>` : html`<span class="muted">free</span>`}</td></tr>`)}`);
      const nodes = d.nodes || [];
      view.querySelector("#nodes-sick").hidden = !nodes.length;
      put(view.querySelector("#nodedevs tbody"), html`${nodes.map(x => html`<tr>
        <td>${x.node}</td><td>${x.type} ${x.id}</td><td>${x.unhealthy}</td>
        <td>${x.job ? html`<a href="#/job/${x.job}">${x.job}</a>` : "-"}</td></tr>`)}`);
    }
    await load();
    const t = setInterval(load, 5000); cleanup.push(() => clearInterval(t));
  }

  // ---- teams page (docs/server.md, "Teams") ----
  // per type: the guarantee, the borrowing limit, in use, borrowed, waiting
  const TEAM_COLS = [["guarantee", "Guarantee"], ["borrow", "Borrow limit"], ["in_use", "In use"],
    ["borrowed", "Borrowed"], ["waiting_devices", "Waiting"]];
  // a job id as a link where the viewer may open it (their own, or an admin's view), else as text
  function jobRef(id, user) {
    return WHO.admin || user === WHO.user ? html`<a href="#/job/${id}">${id}</a>` : html`<span>${id}</span>`;
  }
  function teamCard(t) {
    const types = [...new Set(TEAM_COLS.flatMap(([k]) => Object.keys(t[k] || {})))].sort();
    const waiting = Array.isArray(t.waiting) ? t.waiting : [];
    return html`<div class="card team" data-team="${t.name}">
      <div class="toolbar"><h2>${t.name}</h2>${t.member ? html`<span class="state mine">your team</span>` : ""}
        ${t.default ? html`<span class="muted">default of members in several teams</span>` : ""}</div>
      <p class="members"><span class="muted">members: </span>${(t.members || []).join(", ") || "none"}</p>
      <div class="scroll"><table class="team-devs"><thead><tr><th>Device type</th>${TEAM_COLS.map(([, h]) => html`<th>${h}</th>`)}</tr></thead>
        <tbody>${types.length ? types.map(ty => html`<tr data-type="${ty}"><td>${ty}</td>${TEAM_COLS.map(([k]) =>
          html`<td data-col="${k}">${k === "borrow" && !(ty in (t.guarantee || {})) && !(ty in (t.borrow || {})) ? "no limit" : (t[k] || {})[ty] || 0}</td>`)}</tr>`)
        : html`<tr><td colspan="6" class="muted">no devices guaranteed, none in use</td></tr>`}</tbody></table></div>
      <p><span class="running-jobs">${t.running_jobs}</span> running · <span class="waiting-jobs">${t.waiting_jobs}</span> waiting</p>
      ${waiting.length ? html`<div class="scroll"><table class="team-waiting"><thead><tr><th>Waiting job</th><th>User</th><th>Devices</th><th>Why</th></tr></thead>
        <tbody>${waiting.map(w => html`<tr data-id="${w.id}"><td>${jobRef(w.id, w.user)}</td><td>${w.user}</td><td>${w.type} × ${w.count}</td><td class="wrap why">${w.why}</td></tr>`)}</tbody></table></div>
        ${t.waiting_jobs > waiting.length ? html`<p class="muted">the first ${waiting.length} in queue order</p>` : ""}` : ""}
    </div>`;
  }
  async function pageTeams() {
    put(view, html`<div class="card"><div class="toolbar"><h1>Teams</h1><a class="button" href="#/queue">Queue</a><a class="button" href="#/usage">Usage</a>
      <span class="muted">refreshed every 5 s</span></div>
      <p class="muted">A team always gets its guarantee back; beyond it, it may borrow idle devices up to its borrowing limit,
        and borrowed jobs are preempted (checkpoint first) when another team needs its guarantee.</p></div>
      <div id="teams"></div>`);
    const box = document.getElementById("teams");
    async function load() {
      let r;
      try { r = await api("/teams"); } catch (e) { if (box.isConnected) showError(box, e); return; }
      if (!box.isConnected) return;
      put(box, r.teams.length ? html`${r.teams.map(teamCard)}` :
        html`<div class="card muted">this server has no teams (the teams: section of its --config file)</div>`);
    }
    await load();
    const t = setInterval(load, 5000); cleanup.push(() => clearInterval(t));
  }

  // ---- the queue (GET /api/v1/queue): waiting jobs in start order, with why ----
  const QUEUE_KNOWN = new Set(["position", "id", "name", "user", "team", "type", "count", "priority",
    "waited_seconds", "why", "behind", "reserved_from"]);
  // what the server added beyond the fields above (fair-share factors, ...), as plain text
  function extraFields(o) {
    const extra = Object.entries(o).filter(([k]) => !QUEUE_KNOWN.has(k));
    return extra.length ? html`<div class="muted extra">${extra.map(([k, v], i) => html`${i ? " · " : ""}${k}: ${fmtVal(v)}`)}</div>` : "";
  }
  // the job w is held behind (a link where the viewer may open it: jobs lists the queue, for its owner)
  function behindLine(w, jobs) {
    if (!w.behind) return "";
    const owner = ((jobs || []).find(x => x.id === w.behind) || {}).user;
    return html`<div class="behind">held behind ${jobRef(w.behind, owner)}${w.reserved_from ? html`, whose devices are reserved from <span class="reserved">${fmtTime(w.reserved_from)}</span>` : ""}</div>`;
  }
  async function pageQueue() {
    put(view, html`<div class="card"><div class="toolbar"><h1>Queue</h1><span class="muted" id="q-info"></span><a class="button" href="#/teams">Teams</a></div>
      <div class="scroll"><table id="queue"><thead><tr><th>#</th><th>Job</th><th>User</th><th>Team</th><th>Devices</th>
        <th class="hide-narrow">Priority</th><th>Waited</th><th>Why it waits</th></tr></thead><tbody></tbody></table></div></div>`);
    const tb = view.querySelector("#queue tbody");
    async function load() {
      let r;
      try { r = await api("/queue"); } catch (e) { banner(e.message); return; }
      if (!tb.isConnected) return;
      document.getElementById("q-info").textContent = r.total > r.jobs.length ?
        `${r.total} waiting, the first ${r.jobs.length} shown · refreshed every 5 s` : `${r.total} waiting · refreshed every 5 s`;
      put(tb, r.jobs.length ? html`${r.jobs.map(j => html`<tr data-id="${j.id}">
        <td class="pos">${j.position}</td>
        <td>${j.name != null ? html`<span class="name">${j.name}</span>` : html`<span class="muted">another user's job</span>`}<div class="muted">${jobRef(j.id, j.user)}</div></td>
        <td>${j.user}</td><td class="team">${j.team || "-"}</td><td>${j.type} × ${j.count}</td>
        <td class="hide-narrow">${j.priority}</td><td>${fmtSecs(j.waited_seconds)}</td>
        <td class="wrap why">${j.why}${behindLine(j, r.jobs)}${extraFields(j)}</td></tr>`)}`
        : html`<tr><td colspan="8" class="muted">no job waits</td></tr>`);
    }
    await load();
    const t = setInterval(load, 5000); cleanup.push(() => clearInterval(t));
  }
  // a queued job's page: why it waits (the job's own `waiting`) and its place in the queue
  async function waitCard(j) {
    const el = document.getElementById("job-wait");
    if (!el || view.dataset.job !== j.id) return;
    if (!j.waiting) { el.replaceChildren(); return; }
    let pos = null, q = null;
    try {
      q = await api("/queue");
      const me = q.jobs.find(x => x.id === j.id);
      if (me) pos = html`<span class="pos">${me.position}</span> of ${q.total} waiting${extraFields(me)}`;
    } catch (e) { /* the reason alone still says it */ }
    if (!el.isConnected || view.dataset.job !== j.id) return;
    put(el, html`<div class="card waiting"><h2>Why it waits</h2><p class="why">${j.waiting.why}</p>${behindLine(j.waiting, q && q.jobs)}
      ${pos ? html`<p class="muted">place in the <a href="#/queue">queue</a>: ${pos}</p>` : ""}</div>`);
  }

  // ---- usage (GET /api/v1/usage, docs/usage.md): device-hours per team or user ----
  const SVGNS = "http://www.w3.org/2000/svg";
  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }
  // one bar group per team (or user), a bar per device type, built with DOM calls
  function usageChart(el, rows, by) {
    const groups = [...new Set(rows.map(r => r.group))], types = [...new Set(rows.map(r => r.device_type))].sort();
    const max = Math.max(0, ...rows.map(r => r.device_hours));
    const W = Math.max(320, 90 * groups.length * Math.max(1, types.length) / 2 + 80), H = 240, top = 20, bottom = 40, left = 56;
    const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", height: H, role: "img", class: "usage-chart" });
    const title = svgEl("title"); title.textContent = "device-hours per " + by; svg.appendChild(title);
    const plotH = H - top - bottom, gw = (W - left - 10) / Math.max(1, groups.length);
    const bw = Math.max(6, Math.min(40, (gw - 16) / Math.max(1, types.length)));
    svg.appendChild(svgEl("line", { x1: left, y1: top + plotH, x2: W - 10, y2: top + plotH, stroke: "#c5ccd8" }));
    const unit = svgEl("text", { x: 4, y: 12, "font-size": 11, fill: "#5b6578" });
    unit.textContent = "device-hours";
    svg.appendChild(unit);
    for (const f of [0, 0.5, 1]) {
      const y = top + plotH * (1 - f);
      const t = svgEl("text", { x: left - 6, y: y + 4, "text-anchor": "end", "font-size": 11, fill: "#5b6578" });
      t.textContent = (max * f).toPrecision(3).replace(/\.?0+$/, "") || "0";
      svg.appendChild(t);
    }
    groups.forEach((g, gi) => {
      const x0 = left + gi * gw + (gw - bw * types.length) / 2;
      types.forEach((ty, ti) => {
        const r = rows.find(x => x.group === g && x.device_type === ty);
        if (!r) return;
        const h = max > 0 ? plotH * r.device_hours / max : 0;
        const rect = svgEl("rect", { x: x0 + ti * bw, y: top + plotH - h, width: bw - 2, height: h,
          fill: METRIC_COLORS[ti % METRIC_COLORS.length], class: "bar" });
        rect.dataset.group = g; rect.dataset.type = ty; rect.dataset.hours = String(r.device_hours);
        const tip = svgEl("title"); tip.textContent = `${g || "-"} · ${ty}: ${r.device_hours.toFixed(3)} device-hours`;
        rect.appendChild(tip);
        svg.appendChild(rect);
      });
      const label = svgEl("text", { x: left + gi * gw + gw / 2, y: H - bottom + 16, "text-anchor": "middle", "font-size": 12, fill: "#1d2430" });
      label.textContent = g || "(none)";
      svg.appendChild(label);
    });
    const legend = document.createElement("div");
    legend.className = "legend muted";
    types.forEach((ty, ti) => {
      const sw = document.createElement("span");
      sw.className = "swatch"; sw.style.background = METRIC_COLORS[ti % METRIC_COLORS.length];
      const name = document.createElement("span"); name.textContent = ty;
      legend.append(sw, name);
    });
    el.replaceChildren(svg, legend);
  }
  function isoDay(t) { return new Date(t).toISOString().slice(0, 10); }
  async function pageUsage(query) {
    const q = new URLSearchParams(query);
    const gen = routeGen;
    put(view, html`<div class="card"><div class="toolbar"><h1>Usage</h1><a class="button" id="u-csv" download>CSV</a></div>
      <form class="toolbar" id="u-form">
        <label for="u-since">since</label><input id="u-since" type="date" required>
        <label for="u-until">until</label><input id="u-until" type="date">
        <label for="u-by">by</label><select id="u-by"><option value="team">team</option><option value="user">user</option></select>
        ${WHO.admin ? html`<label for="u-user">user</label><input id="u-user" placeholder="everyone" style="width:140px">` : ""}
        <button class="primary" type="submit">Show</button></form>
      <p class="muted" id="u-info"></p></div>
      <div class="card chart-card"><div id="u-chart"></div></div>
      <div class="card scroll"><table id="usage"><thead><tr><th id="u-group">Team</th><th>Device type</th><th>Device-hours</th><th>Jobs</th>
        <th>Mean wait</th><th>Longest wait</th></tr></thead><tbody></tbody></table></div>`);
    const f = document.getElementById("u-form"), since = document.getElementById("u-since"),
      until = document.getElementById("u-until"), by = document.getElementById("u-by"), user = document.getElementById("u-user");
    since.value = q.get("since") || isoDay(Date.now() - 30 * 86400e3);
    until.value = q.get("until") || "";
    by.value = q.get("by") === "user" ? "user" : "team";
    if (user) user.value = q.get("user") || "";
    f.onsubmit = ev => {
      ev.preventDefault();
      const p = new URLSearchParams({ since: since.value, by: by.value });
      if (until.value) p.set("until", until.value);
      if (user && user.value.trim()) p.set("user", user.value.trim());
      location.hash = "#/usage?" + p; /* the window is in the address: a link to it shows the same */
    };
    // the API's arguments: until is the end of the day the picker names (a window [since, until))
    const p = new URLSearchParams({ since: since.value, by: by.value });
    if (until.value) p.set("until", isoDay(Date.parse(until.value) + 86400e3));
    if (user && user.value.trim()) p.set("user", user.value.trim());
    document.getElementById("u-csv").href = "/api/v1/usage?" + p + "&format=csv";
    document.getElementById("u-group").textContent = by.value === "user" ? "User" : "Team";
    let r;
    try { r = await api("/usage?" + p); } catch (e) { if (gen === routeGen) showError(document.getElementById("u-chart"), e); return; }
    if (gen !== routeGen) return;
    document.getElementById("u-info").textContent = `${r.since} .. ${r.until} (UTC), by ${r.by}` +
      (WHO.admin ? "" : " · your own jobs only");
    put(view.querySelector("#usage tbody"), r.rows.length ? html`${r.rows.map(x => html`<tr data-group="${x.group}" data-type="${x.device_type}">
      <td class="group">${x.group || "(none)"}</td><td>${x.device_type}</td><td class="hours">${x.device_hours.toFixed(3)}</td>
      <td class="jobs">${x.jobs}</td><td>${fmtSecs(x.wait_mean_seconds)}</td><td>${fmtSecs(x.wait_max_seconds)}</td></tr>`)}`
      : html`<tr><td colspan="6" class="muted">no device time recorded in this period</td></tr>`);
    const chartEl = document.getElementById("u-chart");
    if (r.rows.length) usageChart(chartEl, r.rows, r.by);
    else chartEl.replaceChildren();
  }

  // ---- routing ----
  // stop what the current page runs (streams, polls, charts); its awaits see routeGen moved on
  function stopPage() {
    const fs = cleanup;
    cleanup = [];
    fs.forEach(f => { try { f(); } catch (e) { /* already gone */ } });
    delete view.dataset.job;
    routeGen++;
  }
  function route() {
    stopPage();
    const hash = location.hash.replace(/^#\/?/, "");
    const [path, query] = hash.split("?");
    const parts = path.split("/").filter(Boolean);
    document.querySelectorAll("header nav a").forEach(a => a.classList.toggle("active", a.dataset.nav === (parts[0] || "jobs")));
    if (parts[0] === "job" && parts[1]) return pageJob(decodeURIComponent(parts[1]), parts[2]);
    if (parts[0] === "submit") return pageSubmit();
    if (parts[0] === "login") return showLogin();
    if (parts[0] === "devices") return pageDevices();
    if (parts[0] === "teams") return pageTeams();
    if (parts[0] === "queue") return pageQueue();
    if (parts[0] === "usage") return pageUsage(query || "");
    if (parts[0] === "compare") return pageCompare(query || "");
    if (parts[0] === "sweeps") return pageSweeps();
    if (parts[0] === "sweep" && parts[1]) return pageSweep(decodeURIComponent(parts[1]));
    return pageJobs(query || "");
  }
  window.addEventListener("hashchange", route);
  const whoP = api("/whoami").then(w => {
    WHO = w;
    document.getElementById("who").textContent = w.user + (w.admin ? " (admin)" : "");
  }).catch(() => {});
  // without the info (an old server, or no token yet) pages still work, with no state filter or backend choice
  const infoP = api("/info").then(i => {
    INFO = i;
    document.querySelector(".brand").title = "trainctl " + i.version;
  }).catch(() => {});
  Promise.all([whoP, infoP]).finally(route);
})();
