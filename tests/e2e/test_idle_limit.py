"""limits.idle_minutes: an interactive job nobody uses is stopped, with a
warning first, and ends killed (not failed) with the reason; a Jupyter
kernel running a cell is use, however long the cell takes; an open ssh
session is use.  Local `trainctl run` jobs, Debian's jupyter-notebook
asked through its REST API; the cell runs over the kernel's WebSocket."""
import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest

from conftest import ENDED, notes, wait_on_job, wait_until
from endpoint_helpers import jupyter_ok, run_cell, websocket  # noqa: F401 (a fixture)
from server_fixture import start_server
from webhook_receiver import Receiver


def need_jupyter():
    if not jupyter_ok():
        pytest.fail("jupyter-notebook is missing (scripts/install-deps.sh)", pytrace=False)


@contextlib.contextmanager
def running(trainctl, home, spec, log_path):
    """`trainctl run spec` (its output in log_path), killed at the end if still running."""
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env.pop("TRAINCTL_SERVER", None)
    with open(log_path, "w") as log:
        p = subprocess.Popen([str(trainctl), "run", str(spec)], env=env, stdout=log,
                             stderr=subprocess.STDOUT)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def job_of(run_tc, name):
    p = run_tc("show", "--json", name)
    return json.loads(p.stdout) if p.returncode == 0 else None


