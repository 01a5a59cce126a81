// ui_endpoint.js -- the submit form's image field and a job's endpoint on its
// own host name, in Debian's chromium (playwright-core), for
// tests/e2e/test_ui_endpoint.py:
//   node tests/ui/ui_endpoint.js BASE_URL ARTIFACT_DIR LOGIN_URL IMAGE ENDPOINT_JOB
// 1. logs in (the operator: an admin), submits a job with the form (a name, a
//    command, IMAGE) and reads the image on the job page and in the job's JSON;
// 2. opens ENDPOINT_JOB's page, follows its endpoint's link (a new tab), and
//    waits for the endpoint's page (tests/e2e/test_ui_endpoint.py writes it) to
//    report what its script could do against the API with the admin's cookie.
// Prints one JSON line; exits non-zero on a failed check.  Waits are on
// conditions (UI_TIMEOUT_SCALE=N stretches their deadlines).
"use strict";
const { chromium } = require("playwright-core");
const path = require("path");

const [base, out, login, image, epJob] = process.argv.slice(2);
const T = ms => ms * Number(process.env.UI_TIMEOUT_SCALE || "1");
const result = {};
let step = "start";

(async () => {
  let browser = null, page = null;
  try {
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium", timeout: Math.max(60000, T(60000)),
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP *.ep.test 127.0.0.1"],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(T(30000));
    page.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });
    step = "login";
    await page.goto(login);
    await page.waitForURL(u => !String(u).includes("/login"), { timeout: T(30000) });

    step = "submit form with an image";
    await page.goto(base + "/#/submit");
    await page.waitForSelector("#s-go");
    await page.fill("#s-name", "ui-image");
    await page.selectOption("#s-type", "cpu");
    await page.fill("#s-cmd", "echo in the image");
    await page.fill("#s-image", image);
    await page.screenshot({ path: path.join(out, "submit-image.png"), fullPage: true });
    await page.click("#s-go");
    await page.waitForURL(/#\/job\//, { timeout: T(30000) });
    result.job = decodeURIComponent(page.url().split("#/job/")[1].split("/")[0]);
    step = "the job page shows the image";
    await page.waitForSelector("#j-image", { timeout: T(30000) });
    result.image_shown = (await page.textContent("#j-image")).trim();
    result.image_json = await page.evaluate(async id => {
      const r = await fetch(`/api/v1/jobs/${encodeURIComponent(id)}`);
      return (await r.json()).spec.image;
    }, result.job);
    await page.screenshot({ path: path.join(out, "job-image.png"), fullPage: true });

    step = "the endpoint's link on the job page";
    await page.goto(`${base}/#/job/${epJob}/brief`);
    const link = await page.waitForSelector("#endpoints a", { timeout: T(60000) });
    result.link = await link.getAttribute("href");
    step = "the endpoint opens on its own host name";
    const [tab] = await Promise.all([context.waitForEvent("page", { timeout: T(30000) }), link.click()]);
    tab.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });
    await tab.waitForSelector("#done", { state: "attached", timeout: T(60000) });
    result.endpoint_url = tab.url();
    result.page = JSON.parse(await tab.textContent("#result"));
    await tab.screenshot({ path: path.join(out, "endpoint-origin.png"), fullPage: true });
    console.log(JSON.stringify(result));
    await browser.close();
  } catch (e) {
    result.error = `${step}: ${String(e.message || e)}`;
    if (page) await page.screenshot({ path: path.join(out, "endpoint-failure.png"), fullPage: true }).catch(() => {});
    console.log(JSON.stringify(result));
    if (browser) await browser.close().catch(() => {});
    process.exit(1);
  }
})();
