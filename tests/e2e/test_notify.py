"""Webhooks (notify: in the spec, docs/diagnostics.md): a local HTTP receiver
on 127.0.0.1 checks the events, the HMAC-SHA256 signature, retries after 5xx,
the Slack body, and that a dead or hanging receiver never holds a job up."""
import hashlib
import hmac
import json
import os
import socket
import sqlite3
import subprocess

import pytest

from conftest import wait_until
from webhook_receiver import Receiver


@pytest.fixture
def receiver():
    made = []

    def make(**kw):
        r = Receiver(**kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def write_spec(tmp_path, text, name="job.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def show(run_tc, job):
    p = run_tc("show", job, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def only_job(home):
    db = os.path.join(home, "trainctl.db")
    if not os.path.exists(db):
        return None
    with sqlite3.connect(db) as c:
        row = c.execute("SELECT id, state, run_dir FROM jobs").fetchone()
    return row


SECRET = "s3cr3t-value-never-shown"


def test_events_signature_and_record(run_tc, home, tmp_path, receiver):
    r = receiver()
    # fails once, succeeds on the restart
    job = write_spec(tmp_path, f"""
name: hooked
command: ["sh", "-c", "test \\"$TORCHELASTIC_RESTART_COUNT\\" = 1 || exit 3"]
restart: {{max_restarts: 1}}
notify:
  - url: {r.url}
    events: [started, restarted, succeeded, failed]
    secret_env: HOOK_SECRET
""")
    p = run_tc("run", job, env={"HOOK_SECRET": SECRET})
    assert p.returncode == 0, p.stderr
    wait_until(lambda: len(r.events()) == 3, what=lambda: f"3 deliveries, got {r.events()}")
    assert r.events() == ["started", "restarted", "succeeded"]
    jid = only_job(home)[0]
    for headers, body, _ in r.requests:
        want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers["X-Trainctl-Signature"] == want
        assert headers["Content-Type"] == "application/json"
        b = json.loads(body)
        assert headers["X-Trainctl-Event"] == b["event"]
        assert b["job"]["id"] == jid and b["job"]["name"] == "hooked"
    end = json.loads(r.requests[-1][1])
    assert end["job"]["state"] == "succeeded" and end["exit_code"] == 0
    restarted = json.loads(r.requests[1][1])
    assert "rank 0 exited with code 3" in restarted["reason"], restarted
    # recorded per job, the URL's path redacted; the secret nowhere
    o = show(run_tc, jid)
    got = [(n["event"], n["delivered"], n["tries"], n["status"]) for n in o["notifications"]]
    assert got == [("started", True, 1, 200), ("restarted", True, 1, 200),
                   ("succeeded", True, 1, 200)]
    assert all(n["url"].endswith(":%d/..." % r.server.server_address[1])
               for n in o["notifications"])
    text = run_tc("show", jid).stdout
    assert "notifications:" in text and "delivered (HTTP 200, 1 try)" in text
    # the spec shows the URL as written; delivery records only its host
    assert "secret-path" not in text.split("notifications:")[1] and SECRET not in text
    run_dir = only_job(home)[2]
    for f in ("job.yaml", "logs/supervisor.log"):
        assert SECRET not in open(os.path.join(run_dir, f)).read()
    assert SECRET not in json.dumps(o)


def test_retries_after_500(run_tc, home, tmp_path, receiver):
    r = receiver(fail_first=2)
    job = write_spec(tmp_path, f"""
command: ["true"]
notify:
  - url: {r.url}
    events: [succeeded]
""")
    p = run_tc("run", job)
    assert p.returncode == 0, p.stderr
    wait_until(lambda: r.events() == ["succeeded"], what="the delivery after two 500s")
    assert [s for _, _, s in r.requests] == [500, 500, 200]
    bodies = {b for _, b, _ in r.requests}
    assert len(bodies) == 1, "every try carries the same body"
    assert "X-Trainctl-Signature" not in r.requests[0][0]  # no secret, no signature
    o = show(run_tc, only_job(home)[0])
    (n,) = o["notifications"]
    assert (n["event"], n["delivered"], n["tries"], n["status"]) == ("succeeded", True, 3, 200)


def test_slack_format(run_tc, home, tmp_path, receiver):
    r = receiver()
    job = write_spec(tmp_path, f"""
name: slacky
command: ["sh", "-c", "exit 7"]
notify:
  - url: {r.url}
    format: slack
""")
    p = run_tc("run", job)
    assert p.returncode == 1
    wait_until(lambda: r.events() or r.requests, what="the Slack delivery")
    (headers, body, _), = r.requests
    b = json.loads(body)
    assert list(b) == ["text"]
    jid = only_job(home)[0]
    assert b["text"].startswith(f"trainctl: job {jid} (slacky) failed")
    assert "exited with code 7" in b["text"]


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


def test_dead_receiver_never_fails_the_job(run_tc, home, tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/hook"
    job = write_spec(tmp_path, f"""
command: ["sh", "-c", "echo done"]
notify:
  - url: {url}
    events: [started, succeeded]
""")
    plain = write_spec(tmp_path, "command: [\"sh\", \"-c\", \"echo done\"]\n", "plain.yaml")
    p0 = run_tc("run", plain)
    p = run_tc("run", job)
    # the same outcome as without webhooks; the dead one is a warning
    assert p.returncode == p0.returncode == 0, p.stderr
    assert "warning: notify:" in p.stderr and "not delivered" in p.stderr
    db = os.path.join(home, "trainctl.db")
    with sqlite3.connect(db) as c:
        states = c.execute("SELECT state FROM jobs").fetchall()
    assert states == [("succeeded",), ("succeeded",)]
    with sqlite3.connect(db) as c:
        (hooked,), = c.execute("SELECT id FROM jobs WHERE spec_json LIKE '%notify%'").fetchall()
    o = show(run_tc, hooked)
    assert {n["event"] for n in o["notifications"]} == {"started", "succeeded"}
    assert not any(n["delivered"] for n in o["notifications"])


def test_hanging_receiver_does_not_hold_the_job(trainctl, home, tmp_path, receiver):
    """The receiver accepts and never answers: the job still ends, and its
    end is recorded while the receiver still holds the first request."""
    r = receiver(hang=True)
    job = write_spec(tmp_path, f"""
command: ["sh", "-c", "echo done"]
notify:
  - url: {r.url}
    events: [started, succeeded]
""")
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    proc = subprocess.Popen([str(trainctl), "run", job], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: r.pending == 1, what="the first (held) request")
        # the job ends and is recorded while its webhook still hangs
        wait_until(lambda: (only_job(home) or (0, ""))[1] == "succeeded",
                   what="the job to succeed while the receiver hangs")
        assert r.pending == 1 and not r.released.is_set()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        r.release()
    assert proc.returncode == 0, err
    assert "warning: notify: started" in err
    assert "the job ended before it was delivered" in err


def test_server_defaults_queued_and_preempted(trainctl, tmp_path, receiver):
    """The server's --notify-file hooks go to jobs without notify: of their own
    (signed with a secret from the server's environment); the queued event is
    the server's, the rest its supervisors'; notify: [] opts out."""
    from server_fixture import held, sleeper, start_server

    r = receiver()
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text(f"notify:\n  - url: {r.url}\n    events: [queued, started, succeeded, preempted]\n"
                     f"    secret_env: SRV_HOOK_SECRET\n")
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:1",
                       args=("--notify-file", str(hooks)), env={"SRV_HOOK_SECRET": SECRET})
    try:
        release = tmp_path / "release"
        a = srv.submit(held(str(release), name="victim", preemptible=True))
        # queued (the server's thread) and started (the supervisor's) race:
        # no order between senders is promised (docs/diagnostics.md)
        wait_until(lambda: {"queued", "started"} <= set(r.events()),
                   what=lambda: f"queued and started of the first job, got {r.events()}")
        quiet = srv.submit(sleeper(0, name="quiet", notify=[], priority=1))
        b = srv.submit(sleeper(0, name="urgent", priority=500))
        srv.wait_state(a, ["preempted", "queued"])
        srv.wait_state(b, "succeeded")
        release.touch()
        srv.wait_state(a, "succeeded")
        srv.wait_state(quiet, "succeeded")

        def by_job():
            out = {}
            with r.lock:
                reqs = list(r.requests)
            for headers, body, _ in reqs:
                want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                assert headers["X-Trainctl-Signature"] == want
                d = json.loads(body)
                out.setdefault(d["job"]["id"], []).append(d["event"])
            return out

        # Each sender keeps its own order (one queue, one thread), but the
        # server's queued, a preempted supervisor's last events and its
        # successor's may interleave: wait for every event, compare as
        # multisets, and check order only within one supervisor.
        want_a = ["queued", "started", "preempted", "started", "succeeded"]
        want_b = ["queued", "started", "succeeded"]
        wait_until(lambda: (sorted(by_job().get(a, [])) == sorted(want_a)
                            and sorted(by_job().get(b, [])) == sorted(want_b)),
                   what=lambda: f"every event of both jobs, got {by_job()}")
        got = by_job()
        assert got[a].index("started") < got[a].index("preempted"), got
        assert got[b].index("started") < got[b].index("succeeded"), got
        assert quiet not in got, "notify: [] takes no defaults"

        # a delivery is recorded after its answer: wait for the records
        def recorded():
            ns = srv.job(b).get("notifications", [])
            return (sorted(n["event"] for n in ns) == sorted(want_b)
                    and all(n["delivered"] for n in ns))
        wait_until(recorded, what=lambda: f"the deliveries recorded, got {srv.job(b)}")
        assert "notifications" not in srv.job(quiet)
    finally:
        srv.stop()


def test_log_policy_match_and_hang_are_sent(run_tc, home, tmp_path, receiver):
    """The watchdog's events reach the hooks: an on_log match (then the
    failure it causes) and a hang before the first step (startup_seconds)."""
    r = receiver()
    job = write_spec(tmp_path, f"""
name: oom
command: ["sh", "-c", "echo 'RuntimeError: CUDA out of memory'; sleep 300"]
on_log:
  - {{pattern: "CUDA out of memory", action: fail}}
notify:
  - url: {r.url}
    events: [log_match, failed]
""")
    p = run_tc("run", job)
    assert p.returncode == 1, p.stderr
    wait_until(lambda: r.events() == ["log_match", "failed"],
               what=lambda: f"log_match then failed, got {r.events()}")
    match = json.loads(r.requests[0][1])
    assert match["reason"].startswith("log_match: ") and "CUDA out of memory" in match["reason"]
    r2 = receiver()
    job = write_spec(tmp_path, f"""
name: stuck
command: ["sh", "-c", "sleep 300"]
watchdog: {{startup_seconds: 1}}
notify:
  - url: {r2.url}
    events: [hang, failed]
""", "stuck.yaml")
    p = run_tc("run", job)
    assert p.returncode == 1, p.stderr
    wait_until(lambda: r2.events() == ["hang", "failed"],
               what=lambda: f"hang then failed, got {r2.events()}")
    assert json.loads(r2.requests[0][1])["reason"].startswith("hang: ")
