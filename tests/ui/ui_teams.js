// ui_teams.js -- the teams, queue and usage pages and the submit form's team
// (docs/server.md "Teams", docs/usage.md), in Debian's chromium
// (playwright-core), for tests/e2e/test_ui_teams.py:
//   node tests/ui/ui_teams.js BASE_URL ARTIFACT_DIR PLAN_JSON
// PLAN_JSON: a file holding {logins: {a, b, admin}: one-time login URLs,
// n2: a waiting job of b's, hidden: the name of a's waiting job (b must not
// see it), submit_b, submit_a: the names of the jobs the forms submit,
// hostile: a text with markup}.  Each user has a browser context of its own.
// Prints one JSON line {b: {...}, a: {...}, admin: {...}, hostile: {...},
// pageerrors?, error?}; the test checks the numbers.  Waits are on
// conditions (UI_TIMEOUT_SCALE=N stretches their deadlines).
"use strict";
const { chromium } = require("playwright-core");
const fs = require("fs");
const path = require("path");

const [base, out, planFile] = process.argv.slice(2);
const plan = JSON.parse(fs.readFileSync(planFile, "utf8"));
const T = ms => ms * Number(process.env.UI_TIMEOUT_SCALE || "1");
const result = {};
let step = "start";

async function context(browser, login) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(T(30000));
  page.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });
  await page.goto(login);
  await page.waitForURL(u => !String(u).includes("/login"), { timeout: T(30000) });
  await page.waitForFunction(() => document.getElementById("who").textContent !== "");
  return page;
}

async function open(page, hash, wait) {
  step = hash;
  // a page load of its own: after a mere hash change the last page's elements could still match
  await page.goto("about:blank");
  await page.goto(`${base}/${hash}`);
  await page.waitForSelector(wait, { state: "attached", timeout: T(30000) });
}

// the teams page as data: per team its member mark, members, per type each column's text, waiting rows
function teamsOf() {
  const o = {};
  for (const c of document.querySelectorAll(".card.team")) {
    const rows = {};
    for (const tr of c.querySelectorAll("table.team-devs tbody tr[data-type]")) {
      rows[tr.dataset.type] = Object.fromEntries([...tr.querySelectorAll("td[data-col]")].map(td => [td.dataset.col, td.textContent.trim()]));
    }
    o[c.dataset.team] = {
      mine: !!c.querySelector(".state.mine"), members: c.querySelector("p.members").textContent,
      rows, running: c.querySelector(".running-jobs").textContent, waiting_jobs: c.querySelector(".waiting-jobs").textContent,
      waiting: [...c.querySelectorAll("table.team-waiting tbody tr")].map(tr => ({
        id: tr.dataset.id, why: tr.querySelector(".why").textContent, link: !!tr.querySelector("a") })),
    };
  }
  return o;
}

function queueOf() {
  return [...document.querySelectorAll("#queue tbody tr[data-id]")].map(tr => ({
    id: tr.dataset.id, pos: tr.querySelector(".pos").textContent, team: tr.querySelector(".team").textContent,
    name: tr.querySelector(".name") ? tr.querySelector(".name").textContent : null,
    why: tr.querySelector(".why").textContent, link: !!tr.querySelector(`a[href="#/job/${tr.dataset.id}"]`),
    behind: tr.querySelector(".behind") ? tr.querySelector(".behind").textContent : null,
    reserved: tr.querySelector(".behind .reserved") ? tr.querySelector(".behind .reserved").textContent : null,
    behind_link: !!tr.querySelector(".behind a"),
  }));
}

function usageOf() {
  return {
    rows: [...document.querySelectorAll("#usage tbody tr[data-group]")].map(tr => ({
      group: tr.dataset.group, type: tr.dataset.type, hours: Number(tr.querySelector(".hours").textContent),
      jobs: Number(tr.querySelector(".jobs").textContent) })),
    bars: [...document.querySelectorAll("svg.usage-chart rect.bar")].map(r => ({
      group: r.dataset.group, type: r.dataset.type, hours: Number(r.dataset.hours), height: Number(r.getAttribute("height")) })),
    user_box: !!document.getElementById("u-user"),
    csv: document.getElementById("u-csv").getAttribute("href"),
    info: document.getElementById("u-info").textContent,
  };
}

// what the page holds beyond its own markup, once hostile text was drawn
const TAGS = ["img", "script", "iframe", "object", "embed", "meta", "link", "style", ".pwn"];
function census(args) {
  const [tags, needle] = args;
  const count = {};
  for (const t of tags) count[t] = document.querySelectorAll(`#view ${t}`).length;
  const handlers = [...document.querySelectorAll("#view *")].filter(e => [...e.attributes].some(a => /^on/i.test(a.name))).length;
  return { count, handlers, shown: document.getElementById("view").textContent.includes(needle),
           pwned: window.__pwned === undefined ? null : String(window.__pwned) };
}

// the submit form: the team control, then a job submitted with team (null: as offered)
async function submitForm(page, name, team) {
  await open(page, "#/submit", "#submit");
  const r = {
    select: await page.$$eval("#s-team option", os => os.map(o => o.value)),
    selected: await page.$eval("#s-team", s => s.value).catch(() => null),
    only: await page.$eval("#submit .team-only", e => e.textContent.trim()).catch(() => null),
  };
  if (team) await page.selectOption("#s-team", team);
  await page.fill("#s-name", name);
  await page.fill("#s-cmd", "true");
  await page.selectOption("#s-type", "gpu"); /* nlp is full: the job waits, and uses nothing */
  await page.click("#s-go");
  await page.waitForURL(u => String(u).includes("#/job/"), { timeout: T(30000) });
  await page.waitForSelector("#job-head h1");
  r.id = decodeURIComponent(page.url().split("#/job/")[1].split("/")[0]);
  r.team_shown = await page.$eval("#job-team", e => e.textContent).catch(() => null);
  return r;
}

