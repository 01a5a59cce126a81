"""File-level security of a root `trainctl server` (docs/security.md): a
real root server, real unprivileged accounts (useradd, removed afterwards,
also on failure), and one regression test per file finding of the audit
(issue 13); each failed against the server before its fix.

    4  symlinked rank logs: root wrote and read through them   test_log_symlink_*
    3  root chowned an absolute checkpoint.dir to the user      test_checkpoint_dir_*
    5  inputs and outputs copied by root (from, to, links)     test_input_*, test_upload_*
    6  slurm.extra written verbatim                            test_slurm_extra_is_an_allowlist
    8  no file-level separation between users                  test_file_modes, test_cross_user_files

The state folder lives in a folder the accounts can traverse (0711), as it
would on a shared machine, so that jobs reach their run folder.
"""
import os

import pytest

from server_fixture import root_server

SECRET = "root-only-secret-4711"


@pytest.fixture(scope="module")
def fsec(trainctl):
    with root_server(trainctl, "tc-secfiles-", "alice", "bob") as t:
        yield t


def root_file(base, name, text=SECRET):
    """A root-owned 0600 file in a folder the accounts cannot enter."""
    d = os.path.join(base, "rootonly-" + name)
    os.makedirs(d, mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, 0o600)
    return p


def job_spec(command, **extra):
    spec = {"command": command, "workdir": "/tmp", "devices": {"type": "gpu", "per_node": 1}}
    spec.update(extra)
    return spec


def ended(srv, job):
    return srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=120)


# ---- finding 4: symlinked log files ----

def test_log_symlink_write(fsec):
    """Attempt 0 swaps rank-0.log for a link to a root file; attempt 1's
    output was appended to that file by root."""
    srv, u, base = fsec
    target = root_file(base, "target", "untouched\n")
    # a world-traversable link target would do too; this one is root-only
    os.chmod(os.path.dirname(target), 0o711)
    cmd = (f'if [ ! -e "$TRAINCTL_LOG_DIR/once" ]; then touch "$TRAINCTL_LOG_DIR/once"; '
           f'rm -f "$TRAINCTL_LOG_DIR/rank-0.log"; ln -s {target} "$TRAINCTL_LOG_DIR/rank-0.log"; exit 1; fi; '
           f'echo WRITTEN-BY-ATTEMPT-1')
    job = srv.submit(job_spec(cmd, restart={"max_restarts": 1}))
    ended(srv, job)
    assert open(target).read() == "untouched\n"
    assert os.stat(target).st_uid == 0


def test_log_symlink_read(fsec):
    """A job replaces its rank-0.log with a link to a root-only file; the
    server's log readers (plain, json, follow) returned its contents."""
    srv, u, base = fsec
    secret = root_file(base, "secret")
    cmd = f'echo hello; rm -f "$TRAINCTL_LOG_DIR/rank-0.log"; ln -s {secret} "$TRAINCTL_LOG_DIR/rank-0.log"'
    job = srv.submit(job_spec(cmd))
    ended(srv, job)
    assert os.path.islink(os.path.join(srv.state, "runs", job, "logs", "rank-0.log")), srv.run_logs(job)
    for q in ("", "?rank=0", "?format=json", "?rank=0&follow=1"):
        st, body = srv.call("GET", f"/api/v1/jobs/{job}/logs{q}")
        assert SECRET not in str(body), (q, st, body)
    # the job's failure detail (the tail of its log) is not read through it either
    assert SECRET not in str(srv.job(job))


# ---- finding 3: an absolute checkpoint.dir ----

def test_checkpoint_dir_of_root_is_not_handed_over(fsec):
    """checkpoint.dir naming a root-owned 0700 folder: root chowned it to
    the user, whose job then renamed a root-only file in it."""
    srv, u, base = fsec
    victim_file = root_file(base, "victim")
    victim = os.path.dirname(victim_file)
    job = srv.submit(job_spec(f"mv {victim_file} {victim}/moved", checkpoint={"dir": victim}))
    row = ended(srv, job)
    assert os.stat(victim).st_uid == 0 and os.stat(victim).st_mode & 0o777 == 0o700
    assert os.path.exists(victim_file)
    assert row["state"] in ("failed", "lost"), row
    assert "checkpoint.dir" in str(row) + srv.run_logs(job), (row, srv.run_logs(job))


def test_checkpoint_dir_of_the_user_is_fine(fsec):
    """An absolute checkpoint.dir the user may create is made as the user."""
    srv, u, base = fsec
    home = os.path.expanduser("~" + u["alice"])
    ck = os.path.join(home, "ckpts", "a")
    job = srv.submit(job_spec('test -w "$TRAINCTL_CKPT_DIR" && echo ok', checkpoint={"dir": ck}))
    row = ended(srv, job)
    assert row["state"] == "succeeded", (row, srv.run_logs(job))
    import pwd
    assert os.stat(ck).st_uid == pwd.getpwnam(u["alice"]).pw_uid


# ---- finding 8: file modes ----

def test_file_modes(fsec):
    """The state folder, the database and a job's files were 0644/0755."""
    srv, u, base = fsec
    job = srv.submit(job_spec("echo hi", env={"ALICE_SECRET": "a-secret"}))
    assert ended(srv, job)["state"] == "succeeded", srv.run_logs(job)
    mode = lambda p: os.stat(p).st_mode & 0o777
    assert mode(srv.state) == 0o711        # root: others pass through to their run folders
    for f in ("trainctl.db", "trainctl.db-wal", "trainctl.db-shm"):
        p = os.path.join(srv.state, f)
        if os.path.exists(p):
            assert mode(p) == 0o600, f
    run = os.path.join(srv.state, "runs", job)
    assert mode(run) == 0o711
    assert mode(os.path.join(run, "job.yaml")) == 0o600
    assert mode(os.path.join(run, "job.env")) == 0o600
    import pwd
    uid = pwd.getpwnam(u["alice"]).pw_uid
    for d in ("logs", "output", "data"):
        st = os.stat(os.path.join(run, d))
        assert st.st_uid == uid and st.st_mode & 0o777 == 0o700, d


