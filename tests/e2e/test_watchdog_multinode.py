"""The watchdog and on_log: of multi-node jobs (docs/diagnostics.md, "Multi-node
jobs") on the localhost Slurm cluster (slurm_cluster.py: slurmd n1 and n2 on
one host), and the event kind on the server's SSE stream.

Every wait is on a condition or a process's end; the timings asserted are
the supervisors' own (the silence they measured)."""
import json
import os

from conftest import PYTHON, REPO, notes, poll, rank_log, show
import mhost_jobs as mh
from mhost_jobs import mhost  # noqa: F401  (the fixture)
from server_fixture import start_server
from slurm_cluster import cluster, slurm_tc  # noqa: F401  (the fixtures)

WORKER = REPO / "tests" / "e2e" / "hang_worker.py"


def node_result(job, attempt, node):
    return json.load(open(os.path.join(job["run_dir"], "attempts", str(attempt), f"node-{node}.json")))


def test_hang_on_node1_names_the_culprit_and_restarts_every_node(slurm_tc, tmp_path, cluster,
                                                                   torch_available):
    # 2 nodes x 2 gloo ranks: rank 3 (node 1) sleeps inside step 8 of the first attempt while
    # ranks 0-2 wait in all_reduce; every node finds the hang on its own and dumps its ranks
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""
name: gloo-2n
command: ["{PYTHON}", "{WORKER}"]
devices: {{type: cpu, per_node: 2}}
env: {{OMP_NUM_THREADS: "1", HANG_AT: "8", HANG_RANK: "3", STEPS: "14"}}
nodes: 2
backend: slurm
restart: {{max_restarts: 1, grace_seconds: 5}}
watchdog: {{warmup_steps: 3, min_seconds: 6, factor: 5}}
""")
    p = slurm_tc("run", "-q", spec, timeout=400)
    assert p.returncode == 0, p.stderr + cluster.logs()
    job = show(slurm_tc, "gloo-2n")
    assert job["state"] == "succeeded" and job["restarts"] == 1, job["events"]
    hang = notes(job, "hang")
    assert len(hang) == 1, job["events"]
    assert "likely culprit rank 3 on node 1 (n2) (rank 3 is not in a collective while 3 other " \
           "ranks wait in all_reduce)" in hang[0]["reason"], hang[0]["reason"]
    restarting = [e for e in job["events"] if e["state"] == "restarting"]
    assert len(restarting) == 1 and restarting[0]["reason"].startswith("hang detected: no progress for")
    assert "restarting every node (1 of 1)" in restarting[0]["reason"]
    # the job's diagnostics (the driver's, from every node's report)
    d = job["diagnostics"]
    h = d["hangs"][0]
    assert (h["culprit"], h["culprit_node"], h["culprit_node_name"]) == (3, 1, "n2"), h
    assert h["timeout"] == 6 and 6 <= h["silent_seconds"] < 6 + 10, h
    # the nodes' telemetry at the time (CPU jobs: /proc/stat)
    assert h["device_utilization"] is not None and "device utilisation" in hang[0]["reason"]
    stacks = {x["rank"]: x for x in h["stacks"]}
    assert sorted(stacks) == [0, 1, 2, 3]
    assert [stacks[r]["node"] for r in range(4)] == [0, 0, 1, 1]
    for r in range(3):
        assert "all_reduce" in stacks[r]["stack"], r
    assert "stuck_in_step" in stacks[3]["stack"]
    assert sorted(r["rank"] for r in d["ranks"]) == [0, 1, 2, 3]
    # every rank's stack is in its own log
    for r in range(4):
        log = rank_log(job, r)
        assert f"trainctl: hang: the stack of rank {r}" in log, r
        assert ("in stuck_in_step" if r == 3 else "in all_reduce") in log, r
    text = slurm_tc("show", "gloo-2n").stdout
    assert "likely culprit rank 3 on node 1 (n2)" in text and "rank 3 (node 1):" in text, text
    # the restart resumed every node from the step-5 checkpoint
    assert "step-5.pt at step 6" in rank_log(job, 3)
    assert '"step": 14' in rank_log(job, 0)


def test_hang_without_restarts_fails_with_hang_root_cause(slurm_tc, tmp_path, cluster,
                                                         torch_available):
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""
name: gloo-2n-fail
command: ["{PYTHON}", "{WORKER}"]
devices: {{type: cpu, per_node: 1}}
env: {{OMP_NUM_THREADS: "1", HANG_AT: "4", HANG_RANK: "0"}}
nodes: 2
backend: slurm
restart: {{max_restarts: 0, grace_seconds: 5}}
watchdog: {{warmup_steps: 2, min_seconds: 5, factor: 3}}
""")
    p = slurm_tc("run", "-q", spec, timeout=400)
    assert p.returncode == 1, p.stderr + cluster.logs()
    job = show(slurm_tc, "gloo-2n-fail")
    assert job["state"] == "failed"
    assert job["root_cause"].startswith("hang detected: no progress for"), job["root_cause"]
    assert "likely culprit rank 0 on node 0 (n1)" in job["root_cause"], job["root_cause"]


