"""Privilege separation of a root `trainctl server` (issue 13; docs/security.md,
"Who runs what"): a job's supervisor runs as the job's account from its first
instruction, opens no database, and reports to the server, its hub, over
hub.sock with the job's secret.  A real root server and real accounts
(useradd, removed afterwards, also on failure).

The state folder lives in a folder the accounts can traverse (0711), as it
would on a shared machine, so that jobs reach their run folder.
"""
import os
import pwd
import signal

import pytest

from conftest import wait_until
from s3_fixture import ACCESS, SECRET as S3_SECRET, s3  # noqa: F401  (the fixture)
from server_fixture import ended, points, root_server, rows, states

STEPS = 30  # metric points before the wait, and as many after

# DLLogger lines (docs/metrics.md); a checkpoint file at each 10th step; waits for $1 half way
COUNTER = r'''
i=0
while [ $i -lt {steps} ]; do
  echo "DLLL {{\"type\": \"LOG\", \"step\": [0, $i], \"data\": {{\"train.loss\": $i.5}}}}"
  i=$((i+1))
  if [ $((i % 10)) = 0 ]; then echo $i > "$TRAINCTL_CKPT_DIR/.t"; mv "$TRAINCTL_CKPT_DIR/.t" "$TRAINCTL_CKPT_DIR/step_$i.txt"; fi
done
echo half
while [ ! -e "$1" ]; do sleep 0.05; done
while [ $i -lt $(({steps} * 2)) ]; do
  echo "DLLL {{\"type\": \"LOG\", \"step\": [0, $i], \"data\": {{\"train.loss\": $i.5}}}}"
  i=$((i+1))
done
echo done
'''.format(steps=STEPS)


@pytest.fixture(scope="module")
def ps(trainctl):
    with root_server(trainctl, "tc-privsep-", "alice") as t:
        yield t


def counter_job(base, go, **extra):
    script = os.path.join(base, "counter.sh")
    with open(script, "w") as f:
        f.write(COUNTER)
    os.chmod(script, 0o755)
    spec = {"name": "counted", "command": ["/bin/sh", script, str(go)], "workdir": "/tmp",
            "devices": {"type": "gpu", "per_node": 1}}
    spec.update(extra)
    return spec


