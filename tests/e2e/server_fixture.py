"""A real `trainctl server` for the end-to-end tests of the platform
(test_server_api.py, test_scheduler.py, test_server_restart.py,
test_auth.py, test_ui.py).

    srv = start_server(trainctl, state_dir, fake="gpu:2")
    srv.call("POST", "/api/v1/jobs", {"spec": {...}})  -> (status, body)
    srv.cli("ps")                                      -> CompletedProcess

Without a token, call() and cli() reach the server through its Unix socket
(STATE/server.sock), where the kernel says who calls: the test's account,
root, is the server's admin, and start_server passes --allow-root-jobs so
that root's jobs run (root_server does not: its jobs are its accounts').  With a token (token=, or srv.token) they use
TCP and the Authorization header, as a remote client would.
"""
import contextlib
import glob
import http.client
import json
import re
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile

import pytest

from conftest import ENDED, _end_leftovers, fail_if_ended, poll, wait_on_job


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    """Something listens on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def endpoint_up(srv, job):
    """Is the job's first endpoint running and its port open?  (The supervisor
    records the endpoint a moment after the job runs: no row yet is False.)
    A job that has ended without it fails the test at once, with its root
    cause: the row would never come."""
    st, body = srv.call("GET", f"/api/v1/jobs/{job}/endpoints")
    eps = body.get("endpoints", []) if st == 200 else []
    if eps and eps[0]["state"] == "running" and port_open(eps[0]["port"]):
        return True
    fail_if_ended(srv.job_or_none(job), "its endpoint")
    return False


def wait_for(pred, timeout=60, step=0.1):
    """pred()'s first truthy value, or None after timeout s (conftest.poll)."""
    return poll(pred, timeout, step)


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (the server's local listener)."""

    def __init__(self, path, host, timeout=90):
        super().__init__(host, timeout=timeout)
        self.sock_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.sock_path)
        self.sock = s


