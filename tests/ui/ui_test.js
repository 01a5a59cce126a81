// ui_test.js -- drives Debian's chromium (playwright-core) through the web UI
// of a running `trainctl server`: check the distributed form offers the
// server's backends (and says why one cannot be used), submit a job with the
// form, watch it run and succeed, check the loss chart has points drawn, stop
// another job with its button, and keep screenshots.  Used by tests/e2e/test_ui.py:
//   node tests/ui/ui_test.js BASE_URL ARTIFACT_DIR WORKDIR SLEEPER_JOB_ID LOGIN_URL
// It first logs in with the server's one-time LOGIN_URL (a session cookie),
// and at the end checks that a page from another origin cannot submit a job.
// Prints one JSON line with what it saw; exits non-zero on a failed check.
//
// Every wait is on a condition with a generous deadline (the test machine
// may be loaded: 2 cores shared with builds), never a fixed sleep.  The
// submitted job holds in "running" until this script creates WORKDIR/release,
// so the running state is seen however slow the page or the machine is.  On
// a failure the result carries the page's state (URL, header, banner, text)
// and the path of a screenshot taken at that moment.
"use strict";
const { chromium } = require("playwright-core");
const fs = require("fs");
const path = require("path");

const [base, out, workdir, sleeper, login] = process.argv.slice(2);
const SCALE = Number(process.env.UI_TIMEOUT_SCALE || "1");
const T = ms => ms * SCALE;
const shotPath = name => path.join(out, name + ".png");
const shot = (page, name) => page.screenshot({ path: shotPath(name), fullPage: true });
const result = { steps: [] };
let step = "start";

function begin(name) { step = name; result.steps.push(name); }

// Poll fn() until it returns a truthy value; on timeout throw, naming what
// was awaited and the last value seen.
async function waitFor(page, what, fn, ms) {
  const end = Date.now() + T(ms);
  let last, error = null;
  for (;;) {
    try { last = await fn(); error = null; } catch (e) { error = String(e.message || e).split("\n")[0]; }
    if (!error && last) return last;
    if (Date.now() > end) {
      throw new Error(`${what}: not within ${T(ms)} ms (last seen: ${error ? "error " + error : JSON.stringify(last)})`);
    }
    await page.waitForTimeout(150);
  }
}

async function headerState(page) {
  const l = page.locator(".toolbar h1 .state").first();
  return (await l.count()) ? (await l.textContent()).trim() : "";
}

// Wait until the job page's header shows want; returns the states it showed.
async function waitState(page, want, ms) {
  const seen = [];
  await waitFor(page, `job header state '${want}'`, async () => {
    const s = await headerState(page);
    if (s && seen[seen.length - 1] !== s) seen.push(s);
    return s === want;
  }, ms).catch(e => { throw new Error(`${e.message}; header showed: ${seen.join(" -> ") || "nothing"}`); });
  return seen;
}

async function pageState(page) {
  return page.evaluate(() => ({
    url: location.href,
    header: (document.querySelector(".toolbar h1") || {}).textContent || null,
    banner: document.getElementById("banner") && !document.getElementById("banner").hidden
      ? document.getElementById("banner").textContent : null,
    text: (document.getElementById("view") || document.body).innerText.slice(0, 1500),
  })).catch(e => ({ unavailable: String(e) }));
}