def proc_status(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def test_supervisor_is_the_account_and_opens_no_database(ps):
    """The supervisor of alice's job: alice's uid and gid (real, effective,
    saved, filesystem), no TRAINCTL_HOME, no descriptor of the database; its
    workers get none of the hub's variables; every record reaches the
    server's database once."""
    srv, u, base = ps
    go = os.path.join(base, "go-1")
    job = srv.submit(counter_job(base, go))
    run = os.path.join(srv.state, "runs", job)
    log = os.path.join(run, "logs", "rank-0.log")
    wait_until(lambda: os.path.exists(log) and "half" in open(log).read(), timeout=120,
               what=lambda: f"the job half way: {srv.run_logs(job)}")
    pid = srv.job(job)["supervisor_pid"]
    pw = pwd.getpwnam(u["alice"])
    st = proc_status(pid)
    assert st["Uid"].split() == [str(pw.pw_uid)] * 4, st["Uid"]
    assert st["Gid"].split() == [str(pw.pw_gid)] * 4, st["Gid"]
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    assert b"TRAINCTL_HOME" not in env and env[b"HOME"] == pw.pw_dir.encode()
    assert env[b"TRAINCTL_HUB_SOCKET"] == os.path.join(srv.state, "hub.sock").encode()
    db = os.path.join(srv.state, "trainctl.db")
    fds = [os.readlink(os.path.join(f"/proc/{pid}/fd", fd)) for fd in os.listdir(f"/proc/{pid}/fd")]
    assert not [f for f in fds if f.startswith(db)], fds
    # the workers: the job's own account, none of the supervisor's variables
    # (the hub records the workers' start a moment after they run)
    wait_until(lambda: srv.job(job)["workers_history"], timeout=60, what="the workers' record")
    worker = srv.job(job)["workers_history"][0]["pid"]
    with open(f"/proc/{worker}/environ", "rb") as f:
        wenv = f.read()
    assert b"TRAINCTL_HUB_" not in wenv and b"TRAINCTL_JOB_SPEC" not in wenv
    assert proc_status(worker)["Uid"].split()[0] == str(pw.pw_uid)
    open(go, "w").close()
    row = ended(srv, job)
    assert row["state"] == "succeeded", srv.run_logs(job)
    # exactly once: each metric point, each state, each checkpoint
    wait_until(lambda: points(srv, job) == 2 * STEPS, timeout=60,
               what=lambda: f"{2 * STEPS} points, have {points(srv, job)}")
    ev = states(srv, job)
    assert ev.count("running") == 1 and ev.count("succeeded") == 1, ev
    ck = sorted(n for (n,) in rows(srv, "SELECT name FROM checkpoints WHERE job_id = ?", job))
    assert ck == ["step_10.txt", "step_20.txt", "step_30.txt"], ck
    assert "done" in open(log).read()
    # the run folder and what the supervisor wrote there are alice's
    assert os.stat(run).st_uid == pw.pw_uid and os.stat(run).st_mode & 0o777 == 0o711
    wait_until(lambda: os.path.exists(os.path.join(run, "report.json")), timeout=60,
               what="report.json")
    assert os.stat(os.path.join(run, "report.json")).st_uid == pw.pw_uid


def test_server_sigkilled_mid_job_catches_up_exactly_once(ps):
    """The server is SIGKILLed while alice's job runs and started again: the
    supervisor's journal is sent again, nothing is lost or doubled."""
    srv, u, base = ps
    go = os.path.join(base, "go-2")
    job = srv.submit(counter_job(base, go))
    wait_until(lambda: points(srv, job) == STEPS, timeout=120,
               what=lambda: f"{STEPS} points, have {points(srv, job)}: {srv.run_logs(job)}")
    srv.stop(signal.SIGKILL)
    open(go, "w").close()
    log = os.path.join(srv.state, "runs", job, "logs", "rank-0.log")
    wait_until(lambda: "done" in open(log).read(), timeout=120, what="the job's second half")
    assert points(srv, job) == STEPS
    srv.start()
    row = ended(srv, job, timeout=180)
    assert row["state"] == "succeeded", (row["state"], srv.log()[-3000:])
    wait_until(lambda: points(srv, job) == 2 * STEPS, timeout=60,
               what=lambda: f"{2 * STEPS} points, have {points(srv, job)}")
    ev = states(srv, job)
    assert ev.count("running") == 1 and ev.count("succeeded") == 1, ev
    assert sorted(rows(srv, "SELECT attempt, rank FROM workers WHERE job_id = ?", job)) == [(0, 0)]


def test_stop_and_restart_after_a_failing_rank(ps):
    """`trainctl stop` reaches a supervisor of another account, and the
    reason (the server's record) reaches it through the hub; a failing rank
    restarts within the budget."""
    srv, u, base = ps
    go = os.path.join(base, "go-never")
    job = srv.submit(counter_job(base, go))
    srv.wait_state(job, "running")
    st, body = srv.call("POST", f"/api/v1/jobs/{job}/stop")
    assert st in (200, 202), body
    row = ended(srv, job)
    assert row["state"] == "killed", row
    assert any("stopped through the server" in (e["reason"] or "") for e in row["events"]), row["events"]
    job = srv.submit({"name": "flaky", "workdir": "/tmp", "restart": {"max_restarts": 1},
                      "command": 'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exit 3; fi; echo fine',
                      "devices": {"type": "gpu", "per_node": 1}})
    row = ended(srv, job)
    assert row["state"] == "succeeded" and row["restarts"] == 1, (row, srv.run_logs(job))


def test_s3_inputs_are_staged_as_the_account(ps, s3):  # noqa: F811
    """An s3:// input is fetched by the supervisor, as alice, with the
    credentials of the job's spec (never the server's): data/ is hers."""
    srv, u, base = ps
    b = s3.bucket()
    s3.put(b, "in/a.txt", b"alpha\n")
    env = {"AWS_ACCESS_KEY_ID": ACCESS, "AWS_SECRET_ACCESS_KEY": S3_SECRET,
           "AWS_ENDPOINT_URL": s3.endpoint, "AWS_REGION": "us-east-1"}
    job = srv.submit({"name": "s3in", "workdir": "/tmp", "env": env,
                      "inputs": [{"from": f"s3://{b}/in/", "to": "in"}],
                      "command": 'cat "$TRAINCTL_DATA_DIR/in/a.txt"',
                      "devices": {"type": "gpu", "per_node": 1}})
    row = ended(srv, job)
    assert row["state"] == "succeeded", srv.run_logs(job)
    staged = os.path.join(srv.state, "runs", job, "data", "in", "a.txt")
    assert os.stat(staged).st_uid == pwd.getpwnam(u["alice"]).pw_uid
    assert "alpha" in open(os.path.join(srv.state, "runs", job, "logs", "rank-0.log")).read()
