"""test_metrics.py -- metrics end to end: the digits example on 2 ranks read
live by `trainctl run`, stored, summarised by `show`, listed by `metrics`,
written as TensorBoard files live and by `export tb`; plus the edges
(malformed lines, --no-metrics, followed files, batch-size throughput,
spec errors).

One digits run (module fixture, spec taken from docs/metrics.md) serves the
tests that need real training; the rest use small shell workers.
"""
import json
import math
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DIGITS, REPO, trainctl_path, job_id_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tfevents_reader  # noqa: E402

DOC = REPO / "docs" / "metrics.md"


def _tc(home, *args, timeout=180, check=True):
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    r = subprocess.run([str(trainctl_path())] + [str(a) for a in args], env=env, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"trainctl {' '.join(map(str, args))} -> {r.returncode}\n"
                             f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}")
    return r


def _doc_block(title):
    """The first ```yaml block after the heading `title` in docs/metrics.md."""
    text = DOC.read_text()
    at = text.index(title)
    m = re.search(r"```yaml\n(.*?)```", text[at:], re.S)
    return m.group(1)


def _points(home, job, *args):
    return json.loads(_tc(home, "metrics", job, "--format", "json", *args).stdout)


def _num(v):
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(v, v)


@pytest.fixture(scope="module")
def digits(tmp_path_factory, torch_available):
    """The docs' digits spec, run once on 2 ranks: (home, job id, show --json)."""
    d = tmp_path_factory.mktemp("digits")
    home = d / "home"
    spec = d / "job.yaml"
    spec.write_text(_doc_block("## Job spec: metrics") + f"workdir: {DIGITS}\n")
    r = _tc(home, "run", "-q", spec, timeout=300)
    job = job_id_of(r)
    show = json.loads(_tc(home, "show", "--json", job).stdout)
    return home, job, show


def _log_records(run_dir, rank):
    """Step records of a rank, read back from its log with json (independently)."""
    out = []
    for line in (Path(run_dir) / "logs" / f"rank-{rank}.log").read_text().splitlines():
        if line.startswith("DLLL "):
            rec = json.loads(line[5:])
            if rec.get("type") == "LOG" and isinstance(rec["step"], list) and len(rec["step"]) == 2:
                out.append(rec)
    return out


def test_both_ranks_loss_and_ips_stored_with_steps(digits):
    home, job, show = digits
    assert show["state"] == "succeeded"
    for name in ("train.loss", "train.ips"):
        pts = [p for p in _points(home, job, "--name", name) if p["kind"] == "point"]
        for rank in (0, 1):
            mine = [p for p in pts if p["rank"] == rank]
            logged = _log_records(show["run_dir"], rank)
            assert len(mine) == len(logged) > 10
            for p, rec in zip(mine, logged):
                assert p["step"] == json.dumps(rec["step"])
                assert [p["epoch"], p["iter"]] == rec["step"]
                assert p["value"] == rec["data"][name]
                assert p["wall_time"] == float(rec["timestamp"])
            assert [p["seq"] for p in mine] == list(range(1, len(mine) + 1))


def test_summary_throughput_equals_stored_points(digits):
    home, job, show = digits
    m = show["metrics"]
    warm = m["warmup_steps"]
    assert warm == 2
    pts = [p for p in _points(home, job, "--name", "train.ips") if p["kind"] == "point"]
    per_rank = {}
    for rank in (0, 1):
        vals = [p["value"] for p in pts if p["rank"] == rank][warm:]
        per_rank[rank] = sum(vals) / len(vals)
    expect = per_rank[0] + per_rank[1]
    assert m["throughput"] == pytest.approx(expect, rel=1e-12)
    ranks = {r["rank"]: r for r in m["ranks"]}
    for rank in (0, 1):
        assert ranks[rank]["method"] == "ips" and ranks[rank]["source"] == "train.ips"
        assert ranks[rank]["throughput"] == pytest.approx(per_rank[rank], rel=1e-12)
        assert ranks[rank]["malformed"] == 0
    assert m["duration"] > 0


def test_summary_last_best_accuracy(digits):
    home, job, show = digits
    m = show["metrics"]
    rows = {(x["name"], x["rank"]): x for x in m["metrics"]}
    loss = rows[("train.loss", 0)]
    pts = [p["value"] for p in _points(home, job, "--name", "train.loss", "--rank", "0")
           if p["kind"] == "point"]
    assert loss["kind"] == "point" and loss["goal"] == "minimize"
    assert loss["last"] == pts[-1] and loss["best"] == min(pts) and loss["count"] == len(pts)
    acc = rows[("val.accuracy", 0)]
    accs = [p["value"] for p in _points(home, job, "--name", "val.accuracy", "--rank", "0")
            if p["kind"] == "epoch"]
    assert acc["kind"] == "epoch" and acc["goal"] == "maximize" and acc["best"] == max(accs)
    summary = [p["value"] for p in _points(home, job, "--name", "val.accuracy", "--rank", "0")
               if p["kind"] == "summary"]
    assert m["accuracy_metric"] == "val.accuracy" and m["accuracy"] == summary[-1] > 0.8
    params = {(p["rank"], p["name"]): p["value"] for p in m["params"]}
    assert params[(0, "world_size")] == "2" and params[(1, "dataset")] == "sklearn-digits"
    text = _tc(home, "show", job).stdout
    for word in ("train.loss", "train.ips", "val.accuracy", "throughput", "samples/s",
                 "duration", "accuracy", "malformed  0 lines"):
        assert word in text, text


