"""`parallel: {strategy: auto}` in a job spec: the planner's choice reaches
the workers and `show`; an impossible model is a clear exit 2."""
import json


def test_parallel_auto_reaches_workers(run_tc, home, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("""
name: planned
command: ["/bin/sh", "-c", "echo plan $TRAINCTL_DP $TRAINCTL_TP $TRAINCTL_PP $TRAINCTL_MICRO_BATCH $TRAINCTL_PIPELINE_PARTITION"]
devices: {type: gpu, per_node: 8}
parallel: {strategy: auto, model: gpt2-large, global_batch: 64, memory: 16GiB}
""")
    p = run_tc("run", spec, env={"TRAINCTL_FAKE_DEVICES": "gpu:8"})
    assert p.returncode == 0, p.stderr
    # the same answer as `trainctl plan strategy` gives for this model and cluster
    best = json.loads(run_tc("plan", "strategy", "--model", "gpt2-large", "--devices", "8",
                             "--nodes", "1", "--global-batch", "64", "--memory", "16GiB",
                             "--format", "json").stdout)
    cand = best["candidates"][0]
    layers = ",".join(str(x) for x in cand["layers"])
    want = f"plan {cand['dp']} {cand['tp']} {cand['pp']} {cand['micro_batch']} {layers}"
    lines = [l for l in p.stdout.splitlines() if "plan" in l]
    assert len(lines) == 8 and all(l.endswith(want) for l in lines), (lines, want)
    shown = run_tc("show", "planned").stdout
    assert f"dp={cand['dp']} tp={cand['tp']} pp={cand['pp']}" in shown
    plan = json.loads(run_tc("show", "planned", "--json").stdout)["spec"]["parallel"]["plan"]
    assert plan["partition"] == layers


def test_parallel_model_too_large(run_tc, home, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("""command: ["true"]
devices: {type: gpu, per_node: 2}
parallel: {strategy: auto, model: gpt3-175b, global_batch: 8}
""")
    p = run_tc("run", spec, env={"TRAINCTL_FAKE_DEVICES": "gpu:2"})
    assert p.returncode == 2
    assert "job.yaml:3: parallel:" in p.stderr
    assert not (home / "runs").exists()
