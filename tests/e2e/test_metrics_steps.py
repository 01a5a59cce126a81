"""test_metrics_steps.py -- the step the job logged is the x axis.

A plain script prints `step N loss X` every 10 steps and saves a checkpoint
each time.  One run goes from 10 to 100; another stops after 50 and is
continued with `trainctl run --resume`, which logs 60 to 100.  The resumed
job's points are at steps 60..100 in `metrics` (table, CSV, JSON), in the
event files of `export tb` and in the supervisor's live ones, and `compare`
lines them up with the uninterrupted run's same steps.  DLLogger
(epoch, iteration) pairs keep the rank's step count (seq) as x.  The
server's chart points carry the logged step as x, always going up.
"""
import json
import re
import sys

from conftest import job_id_of
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tfevents_reader  # noqa: E402
from server_fixture import start_server  # noqa: E402

SCRIPT = r"""
import os, sys, time
until = int(sys.argv[sys.argv.index("--until") + 1])
ckpt = os.environ["TRAINCTL_CKPT_DIR"]
resume = os.environ.get("TRAINCTL_RESUME_FROM")
start = int(open(resume).read()) if resume else 0
print(f"starting after step {start}", flush=True)
for step in range(start + 10, until + 1, 10):
    print(f"step {step} loss {1000.0 / step:.4f}", flush=True)
    with open(os.path.join(ckpt, f"step-{step}.txt"), "w") as f:
        f.write(str(step))
time.sleep(1.5)  # the last checkpoint stays unchanged long enough to count as complete
"""

PATTERN = "- {regex: 'step ([0-9]+) loss ([0-9.]+)', step: 1, values: {loss: 2}}"


def _spec(tmp_path, until, name):
    (tmp_path / "steps.py").write_text(SCRIPT)
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"name: {name}\ncommand: [\"/usr/bin/python3\", \"steps.py\"]\n"
                    f"args: {{until: {until}}}\nworkdir: {tmp_path}\n"
                    f"devices: {{type: cpu, per_node: 1}}\n"
                    f"metrics:\n  patterns:\n    {PATTERN}\n")
    return spec


def _run(run_tc, *args):
    r = run_tc("run", *args)
    assert r.returncode == 0, r.stderr
    return job_id_of(r)


def _tb_steps(folder, tag):
    files = sorted(Path(folder).glob("events.out.tfevents.*"))
    assert len(files) == 1, files
    pts = tfevents_reader.read_file(str(files[0]))["points"]
    return [p["step"] for p in pts if p["tag"] == tag]


def test_resumed_run_lines_up_on_logged_steps(run_tc, home, tmp_path):
    full = _run(run_tc, _spec(tmp_path, 100, "full"))
    part = _run(run_tc, _spec(tmp_path, 50, "part"))
    resumed = _run(run_tc, "--resume", part, _spec(tmp_path, 100, "rest"))
    want = list(range(60, 101, 10))

    # export tb and the supervisor's live files: the same steps
    r = run_tc("export", "tb", resumed, tmp_path / "tb")
    assert r.returncode == 0, r.stderr
    assert _tb_steps(tmp_path / "tb" / "rank-0", "loss") == want
    show = json.loads(run_tc("show", resumed, "--json").stdout)
    live = Path(show["run_dir"]) / "output" / "tensorboard" / "rank-0"
    assert _tb_steps(live, "loss") == want

    # metrics: x in JSON and CSV, STEP in the table
    pts = json.loads(run_tc("metrics", resumed, "--name", "loss", "--format", "json").stdout)
    assert [p["x"] for p in pts] == want
    assert [p["seq"] for p in pts] == [1, 2, 3, 4, 5]  # the position stays there
    table = run_tc("metrics", resumed, "--name", "loss").stdout.splitlines()
    assert table[0].split() == ["METRIC", "RANK", "KIND", "STEP", "LOGGED", "VALUE"]
    assert [int(line.split()[3]) for line in table[1:]] == want
    csv = run_tc("metrics", resumed, "--name", "loss", "--format", "csv").stdout.splitlines()
    assert csv[0].split(",")[-1] == "x" and [int(x.split(",")[-1]) for x in csv[1:]] == want

    # compare: the uninterrupted run's steps 60..100 meet the resumed ones
    c = run_tc("compare", full, resumed, "--metric", "loss", "--json")
    assert c.returncode == 0, c.stdout + c.stderr
    got = json.loads(c.stdout)
    assert got["common"] == 5 and got["only_reference"] == 5 and got["aligned"]
    assert [s["step"] for s in got["steps"] if s["status"] == "ok"] == [str(s) for s in want]


def test_pairs_and_stepless_lines_fall_back_to_seq(run_tc, tmp_path):
    """An (epoch, iteration) pair, whose iteration may start again each
    epoch, and a line whose step is no number keep the rank's count of
    step lines."""
    (tmp_path / "pairs.py").write_text(
        "import json\n"
        "for e in (1, 2):\n"
        "    for i in (5, 10):\n"
        "        print('DLLL ' + json.dumps({'type': 'LOG', 'step': [e, i], 'data': {'l': e + i}}))\n"
        "print('loss 0.5 at end')\n")
    spec = tmp_path / "pairs.yaml"
    spec.write_text(f"name: pairs\ncommand: [\"/usr/bin/python3\", \"pairs.py\"]\nworkdir: {tmp_path}\n"
                    "metrics:\n  patterns:\n    - {regex: '^loss ([0-9.]+) at ([a-z]+)', step: 2, values: {nostep: 1}}\n")
    job = _run(run_tc, spec)
    pts = json.loads(run_tc("metrics", job, "--format", "json").stdout)
    pairs = [(p["step"], p["x"], p["seq"]) for p in pts if p["metric"] == "l"]
    assert pairs == [("[1, 5]", 1, 1), ("[1, 10]", 2, 2), ("[2, 5]", 3, 3), ("[2, 10]", 4, 4)]
    (nostep,) = [p for p in pts if p["metric"] == "nostep"]
    assert nostep["x"] == nostep["seq"]


def test_api_points_are_at_logged_steps(trainctl, run_tc, home, tmp_path):
    """The chart API's x is the logged step; steps logged again (a group
    restarted from an older checkpoint) keep their last value."""
    (tmp_path / "again.py").write_text(
        "for s, l in ((10, 1.0), (20, 0.9), (30, 0.8), (20, 0.2), (30, 0.3), (40, 0.4)):\n"
        "    print(f'step {s} loss {l}', flush=True)\n")
    spec = tmp_path / "again.yaml"
    spec.write_text(f"name: again\ncommand: [\"/usr/bin/python3\", \"again.py\"]\n"
                    f"workdir: {tmp_path}\nmetrics:\n  patterns:\n    {PATTERN}\n")
    job = _run(run_tc, spec)
    srv = start_server(trainctl, home)
    try:
        st, body = srv.call("GET", f"/api/v1/jobs/{job}/metrics/points?name=loss")
        assert st == 200, body
        (series,) = body["series"]
        assert series["x"] == [10, 20, 30, 40] and series["y"] == [1.0, 0.2, 0.3, 0.4]
        st, body = srv.call("GET", f"/api/v1/jobs/{job}/metrics/points?name=loss&xmin=25&xmax=40")
        assert body["series"][0]["x"] == [30, 40]
    finally:
        srv.stop()
