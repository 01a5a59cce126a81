"""A full disk and a damaged database (issue 28).

A full file system under TRAINCTL_HOME must not hide the jobs: `ps`, `show`
and `logs` read on, read-only when a write is refused, and a new `run` fails
saying the file system is full.  A truncated or garbled trainctl.db gives one
line saying it is damaged and what to do, exit 3, never a crash or a hang.

The full disk is a real one: a 4 MiB tmpfs of this test's own, filled to the
last byte, unmounted afterwards.
"""
import errno
import json
import os
import signal
import sqlite3
import time
import subprocess

import pytest

from conftest import job_id_of, rank_log, show, wait_until

CRASH = (-6, -11, 134, 139)  # SIGABRT, SIGSEGV, as the status or a shell's 128+N


@pytest.fixture
def home(tmp_path):
    """TRAINCTL_HOME on a 4 MiB tmpfs mounted for this test alone."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    src = f"tc-disk-full-{os.getpid()}-{tmp_path.name}"
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", src, str(mnt)],
                       capture_output=True, text=True)
    assert p.returncode == 0, f"cannot mount a tmpfs (root needed): {p.stderr}"
    try:
        h = mnt / "home"
        h.mkdir()
        yield h
    finally:
        # a process the test left holding a file there must not keep the mount
        if subprocess.run(["umount", str(mnt)]).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=True)


def fill(folder):
    """Write into folder until the file system has no byte left (ENOSPC)."""
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as f:
        for chunk in (1 << 16, 4096, 512, 1):
            block = b"\0" * chunk
            try:
                while True:
                    f.write(block)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    st = os.statvfs(folder)
    assert st.f_bavail == 0, st


def free(folder):
    os.unlink(os.path.join(folder, "filler"))


def checkpoint(home):
    """What another program's last close does (sqlite3, python): the WAL is
    copied into the database file and removed, with its -shm."""
    db = os.path.join(home, "trainctl.db")
    c = sqlite3.connect(db)
    c.execute("SELECT count(*) FROM jobs").fetchone()
    c.close()
    assert not os.path.exists(db + "-wal") and not os.path.exists(db + "-shm")


def one_job(run_tc):
    r = run_tc("run", "-q", "--", "/bin/sh", "-c", "echo hi", timeout=120)
    assert r.returncode == 0, r.stderr
    return job_id_of(r)


def reads_work(run_tc, job, state="succeeded"):
    p = run_tc("ps", timeout=60)
    assert p.returncode == 0, p.stderr
    assert job in p.stdout and state in p.stdout, p.stdout
    p = run_tc("show", job, timeout=60)
    assert p.returncode == 0, p.stderr
    assert job in p.stdout and state in p.stdout, p.stdout
    p = run_tc("logs", job, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "hi" in p.stdout, p.stdout


@pytest.mark.parametrize("wal", ["as trainctl left it", "checkpointed by another program"])
def test_reads_work_on_a_full_disk_and_a_run_says_it_is_full(run_tc, home, wal):
    job = one_job(run_tc)
    if wal != "as trainctl left it":
        checkpoint(home)
    fill(home.parent)
    reads_work(run_tc, job)
    for argv in (["metrics", job], ["ckpt", "list", job], ["ckpt", "list", "--nodes", job]):
        p = run_tc(*argv, timeout=60)
        assert p.returncode == 0, (argv, p.returncode, p.stderr)
        assert (job if argv[0] == "ckpt" else "METRIC") in p.stdout, (argv, p.stdout)
    r = run_tc("run", "-q", "--", "/bin/sh", "-c", "echo again", timeout=120)
    assert r.returncode not in (0,) + CRASH, (r.returncode, r.stderr)
    assert str(home) in r.stderr, r.stderr
    assert "is full" in r.stderr, r.stderr
    # space back: all as before, the new job's row included or not, never damaged
    free(home.parent)
    reads_work(run_tc, job)


@pytest.mark.parametrize("wal", ["none", "empty"])
def test_a_job_found_lost_on_a_full_disk_is_shown_as_recorded(run_tc, home, wal):
    """wal none: the database opens read-only, the write is refused there;
    empty: it opens for writing (its -wal and -shm are there) and the write
    finds the disk full."""
    job = one_job(run_tc)
    gone = subprocess.Popen(["true"])
    gone.wait()
    db = os.path.join(home, "trainctl.db")
    c = sqlite3.connect(db)  # its supervisor died without a word
    c.execute("UPDATE jobs SET state='running', sup_pid=?, ended=NULL WHERE id=?", (gone.pid, job))
    c.commit()
    c.close()
    checkpoint(home)
    if wal == "empty":  # a read that does not look at the job makes them
        p = run_tc("ps", "--state", "failed", timeout=60)
        assert p.returncode == 0 and os.path.getsize(db + "-wal") == 0, p.stderr
    fill(home.parent)
    for verb in ("ps", "show"):
        p = run_tc(verb, *([job] if verb == "show" else []), timeout=60)
        assert p.returncode == 0, p.stderr
        assert job in p.stdout and "running" in p.stdout, p.stdout
        warnings = [ln for ln in p.stderr.splitlines() if "warning" in ln]
        assert len(warnings) == 1 and job in warnings[0] and "shown as last recorded" in warnings[0], \
            p.stderr
        assert ("open read-only" if wal == "none" else "is full") in warnings[0], p.stderr
    p = run_tc("logs", job, timeout=60)
    assert p.returncode == 0 and "hi" in p.stdout, p.stderr
    # following it ends: its supervisor is gone, recorded or not
    p = run_tc("logs", "-f", job, timeout=60)
    assert p.returncode == 0 and "hi" in p.stdout, p.stderr
    # with space back, the first read records what it found
    free(home.parent)
    p = run_tc("ps", timeout=60)
    assert p.returncode == 0 and "lost" in p.stdout and "warning" not in p.stderr, (p.stdout, p.stderr)


def damage(db, how):
    size = os.path.getsize(db)
    if how == "header only":
        os.truncate(db, 100)
    elif how == "cut in half":
        os.truncate(db, size // 2)
    else:
        with open(db, "r+b") as f:
            f.write(b"this is no sqlite database at all")


@pytest.mark.parametrize("how", ["header only", "cut in half", "garbage header"])
def test_a_damaged_database_is_told_plainly(run_tc, home, how):
    job = one_job(run_tc)
    checkpoint(home)
    db = os.path.join(home, "trainctl.db")
    damage(db, how)
    for argv in (["ps"], ["show", job], ["logs", job], ["run", "-q", "--", "/bin/true"]):
        p = run_tc(*argv, timeout=60)
        assert p.returncode == 3, (argv, p.returncode, p.stderr)
        lines = p.stderr.splitlines()
        assert len(lines) == 1, (argv, p.stderr)
        assert lines[0].startswith(f"trainctl: database {db} is damaged (sqlite: "), (argv, p.stderr)
        assert lines[0].endswith("): move it aside and start again, or restore a copy;"
                                 " `trainctl doctor` checks the state folder"), (argv, p.stderr)


@pytest.mark.parametrize("shm", ["stale", "garbage"])
def test_a_shm_without_its_wal(run_tc, home, shm):
    """sqlite rebuilds a -shm whose -wal is gone: a correct read or a clear
    message, never a crash or a hang."""
    job = one_job(run_tc)
    db = os.path.join(home, "trainctl.db")
    old = open(db + "-shm", "rb").read()
    checkpoint(home)
    with open(db + "-shm", "wb") as f:
        f.write(old if shm == "stale" else os.urandom(len(old)))
    os.chmod(db + "-shm", 0o600)
    for argv in (["ps"], ["show", job], ["logs", job]):
        p = run_tc(*argv, timeout=60)
        assert p.returncode in (0, 3), (argv, p.returncode, p.stderr)
        if p.returncode == 0:
            assert (job if argv[0] != "logs" else "hi") in p.stdout, (argv, p.stdout)
        else:
            assert len(p.stderr.splitlines()) == 1 and str(db) in p.stderr, (argv, p.stderr)


# ---- a job on a disk that fills (on_disk_full:, the records kept) ----

def start_job(trainctl, home, tmp_path, command, extra=""):
    """`trainctl run` of a 2-rank job in the background: its stderr in a file
    off the full disk, its stdout (every rank's lines) thrown away."""
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: fills\ncommand: {command}\nworkdir: {tmp_path}\n"
                    f"devices: {{type: cpu, per_node: 2}}\n{extra}")
    err = open(tmp_path / "run.stderr", "w")
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    p = subprocess.Popen([trainctl, "run", str(spec)], env=env, stdout=subprocess.DEVNULL,
                         stderr=err, text=True)
    err.close()
    return p