def test_on_log_exclude_node_restarts_without_that_node(slurm_tc, tmp_path, cluster):
    # one node of a two-node allocation: the first attempt runs on n1, prints the pattern and
    # waits; the restart runs with srun --exclude=n1, on n2
    spec = tmp_path / "job.yaml"
    spec.write_text("""
name: ecc
command: 'echo "attempt $TORCHELASTIC_RESTART_COUNT on $SLURMD_NODENAME"; if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then echo "NVRM: uncorrectable ECC error"; exec sleep 300; fi; sleep 3'
devices: {type: cpu, per_node: 1}
nodes: 1
backend: slurm
slurm: {extra: ["--nodes=2"]}
restart: {max_restarts: 1, grace_seconds: 3}
on_log:
  - {pattern: "uncorrectable ECC", action: exclude_node}
""")
    p = slurm_tc("run", "-q", spec, timeout=300)
    assert p.returncode == 0, p.stderr + cluster.logs()
    job = show(slurm_tc, "ecc")
    assert job["state"] == "succeeded" and job["restarts"] == 1, job["events"]
    match = notes(job, "log_match")
    assert len(match) == 1 and "action exclude_node" in match[0]["reason"], job["events"]
    excl = notes(job, "node_excluded")
    assert len(excl) == 1 and "node 0 (n1)" in excl[0]["reason"], job["events"]
    # the first attempt ran on n1, the restart on n2: its step's node list leaves n1 out
    assert node_result(job, 0, 0)["node_name"] == "n1"
    assert node_result(job, 1, 0)["node_name"] == "n2"
    log = rank_log(job, 0)
    assert "attempt 0 on n1" in log and "attempt 1 on n2" in log, log
    d = job["diagnostics"]
    assert d["log_matches"] and d["log_matches"][0]["node"] == 0


def test_sse_event_carries_the_kind(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state")
    try:
        job = srv.submit({"name": "matched", "workdir": "/tmp",
                          "command": "echo 'CUDA out of memory'; sleep 30",
                          "on_log": [{"pattern": "out of memory", "action": "fail"}]})
        srv.wait_state(job, ["failed"])
        with srv.stream("/api/v1/events?after=0", timeout=30) as r:
            seen = []

            def kind_seen():
                line = r.fp.readline().decode()
                seen.append(line)
                return line.startswith("data: ") and '"kind":"log_match"' in line

            assert poll(kind_seen, 30, 0), "".join(seen)
            data = json.loads(seen[-1][len("data: "):])
            assert data["job"] == job and data["kind"] == "log_match"
            assert data["reason"].startswith("log_match: rank 0: action fail")
            # a change of state keeps its form: no kind
            states = [json.loads(l[6:]) for l in seen if l.startswith("data: ")]
            assert any(s["state"] == "queued" and "kind" not in s for s in states), seen
            assert any(l == "event: state\n" for l in seen)
    finally:
        srv.stop()


# ---- without a shared folder: the multi-host cluster (mhost_cluster.py, root only) ----


def test_hang_across_hosts_that_share_no_folder(mhost, torch_available):
    # the nodes' hang reports reach the driver through srun's output, its diagnostics.json and
    # the ranks' logs (with their stacks) reach login through the hub
    spec = mhost.write("login", "/tmp/home/specs/gloo-mh.yaml", f"""
name: gloo-mh
command: ["{PYTHON}", "{WORKER}"]
workdir: {REPO / "tests" / "e2e"}
devices: {{type: cpu, per_node: 1}}
env: {{OMP_NUM_THREADS: "1", HANG_AT: "6", HANG_RANK: "1", STEPS: "10"}}
nodes: 2
backend: slurm
restart: {{max_restarts: 1, grace_seconds: 5}}
watchdog: {{warmup_steps: 2, min_seconds: 6, factor: 5}}
""")
    proc = mh.submit(mhost, spec)
    rc, out, err = mh.wait_end(mhost, proc)
    assert rc == 0, err + mhost.logs()
    job = mh.show(mhost, "gloo-mh")
    assert job["state"] == "succeeded" and job["restarts"] == 1, job["events"]
    hang = notes(job, "hang")
    assert len(hang) == 1 and "likely culprit rank 1 on node 1 (c2)" in hang[0]["reason"], \
        job["events"]
    h = job["diagnostics"]["hangs"][0]
    assert (h["culprit"], h["culprit_node"], h["culprit_node_name"]) == (1, 1, "c2"), h
    stacks = {x["rank"]: x["stack"] for x in h["stacks"]}
    assert "all_reduce" in stacks[0] and "stuck_in_step" in stacks[1]
    for r in range(2):
        text = mhost.tc("login", "logs", "gloo-mh", "--rank", r, check=True).stdout
        assert f"trainctl: hang: the stack of rank {r}" in text, (r, text[-2000:])
    mh.assert_db_only_on_login(mhost)
