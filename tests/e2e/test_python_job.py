"""The in-job helper (python/trainctl/job.py, docs/python.md) with real
supervisors: job.log's records through the metrics channel, should_stop()
before a stop's SIGKILL under `trainctl run` and under the server's
preemption, the helper on the localhost Slurm cluster, and a supervisor that
is gone."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import PYTHON, REPO, wait_until
from server_fixture import start_server
from slurm_cluster import cluster, slurm_tc  # noqa: F401  (the fixtures)

PYDIR = REPO / "python"

# the same records twice: printed as DLLL lines, and through job.log
RECORDS = r'''
import json, math, os, sys, time
sys.path.insert(0, os.environ["PYDIR"])
from trainctl import job
rank = job.info().rank
recs = []
for s in range(1, 41):
    recs.append(({"train.loss": 1.0 / s + rank, "lr": 0.1, "tokens": 512 * s}, s))
recs.append(({"train.loss": float("nan"), "note": "spike", "ok": True}, 41))
recs.append(({"val.acc": 0.9 + rank / 100}, (1,)))
recs.append(({"val.acc": 0.95}, ()))
for values, step in recs:
    if sys.argv[1] == "print":
        st = list(step) if isinstance(step, tuple) else step
        print("DLLL " + json.dumps({"timestamp": time.time(), "type": "LOG", "step": st,
                                    "data": values}), flush=True)
    else:
        job.log(values, step=list(step) if isinstance(step, tuple) else step)
'''


def write(path, text, mode=0o644):
    path.write_text(text)
    path.chmod(mode)
    return path


def spec_file(tmp_path, name, command, extra=""):
    return write(tmp_path / f"{name}.yaml", f"""name: {name}
