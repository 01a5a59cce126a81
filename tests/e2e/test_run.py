"""End-to-end tests of `trainctl run` and the verbs that read its state
(ps, show, logs): real processes, real signals, a real SQLite database."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import PYTHON, REPO, poll, wait_until


def spec(tmp_path, text, name="job.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def jobs_in_db(home):
    db = os.path.join(home, "trainctl.db")
    if not os.path.exists(db):
        return []
    with sqlite3.connect(db) as c:
        return c.execute("SELECT id, state FROM jobs").fetchall()


def show(run_tc, job):
    p = run_tc("show", job, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def pids_alive(pids):
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state != "Z":
                alive.append(pid)
        except FileNotFoundError:
            pass
    return alive


def wait_for(pred, timeout=60, step=0.05):
    return poll(pred, timeout, step)


def rank_log(home, rank):
    """The text of the (only) job's rank log so far, "" before there is one."""
    db = os.path.join(home, "trainctl.db")
    try:
        with sqlite3.connect(db) as c:
            row = c.execute("SELECT run_dir FROM jobs").fetchone()
        with open(os.path.join(row[0], "logs", f"rank-{rank}.log")) as f:
            return f.read()
    except (sqlite3.OperationalError, TypeError, OSError):
        return ""


def wait_for_output(home, text, ranks=(0,)):
    """Until every rank's log shows text (a worker says it is ready)."""
    wait_until(lambda: all(text in rank_log(home, r) for r in ranks), timeout=120,
               what=lambda: f"{text!r} in the logs of ranks {ranks}: " +
               repr({r: rank_log(home, r)[-300:] for r in ranks}))


# ---- the basics -------------------------------------------------------------

def test_adhoc_run_logs_and_ps(run_tc, home):
    p = run_tc("run", "--nproc", "2", "--name", "hello", "--",
               "/bin/sh", "-c", 'echo "out $RANK/$WORLD_SIZE"; echo "err $RANK" >&2; printf "no newline $RANK"')
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    for r in (0, 1):
        assert f"[{r}] out {r}/2" in lines
        assert f"[{r}] err {r}" in lines
        assert f"[{r}] no newline {r}" in lines
    job = show(run_tc, "hello")
    assert job["state"] == "succeeded" and job["exit_code"] == 0 and job["workers"] == 2
    run_dir = job["run_dir"]
    last = {}
    for r in (0, 1):
        # stdout and stderr are two pipes: which the supervisor reads first is
        # up to the scheduler, so only each stream's own order is certain
        text = open(os.path.join(run_dir, "logs", f"rank-{r}.log")).read()
        assert text.endswith("\n")  # the unfinished last line was finished
        lines = text.splitlines()
        assert sorted(lines) == sorted([f"out {r}/2", f"err {r}", f"no newline {r}"]), text
        assert lines.index(f"out {r}/2") < lines.index(f"no newline {r}"), text
        last[r] = lines[-1]
    for f in ("job.yaml", "job.env", "logs/supervisor.log"):
        assert os.path.exists(os.path.join(run_dir, f)), f
    for d in ("output/checkpoints", "output/tensorboard", "data"):
        assert os.path.isdir(os.path.join(run_dir, d)), d
    ps = json.loads(run_tc("ps", "--json").stdout)
    assert ps[0]["id"] == job["id"] and ps[0]["state"] == "succeeded"
    assert job["id"] in run_tc("ps").stdout
    # logs: one rank, tail
    out = run_tc("logs", job["id"], "--rank", "1").stdout
    assert out == open(os.path.join(run_dir, "logs", "rank-1.log")).read()
    out = run_tc("logs", job["id"], "--rank", "1", "--tail", "1").stdout
    assert out == last[1] + "\n"
    out = run_tc("logs", job["id"], "--tail", "1").stdout
    assert out.splitlines() == [f"[0] {last[0]}", f"[1] {last[1]}"]
    states = [e["state"] for e in job["events"]]
    assert states == ["starting", "running", "succeeded"]