class Server:
    def __init__(self, trainctl, state, port, env, args):
        self.trainctl, self.state, self.port, self.env, self.args = trainctl, state, port, env, args
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = os.path.join(state, f"server-{port}.log")
        self.proc = None
        self.token = None
        self.socket = os.path.join(state, "server.sock")

    def start(self):
        os.makedirs(self.state, exist_ok=True)
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [str(self.trainctl), "server", "--listen", f"127.0.0.1:{self.port}", "--state",
             str(self.state)] + list(self.args),
            env=self.env, stdout=log, stderr=log, start_new_session=True)
        log.close()
        ok = wait_for(lambda: self._up(), timeout=90)
        assert ok, f"server did not come up:\n{self.log()}"
        return self

    def _up(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited {self.proc.returncode}:\n{self.log()}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def login_url(self):
        """The one-time login URL the server printed at start (like Jupyter's)."""
        m = re.findall(r"open the web UI \(one use\): (\S+)", self.log())
        assert m, f"no login URL in the server's log:\n{self.log()[-2000:]}"
        return m[-1]

    def log(self):
        try:
            return open(self.log_path).read()
        except OSError:
            return ""

    def sanitizer_reports(self):
        """ASan/UBSan/LSan reports in the server's log and its supervisors' output."""
        marks = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
        files = [self.log_path] + glob.glob(os.path.join(self.state, "runs", "*", "logs", "supervisor.out"))
        found = []
        for f in files:
            try:
                text = open(f, errors="replace").read()
            except OSError:
                continue
            if any(m in text for m in marks):
                found.append(f"{f}:\n{text[-4000:]}")
        return found

    def stop(self, sig=signal.SIGTERM):
        """Stop the server; a SIGTERM must end it cleanly (exit 0), and no
        sanitizer report may be left by it or its supervisors (make check
        runs this suite on the ASan build)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"server ignored signal {sig} for 120 s:\n{self.log()[-3000:]}")
            if sig == signal.SIGTERM:
                assert self.proc.returncode == 0, \
                    f"server exited {self.proc.returncode} on SIGTERM:\n{self.log()[-6000:]}"
        reports = self.sanitizer_reports()
        assert not reports, "sanitizer reports:\n" + "\n".join(reports)

    def call(self, method, path, body=None, token=None, raw=None, headers=None, unix=None):
        """One request: over TCP with a token (token=, else srv.token), else over
        the Unix socket as the test's own account (unix=False forces TCP)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        tok = token if token is not None else self.token
        hdrs = {}
        if tok:
            hdrs["Authorization"] = "Bearer " + tok
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        if unix is None:
            unix = not tok and token is None
        if unix:
            con = UnixHTTPConnection(self.socket, f"127.0.0.1:{self.port}")
        else:
            con = http.client.HTTPConnection("127.0.0.1", self.port, timeout=90)
        try:
            con.request(method, path, body=data, headers=hdrs)
            r = con.getresponse()
            text = r.read().decode()
            status = r.status
            ctype = r.headers.get("Content-Type", "")
        finally:
            con.close()
        return status, (json.loads(text) if "json" in ctype and text else text)

    def stream(self, path, timeout=120):
        """A GET whose answer is read as it comes (an event stream), over the
        Unix socket as the test's account; close() it when done."""
        con = UnixHTTPConnection(self.socket, f"127.0.0.1:{self.port}", timeout=timeout)
        con.request("GET", path)
        r = con.getresponse()
        r.connection_ = con
        return r

    def submit(self, spec, **kw):
        st, body = self.call("POST", "/api/v1/jobs", {"spec": spec}, **kw)
        assert st == 201, body
        return body["id"]

    def job(self, ref, **kw):
        st, body = self.call("GET", f"/api/v1/jobs/{ref}", **kw)
        assert st == 200, body
        return body

    def run_logs(self, ref):
        """The tail of a job's supervisor log and output, for failure messages."""
        text = ""
        for f in sorted(glob.glob(os.path.join(self.state, "runs", ref, "logs", "supervisor.*"))):
            try:
                text += f"--- {f}\n" + open(f, errors="replace").read()[-2000:]
            except OSError:
                pass
        return text

    def job_or_none(self, ref):
        """The job's object, or None where the server has none (yet)."""
        st, body = self.call("GET", f"/api/v1/jobs/{ref}")
        return body if st == 200 and isinstance(body, dict) else None

    def wait_job(self, ref, pred, timeout=60, what="the condition", step=0.1):
        """wait_until for something of job ref (conftest.wait_on_job): fails at
        once with the job's root cause when it ends without pred() coming true."""
        return wait_on_job(pred, lambda: self.job_or_none(ref), timeout=timeout, what=what,
                           step=step)

    def wait_state(self, ref, states, timeout=120):
        """Wait for one of states; a job that ends in another fails at once."""
        states = [states] if isinstance(states, str) else states
        seen = []

        def check():
            s = self.job(ref)["state"]
            if not seen or seen[-1] != s:
                seen.append(s)
            return s in states or s in ENDED

        ok = wait_for(check, timeout=timeout, step=0.2)
        row = self.job(ref)
        assert ok and row["state"] in states, \
            (f"{ref}: wanted {states}, saw {seen}"
             + (f"; the job ended {row['state']} (exit {row.get('exit_code')}), root cause:"
                f" {row.get('root_cause')}" if row["state"] in ENDED else "")
             + f"\n{self.log()[-3000:]}\n{self.run_logs(ref)}")
        return row

    def cli(self, *args, timeout=60):
        env = dict(self.env)
        env["TRAINCTL_SERVER"] = self.url
        if self.token:
            env["TRAINCTL_TOKEN"] = self.token
        return subprocess.run([str(self.trainctl)] + [str(a) for a in args], env=env,
                              capture_output=True, text=True, timeout=timeout)


def reachable_state(state):
    """A root server starts each job's supervisor as the job's account, which
    must reach its run folder in the state folder (docs/security.md): on a
    shared machine the state folder lies in folders everyone may pass
    through.  The test's temporary folders (pytest's are 0700) get o+x, no
    more: nobody may list them."""
    if os.geteuid() != 0:
        return
    tmp = os.path.realpath(tempfile.gettempdir())
    p = os.path.dirname(os.path.realpath(str(state)))
    while p.startswith(tmp + os.sep):
        st = os.stat(p)
        if st.st_uid == 0 and not st.st_mode & 0o001:
            os.chmod(p, (st.st_mode & 0o7777) | 0o001)
        p = os.path.dirname(p)


def start_server(trainctl, state, fake=None, args=(), env=None, root_jobs=True):
    """A server on a free port.  The suite runs as root, and most tests submit
    as the test's account over the Unix socket: those servers need
    --allow-root-jobs (a root server runs no job as root without it,
    docs/security.md).  root_jobs=False starts one as a shared machine's
    operator would (root_server)."""
    reachable_state(state)
    if root_jobs and os.geteuid() == 0 and "--allow-root-jobs" not in args:
        args = list(args) + ["--allow-root-jobs"]
    e = dict(os.environ)
    e.pop("TRAINCTL_SERVER", None)
    e.pop("TRAINCTL_TOKEN", None)
    e["TRAINCTL_HOME"] = str(state)
    if fake:
        e["TRAINCTL_FAKE_DEVICES"] = fake
    for k, v in (env or {}).items():
        e[k] = v
    return Server(trainctl, str(state), free_port(), e, args).start()


@contextlib.contextmanager
def unix_accounts(*roles):
    """Real unprivileged accounts for a root server's token users (useradd,
    each with its own home), yielded as {role: name}; removed afterwards
    (userdel -r), even when the test fails.  Names are unique per call so
    that tests running side by side never share one."""
    if os.geteuid() != 0:
        import pytest
        pytest.skip("creating accounts needs root")
    tag = os.urandom(3).hex()
    names = {r: f"tc{tag}{r}"[:32] for r in roles}
    made = []
    try:
        for n in names.values():
            p = subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", n],
                               capture_output=True, text=True)
            assert p.returncode == 0, f"useradd {n}: {p.stderr}"
            made.append(n)
        yield names
    finally:
        for n in made:
            # --force: even while a job of it is still ending
            subprocess.run(["userdel", "--force", "--remove", n], capture_output=True)


