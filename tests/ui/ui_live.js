// ui_live.js -- the web UI of issue 29 (items 7, 11, 15) and issue 26 (item 4)
// in Debian's chromium (playwright-core), for tests/e2e/test_ui_live.py:
//   node tests/ui/ui_live.js PHASE BASE_URL ARTIFACT_DIR LOGIN_URL [ARGS...]
// (LOGIN_URL: a one-time login URL of the server, docs/security.md)
// Phases:
//   watch JOB WORKDIR  the job's Brief tab from running to failed, never
//                      reloaded (the job fails once WORKDIR/release exists),
//                      then the jobs list's row of the job
//   metrics JOB        the Metrics tab: all charts, smoothing, log scale, steps
//   first OLD_LOGIN REPORT_JOB SPEC_FILE
//                      the login page of a browser with no session, a used
//                      login link (OLD_LOGIN), the favicon, the submit form and
//                      the spec in SPEC_FILE pasted and submitted, then the
//                      report tab of REPORT_JOB
// Prints one JSON line with what the page showed; exits non-zero on a failed
// step.  Waits are on conditions (UI_TIMEOUT_SCALE=N stretches them).
"use strict";
const { launch, loggedIn } = require("./chromium");
const fs = require("fs");
const path = require("path");

const [phase, base, out, login, ...args] = process.argv.slice(2);
const T = ms => ms * Number(process.env.UI_TIMEOUT_SCALE || "1");
const result = { phase };

// a term and its value in the Brief tab's list (dt/dd)
function brief(page, term) {
  return page.evaluate(t => {
    const dt = [...document.querySelectorAll("#tab dl.kv dt")].find(x => x.textContent.trim() === t);
    return dt && dt.nextElementSibling ? dt.nextElementSibling.textContent.trim() : null;
  }, term);
}

async function waitFor(page, what, fn, ms) {
  const end = Date.now() + T(ms);
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await page.waitForTimeout(100);
  }
}

async function watch(page, job, workdir) {
  await page.goto(`${base}/#/job/${job}/brief`);
  await page.evaluate(() => { window.notReloaded = true; });
  result.states = [];
  const note = async () => { const s = await brief(page, "state"); if (s && result.states[result.states.length - 1] !== s) result.states.push(s); return s; };
  await waitFor(page, "the Brief tab to say running", async () => (await note()) === "running", 120000);
  result.exit_running = await brief(page, "exit code");
  await page.screenshot({ path: path.join(out, "live-brief-running.png"), fullPage: true });
  fs.writeFileSync(path.join(workdir, "release"), "");
  await waitFor(page, "the Brief tab to say failed", async () => (await note()) === "failed", 120000);
  await waitFor(page, "the root cause in the Brief tab", () => page.evaluate(() =>
    [...document.querySelectorAll("#tab .card h2")].some(h => h.textContent === "Root cause")), 30000);
  result.exit_failed = await brief(page, "exit code");
  result.root_cause = await page.evaluate(() => {
    const h = [...document.querySelectorAll("#tab .card h2")].find(x => x.textContent === "Root cause");
    return h ? h.parentElement.textContent : null;
  });
  result.not_reloaded = await page.evaluate(() => window.notReloaded === true);
  await page.screenshot({ path: path.join(out, "live-brief-failed.png"), fullPage: true });
  // the jobs list: its row's result and cause, and only the buttons that do something
  await page.goto(`${base}/#/jobs`);
  const row = page.locator(`#jobs tbody tr[data-id="${job}"]`);
  await row.waitFor({ timeout: T(30000) });
  await waitFor(page, "the row's cause", async () => /KeyError/.test(await row.textContent()), 30000).catch(() => {});
  result.row = {
    headers: await page.$$eval("#jobs thead th", ths => ths.map(t => t.textContent.trim())),
    cells: await row.locator("td").allTextContents(),
    buttons: await row.locator("button").allTextContents(),
  };
  await page.screenshot({ path: path.join(out, "live-jobs-cause.png"), fullPage: true });
}

