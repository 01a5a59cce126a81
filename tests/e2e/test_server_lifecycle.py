"""A root `trainctl server` that stops, for a while or for good, and the
supervisors it started (docs/server.md, "Restarts and reconciliation";
docs/security.md): a server stopped with SIGTERM leaves its jobs running; a
job that ends while the server is down leaves the rest of its journal in
its run folder and its supervisor exits after a short wait
(TRAINCTL_HUB_WAIT, 60 s by default) instead of a day; the server that
comes back reads that journal as untrusted input and records the job's
end, metrics and checkpoints from it; a tampered journal is refused with a
job event.  Also: a supervisor the job's account cannot exec fails its job
at once, and a spec far over an environment string's 128 KiB cap runs (it
reaches the supervisor on its stdin).

Real root servers and real accounts (server_fixture.root_server).
"""
import json
import os
import shutil
import signal
import stat
import tempfile

import pytest

from conftest import alive, wait_until
from server_fixture import ended, points, root_server, rows, states

HALF = 30  # metric points (and 3 checkpoints) before the wait, as many after

# DLLogger lines; a checkpoint file at each 10th step; waits for $1 half way
SCRIPT = r'''
i=0
while [ $i -lt {n} ]; do
  if [ $i = {half} ]; then echo half; while [ ! -e "$1" ]; do sleep 0.05; done; fi
  echo "DLLL {{\"type\": \"LOG\", \"step\": [0, $i], \"data\": {{\"train.loss\": $i.5}}}}"
  i=$((i+1))
  if [ $((i % 10)) = 0 ]; then echo $i > "$TRAINCTL_CKPT_DIR/.t"; mv "$TRAINCTL_CKPT_DIR/.t" "$TRAINCTL_CKPT_DIR/step_$i.txt"; fi
done
echo done
'''.format(n=2 * HALF, half=HALF)


@pytest.fixture(scope="module")
def life(trainctl):
    with root_server(trainctl, "tc-life-", "alice") as t:
        yield t


def environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)


def halted_job(srv, base, go):
    """A job of alice that stops half way until go exists: (job, supervisor pid, rank log)."""
    script = os.path.join(base, "halves.sh")
    with open(script, "w") as f:
        f.write(SCRIPT)
    os.chmod(script, 0o755)
    job = srv.submit({"name": "halves", "command": ["/bin/sh", script, str(go)], "workdir": "/tmp",
                      "devices": {"type": "gpu", "per_node": 1}})
    log = os.path.join(srv.state, "runs", job, "logs", "rank-0.log")
    srv.wait_job(job, lambda: points(srv, job) == HALF, timeout=120,
                 what=lambda: f"{HALF} points, have {points(srv, job)}: {srv.run_logs(job)}")
    return job, srv.job(job)["supervisor_pid"], log


def restart(srv, **env):
    """Stop the server (SIGTERM) and start it again with env added to its environment."""
    srv.stop()
    srv.env.update(env)
    srv.start()


def event_reasons(srv, job):
    return [r for (r,) in rows(srv, "SELECT reason FROM events WHERE job_id = ? ORDER BY rowid", job)]


