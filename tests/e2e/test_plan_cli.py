"""End-to-end tests of `trainctl plan` (docs/plan.md).

The binary is $TRAINCTL, else build/trainctl under the repository root.
Every `sh` example of docs/plan.md is run here as written (its synth makes
100 instances), after writing the files the page shows under a `file:` note.
"""
import itertools
import json
import math
import os
import re
import shlex
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "plan.md")


def binary():
    return os.environ.get("TRAINCTL") or os.path.join(ROOT, "build", "trainctl")


def tc(*args, cwd=None, check=True):
    p = subprocess.run([binary(), *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"trainctl {' '.join(args)} -> {p.returncode}\n{p.stderr}")
    return p


def doc_blocks():
    """(files, commands) of docs/plan.md."""
    text = open(DOC, encoding="utf-8").read()
    files = {}
    for m in re.finditer(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", text, re.S):
        files[m.group(1)] = m.group(2)
    cmds = []
    for m in re.finditer(r"```sh\n(.*?)```", text, re.S):
        cmds += [l for l in m.group(1).splitlines() if l.startswith("trainctl ")]
    return files, cmds


def test_doc_examples_run(tmp_path):
    files, cmds = doc_blocks()
    assert {"small.csv", "toy.yaml", "cluster.yaml"} <= set(files)
    assert len(cmds) >= 8
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    for cmd in cmds:
        line = cmd
        out = None
        if " > " in line:
            line, out = line.split(" > ")
        argv = shlex.split(line)[1:]
        p = tc(*argv, cwd=tmp_path)
        if out:
            (tmp_path / out.strip()).write_text(p.stdout)
    # a reader who pastes the first command gets a small file (issue 29: it wrote 584 MB)
    size = (tmp_path / "val.jsonl").stat().st_size
    assert size < 16 << 20, f"docs/plan.md's first command wrote {size} bytes: give it a small --count"
    # the --against example scored our own partitions: gap 0
    e = json.loads(tc("plan", "eval", "val.jsonl", "--against", "ours.jsonl", "--format", "json",
                      cwd=tmp_path).stdout)
    assert e["instances"] == 100 and e["against"]["mean_gap"] == 0 and e["against"]["optimal"] == 100


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def train_obj(inst, cuts):
    x, c = inst["x"], inst["C"]
    bounds = [0] + [j + 1 for j in cuts] + [len(x)]
    stages = [sum(x[a:b]) for a, b in zip(bounds, bounds[1:])]
    return max(stages) + sum(c[j][k] for k, j in enumerate(cuts))


def brute(inst):
    g, s = len(inst["x"]), inst["num_split"]
    return min(train_obj(inst, list(cuts)) for cuts in itertools.combinations(range(g - 1), s))


def test_synth_reproducible_and_shaped(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    tc("plan", "synth", "--graph-size", "30", "--num-split", "15", "--count", "7", "--seed", "1234", "-o", str(a))
    tc("plan", "synth", "--graph-size", "30", "--num-split", "15", "--count", "7", "--seed", "1234", "-o", str(b))
    tc("plan", "synth", "--graph-size", "30", "--num-split", "15", "--count", "3", "--seed", "1234", "-o", str(c))
    assert a.read_bytes() == b.read_bytes()
    rows = read_jsonl(a)
    assert len(rows) == 7
    assert a.read_text().splitlines()[:3] == c.read_text().splitlines()
    for r in rows:
        assert r["graph_size"] == 30 and r["num_split"] == 15 and len(r["x"]) == 30
        assert len(r["C"]) == 29 and all(len(row) == 15 for row in r["C"])
        assert all(0 <= v < 1 for v in r["x"] + [v for row in r["C"] for v in row])
    other = tc("plan", "synth", "--graph-size", "30", "--num-split", "15", "--count", "7", "--seed", "5").stdout
    assert other != a.read_text()


def test_partition_optimal_and_eval_matches_direct(tmp_path):
    val = tmp_path / "v.jsonl"
    tc("plan", "synth", "--graph-size", "9", "--num-split", "3", "--count", "25", "--seed", "3", "-o", str(val))
    insts = read_jsonl(val)
    parts = [json.loads(l) for l in tc("plan", "partition", str(val)).stdout.splitlines()]
    objs = []
    for i, (inst, p) in enumerate(zip(insts, parts)):
        assert p["instance"] == i
        direct = train_obj(inst, p["cuts"])
        assert math.isclose(p["objective"], direct, rel_tol=1e-12)
        assert math.isclose(direct, brute(inst), rel_tol=1e-12)
        assert sum(p["stages"]) == 9
        objs.append(direct)
    e = json.loads(tc("plan", "eval", str(val), "--format", "json").stdout)
    mean = sum(objs) / len(objs)
    se = math.sqrt(sum((v - mean) ** 2 for v in objs) / (len(objs) - 1)) / math.sqrt(len(objs))
    assert math.isclose(e["mean"], mean, rel_tol=1e-12)
    assert math.isclose(e["stderr"], se, rel_tol=1e-9)
    assert e["ms_per_instance"] > 0
    # someone else's partitions: every cut as far left as it goes
    theirs = tmp_path / "t.jsonl"
    theirs.write_text("".join(json.dumps({"stages": [1, 1, 1, 6]}) + "\n" for _ in insts))
    e = json.loads(tc("plan", "eval", str(val), "--against", str(theirs), "--format", "json").stdout)
    gaps = [(train_obj(i, [0, 1, 2]) - o) / o for i, o in zip(insts, objs)]
    assert math.isclose(e["against"]["mean_gap"], sum(gaps) / len(gaps), rel_tol=1e-9)
    assert math.isclose(e["against"]["max_gap"], max(gaps), rel_tol=1e-9)
    assert e["against"]["optimal"] == sum(1 for g in gaps if g <= 1e-9)
    text = tc("plan", "eval", str(val), "--against", str(theirs)).stdout
    assert "optimality gap" in text and "+-" in text


def test_pipeline_objective(tmp_path):
    val = tmp_path / "v.jsonl"
    val.write_text(json.dumps({"x": [1, 2, 3, 4], "C": [[9, 9], [0.5, 9], [9, 0.25]],
                               "num_split": 2, "micro_batches": 3}) + "\n")
    p = json.loads(tc("plan", "partition", str(val), "--objective", "pipeline").stdout)
    assert p["cuts"] == [1, 2] and p["micro_batches"] == 3
    assert p["objective"] == 2 * 4 + 0.75 + 10
    p = json.loads(tc("plan", "partition", str(val), "--objective", "pipeline", "--micro-batches", "1").stdout)
    assert p["objective"] == 0.75 + 10


@pytest.mark.parametrize("line,needles", [
    ('{"x":[1,2,3],"C":[[1],[1,2]],"num_split":1}', ["instance 1", "'C[1]'"]),
    ('{"x":[1,-2,3],"C":[[1],[1]],"num_split":1}', ["instance 1", "'x[1]'", "negative"]),
    ('{"x":[1,2,3],"C":[[1],[1e999]],"num_split":1}', ["instance 1"]),
    ('{"x":[1,2],"C":[[1]],"num_split":5}', ["instance 1", "'num_split'", "5 cuts"]),
    ('{"x":[1,2,3],"C":[[1],[1]]}', ["instance 1", "'num_split'"]),
])
def test_bad_instances_exit_2(tmp_path, line, needles):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"x":[1,2],"C":[[1]],"num_split":1}\n' + line + "\n")
    for sub in ("partition", "eval"):
        p = tc("plan", sub, str(f), check=False)
        assert p.returncode == 2, p.stderr
        assert "bad.jsonl:2" in p.stderr
        for n in needles:
            assert n in p.stderr


def test_bad_csv_and_usage_exit_2(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("x,C0\n1,inf\n2\n")
    p = tc("plan", "partition", str(f), check=False)
    assert p.returncode == 2 and "C[0][0]" in p.stderr
    for args in (["plan"], ["plan", "frobnicate"], ["plan", "synth", "--graph-size", "5"],
                 ["plan", "synth", "--graph-size", "5", "--num-split", "5"],
                 ["plan", "partition", str(f), "--seed", "3"],
                 ["plan", "partition", str(f), "--micro-batches", "4"],
                 ["plan", "eval", str(tmp_path / "missing.jsonl")],
                 ["plan", "strategy", "--model", "gpt2-small"]):
        p = tc(*args, check=False)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.startswith("trainctl: ") or "usage" in p.stderr


def test_strategy(tmp_path):
    p = tc("plan", "strategy", "--model", "gpt2-medium", "--devices", "16", "--nodes", "2",
           "--global-batch", "32", "--format", "json", "--top", "0")
    st = json.loads(p.stdout)
    cands = st["candidates"]
    assert st["layers"] == 24 and len(cands) == st["enumerated"] - st["rejected_memory"]
    times = [c["step_time"] for c in cands]
    assert times == sorted(times)
    for c in cands:
        assert c["dp"] * c["tp"] * c["pp"] == 16
        assert c["dp"] * c["micro_batch"] * c["micro_batches"] == 32
        assert sum(c["layers"]) == 24 and len(c["layers"]) == c["pp"] == len(c["peak_memory"])
        assert max(c["peak_memory"]) + 2**30 <= 80 * 2**30
    # a tight memory: every returned plan fits, some are rejected
    st = json.loads(tc("plan", "strategy", "--model", "gpt2-large", "--devices", "8", "--global-batch", "16",
                       "--memory", "10GiB", "--format", "json", "--top", "0").stdout)
    assert st["rejected_memory"] > 0
    assert all(max(c["peak_memory"]) + 2**30 <= 10 * 2**30 for c in st["candidates"])
    table = tc("plan", "strategy", "--model", "gpt2-small", "--devices", "4", "--global-batch", "8").stdout
    assert "layers/stage" in table and "peak mem/stage" in table
    p = tc("plan", "strategy", "--model", "gpt3-175b", "--devices", "16", "--nodes", "2",
           "--global-batch", "32", check=False)
    assert p.returncode == 2 and "does not fit" in p.stderr


def test_strategy_json_escapes_the_model_name(tmp_path):
    layers = ('layers:\n  - {name: a, params: 1.0e6, time_ms: {1: 1.0}, output_bytes: 0,'
              ' activation_bytes: 1.0e6}\n')
    # the name from the file, and the file name when the file names none
    named = tmp_path / "named.yaml"
    named.write_text('name: "my \\"toy\\" \\\\ model\\t"\n' + layers)
    bare = tmp_path / 'it\'s "bare".yaml'
    bare.write_text(layers)
    for path, want in ((named, 'my "toy" \\ model\t'), (bare, 'it\'s "bare".yaml')):
        p = tc("plan", "strategy", "--model", str(path), "--devices", "2", "--global-batch", "2",
               "--format", "json")
        assert json.loads(p.stdout)["model"] == want
