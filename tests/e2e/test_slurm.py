"""backend: slurm on a real 2-node Slurm cluster started on localhost
(slurm_cluster.py: munged, slurmctld, slurmd -N n1 and -N n2), stopped at
the end of the module."""
import json
import os
import re
import signal
import sqlite3
import subprocess
import time

from conftest import DIGITS, REPO, poll, wait_until
from server_fixture import start_server
from slurm_cluster import cluster, slurm_tc, have_slurm, _alive  # noqa: F401  (the fixtures)

GOLDEN = REPO / "tests" / "e2e" / "golden"


def write_spec(tmp_path, text, name="job.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def show(slurm_tc, job):
    p = slurm_tc("show", job, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def db_rows(home, sql):
    try:
        with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
            return c.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []


def start_run(trainctl, home, cluster, spec, *extra):
    env = dict(os.environ, TRAINCTL_HOME=str(home), SLURM_CONF=str(cluster.conf))
    return subprocess.Popen([str(trainctl), "run", "--quiet", *extra, str(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(pred, timeout=120, step=0.1):
    return poll(pred, timeout, step)


def rank_logs_say(home, text, ranks):
    """Every rank's log holds text (a worker says it is ready)."""
    run_dir = db_rows(home, "SELECT run_dir FROM jobs")
    if not run_dir:
        return False
    for r in ranks:
        try:
            with open(os.path.join(run_dir[0][0], "logs", f"rank-{r}.log")) as f:
                if text not in f.read():
                    return False
        except OSError:
            return False
    return True


DIGITS_2N = f"""
name: digits-2n
command: '/usr/bin/python3 {REPO}/tests/e2e/env_dump.py && exec /usr/bin/python3 train.py "$@"'
workdir: {DIGITS}
args: {{epochs: 3, lr: 0.05, batch-size: 32, seed: 1234}}
devices: {{type: cpu, per_node: 2}}
env: {{OMP_NUM_THREADS: "1", ENV_DUMP_DIR: "{{dump}}"}}
nodes: 2
backend: slurm
"""


def test_digits_two_nodes(slurm_tc, home, tmp_path, cluster, torch_available):
    dump = tmp_path / "env"
    dump.mkdir()
    spec = write_spec(tmp_path, DIGITS_2N.replace("{dump}", str(dump)))
    p = slurm_tc("run", spec, timeout=400)
    assert p.returncode == 0, p.stderr + cluster.logs()
    # every rank's output reached the submitting console
    for r in range(4):
        assert f"[{r}] DLLL " in p.stdout
    job = show(slurm_tc, "digits-2n")
    assert job["state"] == "succeeded" and job["workers"] == 4
    assert job["slurm"]["nodes"] == "n[1-2]" and job["slurm"]["state"] == "COMPLETED"
    envs = {r: json.load(open(dump / f"rank-{r}.json")) for r in range(4)}
    for r, e in envs.items():
        assert (e["RANK"], e["LOCAL_RANK"], e["GROUP_RANK"], e["WORLD_SIZE"]) == \
            (str(r), str(r % 2), str(r // 2), "4"), (r, e["RANK"], e["LOCAL_RANK"], e["GROUP_RANK"])
        assert e["LOCAL_WORLD_SIZE"] == "2" and e["GROUP_WORLD_SIZE"] == "2"
        assert e["SLURMD_NODENAME"] == ("n1" if r < 2 else "n2")
        assert e["MASTER_ADDR"] == envs[0]["MASTER_ADDR"] and e["MASTER_PORT"] == envs[0]["MASTER_PORT"]
    master = open(os.path.join(job["run_dir"], "attempts", "0", "master")).read().strip()
    assert master == f"{envs[0]['MASTER_ADDR']}:{envs[0]['MASTER_PORT']}"
    logs = os.path.join(job["run_dir"], "logs")
    names = set(os.listdir(logs))
    assert {"rank-0.log", "rank-1.log", "rank-2.log", "rank-3.log", "supervisor.log",
            "supervisor-node0.log", "supervisor-node1.log"} <= names, names
    for r in range(4):
        text = open(os.path.join(logs, f"rank-{r}.log")).read()
        assert '"val.accuracy"' in text and '"step": []' in text, r
    sbatch = open(os.path.join(job["run_dir"], "job.sbatch")).read()
    assert "#SBATCH --nodes=2\n" in sbatch and "#SBATCH --ntasks-per-node=1\n" in sbatch
    text = slurm_tc("show", "digits-2n").stdout
    assert re.search(r"slurm job\s+\d+ \(COMPLETED\) on n\[1-2\]", text), text
    # logs of both nodes, through the usual verb
    out = slurm_tc("logs", "digits-2n", "--tail", "1").stdout
    assert all(f"[{r}] " in out for r in range(4)), out


def test_worker_killed_on_node2_restarts_all_nodes(trainctl, home, tmp_path, cluster, slurm_tc,
                                                   torch_available):
    spec = write_spec(tmp_path, f"""
name: digits-2n-restart
command: ["/usr/bin/python3", "{DIGITS}/train.py"]
args: {{epochs: 4, sleep-per-step: 0.05}}
devices: {{type: cpu, per_node: 2}}
env: {{OMP_NUM_THREADS: "1"}}
nodes: 2
backend: slurm
restart: {{max_restarts: 1, grace_seconds: 5}}
""")
    proc = start_run(trainctl, home, cluster, spec)

    def victim():
        run_dir = db_rows(home, "SELECT run_dir FROM jobs")
        pids = dict(db_rows(home, "SELECT rank, pid FROM workers WHERE attempt = 0"))
        if run_dir and 3 in pids:
            ck = os.path.join(run_dir[0][0], "output", "checkpoints")
            if os.path.isdir(ck) and any(n.startswith("epoch-1") for n in os.listdir(ck)):
                return pids[3]
        return None

    pid = wait_for(victim, timeout=240)
    assert pid, "no checkpoint appeared: " + (proc.poll() is not None and proc.communicate()[1] or "")
    os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err + cluster.logs()
    job = show(slurm_tc, "digits-2n-restart")
    assert job["state"] == "succeeded" and job["restarts"] == 1
    restart = [e for e in job["events"] if e["state"] == "restarting"]
    assert len(restart) == 1 and "node 1" in restart[0]["reason"] \
        and "rank 3 was killed by signal 9" in restart[0]["reason"], restart
    running = [e["reason"] for e in job["events"] if e["state"] == "running"]
    assert any("restart 1 of 1" in r and "resuming from" in r for r in running), running
    # the whole job restarted: every rank ran a second attempt, and resumed
    attempts = db_rows(home, "SELECT DISTINCT attempt, rank FROM workers")
    assert sorted(attempts) == [(a, r) for a in (0, 1) for r in range(4)]
    for r in range(4):
        log = open(os.path.join(job["run_dir"], "logs", f"rank-{r}.log")).read()
        m = re.search(r"resumed from (\S+) at epoch (\d+)", log)
        assert m and int(m.group(2)) >= 1, r


def test_stop_cancels_the_slurm_job(trainctl, home, tmp_path, cluster, slurm_tc):
    spec = write_spec(tmp_path, """
name: sleeper
command: 'echo "up $RANK"; exec sleep 300'
devices: {type: cpu, per_node: 2}
nodes: 2
backend: slurm
restart: {grace_seconds: 3}
""")
    proc = start_run(trainctl, home, cluster, spec)
    assert wait_for(lambda: len(db_rows(home, "SELECT pid FROM workers")) == 4, timeout=120), \
        proc.poll() is not None and proc.communicate()[1]
    pids = [p for (p,) in db_rows(home, "SELECT pid FROM workers")]
    t0 = time.time()
    p = slurm_tc("stop", "sleeper")
    assert p.returncode == 0, p.stderr
    assert "Slurm job" in p.stdout
    out, err = proc.communicate(timeout=200)
    assert proc.returncode == 1, err
    assert time.time() - t0 < 150  # stopped, not the 300 s of its sleep
    job = show(slurm_tc, "sleeper")
    assert job["state"] == "killed", job["state"]
    assert "trainctl stop" in job["root_cause"]
    assert wait_for(lambda: not any(_alive(pid) for pid in pids), timeout=60), "workers left"
    assert wait_for(lambda: job["slurm"]["job"] not in cluster.squeue(), timeout=60)
    sup = subprocess.run(["pgrep", "-f", "supervise-node " + job["id"]], capture_output=True, text=True)
    assert not sup.stdout.strip(), sup.stdout


def test_npu_rank_table_merged_across_nodes(slurm_tc, home, tmp_path, cluster):
    (tmp_path / "hccn-0.conf").write_text("address_0=192.168.100.101\naddress_1=192.168.100.102\n")
    (tmp_path / "hccn-1.conf").write_text("address_0=192.168.100.103\naddress_1=192.168.100.104\n")
    spec = write_spec(tmp_path, """
name: npu-2n
command: 'echo "$RANK $DEVICE_ID $RANK_TABLE_FILE"'
framework: mindspore
devices: {type: npu, per_node: 2, hccn_conf: "hccn-{node}.conf"}
nodes: 2
backend: slurm
slurm: {gres: none}
""")
    p = slurm_tc("run", spec, env={"TRAINCTL_FAKE_DEVICES": "npu:8"}, timeout=200)
    assert p.returncode == 0, p.stderr + cluster.logs()
    job = show(slurm_tc, "npu-2n")
    table_path = os.path.join(job["run_dir"], "ranktable", "attempt-0", "hccl.json")
    table = json.load(open(table_path))
    # server_id is each node's address: the same host twice here
    ids = [s.pop("server_id") for s in table["server_list"]]
    assert len(ids) == 2 and all(re.match(r"^\d+\.\d+\.\d+\.\d+$", i) for i in ids), ids
    assert table == json.load(open(GOLDEN / "slurm_hccl.json"))
    for r in range(4):
        assert f"[{r}] {r} {r % 2} {table_path}" in p.stdout, p.stdout


def test_no_controller_is_exit_3(run_tc, tmp_path, cluster):
    bad = tmp_path / "slurm.conf"
    text = cluster.conf.read_text()
    bad.write_text(re.sub(r"SlurmctldPort=\d+", "SlurmctldPort=1", text))
    spec = write_spec(tmp_path, "command: [true]\nnodes: 2\nbackend: slurm\n")
    p = run_tc("run", spec, env={"SLURM_CONF": bad}, timeout=120)
    assert p.returncode == 3, p.stderr
    assert "Unable to contact slurm controller" in p.stderr, p.stderr


def test_cluster_refusals_are_exit_2(slurm_tc, home, tmp_path):
    spec = write_spec(tmp_path, "command: [true]\nnodes: 2\nbackend: slurm\nslurm: {partition: nope}\n")
    p = slurm_tc("run", spec)
    assert p.returncode == 2 and "Invalid partition name specified" in p.stderr, p.stderr
    spec = write_spec(tmp_path, "command: [true]\nnodes: 3\nbackend: slurm\n")
    p = slurm_tc("run", spec)
    assert p.returncode == 2 and "Requested node configuration is not available" in p.stderr, p.stderr
    assert not db_rows(home, "SELECT id FROM jobs"), "a refused job was recorded"


def test_no_slurm_installed_is_exit_3(run_tc, tmp_path):
    spec = write_spec(tmp_path, "command: [true]\nnodes: 2\nbackend: slurm\n")
    p = run_tc("run", spec, env={"PATH": "/nonexistent"})
    assert p.returncode == 3 and "cannot run sbatch" in p.stderr, p.stderr


def test_backend_flag_and_spec_checks(run_tc, tmp_path):
    spec = write_spec(tmp_path, "command: [true]\nnodes: 2\n")
    p = run_tc("run", spec)
    assert p.returncode == 2 and "job.yaml:2: nodes: 2 nodes need backend: slurm" in p.stderr, p.stderr
    p = run_tc("run", "--backend", "slurm", spec, env={"PATH": "/nonexistent"})
    assert p.returncode == 3 and "sbatch" in p.stderr, p.stderr
    spec = write_spec(tmp_path, "command: [true]\nslurm: {partition: debug}\n")
    p = run_tc("run", spec)
    assert p.returncode == 2 and "slurm: is for backend: slurm" in p.stderr, p.stderr
    spec = write_spec(tmp_path, "command: [true]\nbackend: slurm\nslurm: {time: 'two hours'}\n")
    p = run_tc("run", spec)
    assert p.returncode == 2 and "slurm.time" in p.stderr, p.stderr


def slurm_id(home):
    rows = db_rows(home, "SELECT slurm_job FROM jobs")
    return rows[0][0] if rows and rows[0][0] else None


def test_signal_warning_reaches_workers(trainctl, home, tmp_path, cluster, slurm_tc):
    # what slurm: {signal: USR1@120} makes Slurm send before the time limit
    spec = write_spec(tmp_path, """
name: warned
command: 'trap "echo checkpoint-now $RANK; exit 0" USR1; echo "up $RANK"; while :; do sleep 0.1; done'
devices: {type: cpu, per_node: 2}
nodes: 2
backend: slurm
slurm: {signal: "USR1@120"}
""")
    proc = start_run(trainctl, home, cluster, spec)
    assert wait_for(lambda: len(db_rows(home, "SELECT pid FROM workers")) == 4, timeout=120)
    # each prints "up" once its trap is set
    wait_until(lambda: rank_logs_say(home, "up ", range(4)), timeout=120, what="'up' from the 4 ranks")
    subprocess.run(["scancel", "--signal=USR1", slurm_id(home)], env=cluster.env, check=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    job = show(slurm_tc, "warned")
    assert job["state"] == "succeeded"
    for r in range(4):
        assert f"checkpoint-now {r}" in open(os.path.join(job["run_dir"], "logs", f"rank-{r}.log")).read()
    assert "#SBATCH --signal=USR1@120" in open(os.path.join(job["run_dir"], "job.sbatch")).read()


def test_plain_scancel_is_killed(trainctl, home, tmp_path, cluster, slurm_tc):
    spec = write_spec(tmp_path, """
name: cancelled
command: 'exec sleep 300'
devices: {type: cpu, per_node: 1}
nodes: 2
backend: slurm
""")
    proc = start_run(trainctl, home, cluster, spec)
    assert wait_for(lambda: len(db_rows(home, "SELECT pid FROM workers")) == 2, timeout=120)
    subprocess.run(["scancel", slurm_id(home)], env=cluster.env, check=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    job = show(slurm_tc, "cancelled")
    assert job["state"] == "killed" and "CANCELLED" in job["root_cause"], job["root_cause"]
    # one end, Slurm's: the driver, whose nodes may see the cancel first, leaves it to the sync
    ends = [e for e in job["events"] if e["state"] in ("succeeded", "failed", "killed", "lost")]
    assert len(ends) == 1 and "CANCELLED" in ends[0]["reason"], ends
    # and it stays so once the driver is gone too
    sid = job["slurm"]["job"]
    assert wait_for(lambda: sid not in [l.split()[0] for l in cluster.squeue().splitlines()],
                    timeout=60), cluster.squeue()
    again = show(slurm_tc, "cancelled")
    assert (again["state"], again["root_cause"]) == (job["state"], job["root_cause"])


def test_requeued_job_resumes(trainctl, home, tmp_path, cluster, slurm_tc, torch_available):
    spec = write_spec(tmp_path, f"""
name: requeued
command: ["/usr/bin/python3", "{DIGITS}/train.py"]
args: {{epochs: 3, sleep-per-step: 0.05}}
devices: {{type: cpu, per_node: 2}}
env: {{OMP_NUM_THREADS: "1"}}
nodes: 2
backend: slurm
""")
    proc = start_run(trainctl, home, cluster, spec)

    def checkpointed():
        run_dir = db_rows(home, "SELECT run_dir FROM jobs")
        ck = run_dir and os.path.join(run_dir[0][0], "output", "checkpoints")
        return ck and os.path.isdir(ck) and any(n.startswith("epoch-1") for n in os.listdir(ck))

    assert wait_for(checkpointed, timeout=240), proc.poll() is not None and proc.communicate()[1]
    sid = slurm_id(home)
    # what preemption with PreemptMode=REQUEUE does; then skip Slurm's 2-minute requeue delay
    subprocess.run(["scontrol", "requeue", sid], env=cluster.env, check=True)
    # Released only once the first run is gone from every node: squeue says
    # PENDING while Slurm still completes it (scontrol says COMPLETING), and a
    # slurmd refuses a credential made in the second its job was killed in
    # ("already killed, do not launch batch job", "Job credential revoked").
    # The kill came before PENDING: a new second after that is a later one.
    assert wait_for(lambda: cluster.job_state(sid) == "PENDING" and cluster.nodes_idle(), timeout=120), \
        (cluster.job_state(sid), cluster.squeue(), cluster.logs())
    gone = int(time.time())
    assert wait_for(lambda: int(time.time()) > gone, timeout=5, step=0.05)
    subprocess.run(["scontrol", "update", f"JobId={sid}", "StartTime=now"], env=cluster.env, check=True)
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err + cluster.logs()
    job = show(slurm_tc, "requeued")
    assert job["state"] == "succeeded" and job["restarts"] == 0
    states = [(e["state"], e["reason"]) for e in job["events"]]
    assert any(s == "running" and r.startswith("requeued: attempt 1") and "resuming from" in r
               for s, r in states), states
    # the requeue is not an end, whoever saw it first (the driver or the state sync)
    assert [s for s, _ in states if s in ("succeeded", "failed", "killed", "lost")] == ["succeeded"], states
    log = open(os.path.join(job["run_dir"], "logs", "rank-2.log")).read()
    assert re.search(r"resumed from \S+ at epoch [1-9]", log)


def test_server_submits_to_slurm(trainctl, home, tmp_path, cluster, slurm_tc):
    """`trainctl submit` to a server: a backend: slurm job goes to sbatch, not to local devices"""
    srv = start_server(trainctl, home, env={"SLURM_CONF": str(cluster.conf)})
    try:
        spec = write_spec(tmp_path, """
name: srv-2n
command: "/bin/sh -c 'echo rank $RANK of $WORLD_SIZE'"
devices: {type: cpu, per_node: 1}
nodes: 2
backend: slurm
""")
        p = srv.cli("submit", spec)
        assert p.returncode == 0, p.stderr
        job_id = p.stdout.strip()
        job = srv.wait_state(job_id, ["succeeded", "failed", "killed", "lost"], timeout=180)
        assert job["state"] == "succeeded", (job["state"], srv.log()[-3000:], cluster.logs())
        logs = os.path.join(job["run_dir"], "logs")
        for r in range(2):
            assert f"rank {r} of 2" in open(os.path.join(logs, f"rank-{r}.log")).read(), r
        sid = show(slurm_tc, job_id)["slurm"]["job"]
        assert sid and sid.isdigit(), sid
        text = slurm_tc("show", job_id).stdout
        assert re.search(rf"slurm job\s+{sid} \(", text), text
        # its last Slurm state is brought up to date once Slurm is done with it
        assert wait_for(lambda: show(slurm_tc, job_id)["slurm"]["state"] == "COMPLETED", timeout=120)
        assert os.path.exists(os.path.join(job["run_dir"], "job.sbatch"))
        assert f"submitted to Slurm as job {sid}" in srv.log()
    finally:
        srv.stop()


def test_show_of_a_finished_slurm_job_needs_no_slurm(run_tc, home, tmp_path):
    """A finished Slurm job shows (and lists) from the store alone, with no
    reachable Slurm configuration (scontrol would retry it for a minute and
    fail), even when its last Slurm state seen is not final."""
    p = run_tc("run", "--name", "ended", "--", "true")
    assert p.returncode == 0, p.stderr
    with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
        c.execute("UPDATE jobs SET backend='slurm', slurm_job='4711', slurm_nodes='n[1-2]',"
                  " slurm_state='RUNNING' WHERE name='ended'")
    no_slurm = {"SLURM_CONF": tmp_path / "nowhere" / "slurm.conf"}
    p = run_tc("show", "ended", env=no_slurm)
    assert p.returncode == 0, p.stderr
    assert re.search(r"^state\s+succeeded$", p.stdout, re.M), p.stdout
    assert "slurm job  4711 (RUNNING) on n[1-2]" in p.stdout, p.stdout
    p = run_tc("show", "ended", "--json", env=no_slurm)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["slurm"] == {"job": "4711", "nodes": "n[1-2]", "state": "RUNNING"}
    p = run_tc("ps", "--json", env=no_slurm)
    assert p.returncode == 0 and json.loads(p.stdout)[0]["state"] == "succeeded", p.stderr
    p = run_tc("show", "ended", env={"PATH": "/nonexistent"})
    assert p.returncode == 0, p.stderr


def test_show_through_the_server_has_the_slurm_job(trainctl, home, tmp_path, cluster, slurm_tc):
    """`trainctl show` through the server shows what it shows locally, the
    Slurm job id under slurm.job included."""
    srv = start_server(trainctl, home, env={"SLURM_CONF": str(cluster.conf)})
    try:
        spec = write_spec(tmp_path, "name: srv-show\ncommand: [true]\n"
                          "devices: {type: cpu, per_node: 1}\nnodes: 2\nbackend: slurm\n")
        p = srv.cli("submit", spec)
        assert p.returncode == 0, p.stderr
        job_id = p.stdout.strip()
        sid = wait_for(lambda: srv.job(job_id).get("slurm", {}).get("job"), timeout=60)
        assert sid and sid.isdigit(), srv.job(job_id)
        job = srv.wait_state(job_id, ["succeeded", "failed", "killed", "lost"], timeout=180)
        assert job["state"] == "succeeded", (job, srv.log()[-3000:], cluster.logs())
        p = srv.cli("show", job_id, "--json")
        assert p.returncode == 0, p.stderr
        remote = json.loads(p.stdout)
        assert remote["slurm"]["job"] == sid and remote["backend"] == "slurm"
        assert remote["spec"]["backend"] == "slurm" and "metrics" in remote
        text = srv.cli("show", job_id).stdout
        assert re.search(rf"slurm job\s+{sid} \(", text), text
        for part in ("\nspec:\n", "\nworkers:\n", "\nmetrics", "\nevents:\n"):
            assert part in text, (part, text)
        assert re.search(rf"slurm job\s+{sid} \(", slurm_tc("show", job_id).stdout)
    finally:
        srv.stop()


def test_slurm_not_configured_is_exit_3(run_tc, tmp_path):
    """Installed but not configured: sbatch finds no slurm.conf and no controller in DNS.
    A stand-in sbatch prints what Debian's prints then, so the test holds on any machine."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text(
        "#!/bin/sh\ncat >/dev/null\n"
        "echo 'sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host' >&2\n"
        "echo 'sbatch: error: fetch_config: DNS SRV lookup failed' >&2\n"
        "echo 'sbatch: error: _establish_config_source: failed to fetch config' >&2\n"
        "echo 'sbatch: fatal: Could not establish a configuration source' >&2\nexit 1\n")
    (fake / "sbatch").chmod(0o755)
    spec = write_spec(tmp_path, "command: [true]\nnodes: 2\nbackend: slurm\n")
    p = run_tc("run", spec, env={"PATH": f"{fake}:{os.environ['PATH']}", "SLURM_CONF": None})
    assert p.returncode == 3, p.stderr
    assert "Slurm is not configured or its controller is not reachable" in p.stderr, p.stderr
    assert "refused" not in p.stderr, p.stderr
    # the real client, where this machine has no slurm.conf of its own
    if not os.path.exists("/etc/slurm/slurm.conf") and have_slurm():
        p = run_tc("run", spec, env={"SLURM_CONF": None}, timeout=120)
        assert p.returncode == 3 and "not configured" in p.stderr, p.stderr
