// ui_hostile.js -- every page of the web UI over data that carries markup,
// in Debian's chromium (playwright-core), for tests/e2e/test_ui_hostile.py:
//   node tests/ui/ui_hostile.js BASE_URL ARTIFACT_DIR LOGIN_URL VISITS_JSON
// VISITS_JSON: a file holding [{hash, wait, raw?}, ...]: the page to open
// (location.hash), a selector that is there once it has drawn, and, where
// given, {job, diagnostics}: the job record is served with these diagnostics
// as the job wrote them (what a server that did not type the file would
// send), to check the page on its own.
// After each page: no img, meta, script, iframe, object, embed, base, link,
// style or form element beyond those of the page itself, no on* attribute,
// no javascript: link, window.__pwned undefined, and the page still where it
// was opened (a <meta http-equiv=refresh> would take it to the job's port).
// Prints one JSON line {visits: [...], pageerrors?, error?}; exits non-zero
// on a failed check.  Waits are on conditions (UI_TIMEOUT_SCALE=N stretches
// their deadlines).
"use strict";
const { chromium } = require("playwright-core");
const fs = require("fs");
const path = require("path");

const [base, out, login, visitsFile] = process.argv.slice(2);
const visits = JSON.parse(fs.readFileSync(visitsFile, "utf8"));
const T = ms => ms * Number(process.env.UI_TIMEOUT_SCALE || "1");
const TAGS = ["img", "meta", "script", "iframe", "object", "embed", "base", "link", "style", "form", "svg", "math"];
const result = { visits: [] };
if (process.env.UI_SHOTS) fs.mkdirSync(out, { recursive: true });

// what the page holds that it should not: counted against the page's own
function census(tags) {
  const count = {};
  for (const t of tags) count[t] = document.getElementsByTagName(t).length;
  const handlers = [...document.querySelectorAll("*")].filter(e => [...e.attributes].some(a => /^on/i.test(a.name)))
    .map(e => e.outerHTML.slice(0, 200));
  const jslinks = [...document.querySelectorAll("a[href], [src], [action], [formaction]")]
    .filter(e => /^\s*javascript:/i.test(e.getAttribute("href") || e.getAttribute("src") || e.getAttribute("action") || e.getAttribute("formaction") || ""))
    .map(e => e.outerHTML.slice(0, 200));
  // the data reached the page, as text (the <select>'s options count: their text is shown)
  const shown = document.body.textContent.includes("onerror=window.__pwned=1");
  return { count, handlers, jslinks, shown, pwned: window.__pwned === undefined ? null : String(window.__pwned), url: location.href };
}

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
    // every navigation of the page itself: a refresh to another origin shows here
    const away = [];
    page.on("framenavigated", f => { if (f === page.mainFrame() && !f.url().startsWith(base)) away.push(f.url()); });
    // nothing leaves for another host (the job's port): refused, and counted
    const elsewhere = [];
    await page.route(u => !String(u).startsWith(base), r => { elsewhere.push(r.request().url()); return r.abort(); });
    await page.goto(login);
    await page.waitForURL(u => !String(u).includes("/login"), { timeout: T(30000) });
    // the page's own elements, before any data was drawn
    await page.goto(`${base}/#/submit`);
    await page.waitForSelector("#submit");
    const own = (await page.evaluate(census, TAGS)).count;
    result.own = own;
    for (const v of visits) {
      const seen = { hash: v.hash, extra: {}, handlers: [], jslinks: [], pwned: null, url: "" };
      result.visits.push(seen);
      const jobUrl = v.raw ? `${base}/api/v1/jobs/${encodeURIComponent(v.raw.job)}` : null;
      if (jobUrl) {
        await page.route(jobUrl, async r => {
          const res = await r.fetch();
          const body = await res.json();
          body.diagnostics = v.raw.diagnostics;
          await r.fulfill({ response: res, json: body });
        });
      }
      try {
        await page.goto(`${base}/${v.hash}`);
        await page.waitForSelector(v.wait, { state: "attached", timeout: T(30000) });
        // two frames and a task: a refresh of delay 0 or an onerror has run by then
        await page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 0)))));
        const c = await page.evaluate(census, TAGS);
        Object.assign(seen, c);
        seen.extra = Object.fromEntries(Object.entries(c.count).filter(([t, n]) => n > own[t]));
        if (Object.keys(seen.extra).length) {
          seen.elements = await page.evaluate(tags => tags.flatMap(t => [...document.getElementsByTagName(t)]
            .map(e => e.outerHTML.slice(0, 200))), Object.keys(seen.extra));
        }
      } catch (e) {
        seen.error = String(e.message || e).split("\n")[0];
      }
      seen.away = away.splice(0);
      seen.elsewhere = elsewhere.splice(0);
      seen.ok = !seen.error && !Object.keys(seen.extra).length && !seen.handlers.length && !seen.jslinks.length &&
        seen.pwned === null && seen.url.startsWith(base) && !seen.away.length && !seen.elsewhere.length;
      if (!seen.ok || process.env.UI_SHOTS) {
        const shot = path.join(out, `hostile-${result.visits.length}.png`);
        await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
        seen.screenshot = shot;
      }
      if (jobUrl) await page.unroute(jobUrl);
    }
    console.log(JSON.stringify(result));
    await browser.close();
    process.exit(result.visits.every(v => v.ok) && !result.pageerrors ? 0 : 1);
  } catch (e) {
    result.error = String(e.message || e);
    if (page) await page.screenshot({ path: path.join(out, "hostile-failure.png"), fullPage: true }).catch(() => {});
    console.log(JSON.stringify(result));
    if (browser) await browser.close().catch(() => {});
    process.exit(1);
  }
})();