command: {json.dumps(command)}
devices: {{type: cpu, per_node: 2}}
env: {{PYDIR: "{PYDIR}"}}
{extra}""")


def points(run_tc, job):
    p = run_tc("metrics", job, "--format", "json")
    assert p.returncode == 0, p.stderr
    return [{k: v for k, v in pt.items() if k != "wall_time"} for pt in json.loads(p.stdout)]


def test_log_stores_what_dlll_lines_store(run_tc, tmp_path):
    script = write(tmp_path / "records.py", RECORDS)
    a = spec_file(tmp_path, "printed", [PYTHON, str(script), "print"])
    # metrics.format names the formats of printed lines; the channel counts whatever it says
    b = spec_file(tmp_path, "logged", [PYTHON, str(script), "log"], "metrics: {format: tcap}\n")
    for spec in (a, b):
        p = run_tc("run", "-q", spec)
        assert p.returncode == 0, p.stderr
    printed, logged = points(run_tc, "printed"), points(run_tc, "logged")
    assert len(printed) == 2 * (40 * 3 + 3 + 2), len(printed)
    assert logged == printed
    # the wall times are the helper's own, not the moment the supervisor read them
    p = run_tc("metrics", "logged", "--name", "train.loss", "--rank", "1", "--format", "json")
    walls = [pt["wall_time"] for pt in json.loads(p.stdout)]
    assert walls == sorted(walls) and len(set(walls)) == len(walls) == 41, walls
    show = json.loads(run_tc("show", "logged", "--json").stdout)
    log = open(os.path.join(show["run_dir"], "logs", "rank-0.log")).read()
    assert "DLLL" not in log  # the records went through the channel, not stdout


STOPPER = r'''
import os, signal, sys, time
sys.path.insert(0, os.environ["PYDIR"])
from trainctl import job
me = job.info()
out = os.path.join(os.environ["MARKS"], f"rank-{me.rank}")
own = []
if me.rank == 1:
    # a handler of the script's own keeps working; should_stop() sees the stop file
    signal.signal(signal.SIGTERM, lambda *a: own.append("own handler ran"))
start = job.resume_from()
step = int(open(start).read()) if start else 0
open(out + ".resumed", "w").write(str(start))
if start and os.environ.get("FINISH_ON_RESUME"):
    sys.exit(0)
while not job.should_stop():
    step += 1
    job.log({"loss": 1.0 / step}, step=step)
    if step == 5:
        open(out + ".running", "w").write("")
    time.sleep(0.02)
if me.rank == 1:
    # the stop file may be seen before the SIGTERM that follows it arrives
    end = time.monotonic() + 60
    while not own and time.monotonic() < end:
        time.sleep(0.01)
ck = os.path.join(job.info().checkpoint_dir, f"step-{step}.r{me.rank}")
open(ck + ".tmp", "w").write(str(step))
os.rename(ck + ".tmp", ck)
open(out, "w").write(f"stopped at {step} {own}")
'''


def stopper(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    marks.chmod(0o777)
    return write(tmp_path / "stopper.py", STOPPER), marks


def run_stopper(trainctl, home, tmp_path, name, extra=""):
    """`trainctl run` of STOPPER on 2 ranks, once both are at step 5: (proc, marks)."""
    script, marks = stopper(tmp_path)
    spec = spec_file(tmp_path, name, [PYTHON, str(script)], extra).read_text()
    write(tmp_path / f"{name}.yaml", spec.replace("env: {", f'env: {{MARKS: "{marks}", '))
    proc = subprocess.Popen([str(trainctl), "run", "-q", str(tmp_path / f"{name}.yaml")],
                            env=dict(os.environ, TRAINCTL_HOME=str(home)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: all((marks / f"rank-{r}.running").exists() for r in (0, 1))
               or proc.poll() is not None, timeout=120, what="both ranks at step 5")
    if proc.poll() is not None:
        raise AssertionError(proc.communicate())
    return proc, marks


def test_should_stop_before_the_sigkill_of_a_stop(trainctl, home, run_tc, tmp_path):
    proc, marks = run_stopper(trainctl, home, tmp_path, "stopme", "restart: {grace_seconds: 120}\n")
    try:
        t0 = time.monotonic()
        p = run_tc("stop", "stopme")
        assert p.returncode == 0, p.stderr
        out, err = proc.communicate(timeout=100)
    finally:
        if proc.poll() is None:
            proc.kill()
    # well inside the 120 s grace: the workers saved and exited by themselves
    assert time.monotonic() - t0 < 60, err
    assert (marks / "rank-0").read_text().startswith("stopped at ")
    assert (marks / "rank-1").read_text().endswith("['own handler ran']")
    job = json.loads(run_tc("show", "stopme", "--json").stdout)
    assert job["state"] == "killed", job
    for r in (0, 1):
        log = open(os.path.join(job["run_dir"], "logs", f"rank-{r}.log")).read()
        assert "Traceback" not in log, log
    # what was logged up to the stop is stored: flushed when should_stop() said so
    stopped_at = int((marks / "rank-0").read_text().split()[2])
    p = run_tc("metrics", "stopme", "--name", "loss", "--rank", "0", "--format", "json")
    assert len(json.loads(p.stdout)) == stopped_at, p.stdout[-300:]


def test_should_stop_before_a_preemptions_sigkill(trainctl, tmp_path):
    script, marks = stopper(tmp_path)
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2")
    try:
        low = srv.submit({"name": "low", "command": [PYTHON, str(script)], "preemptible": True,
                          "priority": 10, "devices": {"type": "gpu", "per_node": 2},
                          "restart": {"grace_seconds": 120},
                          "env": {"PYDIR": str(PYDIR), "MARKS": str(marks), "FINISH_ON_RESUME": "1"}})
        wait_until(lambda: all((marks / f"rank-{r}.running").exists() for r in (0, 1)),
                   timeout=120, what="both ranks of low at step 5")
        t0 = time.monotonic()
        high = srv.submit({"name": "high", "command": "true", "priority": 500,
                           "devices": {"type": "gpu", "per_node": 1}})
        srv.wait_state(high, "succeeded")
        assert time.monotonic() - t0 < 60  # low gave its devices back well inside its grace
        assert (marks / "rank-0").read_text().startswith("stopped at ")
        assert (marks / "rank-1").read_text().endswith("['own handler ran']")
        j = srv.wait_state(low, "succeeded", timeout=180)
        assert "preempted" in [e["state"] for e in j["events"]]
        # run again, it resumed from the checkpoint it saved when should_stop() said so
        resumed = (marks / "rank-0.resumed").read_text()
        assert os.path.basename(resumed).startswith("step-"), resumed
        st, log = srv.call("GET", f"/api/v1/jobs/{low}/logs?rank=0")
        assert "Traceback" not in log, log
    finally:
        srv.stop()


GONE = r'''
import os, sys, time
sys.path.insert(0, os.environ["PYDIR"])
from trainctl import job
if os.fork():
    time.sleep(600)  # the worker itself goes with its supervisor
os.setsid()  # a process of the job that outlives the group's teardown
fd = os.open(os.path.join(os.environ["MARKS"], "child.err"), os.O_WRONLY | os.O_CREAT, 0o644)
os.dup2(fd, 2)
sup = int(os.environ["SUP"])
open(os.path.join(os.environ["MARKS"], "child.pid"), "w").write(str(os.getpid()))
n = 0
while True:  # logging before, while and after the supervisor dies
    n += 1
    job.log({"loss": 1.0 / n}, step=n)
    try:
        os.kill(sup, 0)
    except ProcessLookupError:
        break
t = time.monotonic()
while time.monotonic() - t < 1.0:
    n += 1
    job.log({"loss": 1.0 / n}, step=n)
job.flush()
open(os.path.join(os.environ["MARKS"], "child.done"), "w").write(str(n))
'''


def test_a_supervisor_that_is_gone_costs_no_hang_and_no_traceback(trainctl, home, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    script = write(tmp_path / "gone.py", GONE)
    spec = write(tmp_path / "gone.yaml", f"""name: gone