def test_points_downsampled_keep_min_and_max(digits):
    home, job, _ = digits
    full = [p for p in _points(home, job, "--name", "train.loss", "--rank", "0")
            if p["kind"] == "point"]
    few = [p for p in _points(home, job, "--name", "train.loss", "--rank", "0", "--points", "8")
           if p["kind"] == "point"]
    assert len(few) <= 8 < len(full)
    vals = [p["value"] for p in few]
    assert min(vals) == min(p["value"] for p in full)
    assert max(vals) == max(p["value"] for p in full)
    assert [p["seq"] for p in few] == sorted(p["seq"] for p in few)
    csv = _tc(home, "metrics", job, "--name", "train.ips", "--format", "csv").stdout.splitlines()
    assert csv[0] == "metric,rank,kind,seq,epoch,iter,step,value,wall_time,x"
    assert csv[1].startswith('train.ips,0,point,1,1,5,"[1, 5]",')
    table = _tc(home, "metrics", job, "--name", "train.ips", "--rank", "1").stdout.splitlines()
    assert table[0].split() == ["METRIC", "RANK", "KIND", "STEP", "LOGGED", "VALUE"]
    assert all(line.split()[1] == "1" for line in table[1:])
    r = _tc(home, "metrics", job, "--name", "no.such", check=False)
    assert r.returncode == 2 and "no metric 'no.such'" in r.stderr


def _tb_points(folder):
    files = sorted(Path(folder).glob("events.out.tfevents.*"))
    assert len(files) == 1, files
    out = tfevents_reader.read_file(str(files[0]))
    return sorted((p["tag"], p["step"], str(p["value"]), p["wall_time"]) for p in out["points"])


def test_tensorboard_live_equals_export_and_store(digits, tmp_path):
    home, job, show = digits
    live = Path(show["run_dir"]) / "output" / "tensorboard"
    r = _tc(home, "export", "tb", job, tmp_path / "tb")
    assert "2 event files" in r.stdout
    for rank in (0, 1):
        a = _tb_points(live / f"rank-{rank}")
        b = _tb_points(tmp_path / "tb" / f"rank-{rank}")
        assert a == b and len(a) > 20
        stored = [p for p in _points(home, job, "--name", "train.loss", "--rank", str(rank))
                  if p["kind"] == "point"]
        tb = [x for x in a if x[0] == "train.loss"]
        f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]  # noqa: E731
        assert [(x[1], float(x[2])) for x in tb] == [(p["seq"], f32(p["value"])) for p in stored]
        assert any(x[0] == "epoch/val.accuracy" for x in a)
    # a flipped byte in an exported file is caught by the CRC
    f = next((tmp_path / "tb" / "rank-0").glob("events.out.tfevents.*"))
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x40
    f.write_bytes(bytes(data))
    with pytest.raises(tfevents_reader.CorruptRecord):
        tfevents_reader.read_file(str(f))


def _shell_job(tmp_path, body, extra="", name="sh"):
    spec = tmp_path / f"{name}.yaml"
    script = tmp_path / f"{name}.sh"
    script.write_text(body)
    spec.write_text(f"name: {name}\ncommand: [\"/bin/sh\", \"{script}\"]\nworkdir: {tmp_path}\n"
                    f"devices: {{type: cpu, per_node: 2}}\n{extra}")
    return spec


LINES = r"""
echo 'DLLL {"timestamp": "1700000001.0", "type": "LOG", "step": [0, 1], "data": {"train.loss": 2.5}}'
echo 'DLLL {"timestamp": "1700000002.0", "type": "LOG", "step": [0, 2], "data": {"train.loss": 2.0'
echo 'plain output line'
echo 'DLLL not json at all' >&2
echo 'DLLL {"timestamp": "1700000003.0", "type": "LOG", "step": [0, 3], "data": {"train.loss": 1.5}}'
"""


