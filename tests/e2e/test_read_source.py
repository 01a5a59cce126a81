"""The read verbs through one job source (issue 24; docs/server.md, "The CLI
through the server"): `metrics`, `ckpt list`, `compare` and `export tb`
print the same through a root server, for the job's owner (a real,
unprivileged account with a token), as on the server's machine without a
server; another account is refused.  `logs` takes its flags the same way
both ways.
"""
import os
import pwd
import subprocess

import pytest

from conftest import wait_until
from server_fixture import as_user, root_server

STEPS = 12

# DLLogger lines (docs/metrics.md) and a checkpoint file at step 10
SCRIPT = r'''
i=0
while [ $i -lt {steps} ]; do
  echo "DLLL {{\"type\": \"LOG\", \"step\": [0, $i], \"data\": {{\"train.loss\": $i.$1}}}}"
  i=$((i+1))
  if [ $i = 10 ]; then echo $i > "$TRAINCTL_CKPT_DIR/.t"; mv "$TRAINCTL_CKPT_DIR/.t" "$TRAINCTL_CKPT_DIR/step_$i.txt"; fi
done
'''.format(steps=STEPS)


@pytest.fixture(scope="module")
def two_jobs(trainctl):
    """A root server, accounts alice (the owner) and bob, and two succeeded
    jobs of alice's with metrics and a checkpoint each."""
    with root_server(trainctl, "tc-readsrc-", "alice", "bob") as (srv, u, base):
        script = os.path.join(base, "steps.sh")
        with open(script, "w") as f:
            f.write(SCRIPT)
        os.chmod(script, 0o755)
        jobs = []
        for frac in ("5", "6"):
            spec = {"name": f"mlp{frac}", "command": ["/bin/sh", script, frac], "workdir": "/tmp",
                    "devices": {"type": "gpu", "per_node": 1}}
            jobs.append(srv.submit(spec))
        for job in jobs:
            row = srv.wait_state(job, ["succeeded", "failed", "killed", "lost"])
            assert row["state"] == "succeeded", srv.run_logs(job)
            wait_until(lambda: local(trainctl, srv, "metrics", job).stdout.count("train.loss") == STEPS,
                       timeout=60, what=lambda: local(trainctl, srv, "metrics", job).stdout)
            wait_until(lambda: "step_10.txt" in local(trainctl, srv, "ckpt", "list", job).stdout,
                       timeout=60, what=lambda: local(trainctl, srv, "ckpt", "list", job).stdout)
        yield srv, u, base, jobs


def local(trainctl, srv, *args):
    """The verb without a server: the server's state folder read directly (as root)."""
    env = dict(os.environ, TRAINCTL_HOME=srv.state)
    env.pop("TRAINCTL_SERVER", None)
    env.pop("TRAINCTL_TOKEN", None)
    return subprocess.run([str(trainctl)] + [str(a) for a in args], env=env, capture_output=True,
                          text=True, timeout=120)


def alice(trainctl, srv, u, *args):
    return as_user(trainctl, srv, u["alice"], srv.token, *args)


def bob(trainctl, srv, u, *args):
    return as_user(trainctl, srv, u["bob"], srv.bob, *args)


def refused(p, job):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "belongs to another user" in p.stderr and job in p.stderr, p.stderr
    assert not p.stdout


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_metrics_through_the_server(trainctl, two_jobs, fmt):
    srv, u, _, jobs = two_jobs
    want = local(trainctl, srv, "metrics", jobs[0], "--format", fmt)
    assert want.returncode == 0 and "train.loss" in want.stdout, want.stderr
    got = alice(trainctl, srv, u, "metrics", jobs[0], "--format", fmt)
    assert got.returncode == 0, got.stderr
    assert got.stdout == want.stdout
    one = alice(trainctl, srv, u, "metrics", "mlp5", "--name", "train.loss", "--points", "4")
    assert one.stdout == local(trainctl, srv, "metrics", "mlp5", "--name", "train.loss",
                               "--points", "4").stdout
    # the same refusals both ways: a metric it lacks, a rank it lacks
    for args in (["--name", "train.los"], ["--rank", "3"]):
        a = alice(trainctl, srv, u, "metrics", jobs[0], *args)
        b = local(trainctl, srv, "metrics", jobs[0], *args)
        assert a.returncode == b.returncode == 2 and a.stderr == b.stderr, (a.stderr, b.stderr)
    refused(bob(trainctl, srv, u, "metrics", jobs[0]), jobs[0])


