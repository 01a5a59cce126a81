// ui_rounds.js -- the Rounds table of a multi-node job's page, in Debian's
// chromium (playwright-core), for tests/e2e/test_node_loss.py:
//   node tests/ui/ui_rounds.js BASE_URL LOGIN_URL JOB HOSTILE
// Opens the job's page twice: as the server sends it (the round records a
// real Slurm job wrote), then with HOSTILE put in place of the left-out
// node's host and cause and the spare's host of each round (no Slurm host
// or cause can carry markup), served at the page's network layer.  Prints
// one JSON line {real: rows, hostile: rows, extra, handlers, pwned,
// pageerrors?, error?}: rows are each table row's cell texts.  Waits are on
// conditions (UI_TIMEOUT_SCALE=N stretches their deadlines).
"use strict";
const { chromium } = require("playwright-core");

const [base, login, job, hostile] = process.argv.slice(2);
const T = ms => ms * Number(process.env.UI_TIMEOUT_SCALE || "1");
const TAGS = ["img", "meta", "script", "iframe", "object", "embed", "base", "link", "style", "form", "svg", "b"];
const result = {};

function census(tags) {
  const count = {};
  for (const t of tags) count[t] = document.getElementsByTagName(t).length;
  const handlers = [...document.querySelectorAll("*")].filter(e => [...e.attributes].some(a => /^on/i.test(a.name))).length;
  const rows = [...document.querySelectorAll("#rounds tbody tr")].map(tr => [...tr.cells].map(td => td.textContent));
  return { count, handlers, rows, pwned: window.__pwned === undefined ? null : String(window.__pwned) };
}

async function visit(page) {
  await page.goto(`${base}/#/job/${encodeURIComponent(job)}/brief`);
  await page.reload(); // a new hash alone would not load the page again
  await page.waitForSelector("#rounds tbody tr", { state: "attached", timeout: T(30000) });
  // two frames and a task: an onerror would have run by then
  await page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 0)))));
  return page.evaluate(census, TAGS);
}

(async () => {
  let browser = null;
  try {
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium", timeout: Math.max(60000, T(60000)),
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    });
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(T(30000));
    page.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });
    await page.goto(login);
    await page.waitForURL(u => !String(u).includes("/login"), { timeout: T(30000) });
    const real = await visit(page);
    result.real = real.rows;
    await page.route(`${base}/api/v1/jobs/${encodeURIComponent(job)}`, async r => {
      const res = await r.fetch();
      const body = await res.json();
      for (const round of body.rounds || []) {
        for (const x of round.left_out || []) { x.host = hostile; x.cause = hostile; }
        for (const x of round.spares || []) x.host = hostile;
      }
      await r.fulfill({ response: res, json: body });
    });
    const bad = await visit(page);
    result.hostile = bad.rows;
    result.extra = Object.fromEntries(Object.entries(bad.count).filter(([t, n]) => n > real.count[t]));
    result.handlers = bad.handlers - real.handlers;
    result.pwned = bad.pwned;
    console.log(JSON.stringify(result));
    await browser.close();
    process.exit(0);
  } catch (e) {
    result.error = String(e.message || e);
    console.log(JSON.stringify(result));
    if (browser) await browser.close().catch(() => {});
    process.exit(1);
  }
})();
