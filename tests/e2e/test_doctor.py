"""`trainctl doctor`: the checks of a state folder and its safe repairs
(docs/reliability.md), on real state folders made by real jobs."""
import json
import os
import re
import sqlite3
import stat
import subprocess

from conftest import REPO, bash_complete, wait_until


def short_job(run_tc):
    """A finished job (its database, run folder, job.env); its id."""
    p = run_tc("run", "-q", "--", "/bin/sh", "-c", "echo hi")
    assert p.returncode == 0, p.stderr
    m = re.search(r"job (\d{8}-\d{6}-\d{3}-[0-9a-f]{4})", p.stderr)
    assert m, p.stderr
    return m.group(1)


def db_rows(home, sql, *args):
    with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
        return c.execute(sql, args).fetchall()


def findings(run_tc, *flags):
    p = run_tc("doctor", "--json", *flags)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)


def test_clean_home_is_ok(run_tc, home):
    p = run_tc("doctor")
    assert (p.returncode, p.stdout) == (0, f"ok: nothing wrong in {home}\n"), p.stderr
    assert not (home / "trainctl.db").exists()  # a check creates nothing
    short_job(run_tc)
    p = run_tc("doctor")
    assert (p.returncode, p.stdout) == (0, f"ok: nothing wrong in {home}\n"), p.stderr
    assert findings(run_tc) == (0, [])
    assert findings(run_tc, "--fix") == (0, [])


def test_usage_and_completion(run_tc, trainctl, home):
    p = run_tc("doctor", "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: trainctl doctor [--fix] [--json]")
    assert bash_complete(trainctl, home, ["doct"]) == ["doctor"]
    assert bash_complete(trainctl, home, ["doctor", "--f"]) == ["--fix"]
    p = run_tc("doctor", "--fixx")
    assert p.returncode == 2 and "--fix" in p.stderr, p.stderr
    p = run_tc("doctor", "somewhere")
    assert p.returncode == 2 and "somewhere" in p.stderr, p.stderr


