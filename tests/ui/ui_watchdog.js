// ui_watchdog.js -- the job page's step time per rank (docs/diagnostics.md),
// in Debian's chromium (playwright-core), for tests/e2e/test_ui_watchdog.py:
//   node tests/ui/ui_watchdog.js BASE_URL ARTIFACT_DIR JOB_ID LOGIN_URL
// (LOGIN_URL: the server's one-time login URL, docs/security.md)
// Opens the job's page, waits for its "Step time per rank" table, and prints
// one JSON line with the rows it shows; exits non-zero on a failed check.
// Waits are on conditions (UI_TIMEOUT_SCALE=N stretches their deadlines).
"use strict";
const { chromium } = require("playwright-core");
const path = require("path");

const [base, out, job, login] = process.argv.slice(2);
const T = ms => ms * Number(process.env.UI_TIMEOUT_SCALE || "1");
const result = {};

(async () => {
  let browser = null, page = null;
  try {
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium", timeout: Math.max(60000, T(60000)),
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(T(30000));
    page.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });
    await page.goto(login);
    await page.waitForURL(u => !String(u).includes("/login"), { timeout: T(30000) });
    await page.goto(`${base}/#/job/${job}/brief`);
    await page.waitForSelector("#diag tbody tr", { timeout: T(60000) });
    result.rows = await page.evaluate(() => [...document.querySelectorAll("#diag tbody tr")].map(tr => ({
      rank: Number(tr.dataset.rank),
      straggler: tr.classList.contains("straggler"),
      step_time: tr.querySelector(".step-time").textContent.trim(),
      note: tr.lastElementChild.textContent.trim(),
    })));
    result.heading = await page.textContent("#diag h2");
    await page.screenshot({ path: path.join(out, "job-step-times.png"), fullPage: true });
    console.log(JSON.stringify(result));
    await browser.close();
  } catch (e) {
    result.error = String(e.message || e);
    if (page) await page.screenshot({ path: path.join(out, "step-times-failure.png"), fullPage: true }).catch(() => {});
    console.log(JSON.stringify(result));
    if (browser) await browser.close().catch(() => {});
    process.exit(1);
  }
})();
