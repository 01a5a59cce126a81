"""The hub of a Slurm job (docs/slurm.md, "Deployment"): node supervisors and
the batch driver report to the foreground `trainctl run`, which is the job's
one writer.  On the localhost 2-node cluster (slurm_cluster.py): the run's
terminal is SIGKILLed mid-job, the job goes on (its supervisors journal what
they cannot send), and a later `trainctl ps` on the submit host starts a hub
again that takes the backlog: every metric point, worker and state change
ends up in the database exactly once."""
import json
import os
import signal
import sqlite3
import subprocess

from conftest import poll, wait_until
from slurm_cluster import HUB_COUNTER as COUNTER, cluster  # noqa: F401  (the fixture)

STEPS = 40  # per rank before the hub dies, and as many after


def rows(home, sql):
    try:
        with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
            return c.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []


def points(home):
    r = rows(home, "SELECT COALESCE(SUM(count), 0) FROM metric_chunks")
    return r[0][0] if r else 0


def tc(trainctl, home, cluster, *args, env=None):
    e = dict(os.environ, TRAINCTL_HOME=str(home), SLURM_CONF=str(cluster.conf), **(env or {}))
    return subprocess.run([str(trainctl), *args], env=e, capture_output=True, text=True,
                          timeout=120)


def test_hub_killed_mid_job_catches_up_exactly_once(trainctl, home, tmp_path, cluster):
    script = tmp_path / "counter.py"
    script.write_text(COUNTER.replace("STEPS", str(STEPS)))
    go = tmp_path / "go"
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""
name: counted
command: ["/usr/bin/python3", "{script}", "{go}"]
devices: {{type: cpu, per_node: 1}}
nodes: 2
backend: slurm
""")
    env = dict(os.environ, TRAINCTL_HOME=str(home), SLURM_CONF=str(cluster.conf),
               TRAINCTL_HUB_LISTEN="127.0.0.1")
    run = subprocess.Popen([str(trainctl), "run", "--quiet", str(spec)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the channel works: the hub (the run) stores the first half from both nodes
    wait_until(lambda: points(home) == 2 * STEPS, timeout=240,
               what=lambda: f"{2 * STEPS} points through the hub, have {points(home)}; "
               + (run.poll() is not None and run.communicate()[1] or ""))
    url = rows(home, "SELECT url FROM hub_jobs")[0][0]
    assert url.startswith("http://127.0.0.1:"), url
    # the terminal dies; the job goes on and finishes its second half meanwhile
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    go.write_text("go")
    job = rows(home, "SELECT id, run_dir FROM jobs")[0]
    logs = os.path.join(job[1], "logs")
    wait_until(lambda: all("done" in open(os.path.join(logs, f"rank-{r}.log")).read()
                           for r in range(2) if os.path.exists(os.path.join(logs, f"rank-{r}.log"))),
               timeout=120, what="both ranks done")
    assert points(home) == 2 * STEPS  # nobody else writes the database
    # an hour later, on the submit host: ps finds the hub gone and starts one
    p = tc(trainctl, home, cluster, "ps")
    assert p.returncode == 0, p.stderr
    def why():
        out = os.path.join(logs, "hub.out")
        return "the job's end: " + str(rows(home, "SELECT state FROM jobs")) + \
            (open(out).read() if os.path.exists(out) else " (no hub.out)")

    wait_until(lambda: rows(home, f"SELECT state FROM jobs WHERE id = '{job[0]}'")[0][0] == "succeeded",
               timeout=240, what=why)
    assert os.path.exists(os.path.join(logs, "hub.out"))
    # exactly once: every point, worker and state change
    assert points(home) == 4 * STEPS
    assert rows(home, "SELECT COUNT(*) FROM metric_series") == [(2,)]
    assert sorted(rows(home, "SELECT attempt, rank FROM workers")) == [(0, 0), (0, 1)]
    ev = [s for (s,) in rows(home, "SELECT state FROM events WHERE reason NOT LIKE 'round: %' ORDER BY rowid")]
    assert ev.count("running") == 1 and ev.count("succeeded") == 1, ev
    show = json.loads(tc(trainctl, home, cluster, "show", "counted", "--json").stdout)
    assert show["state"] == "succeeded"
    # every stream was acknowledged to its last record (its journal then retired: .done)
    acked = dict(rows(home, "SELECT stream, acked FROM hub_streams"))
    journal = os.path.join(home, "journal", job[0])
    # a supervisor retires its journal once its last ack is in, a moment after the hub has it
    wait_until(lambda: all(n.endswith(".jsonl.done") for n in os.listdir(journal)), timeout=60,
               what=lambda: f"every journal sent to its end: {os.listdir(journal)}")
    for name in os.listdir(journal):
        lines = open(os.path.join(journal, name)).read().splitlines()
        assert acked[name[:-len(".jsonl.done")]] == len(lines), (name, acked)
    # the revived hub leaves once the job is over
    assert poll(lambda: "over" in open(os.path.join(logs, "hub.out")).read(), timeout=60)


def test_hub_down_at_the_end_pulls_what_the_nodes_left(trainctl, home, tmp_path, cluster):
    """The hub is gone when the job ends: each supervisor waits TRAINCTL_HUB_WAIT (here 2 s)
    and exits, its journal left on its node, and Slurm frees the nodes.  A later `ps` starts
    a hub, which runs `trainctl hub JOB --flush` on the job's nodes: nothing lost, nothing
    twice, and the end is the driver's own."""
    script = tmp_path / "counter.py"
    script.write_text(COUNTER.replace("STEPS", str(STEPS)))
    go = tmp_path / "go"
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""
name: left
command: ["/usr/bin/python3", "{script}", "{go}"]
devices: {{type: cpu, per_node: 1}}
nodes: 2
backend: slurm
""")
    env = dict(os.environ, TRAINCTL_HOME=str(home), SLURM_CONF=str(cluster.conf),
               TRAINCTL_HUB_LISTEN="127.0.0.1", TRAINCTL_HUB_WAIT="2")
    run = subprocess.Popen([str(trainctl), "run", "--quiet", str(spec)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: points(home) == 2 * STEPS, timeout=240,
               what=lambda: f"{2 * STEPS} points through the hub, have {points(home)}; "
               + (run.poll() is not None and run.communicate()[1] or ""))
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    go.write_text("go")
    job_id, run_dir, slurm_job = rows(home, "SELECT id, run_dir, slurm_job FROM jobs WHERE name = 'left'")[0]
    # Slurm is done with the job while nobody listens: the supervisors gave up waiting
    def slurm_done():
        p = subprocess.run(["squeue", "-h", "-j", slurm_job], env=env, capture_output=True, text=True)
        return p.returncode == 0 and not p.stdout.strip()
    wait_until(slurm_done, timeout=240, what=lambda: f"Slurm job {slurm_job} over")
    journal = os.path.join(home, "journal", job_id)
    left = [n for n in os.listdir(journal) if n.endswith(".jsonl")]
    assert left, os.listdir(journal)  # what the hub never acknowledged stays on the node
    assert points(home) == 2 * STEPS
    assert rows(home, f"SELECT state FROM jobs WHERE id = '{job_id}'")[0][0] == "running"
    # later, on the submit host
    p = tc(trainctl, home, cluster, "ps")
    assert p.returncode == 0, p.stderr
    out = os.path.join(run_dir, "logs", "hub.out")

    def why():
        return "the job's end: " + str(rows(home, "SELECT state FROM jobs")) + \
            (open(out).read() if os.path.exists(out) else " (no hub.out)")

    wait_until(lambda: rows(home, f"SELECT state FROM jobs WHERE id = '{job_id}'")[0][0] != "running",
               timeout=240, what=why)
    # the end may come in before another node's journal: the hub says "over" after the pull
    wait_until(lambda: os.path.exists(out) and "over" in open(out).read(), timeout=240, what=why)
    (state, cause), = rows(home, f"SELECT state, root_cause FROM jobs WHERE id = '{job_id}'")
    assert state == "succeeded", why()
    assert points(home) == 4 * STEPS
    assert sorted(rows(home, f"SELECT attempt, rank FROM workers WHERE job_id = '{job_id}'")) == [(0, 0), (0, 1)]
    ev = rows(home, f"SELECT state, reason FROM events WHERE job_id = '{job_id}' ORDER BY rowid")
    states = [s for s, r in ev if not r.startswith("round: ")]  # a round note is no change
    assert states.count("running") == 1 and states.count("succeeded") == 1, ev
    assert len(ev) - len(states) == 1, ev  # the one round, once
    assert ev[-1][1] == "every worker on every node exited 0", ev  # the driver's, not Slurm's
    assert "taking what its nodes" in open(out).read()
    assert all(n.endswith(".jsonl.done") for n in os.listdir(journal)), os.listdir(journal)
    p = tc(trainctl, home, cluster, "report", job_id, "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["job"] == job_id, p.stderr


def test_without_a_hub_nodes_write_the_shared_database(trainctl, home, tmp_path, cluster):
    """TRAINCTL_HUB=off: today's shared-filesystem behaviour, nodes write the database."""
    spec = tmp_path / "job.yaml"
    spec.write_text("""
name: direct
command: 'echo "DLLL {\\"type\\": \\"LOG\\", \\"step\\": [0, 1], \\"data\\": {\\"x\\": $RANK}}"'
devices: {type: cpu, per_node: 1}
nodes: 2
backend: slurm
""")
    p = tc(trainctl, home, cluster, "run", "--quiet", str(spec), env={"TRAINCTL_HUB": "off"})
    assert p.returncode == 0, p.stderr + cluster.logs()
    assert rows(home, "SELECT COUNT(*) FROM hub_jobs") == [(0,)]
    assert points(home) == 2