(async () => {
  let browser = null;
  const pages = [];
  try {
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium", timeout: Math.max(60000, T(60000)),
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    });
    // ---- b: a member of nlp only, no admin ----
    step = "login b";
    const b = await context(browser, plan.logins.b);
    pages.push(b);
    result.b = {};
    await open(b, "#/teams", `.card.team[data-team="nlp"] table.team-waiting tr[data-id="${plan.n2}"]`);
    result.b.teams = await b.evaluate(teamsOf);
    await b.screenshot({ path: path.join(out, "teams.png"), fullPage: true });
    result.b.nav = await b.$$eval("header nav a", as => as.map(a => a.getAttribute("href")));
    await open(b, "#/queue", `#queue tbody tr[data-id="${plan.n2}"]`);
    result.b.queue = await b.evaluate(queueOf);
    result.b.queue_shows_hidden = await b.evaluate(n => document.getElementById("view").textContent.includes(n), plan.hidden);
    await b.screenshot({ path: path.join(out, "queue.png"), fullPage: true });
    await open(b, `#/job/${plan.n2}`, "#job-wait .card.waiting .pos");
    result.b.job = await b.evaluate(() => ({
      why: document.querySelector("#job-wait .why").textContent,
      pos: document.querySelector("#job-wait .pos").textContent,
      team: document.getElementById("job-team") ? document.getElementById("job-team").textContent : null }));
    await b.screenshot({ path: path.join(out, "job-waiting.png"), fullPage: true });
    await open(b, "#/usage?since=2026-01-01&by=user", "#usage tbody tr[data-group]");
    result.b.usage_user = await b.evaluate(usageOf);
    await open(b, "#/usage?since=2026-01-01&by=team", "#usage tbody tr[data-group]");
    result.b.usage_team = await b.evaluate(usageOf);
    // another user's usage, asked in the address: the API's 403, shown as an error
    await open(b, "#/usage?since=2026-01-01&by=user&user=" + encodeURIComponent(plan.a_user), "#usage tbody tr[data-group], .card.error");
    result.b.usage_other = await b.evaluate(usageOf);
    result.b.submit = await submitForm(b, plan.submit_b, null);

    // ---- a: in vision (default) and nlp: the form offers both ----
    step = "login a";
    const a = await context(browser, plan.logins.a);
    pages.push(a);
    result.a = { submit: await submitForm(a, plan.submit_a, "nlp") };
    await open(a, "#/queue", `#queue tbody tr[data-id="${plan.n2}"]`);
    result.a.queue = await a.evaluate(queueOf);

    // ---- the operator (admin): everyone's usage, the chart, the CSV ----
    step = "login admin";
    const adm = await context(browser, plan.logins.admin);
    pages.push(adm);
    result.admin = {};
    await open(adm, "#/usage?since=2026-01-01&by=team", "svg.usage-chart rect.bar");
    result.admin.usage = await adm.evaluate(usageOf);
    result.admin.csv = await adm.evaluate(async href => {
      const r = await fetch(href, { credentials: "same-origin" });
      return { status: r.status, type: r.headers.get("Content-Type"), disposition: r.headers.get("Content-Disposition"), text: await r.text() };
    }, result.admin.usage.csv);
    await adm.screenshot({ path: path.join(out, "usage.png"), fullPage: true });

    // ---- hostile names: the API's answers rewritten to carry markup (a server refuses
    // such names; the page must not depend on that) ----
    const H = plan.hostile;
    const rewrite = {
      "/api/v1/teams": body => { for (const t of body.teams) { t.name = H + t.name; t.member = true; t.members = t.members.map(m => H + m);
        for (const w of t.waiting) { w.user = H; w.why = H; w.type = H; } } },
      "/api/v1/queue": body => { for (const j of body.jobs) { j.name = H; j.team = H; j.user = H; j.why = H; j.fair_share = { note: H }; } },
      "/api/v1/usage": body => { for (const r of body.rows) { r.group = H + r.group; r.device_type = H; } },
      [`/api/v1/jobs/${plan.n2}`]: body => { body.name = H; body.team = H; if (body.waiting) body.waiting.why = H; },
    };
    await adm.route(u => Object.keys(rewrite).includes(new URL(String(u)).pathname), async r => {
      const res = await r.fetch();
      const body = await res.json();
      rewrite[new URL(r.request().url()).pathname](body);
      await r.fulfill({ response: res, json: body });
    });
    result.hostile = {};
    for (const [hash, wait] of [["#/teams", ".card.team"], ["#/queue", "#queue tbody tr[data-id]"],
      ["#/usage?since=2026-01-01&by=team", "svg.usage-chart rect.bar"], [`#/job/${plan.n2}`, "#job-wait .card.waiting .pos"],
      ["#/submit", "#submit"]]) {
      await open(adm, hash, wait);
      await adm.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 0)))));
      result.hostile[hash] = await adm.evaluate(census, [TAGS, H]);
    }
    await adm.screenshot({ path: path.join(out, "hostile-teams.png"), fullPage: true });
    console.log(JSON.stringify(result));
    await browser.close();
  } catch (e) {
    result.error = `${step}: ${String(e.message || e).split("\n")[0]}`;
    for (const [i, p] of pages.entries()) await p.screenshot({ path: path.join(out, `teams-failure-${i}.png`), fullPage: true }).catch(() => {});
    console.log(JSON.stringify(result));
    if (browser) await browser.close().catch(() => {});
    process.exit(1);
  }
})();
