// chromium.js -- Debian's chromium through playwright-core, as the UI tests
// start it (headless, no sandbox: the suite runs as root), and a page logged
// in with a one-time login URL (docs/security.md).
"use strict";
const { chromium } = require("playwright-core");

// T: a deadline in ms, stretched by UI_TIMEOUT_SCALE
function launch(T) {
  return chromium.launch({
    executablePath: "/usr/bin/chromium", timeout: Math.max(60000, T(60000)),
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
}

// a desktop-sized page of browser, its errors into result.pageerrors, logged in at login
async function loggedIn(browser, login, T, result) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(T(30000));
  page.on("pageerror", e => { result.pageerrors = (result.pageerrors || []).concat(String(e)); });
  await page.goto(login);
  await page.waitForURL(u => !String(u).includes("/login"), { timeout: T(30000) });
  return page;
}

module.exports = { launch, loggedIn };