def said(tmp_path, text):
    return text in (tmp_path / "run.stderr").read_text()


def running(home, p, tmp_path):
    def check():
        if p.poll() is not None:
            raise AssertionError(f"trainctl run ended {p.returncode}: "
                                 f"{(tmp_path / 'run.stderr').read_text()}")
        try:
            c = sqlite3.connect(os.path.join(home, "trainctl.db"))
            try:
                row = c.execute("SELECT id FROM jobs WHERE state='running'").fetchone()
            finally:
                c.close()  # an open file would keep the tmpfs busy
        except sqlite3.OperationalError:
            return None
        return row and row[0]
    return wait_until(check, timeout=120, what="the job running")


def said_while_alive(tmp_path, p, text, timeout=120):
    def check():
        if said(tmp_path, text):
            return True
        if p.poll() is not None:
            raise AssertionError(f"trainctl run ended {p.returncode} before saying '{text}': "
                                 f"{(tmp_path / 'run.stderr').read_text()}")
        return False
    wait_until(check, timeout=timeout, what=lambda: f"'{text}' on stderr: "
               f"{(tmp_path / 'run.stderr').read_text()}")


# every rank prints without end once the file go exists
FILLS_ITS_LOG = ('["/bin/sh", "-c", "while [ ! -e go ]; do sleep 0.05; done;'
                 ' while :; do echo rank $RANK fills its log with this line; done"]')


