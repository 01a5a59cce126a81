"""test_compare.py -- `trainctl compare`: real digits runs (same seed aligns,
another learning rate does not and the first failing step is named), then
the edge cases with small shell jobs that print DLLogger lines (different
lengths, missing steps, zero references, NaN, no common step).

The digits spec is the one in docs/compare.md."""
import json
import os
import re
import subprocess

import pytest

from conftest import DIGITS, REPO, trainctl_path, job_id_of

DOC = REPO / "docs" / "compare.md"


def _tc(home, *args, timeout=300):
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    return subprocess.run([str(trainctl_path())] + [str(a) for a in args], env=env,
                          timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def _run(home, spec):
    r = _tc(home, "run", "-q", spec)
    assert r.returncode == 0, r.stderr[-3000:]
    return job_id_of(r)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, torch_available):
    """Two digits runs with the doc's spec and one with lr 0.2: (home, a, b, c)."""
    d = tmp_path_factory.mktemp("compare")
    home = d / "home"
    text = DOC.read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S).group(1) + f"workdir: {DIGITS}\n"
    same = d / "same.yaml"
    same.write_text(block)
    other = d / "other.yaml"
    assert "lr: 0.05" in block
    other.write_text(block.replace("lr: 0.05", "lr: 0.2"))
    return home, _run(home, same), _run(home, same), _run(home, other)


def _cmp(home, *args):
    return _tc(home, "compare", *args)


def _points(home, job, name):
    r = _tc(home, "metrics", job, "--name", name, "--rank", "0", "--format", "json")
    assert r.returncode == 0, r.stderr
    return [p for p in json.loads(r.stdout) if p["kind"] == "point"]


def test_same_seed_aligns(runs):
    home, a, b, _ = runs
    r = _cmp(home, a, b)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verdict    aligned" in r.stdout
    j = json.loads(_cmp(home, a, b, "--json").stdout)
    assert j["aligned"] and j["metric"] == "train.loss" and j["kind"] == "point"
    n = len(_points(home, a, "train.loss"))
    assert j["common"] == n > 5 and j["failing"] == 0 and j["first_fail"] is None
    assert j["max_err"] <= 0.01 and j["mean_err"] <= 0.01
    # other metrics and ranks too
    assert _cmp(home, a, b, "--metric", "val.accuracy", "--rank", "1").returncode == 0


def test_other_learning_rate_does_not_align(runs):
    home, a, _, c = runs
    r = _cmp(home, a, c)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "NOT aligned" in r.stdout
    j = json.loads(_cmp(home, a, c, "--json").stdout)
    assert not j["aligned"]
    # the test's own computation from the stored points
    pa = {p["step"]: p["value"] for p in _points(home, a, "train.loss")}
    pc = {p["step"]: p["value"] for p in _points(home, c, "train.loss")}
    errs = [(s, abs(pc[s] - pa[s]) / abs(pa[s])) for s in pa]
    first = next(s for s, e in errs if e > 0.01)
    assert j["first_fail"] == first
    assert f"first fail {first}" in r.stdout
    assert j["max_err"] == pytest.approx(max(e for _, e in errs), rel=1e-12)
    assert j["mean_err"] == pytest.approx(sum(e for _, e in errs) / len(errs), rel=1e-12)
    rows = {x["step"]: x for x in j["steps"]}
    for s, e in errs:
        assert rows[s]["err"] == pytest.approx(e, rel=1e-12)
        assert rows[s]["status"] == ("over" if e > 0.01 else "ok")
    # a tolerance wide enough passes; the mean is judged with --mean
    big = max(e for _, e in errs)
    assert _cmp(home, a, c, "--rtol", str(big * 1.01)).returncode == 0
    mean = sum(e for _, e in errs) / len(errs)
    between = (mean + big) / 2
    assert _cmp(home, a, c, "--rtol", str(between)).returncode == 1
    assert _cmp(home, a, c, "--rtol", str(between), "--mean").returncode == 0
    steps = _cmp(home, a, c, "--steps").stdout
    assert "OVER" in steps and first in steps


# ---- edge cases with shell jobs ----

def _dlll(step, value):
    v = value if isinstance(value, str) else repr(float(value))
    return 'DLLL {"type": "LOG", "step": %s, "data": {"train.loss": %s}}' % (json.dumps(step), v)


def _shell_job(home, tmp_path, name, lines):
    script = tmp_path / f"{name}.sh"
    script.write_text("cat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")
    r = _tc(home, "run", "-q", "--name", name, "--", "sh", str(script))
    assert r.returncode == 0, r.stderr
    return job_id_of(r)


@pytest.fixture(scope="module")
def shell_home(tmp_path_factory):
    return tmp_path_factory.mktemp("cmp-shell")


def test_lengths_missing_steps_and_zero_reference(shell_home, tmp_path):
    home = shell_home
    ref = _shell_job(home, tmp_path, "ref", [_dlll([1, i], v) for i, v in
                                              [(1, 2.0), (2, 1.0), (3, 0.0), (4, 0.5)]])
    # step 2 missing, step 5 extra, step 3 ~0 (absolute), 0.8% off at step 4
    cand = _shell_job(home, tmp_path, "cand", [_dlll([1, i], v) for i, v in
                                                [(1, 2.0), (3, 1e-9), (4, 0.504), (5, 7.0)]])
    r = _cmp(home, ref, cand, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert (j["common"], j["only_reference"], j["only_candidate"]) == (3, 1, 1)
    rows = {x["step"]: x for x in j["steps"]}
    assert rows["[1, 2]"]["status"] == "only_a" and rows["[1, 5]"]["status"] == "only_b"
    assert rows["[1, 3]"]["absolute"] and rows["[1, 3]"]["status"] == "ok"
    text = _cmp(home, ref, cand, "--steps").stdout
    assert "only in reference" in text and "only in candidate" in text
    # a zero reference against a clear difference fails on atol
    far = _shell_job(home, tmp_path, "far", [_dlll([1, i], v) for i, v in
                                              [(1, 2.0), (2, 1.0), (3, 0.01), (4, 0.5)]])
    j = json.loads(_cmp(home, ref, far, "--json").stdout)
    assert not j["aligned"] and j["first_fail"] == "[1, 3]"
    assert _cmp(home, ref, far).returncode == 1
    assert _cmp(home, ref, far, "--atol", "0.1").returncode == 0


def test_nan_fails_and_no_common_step(shell_home, tmp_path):
    home = shell_home
    a = _shell_job(home, tmp_path, "na", [_dlll([1, 1], 1.0), _dlll([1, 2], "NaN")])
    r = _cmp(home, a, a, "--mean", "--rtol", "1000", "--json")
    assert r.returncode == 1
    j = json.loads(r.stdout)
    assert j["first_fail"] == "[1, 2]" and j["max_err"] == "inf"
    assert j["steps"][1]["a"] == "nan" and j["steps"][1]["status"] == "nonfinite"
    b = _shell_job(home, tmp_path, "nb", [_dlll([2, 1], 1.0)])
    r = _cmp(home, a, b)
    assert r.returncode == 2 and "share no point step" in r.stderr
    r = _cmp(home, a, b, "--metric", "val.loss")
    assert r.returncode == 2 and "no numbers of 'val.loss'" in r.stderr
    assert _cmp(home, a).returncode == 2
    assert _cmp(home, a, b, "--rtol", "-1").returncode == 2
    assert _cmp(home, a, "no-such-job").returncode == 2