def test_args_never_through_a_shell(run_tc, home, tmp_path):
    marker = tmp_path / "pwned"
    s = spec(tmp_path, f"""
name: argv
command: ["{PYTHON}", "-c", "import sys; print(repr(sys.argv[1:]))"]
args: {{lr: "0.1; touch {marker}", flag: null, name: "a b"}}
""")
    p = run_tc("run", s)
    assert p.returncode == 0, p.stderr
    assert f"[0] ['--lr', '0.1; touch {marker}', '--flag', '--name', 'a b']" in p.stdout
    # a string command gets the args as "$@", unparsed
    s = spec(tmp_path, f"""
name: shellargs
command: 'for a in "$@"; do echo "<$a>"; done'
args: {{x: "$(touch {marker})"}}
""", "shell.yaml")
    p = run_tc("run", s)
    assert p.returncode == 0, p.stderr
    assert "[0] <--x>" in p.stdout and f"[0] <$(touch {marker})>" in p.stdout
    assert not marker.exists()


def test_workdir_defaults_to_spec_folder(run_tc, home, tmp_path):
    sub = tmp_path / "proj"
    sub.mkdir()
    s = spec(sub, "command: [pwd]\n")
    p = run_tc("run", s, cwd="/")
    assert p.returncode == 0
    assert f"[0] {sub}" in p.stdout


# ---- environment parity with torchrun ------------------------------------------

TORCHRUN_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                 "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
                 "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
                 "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
                 "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
                 "OMP_NUM_THREADS", "NCCL_ASYNC_ERROR_HANDLING"]
# may differ by nature: ports, run ids, file paths (and the loopback spelling)
DIFFERENT_BY_NATURE = {"MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "MASTER_ADDR"}


def dump_env(cmd, outdir, env):
    outdir.mkdir()
    e = dict(env, ENV_DUMP_DIR=str(outdir))
    e.pop("OMP_NUM_THREADS", None)
    tries = []

    def ran():
        tries.append(subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300))
        # torchrun --standalone always binds port 29400: wait out whoever holds it
        return tries[-1].returncode == 0 or "Address already in use" not in tries[-1].stderr

    poll(ran, timeout=180, step=2)
    p = tries[-1]
    assert p.returncode == 0, p.stderr
    return [json.load(open(outdir / f"rank-{r}.json")) for r in (0, 1)]


def test_environment_parity_with_torchrun(run_tc, home, tmp_path, torchrun_cmd, trainctl):
    worker = os.path.join(REPO, "tests", "e2e", "env_dump.py")
    base = dict(os.environ, TRAINCTL_HOME=str(home))
    theirs = dump_env(torchrun_cmd() + ["--standalone", "--nproc_per_node", "2", worker],
                      tmp_path / "torchrun", base)
    ours = dump_env([trainctl, "run", "--quiet", "--nproc", "2", "--", PYTHON, worker],
                    tmp_path / "trainctl", base)
    outside = set(base) | {"ENV_DUMP_DIR"}
    torchrun_gives = {k for k in theirs[0] if k not in outside or k == "OMP_NUM_THREADS"}
    # every variable torchrun gives a worker is in our list, so we check them all
    assert torchrun_gives <= set(TORCHRUN_VARS), torchrun_gives - set(TORCHRUN_VARS)
    for r in (0, 1):
        for k in TORCHRUN_VARS:
            assert k in ours[r], f"rank {r} lacks {k}"
            if k not in DIFFERENT_BY_NATURE:
                assert ours[r][k] == theirs[r][k], (k, ours[r][k], theirs[r][k])
        assert ours[r]["MASTER_ADDR"] in ("127.0.0.1", "localhost")
        assert theirs[r]["MASTER_ADDR"] in ("127.0.0.1", "localhost") or theirs[r]["MASTER_ADDR"]
        assert 0 < int(ours[r]["MASTER_PORT"]) < 65536
        assert ours[r]["MASTER_PORT"] == ours[1 - r]["MASTER_PORT"]
        assert ours[r]["TORCHELASTIC_RUN_ID"] == ours[r]["TRAINCTL_JOB_ID"]
        assert ours[r]["TORCHELASTIC_ERROR_FILE"].endswith(f"error-rank-{r}.json")
        assert ours[r]["TORCHELASTIC_ERROR_FILE"] != ours[1 - r]["TORCHELASTIC_ERROR_FILE"]
        for k in ("TRAINCTL_JOB_ID", "TRAINCTL_OUTPUT_DIR", "TRAINCTL_CKPT_DIR", "TRAINCTL_DATA_DIR",
                  "TRAINCTL_LOG_DIR", "TRAINCTL_TENSORBOARD_DIR"):
            assert ours[r][k], k
    # job.env holds the common part, sourceable by a shell
    job = json.loads(run_tc("ps", "--json").stdout)[0]
    envfile = os.path.join(job["run_dir"], "job.env")
    out = subprocess.run(["/bin/sh", "-c", f". '{envfile}' && echo $WORLD_SIZE:$TRAINCTL_JOB_ID"],
                         capture_output=True, text=True).stdout.strip()
    assert out == f"2:{job['id']}"


