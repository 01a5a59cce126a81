"""`trainctl exec JOB [--rank R] -- CMD` (docs/exec.md): a command run in a
running job's environment, for real.

* a local `trainctl run` job: the rank's own variables (RANK,
  TRAINCTL_JOB_ID), its working folder, none of the caller's variables,
  stdin passed through, the command's exit status and signal passed back;
  a rank out of range, an unknown job and an ended job are refused (exit 2);
* a root server's job of a real unprivileged account: its owner enters it as
  itself, root enters it as the owner (never as root), an admin account
  that is not the owner is refused, and another user does not even find it.
"""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import bash_complete, wait_until
from server_fixture import as_user, reachable_state, start_server, token_for, unix_accounts

HOLD = 'echo ready $RANK; while [ ! -e "{release}" ]; do sleep 0.05; done'


def start_run(trainctl, home, workdir, release, nproc=2):
    """`trainctl run` of a job that holds until release exists (Popen)."""
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env.pop("TRAINCTL_SERVER", None)
    return subprocess.Popen([str(trainctl), "run", "-q", "--nproc", str(nproc), "--name", "held", "--",
                             "sh", "-c", HOLD.format(release=release)],
                            cwd=str(workdir), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_ready(run_tc, nproc=2):
    """Every rank's worker runs (its row is there and it printed 'ready')."""
    def up():
        p = run_tc("exec", "held", "--rank", str(nproc - 1), "--", "true")
        return p.returncode == 0
    wait_until(up, timeout=120, what="the job's workers to run")


@pytest.fixture
def local_job(trainctl, home, tmp_path, run_tc):
    work = tmp_path / "work"
    work.mkdir()
    release = tmp_path / "release"
    proc = start_run(trainctl, home, work, release)
    try:
        wait_ready(run_tc)
        yield work, release, proc
    finally:
        release.touch()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_exec_runs_in_the_ranks_environment(run_tc, local_job):
    work, _, _ = local_job
    jid = run_tc("ps", "--format", "csv", "-o", "id").stdout.split()[1]
    p = run_tc("exec", "held", "--rank", "1", "--",
               "sh", "-c", 'echo "$RANK $TRAINCTL_JOB_ID ${CALLER_ONLY:-unset}"; pwd; id -u',
               env={"CALLER_ONLY": "leaked"})
    assert p.returncode == 0, p.stderr
    rank, job, caller, cwd, uid = p.stdout.split()
    assert (rank, job, caller) == ("1", jid, "unset")
    assert os.path.realpath(cwd) == os.path.realpath(work)
    assert uid == str(os.getuid())
    # rank 0 by default; stdin is passed through
    p = run_tc("exec", jid, "--", "sh", "-c", 'echo "$RANK $(cat)"', input="from-stdin\n")
    assert p.returncode == 0 and p.stdout.strip() == "0 from-stdin", p.stderr


def test_exec_exit_status_passes_through(run_tc, local_job):
    assert run_tc("exec", "held", "--", "sh", "-c", "exit 7").returncode == 7
    assert run_tc("exec", "held", "--", "sh", "-c", "kill -TERM $$").returncode == 128 + 15
    p = run_tc("exec", "held", "--", "no-such-command-here")
    assert p.returncode == 127 and "no-such-command-here" in p.stderr


def test_exec_completes_job_names(trainctl, run_tc, home, local_job):
    assert bash_complete(trainctl, home, ["exec", "hel"]) == ["held"]
    assert bash_complete(trainctl, home, ["exec", "held", "--r"]) == ["--rank"]


def test_exec_refusals(run_tc, local_job):
    p = run_tc("exec", "held", "--rank", "2", "--", "true")
    assert p.returncode == 2 and "has ranks 0-1 (not 2)" in p.stderr, p.stderr
    p = run_tc("exec", "no-such-job", "--", "true")
    assert p.returncode == 2 and "no-such-job" in p.stderr, p.stderr
    p = run_tc("exec", "held", "--", )
    assert p.returncode == 2 and "give the command after --" in p.stderr, p.stderr
    p = run_tc("exec", "held", "--rnak", "1", "--", "true")
    assert p.returncode == 2 and "--rank" in p.stderr, p.stderr


def test_exec_refused_once_the_job_ended(run_tc, local_job):
    _, release, proc = local_job
    release.touch()
    assert proc.wait(timeout=120) == 0
    p = run_tc("exec", "held", "--", "true")
    assert p.returncode == 2 and "has ended (succeeded)" in p.stderr, p.stderr


# ---- a root server's job of an unprivileged account ----

@pytest.fixture(scope="module")
def users_srv(trainctl):
    """A root server, the accounts alice, bob and the admin ops (real
    accounts, not root), in a folder the accounts can traverse."""
    base = tempfile.mkdtemp(prefix="tc-exec-", dir="/tmp")
    os.chmod(base, 0o711)
    state = os.path.join(base, "state")
    try:
        with unix_accounts("alice", "bob", "ops") as u:
            toks = {r: token_for(trainctl, state, n, admin=(r == "ops")) for r, n in u.items()}
            srv = start_server(trainctl, state, fake="gpu:2")
            try:
                yield srv, u, toks, base
            finally:
                srv.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_exec_as_the_jobs_user(trainctl, users_srv):
    srv, u, toks, base = users_srv
    release = os.path.join(base, "release-user")
    spec = {"name": "held", "command": HOLD.format(release=release), "workdir": "/tmp",
            "devices": {"type": "gpu", "per_node": 1}}
    job = srv.submit(spec, token=toks["alice"])
    alice_uid = subprocess.run(["id", "-u", u["alice"]], capture_output=True, text=True).stdout.strip()
    try:
        srv.wait_state(job, "running")
        show = "echo $RANK $TRAINCTL_JOB_ID; pwd; id -u"

        def alice_exec():
            return as_user(trainctl, srv, u["alice"], toks["alice"], "exec", job, "--", "sh", "-c", show)
        wait_until(lambda: alice_exec().returncode == 0, timeout=120, what="alice's exec to work")
        p = alice_exec()
        assert p.stdout.split() == ["0", job, "/tmp", alice_uid], p.stderr
        # root (the server's admin, over its socket) enters as alice, never as root
        p = srv.cli("exec", job, "--", "sh", "-c", "id -u; id -G")
        assert p.returncode == 0, p.stderr
        uid, groups = p.stdout.splitlines()
        assert uid == alice_uid and "0" not in groups.split(), p.stdout
        # an admin account sees the job, but is not alice: refused here
        p = as_user(trainctl, srv, u["ops"], toks["ops"], "exec", job, "--", "id", "-u")
        assert p.returncode == 2, (p.stdout, p.stderr)
        assert f"runs as uid {alice_uid}: only that user or root may exec into it" in p.stderr
        # bob does not even find it
        p = as_user(trainctl, srv, u["bob"], toks["bob"], "exec", job, "--", "id", "-u")
        assert p.returncode == 2 and p.stdout == "", (p.stdout, p.stderr)
    finally:
        open(release, "w").close()
    srv.wait_state(job, ["succeeded", "failed", "killed", "lost"])
    p = as_user(trainctl, srv, u["alice"], toks["alice"], "exec", job, "--", "true")
    assert p.returncode == 2 and "has ended" in p.stderr, p.stderr


# ---- a job in a container image ----

def test_exec_into_a_container_job(trainctl, home, tmp_path, run_tc):
    image_fixture = pytest.importorskip("image_fixture")
    why = image_fixture.podman_usable()
    if why:
        pytest.skip(f"podman cannot be installed here: {why}")
    conf = image_fixture.containers_conf(tmp_path)
    image = image_fixture.ensure_image(conf)
    work = tmp_path / "work"
    work.mkdir()
    release = work / "release"  # the workdir is mounted in the container
    spec = tmp_path / "ctr.json"
    spec.write_text(json.dumps({"name": "held", "image": image, "command": HOLD.format(release=release),
                                "workdir": str(work), "devices": {"type": "cpu", "per_node": 2}}))
    env = dict(os.environ, TRAINCTL_HOME=str(home), CONTAINERS_CONF=str(conf))
    env.pop("TRAINCTL_SERVER", None)
    proc = subprocess.Popen([str(trainctl), "run", "-q", str(spec)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(run_tc)
        # the container's environment (podman's /run/.containerenv), its workdir, the rank's variables
        p = run_tc("exec", "held", "--rank", "1", "--", "sh", "-c",
                   'test -e /run/.containerenv && echo "$RANK $TRAINCTL_JOB_ID"; pwd; exit 4',
                   env={"CONTAINERS_CONF": None})
        assert p.returncode == 4, p.stderr
        jid = run_tc("ps", "--format", "csv", "-o", "id").stdout.split()[1]
        assert p.stdout.split() == ["1", jid, str(work)], p.stdout
        p = run_tc("exec", "held", "--", "cat", input="through-stdin\n")
        assert p.returncode == 0 and p.stdout == "through-stdin\n", p.stderr
    finally:
        release.touch()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()
    p = run_tc("exec", "held", "--", "true")
    assert p.returncode == 2 and "has ended" in p.stderr, p.stderr


def test_exec_into_a_root_servers_container_job(trainctl, tmp_path):
    """A root server's job in an image runs rootless podman as the job's
    account: that account execs into its container, and root does too (as
    the account); the command runs in the container as the account."""
    image_fixture = pytest.importorskip("image_fixture")
    why = image_fixture.podman_usable()
    if why:
        pytest.skip(f"podman cannot be installed here: {why}")
    reachable_state(tmp_path / "state")  # the account reads the runtime's settings and the image here
    conf = image_fixture.containers_conf(tmp_path)
    with unix_accounts("u") as names:
        user = names["u"]
        pw = subprocess.run(["getent", "passwd", user], capture_output=True, text=True).stdout.split(":")
        uid, gid, home = pw[2], pw[3], pw[5]
        image = "localhost/trainctl-tiny:1"
        image_fixture.import_as(user, image_fixture.tiny_rootfs_tar(str(tmp_path / "tiny.tar")), image, conf)
        state = tmp_path / "state"
        srv = start_server(trainctl, state, env={"CONTAINERS_CONF": str(conf)},
                           args=["--pass-env", "CONTAINERS_CONF"])
        release = os.path.join(home, "release")  # the workdir is mounted in the container
        try:
            tok = token_for(trainctl, state, user)
            job = srv.submit({"name": "held", "image": image, "workdir": home,
                              "command": HOLD.format(release=release),
                              "devices": {"type": "cpu", "per_node": 1}}, token=tok)
            srv.wait_state(job, "running", timeout=180)
            show = 'test -e /run/.containerenv && echo "$RANK $TRAINCTL_JOB_ID"; id -u; pwd'

            def user_exec():
                return as_user(trainctl, srv, user, tok, "exec", job, "--", "sh", "-c", show)
            wait_until(lambda: user_exec().returncode == 0, timeout=120,
                       what=lambda: f"the account's exec: {user_exec().stderr}")
            assert user_exec().stdout.split() == ["0", job, uid, home]
            p = srv.cli("exec", job, "--", "sh", "-c", "id -u; id -g")
            assert p.returncode == 0 and p.stdout.split() == [uid, gid], (p.stdout, p.stderr)
        finally:
            subprocess.run(["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups",
                            "touch", release])
            try:
                srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=180)
            finally:
                srv.stop()
