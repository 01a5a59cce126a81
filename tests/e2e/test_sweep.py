"""test_sweep.py -- `trainctl sweep`: the 2x2 grid of the digits example in
docs/sweeps.md run here (4 jobs, 2 at a time, the best one checked against
the jobs' own logged accuracy) and through the server with a SIGKILL of the
server mid-sweep; a failed trial that the sweep goes on after; a random
search whose median rule stops at least one trial; compare with many jobs
and --sweep; SIGINT stopping a sweep; no more trials at once than the
machine's GPUs hold (fake ones).  The digits trials run 2 epochs."""
import json
import os
import re
import signal
import subprocess

import pytest

from conftest import DIGITS, REPO, trainctl_path, wait_until
from server_fixture import start_server, wait_for

DOC = REPO / "docs" / "sweeps.md"


def _tc(home, *args, timeout=600, env=None):
    e = dict(os.environ, TRAINCTL_HOME=str(home))
    e.pop("TRAINCTL_SERVER", None)
    e.update(env or {})
    return subprocess.run([str(trainctl_path())] + [str(a) for a in args], env=e,
                          timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def doc_sweep(d):
    """The doc's sweep file, its spec path made absolute."""
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert "spec: ../examples/digits/job.yaml" in block
    block = block.replace("spec: ../examples/digits/job.yaml", f"spec: {DIGITS}/job.yaml")
    p = d / "digits-grid.yaml"
    p.write_text(block)
    return p


def logged_accuracy(home, job):
    """The last val.accuracy epoch record of rank 0, as the job logged it."""
    r = _tc(home, "metrics", job, "--name", "val.accuracy", "--rank", "0", "--format", "json")
    assert r.returncode == 0, r.stderr
    pts = [p["value"] for p in json.loads(r.stdout) if p["kind"] == "epoch"]
    assert pts, r.stdout
    return pts[-1]


def show(home, ref):
    r = _tc(home, "sweep", "show", ref, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def check_grid(home, s):
    """4 trials, all succeeded as distinct jobs with the grid's values; the best is the best logged."""
    assert s["state"] == "done", s
    trials = s["trials"]
    assert len(trials) == 4 and all(t["state"] == "succeeded" for t in trials), trials
    assert len({t["job"] for t in trials}) == 4
    grid = {(t["params"]["args.lr"], t["params"]["args.batch-size"]) for t in trials}
    assert grid == {(0.02, 16), (0.02, 64), (0.2, 16), (0.2, 64)}
    acc = {t["job"]: logged_accuracy(home, t["job"]) for t in trials}
    for t in trials:
        assert t["objective"] == pytest.approx(acc[t["job"]]) and t["steps"] == 2
    best = max(acc, key=acc.get)
    assert s["best"]["job"] == best or acc[s["best"]["job"]] == acc[best], (s["best"], acc)
    assert trials[0]["job"] == s["best"]["job"]  # best first
    return trials


def test_grid_here(torch_available, tmp_path):
    home = tmp_path / "home"
    f = doc_sweep(tmp_path)
    r = _tc(home, "sweep", f)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 trials, 2 at a time" in r.stdout
    assert r.stdout.count(" started: ") == 4
    s = show(home, "digits-grid")
    trials = check_grid(home, s)
    # never more than 2 at a time: each trial started before at most one other ended
    spans = sorted((t["started"], t["ended"]) for t in trials)
    for start, _ in spans:
        assert sum(1 for a, b in spans if a <= start < b) <= 2, spans
    # each trial is an ordinary job, its overrides recorded
    j = json.loads(_tc(home, "show", trials[0]["job"], "--json").stdout)
    assert j["sweep"]["id"] == s["id"] and j["sweep"]["trial"] == trials[0]["trial"], j
    assert j["sweep"]["params"] == trials[0]["params"]
    assert "args.lr" in j["spec"]["overrides"], j["spec"]
    assert f"sweep      {s['id']}, trial {trials[0]['trial']}" in _tc(home, "show", trials[0]["job"]).stdout
    text = _tc(home, "sweep", "show", "digits-grid").stdout
    assert f"best       trial {trials[0]['trial']}: val.accuracy" in text
    assert f"trainctl clone {trials[0]['job']}" in text
    assert "trainctl run --set args.lr=" in text
    # compare: the sweep, and the same jobs named one by one
    c = _tc(home, "compare", "--sweep", "digits-grid", "--json")
    assert c.returncode == 0, c.stderr
    cj = json.loads(c.stdout)
    assert cj["reference"] == trials[0]["job"] and len(cj["jobs"]) == 4
    assert cj["metric"] == "val.accuracy" and cj["kind"] == "epoch" and len(cj["steps"]) == 2
    assert cj["steps"][-1]["values"][0] == pytest.approx(trials[0]["objective"])
    c = _tc(home, "compare", *[t["job"] for t in trials[:3]], "--metric", "train.loss", "--ranges", "3")
    assert c.returncode == 0, c.stderr
    assert f"reference  A = {trials[0]['job']}" in c.stdout
    assert len(re.findall(r"^  \[\d+, \d+\] \.\. \[\d+, \d+\]", c.stdout, re.M)) == 3, c.stdout


TOY = """import json, sys, time
x = float(sys.argv[sys.argv.index("--x") + 1])
steps = int(sys.argv[sys.argv.index("--steps") + 1])
if x < 0:
    print("the value is negative: giving up", file=sys.stderr)
    sys.exit(3)
for i in range(steps):
    print("DLLL " + json.dumps({"type": "LOG", "step": [i + 1], "data": {"loss": x}}), flush=True)
    time.sleep(0.1)
"""


def toy(tmp_path, params, extra=""):
    (tmp_path / "toy.py").write_text(TOY)
    f = tmp_path / "toy-sweep.yaml"
    f.write_text("name: toy\n"
                 "spec: {command: [/usr/bin/python3, toy.py], args: {x: 1, steps: 3},"
                 " devices: {type: cpu, per_node: 1}}\n"
                 f"parameters:\n{params}"
                 "objective: {metric: loss, mode: min}\n" + extra)
    return f


def test_failed_trial_is_recorded_and_the_sweep_goes_on(tmp_path):
    home = tmp_path / "home"
    f = toy(tmp_path, "  args.x: [2, -1, 0.5]\n")
    r = _tc(home, "sweep", f)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "trial 1 failed" in r.stdout
    s = show(home, "toy")
    by = {t["trial"]: t for t in s["trials"]}
    assert by[0]["state"] == by[2]["state"] == "succeeded"
    assert by[1]["state"] == "failed" and by[1]["job"]
    assert "exit" in by[1]["note"] or "3" in by[1]["note"], by[1]
    assert s["best"]["trial"] == 2 and s["best"]["objective"] == 0.5
    assert "root cause: " in _tc(home, "sweep", "show", "toy").stdout
    # a key that does not exist stops the sweep before anything runs
    bad = toy(tmp_path, "  args.x: [1]\n  devices.per_nod: [1]\n")
    r = _tc(home, "sweep", bad)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "trial 0 (x=1 per_nod=1): --set devices.per_nod=1: unknown key 'per_nod'" in r.stderr


def test_random_search_median_stopping(tmp_path):
    home = tmp_path / "home"
    f = toy(tmp_path, "  args.x: {uniform: [0, 1]}\n  args.steps: [30]\n",
            "count: 6\nseed: 3\nparallel: 1\n"
            "early_stopping: {rule: median, grace: 2, min_trials: 2}\n")
    r = _tc(home, "sweep", f)
    assert r.returncode == 0, r.stdout + r.stderr
    s = show(home, "toy")
    stopped = [t for t in s["trials"] if t["state"] == "stopped"]
    assert stopped, s["trials"]
    for t in stopped:
        assert t["early_stopped"] and "median rule" in t["note"] and t["steps"] < 30
        j = json.loads(_tc(home, "show", t["job"], "--json").stdout)
        assert j["state"] == "killed"
    # the best is a trial that ran to its end, and no trial was stopped that beat it
    best = s["best"]
    assert s["trials"][0]["state"] == "succeeded" and best["trial"] == s["trials"][0]["trial"]
    assert all(t["objective"] > best["objective"] for t in stopped)


def test_grid_through_the_server_survives_sigkill(torch_available, trainctl, tmp_path):
    state = tmp_path / "state"
    srv = start_server(trainctl, state, args=("--cpu-slots", "4"))
    f = doc_sweep(tmp_path)
    r = srv.cli("sweep", f)
    assert r.returncode == 0, r.stdout + r.stderr
    sid = r.stdout.strip()

    def sweep():
        st, body = srv.call("GET", f"/api/v1/sweeps/{sid}")
        assert st == 200, body
        return body

    # mid-sweep: some trial has a job, not every trial has ended
    wait_until(lambda: any(t["job"] for t in sweep()["trials"]), 120, "a trial's job")
    s = sweep()
    assert s["state"] == "running" and s["counts"]["running"] <= 2, s
    st, jobs = srv.call("GET", "/api/v1/jobs")
    trial = next(j for j in jobs["jobs"] if j["name"].startswith("digits-grid-"))
    assert trial["priority"] == 100 and trial["user"]
    assert srv.job(trial["id"])["sweep"]["id"] == sid
    srv.stop(signal.SIGKILL)
    srv2 = start_server(trainctl, state, args=("--cpu-slots", "4"))
    srv = srv2
    ok = wait_for(lambda: sweep()["state"] == "done", timeout=600, step=0.5)
    assert ok, json.dumps(sweep(), indent=1) + srv.log()[-3000:]
    check_grid(state, sweep())
    r = srv.cli("sweep", "show", sid)
    assert r.returncode == 0 and "best       trial" in r.stdout, r.stderr
    st, lst = srv.call("GET", "/api/v1/sweeps")
    assert st == 200 and [x["id"] for x in lst["sweeps"]] == [sid]
    srv.stop()


def test_sigint_stops_the_trials_and_the_sweep(tmp_path):
    home = tmp_path / "home"
    f = toy(tmp_path, "  args.x: [1, 2, 3]\n  args.steps: [3000]\n", "parallel: 2\n")
    e = dict(os.environ, TRAINCTL_HOME=str(home))
    e.pop("TRAINCTL_SERVER", None)
    p = subprocess.Popen([str(trainctl_path()), "sweep", str(f)], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        def two_jobs():
            r = _tc(home, "sweep", "show", "toy", "--json")
            return r.returncode == 0 and sum(1 for t in json.loads(r.stdout)["trials"] if t["job"]) == 2
        wait_until(two_jobs, 120, "two trials with jobs")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1 and "stopped by a signal" in err, out + err
    s = show(home, "toy")
    assert s["state"] == "stopped", s
    states = sorted(t["state"] for t in s["trials"])
    assert states == ["killed", "killed", "pending"], s["trials"]
    for t in s["trials"]:
        if t["job"]:
            assert json.loads(_tc(home, "show", t["job"], "--json").stdout)["state"] == "killed"


def test_accelerators_cap_parallel(tmp_path):
    """Each trial leases its devices as `trainctl run` does: 2 GPUs, one per trial, so 2 at a time."""
    home = tmp_path / "home"
    (tmp_path / "toy.py").write_text(TOY)
    f = tmp_path / "gpu.yaml"
    f.write_text("name: gpus\n"
                 "spec: {command: [/usr/bin/python3, toy.py], args: {x: 1, steps: 5},"
                 " devices: {type: gpu, per_node: 1}}\n"
                 "parameters:\n  args.x: [1, 2, 3]\nobjective: {metric: loss}\nparallel: 4\n")
    r = _tc(home, "sweep", f, env={"TRAINCTL_FAKE_DEVICES": "gpu:2"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "parallel: 2 trials of 1 gpu each fit this machine's 2 (not 4)" in r.stdout
    s = show(home, "gpus")
    assert all(t["state"] == "succeeded" for t in s["trials"]), s["trials"]
    spans = sorted((t["started"], t["ended"]) for t in s["trials"])
    for start, _ in spans:
        assert sum(1 for a, b in spans if a <= start < b) <= 2, spans


def test_random_search_successive_halving(tmp_path):
    home = tmp_path / "home"
    f = toy(tmp_path, "  args.x: {uniform: [0, 1]}\n  args.steps: [30]\n",
            "count: 4\nseed: 3\nparallel: 1\n"
            "early_stopping: {rule: halving, budget: 30, eta: 2, min_steps: 5}\n")
    r = _tc(home, "sweep", f)
    assert r.returncode == 0, r.stdout + r.stderr
    s = show(home, "toy")
    stopped = [t for t in s["trials"] if t["state"] == "stopped"]
    assert stopped, s["trials"]
    for t in stopped:
        assert "successive halving" in t["note"] and 5 <= t["steps"] < 30, t
    assert s["trials"][0]["state"] == "succeeded"