def test_job_ends_while_the_server_is_down(life):
    """SIGTERM stops the server, not the job; the job ends meanwhile; its
    supervisor exits within its short wait (60 s by default), leaving its
    journal; the server started again records the job's end, its second
    half's metrics and checkpoints from the journal, each once."""
    srv, u, base = life
    go = os.path.join(base, "go-down")
    job, pid, log = halted_job(srv, base, go)
    assert environ(pid)[b"TRAINCTL_HUB_WAIT"] == b"60"
    srv.stop()  # SIGTERM: exit 0, the job goes on
    assert alive(pid), "the supervisor died with the server"
    open(go, "w").close()
    wait_until(lambda: "done" in open(log).read(), timeout=120, what="the job's second half")
    # the rest is in its journal: it waits for the server at most TRAINCTL_HUB_WAIT
    wait_until(lambda: not alive(pid), timeout=60 + 90, what=f"supervisor {pid} to exit")
    jdir = os.path.join(srv.state, "runs", job, "journal")
    left = [n for n in os.listdir(jdir) if n.endswith(".jsonl")]
    assert left == [f"sup.{pid}.jsonl"], os.listdir(jdir)
    assert points(srv, job) == HALF
    assert rows(srv, "SELECT state FROM jobs WHERE id = ?", job) == [("running",)]
    srv.start()
    row = ended(srv, job, timeout=180)
    assert row["state"] == "succeeded", (row, srv.log()[-3000:])
    assert points(srv, job) == 2 * HALF
    ck = sorted(n for (n,) in rows(srv, "SELECT name FROM checkpoints WHERE job_id = ?", job))
    assert ck == sorted(f"step_{i}.txt" for i in range(10, 2 * HALF + 1, 10)), ck
    ev = states(srv, job)
    assert ev.count("running") == 1 and ev.count("succeeded") == 1, ev
    assert f"job {job}: took 1 journal(s)" in srv.log()
    assert os.listdir(jdir) == [f"sup.{pid}.jsonl.done"], os.listdir(jdir)
    # its report, which the supervisor could not ask the server for, written as alice
    rep = os.path.join(srv.state, "runs", job, "report.json")
    assert os.path.exists(rep), (os.listdir(os.path.dirname(rep)), event_reasons(srv, job))
    assert os.stat(rep).st_uid == os.stat(os.path.dirname(rep)).st_uid != 0
    with open(rep) as f:
        report = json.load(f)
    assert report["job"] == job and report["state"] == "succeeded", report


def test_tampered_journals_are_refused(life):
    """What alice leaves in her job's journal folder is read by root as
    untrusted: a symbolic link, a record of another job, a journal over
    TRAINCTL_HUB_INGEST_MAX are refused, each with a job event, and nothing
    of them is followed or applied; the genuine journal still counts."""
    srv, u, base = life
    restart(srv, TRAINCTL_HUB_WAIT="3", TRAINCTL_HUB_INGEST_MAX="65536")
    other = srv.submit({"name": "other", "command": "echo other", "workdir": "/tmp",
                        "devices": {"type": "gpu", "per_node": 1}})
    assert ended(srv, other)["state"] == "succeeded"
    other_events = event_reasons(srv, other)
    go = os.path.join(base, "go-tamper")
    job, pid, log = halted_job(srv, base, go)
    assert environ(pid)[b"TRAINCTL_HUB_WAIT"] == b"3"
    srv.stop()
    open(go, "w").close()
    wait_until(lambda: not alive(pid), timeout=120, what=f"supervisor {pid} to exit")
    uid = os.stat(os.path.join(srv.state, "runs", job)).st_uid
    jdir = os.path.join(srv.state, "runs", job, "journal")
    # a link to a root-only file of records
    secret = os.path.join(base, "root-only.jsonl")
    forged = '{"seq":1,"ev":"finish","state":"failed","exit":9,"cause":"forged","why":"forged"}\n'
    with open(secret, "w") as f:
        f.write(forged)
    os.chmod(secret, 0o600)
    os.symlink(secret, os.path.join(jdir, "sup.1.jsonl"))
    # a record naming another job
    with open(os.path.join(jdir, "sup.2.jsonl"), "w") as f:
        f.write(forged.replace('"ev":"finish",', f'"ev":"finish","job":"{other}",'))
    # far more than the limit
    with open(os.path.join(jdir, "sup.3.jsonl"), "w") as f:
        for i in range(1, 3000):
            f.write('{"seq":%d,"ev":"note","reason":"hang: %s"}\n' % (i, "x" * 40))
    for n in ("sup.2.jsonl", "sup.3.jsonl"):
        os.chown(os.path.join(jdir, n), uid, -1)
    srv.start()
    row = ended(srv, job, timeout=180)
    assert row["state"] == "succeeded", (row, srv.log()[-3000:])
    assert points(srv, job) == 2 * HALF
    refused = [r for r in event_reasons(srv, job) if r and r.startswith("journal refused")]
    assert len(refused) == 3, refused
    assert any("sup.1.jsonl: a symbolic link" in r for r in refused), refused
    assert any(f"sup.2.jsonl: a record of another job ({other})" in r for r in refused), refused
    assert any("sup.3.jsonl" in r and "over the limit of 65536" in r for r in refused), refused
    # nothing of them reached a row: no forged end, the other job untouched
    assert not any("forged" in (r or "") for r in event_reasons(srv, job))
    assert event_reasons(srv, other) == other_events
    assert srv.job(other)["state"] == "succeeded"
    assert not any(n.endswith(".jsonl") for n in os.listdir(jdir)), os.listdir(jdir)
    assert os.path.islink(os.path.join(jdir, "sup.1.jsonl.refused"))
    assert open(secret).read() == forged


