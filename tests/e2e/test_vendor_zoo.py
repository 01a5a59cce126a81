"""test_vendor_zoo.py -- `trainctl zoo` on model folders as real repositories
have them (docs/zoo.md):

* `zoo test` passes model.yaml's `nnodes:` in the spelling the run file's
  --help lists, so a run file that defines only --nnode (which `zoo check`
  accepts) runs instead of failing on an unknown --nnodes;
* `zoo check` names the near-misses of a missing README.md (readme.md,
  " README.md", REAMDE.md).

The model folder is a small one written here: argparse run file, records
printed as tcap_dllogger does, no torch.
"""
import os
import subprocess

from conftest import PYTHON, trainctl_path

ARGS = ("model_name", "batch_size", "epoch", "step", "dataset_path", "lr", "device", "autocast",
        "nproc_per_node", "node_rank", "master_addr", "master_port")

RUN_FILE = '''import argparse, sys
p = argparse.ArgumentParser()
for a in {args!r}:
    p.add_argument("--" + a)
p.add_argument("{nnode_flag}", type=int, default=1)
args = p.parse_args()  # strict, as many run files are: an unknown option is an error
for i in range(1, 3):
    print("TCAPPDLL 2025-05-15 10:00:0%d.000 - Epoch: 0 Iteration: %d  rank : 0  "
          "train.loss : %.2f  train.ips : %.1f imgs/s" % (i, i, 2.0 / i, 100.0 * i), flush=True)
'''

CASE = """- case_name: tiny
  desc: {run_dir: Tiny, run_file: run_scripts/run_tiny.py}
  params: {nnodes: 1, nproc_per_node: 1, model_name: tiny, batch_size: 4,
           dataset_path: none, step: 2, epoch: 1, lr: 0.1, device: cpu, autocast: false}
"""


def _tc(home, *args, cwd=None):
    env = dict(os.environ, TRAINCTL_HOME=str(home), TRAINCTL_PYTHON=PYTHON)
    return subprocess.run([str(trainctl_path())] + [str(a) for a in args], env=env, cwd=cwd,
                          timeout=300, capture_output=True, text=True)


def _model(root, nnode_flag="--nnode"):
    d = root / "Tiny"
    (d / "run_scripts").mkdir(parents=True)
    for f in ("requirements.txt", "README.md", "run_scripts/argument.py",
              "run_scripts/formate_cmd.py", "run_scripts/README.md"):
        (d / f).write_text("\n")
    (d / "run_scripts" / "run_tiny.py").write_text(RUN_FILE.format(args=ARGS, nnode_flag=nnode_flag))
    return d


def test_test_passes_nnodes_as_the_run_file_spells_it(tmp_path):
    d = _model(tmp_path)
    home = tmp_path / "home"
    r = _tc(home, "zoo", "check", d)
    assert r.returncode == 0, r.stdout + r.stderr  # check: --nnode meets the rule
    (tmp_path / "model.yaml").write_text(CASE)
    r = _tc(home, "zoo", "test", tmp_path / "model.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passing nnodes as --nnode, the spelling run_scripts/run_tiny.py --help lists" in \
        r.stdout + r.stderr, r.stdout + r.stderr
    assert "1 passed, 0 failed" in r.stdout, r.stdout


def test_test_keeps_nnodes_when_the_run_file_takes_it(tmp_path):
    _model(tmp_path, nnode_flag="--nnodes")
    (tmp_path / "model.yaml").write_text(CASE)
    r = _tc(tmp_path / "home", "zoo", "test", tmp_path / "model.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passing nnodes as" not in r.stdout + r.stderr


def test_check_names_near_misses_of_readme(tmp_path):
    for n, wrong in enumerate(("readme.md", " README.md", "REAMDE.md")):
        root = tmp_path / str(n)
        d = _model(root)
        os.rename(d / "README.md", d / wrong)
        r = _tc(tmp_path / "home", "zoo", "check", d)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"- missing file README.md (found '{wrong}': rename it to README.md)" in r.stdout, r.stdout
    # nothing near: the plain line
    d = _model(tmp_path / "far")
    os.remove(d / "README.md")
    r = _tc(tmp_path / "home", "zoo", "check", d)
    assert "- missing file README.md\n" in r.stdout, r.stdout
