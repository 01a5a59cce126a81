"""Paths a user can write, read or deleted by a root `trainctl server`
(docs/security.md, "Paths a user can write"): a real root server, real
unprivileged accounts, and one regression test per finding of issue 23;
each failed against the server before core/upath.

    H1  DELETE of a job: root's walk of the run folder followed a folder
        swapped for a link mid-walk                      test_delete_*
    H4  logs/ swapped for a link to another account's logs: the API, the
        event stream and `trainctl logs` read through it test_logs_*
    M1  a spec's parallel.cluster naming /dev/zero or a FIFO: the server
        read it without a cap, or blocked               test_spec_file_*
"""
import os
import pwd
import subprocess
import threading
import time

import pytest

from server_fixture import root_server, wait_for

MARK = "bobs-private-log-line-5813"


@pytest.fixture(scope="module")
def psec(trainctl):
    with root_server(trainctl, "tc-secpaths-", "alice", "bob") as t:
        yield t


def spec(command, **extra):
    s = {"command": command, "workdir": "/tmp", "devices": {"type": "gpu", "per_node": 1}}
    s.update(extra)
    return s


def ended(srv, job, token=None):
    kw = {"token": token} if token else {}
    def done():
        st, body = srv.call("GET", f"/api/v1/jobs/{job}", **kw)
        return st == 200 and body["state"] in ("succeeded", "failed", "killed", "lost")
    assert wait_for(done, timeout=120), srv.run_logs(job)
    return srv.call("GET", f"/api/v1/jobs/{job}", **kw)[1]


def as_account(name, script, **kw):
    """sh -c script as the account (its uid, gid and groups)."""
    return subprocess.Popen(["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups",
                             "sh", "-c", script], **kw)


def root_dir(base, name, files):
    """A root-owned 0700 folder of root-owned files named f0..f(files-1)."""
    d = os.path.join(base, "rootonly-" + name)
    os.makedirs(d, mode=0o700)
    for i in range(files):
        with open(os.path.join(d, f"f{i}"), "w") as f:
            f.write("canary")
    return d


# ---- H1: the DELETE of a job's run folder ----

def test_delete_does_not_follow_a_link_in_place_of_a_folder(psec):
    """A link that stands where a folder was before the DELETE is unlinked,
    its target kept."""
    srv, u, base = psec
    canary = root_dir(base, "pre", 3)
    job = srv.submit(spec(f'mkdir -p "$TRAINCTL_OUTPUT_DIR/sub/deeper" && '
                          f'rm -rf "$TRAINCTL_OUTPUT_DIR/sub" && ln -s {canary} "$TRAINCTL_OUTPUT_DIR/sub" && '
                          f'ln -s {canary}/f0 "$TRAINCTL_OUTPUT_DIR/f0"'))
    assert ended(srv, job)["state"] == "succeeded", srv.run_logs(job)
    run = os.path.join(srv.state, "runs", job)
    assert os.path.islink(os.path.join(run, "output", "sub"))
    st, body = srv.call("DELETE", f"/api/v1/jobs/{job}")
    assert st == 200, body
    assert not os.path.lexists(run)
    assert sorted(os.listdir(canary)) == ["f0", "f1", "f2"]


def test_delete_with_a_folder_swapped_mid_walk(psec):
    """The job's account swaps output/sub for a link to a root folder while
    root deletes the run folder: root deleted the files there by full path."""
    srv, u, base = psec
    n = 20000  # files in sub: the walk is in them long enough for the swap
    canary = root_dir(base, "mid", n)
    job = srv.submit(spec(f'mkdir -p "$TRAINCTL_OUTPUT_DIR/sub" && cd "$TRAINCTL_OUTPUT_DIR/sub" && '
                          f'python3 -c "import os; [open(\'f%d\' % i, \'w\').close() for i in range({n})]"'))
    assert ended(srv, job)["state"] == "succeeded", srv.run_logs(job)
    out = os.path.join(srv.state, "runs", job, "output")
    assert len(os.listdir(os.path.join(out, "sub"))) == n
    # alice waits for the first file of sub to go, then puts the link in its place
    swap = as_account(u["alice"], f'cd {out} && python3 -c "\n'
                      'import os, sys\n'
                      'm = os.stat(\'sub\').st_mtime_ns\n'
                      'print(\'ready\', flush=True)\n'
                      'while os.stat(\'sub\').st_mtime_ns == m: pass\n'
                      f'os.rename(\'sub\', \'sub.old\'); os.symlink(\'{canary}\', \'sub\')\n'
                      'print(\'swapped\', flush=True)"',
                      stdout=subprocess.PIPE, text=True)
    try:
        assert swap.stdout.readline().strip() == "ready"
        st, body = srv.call("DELETE", f"/api/v1/jobs/{job}")
        assert swap.wait(timeout=60) == 0
        assert swap.stdout.read().strip() == "swapped"
    finally:
        if swap.poll() is None:
            swap.kill()
            swap.wait()
    left = len(os.listdir(canary))
    assert left == n, f"root deleted {n - left} files of a root folder through the link ({st} {body})"
    assert os.stat(canary).st_uid == 0
    # the job is gone from the list whatever stayed of its folder
    assert srv.call("GET", f"/api/v1/jobs/{job}")[0] == 404


# ---- H4: logs/ swapped for a link to another account's logs ----

def swap_logs_for(srv, name, job, target):
    """As the account: its job's logs/ becomes a link to target."""
    run = os.path.join(srv.state, "runs", job)
    p = as_account(name, f'cd {run} && mv logs logs.mine && ln -s {target} logs')
    assert p.wait(timeout=30) == 0
    assert os.path.islink(os.path.join(run, "logs"))