def test_running_job_with_a_killed_supervisor_is_recorded_lost(trainctl, home, run_tc):
    proc = subprocess.Popen([str(trainctl), "run", "-q", "--", "/bin/sh", "-c", "sleep 300"],
                            env=dict(os.environ, TRAINCTL_HOME=str(home)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def running():
            try:
                return db_rows(home, "SELECT id FROM jobs WHERE state = 'running'")
            except sqlite3.OperationalError:  # not created yet
                return None
        job = wait_until(running, what="the job's row in state running")[0][0]
    finally:
        proc.kill()
        proc.wait()
    rc, found = findings(run_tc)
    assert rc == 1
    assert [(f["kind"], f["job"], f["fixed"]) for f in found] == [("job", job, False)], found
    assert f"supervisor (pid {proc.pid}) is gone: --fix records it lost" in found[0]["message"]
    assert db_rows(home, "SELECT state FROM jobs WHERE id = ?", job) == [("running",)]

    p = run_tc("doctor", "--fix")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"job: job {job}: running, but its supervisor (pid {proc.pid}) was gone: now lost\n" in p.stdout
    assert db_rows(home, "SELECT state FROM jobs WHERE id = ?", job) == [("lost",)]
    # through the transition: its event row says why
    assert db_rows(home, "SELECT reason FROM events WHERE job_id = ? AND state = 'lost'", job)
    assert findings(run_tc) == (0, [])


def test_stale_lease_is_dropped_and_a_live_one_kept(run_tc, home):
    short_job(run_tc)
    gone = subprocess.Popen(["true"])
    gone.wait()
    with open("/proc/self/stat") as f:
        my_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with sqlite3.connect(home / "trainctl.db") as c:
        c.execute("INSERT INTO leases (device_type, device_id, job_id, pid, ticks, since)"
                  " VALUES ('gpu', 0, 'doctor-test-gone', ?, 1, 0)", (gone.pid,))
        c.execute("INSERT INTO leases (device_type, device_id, job_id, pid, ticks, since)"
                  " VALUES ('gpu', 1, 'doctor-test-live', ?, ?, 0)", (os.getpid(), my_ticks))
    rc, found = findings(run_tc)
    assert rc == 1
    assert [(f["kind"], f["job"]) for f in found] == [("lease", "doctor-test-gone")], found
    assert f"gpu 0, held by pid {gone.pid}, which is gone: --fix drops the lease" == found[0]["message"]
    assert len(db_rows(home, "SELECT * FROM leases")) == 2

    p = run_tc("doctor", "--fix")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"which is gone: dropped\n" in p.stdout
    assert db_rows(home, "SELECT job_id FROM leases") == [("doctor-test-live",)]


def test_orphan_run_folder_is_reported_and_left(run_tc, home):
    job = short_job(run_tc)
    orphan = home / "runs" / "20200101-000000-000-abcd"
    (orphan / "output").mkdir(parents=True)
    (orphan / "output" / "model.pt").write_bytes(b"x" * 3072)
    # and a job row whose run folder is gone
    gone = short_job(run_tc)
    subprocess.run(["rm", "-rf", str(home / "runs" / gone)], check=True)
    for flags in ((), ("--fix",)):
        rc, found = findings(run_tc, *flags)
        assert rc == 1
        assert [(f["kind"], f["path"], f["fixed"]) for f in found] == [
            ("orphan", str(orphan), False), ("orphan", str(home / "runs" / gone), False)], found
        assert "(3.0 KiB)" in found[0]["message"] and "left in place" in found[0]["message"]
        assert f"job {gone}" in found[1]["message"] and "missing" in found[1]["message"]
        assert (orphan / "output" / "model.pt").stat().st_size == 3072
    assert (home / "runs" / job).is_dir()


def test_damaged_database_says_what_to_do(run_tc, home):
    short_job(run_tc)
    db = home / "trainctl.db"
    # the pages into the file itself first: a page 1 still in the WAL would be read from there
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    with open(db, "r+b") as f:
        f.write(b"not a sqlite db!")
    before = db.read_bytes()
    for flags in ((), ("--fix",)):
        p = run_tc("doctor", *flags)
        assert p.returncode == 1, p.stdout + p.stderr
        assert f"database: {db}: damaged (file is not a database): " in p.stdout
        assert "move it aside" in p.stdout and "restore a copy" in p.stdout
        assert db.read_bytes() == before  # never "fixed" by rewriting it


def test_job_env_readable_by_others_is_made_0600(run_tc, home):
    job = short_job(run_tc)
    env = home / "runs" / job / "job.env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    env.chmod(0o644)
    rc, found = findings(run_tc)
    assert rc == 1
    assert [(f["kind"], f["path"], f["fixed"]) for f in found] == [("permissions", str(env), False)]
    assert found[0]["message"].endswith("--fix makes it 0600")
    assert stat.S_IMODE(env.stat().st_mode) == 0o644
    rc, found = findings(run_tc, "--fix")
    assert rc == 0 and found[0]["fixed"] and found[0]["message"].endswith("made 0600"), found
    assert stat.S_IMODE(env.stat().st_mode) == 0o600


def doc_example():
    """The first text block of docs/reliability.md: commands and their output."""
    text = (REPO / "docs" / "reliability.md").read_text()
    block = re.search(r"```text\n(.*?)```", text, re.S).group(1)
    runs, cur = [], None
    for line in block.splitlines():
        if line.startswith("$ trainctl "):
            cur = (line[len("$ trainctl "):].split(), [])
            runs.append(cur)
        else:
            cur[1].append(line)
    return runs


def test_docs_example(run_tc, home):
    """The example of docs/reliability.md, made for real: the same output."""
    runs = doc_example()
    assert [r[0] for r in runs] == [["doctor"], ["doctor", "--fix"]]
    doc_job = re.search(r"runs/(\d{8}-\d{6}-\d{3}-[0-9a-f]{4})/job\.env", runs[0][1][0]).group(1)
    doc_orphan = re.search(r"runs/(\S+): a run folder", runs[0][1][1]).group(1)
    job = short_job(run_tc)
    (home / "runs" / job / "job.env").chmod(0o644)
    (home / "runs" / doc_orphan).mkdir()
    (home / "runs" / doc_orphan / "last.pt").write_bytes(b"x" * 2048)
    for args, lines in runs:
        p = run_tc(*args)
        want = "\n".join(lines).replace("/home/ada/.trainctl", str(home)).replace(doc_job, job)
        assert p.stdout == want + "\n", p.stderr


def test_newer_schema_is_named_and_left(run_tc, home):
    short_job(run_tc)
    with sqlite3.connect(home / "trainctl.db") as c:
        have = c.execute("PRAGMA user_version").fetchone()[0]
        c.execute(f"PRAGMA user_version = {have + 1}")
    for flags in ((), ("--fix",)):
        rc, found = findings(run_tc, *flags)
        assert rc == 1
        assert [(f["kind"], f["fixed"]) for f in found] == [("database", False)], found
        assert found[0]["message"].startswith(
            f"schema {have + 1} was written by a newer trainctl (this one knows {have})")
        assert db_rows(home, "PRAGMA user_version") == [(have + 1,)]