# ---- failures ------------------------------------------------------------------

def test_rank_failure_names_root_cause(run_tc, home, tmp_path):
    s = spec(tmp_path, f"""
name: fails
command: ["{PYTHON}", "-c", "import os, sys, time\\nr = int(os.environ['RANK'])\\nprint('rank', r, 'up', flush=True)\\nif r == 1:\\n    time.sleep(0.5); print('boom', flush=True); sys.exit(3)\\ntime.sleep(120)"]
devices: {{type: cpu, per_node: 2}}
restart: {{grace_seconds: 5}}
""")
    t0 = time.time()
    p = run_tc("run", s, timeout=300)
    took = time.time() - t0
    assert p.returncode == 1, p.stderr
    assert "rank 1 exited with code 3" in p.stderr
    assert "boom" in p.stderr  # the last lines of its log
    # left running, the healthy rank takes 120 s; stopped, it died of the
    # SIGTERM (checked below) rather than of the SIGKILL after the grace
    assert took < 100, f"the healthy rank was not stopped ({took:.1f}s)"
    job = show(run_tc, "fails")
    assert job["state"] == "failed" and job["exit_code"] == 1
    assert job["root_cause"].startswith("rank 1 exited with code 3")
    w = {x["rank"]: x for x in job["workers_history"]}
    assert w[1]["exit_code"] == 3
    assert w[0]["signal"] == signal.SIGTERM  # stopped by us, not left running
    assert "root cause: rank 1 exited with code 3" in run_tc("show", "fails").stdout


def test_python_traceback_from_error_file(run_tc, home, tmp_path):
    script = tmp_path / "crash.py"
    script.write_text("""
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    raise ValueError("bad learning rate 42")

main()
""")
    p = run_tc("run", "--", PYTHON, str(script), timeout=120)
    assert p.returncode == 1
    assert "rank 0 exited with code 1" in p.stderr
    assert "error reported by rank 0" in p.stderr
    assert "ValueError: bad learning rate 42" in p.stderr


def test_command_not_found(run_tc, home, tmp_path):
    # caught before anything starts or is recorded (issue 16, 3.4)
    p = run_tc("run", "--", "/nonexistent/prog")
    assert p.returncode == 2, p.stderr
    assert "run: '/nonexistent/prog' does not exist" in p.stderr
    p = run_tc("run", "--", "pyhton3", "-c", "1")
    assert p.returncode == 2, p.stderr
    assert "'pyhton3' is not found on PATH (did you mean 'python3'?)" in p.stderr
    assert jobs_in_db(home) == []
    # what only exec can tell (an interpreter that is not there) is still the rank's 127
    script = tmp_path / "prog"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    p = run_tc("run", "--", str(script))
    assert p.returncode == 1
    assert "rank 0 exited with code 127" in p.stderr
    assert f"cannot run '{script}'" in p.stderr


def test_killed_rank_restarts_group(run_tc, home, tmp_path):
    # rank 1 of the first attempt kills itself; the restart sees RESTART_COUNT=1
    s = spec(tmp_path, f"""
name: restarts
command: ["{PYTHON}", "-c", "import os, signal, time\\nr=os.environ['RANK']; n=os.environ['TORCHELASTIC_RESTART_COUNT']\\nprint('attempt', n, 'resume', os.environ.get('TRAINCTL_RESUME_FROM'), flush=True)\\nif n == '0':\\n    open(os.path.join(os.environ['TRAINCTL_CKPT_DIR'], 'step-5.pt'), 'w').write('x')\\n    time.sleep(0.3)\\n    if r == '1': os.kill(os.getpid(), signal.SIGKILL)\\n    time.sleep(60)"]
devices: {{type: cpu, per_node: 2}}
restart: {{max_restarts: 1, grace_seconds: 5}}
""")
    p = run_tc("run", s, timeout=300)
    assert p.returncode == 0, p.stderr
    job = show(run_tc, "restarts")
    assert job["restarts"] == 1 and job["state"] == "succeeded"
    reasons = [(e["state"], e["reason"]) for e in job["events"]]
    assert any(st == "restarting" and "rank 1 was killed by signal 9" in why for st, why in reasons), reasons
    ckpt = os.path.join(job["run_dir"], "output", "checkpoints", "step-5.pt")
    assert f"[0] attempt 1 resume {ckpt}" in p.stdout
    assert f"[1] attempt 0 resume None" in p.stdout
    attempts = {(w["attempt"], w["rank"]) for w in job["workers_history"]}
    assert attempts == {(0, 0), (0, 1), (1, 0), (1, 1)}
    out = run_tc("show", "restarts").stdout
    assert "restarting" in out and "rank 1 was killed by signal 9" in out


