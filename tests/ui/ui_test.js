// ui_test.js -- drives Debian's chromium (playwright-core) through the web UI
// of a running `trainctl server`: submit a job with the form, watch it run and
// succeed, check the loss chart has points drawn, stop another job with its
// button, and keep screenshots.  Used by tests/e2e/test_ui.py:
//   node tests/ui/ui_test.js BASE_URL ARTIFACT_DIR WORKDIR SLEEPER_JOB_ID
// Prints one JSON line with what it saw; exits non-zero on a failed check.
"use strict";
const { chromium } = require("playwright-core");
const path = require("path");

const [base, out, workdir, sleeper] = process.argv.slice(2);
const shot = (page, name) => page.screenshot({ path: path.join(out, name + ".png"), fullPage: true });

async function stateOf(page) {
  return (await page.locator(".toolbar h1 .state").first().textContent()).trim();
}

async function waitState(page, want, ms) {
  const end = Date.now() + ms;
  let seen = [];
  while (Date.now() < end) {
    const s = await stateOf(page).catch(() => "");
    if (s && seen[seen.length - 1] !== s) seen.push(s);
    if (s === want) return seen;
    await page.waitForTimeout(200);
  }
  throw new Error(`state ${want} not reached in ${ms} ms (saw ${seen.join(" -> ")})`);
}

(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  const result = {};
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });
    await page.goto(base + "/#/submit");
    await page.fill("#s-name", "ui-loss");
    await page.selectOption("#s-type", "cpu");
    await page.fill("#s-count", "1");
    await page.fill("#s-workdir", workdir);
    await page.fill("#s-cmd", "python3 loss.py");
    await page.fill("#s-env", "STEPS=60\nPAUSE=0.05");
    await shot(page, "submit-form");
    await page.click("#s-go");
    await page.waitForURL(/#\/job\//, { timeout: 10000 });
    result.job = decodeURIComponent(page.url().split("#/job/")[1].split("/")[0]);
    result.states = await waitState(page, "running", 30000);
    await shot(page, "job-running");
    result.states = result.states.concat(await waitState(page, "succeeded", 60000));
    await shot(page, "job-succeeded");

    await page.click('.tabs button[data-tab="metrics"]');
    await page.waitForSelector("#m-chart canvas", { timeout: 15000 });
    await page.waitForTimeout(500);
    result.metric = await page.inputValue("#m-name");
    // count painted pixels in the plotting area: a blank canvas has none
    result.painted = await page.evaluate(() => {
      const c = document.querySelector("#m-chart canvas");
      const ctx = c.getContext("2d");
      const d = ctx.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n;
    });
    result.info = await page.textContent("#m-info");
    await shot(page, "job-metrics");

    await page.click('.tabs button[data-tab="logs"]');
    await page.waitForFunction(() => document.querySelector("#l-text") &&
      document.querySelector("#l-text").textContent.includes("done"), null, { timeout: 15000 });
    result.logs = (await page.textContent("#l-text")).split("\n").length;
    await shot(page, "job-logs");

    // stop the sleeper with its button in the jobs table
    await page.goto(base + "/#/jobs");
    const row = page.locator(`tr[data-id="${sleeper}"]`);
    await row.waitFor({ timeout: 10000 });
    await row.locator('button[data-act="stop"]').click();
    const end = Date.now() + 30000;
    while (Date.now() < end) {
      const s = (await row.locator(".state").textContent()).trim();
      result.sleeper = s;
      if (s === "killed") break;
      await page.waitForTimeout(300);
    }
    await shot(page, "jobs-table");
    await page.goto(base + "/#/devices");
    await page.waitForSelector("#devs tbody tr", { timeout: 10000 });
    await shot(page, "devices");

    // a phone-width screen
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 } });
    await phone.goto(base + "/#/job/" + encodeURIComponent(result.job) + "/metrics");
    await phone.waitForSelector("#m-chart canvas", { timeout: 15000 });
    result.phone_overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await shot(phone, "phone-metrics");
    await phone.goto(base + "/#/jobs");
    await phone.waitForSelector("#jobs tbody tr", { timeout: 10000 });
    await shot(phone, "phone-jobs");
  } catch (e) {
    result.error = String(e && e.stack || e);
  }
  await browser.close();
  console.log(JSON.stringify(result));
  process.exit(result.error ? 1 : 0);
})();
