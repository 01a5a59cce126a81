// compare_test.js -- the compare view and the sweep page of the web UI in
// Debian's chromium (playwright-core), against a running `trainctl server`
// that has jobs and a finished sweep.  Used by tests/e2e/test_ui_compare.py:
//   node tests/ui/compare_test.js BASE_URL ARTIFACT_DIR SWEEP_ID JOB_ID...
// Tick the jobs on the jobs page and press Compare: one chart per metric,
// one series per job; the sweep page: its trials table sorted by the
// objective, one scatter per parameter; its Compare: one series per trial.
// Prints one JSON line with what it saw; exits non-zero on a failed check.
// Waits are on conditions with generous deadlines (UI_TIMEOUT_SCALE=N).
"use strict";
const { chromium } = require("playwright-core");
const path = require("path");

const [base, out, sweep, ...jobs] = process.argv.slice(2);
const T = ms => ms * Number(process.env.UI_TIMEOUT_SCALE || "1");
const shot = (page, name) => page.screenshot({ path: path.join(out, name + ".png"), fullPage: true });
const result = { steps: [] };
let step = "start";
function begin(name) { step = name; result.steps.push(name); }

async function waitFor(page, what, fn, ms) {
  const end = Date.now() + T(ms);
  let last, error = null;
  for (;;) {
    try { last = await fn(); error = null; } catch (e) { error = String(e.message || e).split("\n")[0]; }
    if (!error && last) return last;
    if (Date.now() > end)
      throw new Error(`${what}: not within ${T(ms)} ms (last seen: ${error ? "error " + error : JSON.stringify(last)})`);
    await page.waitForTimeout(150);
  }
}

// every compare chart: its metric, the series it drew (uPlot's legend rows
// less the x row), the points each line was given, and whether it has a canvas
const charts = page => page.evaluate(() => [...document.querySelectorAll(".compare-chart")].map(el => ({
  metric: el.dataset.metric,
  series: el.querySelectorAll(".u-legend .u-series").length - 1,
  labels: [...el.querySelectorAll(".u-legend .u-series .u-label")].slice(1).map(l => l.textContent),
  canvas: !!el.querySelector("canvas"),
  points: (el.dataset.points || "").split(",").filter(Boolean).map(Number),
})));

(async () => {
  let browser = null, page = null;
  try {
    begin("launch chromium");
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium", timeout: Math.max(60000, T(60000)),
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.setDefaultTimeout(T(30000));
    page.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });

    begin("tick the jobs and compare");
    // the server's one-time login URL leaves the session cookie (docs/security.md)
    if (process.env.UI_LOGIN_URL) await page.goto(process.env.UI_LOGIN_URL);
    await page.goto(base + "/#/jobs");
    for (const id of jobs) {
      const box = page.locator(`tr[data-id="${id}"] input.pick`);
      await box.waitFor({ timeout: T(30000) });
      await box.check();
    }
    await waitFor(page, "Compare enabled", () => page.locator("#cmp").isEnabled(), 10000);
    await page.click("#cmp");
    result.jobs_compare = await waitFor(page, "a chart per metric drawn", async () => {
      const c = await charts(page);
      return c.length >= 2 && c.every(x => x.canvas && x.series > 0) ? c : null;
    }, 60000);
    await shot(page, "compare-jobs");

    begin("the sweep page");
    await page.goto(base + "/#/sweep/" + encodeURIComponent(sweep));
    await page.waitForSelector("#trials tbody tr");
    const order = () => page.evaluate(() => [...document.querySelectorAll("#trials tbody td.objective")].map(td => Number(td.textContent)));
    result.trials = (await order()).length;
    await page.click('#trials th[data-sort="objective"]');
    result.sorted_up = await order();
    await page.click('#trials th[data-sort="objective"]');
    result.sorted_down = await order();
    result.scatters = await waitFor(page, "a scatter per parameter", () => page.evaluate(() => {
      const s = [...document.querySelectorAll(".scatter")];
      return s.length && s.every(el => el.querySelector("canvas")) ? s.map(el => el.dataset.param) : null;
    }), 30000);
    await shot(page, "sweep");

    begin("compare the sweep's trials");
    await page.click('a[href^="#/compare?sweep="]');
    result.sweep_compare = await waitFor(page, "the trials' charts drawn", async () => {
      const c = await charts(page);
      return c.length && c.every(x => x.canvas && x.series > 0) ? c : null;
    }, 60000);
    await shot(page, "compare-sweep");
  } catch (e) {
    result.error = `${step}: ${String(e && e.stack || e)}`;
    if (page) {
      result.page = await page.evaluate(() => (document.getElementById("view") || document.body).innerText.slice(0, 1500)).catch(() => null);
      await page.screenshot({ path: path.join(out, "compare-failure.png"), fullPage: true }).catch(() => {});
    }
  }
  if (browser) await browser.close().catch(() => {});
  console.log(JSON.stringify(result));
  process.exit(result.error ? 1 : 0);
})();