async function metrics(page, job) {
  await page.goto(`${base}/#/job/${job}/metrics`);
  await page.waitForSelector("#m-name", { timeout: T(30000) });
  result.options = await page.$$eval("#m-name option", os => os.map(o => o.value));
  result.smoothing = await page.inputValue("#m-smooth");
  await page.selectOption("#m-name", "*");
  const charts = () => page.$$eval(".metric-chart", cs => cs.map(c => ({
    metric: c.dataset.metric, x: c.dataset.x, last: Number(c.dataset.last), log: c.dataset.log,
    smoothing: c.dataset.smoothing, drawn: !!c.querySelector("canvas") })));
  await waitFor(page, "a chart of each metric", async () => {
    const c = await charts();
    return c.length === result.options.length - 1 && c.every(x => x.drawn && x.metric);
  }, 30000);
  result.all = await charts();
  await page.screenshot({ path: path.join(out, "live-metrics-all.png"), fullPage: true });
  await page.check("#m-log");
  await waitFor(page, "log scale on every chart", async () => (await charts()).every(c => c.log === "1"), 30000);
  result.log = await charts();
  await page.screenshot({ path: path.join(out, "live-metrics-log.png"), fullPage: true });
  // smoothing off: the points as logged
  await page.fill("#m-smooth", "0");
  await page.dispatchEvent("#m-smooth", "input");
  await waitFor(page, "the charts unsmoothed", async () => (await charts()).every(c => c.smoothing === "0"), 30000);
  result.raw = await charts();
}

async function first(browser, page, oldLogin, reportJob) {
  // no session: the login page says how to get a login link
  const anon = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await anon.goto(`${base}/`);
  await anon.waitForSelector("#login", { timeout: T(30000) }).catch(() => {});
  result.login_page = await anon.evaluate(() => document.querySelector("main").innerText);
  await anon.screenshot({ path: path.join(out, "live-login.png"), fullPage: true });
  // a used link: a page that says so, not JSON
  const resp = await anon.goto(oldLogin);
  result.used = { status: resp.status(), type: resp.headers()["content-type"] || "",
    text: await anon.evaluate(() => document.body.innerText) };
  await anon.screenshot({ path: path.join(out, "live-login-used.png"), fullPage: true });
  await anon.close();
  // the favicon the page names, as the browser fetches it
  await page.goto(`${base}/#/submit`);
  await page.waitForSelector("#s-name", { timeout: T(30000) });
  result.favicon = await page.evaluate(async () => {
    const l = document.querySelector("link[rel~=icon]");
    if (!l) return null;
    const r = await fetch(l.href);
    return { status: r.status, type: r.headers.get("Content-Type"), bytes: (await r.text()).length };
  });
  // the name field: empty, with no example that looks like a value
  result.name_field = await page.evaluate(() => {
    const n = document.getElementById("s-name");
    return { value: n.value, placeholder: n.placeholder };
  });
  await page.screenshot({ path: path.join(out, "live-submit.png"), fullPage: true });
  // a pasted YAML spec
  const yaml = fs.readFileSync(args[2], "utf8");
  result.spec_box = await page.$("#y-spec") !== null;
  if (result.spec_box) {
    await page.fill("#y-spec", yaml);
    await page.click("#y-go");
    await page.waitForURL(u => /#\/job\//.test(String(u)), { timeout: T(30000) });
    result.pasted_job = decodeURIComponent(String(page.url()).split("#/job/")[1].split("/")[0]);
  }
  // the report of a finished job: tables, no JSON text
  await page.goto(`${base}/#/job/${reportJob}/report`);
  await waitFor(page, "the report", () => page.evaluate(() => {
    const t = document.getElementById("tab"); return t && t.textContent.includes("throughput");
  }), 30000);
  result.report = await page.evaluate(() => {
    const t = document.getElementById("tab");
    return { tables: t.querySelectorAll("table").length, pre: t.querySelectorAll("pre").length,
      rows: [...t.querySelectorAll("tr")].map(r => r.innerText.replace(/\s+/g, " ").trim()).slice(0, 60) };
  });
  await page.screenshot({ path: path.join(out, "live-report.png"), fullPage: true });
}

(async () => {
  let browser = null, page = null;
  try {
    browser = await launch(T);
    page = await loggedIn(browser, login, T, result);
    if (phase === "watch") await watch(page, args[0], args[1]);
    else if (phase === "metrics") await metrics(page, args[0]);
    else if (phase === "first") await first(browser, page, args[0], args[1]);
    else throw new Error("no phase " + phase);
    console.log(JSON.stringify(result));
    await browser.close();
  } catch (e) {
    result.error = String(e.message || e);
    if (page) await page.screenshot({ path: path.join(out, `live-${phase}-failure.png`), fullPage: true }).catch(() => {});
    console.log(JSON.stringify(result));
    if (browser) await browser.close().catch(() => {});
    process.exit(1);
  }
})();
