"""The documentation stays inside the project and true to the binary.

* Every relative link of every Markdown file resolves to a file of the
  repository (and a heading of it, for `#anchors`); no link leaves it.
* docs/formats.md's examples (each after an `<!-- example: NAME -->` line)
  are fed to trainctl: metric lines through a job, the rank table a job
  writes, npu-smi's table, model.yaml, checkpoint folders, safetensors,
  strategy and plan files, a TensorBoard record.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(Path(__file__).parent))
import tfevents_reader  # noqa: E402

FORMATS = REPO / "docs" / "formats.md"
SKIP_DIRS = {".git", "node_modules", "build", "build-asan"}


def markdown_files():
    out = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        out += [Path(root) / f for f in files if f.endswith(".md")]
    return sorted(out)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    s = re.sub(r"[`*_]{2,}|`", "", heading.strip()).lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    names, seen = set(), {}
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"#{1,6} (.*)", line)
        if m:
            a = slug(m.group(1))
            n = seen.get(a, 0)
            seen[a] = n + 1
            names.add(a if n == 0 else f"{a}-{n}")
    return names


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def links(path):
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code is not a link
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text)


def test_markdown_links_resolve_inside_the_repository():
    files = markdown_files()
    assert REPO / "docs" / "formats.md" in files and len(files) > 10
    bad = []
    for f in files:
        for target in links(f):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, frag = target.partition("#")
            dest = (f.parent / path).resolve() if path else f
            where = f"{f.relative_to(REPO)}: {target}"
            if REPO.resolve() not in dest.parents and dest != REPO.resolve():
                bad.append(f"{where}: outside the repository")
            elif not dest.exists():
                bad.append(f"{where}: no such file")
            elif frag and dest.suffix == ".md" and frag not in anchors(dest):
                bad.append(f"{where}: no heading '#{frag}' in {dest.name}")
    assert not bad, "\n".join(bad)


def test_no_reference_to_files_outside_the_project():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    needles = ["FORMATS" + ".md", "/work/" + "shared", "shared/" + "reference"]
    hits = []
    for name in tracked:
        p = REPO / name
        # fuzz corpora are inputs copied from old files, not documentation
        if ("node_modules" in name or name.startswith("tests/fuzz/corpus/") or not p.is_file()
                or p.stat().st_size > 2_000_000):
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [f"{name}: {n}" for n in needles if n in text]
    assert not hits, hits


def test_readme_links_the_format_reference():
    assert "(docs/formats.md)" in (REPO / "README.md").read_text()


# ---- the examples of docs/formats.md ----

def example(name):
    text = FORMATS.read_text(encoding="utf-8")
    m = re.search(r"<!-- example: " + re.escape(name) + r" -->\n *```\w*\n(.*?)\n *```", text, re.S)
    assert m, f"docs/formats.md lost its example '{name}'"
    return textwrap.dedent(m.group(1)) + "\n"


def test_formats_examples_are_all_used():
    names = re.findall(r"^ *<!-- example: (\S+) -->$", FORMATS.read_text(), re.M)
    used = {"spec", "metric-lines", "hccn.conf", "hccl-single", "npu-smi", "model.yaml",
            "tfevents-record", "meta-rank0", "ckpt-tree", "safetensors", "strategy",
            "plan-instance", "plan-csv", "plan-partitions", "plan-model", "plan-cluster"}
    assert sorted(names) == sorted(used)


def job_dir(home):
    runs = sorted((home / "runs").iterdir())
    return runs[-1]


def test_spec_example_runs(run_tc, tmp_path):
    (tmp_path / "job.yaml").write_text(example("spec"))
    p = run_tc("run", "job.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "rank 1 of 2" in p.stdout, p.stdout


def metric_points(run_tc, job):
    p = run_tc("metrics", job, "--format", "json")
    assert p.returncode == 0, p.stderr
    pts = {}
    for pt in json.loads(p.stdout):
        pts.setdefault(pt["metric"], []).append(pt)
    return pts


def test_metric_line_examples_parse(run_tc, home, tmp_path):
    (tmp_path / "lines.txt").write_text(example("metric-lines"))
    (tmp_path / "job.yaml").write_text('name: formats-lines\ncommand: ["/bin/cat", "lines.txt"]\n')
    p = run_tc("run", "-q", "job.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    show = json.loads(run_tc("show", "--json", "formats-lines").stdout)
    assert show["metrics"]["malformed"] == 0, show["metrics"]
    pts = metric_points(run_tc, "formats-lines")

    def one(metric, kind, **want):
        got = [p for p in pts[metric] if p["kind"] == kind and all(p[k] == v for k, v in want.items())]
        assert len(got) == 1, (metric, kind, want, pts.get(metric))
        return got[0]

    # DLLL
    one("train.loss", "point", epoch=1, iter=40, value=1.874)
    one("train.ips", "point", epoch=1, iter=40, value=1630.5)
    one("val.top1", "epoch", epoch=1, value=61.2)
    one("train.ips", "summary", value=1598.0)
    # DLL
    one("train.loss", "point", epoch=1, iter=41, value=1.8602)
    one("val.loss", "epoch", epoch=1, value=1.72)
    # TCAPPDLL, JSON and plain: rank 1
    one("tcap.loss", "point", rank=1, epoch=2, iter=150, value=0.987)
    one("tcap.ips", "point", rank=1, epoch=2, iter=151, value=390.2)
    # MindFormers
    one("loss", "point", epoch=3, iter=42, value=1.203)
    one("per_step_time", "point", value=245)
    one("overflow_cond", "point", value=0)
    summary = {(m["name"], m["rank"]): m for m in show["metrics"]["metrics"]}
    assert summary[("val.top1", 0)]["goal"] == "maximize"
    assert summary[("val.top1", 0)]["unit"] == "%"
    params = {p["name"]: p["value"] for p in show["metrics"]["params"]}
    assert params["arch"] == "vit-small" and params["batch_size"] == "128" and "lr" in params, params


def test_rank_table_example_is_what_a_job_writes(run_tc, home, tmp_path):
    (tmp_path / "hccn.conf").write_text(example("hccn.conf"))
    (tmp_path / "job.yaml").write_text(
        'name: formats-npu\ncommand: ["/bin/true"]\n'
        'devices: {type: npu, ids: [0, 1], hccn_conf: hccn.conf}\n')
    p = run_tc("run", "-q", "job.yaml", cwd=tmp_path, env={"TRAINCTL_FAKE_DEVICES": "npu:2"})
    assert p.returncode == 0, p.stderr
    written = json.loads((job_dir(home) / "hccl.json").read_text())
    doc = json.loads(example("hccl-single"))
    doc["server_list"][0]["server_id"] = written["server_list"][0]["server_id"]
    assert written == doc


def test_report_example_has_the_fields_of_a_real_report(run_tc, home, tmp_path):
    text = FORMATS.read_text()
    m = re.search(r"### report\.json\n.*?```json\n(.*?)```", text, re.S)
    doc = json.loads(m.group(1))
    (tmp_path / "job.yaml").write_text('name: formats-report\ncommand: ["/bin/true"]\n')
    assert run_tc("run", "-q", "job.yaml", cwd=tmp_path).returncode == 0
    real = json.loads((job_dir(home) / "report.json").read_text())
    assert set(doc) == set(real)
    for k in ("throughput", "accuracy", "devices"):
        assert set(doc[k]) == set(real[k]), k
    assert set(doc["phases"]) == set(real["phases"])
    assert set(doc["phases"]["training"]) == set(real["phases"]["training"])
    tel = re.search(r"### telemetry\.json\n.*?```json\n(.*?)```", text, re.S)
    assert set(json.loads(tel.group(1))) == set(json.loads((job_dir(home) / "telemetry.json").read_text()))


def test_npu_smi_example_parses(run_tc, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "table.txt").write_text(example("npu-smi"))
    (bin_dir / "npu-smi").write_text(f"#!/bin/sh\ncat {shlex.quote(str(bin_dir / 'table.txt'))}\n")
    (bin_dir / "npu-smi").chmod(0o755)
    p = run_tc("devices", "--json", env={"PATH": f"{bin_dir}:{os.environ['PATH']}",
                                         "TRAINCTL_FAKE_DEVICES": None})
    assert p.returncode == 0, p.stderr
    npus = [d for d in json.loads(p.stdout) if d["type"] == "npu"]
    assert len(npus) == 1, p.stdout
    d = npus[0]
    assert (d["id"], d["name"], d["utilization"]) == (2, "910B4", 61)
    assert d["power_w"] == 88.2 and d["temperature_c"] == 47
    assert (d["memory_used"], d["memory_total"]) == (20480 << 20, 32768 << 20)


def test_model_yaml_example_is_a_valid_case_file(run_tc, tmp_path):
    (tmp_path / "model.yaml").write_text(example("model.yaml"))
    (tmp_path / "PyTorch" / "Classification" / "ViTSmall").mkdir(parents=True)
    p = run_tc("zoo", "test", "model.yaml", cwd=tmp_path)
    # validated (2 would be a bad file); the case then fails its folder check
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "vitsmall_sdaa_ddp" in p.stdout and "FAIL" in p.stdout, p.stdout


def test_tfevents_record_example_decodes():
    raw = bytes.fromhex(example("tfevents-record").replace("\n", " "))
    recs = list(tfevents_reader.read_records(raw))
    assert len(recs) == 1
    ev = tfevents_reader.parse_event(recs[0])
    assert ev["wall_time"] == 1718000000.5 and ev["step"] == 150
    (tag, value), = ev["values"]
    assert tag == "train.loss" and abs(value - 0.987) < 1e-6


def test_checkpoint_folder_example_lists(run_tc, tmp_path):
    ck = tmp_path / "ck"
    meta0 = json.loads(example("meta-rank0"))
    text = FORMATS.read_text()
    meta1 = json.loads(re.search(r"with rank 1's `meta.json` at `(\{.*?\})`", text, re.S)
                       .group(1).replace("\n", " "))
    for rel in example("ckpt-tree").split():
        p = ck / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(meta0 if rel.startswith("rank_0") else meta1)
                     if rel.endswith("meta.json") else "weights")
    old = time.time() - 10
    for f in ck.rglob("*"):
        os.utime(f, (old, old))
    p = run_tc("ckpt", "list", ck)
    assert p.returncode == 0, p.stderr
    rows = {l.split()[0]: l.split() for l in p.stdout.splitlines()[1:] if l[:1].isdigit()}
    assert rows["600"][1:4] == ["3", "mindformers", "complete"], p.stdout
    assert rows["800"][1:4] == ["4", "mindformers", "partial"], p.stdout
    assert "every rank has reached epoch 3, step 600" in p.stdout


def test_safetensors_and_strategy_examples(run_tc, tmp_path):
    src = tmp_path / "src" / "rank_0"
    src.mkdir(parents=True)
    subprocess.run([sys.executable, "-c", example("safetensors")], cwd=src, check=True)
    p = run_tc("ckpt", "inspect", "--json", src / "tiny.safetensors")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert {t["name"]: t["shape"] for t in info["tensors"]} == {"embed.weight": [4, 2], "step": [1]}
    (tmp_path / "one.json").write_text('{"world": 1}')
    (tmp_path / "two.json").write_text(example("strategy"))
    p = run_tc("ckpt", "transform", "--src", tmp_path / "src", "--src-strategy", tmp_path / "one.json",
               "--dst", tmp_path / "dst", "--dst-strategy", tmp_path / "two.json")
    assert p.returncode == 0, p.stderr
    for r in range(2):
        info = json.loads(run_tc("ckpt", "inspect", "--json",
                                 tmp_path / "dst" / f"rank_{r}" / "model.safetensors").stdout)
        assert {t["name"]: t["shape"] for t in info["tensors"]} == {"embed.weight": [2, 2], "step": [1]}


def test_plan_examples(run_tc, tmp_path):
    (tmp_path / "one.jsonl").write_text(example("plan-instance"))
    (tmp_path / "one.csv").write_text(example("plan-csv"))
    want = example("plan-partitions")
    for f in ("one.jsonl", "one.csv"):
        p = run_tc("plan", "partition", f, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert p.stdout == want, (f, p.stdout)
    (tmp_path / "tiny.yaml").write_text(example("plan-model"))
    (tmp_path / "cluster.yaml").write_text(example("plan-cluster"))
    p = run_tc("plan", "strategy", "--model", "tiny.yaml", "--cluster", "cluster.yaml",
               "--global-batch", "16", "--format", "json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    st = json.loads(p.stdout)
    assert st["model"] == "tiny-lm" and st["layers"] == 6 and st["devices"] == 8
    assert st["device_memory"] == 32 << 30 and st["candidates"]
