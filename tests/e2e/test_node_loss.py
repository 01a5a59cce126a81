"""A lost node (docs/slurm.md, "A lost node"): a node whose supervisor ends
without reporting (SIGKILLed, its host gone) while nobody asked the job to
stop is a failure the job restarts from, within restart.max_restarts,
never a stop.

On a localhost Slurm cluster (slurm_cluster.py: slurmd n1, n2 and n3 on
one host, so that a 2-node job can have a spare). The node's processes are found by what they are (a `trainctl
supervise-node JOB` whose srun task is node 1) and killed with SIGKILL, as
when a host dies (node_loss_helpers.py). Every wait is on a condition."""
import json
import os
import re
import subprocess

from conftest import ENV_DUMP, REPO, chromium_or_fail, job_id_in, notes, poll, rank_log, show, wait_until
from node_loss_helpers import (cluster, kill_node_1_when, node_result, node_supervisor,  # noqa: F401 (the fixtures)
                               slurm_tc)
from server_fixture import start_server


# Each rank says which attempt and node it is, logs a few steps; in the first attempt it then
# waits (the kill comes then), later attempts finish.
WORKER = ('echo "attempt $TORCHELASTIC_RESTART_COUNT node $SLURM_NODEID rank $RANK of $WORLD_SIZE";'
          ' for i in 1 2 3; do echo "DLLL {\\"type\\": \\"LOG\\", \\"step\\": [0, $i],'
          ' \\"data\\": {\\"train.loss\\": 1.5}}"; done;'
          ' if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then echo ready; exec sleep 300; fi')


