// security_browser.js -- an admin's browser on a job's endpoint page, in
// Debian's chromium (playwright-core), for tests/e2e/test_security_browser.py:
//   node tests/ui/security_browser.js API LOGIN_URL JOB ARTIFACT_DIR PHASES...
// API: the server's URL as the browser names it; host names under .test and
// .localhost map to 127.0.0.1 (--host-resolver-rules).  The admin logs in with LOGIN_URL, then
// opens JOB's endpoint "web" through the API (its link, /jobs/JOB/endpoints/web/)
// once per phase; the endpoint's page (the test writes it) acts by itself:
//   fetch     its script fetches the API (read /whoami; stop the job, submit
//             one) and posts forms to it; it reports what it could see
//   nav       its script navigates the browser to the job's own port ("/steal")
//   redirect  the endpoint answers 302 to the job's own port
//   login     its script navigates the browser to /login with the job owner's
//             one-time login ticket (login CSRF)
// After the phases: who the browser is on the API (/api/v1/whoami, typed in the
// address bar) and the API's cookies in the browser.  Prints one JSON line; exits
// non-zero on a failed step.  Waits are on conditions (UI_TIMEOUT_SCALE=N
// stretches their deadlines).
"use strict";
const { chromium } = require("playwright-core");
const path = require("path");

const [api, login, job, out, ...phases] = process.argv.slice(2);
const T = ms => ms * Number(process.env.UI_TIMEOUT_SCALE || "1");
const result = { phases: {} };
let step = "start";

(async () => {
  let browser = null, page = null;
  try {
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium", timeout: Math.max(60000, T(60000)),
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP *.test 127.0.0.1, MAP *.localhost 127.0.0.1"],
    });
    const context = await browser.newContext({ viewport: { width: 1100, height: 700 } });
    page = await context.newPage();
    page.setDefaultTimeout(T(30000));
    page.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });
    step = "login";
    await page.goto(login);
    await page.waitForURL(u => !String(u).includes("/login"), { timeout: T(30000) });
    result.cookies_before = (await context.cookies(api)).map(c => `${c.name}=${c.value}`);
    const ep = `${api}/jobs/${job}/endpoints/web`;
    for (const phase of phases) {
      step = `phase ${phase}`;
      const r = {};
      if (phase === "fetch") {
        await page.goto(`${ep}/?phase=fetch`);
        await page.waitForSelector("#done", { state: "attached", timeout: T(60000) });
        r.url = page.url();
        r.page = JSON.parse(await page.textContent("#result"));
      } else if (phase === "nav" || phase === "redirect") {
        await page.goto(phase === "nav" ? `${ep}/?phase=nav` : `${ep}/redirect?how=redirect`);
        await page.waitForSelector("#stolen", { state: "attached", timeout: T(60000) });
        r.url = page.url();
      } else if (phase === "login") {
        await page.goto(`${ep}/?phase=login`);
        await page.waitForURL(u => String(u).startsWith(api + "/"), { timeout: T(60000) });
        await page.waitForLoadState("load");
        r.url = page.url();
        r.text = (await page.textContent("body")).slice(0, 500);
      } else {
        throw new Error(`no phase ${phase}`);
      }
      await page.screenshot({ path: path.join(out, `security-${phase}.png`), fullPage: true });
      r.cookies = (await context.cookies(api)).map(c => `${c.name}=${c.value}`);
      result.phases[phase] = r;
    }
    step = "whoami";
    const who = await page.goto(`${api}/api/v1/whoami`);
    result.whoami_status = who.status();
    result.whoami = await who.text();
    result.cookies_after = (await context.cookies(api)).map(c => `${c.name}=${c.value}`);
    console.log(JSON.stringify(result));
    await browser.close();
  } catch (e) {
    result.error = `${step}: ${String(e.message || e)}`;
    if (page) await page.screenshot({ path: path.join(out, "security-failure.png"), fullPage: true }).catch(() => {});
    console.log(JSON.stringify(result));
    if (browser) await browser.close().catch(() => {});
    process.exit(1);
  }
})();
