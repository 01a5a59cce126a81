"""test_zoo.py -- `trainctl zoo`: the example model folder passes `check` and
its model.yaml case passes `test` (a real 2-worker DDP run, supervised as a
job with logs, metrics per rank and a report); copies broken on purpose (a
missing file, a missing argument, a run that crashes, a run that prints no
metrics) fail with the right reason; the JUnit XML parses; a malformed
model.yaml is rejected up front; `zoo new` writes a skeleton that passes
check and test, and whose run_scripts are the example's."""
import filecmp
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import PYTHON, REPO, trainctl_path

ZOO = REPO / "examples" / "zoo"
EXAMPLE = ZOO / "PyTorch" / "Classification" / "DigitsMLP"


def _tc(home, *args, timeout=600, cwd=None):
    env = dict(os.environ, TRAINCTL_HOME=str(home), TRAINCTL_PYTHON=PYTHON)
    return subprocess.run([str(trainctl_path())] + [str(a) for a in args], env=env, cwd=cwd,
                          timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def test_templates_c_is_up_to_date():
    r = subprocess.run([PYTHON, str(REPO / "scripts" / "zoo_templates.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_example_passes_check(tmp_path):
    r = _tc(tmp_path, "zoo", "check", EXAMPLE)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == f"{EXAMPLE}: conforms"


def test_new_skeleton_conforms_and_matches_the_example(tmp_path):
    r = _tc(tmp_path, "zoo", "new", "DigitsMLP", tmp_path)
    assert r.returncode == 0, r.stderr
    made = tmp_path / "DigitsMLP"
    assert _tc(tmp_path, "zoo", "check", made).returncode == 0
    # the example's run scripts are exactly what `zoo new` writes
    names = sorted(p.name for p in (EXAMPLE / "run_scripts").iterdir() if p.is_file())
    assert names == sorted(p.name for p in (made / "run_scripts").iterdir())
    match, mismatch, errors = filecmp.cmpfiles(EXAMPLE / "run_scripts", made / "run_scripts",
                                               names, shallow=False)
    assert not mismatch and not errors
    assert os.access(made / "run_scripts" / "run_digitsmlp.py", os.X_OK)
    r = _tc(tmp_path, "zoo", "new", "DigitsMLP", tmp_path)
    assert r.returncode == 2 and "already exists" in r.stderr
    assert _tc(tmp_path, "zoo", "new", "bad/name", tmp_path).returncode == 2


def test_check_lists_every_problem_at_once(tmp_path):
    bad = tmp_path / "Bad"
    shutil.copytree(EXAMPLE, bad)
    (bad / "README.md").unlink()
    (bad / "run_scripts" / "formate_cmd.py").write_text("def print_cmd(*a, **k):\n    pass\n")
    arg = bad / "run_scripts" / "argument.py"
    text = arg.read_text()
    for opt in ("--lr", "--autocast"):
        text = re.sub(rf'    p.add_argument\("{opt}".*\n', "", text)
    arg.write_text(text)
    (bad / "requirements.txt").unlink()
    r = _tc(tmp_path, "zoo", "check", bad)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [x.strip() for x in r.stdout.splitlines()[1:]]
    assert lines == ["- missing file requirements.txt", "- missing file README.md",
                     "- run_scripts/run_digitsmlp.py: missing argument --lr",
                     "- run_scripts/run_digitsmlp.py: missing argument --autocast"]
    shutil.rmtree(bad / "run_scripts")
    r = _tc(tmp_path, "zoo", "check", bad)
    assert r.returncode == 1 and "- missing folder run_scripts/" in r.stdout
    assert _tc(tmp_path, "zoo", "check", tmp_path / "nope").returncode == 2


CASE = """- case_name: {name}
  desc: {{run_dir: {run_dir}, run_file: {run_file}}}
  params: {{nnodes: 1, nproc_per_node: {n}, model_name: {model}, batch_size: 16,
           dataset_path: none, step: 4, epoch: 1, lr: 0.05, device: cpu,
           autocast: false, others: {{seed: 7}}}}
"""


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory, torch_available):
    """One `zoo test` over the example and four broken copies of a skeleton."""
    root = tmp_path_factory.mktemp("zoo")
    home = root / "home"
    shutil.copytree(EXAMPLE, root / "DigitsMLP")
    assert _tc(home, "zoo", "new", "Toy", root / "base").returncode == 0
    base = root / "base" / "Toy"

    def copy(name, edit):
        d = root / name
        shutil.copytree(base, d)
        edit(d)
        return name

    def crash(d):
        t = d / "train.py"
        t.write_text(t.read_text().replace("    args, _ = p.parse_known_args()\n",
                                           "    args, _ = p.parse_known_args()\n    raise SystemExit(3)\n"))

    def silent(d):
        t = d / "train.py"
        t.write_text(t.read_text().replace('sys.stdout.write("TCAPPDLL " + ',
                                           'sys.stdout.write("step " + '))

    def no_arg(d):
        a = d / "run_scripts" / "argument.py"
        a.write_text(re.sub(r'    p.add_argument\("--lr".*\n', "", a.read_text()))

    cases = [("example", "DigitsMLP", "run_scripts/run_digitsmlp.py", 2, "digitsmlp"),
             ("missing_file", copy("NoReadme", lambda d: (d / "README.md").unlink()),
              "run_scripts/run_toy.py", 1, "toy"),
             ("missing_arg", copy("NoLr", no_arg), "run_scripts/run_toy.py", 1, "toy"),
             ("crash", copy("Crash", crash), "run_scripts/run_toy.py", 2, "toy"),
             ("no_metrics", copy("Silent", silent), "run_scripts/run_toy.py", 1, "toy"),
             ("skeleton", "base/Toy", "run_scripts/run_toy.py", 2, "toy")]
    yaml = root / "model.yaml"
    yaml.write_text("".join(CASE.format(name=a, run_dir=b, run_file=c, n=n, model=m)
                            for a, b, c, n, m in cases))
    junit = root / "out.xml"
    r = _tc(home, "zoo", "test", yaml, "--junit", junit)
    return home, r, junit


def _row(r, name):
    return next(line for line in r.stdout.splitlines() if line.startswith(name + " "))


def test_zoo_test_verdicts(zoo_run):
    home, r, _ = zoo_run
    assert r.returncode == 1, r.stdout + r.stderr
    assert "PASS" in _row(r, "example") and "PASS" in _row(r, "skeleton")
    assert "FAIL" in _row(r, "missing_file") and "structure: missing file README.md" in _row(r, "missing_file")
    assert "structure: run_scripts/run_toy.py: missing argument --lr" in _row(r, "missing_arg")
    assert "run failed: rank 0 exited with code 3" in _row(r, "crash")
    assert "no train.loss or train.ips in the logs" in _row(r, "no_metrics")
    assert r.stdout.strip().endswith("2 passed, 4 failed")


def test_example_case_is_a_job_with_ranks_and_report(zoo_run):
    home, r, _ = zoo_run
    job = _row(r, "example").split()[3]
    show = json.loads(_tc(home, "show", "--json", job).stdout)
    assert show["state"] == "succeeded" and show["name"] == "example"
    argv = show["spec"]["command"]
    assert argv[1:3] == ["run_scripts/run_digitsmlp.py", "--nnodes"]
    assert "--seed" in argv and argv[argv.index("--seed") + 1] == "7"
    ranks = {m["rank"] for m in show["metrics"]["metrics"] if m["name"] == "train.loss"}
    assert ranks == {0, 1}  # the rank key of the tcap lines, from 2 DDP workers
    loss = [m for m in show["metrics"]["metrics"] if m["name"] == "train.loss" and m["rank"] == 1][0]
    assert loss["count"] == 4
    rep = json.loads((Path(show["run_dir"]) / "report.json").read_text())
    assert rep["ranksize"] == 2 and len(rep["throughput"]["per_rank"]) == 2
    log = (Path(show["run_dir"]) / "logs" / "rank-0.log").read_text()
    assert "command (2 workers x 1 node): " in log


def test_junit_xml_parses(zoo_run):
    _, r, junit = zoo_run
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "6" and root.get("failures") == "4"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {"example", "missing_file", "missing_arg", "crash", "no_metrics", "skeleton"}
    assert cases["example"].find("failure") is None
    f = cases["crash"].find("failure")
    assert f.get("message").startswith("run failed: rank 0 exited with code 3")
    assert "last" in f.text  # the root cause with the log tail
    assert "missing argument --lr" in cases["missing_arg"].find("failure").text
    assert float(cases["example"].get("time")) > 0


def test_malformed_model_yaml_rejected_up_front(tmp_path):
    home = tmp_path / "home"
    y = tmp_path / "model.yaml"
    y.write_text(
        "- case_name: a\n"
        "  desc: {run_dir: ../elsewhere, run_file: run_scripts/run_a.py}\n"
        "  params: {nproc_per_node: 1, model_name: a, batch_size: big, dataset_path: x,\n"
        "           step: 1, epoch: 1, device: cpu, autocast: maybe}\n"
        "- case_name: b\n"
        "  desc: {run_dir: B, run_file: /abs/run.py}\n"
        "  params: {nproc_per_node: [1], model_name: b, batch_size: 1, dataset_path: x,\n"
        "           step: 1, epoch: 1, lr: 0.1, device: cpu, autocast: true, nnodes: 2}\n"
        "- case_name: a\n"
        "  desc: {run_dir: A, run_file: r.py}\n"
        "  params: {nproc_per_node: 1, model_name: a, batch_size: 1, dataset_path: x,\n"
        "           step: 1, epoch: 1, lr: 0.1, device: cpu, autocast: true, others: [1]}\n")
    r = _tc(home, "zoo", "test", y)
    assert r.returncode == 2, r.stdout + r.stderr
    msg = r.stderr
    for want in ("model.yaml:2: case 'a': desc.run_dir: '../elsewhere' is outside the root",
                 "case 'a': params.lr: is required",
                 "model.yaml:3: case 'a': params.batch_size: expected an integer >= 1, not 'big'",
                 "case 'a': params.autocast: expected true or false, not 'maybe'",
                 "case 'b': desc.run_file: '/abs/run.py' is outside run_dir",
                 "case 'b': params.nproc_per_node: expected a single value",
                 "case 'b': params.nnodes: 2 nodes",
                 "case 'a': case_name: repeats the case of line 1",
                 "case 'a': params.others: expected a mapping"):
        assert want in msg, msg
    assert r.stdout == ""
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
    y.write_text("case_name: x\n")
    r = _tc(home, "zoo", "test", y)
    assert r.returncode == 2 and "expected a list of cases" in r.stderr
    assert _tc(home, "zoo", "test", tmp_path / "missing.yaml").returncode == 2