def start_job(trainctl, cluster, tmp_path, name, extra="", policy="", nodes="2", worker=WORKER,
              devices="{type: cpu, per_node: 1}", env=None):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"""
name: {name}
command: '{worker}'
devices: {devices}
nodes: {nodes}
backend: slurm
restart: {{max_restarts: 2, grace_seconds: 3{policy}}}
{extra}""")
    env = dict(os.environ, SLURM_CONF=str(cluster.conf), TRAINCTL_HOME=str(tmp_path / "trainctl-home"),
               **(env or {}))
    return subprocess.Popen([str(trainctl), "run", "-q", str(spec)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_lost_node_restarts_the_job(slurm_tc, cluster, tmp_path, home, trainctl):
    job, rc, err = run_and_kill(trainctl, cluster, tmp_path, home, slurm_tc, "lost1", "")
    assert rc == 0, err + cluster.logs()
    j = show(slurm_tc, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]
    restarting = [e for e in j["events"] if e["state"] == "restarting" and "kind" not in e]
    assert len(restarting) == 1, j["events"]
    why = restarting[0]["reason"]
    assert why.startswith("node 1 (n2) lost: its supervisor ended without reporting"), why
    assert "restarting every node (1 of 2)" in why, why
    # counted apart from a failing worker's restarts: the note, show, the report
    lost = notes(j, "node_lost")
    assert [e["reason"] for e in lost] == [
        "node_lost: node 1 (n2) lost in attempt 0: its supervisor ended without reporting;"
        " restart 1 of 2"], j["events"]
    assert j["restarts_by_cause"] == {"node_lost": 1, "worker_failed": 0}, j
    text = slurm_tc("show", job).stdout
    assert "restarts   1 (1 after a lost node, 0 after a failing worker)" in text, text
    rep = json.load(open(os.path.join(j["run_dir"], "report.json")))
    assert (rep["restarts"], rep["restarts_node_lost"], rep["restarts_worker_failed"]) == (1, 1, 0), rep
    # never recorded as a stop
    assert not [e for e in j["events"] if e["state"] == "killed"], j["events"]
    # the restart ran on both nodes again
    for r in (0, 1):
        assert f"attempt 1 node {r} rank {r} of 2" in rank_log(j, r), rank_log(j, r)


def run_and_kill(trainctl, cluster, tmp_path, home, slurm_tc, name, extra, policy="", nodes="2",
                 ranks=(0, 1), **job):
    """start the job, wait for its ranks' first attempt, SIGKILL node 1; (job id, run's exit, stderr)"""
    proc = start_job(trainctl, cluster, tmp_path, name, extra, policy, nodes, **job)

    def ready(job):
        return lambda: all("ready" in _log(show(slurm_tc, job), r) for r in ranks) and node_supervisor(job, 1)

    return kill_node_1_when(proc, home, cluster, ready, "the ranks in the first attempt")


def test_a_spare_takes_the_lost_node_rank(slurm_tc, cluster, tmp_path, home, trainctl):
    job, rc, err = run_and_kill(trainctl, cluster, tmp_path, home, slurm_tc, "spare1", "spares: 1\n")
    assert rc == 0, err + cluster.logs()
    j = show(slurm_tc, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]
    # the first attempt on n1, n2 (n3 the spare); the restart on n1 and n3, n3 as node 1
    assert [node_result(j, 0, n)["node_name"] for n in (0, 1)] == ["n1", "n2"]
    assert node_result(j, 0, 1)["node_lost"] is True
    assert [node_result(j, 1, n)["node_name"] for n in (0, 1)] == ["n1", "n3"]
    running = [e["reason"] for e in j["events"] if e["state"] == "running" and "kind" not in e]
    assert len(running) == 2 and "spare n3 takes node 1 in place of n2" in running[1], running
    assert "attempt 1 node 1 rank 1 of 2" in rank_log(j, 1), rank_log(j, 1)
    # the lost node's worker told no end: `show` does not call it running once the job ended
    text = slurm_tc("show", job).stdout
    workers = text.split("\nworkers:\n", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"^  0 +1 +\d+ +no end recorded$", workers, re.M), workers
    assert "running" not in workers, workers
    # the batch script asked for the spare and for an allocation that outlives a node
    script = open(os.path.join(j["run_dir"], "job.sbatch")).read()
    assert "#SBATCH --nodes=3\n" in script and "#SBATCH --no-kill\n" in script, script


def test_policy_restart_keeps_the_same_hosts(slurm_tc, cluster, tmp_path, home, trainctl):
    job, rc, err = run_and_kill(trainctl, cluster, tmp_path, home, slurm_tc, "samehosts",
                                "spares: 1\n", ", policy: restart")
    assert rc == 0, err + cluster.logs()
    j = show(slurm_tc, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]
    assert [node_result(j, 1, n)["node_name"] for n in (0, 1)] == ["n1", "n2"]


def test_elastic_job_goes_on_with_fewer_nodes(slurm_tc, cluster, tmp_path, home, trainctl):
    # nodes {min: 1, max: 2}, no spare: node 1 lost -> the restart runs on node 0 alone, world 1
    # (Slurm may start a --nodes=1-2 job on 1 node while others complete: slurm.extra pins 2)
    job, rc, err = run_and_kill(trainctl, cluster, tmp_path, home, slurm_tc, "elastic",
                                'slurm: {extra: ["--nodes=2"]}\n', nodes="{min: 1, max: 2}")
    assert rc == 0, err + cluster.logs()
    j = show(slurm_tc, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]
    assert j["restarts_by_cause"] == {"node_lost": 1, "worker_failed": 0}, j
    assert node_result(j, 1, 0)["node_name"] == "n1"
    assert not os.path.exists(os.path.join(j["run_dir"], "attempts", "1", "node-1.json"))
    running = [e["reason"] for e in j["events"] if e["state"] == "running" and "kind" not in e]
    assert len(running) == 2 and running[1].startswith("restart 1 of 2: 1 worker started on 1 node"), running
    assert "node 1 (n2) left out, no spare left: going on with 1 node" in running[1], running
    # the new round's environment is computed for one node (the worker prints it)
    assert "attempt 1 node 0 rank 0 of 1" in rank_log(j, 0), rank_log(j, 0)
    script = open(os.path.join(j["run_dir"], "job.sbatch")).read()
    assert "#SBATCH --nodes=1-2\n" in script and "#SBATCH --no-kill\n" in script, script


# Each rank dumps its environment per round (env_dump.py into round-<k>/rank-<r>.json), then as WORKER
ENV_WORKER = ('d="$ENV_DUMP_ROOT/round-$TORCHELASTIC_RESTART_COUNT"; mkdir -p "$d" &&'
              f' ENV_DUMP_DIR="$d" /usr/bin/python3 {ENV_DUMP} && echo "dumped $RANK" &&'
              ' if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then echo ready; exec sleep 300; fi')


def test_fewer_nodes_round_env_and_rank_table(slurm_tc, cluster, tmp_path, home, trainctl):
    # The Ascend profile (framework: mindspore on npu: the rank table) with 2 fake npus a node,
    # nodes {min: 1, max: 2}, no spare: the round after node 1 is lost has the torchrun set, the
    # rank-table variables and hccl.json of a one-node world, computed anew (not the old ones)
    for n in (0, 1):
        (tmp_path / f"hccn-{n}.conf").write_text(
            f"address_0=192.168.{n}.10\naddress_1=192.168.{n}.11\n")
    dump = tmp_path / "env"
    job, rc, err = run_and_kill(
        trainctl, cluster, tmp_path, home, slurm_tc, "elastic-npu",
        'framework: mindspore\nslurm: {gres: none, extra: ["--nodes=2"]}\n', nodes="{min: 1, max: 2}",
        ranks=(0, 1, 2, 3), worker=ENV_WORKER,
        devices=f'{{type: npu, per_node: 2, hccn_conf: "{tmp_path}/hccn-{{node}}.conf"}}',
        env={"TRAINCTL_FAKE_DEVICES": "npu:8", "ENV_DUMP_ROOT": str(dump)})
    assert rc == 0, err + cluster.logs()
    j = show(slurm_tc, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]
    running = [e["reason"] for e in j["events"] if e["state"] == "running" and "kind" not in e]
    assert "node 1 (n2) left out, no spare left: going on with 1 node" in running[1], running

    def envs(round_):
        d = dump / f"round-{round_}"
        return {int(f.stem.split("-")[1]): json.loads(f.read_text()) for f in d.glob("rank-*.json")}

    def table(round_):
        return json.load(open(os.path.join(j["run_dir"], "ranktable", f"attempt-{round_}", "hccl.json")))

    for round_, nodes in ((0, 2), (1, 1)):
        e = envs(round_)
        world = 2 * nodes
        assert sorted(e) == list(range(world)), (round_, sorted(e))
        master = open(os.path.join(j["run_dir"], "attempts", str(round_), "master")).read().strip()
        for r, v in e.items():
            want = {"RANK": r, "WORLD_SIZE": world, "ROLE_WORLD_SIZE": world, "LOCAL_WORLD_SIZE": 2,
                    "LOCAL_RANK": r % 2, "GROUP_RANK": r // 2, "GROUP_WORLD_SIZE": nodes,
                    "TORCHELASTIC_RESTART_COUNT": round_, "RANK_ID": r, "RANK_SIZE": world,
                    "SERVER_ID": r // 2, "DEVICE_NUM": 2, "DEVICE_ID": r % 2,
                    "RANK_TABLE_FILE": os.path.join(j["run_dir"], "ranktable", f"attempt-{round_}",
                                                    "hccl.json")}
            got = {k: v.get(k) for k in want}
            assert got == {k: str(x) for k, x in want.items()}, (round_, r, got)
            # trainctl sets no NNODES (nor does torchrun); where one is set it must be this round's.
            # The round's srun spans its own nodes: Slurm's step variables agree.
            assert v.get("NNODES") in (None, str(nodes)), (round_, r, v.get("NNODES"))
            assert (v.get("SLURM_NNODES"), v.get("SLURMD_NODENAME")) == (str(nodes), f"n{r // 2 + 1}"), \
                (round_, r, v.get("SLURM_NNODES"), v.get("SLURMD_NODENAME"))
            assert f"{v['MASTER_ADDR']}:{v['MASTER_PORT']}" == master, (round_, r, master)
        t = table(round_)
        assert t["server_count"] == str(nodes), t
        assert [[(d["rank_id"], d["device_id"], d["device_ip"]) for d in s["device"]] for s in t["server_list"]] \
            == [[(str(2 * n + i), str(i), f"192.168.{n}.1{i}") for i in (0, 1)] for n in range(nodes)], t


def test_elastic_job_below_min_fails_with_the_reason(slurm_tc, cluster, tmp_path, home, trainctl):
    # nodes {min: 2, max: 3} on an allocation of 2 (slurm.extra has the last word): no spare,
    # and one node fewer is below min; wait: 0 fails at once (waiting: test_node_loss_elastic.py)
    job, rc, err = run_and_kill(trainctl, cluster, tmp_path, home, slurm_tc, "elastic2",
                                'slurm: {extra: ["--nodes=2"]}\n', nodes="{min: 2, max: 3, wait: 0}")
    assert rc == 1, err
    j = show(slurm_tc, job)
    assert j["state"] == "failed", j["events"]
    assert j["root_cause"].startswith("node 1 (n2) is left out and no spare is left: 1 node would be "
                                      "fewer than nodes.min 2"), j["root_cause"]


def _log(job, rank):
    try:
        return rank_log(job, rank)
    except OSError:
        return ""


def test_a_stop_is_still_a_stop(slurm_tc, cluster, tmp_path, home, trainctl):
    # `trainctl stop` while both nodes run: killed, no restart (a stop is no lost node)
    proc = start_job(trainctl, cluster, tmp_path, "stopped1")
    try:
        job = wait_until(lambda: job_id_in(home), timeout=120, what="the job's row")
        wait_until(lambda: all("ready" in _log(show(slurm_tc, job), r) for r in (0, 1)),
                   timeout=240, what="both ranks in the first attempt")
        p = slurm_tc("stop", job)
        assert p.returncode == 0, p.stderr
        proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    j = show(slurm_tc, job)
    assert j["state"] == "killed" and j["restarts"] == 0, j["events"]
    assert not notes(j, "node_lost"), j["events"]
    assert poll(cluster.nodes_idle, 120, 0.3), cluster.squeue()


def test_a_failing_worker_restart_is_counted_as_such(run_tc, tmp_path):
    # one machine: the worker fails in the first attempt, the restart succeeds
    spec = tmp_path / "job.yaml"
    spec.write_text("""
name: flaky
command: 'test "$TORCHELASTIC_RESTART_COUNT" != 0'
restart: {max_restarts: 1}
""")
    p = run_tc("run", "-q", spec)
    assert p.returncode == 0, p.stderr
    j = show(run_tc, "flaky")
    assert j["restarts"] == 1 and not notes(j, "node_lost"), j["events"]
    assert j["restarts_by_cause"] == {"node_lost": 0, "worker_failed": 1}, j
    text = run_tc("show", "flaky").stdout
    assert "restarts   1 (0 after a lost node, 1 after a failing worker)" in text, text


def test_bad_node_keys_are_refused_with_their_name(run_tc, tmp_path):
    for body, msg in (("nodes: {min: 3, max: 2}", "nodes: min (3) is more than max (2)"),
                      ("nodes: {min: 2}", "nodes: takes both min and max"),
                      ("restart: {policy: [replace, restart]}", "the list names replace or restart only once"),
                      ("spares: -1", "spares: must be between 0 and 4096")):
        spec = tmp_path / "bad.yaml"
        spec.write_text(f"name: bad\ncommand: 'true'\nbackend: slurm\n{body}\n")
        p = run_tc("run", "-q", spec)
        assert p.returncode == 2 and msg in p.stderr and "bad.yaml:" in p.stderr, (body, p.stderr)


def _round_line(text, attempt):
    return next((ln for ln in text.splitlines() if ln.startswith(f"round {attempt} ")), None)


def test_rounds_say_who_ran_each_attempt(slurm_tc, cluster, tmp_path, home, trainctl):
    # a spare job: round 0 on n1, n2; node 1 lost; round 1 on n1, n3 with n3 in n2's place
    job, rc, err = run_and_kill(trainctl, cluster, tmp_path, home, slurm_tc, "rounds1", "spares: 1\n")
    assert rc == 0, err + cluster.logs()
    j = show(slurm_tc, job)
    rounds = j["rounds"]
    assert [r["attempt"] for r in rounds] == [0, 1], rounds
    assert rounds[0]["members"] == ["n1", "n2"] and rounds[0]["nodes"] == 2, rounds
    assert rounds[0]["left_out"] == [] and rounds[0]["spares"] == [], rounds
    assert rounds[0]["lost_at"] is None and rounds[0]["loss_to_first_step_s"] is None, rounds
    r = rounds[1]
    assert r["members"] == ["n1", "n3"] and r["nodes"] == 2, r
    assert r["left_out"] == [{"node": 1, "host": "n2", "why": "lost",
                              "cause": "its supervisor ended without reporting"}], r
    assert r["spares"] == [{"node": 1, "host": "n3", "in_place_of": "n2"}], r
    # measured from the driver seeing the attempt fail to rank 0's first step of attempt 1
    assert r["lost_at"] < r["started"], r
    assert 0 < r["loss_to_first_step_s"] < 300, r
    # each round is a note of its own, its first line for people
    assert [e["reason"].split("\n")[0] for e in notes(j, "round")] == [
        "round: attempt 0: 2 nodes n1,n2",
        "round: attempt 1: 2 nodes n1,n3; node 1 (n2) lost: its supervisor ended without reporting;"
        " spare n3 takes node 1"], j["events"]
    text = slurm_tc("show", job).stdout
    line = _round_line(text, 1)
    assert line and line.startswith("round 1    2 nodes n1,n3  n2 lost (its supervisor ended without"
                                    " reporting)  spare n3 -> node 1  first step "), text
    assert line.endswith(" s after the loss") and _round_line(text, 0) is None, text
    # the report has the same rounds
    rep = json.load(open(os.path.join(j["run_dir"], "report.json")))
    assert [x["spares"] for x in rep["rounds"]] == [[], r["spares"]], rep["rounds"]
    assert rep["rounds"][1]["loss_to_first_step_s"] == r["loss_to_first_step_s"], rep["rounds"]


def test_rounds_of_an_elastic_job(slurm_tc, cluster, tmp_path, home, trainctl):
    # no spare, nodes {min: 1, max: 2}: round 1 runs on n1 alone, n2 left out, no spare used
    job, rc, err = run_and_kill(trainctl, cluster, tmp_path, home, slurm_tc, "rounds2",
                                'slurm: {extra: ["--nodes=2"]}\n', nodes="{min: 1, max: 2}")
    assert rc == 0, err + cluster.logs()
    j = show(slurm_tc, job)
    r = j["rounds"][-1]
    assert len(j["rounds"]) == 2 and r["attempt"] == 1, j["rounds"]
    assert r["members"] == ["n1"] and r["nodes"] == 1 and r["spares"] == [], r
    assert [(x["node"], x["host"], x["why"]) for x in r["left_out"]] == [(1, "n2", "lost")], r
    assert r["loss_to_first_step_s"] is not None, r
    line = _round_line(slurm_tc("show", job).stdout, 1)
    assert line and line.startswith("round 1    1 node n1  n2 lost ("), line


def test_spares_on_one_machine_run_and_say_so(run_tc, tmp_path):
    # no Slurm: spares have no node to replace; the job runs and one event says so
    spec = tmp_path / "job.yaml"
    spec.write_text("name: onebox\ncommand: 'echo hi'\nspares: 2\n")
    p = run_tc("run", "-q", spec)
    assert p.returncode == 0, p.stderr
    j = show(run_tc, "onebox")
    assert j["state"] == "succeeded", j["events"]
    assert [e["reason"] for e in notes(j, "spares_ignored")] == [
        "spares_ignored: spares: 2 is for multi-node Slurm jobs: ignored on one machine"], j["events"]
    assert j["rounds"] == [], j


def test_the_job_page_shows_the_rounds(slurm_tc, cluster, tmp_path, home, trainctl):
    # the round records of a real Slurm job with a spare, on its page from a server on its
    # state folder; then a host and cause carrying markup (put in at the browser: no Slurm
    # host is named so) stay text
    node = chromium_or_fail()
    job, rc, err = run_and_kill(trainctl, cluster, tmp_path, home, slurm_tc, "roundsui", "spares: 1\n")
    assert rc == 0, err + cluster.logs()
    hostile = "<b>n9</b><img src=x onerror=window.__pwned=1>"
    srv = start_server(trainctl, home, env={"SLURM_CONF": str(cluster.conf)})
    try:
        wait_until(lambda: "open the web UI" in srv.log(), timeout=60, what="the server's login URL")
        p = subprocess.run([node, str(REPO / "tests" / "ui" / "ui_rounds.js"), srv.url, srv.login_url(),
                            job, hostile], capture_output=True, text=True, timeout=300)
    finally:
        srv.stop()
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines, p.stdout + p.stderr
    r = json.loads(lines[-1])
    assert not r.get("pageerrors"), r
    real = r["real"]
    assert [row[:3] for row in real] == [["0", "2", "0: n1, 1: n2"], ["1", "2", "0: n1, 1: n3"]], real
    assert real[0][3:5] == ["-", "-"], real
    assert real[1][3] == "node 1 (n2) lost: its supervisor ended without reporting", real
    assert real[1][4] == "n3 \u2192 node 1 in place of n2", real
    assert real[1][5].endswith(" s") and real[0][5] == "-", real
    # markup stays text: no element, no handler, shown as written
    assert r["extra"] == {} and r["handlers"] == 0 and r["pwned"] is None, r
    assert r["hostile"][1][3] == f"node 1 ({hostile}) lost: {hostile}", r
    assert r["hostile"][1][4] == f"{hostile} \u2192 node 1 in place of n2", r
