"""Slurm jobs of a root server run as their user (issue 13, finding 6,
docs/security.md): sbatch and scancel run with the account's uid, gid and
groups, and in an allowlist of the server's environment plus the hub's
variables, never the server's credentials.

A real localhost Slurm cluster (slurm_cluster.py) in a folder the account
can read (its slurm.conf and munge socket), a real root server, a real
account (useradd, removed afterwards)."""
import json
import os
import subprocess

import pytest

from conftest import wait_until
from slurm_cluster import root_slurm_server

CANARY = "canary-of-the-server-4711"


@pytest.fixture(scope="module")
def suser(trainctl):
    with root_slurm_server(trainctl, "tc-slurmuser-", "alice",
                           env={"TC_CANARY": CANARY, "AWS_SECRET_ACCESS_KEY": CANARY}) as (srv, u, cluster, _):
        yield srv, u, cluster


def test_slurm_job_runs_as_its_user(suser):
    srv, u, cluster = suser
    spec = {"name": "as-user", "workdir": "/tmp", "backend": "slurm", "nodes": 1,
            "command": 'echo "user=$(id -un) canary=${TC_CANARY:-none} aws=${AWS_SECRET_ACCESS_KEY:-none}"',
            "devices": {"type": "cpu", "per_node": 1}}
    job = srv.submit(spec)
    j = srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=240)
    assert j["state"] == "succeeded", "\n".join([json.dumps(j, indent=1)[:4000], srv.log()[-3000:], cluster.logs(), srv.run_logs(job)])
    sid = j["slurm"]["job"]
    # Slurm has the job as the account's
    p = subprocess.run(["scontrol", "-o", "show", "job", str(sid)], env=cluster.env, capture_output=True,
                       text=True)
    assert f"UserId={u['alice']}(" in p.stdout, p.stdout + p.stderr
    # its processes ran as the account, without the server's variables
    st, logs = srv.call("GET", f"/api/v1/jobs/{job}/logs")
    text = logs if isinstance(logs, str) else json.dumps(logs)
    assert f"user={u['alice']} canary=none aws=none" in text, text
    assert CANARY not in text


def test_slurm_stop_as_its_user(suser):
    srv, u, cluster = suser
    spec = {"name": "held", "workdir": "/tmp", "backend": "slurm", "nodes": 1,
            "command": "echo started; sleep 300",
            "devices": {"type": "cpu", "per_node": 1}}
    job = srv.submit(spec)
    srv.wait_state(job, ["running"], timeout=240)
    st, body = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
    assert st == 200, body
    j = srv.wait_state(job, ["killed", "failed", "succeeded", "lost"], timeout=120)
    assert j["state"] == "killed", j
    # scancel ran as the account: the server's log names no refusal
    assert "Access/permission denied" not in srv.log()


def test_slurm_job_gets_its_secrets(suser):
    """A secret goes with sbatch's environment to the nodes' supervisors,
    never to disk; a file is read on the node as the account."""
    srv, u, cluster = suser
    value, filed = "slurm-secret-VALUE-0815", "slurm-file-VALUE-4711"
    st, body = srv.call("POST", "/api/v1/secrets/tok", {"value": value})
    assert st == 201, body
    base = os.path.dirname(os.path.dirname(str(cluster.conf)))
    mine = os.path.join(base, "alice-key.txt")
    with open(mine, "w") as f:
        f.write(filed + "\n")
    uid = int(subprocess.run(["id", "-u", u["alice"]], capture_output=True, text=True).stdout)
    os.chown(mine, uid, -1)
    os.chmod(mine, 0o600)
    spec = {"name": "secrets", "workdir": "/tmp", "backend": "slurm", "nodes": 1,
            "env": {"TOK": {"secret": "tok"}, "F": {"file": mine}},
            "command": 'printf %s "$TOK" > "$TRAINCTL_OUTPUT_DIR/tok"; echo "tok=$TOK f=$F"',
            "devices": {"type": "cpu", "per_node": 1}}
    job = srv.submit(spec)
    j = srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=240)
    assert j["state"] == "succeeded", "\n".join([json.dumps(j, indent=1)[:4000], srv.log()[-3000:]])
    with open(os.path.join(j["run_dir"], "output", "tok")) as f:
        assert f.read() == value
    st, logs = srv.call("GET", f"/api/v1/jobs/{job}/logs")
    text = logs if isinstance(logs, str) else json.dumps(logs)
    assert "tok=*** f=***" in text and value not in text and filed not in text, text
    for root, dirs, files in os.walk(j["run_dir"]):
        dirs[:] = [d for d in dirs if d != "output"]
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read().decode(errors="replace")
            assert value not in data and filed not in data, os.path.join(root, name)