def test_restart_budget_is_per_job(run_tc, home, tmp_path):
    s = spec(tmp_path, """
name: always-fails
command: ["/bin/sh", "-c", "exit 7"]
devices: {type: cpu, per_node: 2}
restart: {max_restarts: 2, grace_seconds: 1}
""")
    p = run_tc("run", s, timeout=300)
    assert p.returncode == 1
    job = show(run_tc, "always-fails")
    assert job["restarts"] == 2
    assert job["root_cause"].startswith("rank ")
    assert "(after 2 restarts)" in job["root_cause"]
    assert len({w["attempt"] for w in job["workers_history"]}) == 3


def start_background(trainctl, home, args):
    return subprocess.Popen([trainctl, *args], env=dict(os.environ, TRAINCTL_HOME=str(home)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def worker_pids(home):
    db = os.path.join(home, "trainctl.db")
    try:
        with sqlite3.connect(db) as c:
            return [r[0] for r in c.execute("SELECT pid FROM workers")]
    except sqlite3.OperationalError:  # not created yet
        return []


def test_supervisor_sigkill_leaves_no_worker(trainctl, home, run_tc):
    # each worker also starts a grandchild in its process group
    proc = start_background(trainctl, home, ["run", "--nproc", "2", "--", "/bin/sh", "-c",
                                             "sleep 300 & echo child $!; wait"])
    pids = wait_for(lambda: len(worker_pids(home)) == 2 and worker_pids(home))
    assert pids, "workers did not start"

    def grandchildren():
        found = []
        for pid in pids:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                found += [int(x) for x in f.read().split()]
        return found if len(found) == 2 else None

    children = wait_until(grandchildren, what="each worker's background sleep")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert wait_for(lambda: not pids_alive(pids + children), timeout=60), pids_alive(pids + children)
    # the next reader sees the job as lost, not running forever
    job = json.loads(run_tc("ps", "--json").stdout)[0]
    assert job["state"] == "lost"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_gracefully(trainctl, home, run_tc, tmp_path, sig):
    s = spec(tmp_path, f"""
name: graceful
command: ["{PYTHON}", "-c", "import signal, sys, time\\ndef bye(*a):\\n    print('saving checkpoint', flush=True); sys.exit(0)\\nsignal.signal(signal.SIGTERM, bye)\\nprint('ready', flush=True)\\ntime.sleep(300)"]
devices: {{type: cpu, per_node: 2}}
""")
    proc = start_background(trainctl, home, ["run", s])
    assert wait_for(lambda: len(worker_pids(home)) == 2)
    wait_for_output(home, "ready", ranks=(0, 1))  # printed once the handler is in place
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "[0] saving checkpoint" in out and "[1] saving checkpoint" in out
    job = show(run_tc, "graceful")
    assert job["state"] == "killed"
    assert not pids_alive(worker_pids(home))


def test_grace_then_sigkill(trainctl, home, run_tc, tmp_path):
    s = spec(tmp_path, """
name: stubborn
command: ["/bin/sh", "-c", "trap '' TERM; echo ready; while true; do sleep 0.1; done"]
restart: {grace_seconds: 1}
""")
    proc = start_background(trainctl, home, ["run", s])
    assert wait_for(lambda: len(worker_pids(home)) == 1)
    wait_for_output(home, "ready")  # the trap is set
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    # the 1 s grace, then SIGKILL: well under the 30 s default grace even when slow
    assert 0.8 < time.time() - t0 < 20
    assert show(run_tc, "stubborn")["state"] == "killed"


# ---- logs ----------------------------------------------------------------------

def test_bursts_are_whole_lines(trainctl, run_tc, home, tmp_path):
    # two ranks print ~60 MB each as fast as they can, in uneven writes, plus a 3 MiB line
    script = tmp_path / "burst.py"
    script.write_text("""
import os, sys
r = os.environ["RANK"]
out = sys.stdout.buffer
chunk = b"".join(b"rank%s-line%07d-%s\\n" % (r.encode(), i, b"x" * (i % 200)) for i in range(20000))
for k in range(15):
    out.write(chunk[: len(chunk) // 3]); out.write(chunk[len(chunk) // 3 :])
out.write(b"L" * (3 << 20) + b"\\n")
out.flush()
""")
    p = subprocess.run(f"'{trainctl}' run --nproc 2 -- {PYTHON} {script} > {tmp_path}/console",
                       shell=True, env=dict(os.environ, TRAINCTL_HOME=str(home)), timeout=300)
    assert p.returncode == 0
    job = json.loads(run_tc("ps", "--json").stdout)[0]
    for r in (0, 1):
        with open(os.path.join(job["run_dir"], "logs", f"rank-{r}.log"), "rb") as f:
            lines = f.read().split(b"\n")
        assert lines[-1] == b""
        body = lines[:-1]
        assert len(body) == 15 * 20000 + 1 + 2  # the long line comes in 1 MiB pieces
        for i, line in enumerate(body[: 15 * 20000]):
            n = i % 20000
            assert line == b"rank%d-line%07d-%s" % (r, n, b"x" * (n % 200))
    with open(tmp_path / "console", "rb") as f:
        for line in f:
            if line.startswith(b"[0] rank") or line.startswith(b"[1] rank"):
                assert line[1:2] == line[8:9], line[:40]  # prefix matches the rank that wrote it


def test_logs_follow(trainctl, home, run_tc):
    proc = start_background(trainctl, home, ["run", "--quiet", "--nproc", "2", "--", "/bin/sh", "-c",
                                             "for i in 1 2 3 4 5; do echo tick $i; sleep 0.3; done"])
    assert wait_for(lambda: len(worker_pids(home)) == 2)
    job = json.loads(run_tc("ps", "--json").stdout)[0]["id"]
    p = run_tc("logs", job, "-f", timeout=120)
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    for r in (0, 1):
        assert [l for l in lines if l.startswith(f"[{r}]")] == [f"[{r}] tick {i}" for i in range(1, 6)]
    proc.wait(timeout=120)


def test_unknown_job(run_tc, home):
    run_tc("run", "--", "true")
    p = run_tc("show", "no-such-job")
    assert p.returncode == 2 and "no job 'no-such-job'" in p.stderr
    p = run_tc("logs", "no-such-job")
    assert p.returncode == 2


# ---- bad specs: exit 2, file:line:key, nothing written -------------------------

BAD_SPECS = [
    ("syntax.yaml", "name: x\ncommand: [a, b\n", "syntax.yaml:3: syntax error"),
    ("unknown.yaml", "name: x\ncommand: [a]\ndevcies: {type: cpu}\n",
     "unknown.yaml:3: unknown key 'devcies' (did you mean 'devices'?)"),
    ("type.yaml", "command: [a]\ndevices:\n  per_node: [1]\n", "type.yaml:3: devices.per_node: must be an integer"),
    ("zero.yaml", "command: [a]\ndevices:\n  type: cpu\n  per_node: 0\n", "zero.yaml:4: devices.per_node: must be at least 1"),
    ("gpus.yaml", "command: [a]\ndevices:\n  type: gpu\n  per_node: 64\n",
     "gpus.yaml:4: devices.per_node: 64 gpu devices requested but this machine has"),
    ("json.json", '{\n  "command": ["a"],\n  "restart": {"max_restarts": "lots"}\n}\n',
     "json.json:3: restart.max_restarts: must be an integer"),
    ("later.yaml", "command: [a]\nslurm: {partition: debug}\n",
     "later.yaml:2: slurm: is for backend: slurm (backend is local)"),
    # issue 16, 3.4 and 3.5
    ("typo.yaml", 'name: x\ncommand: ["pyhton3", "-c", "1"]\n',
     "typo.yaml:2: command: 'pyhton3' is not found on PATH (did you mean 'python3'?)"),
    ("tab.yaml", "name: x\ncommand: [a]\ndevices:\n\ttype: cpu\n",
     "tab.yaml:4: a tab: YAML forbids tabs for indentation (indent with spaces)"),
]


@pytest.mark.parametrize("name,text,message", BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_bad_spec(run_tc, home, tmp_path, name, text, message):
    s = spec(tmp_path, text, name)
    p = run_tc("run", s, cwd=str(tmp_path))
    assert p.returncode == 2, p.stderr
    assert message in p.stderr, p.stderr
    assert p.stdout == ""
    assert jobs_in_db(home) == []
    assert not os.path.exists(os.path.join(home, "runs"))


def test_no_devices_names_the_devices_line(run_tc, home, tmp_path):
    """`devices: {type: gpu}` where there is none: the line of devices:, what
    was found, and how to try things out (issue 16, 3.7)."""
    s = spec(tmp_path, "name: x\ncommand: [\"true\"]\n\ndevices: {type: gpu}\n", "gpu.yaml")
    p = run_tc("run", "gpu.yaml", cwd=str(tmp_path), env={"TRAINCTL_FAKE_DEVICES": "npu:2"})
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == (
        "trainctl: gpu.yaml:4: devices: 1 gpu device requested but this machine has none: "
        "TRAINCTL_FAKE_DEVICES is 'npu:2'; to try trainctl without them, set TRAINCTL_FAKE_DEVICES=gpu:1")
    p = run_tc("run", "gpu.yaml", cwd=str(tmp_path), env={"TRAINCTL_FAKE_DEVICES": None})
    if p.returncode == 2:  # a machine without NVIDIA GPUs: says what it found
        assert "gpu.yaml:4: devices: 1 gpu device requested but this machine has none: NVML" in p.stderr
    assert jobs_in_db(home) == [] or p.returncode == 0


def test_bad_usage(run_tc, home):
    assert run_tc("run").returncode == 2
    assert run_tc("run", "--nproc", "0", "--", "true").returncode == 2
    assert run_tc("run", "--device", "tpu", "--", "true").returncode == 2
    assert run_tc("frobnicate").returncode == 2
    assert jobs_in_db(home) == []


# ---- npu: rank table and the Ascend profile -------------------------------------

def test_npu_rank_table(run_tc, home, tmp_path):
    (tmp_path / "hccn.conf").write_text("address_2=192.168.1.12\naddress_3=192.168.1.13\n")
    s = spec(tmp_path, """
name: npu
framework: mindspore
command: ["/bin/sh", "-c", "echo $RANK_ID $RANK_SIZE $DEVICE_ID $ASCEND_RT_VISIBLE_DEVICES $(basename $RANK_TABLE_FILE)"]
devices: {type: npu, ids: [2, 3], hccn_conf: hccn.conf}
""")
    p = run_tc("run", s, env={"TRAINCTL_FAKE_DEVICES": "npu:8"})
    assert p.returncode == 0, p.stderr
    # rank-table mode: the physical id, no visibility variable (docs/environment.md)
    assert "[0] 0 2 2 hccl.json" in p.stdout and "[1] 1 2 3 hccl.json" in p.stdout
    run_dir = show(run_tc, "npu")["run_dir"]
    table = json.load(open(os.path.join(run_dir, "hccl.json")))
    assert table["version"] == "1.0" and table["status"] == "completed"
    assert table["server_count"] == "1"
    devs = table["server_list"][0]["device"]
    assert devs == [{"device_id": "2", "device_ip": "192.168.1.12", "rank_id": "0"},
                    {"device_id": "3", "device_ip": "192.168.1.13", "rank_id": "1"}]


def test_gpu_visibility(run_tc, home):
    p = run_tc("run", "--device", "gpu", "--nproc", "2", "--", "/bin/sh", "-c",
               "echo $CUDA_VISIBLE_DEVICES $LOCAL_RANK", env={"TRAINCTL_FAKE_DEVICES": "gpu:2"})
    assert p.returncode == 0, p.stderr
    assert "[0] 0,1 0" in p.stdout and "[1] 0,1 1" in p.stdout


def test_devices(run_tc, home):
    d = json.loads(run_tc("devices", "--json").stdout)
    assert d[0]["type"] == "cpu" and d[0]["source"] == "sysconf"
    d = json.loads(run_tc("devices", "--json", env={"TRAINCTL_FAKE_DEVICES": "gpu:2,npu:1"}).stdout)
    assert [(x["type"], x["id"]) for x in d] == [("cpu", 0), ("gpu", 0), ("gpu", 1), ("npu", 0)]
    assert "gpu" in run_tc("devices", env={"TRAINCTL_FAKE_DEVICES": "gpu:1"}).stdout