def test_logs_through_a_link_to_another_accounts_logs(psec, trainctl):
    srv, u, base = psec
    bob = srv.submit(spec(f"echo {MARK}"), token=srv.bob)
    assert ended(srv, bob, srv.bob)["state"] == "succeeded", srv.run_logs(bob)
    bob_logs = os.path.join(srv.state, "runs", bob, "logs")
    assert MARK in open(os.path.join(bob_logs, "rank-0.log")).read()
    assert os.stat(bob_logs).st_uid == pwd.getpwnam(u["bob"]).pw_uid
    alice = srv.submit(spec("echo alice-own-line"))
    assert ended(srv, alice)["state"] == "succeeded", srv.run_logs(alice)
    st, body = srv.call("GET", f"/api/v1/jobs/{alice}/logs", token=srv.token)
    assert st == 200 and "alice-own-line" in body, (st, body)
    swap_logs_for(srv, u["alice"], alice, bob_logs)
    for q in ("", "?rank=0", "?format=json", "?rank=0&format=json", "?follow=1", "?rank=0&follow=1",
              "?tail=5&follow=1"):
        st, body = srv.call("GET", f"/api/v1/jobs/{alice}/logs{q}", token=srv.token)
        assert MARK not in str(body), (q, st, body)
        assert 400 <= st < 500, (q, st, body)
        assert "symbolic link" in str(body), (q, st, body)
    # root's CLI on the state folder (no server in between) refuses it too
    env = dict(os.environ, TRAINCTL_HOME=srv.state, TRAINCTL_SOCKET="")
    env.pop("TRAINCTL_SERVER", None)
    for args in ([], ["--rank", "0"], ["--supervisor"]):
        p = subprocess.run([str(trainctl), "logs", alice] + args, env=env, capture_output=True,
                           text=True, timeout=60)
        assert MARK not in p.stdout + p.stderr, (args, p.stdout, p.stderr)
        assert p.returncode == 2, (args, p.returncode, p.stdout, p.stderr)
        assert "symbolic link" in p.stderr, (args, p.stderr)
    # bob still reads his own
    st, body = srv.call("GET", f"/api/v1/jobs/{bob}/logs", token=srv.bob)
    assert st == 200 and MARK in body, (st, body)


def test_logs_follow_keeps_the_folder_it_opened(psec):
    """A follow that started on the real logs/ keeps reading that folder;
    it never reads the link's target."""
    srv, u, base = psec
    # the mark far into bob's log: a reader at alice's offset would reach it
    bob = srv.submit(spec(f"printf '%0200d\\n' 0; echo {MARK}"), token=srv.bob)
    assert ended(srv, bob, srv.bob)["state"] == "succeeded", srv.run_logs(bob)
    bob_logs = os.path.join(srv.state, "runs", bob, "logs")
    assert MARK in open(os.path.join(bob_logs, "rank-0.log")).read()
    release = os.path.join(base, f"release-{os.urandom(3).hex()}")
    job = srv.submit(spec(f"echo first; while [ ! -e {release} ]; do sleep 0.05; done; echo second"))
    srv.wait_state(job, ["running"])
    got = []
    def read():
        st, body = srv.call("GET", f"/api/v1/jobs/{job}/logs?follow=1", token=srv.token)
        got.append((st, body))
    t = threading.Thread(target=read)
    t.start()
    run = os.path.join(srv.state, "runs", job)
    assert wait_for(lambda: os.path.exists(os.path.join(run, "logs", "rank-0.log")), timeout=60)
    time.sleep(0.5)  # the stream has opened logs/ (it polls every 0.2 s)
    swap_logs_for(srv, u["alice"], job, bob_logs)
    open(release, "w").close()
    t.join(timeout=120)
    assert not t.is_alive()
    st, body = got[0]
    assert MARK not in str(body), body
    assert "first" in str(body), body


# ---- M1: files a spec names ----

def submit_cluster(srv, path):
    s = spec("true", parallel={"strategy": "auto", "model": "gpt2-small", "global_batch": 8,
                               "cluster": path})
    t0 = time.monotonic()
    st, body = srv.call("POST", "/api/v1/jobs", {"spec": s}, token=srv.token)
    return st, body, time.monotonic() - t0


def server_answers(srv):
    st, body = srv.call("GET", "/api/v1/whoami", token=srv.token)
    assert st == 200 and body["user"], (st, body)


def test_spec_file_dev_zero(psec):
    srv, u, base = psec
    st, body, took = submit_cluster(srv, "/dev/zero")
    assert st == 400, (st, body)
    assert "'/dev/zero' is not a regular file" in body["error"], body
    server_answers(srv)


def test_spec_file_fifo_does_not_block(psec):
    srv, u, base = psec
    home = pwd.getpwnam(u["alice"]).pw_dir
    fifo = os.path.join(home, f"cluster-{os.urandom(3).hex()}.yaml")
    p = as_account(u["alice"], f"mkfifo -m 600 {fifo}")
    assert p.wait(timeout=30) == 0
    st, body, took = submit_cluster(srv, fifo)
    assert st == 400, (st, body)
    assert "not a regular file" in body["error"], body
    assert took < 30, took
    server_answers(srv)


def test_spec_file_too_large(psec):
    """A regular file over the cap (16 MiB) is refused, not read whole."""
    srv, u, base = psec
    home = pwd.getpwnam(u["alice"]).pw_dir
    big = os.path.join(home, "big-cluster.yaml")
    p = as_account(u["alice"], f"truncate -s 17M {big}")
    assert p.wait(timeout=30) == 0
    st, body, took = submit_cluster(srv, big)
    assert st == 400, (st, body)
    assert "larger than" in body["error"], body
    server_answers(srv)
