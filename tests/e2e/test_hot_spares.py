"""Hot spares (docs/slurm.md, "Spares"): while an attempt runs on the
members, each spare runs `trainctl supervise-spare JOB` in a step of its
own, checking the job's devices; a lost node's rank goes to the first spare
whose newest check passed, and a spare that failed its check is passed over
and named.

On a localhost Slurm cluster of 4 nodes (slurm_cluster.py: slurmd n1..n4 on
one host). A node is lost the way a host dies: every process of the job on
it gets SIGKILL at once (found in /proc by SLURM_JOB_NAME and
SLURMD_NODENAME). GPUs are the test build's fake NVML, one file per node
(`{node}` in TRAINCTL_FAKE_NVML), so that one spare's GPU can fail its
check. Every wait is on a condition."""
import json
import os
import signal
import subprocess

from conftest import job_id_in, notes, rank_log, show, wait_until
from slurm_cluster import module_cluster, slurm_tc  # noqa: F401 (a fixture, on our cluster)

import pytest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from module_cluster(tmp_path_factory, nodes=4)


def _procs():
    """(pid, argv, environ) of every process we may read"""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as c, open(f"/proc/{name}/environ", "rb") as e:
                argv, env = c.read().split(b"\0"), e.read().split(b"\0")
        except OSError:  # gone, or another account's
            continue
        yield int(name), argv, env


def spares_running(job):
    """the Slurm node names on which a `trainctl supervise-spare JOB` runs"""
    found = set()
    for _, argv, env in _procs():
        # the task itself, not the driver's srun that names it
        if len(argv) > 2 and argv[1:3] == [b"supervise-spare", job.encode()]:
            found.update(e[len(b"SLURMD_NODENAME="):].decode() for e in env
                         if e.startswith(b"SLURMD_NODENAME="))
    return found


def kill_host(job_name, node):
    """SIGKILL every process of Slurm job `job_name` on `node` at once, as when the host dies"""
    mine = [pid for pid, argv, env in _procs()
            if f"SLURM_JOB_NAME={job_name}".encode() in env
            and f"SLURMD_NODENAME={node}".encode() in env]
    assert mine, f"no process of {job_name} on {node}"
    for pid in mine:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _log(job, rank):
    try:
        return rank_log(job, rank)
    except OSError:
        return ""


def node_result(job, attempt, node):
    return json.load(open(os.path.join(job["run_dir"], "attempts", str(attempt), f"node-{node}.json")))


def running_reasons(job):
    return [e["reason"] for e in job["events"] if e["state"] == "running" and "kind" not in e]


# Each rank says which attempt and node it is; in the first attempt it then waits for the
# kill, in the next for the file GO (so that the test sees the spares during it).
WORKER = ('echo "attempt $TORCHELASTIC_RESTART_COUNT host $SLURMD_NODENAME rank $RANK of $WORLD_SIZE";'
          ' echo ready$TORCHELASTIC_RESTART_COUNT;'
          ' if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exec sleep 300; fi;'
          ' while [ ! -e "$GO" ]; do sleep 0.2; done')


