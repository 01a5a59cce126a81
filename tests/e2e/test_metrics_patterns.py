"""test_metrics_patterns.py -- metrics from a plain script's own lines.

A torch-free Python script prints `step N loss X` as a new user's would.
With `metrics.patterns` (the pattern docs/metrics.md gives for that shape)
`trainctl run` stores the points, and `metrics`, `show` and `export tb`
work; without it the supervisor's end and `show` say why there are no
metrics and where the docs are.  A bad regex is exit 2 naming file, line
and key; `metrics --name` with a name the job lacks is exit 2, names the
ones it has and prints no table first.
"""
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tfevents_reader  # noqa: E402

from conftest import REPO, job_id_of  # noqa: E402

SCRIPT = r"""
import os, sys
rank = int(os.environ["RANK"])
print("loading data...", flush=True)
for step in range(1, 6):
    loss = 1.0 / step + rank
    print(f"step {step} loss {loss:.4f}", flush=True)
print("done", file=sys.stderr, flush=True)
"""


def _doc_pattern():
    """The docs/metrics.md pattern for `step 10 loss 0.53`, as written there."""
    text = (REPO / "docs" / "metrics.md").read_text()
    at = text.index("# step 10 loss 0.53")
    return text[at:].splitlines()[1].strip()


def _job(tmp_path, patterns=True, name="plain"):
    (tmp_path / "train.py").write_text(SCRIPT)
    spec = tmp_path / f"{name}.yaml"
    extra = f"metrics:\n  patterns:\n    {_doc_pattern()}\n" if patterns else ""
    spec.write_text(f"name: {name}\ncommand: [\"/usr/bin/python3\", \"train.py\"]\n"
                    f"workdir: {tmp_path}\ndevices: {{type: cpu, per_node: 2}}\n{extra}")
    return spec


def test_plain_script_with_patterns(run_tc, tmp_path):
    r = run_tc("run", _job(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "no line was a metrics line" not in r.stderr
    job = job_id_of(r)
    pts = json.loads(run_tc("metrics", job, "--format", "json").stdout)
    got = [(p["metric"], p["rank"], p["step"], p["iter"], p["seq"], p["value"]) for p in pts]
    assert got == [("loss", rank, str(s), s, s, round(1.0 / s + rank, 4))
                   for rank in (0, 1) for s in range(1, 6)]
    show = run_tc("show", job)
    assert show.returncode == 0, show.stderr
    row = [line.split() for line in show.stdout.splitlines() if line.strip().startswith("loss ")]
    assert row and row[0][:6] == ["loss", "2", "point", "5", "0.2", "0.2"], show.stdout
    assert "none recorded" not in show.stdout
    ex = run_tc("export", "tb", job, tmp_path / "tb")
    assert ex.returncode == 0, ex.stderr
    for rank in (0, 1):
        files = sorted((tmp_path / "tb" / f"rank-{rank}").glob("events.out.tfevents.*"))
        assert len(files) == 1
        out = tfevents_reader.read_file(str(files[0]))
        assert [(p["tag"], p["step"]) for p in out["points"]] == [("loss", s) for s in range(1, 6)]
    # a name the job lacks: exit 2, the closest and the names it has, no table
    bad = run_tc("metrics", job, "--name", "lsos")
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert "no metric 'lsos' (did you mean 'loss'?); it has: loss" in bad.stderr
    bad = run_tc("metrics", job, "--name", "val.accuracy", "--format", "json")
    assert bad.returncode == 2 and bad.stdout == "" and "it has: loss" in bad.stderr


def test_hint_when_no_line_is_a_metrics_line(run_tc, tmp_path):
    r = run_tc("run", _job(tmp_path, patterns=False))
    assert r.returncode == 0, r.stderr
    job = job_id_of(r)
    assert "metrics: no line was a metrics line" in r.stderr
    assert "metrics.patterns" in r.stderr and "docs/metrics.md" in r.stderr
    show = run_tc("show", job).stdout
    line = [x for x in show.splitlines() if x.startswith("metrics:")]
    assert line and "none recorded; no line was a metrics line" in line[0], show
    assert "DLLogger" in line[0] and "docs/metrics.md" in line[0]
    bad = run_tc("metrics", job, "--name", "loss")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "no stored metrics" in bad.stderr
    assert run_tc("export", "tb", job, tmp_path / "tb").returncode == 2


def test_bad_regex_is_exit_2_with_file_line_key(run_tc, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: bad\ncommand: [\"true\"]\nmetrics:\n  patterns:\n"
                    "    - regex: \"^step ([0-9]+ loss\"\n      step: 1\n      values: {loss: 2}\n")
    r = run_tc("run", spec)
    assert r.returncode == 2
    assert re.search(r"bad\.yaml:5: metrics\.patterns\[\]\.regex: '\^step \(\[0-9\]\+ loss' is not a"
                     r" POSIX extended regular expression", r.stderr), r.stderr
    assert json.loads(run_tc("ps", "-a", "--json").stdout or "[]") == []