def test_cross_user_files(fsec):
    """bob's job read alice's job.yaml, job.env, logs and the database."""
    srv, u, base = fsec
    job = srv.submit(job_spec("echo alice-log-line-77", env={"ALICE_SECRET": "env-secret-88"}))
    assert ended(srv, job)["state"] == "succeeded", srv.run_logs(job)
    run = os.path.join(srv.state, "runs", job)
    cmd = (f"cat {run}/job.yaml {run}/job.env {run}/logs/rank-0.log 2>&1; "
           f"head -c 15 {srv.state}/trainctl.db 2>&1; ls {run}/logs {srv.state} 2>&1; true")
    spy = srv.submit(job_spec(cmd), token=srv.bob)
    saved, srv.token = srv.token, srv.bob
    try:
        assert ended(srv, spy)["state"] == "succeeded", srv.run_logs(spy)
        st, text = srv.call("GET", f"/api/v1/jobs/{spy}/logs")
    finally:
        srv.token = saved
    assert st == 200, text
    # file contents, and the names a listing of logs/ or the state folder shows
    for leak in ("env-secret-88", "alice-log-line-77", "SQLite format", "supervisor.log", "server-"):
        assert leak not in text, (leak, text)


# ---- finding 5: inputs copied by root ----

def test_input_from_a_root_only_file(fsec):
    """inputs[].from a root-only file: root copied it into data/ (0644)."""
    srv, u, base = fsec
    secret = root_file(base, "insecret")
    job = srv.submit(job_spec('cat "$TRAINCTL_DATA_DIR"/* 2>&1; ls -R "$TRAINCTL_DATA_DIR"',
                              inputs=[{"from": secret}]))
    row = ended(srv, job)
    assert row["state"] != "succeeded", row
    run = os.path.join(srv.state, "runs", job)
    for root, _, files in os.walk(os.path.join(run, "data")):
        for f in files:
            assert SECRET not in open(os.path.join(root, f), errors="replace").read()
    st, text = srv.call("GET", f"/api/v1/jobs/{job}/logs")
    assert SECRET not in str(text)


def test_input_to_outside_the_run_folder(fsec):
    """inputs[].to an absolute root folder: root wrote into it."""
    srv, u, base = fsec
    rootdir = os.path.dirname(root_file(base, "indir", "x"))
    job = srv.submit(job_spec("true", inputs=[{"from": "/etc/hostname", "to": rootdir + "/"}]))
    row = ended(srv, job)
    assert row["state"] != "succeeded", row
    assert sorted(os.listdir(rootdir)) == ["indir"]


def test_input_the_user_may_read(fsec):
    """A file the user may read is staged (as the user) and the job reads it."""
    srv, u, base = fsec
    job = srv.submit(job_spec('ls -R "$TRAINCTL_DATA_DIR"', inputs=[{"from": "/etc/hostname"}]))
    row = ended(srv, job)
    assert row["state"] == "succeeded", (row, srv.run_logs(job))
    st, text = srv.call("GET", f"/api/v1/jobs/{job}/logs")
    assert "hostname" in str(text), text


# ---- finding 6: slurm.extra ----

def test_slurm_extra_is_an_allowlist(fsec):
    """slurm.extra values were written verbatim into job.sbatch (--chdir,
    --output: paths of the server's account); a non-admin gets resources
    and placement options only."""
    srv, u, base = fsec
    for bad in ("--chdir=/root", "--output=/root/x", "-o /root/x", "--export=ALL", "--uid=0"):
        st, body = srv.call("POST", "/api/v1/jobs",
                            {"spec": job_spec("true", backend="slurm", slurm={"extra": [bad]})})
        assert st == 403 and "slurm.extra" in body["error"], (bad, st, body)
    st, body = srv.call("POST", "/api/v1/jobs",
                        {"spec": job_spec("true", backend="slurm", slurm={"extra": ["--exclusive", "--mem=4G"]})})
    assert st != 403, body
    if st == 201:
        srv.call("POST", f"/api/v1/jobs/{body['id']}/stop", {})


def test_upload_does_not_follow_links(fsec):
    """outputs.upload_to plus a link in output/ to a root-only file: root
    uploaded the file's contents."""
    srv, u, base = fsec
    secret = root_file(base, "upsecret")
    dest = os.path.join(base, "uploads")
    os.makedirs(dest, exist_ok=True)
    import pwd
    os.chown(dest, pwd.getpwnam(u["alice"]).pw_uid, -1)  # the upload runs as alice
    cmd = f'ln -s {secret} "$TRAINCTL_OUTPUT_DIR/leak"; echo mine > "$TRAINCTL_OUTPUT_DIR/mine.txt"'
    job = srv.submit(job_spec(cmd, outputs={"upload_to": dest + "/{job_id}"}))
    assert ended(srv, job)["state"] == "succeeded", srv.run_logs(job)
    up = os.path.join(dest, job)
    found = []
    for root, _, files in os.walk(up):
        for f in files:
            found.append(f)
            assert SECRET not in open(os.path.join(root, f), errors="replace").read(), f
    assert "mine.txt" in found, (found, srv.run_logs(job))