def run_job(trainctl, cluster, tmp_path, home, slurm_tc, name, spares, devices, env=None,
            before_kill=None, during_restart=None):
    """A 2-node job with `spares` spares: wait for both ranks of attempt 0 (and
    before_kill(job)), kill node 1's host (n2), wait for the restart's ranks,
    call during_restart(job), let it finish; the job's show --json."""
    go = tmp_path / f"{name}.go"
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"""
name: {name}
command: '{WORKER}'
devices: {devices}
nodes: 2
spares: {spares}
backend: slurm
env: {{GO: {go}}}
restart: {{max_restarts: 2, grace_seconds: 3}}
slurm: {{gres: none}}
""")
    full = dict(os.environ, SLURM_CONF=str(cluster.conf), TRAINCTL_HOME=str(home))
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    proc = subprocess.Popen([str(trainctl), "run", "-q", str(spec)], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def recorded():
            if proc.poll() is not None:
                raise AssertionError(f"the run ended early: {proc.communicate()}")
            return job_id_in(home)

        job = wait_until(recorded, timeout=120, what="the job's row")

        def ranks(word):
            def ready():
                if proc.poll() is not None:
                    raise AssertionError(f"the run ended early: {proc.communicate()}")
                j = show(slurm_tc, job)
                return all(word in _log(j, r) for r in (0, 1)) and j
            return ready

        wait_until(ranks("ready0"), timeout=240, what=lambda: "both ranks of attempt 0: "
                   + cluster.squeue() + cluster.logs())
        if before_kill:
            before_kill(job)
        kill_host(name, "n2")
        wait_until(ranks("ready1"), timeout=300, what=lambda: "both ranks of attempt 1: "
                   + json.dumps(show(slurm_tc, job)["events"]) + cluster.squeue())
        if during_restart:
            during_restart(job)
        go.write_text("")
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err + cluster.logs()
    return show(slurm_tc, job)


def test_a_waiting_spare_is_checked_and_takes_the_lost_rank(slurm_tc, cluster, tmp_path, home,
                                                            trainctl):
    def spare_waits(job):
        # n1, n2 train; n3, the spare, runs its health step meanwhile
        wait_until(lambda: spares_running(job) == {"n3"}, timeout=120,
                   what=lambda: f"supervise-spare on n3 (running on {spares_running(job)})")

    def spare_called(job):
        # n3 is a member now: its spare step was ended, and no spare is left to watch
        wait_until(lambda: not spares_running(job), timeout=60,
                   what=lambda: f"no supervise-spare left (running on {spares_running(job)})")

    j = run_job(trainctl, cluster, tmp_path, home, slurm_tc, "hotspare1", 1,
                "{type: cpu, per_node: 1}", before_kill=spare_waits, during_restart=spare_called)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]
    assert [node_result(j, 1, n)["node_name"] for n in (0, 1)] == ["n1", "n3"]
    running = running_reasons(j)
    assert len(running) == 2 and "spare n3 takes node 1 in place of n2" in running[1], running
    assert "attempt 1 host n3 rank 1 of 2" in rank_log(j, 1), rank_log(j, 1)
    assert not notes(j, "unhealthy"), j["events"]


def test_a_spare_that_failed_its_check_is_passed_over(slurm_tc, cluster, tmp_path, home, trainctl,
                                                      nvml):
    _, env = nvml
    for node, faults in (("", ""), ("n1", ""), ("n2", ""), ("n3", "0 remap_pending\n"), ("n4", "")):
        (tmp_path / f"nvml-{node}.conf").write_text("count 1\n" + faults)
    env = dict(env, TRAINCTL_FAKE_NVML=str(tmp_path / "nvml-{node}.conf"))
    why = "spare n3 failed its health check: gpu 0: row remapping pending (reset the GPU)"

    def n3_found_unhealthy(job):
        # both spares wait in one step; n3's first check fails: one event, while it waits
        wait_until(lambda: notes(show(slurm_tc, job), "unhealthy"), timeout=120,
                   what=lambda: "the unhealthy event of spare n3: "
                   + json.dumps(show(slurm_tc, job)["events"]))
        assert spares_running(job) == {"n3", "n4"}

    def n3_watched_again(job):
        # n4 was called; after the restart started, a spare step runs again on n3 alone
        wait_until(lambda: spares_running(job) == {"n3"}, timeout=120,
                   what=lambda: f"supervise-spare on n3 again (running on {spares_running(job)})")

    j = run_job(trainctl, cluster, tmp_path, home, slurm_tc, "hotspare2", 2,
                "{type: gpu, per_node: 1}", env=env, before_kill=n3_found_unhealthy,
                during_restart=n3_watched_again)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]
    assert [node_result(j, 1, n)["node_name"] for n in (0, 1)] == ["n1", "n4"]
    running = running_reasons(j)
    assert len(running) == 2, running
    assert why + ", spare n4 takes node 1 in place of n2" in running[1], running
    unhealthy = [e["reason"] for e in notes(j, "unhealthy")]
    assert unhealthy == ["unhealthy: " + why + "; it takes no node's place while it fails"], unhealthy
    assert "attempt 1 host n4 rank 1 of 2" in rank_log(j, 1), rank_log(j, 1)