(async () => {
  let browser = null, current = null;
  try {
    begin("launch chromium");
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      timeout: Math.max(60000, T(60000)),
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    });
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    current = page;
    page.setDefaultTimeout(T(30000));
    page.setDefaultNavigationTimeout(T(60000));
    page.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });

    begin("login: without the cookie nothing, with the one-time URL a session");
    await page.goto(base + "/");
    result.before_login = await page.evaluate(() => fetch("/api/v1/whoami").then(r => r.status));
    await page.goto(login);
    await page.waitForURL(u => !String(u).includes("/login"), { timeout: T(30000) });
    const cookie = (await page.context().cookies()).find(c => c.name === "trainctl_session");
    result.cookie = cookie ? { httpOnly: cookie.httpOnly, sameSite: cookie.sameSite } : null;
    result.whoami = await page.evaluate(() => fetch("/api/v1/whoami").then(r => r.json()));
    // the link is used up: a second visit logs nobody in
    result.login_again = await page.evaluate(u => fetch(u, { redirect: "manual" }).then(r => r.status), login);

    begin("distributed form: the server's backends, and why not");
    // the real server, whatever it has: each backend a distributed job cannot
    // use here is disabled and says why, and Submit is off when none can
    await page.goto(base + "/#/submit");
    await page.waitForSelector("#s-go");
    const info = await page.evaluate(() => fetch("/api/v1/info").then(r => r.json()));
    await page.selectOption("#s-kind", "distributed");
    const form = () => page.evaluate(() => ({
      options: [...document.querySelectorAll("#s-backend option")].map(o => ({ name: o.value, disabled: o.disabled })),
      selected: document.getElementById("s-backend").value,
      why: document.getElementById("s-backend-why").textContent,
      submit: !document.getElementById("s-go").disabled,
    }));
    const seen = result.distributed = await form();
    for (const b of info.backends) {
      const o = seen.options.find(x => x.name === b.name);
      const usable = b.available && b.multi_node;
      if (!o || o.disabled === usable) throw new Error(`backend ${b.name} (${JSON.stringify(b)}) shown as ${JSON.stringify(o)}`);
      if (!usable && !seen.why.includes(b.name + ": ")) throw new Error(`no reason for ${b.name} in '${seen.why}'`);
      if (!b.available && !seen.why.includes(b.why)) throw new Error(`'${b.why}' not in '${seen.why}'`);
    }
    if (seen.submit !== info.backends.some(b => b.available && b.multi_node)) throw new Error(`Submit enabled: ${seen.submit}`);
    await shot(page, "submit-distributed");

    // a server with Slurm (its info faked, the submission caught before the
    // server): the distributed form sends backend: slurm with its nodes
    await page.route("**/api/v1/info", r => r.fulfill({ contentType: "application/json", body: JSON.stringify(
      Object.assign({}, info, { backends: [{ name: "local", available: true, multi_node: false, why: null },
        { name: "slurm", available: true, multi_node: true, why: null }] })) }));
    let sent = null;
    await page.route("**/api/v1/jobs", r => {
      if (r.request().method() !== "POST") return r.continue();
      sent = r.request().postDataJSON();
      return r.fulfill({ status: 400, contentType: "application/json", body: '{"error":"caught by the test","status":400}' });
    });
    await page.reload();
    await page.waitForSelector("#s-go");
    await page.fill("#s-name", "ui-dist");
    await page.fill("#s-cmd", "true");
    if (await page.inputValue("#s-backend") !== "local") throw new Error("a regular job's backend is not local");
    await page.selectOption("#s-kind", "distributed");
    const faked = await form();
    if (faked.selected !== "slurm" || !faked.submit || !faked.options.find(o => o.name === "local").disabled)
      throw new Error(`with Slurm, the distributed form shows ${JSON.stringify(faked)}`);
    await page.click("#s-go");
    await waitFor(page, "the caught submission's error shown", () => page.textContent("#s-err").then(t => t.includes("caught by the test")), 30000);
    if (!sent || sent.spec.backend !== "slurm" || sent.spec.nodes !== 2)
      throw new Error(`the form sent ${JSON.stringify(sent)}`);
    result.distributed_spec = { backend: sent.spec.backend, nodes: sent.spec.nodes };
    await page.unrouteAll();
    await page.goto("about:blank"); /* the next page reads the real info again */

    begin("submit form");
    await page.goto(base + "/#/submit");
    await page.waitForSelector("#s-go");
    await page.fill("#s-name", "ui-loss");
    await page.selectOption("#s-type", "cpu");
    await page.fill("#s-count", "1");
    await page.fill("#s-workdir", workdir);
    await page.fill("#s-cmd", "python3 loss.py");
    await page.fill("#s-env", "STEPS=60");
    await shot(page, "submit-form");
    await page.click("#s-go");
    await page.waitForURL(/#\/job\//, { timeout: T(30000) });
    result.job = decodeURIComponent(page.url().split("#/job/")[1].split("/")[0]);

    begin("job reaches running");
    result.states = await waitState(page, "running", 90000);
    await shot(page, "job-running");
    fs.writeFileSync(path.join(workdir, "release"), "");
    begin("job reaches succeeded");
    result.states = result.states.concat(await waitState(page, "succeeded", 120000));
    await shot(page, "job-succeeded");

    begin("metrics chart");
    await page.click('.tabs button[data-tab="metrics"]');
    await page.waitForSelector("#m-chart canvas", { timeout: T(60000) });
    result.metric = await page.inputValue("#m-name");
    // count painted pixels in the plotting area: a blank canvas has none;
    // uPlot paints in a later frame, so wait for the paint, not a time
    const painted = () => page.evaluate(() => {
      const c = document.querySelector("#m-chart canvas");
      if (!c || !c.width || !c.height) return 0;
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n;
    });
    result.painted = await waitFor(page, "loss chart painted (> 500 pixels)",
      async () => { const n = await painted(); return n > 500 ? n : 0; }, 30000).catch(async e => {
      result.painted = await painted().catch(() => -1);
      throw e;
    });
    result.info = await page.textContent("#m-info");
    await shot(page, "job-metrics");

    begin("logs tab");
    await page.click('.tabs button[data-tab="logs"]');
    await waitFor(page, "log shows the job's last line 'done'", () => page.evaluate(() =>
      !!document.querySelector("#l-text") && document.querySelector("#l-text").textContent.includes("done")), 60000);
    result.logs = (await page.textContent("#l-text")).split("\n").length;
    await shot(page, "job-logs");

    begin("stop the sleeper from the jobs table");
    await page.goto(base + "/#/jobs");
    const row = page.locator(`tr[data-id="${sleeper}"]`);
    await row.waitFor({ timeout: T(30000) });
    const stop = row.locator('button[data-act="stop"]');
    await waitFor(page, "the sleeper's Stop button enabled", () => stop.isEnabled(), 30000);
    await stop.click();
    const seenSleeper = [];
    await waitFor(page, "sleeper row shows 'killed'", async () => {
      const s = (await row.locator(".state").textContent()).trim();
      if (seenSleeper[seenSleeper.length - 1] !== s) seenSleeper.push(s);
      result.sleeper = s;
      return s === "killed";
    }, 90000).catch(e => { throw new Error(e.message + ` (row states: ${seenSleeper.join(" -> ")})`); });
    await shot(page, "jobs-table");

    begin("devices page");
    await page.goto(base + "/#/devices");
    await page.waitForSelector("#devs tbody tr", { timeout: T(30000) });
    await shot(page, "devices");

    begin("a page from another origin cannot submit a job");
    // a "simple" fetch and a text/plain form, as any site the user visits could send
    const evil = `<!doctype html><form id="f" method="POST" action="${base}/api/v1/jobs" enctype="text/plain">
      <input name='{"spec":{"name":"csrf-form","command":"id","x":"' value='"}}'></form>
      <script>
      fetch("${base}/api/v1/jobs", { method: "POST", mode: "no-cors", credentials: "include",
        headers: { "Content-Type": "text/plain" },
        body: JSON.stringify({ spec: { name: "csrf-fetch", command: "id" } }) })
        .catch(() => null).finally(() => { document.title = "sent"; document.getElementById("f").submit(); });
      </script>`;
    await page.route("http://evil.test/**", r => r.fulfill({ contentType: "text/html", body: evil }));
    await page.goto("http://evil.test/");
    await page.waitForURL(u => String(u).startsWith(base), { timeout: T(30000) });
    result.csrf_answer = (await page.evaluate(() => document.body.innerText)).slice(0, 300);
    await page.unroute("http://evil.test/**");

    begin("phone width");
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 } });
    await phone.context().addCookies(await page.context().cookies());
    current = phone;
    phone.setDefaultTimeout(T(30000));
    phone.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });
    await phone.goto(base + "/#/job/" + encodeURIComponent(result.job) + "/metrics");
    await phone.waitForSelector("#m-chart canvas", { timeout: T(60000) });
    result.phone_overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await shot(phone, "phone-metrics");
    await phone.goto(base + "/#/jobs");
    await phone.waitForSelector("#jobs tbody tr", { timeout: T(30000) });
    await shot(phone, "phone-jobs");
  } catch (e) {
    result.error = `${step}: ${String(e && e.stack || e)}`;
    if (current) {
      result.page = await pageState(current);
      try {
        await current.screenshot({ path: shotPath("failure"), fullPage: true, timeout: 30000 });
        result.screenshot = shotPath("failure"); } catch (e2) {
        result.screenshot = "not taken: " + String(e2);
      }
    }
  }
  if (browser) await browser.close().catch(() => {});
  console.log(JSON.stringify(result));
  process.exit(result.error ? 1 : 0);
})();