def fill_and_wait_to_record(home, p, tmp_path):
    """The disk filled under a running job that then fills its logs: the
    supervisor stops it (on_disk_full: stop) and says it waits to record."""
    job = running(home, p, tmp_path)
    fill(home.parent)
    (tmp_path / "go").touch()
    said_while_alive(tmp_path, p, "is full: waiting to record job " + job)
    return job


def test_a_job_that_fills_the_disk_stops_with_the_cause_and_is_never_lost(trainctl, run_tc, home,
                                                                          tmp_path):
    """on_disk_full: stop (the default).  Its ranks print until their logs
    find the disk full; the supervisor stops them and cannot record that
    either: it keeps the end, says so, and records it once the test frees
    space.  Before: the job ended `lost` ("gone without record")."""
    p = start_job(trainctl, home, tmp_path, FILLS_ITS_LOG)
    try:
        job = fill_and_wait_to_record(home, p, tmp_path)
        free(home.parent)
        rc = p.wait(timeout=120)
        assert rc not in (0, 3) + CRASH, (rc, (tmp_path / "run.stderr").read_text())
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = (tmp_path / "run.stderr").read_text()
    assert err.count("waiting to record") == 1, err  # said once
    assert "space is back" in err, err
    j = show(run_tc, job)
    assert j["state"] == "failed", j
    assert j["root_cause"].startswith(f"the file system at {home}/runs/{job}"), j["root_cause"]
    assert "is full" in j["root_cause"], j["root_cause"]
    kinds = [e.get("kind") for e in j["events"]]
    assert "disk_full" in kinds, j["events"]
    assert not [e for e in j["events"] if e.get("state") == "lost"], j["events"]


def test_a_supervisor_killed_while_it_waits_leaves_its_end_in_the_run_folder(trainctl, run_tc,
                                                                            home, tmp_path):
    """Only a kill ends the wait for space: the end it kept is then in the
    run folder's outcome.json (reserved when the job began), and the first
    command that finds the supervisor gone records that end, not `lost`."""
    p = start_job(trainctl, home, tmp_path, FILLS_ITS_LOG)
    try:
        job = fill_and_wait_to_record(home, p, tmp_path)
        p.send_signal(signal.SIGTERM)  # said and waited past
        said_while_alive(tmp_path, p, "Terminated: still waiting to record job " + job)
    finally:
        p.kill()
        p.wait()
    outcome = home / "runs" / job / "outcome.json"
    assert json.loads(outcome.read_text())["state"] == "failed"
    free(home.parent)
    j = show(run_tc, job)
    assert j["state"] == "failed", j
    assert "is full" in j["root_cause"], j["root_cause"]
    assert not [e for e in j["events"] if e.get("state") == "lost"], j["events"]
    assert not outcome.exists()


def test_on_disk_full_wait_pauses_the_job_and_it_goes_on_when_space_returns(trainctl, run_tc,
                                                                            home, tmp_path):
    """on_disk_full: wait.  The ranks are stopped while the disk is full and
    continued once it is not; every line they printed reaches their logs,
    the ones the full disk refused included, and the job succeeds.  A pause
    longer than the watchdog's timeout is not a hang."""
    go = tmp_path / "go"
    p = start_job(trainctl, home, tmp_path,
                  '["/bin/sh", "-c", "i=0; while [ ! -e go ]; do echo tick $i; i=$((i+1));'
                  ' sleep 0.01; done; echo done at $i"]',
                  extra="on_disk_full: wait\nwatchdog: {progress_pattern: tick, min_seconds: 2,"
                        " warmup_steps: 1}\nrestart: {max_restarts: 1}\n")
    try:
        job = running(home, p, tmp_path)
        fill(home.parent)
        said_while_alive(tmp_path, p, "the workers are paused until space returns")
        time.sleep(4)  # the pause itself, twice the watchdog's timeout: no condition to wait on
        assert "hang detected" not in (tmp_path / "run.stderr").read_text()
        free(home.parent)
        said_while_alive(tmp_path, p, "the workers go on")
        go.touch()
        assert p.wait(timeout=120) == 0, (tmp_path / "run.stderr").read_text()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    j = show(run_tc, job)
    assert j["state"] == "succeeded", j
    texts = [e.get("reason") or "" for e in j["events"] if e.get("kind") == "disk_full"]
    assert any("paused" in t for t in texts) and any("go on" in t for t in texts), j["events"]
    assert not [e for e in j["events"] if e.get("kind") == "hang"], j["events"]
    for rank in (0, 1):
        lines = rank_log(j, rank).splitlines()
        assert lines[-1].startswith("done at "), lines[-3:]
        ticks = [int(ln.split()[1]) for ln in lines[:-1]]
        assert ticks == list(range(len(ticks))), "a line was lost"  # in order, none missing


def test_on_disk_full_takes_stop_or_wait(run_tc, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ncommand: [/bin/true]\non_disk_full: later\n")
    r = run_tc("run", str(spec), timeout=60)
    assert r.returncode == 2, r.stderr
    assert "on_disk_full" in r.stderr and "later" in r.stderr, r.stderr
