"""The planner's limits (issue 16, 1.4 and 1.5): counts whose product
overflowed, and a global batch of 2^30 whose divisors were found by trying
every value (14 s inside spec_parse, which the server runs in a request)."""
import resource

# The bounds are about the planner's work (the old divisor loop took 14 s),
# not the machine's load: they use the CPU time of the child, which other
# processes do not inflate, with a loose limit only the old algorithm trips.
CPU_LIMIT = 5.0


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def test_parallel_spec_with_global_batch_2_30_is_fast(run_tc, home, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("""command: ["true"]
devices: {type: gpu}
parallel: {strategy: auto, model: gpt3-175b, global_batch: 1073741824}
""")
    t0 = children_cpu()
    p = run_tc("run", spec, env={"TRAINCTL_FAKE_DEVICES": "gpu:8"})
    dt = children_cpu() - t0
    assert p.returncode == 2, p.stderr
    assert "job.yaml:3: parallel:" in p.stderr and "does not fit on" in p.stderr
    assert dt < CPU_LIMIT, dt
    assert not (home / "runs").exists()


def test_plan_strategy_bounds_and_budget(run_tc, tmp_path):
    huge = tmp_path / "cluster.yaml"
    huge.write_text("nodes: 100000\ndevices_per_node: 100000\n")
    p = run_tc("plan", "strategy", "--model", "gpt2-small", "--global-batch", "64",
               "--cluster", huge)
    assert p.returncode == 2
    assert "cluster.yaml:2: 'devices_per_node': 100000 is more than the 1024 the planner handles" \
        in p.stderr
    t0 = children_cpu()
    p = run_tc("plan", "strategy", "--model", "gpt3-175b", "--devices", "4096", "--nodes", "512",
               "--global-batch", "735134400")
    assert p.returncode == 2
    assert "is more work than one plan may take" in p.stderr
    assert children_cpu() - t0 < CPU_LIMIT