command: ["/bin/sh", "-c", "SUP=$PPID exec {PYTHON} {script}"]
env: {{PYDIR: "{PYDIR}", MARKS: "{marks}"}}
""")
    proc = subprocess.Popen([str(trainctl), "run", "-q", str(spec)],
                            env=dict(os.environ, TRAINCTL_HOME=str(home)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (marks / "child.pid").exists() or proc.poll() is not None,
                   timeout=60, what="the job's detached process")
        assert proc.poll() is None, proc.communicate()
        os.kill(proc.pid, signal.SIGKILL)  # the supervisor, at once
        proc.wait(timeout=30)
        # the detached process logs on for a second, then ends by itself: no hang
        wait_until(lambda: (marks / "child.done").exists(), timeout=30,
                   what="the detached process to finish")
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            os.kill(int((marks / "child.pid").read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    n = int((marks / "child.done").read_text())
    assert (marks / "child.err").read_text() == ""  # not a word, no traceback
    # every record reached the channel, those after the supervisor died too
    run_dir = next((home / "runs").iterdir())
    with open(run_dir / "logs" / "metrics-rank-0.dlll") as f:
        assert sum(1 for _ in f) == n


def test_an_unwritable_channel_costs_records_not_the_script(tmp_path):
    """The run folder gone (deleted job) or a full disk: one warning, exit 0."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from trainctl import job\n"
            "for i in range(100000): job.log({'loss': 0.5}, step=i)\n"
            "print(job.should_stop(), job.resume_from(), job.info().rank)\n")
    env = dict(os.environ, TRAINCTL_METRICS_CHANNEL=str(tmp_path / "gone" / "rank-0.dlll"),
               TRAINCTL_STOP_FILE=str(tmp_path / "gone" / "stop"), TRAINCTL_JOB_ID="x")
    env.pop("TRAINCTL_RESUME_FROM", None)
    p = subprocess.run([PYTHON, "-c", code, str(PYDIR)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "False None 0\n"
    assert p.stderr.count("\n") == 1 and "metrics not recorded" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


ON_SLURM = r"""
import dataclasses, json, os, sys
sys.path.insert(0, os.environ["PYDIR"])
from trainctl import job
me = job.info()
with open(os.path.join(os.environ["MARKS"], f"info-{me.rank}.json"), "w") as f:
    json.dump(dataclasses.asdict(me), f)
for s in range(1, 11):
    job.log({"loss": me.rank + 1.0 / s}, step=s)
"""


def test_the_helper_on_slurm(slurm_tc, cluster, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    script = write(tmp_path / "on_slurm.py", ON_SLURM)
    spec = write(tmp_path / "slurm.yaml", f"""name: helper-2n
command: ["{PYTHON}", "{script}"]
devices: {{type: cpu, per_node: 2}}
env: {{PYDIR: "{PYDIR}", MARKS: "{marks}"}}
nodes: 2
backend: slurm
""")
    p = slurm_tc("run", "-q", spec, timeout=400)
    assert p.returncode == 0, p.stderr + cluster.logs()
    job = json.loads(slurm_tc("show", "helper-2n", "--json").stdout)
    for r in range(4):
        i = json.load(open(marks / f"info-{r}.json"))
        assert (i["rank"], i["local_rank"], i["node_rank"], i["world_size"], i["num_nodes"]) == \
            (r, r % 2, r // 2, 4, 2), i
        assert i["job_id"] == job["id"] and i["run_dir"] == job["run_dir"], (i, job["id"])
        m = slurm_tc("metrics", "helper-2n", "--name", "loss", "--rank", str(r), "--format", "json")
        vals = [pt["value"] for pt in json.loads(m.stdout)]
        # each node's supervisor followed its own ranks' channels, under their global ranks
        assert vals == [r + 1.0 / s for s in range(1, 11)], (r, vals)


def test_the_example_of_docs_python_md(run_tc, tmp_path):
    """docs/python.md, "In a job": its train.py and job.yaml, run as they are."""
    import re
    text = (REPO / "docs" / "python.md").read_text().split("## In a job", 1)[1].split("\n## ", 1)[0]
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", text, re.S):
        m = re.match(r"# example: (\S+)\n", body)
        if m:
            (tmp_path / m.group(1)).write_text(body)
    p = run_tc("run", "-q", "job.yaml", cwd=str(tmp_path), env={"PYTHONPATH": str(PYDIR)})
    assert p.returncode == 0, p.stderr
    pts = json.loads(run_tc("metrics", "helper-example", "--name", "train.loss", "--format",
                            "json").stdout)
    assert sorted((pt["rank"], pt["value"]) for pt in pts) == \
        sorted((r, 1.0 / s) for r in (0, 1) for s in range(1, 51))
    job = json.loads(run_tc("show", "helper-example", "--json").stdout)
    assert os.path.exists(os.path.join(job["run_dir"], "output", "checkpoints", "step-50"))


def test_should_stop_at_the_time_limits_warning(trainctl, home, run_tc, tmp_path):
    """slurm.signal's warning (SIGUSR1 to the supervisor, passed on to the
    workers): should_stop() turns true, the script saves and ends by itself,
    and the job succeeds; the signal kills nobody."""
    proc, marks = run_stopper(trainctl, home, tmp_path, "warned")
    try:
        os.kill(proc.pid, signal.SIGUSR1)
        out, err = proc.communicate(timeout=100)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    for r in (0, 1):
        assert (marks / f"rank-{r}").read_text().startswith("stopped at "), r
    job = json.loads(run_tc("show", "warned", "--json").stdout)
    assert job["state"] == "succeeded"
    assert open(os.path.join(job["run_dir"], "stop")).read() == "User defined signal 1\n"
