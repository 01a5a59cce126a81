"""The digits example under trainctl: real PyTorch DDP (gloo) on 2 CPU ranks."""
import json
import os
import re
import signal
import sqlite3
import subprocess

from conftest import DIGITS, wait_until


def dll_records(path):
    out = []
    for line in open(path):
        if line.startswith("DLLL "):
            out.append(json.loads(line[5:]))
    return out


def val_accuracies(path):
    return [r["data"]["val.accuracy"] for r in dll_records(path)
            if r.get("type") == "LOG" and "val.accuracy" in r.get("data", {})]


def test_digits_two_ranks(run_tc, home, torch_available):
    p = run_tc("run", "--quiet", DIGITS / "job.yaml", timeout=300)
    assert p.returncode == 0, p.stderr
    job = json.loads(run_tc("show", "digits-ddp", "--json").stdout)
    assert job["state"] == "succeeded" and job["workers"] == 2
    logs = os.path.join(job["run_dir"], "logs")
    for r in (0, 1):
        recs = dll_records(os.path.join(logs, f"rank-{r}.log"))
        assert any(x.get("type") == "METADATA" for x in recs)
        assert any("train.loss" in x.get("data", {}) and "train.ips" in x.get("data", {}) for x in recs)
        acc = val_accuracies(os.path.join(logs, f"rank-{r}.log"))
        assert acc and acc[-1] >= 0.90, acc
    ckpts = sorted(os.listdir(os.path.join(job["run_dir"], "output", "checkpoints")))
    assert ckpts == sorted(f"epoch-{e}.pt" for e in range(1, 11)) or len(ckpts) == 10, ckpts


def test_digits_rank_killed_restarts_and_resumes(trainctl, home, run_tc, tmp_path, torch_available):
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""
name: digits-restart
command: ["/usr/bin/python3", "{DIGITS}/train.py"]
args: {{epochs: 6, sleep-per-step: 0.02}}
devices: {{type: cpu, per_node: 2}}
env: {{OMP_NUM_THREADS: "1"}}
restart: {{max_restarts: 1, grace_seconds: 10}}
""")
    proc = subprocess.Popen([trainctl, "run", "--quiet", spec], env=dict(os.environ, TRAINCTL_HOME=str(home)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = os.path.join(home, "trainctl.db")

    def state():
        try:
            with sqlite3.connect(db) as c:
                run_dir = c.execute("SELECT run_dir FROM jobs").fetchone()
                pids = dict(c.execute("SELECT rank, pid FROM workers WHERE attempt = 0").fetchall())
            return run_dir[0] if run_dir else None, pids
        except sqlite3.OperationalError:
            return None, {}

    def second_checkpoint():
        run_dir, pids = state()
        if run_dir and 1 in pids:
            ck = os.path.join(run_dir, "output", "checkpoints")
            if os.path.isdir(ck) and any(n.startswith("epoch-2") for n in os.listdir(ck)):
                return pids[1]
        return None

    victim = wait_until(second_checkpoint, timeout=300, what="the epoch-2 checkpoint", step=0.1)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    job = json.loads(run_tc("show", "digits-restart", "--json").stdout)
    assert job["state"] == "succeeded" and job["restarts"] == 1
    restart = [e for e in job["events"] if e["state"] == "restarting"]
    assert restart and "rank 1 was killed by signal 9" in restart[0]["reason"]
    log0 = open(os.path.join(job["run_dir"], "logs", "rank-0.log")).read()
    m = re.search(r"resumed from (\S+) at epoch (\d+)", log0)
    assert m, "rank 0 did not resume"
    assert int(m.group(2)) >= 2
    assert val_accuracies(os.path.join(job["run_dir"], "logs", "rank-0.log"))[-1] >= 0.90
    text = run_tc("show", "digits-restart").stdout
    assert "restarting" in text and "restart 1 of 1" in text
