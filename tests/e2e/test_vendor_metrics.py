"""test_vendor_metrics.py -- log lines as real vendor tools print them
(docs/metrics.md):

* MindFormers' current loss line, `{ step:[ 1/ 10], loss: ..., per_step_time:
  13570ms, ..., throughput: 1.36T }` (no Epoch part), gives records, numbers
  read apart from their units; `loss: N/A` (a pipeline stage without the loss) gives no loss record
  and is not malformed;
* Tecorigin logs of workers sharing one stdout, where two records ran
  together on one line (`... imgs/sTCAPPDLL ... rank : 3 ...`): each record
  goes to its own rank.
"""
import json

from conftest import PYTHON

MF_PREFIX = ("2025-05-15 10:00:0{s},123 - mindformers[mindformers/core/callback/callback.py:512]"
             " - INFO - ")
MF_LINE = ("{{ step:[{s:5d}/   10], loss: {loss}, per_step_time:  1357{s}ms, lr: 1e-05, "
           "grad_norm: 3.25, throughput:   1.3{s}T }}")

TCAP = ("TCAPPDLL 2025-05-15 10:00:0{s}.100 - Epoch: 0 Iteration: {s}  rank : {r}  "
        "train.loss : {loss}  train.ips : {ips} imgs/s")


def _run(run_tc, tmp_path, name, per_node, script):
    (tmp_path / "emit.py").write_text(script)
    s = tmp_path / f"{name}.yaml"
    s.write_text(f"""
name: {name}
command: ["{PYTHON}", "emit.py"]
workdir: {tmp_path}
devices: {{type: cpu, per_node: {per_node}}}
""")
    p = run_tc("run", s)
    assert p.returncode == 0, p.stdout + p.stderr
    p = run_tc("show", "--json", name)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["metrics"]


def _series(metrics, name, rank):
    return [m for m in metrics["metrics"] if m["name"] == name and m["rank"] == rank]


def test_current_mindformers_line(run_tc, tmp_path):
    lines = []
    for s in (1, 2):
        lines.append((0, MF_PREFIX.format(s=s) + MF_LINE.format(s=s, loss=f" 11.81396{s}")))
        lines.append((1, MF_PREFIX.format(s=s) + MF_LINE.format(s=s, loss="N/A")))
    script = ("import os\nr = int(os.environ['RANK'])\n" +
              "".join(f"if r == {r}: print({line!r}, flush=True)\n" for r, line in lines))
    m = _run(run_tc, tmp_path, "mf-new", 2, script)
    assert m["malformed"] == 0, m
    loss = _series(m, "loss", 0)
    assert loss and loss[0]["count"] == 2 and abs(loss[0]["last"] - 11.813962) < 1e-9, m
    pst = _series(m, "per_step_time", 0)
    assert pst and pst[0]["last"] == 13572, m  # "13572ms": the number, its unit apart
    thr = _series(m, "throughput", 0)
    assert thr and abs(thr[0]["last"] - 1.32) < 1e-9, m  # "1.32T }": no brace in the value
    assert _series(m, "grad_norm", 0)[0]["last"] == 3.25
    # the pipeline stage without the loss: its other values, no loss, nothing malformed
    assert not _series(m, "loss", 1), m
    assert _series(m, "per_step_time", 1)[0]["count"] == 2, m


def test_records_run_together_go_to_their_own_ranks(run_tc, tmp_path):
    one = TCAP.format(s=1, r=0, loss="2.5", ips="100.0")
    three = TCAP.format(s=1, r=3, loss="2.7", ips="300.0")
    # one stdout for 4 self-launched workers: rank 0's record, then rank 3's
    # glued to its end (no newline between), then one of rank 3's alone
    script = (f"print({one + three!r}, flush=True)\n"
              f"print({TCAP.format(s=2, r=3, loss='2.6', ips='310.0')!r}, flush=True)\n")
    m = _run(run_tc, tmp_path, "tcap-glued", 1, script)
    l0, l3 = _series(m, "train.loss", 0), _series(m, "train.loss", 3)
    assert l0 and l0[0]["count"] == 1 and l0[0]["last"] == 2.5, m
    assert l3 and l3[0]["count"] == 2 and l3[0]["last"] == 2.6, m
    ips0 = _series(m, "train.ips", 0)
    assert ips0 and ips0[0]["last"] == 100.0, m
    assert _series(m, "train.ips", 3)[0]["count"] == 2, m
    assert m["malformed"] == 0, m