def test_malformed_lines_counted_and_kept(run_tc, tmp_path):
    spec = _shell_job(tmp_path, LINES)
    r = run_tc("run", "-q", spec)
    assert r.returncode == 0, r.stderr
    job = job_id_of(r)
    show = json.loads(run_tc("show", "--json", job).stdout)
    m = show["metrics"]
    assert m["malformed"] == 4
    assert [(x["rank"], x["malformed"], x["lines"]) for x in m["ranks"]] == [(0, 2, 2), (1, 2, 2)]
    pts = json.loads(run_tc("metrics", job, "--format", "json").stdout)
    assert [(p["rank"], p["value"]) for p in pts] == [(0, 2.5), (0, 1.5), (1, 2.5), (1, 1.5)]
    log = (Path(show["run_dir"]) / "logs" / "rank-0.log").read_text()
    assert "DLLL not json at all" in log and '"train.loss": 2.0\n' in log
    assert "malformed  4 lines" in run_tc("show", job).stdout


def test_no_metrics_flag(run_tc, tmp_path):
    spec = _shell_job(tmp_path, LINES)
    r = run_tc("run", "-q", "--no-metrics", spec)
    assert r.returncode == 0, r.stderr
    job = job_id_of(r)
    m = json.loads(run_tc("show", "--json", job).stdout)["metrics"]
    assert m["metrics"] == [] and m["ranks"] == [] and m["throughput"] is None
    assert json.loads(run_tc("metrics", job, "--format", "json").stdout) == []
    r = run_tc("export", "tb", job, tmp_path / "tb")
    assert r.returncode == 2 and "no stored metrics" in r.stderr
    run_dir = json.loads(run_tc("show", "--json", job).stdout)["run_dir"]
    assert not list((Path(run_dir) / "output" / "tensorboard").iterdir())


def test_followed_file_and_format_filter(run_tc, tmp_path):
    (tmp_path / "dll.json").write_text(
        'DLLL {"type": "LOG", "step": [0, 1], "data": {"old.metric": 1}}\n')
    body = r"""
if [ "$RANK" = 0 ]; then
  echo 'DLLL {"timestamp": "1700000005.0", "type": "LOG", "step": [1, 7], "data": {"file.loss": 0.5}}' >> dll.json
  printf 'DLLL {"timestamp": "1700000006.0", "type": "LOG", "step": [1, 8], "data": {"file.loss": 0.25}}' >> dll.json
fi
echo 'TCAPPDLL {"timestamp": "1.0", "type": "LOG", "step": [0, 1], "data": "{\"rank\": \"0\", \"tcap.loss\": \"1.0\"}"}'
echo '{ Epoch:[  1/  2], step:[    5/  100], loss: 2.345, per_step_time: 120ms, lr: 1e-05'
"""
    spec = _shell_job(tmp_path, body, "metrics: {format: dllogger, files: [dll.json]}\n")
    r = run_tc("run", "-q", spec)
    assert r.returncode == 0, r.stderr
    job = job_id_of(r)
    pts = json.loads(run_tc("metrics", job, "--format", "json").stdout)
    # the line that was in the file before the job is not this job's; the
    # last line, written without a newline, is read at the end; tcap and
    # MindFormers lines are not kept under format: dllogger
    assert [(p["metric"], p["rank"], p["step"], p["value"]) for p in pts] == [
        ("file.loss", 0, "[1, 7]", 0.5), ("file.loss", 0, "[1, 8]", 0.25)]


def test_throughput_from_step_time_with_batch_size(run_tc, tmp_path):
    body = r"""
for s in 1 2 3 4; do
  echo "{ Epoch:[  1/  1], step:[    $s/    4], loss: 2.$s, per_step_time: $((100 * s))ms, lr: 1e-05"
done
"""
    spec = _shell_job(tmp_path, body, "metrics: {format: mindformers, batch_size: 8, warmup_steps: 1}\n")
    r = run_tc("run", "-q", spec)
    assert r.returncode == 0, r.stderr
    m = json.loads(run_tc("show", "--json", job_id_of(r)).stdout)["metrics"]
    per = 8 * 1000 / ((200 + 300 + 400) / 3)  # warm-up step left out
    assert [(x["rank"], x["method"]) for x in m["ranks"]] == [(0, "step_time"), (1, "step_time")]
    assert m["throughput"] == pytest.approx(2 * per, rel=1e-12)


@pytest.mark.parametrize("line,msg", [
    ("metrics: {format: csv}", "metrics.format: 'csv' is not one of"),
    ("metrics: {warmup_steps: -1}", "metrics.warmup_steps: must be between 0"),
    ("metrics: {batch_size: 0}", "metrics.batch_size: must be between 1"),
    ("metrics: {files: dll.json}", "metrics.files: must be a list"),
    ("metrics: {warmup_step: 1}", "did you mean 'metrics.warmup_steps'"),
])
def test_spec_errors(run_tc, tmp_path, line, msg):
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"command: [\"true\"]\n{line}\n")
    r = run_tc("run", spec)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