def jupyter(run_tc, name):
    """The job's Jupyter once it answers: (base url, token)."""
    def up():
        p = run_tc("endpoints", name, "--json")
        if p.returncode:
            return None
        ep = [e for e in json.loads(p.stdout)["endpoints"] if e["kind"] == "jupyter"]
        if not ep or ep[0]["state"] != "running" or "?token=" not in (ep[0]["url"] or ""):
            return None
        base, token = ep[0]["url"].split("?token=")
        try:
            req = urllib.request.Request(base + "api/status?no_track_activity=1",
                                         headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(req, timeout=30).read()
        except OSError:
            return None
        return base, token
    return wait_on_job(up, lambda: job_of(run_tc, name), timeout=180, what="the job's Jupyter")


def spec(tmp_path, name, minutes, endpoint="jupyter", extra=""):
    s = tmp_path / f"{name}.yaml"
    s.write_text(f"""name: {name}
workdir: {tmp_path}
command: "sleep 900"
endpoints: [{endpoint}]
limits: {{idle_minutes: {minutes}}}
restart: {{max_restarts: 2, grace_seconds: 10}}
{extra}""")
    return s


def ended(run_tc, name, timeout):
    return wait_until(lambda: (lambda j: j if j and j["state"] in ENDED else None)(job_of(run_tc, name)),
                      timeout=timeout, what=f"job {name}'s end")


def test_idle_jupyter_job_is_warned_then_stopped(trainctl, run_tc, home, tmp_path):
    need_jupyter()
    hook = Receiver()  # the warning reaches the job's webhooks too (default events)
    try:
        idle_job_stopped(trainctl, run_tc, home, tmp_path, hook)
    finally:
        hook.close()


def idle_job_stopped(trainctl, run_tc, home, tmp_path, hook):
    s = spec(tmp_path, "idle-nb", 0.1, extra=f"notify: [{{url: '{hook.url}'}}]\n")  # 6 s
    with running(trainctl, home, s, tmp_path / "run.log") as p:
        jupyter(run_tc, "idle-nb")
        job = ended(run_tc, "idle-nb", 180)
        assert p.wait(timeout=120) == 1
    out = (tmp_path / "run.log").read_text()
    # an idle job is stopped, not broken: killed, no restart, the reason as its root cause
    assert job["state"] == "killed", job
    assert job["root_cause"].startswith("stopped: idle for 0.1 minutes (limits.idle_minutes)"), job
    assert job["restarts"] == 0
    warn = notes(job, "idle")
    assert len(warn) == 1 and warn[0]["reason"].startswith("idle: no use for "), job["events"]
    assert "unless it is used (limits.idle_minutes 0.1)" in warn[0]["reason"], warn
    end = [e for e in job["events"] if e["state"] == "killed"]
    assert end and warn[0]["time"] <= end[0]["time"], job["events"]
    # the console says both
    assert "idle: no use for " in out and "stopped: idle for 0.1 minutes" in out, out
    assert out.index("idle: no use for ") < out.index("stopped: idle for"), out
    # the hook heard the warning, then the end
    events = wait_until(lambda: (lambda e: e if "killed" in e else None)(hook.events()), timeout=60,
                        what="the webhook's killed event")
    assert "idle" in events and events.index("idle") < events.index("killed"), events


def test_busy_kernel_is_use_and_the_job_stops_once_it_is_idle(trainctl, run_tc, home, tmp_path,
                                                               websocket):
    need_jupyter()
    limit_s = 12
    s = spec(tmp_path, "busy-nb", limit_s / 60)
    with running(trainctl, home, s, tmp_path / "run.log") as p:
        base, token = jupyter(run_tc, "busy-nb")
        req = urllib.request.Request(base + "api/kernels", data=b'{"name": "python3"}',
                                     headers={"Authorization": f"token {token}",
                                              "Content-Type": "application/json"})
        kernel = json.loads(urllib.request.urlopen(req, timeout=60).read())
        url = (base.replace("http://", "ws://") + f"api/kernels/{kernel['id']}/channels"
               f"?token={token}")
        # a cell that runs well past the limit: the job must not be stopped under it
        out = run_cell(websocket, url, None,
                       f"import time; time.sleep({3 * limit_s}); print('cell done')")
        assert out == "cell done\n"
        job = job_of(run_tc, "busy-nb")
        assert job["state"] == "running", job
        assert not notes(job, "idle"), job["events"]  # not even warned
        cell_done = time.time()
        job = ended(run_tc, "busy-nb", 180)
        assert p.wait(timeout=120) == 1
    # idle once the cell was done: warned, then stopped
    assert job["state"] == "killed", job
    assert job["root_cause"].startswith("stopped: idle for 0.2 minutes (limits.idle_minutes)"), job
    warn = notes(job, "idle")
    assert len(warn) == 1 and warn[0]["time"] >= cell_done, job["events"]


def test_bad_idle_minutes_and_a_job_without_an_endpoint_are_refused(run_tc, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ncommand: [true]\nendpoints: [jupyter]\nlimits:\n  idle_minutes: 30m\n")
    p = run_tc("run", bad)
    assert p.returncode == 2, p.stderr
    assert f"{bad}:5: limits.idle_minutes: must be a number of minutes" in p.stderr, p.stderr
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: plain\ncommand: [true]\nlimits: {idle_minutes: 30}\n")
    p = run_tc("run", plain)
    assert p.returncode == 2, p.stderr
    assert f"{plain}:3: limits.idle_minutes: is for an interactive job" in p.stderr, p.stderr


def test_server_default_idle_minutes_stops_an_idle_jupyter_job(trainctl, tmp_path):
    need_jupyter()
    srv = start_server(trainctl, tmp_path / "state", args=["--default-idle-minutes", "0.1"])
    try:
        nb = srv.submit({"name": "srv-nb", "command": "sleep 900", "workdir": str(tmp_path),
                         "endpoints": ["jupyter"]})
        plain = srv.submit({"name": "plain", "command": "sleep 0.2", "workdir": str(tmp_path)})
        row = srv.wait_state(nb, "killed", timeout=240)
        assert row["root_cause"].startswith("stopped: idle for 0.1 minutes (limits.idle_minutes)"), row
        job = srv.job(nb)
        assert job["spec"]["limits"]["idle_minutes"] == 0.1, job["spec"]
        assert len(notes(job, "idle")) == 1, job["events"]
        # a job without an endpoint to watch does not take the default
        srv.wait_state(plain, "succeeded")
        assert "idle_minutes" not in srv.job(plain)["spec"].get("limits", {})
    finally:
        srv.stop()


def test_bad_default_idle_minutes_is_refused(trainctl, tmp_path):
    p = subprocess.run([str(trainctl), "server", "--state", str(tmp_path / "s"),
                        "--default-idle-minutes", "30m"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert "--default-idle-minutes must be a number of minutes" in p.stderr, p.stderr
    conf = tmp_path / "server.yaml"
    conf.write_text("quiet: true\ndefault-idle-minutes: 0\n")
    p = subprocess.run([str(trainctl), "server", "--check-config", str(conf)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert f"{conf}:2" in p.stderr and "default-idle-minutes" in p.stderr, p.stderr
    conf.write_text("default-idle-minutes: 30\n")
    p = subprocess.run([str(trainctl), "server", "--check-config", str(conf)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "good" in p.stdout, p.stderr


SSH_QUIET = ["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR"]


def test_open_ssh_session_is_use(trainctl, run_tc, home, tmp_path):
    if not (shutil.which("ssh") and os.access("/usr/sbin/sshd", os.X_OK)):
        pytest.fail("needs openssh-server and openssh-client (scripts/install-deps.sh)", pytrace=False)
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(key)], check=True)
    limit_s = 12
    pub = (tmp_path / "key.pub").read_text().strip()
    s = spec(tmp_path, "idle-ssh", limit_s / 60, endpoint=json.dumps({"kind": "ssh", "public_key": pub}))
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env.pop("TRAINCTL_SERVER", None)
    with running(trainctl, home, s, tmp_path / "run.log") as p:
        last = []

        def up():
            r = run_tc("ssh", "idle-ssh", "--", "-i", key, *SSH_QUIET, "true")
            last[:] = [r.stderr]
            return r.returncode == 0
        wait_on_job(up, lambda: job_of(run_tc, "idle-ssh"), timeout=120,
                    what=lambda: f"the job's ssh endpoint to let the key in: {last}")
        # a session open well past the limit: the job must not be stopped under it
        session = subprocess.run([str(trainctl), "ssh", "idle-ssh", "--", "-i", str(key), *SSH_QUIET,
                                  f"sleep {3 * limit_s}; echo session done"],
                                 env=env, capture_output=True, text=True, timeout=300)
        assert session.stdout.strip() == "session done", session.stderr
        job = job_of(run_tc, "idle-ssh")
        assert job["state"] == "running" and not notes(job, "idle"), job
        job = ended(run_tc, "idle-ssh", 180)
        assert p.wait(timeout=120) == 1
    assert job["state"] == "killed", job
    assert job["root_cause"].startswith("stopped: idle for 0.2 minutes (limits.idle_minutes)"), job
    assert len(notes(job, "idle")) == 1, job["events"]


def test_use_after_the_warning_calls_the_stop_off(trainctl, run_tc, home, tmp_path):
    need_jupyter()
    s = spec(tmp_path, "warned-nb", 0.5)  # 30 s; the warning 3 s before, asked every second
    with running(trainctl, home, s, tmp_path / "run.log") as p:
        base, token = jupyter(run_tc, "warned-nb")
        wait_on_job(lambda: notes(job_of(run_tc, "warned-nb"), "idle"),
                    lambda: job_of(run_tc, "warned-nb"), timeout=180, what="the idle warning")
        # a user's API call is use: Jupyter's last_activity moves
        req = urllib.request.Request(base + "api/contents", headers={"Authorization": f"token {token}"})
        urllib.request.urlopen(req, timeout=30).read()
        called_off = wait_on_job(
            lambda: [n for n in notes(job_of(run_tc, "warned-nb"), "idle") if "called off" in n["reason"]],
            lambda: job_of(run_tc, "warned-nb"), timeout=60, what="the stop called off")
        assert called_off[0]["reason"] == "idle: in use again: the stop is called off"
        assert job_of(run_tc, "warned-nb")["state"] == "running"
        # idle again: warned again, then stopped
        job = ended(run_tc, "warned-nb", 180)
        assert p.wait(timeout=120) == 1
    assert job["state"] == "killed", job
    said = [n["reason"] for n in notes(job, "idle")]
    assert len(said) == 3 and said[0].startswith("idle: no use for ") and "called off" in said[1] \
        and said[2].startswith("idle: no use for "), said