def test_ckpt_list_through_the_server(trainctl, two_jobs):
    srv, u, _, jobs = two_jobs
    want = local(trainctl, srv, "ckpt", "list", jobs[0])
    assert want.returncode == 0 and "step_10.txt" in want.stdout, want.stderr
    got = alice(trainctl, srv, u, "ckpt", "list", jobs[0])
    assert (got.returncode, got.stdout) == (0, want.stdout), got.stderr
    refused(bob(trainctl, srv, u, "ckpt", "list", jobs[0]), jobs[0])
    p = alice(trainctl, srv, u, "ckpt", "list", "--nodes", jobs[0])
    assert p.returncode == 2 and "not through a server" in p.stderr, p.stderr


def test_compare_through_the_server(trainctl, two_jobs):
    srv, u, _, jobs = two_jobs
    for args in ([jobs[0], jobs[1]], [jobs[0], jobs[1], "--json"], [jobs[0], jobs[1], jobs[0]]):
        want = local(trainctl, srv, "compare", *args)
        assert want.stdout and "train.loss" in want.stdout, want.stderr
        got = alice(trainctl, srv, u, "compare", *args)
        assert (got.returncode, got.stdout) == (want.returncode, want.stdout), got.stderr
    # 0.5 against 0.6 and so on: not aligned, exit 1 both ways
    assert local(trainctl, srv, "compare", jobs[0], jobs[1]).returncode == 1
    refused(bob(trainctl, srv, u, "compare", jobs[0], jobs[1]), jobs[0])


def test_export_tb_through_the_server(trainctl, two_jobs):
    srv, u, base, jobs = two_jobs
    mine = os.path.join(base, "tb-local")
    want = local(trainctl, srv, "export", "tb", jobs[0], mine)
    assert want.returncode == 0 and f"{STEPS} points in 1 event file" in want.stdout, want.stderr
    home = pwd.getpwnam(u["alice"]).pw_dir
    theirs = os.path.join(home, "tb")
    got = alice(trainctl, srv, u, "export", "tb", jobs[0], theirs)
    assert got.returncode == 0, got.stderr
    assert got.stdout.replace(theirs, mine) == want.stdout
    assert os.listdir(os.path.join(theirs, "rank-0"))
    refused(bob(trainctl, srv, u, "export", "tb", jobs[0], os.path.join(base, "tb-bob")), jobs[0])


def test_logs_flags_are_one_table(trainctl, two_jobs):
    """--tail has one limit, and --supervisor is refused through a server
    with a reason, not taken for an unknown flag."""
    srv, u, _, jobs = two_jobs
    a = alice(trainctl, srv, u, "logs", jobs[0], "--tail", "20000000")
    b = local(trainctl, srv, "logs", jobs[0], "--tail", "20000000")
    assert a.returncode == b.returncode == 2 and a.stderr == b.stderr, (a.stderr, b.stderr)
    p = alice(trainctl, srv, u, "logs", jobs[0], "--supervisor")
    assert p.returncode == 2 and "not through a server" in p.stderr, p.stderr
    t = alice(trainctl, srv, u, "logs", jobs[0], "--tail", "2")
    assert t.returncode == 0 and t.stdout == local(trainctl, srv, "logs", jobs[0], "--tail", "2").stdout
    refused(bob(trainctl, srv, u, "logs", jobs[0]), jobs[0])


def test_ps_through_the_server(trainctl, two_jobs):
    """ps's flags read once: --state is checked before a source is asked."""
    srv, u, _, jobs = two_jobs
    args = ["ps", "-a", "--state", "succeeded,failed", "-o", "id,name,state"]
    want = local(trainctl, srv, *args)
    assert want.returncode == 0 and jobs[0] in want.stdout and jobs[1] in want.stdout, want.stderr
    got = alice(trainctl, srv, u, *args)
    assert (got.returncode, got.stdout) == (0, want.stdout), got.stderr
    theirs = bob(trainctl, srv, u, *args)
    assert theirs.returncode == 0 and jobs[0] not in theirs.stdout, theirs.stdout
    a = alice(trainctl, srv, u, "ps", "--state", "bogus")
    b = local(trainctl, srv, "ps", "--state", "bogus")
    assert a.returncode == b.returncode == 2 and a.stderr == b.stderr, (a.stderr, b.stderr)