def test_server_is_the_hub_and_catches_up_after_sigkill(trainctl, home, tmp_path, cluster):
    """A job submitted to `trainctl server` reports to the server; the server is
    SIGKILLed mid-job and started again on its port: nothing lost, nothing twice."""
    from server_fixture import start_server
    script = tmp_path / "counter.py"
    script.write_text(COUNTER.replace("STEPS", str(STEPS)))
    go = tmp_path / "go"
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""
name: srv-counted
command: ["/usr/bin/python3", "{script}", "{go}"]
devices: {{type: cpu, per_node: 1}}
nodes: 2
backend: slurm
""")
    srv = start_server(trainctl, home, env={"SLURM_CONF": str(cluster.conf)})
    try:
        p = srv.cli("submit", str(spec))
        assert p.returncode == 0, p.stderr
        job_id = p.stdout.strip()
        wait_until(lambda: points(home) == 2 * STEPS, timeout=240,
                   what=lambda: f"{2 * STEPS} points through the server, have {points(home)}: "
                   + srv.log()[-2000:])
        url = rows(home, "SELECT url FROM hub_jobs")[0][0]
        assert url == srv.url, (url, srv.url)
        srv.stop(signal.SIGKILL)
        go.write_text("go")
        run_dir = rows(home, f"SELECT run_dir FROM jobs WHERE id = '{job_id}'")[0][0]
        logs = os.path.join(run_dir, "logs")
        wait_until(lambda: all(os.path.exists(os.path.join(logs, f"rank-{r}.log")) and
                               "done" in open(os.path.join(logs, f"rank-{r}.log")).read()
                               for r in range(2)), timeout=120, what="both ranks done")
        assert points(home) == 2 * STEPS
        srv.start()  # the same port: the nodes' senders find it again
        job = srv.wait_state(job_id, ["succeeded", "failed", "killed", "lost"], timeout=240)
        assert job["state"] == "succeeded", (job["state"], srv.log()[-3000:])
        assert points(home) == 4 * STEPS
        assert sorted(rows(home, "SELECT attempt, rank FROM workers")) == [(0, 0), (0, 1)]
        ev = [s for (s,) in rows(home, "SELECT state FROM events WHERE reason NOT LIKE 'round: %' ORDER BY rowid")]
        assert ev.count("running") == 1 and ev.count("succeeded") == 1, ev
        # the server, the job's hub, writes its report once Slurm is done with it
        report = os.path.join(run_dir, "report.json")
        wait_until(lambda: os.path.exists(report), timeout=120,
                   what=lambda: "report.json of the server's Slurm job: " + srv.log()[-2000:])
        st, body = srv.call("GET", f"/api/v1/jobs/{job_id}/report")
        assert st == 200 and body["job"] == job_id and body["restarts"] == 0, (st, body)
        p = srv.cli("report", job_id, "--json")
        assert p.returncode == 0 and json.loads(p.stdout)["job"] == job_id, p.stdout + p.stderr
    finally:
        srv.stop()