def token_for(trainctl, state, user, admin=False):
    """A new token of user in the state folder (trainctl token create)."""
    env = dict(os.environ, TRAINCTL_HOME=str(state))
    p = subprocess.run([str(trainctl), "token", "create", "--user", user] + (["--admin"] if admin else []),
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    t = p.stdout.strip()
    assert t.startswith("tc_") and len(t) > 40
    return t


@contextlib.contextmanager
def root_server(trainctl, prefix, *roles, args=(), env=None):
    """A root server (fake gpu:2) with real accounts, yielded as (srv, {role:
    name}, base); args and env go to start_server.  The state folder lives in base, a folder the accounts can
    traverse (0711), as on a shared machine, so that jobs reach their run
    folder.  srv.token is the first role's token; each further role's token is
    srv.<role>.  Server, accounts and base are removed afterwards, also on
    failure."""
    base = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(base, 0o711)
    state = os.path.join(base, "state")
    try:
        with unix_accounts(*roles) as u:
            tok = token_for(trainctl, state, u[roles[0]])
            # as a shared machine's operator starts it: no job runs as root
            srv = start_server(trainctl, state, fake="gpu:2", args=args, env=env, root_jobs=False)
            srv.token = tok
            for r in roles[1:]:
                setattr(srv, r, token_for(trainctl, state, u[r]))
            try:
                yield srv, u, base
            finally:
                srv.stop()
                # base is no test's tmp_path (conftest's no_leftover_jobs): a supervisor
                # whose last events missed the stopped server waits a day for its hub
                _end_leftovers(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_user(trainctl, srv, name, token, *args):
    """trainctl run by account name (its own uid, groups and home), with token."""
    home = subprocess.run(["getent", "passwd", name], capture_output=True, text=True).stdout.split(":")[5]
    return subprocess.run(["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups", "env", "-i",
                           "PATH=/usr/bin:/bin", f"HOME={home}", f"TRAINCTL_SERVER={srv.url}",
                           f"TRAINCTL_TOKEN={token}", str(trainctl)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=120)


# A job's command (test_scheduler.py, test_teams.py): counts to $1, a step every 0.2 s, a checkpoint file per step; resumes from TRAINCTL_RESUME_FROM.
# With HOLD_AT and RELEASE set it waits at step HOLD_AT until the file RELEASE exists,
# so that the test, not the machine's speed, decides when it gets past there.
# Every rank writes the checkpoint through a temporary file of its own: with one
# shared name, one rank's mv could take (or truncate) the other's half-written file.
COUNTER = r'''#!/bin/sh
start=0
if [ -n "$TRAINCTL_RESUME_FROM" ]; then start=$(cat "$TRAINCTL_RESUME_FROM"); echo "resumed at $start"; fi
i=$start
tmp="$TRAINCTL_CKPT_DIR/.step.${RANK:-0}.tmp"
while [ $i -lt $1 ]; do
  if [ "$i" = "${HOLD_AT:-}" ]; then while [ ! -e "$RELEASE" ]; do sleep 0.05; done; fi
  i=$((i+1)); sleep 0.2
  echo $i > "$tmp"; mv "$tmp" "$TRAINCTL_CKPT_DIR/step_$i.txt"
  echo "step $i"
done
echo "finished at $i"
'''


@pytest.fixture
def counter(tmp_path):
    """COUNTER as an executable file of the test's."""
    p = tmp_path / "counter.sh"
    p.write_text(COUNTER)
    p.chmod(0o755)
    return str(p)


def held(release, name="held", **extra):
    """A 1-gpu job that runs until the file `release` exists: it holds its
    device for exactly as long as the test needs, however slow the machine."""
    spec = {"name": name, "command": f"echo start $RANK; while [ ! -e '{release}' ]; do sleep 0.05; done; "
                                     f"echo end $RANK",
            "devices": {"type": "gpu", "per_node": 1}}
    spec.update(extra)
    return spec


def sleeper(seconds, name="sleeper", **extra):
    spec = {"name": name, "command": f"echo start $RANK; sleep {seconds}; echo end $RANK",
            "devices": {"type": "gpu", "per_node": 1}}
    spec.update(extra)
    return spec


# ---- a server's job, read back from its database (the root server's tests) ----

def ended(srv, job, timeout=120):
    return srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=timeout)


def rows(srv, sql, *args):
    with sqlite3.connect(os.path.join(srv.state, "trainctl.db")) as c:
        return c.execute(sql, args).fetchall()


def points(srv, job):
    return rows(srv, "SELECT COALESCE(SUM(count), 0) FROM metric_chunks c JOIN metric_series s"
                " ON s.id = c.series_id WHERE s.job_id = ?", job)[0][0]


def states(srv, job):
    return [s for (s,) in rows(srv, "SELECT state FROM events WHERE job_id = ? ORDER BY rowid", job)]