def test_a_journal_folder_that_is_a_link_is_refused(life):
    """A journal folder replaced by a link (to another job's journals) is not
    followed: the job is lost, with the refusal among its events, and the
    other job's journal is not read for it."""
    srv, u, base = life
    go = os.path.join(base, "go-link")
    job, pid, log = halted_job(srv, base, go)
    srv.stop(signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), timeout=60, what=f"supervisor {pid} to end")
    run = os.path.join(srv.state, "runs", job)
    elsewhere = os.path.join(base, "elsewhere")
    os.makedirs(elsewhere)
    shutil.move(os.path.join(run, "journal"), os.path.join(elsewhere, "journal"))
    os.symlink(os.path.join(elsewhere, "journal"), os.path.join(run, "journal"))
    srv.start()
    srv.wait_state(job, "lost", timeout=120)
    reasons = event_reasons(srv, job)
    assert any("journal refused" in (r or "") and "journal is not a folder" in r for r in reasons), reasons
    assert any(n.endswith(".jsonl") for n in os.listdir(os.path.join(elsewhere, "journal")))
    assert points(srv, job) == HALF


def test_a_spec_over_200_kib_runs(life):
    """The spec reaches the supervisor on its stdin, not in one environment
    string (128 KiB at most): a spec of 2000 env entries (about 250 KiB)
    runs, and each entry reaches the worker."""
    srv, u, base = life
    env = {f"TCBIG_{i:04d}": "v" * 100 + str(i) for i in range(2000)}
    assert len(json.dumps(env)) > 200 * 1024
    job = srv.submit({"name": "big", "workdir": "/tmp", "env": env,
                      "command": "env | grep -c '^TCBIG_'; echo last=$TCBIG_1999",
                      "devices": {"type": "gpu", "per_node": 1}})
    row = ended(srv, job)
    assert row["state"] == "succeeded", (row, srv.run_logs(job))
    out = open(os.path.join(srv.state, "runs", job, "logs", "rank-0.log")).read()
    assert "2000" in out and f"last={'v' * 100}1999" in out, out[-500:]


def test_a_supervisor_the_account_cannot_exec_fails_its_job(trainctl):
    """A server run from a copy of trainctl only root may execute (0700):
    the supervisor, as the job's account, cannot exec it, and the job ends
    failed at once (exit 3), its root cause naming the binary and the
    error, not lost."""
    d = tempfile.mkdtemp(prefix="tc-noexec-", dir="/tmp")
    try:
        os.chmod(d, 0o711)
        copy = os.path.join(d, "trainctl")
        shutil.copy(str(trainctl), copy)
        os.chmod(copy, 0o700)
        with root_server(copy, "tc-noexec-state-", "alice") as (srv, u, base):
            job = srv.submit({"name": "noexec", "command": "echo never", "workdir": "/tmp",
                              "devices": {"type": "gpu", "per_node": 1}})
            row = ended(srv, job)
            assert row["state"] == "failed" and row["exit_code"] == 3, row
            cause = row["root_cause"]
            assert copy in cause and "Permission denied" in cause, cause
            assert stat.S_IMODE(os.stat(copy).st_mode) == 0o700
    finally:
        shutil.rmtree(d, ignore_errors=True)
