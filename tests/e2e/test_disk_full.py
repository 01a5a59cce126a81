"""A full disk and a damaged database (issue 28).

A full file system under TRAINCTL_HOME must not hide the jobs: `ps`, `show`
and `logs` read on, read-only when a write is refused, and a new `run` fails
saying the file system is full.  A truncated or garbled trainctl.db gives one
line saying it is damaged and what to do, exit 3, never a crash or a hang.

The full disk is a real one: a 4 MiB tmpfs of this test's own, filled to the
last byte, unmounted afterwards.
"""
import errno
import os
import sqlite3
import subprocess

import pytest

from conftest import job_id_of

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
