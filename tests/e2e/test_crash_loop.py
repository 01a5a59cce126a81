"""Crash loops (issue 28), as etcd's robustness tests kill a member at random.

A server is SIGKILLed at random moments while a client submits jobs under
unique names, its jobs run and their metric lines are ingested; it is
started again each time.  After the last restart has settled: every
submission the server answered 201 is there exactly once (one it never
answered may be there, but never twice), no job is left active, and
trainctl.db passes `PRAGMA integrity_check`.  `make check` runs
TC_CRASH_ROUNDS=8 rounds; `make soak` runs 200.

Then a supervisor SIGKILLed in the middle of uploading a checkpoint to a
`file://` target: no object in the target is ever a part taken for the
whole (a file at its final name always has the source's bytes), `ckpt
list` of the target shows only whole checkpoints, and the next upload,
by a run resuming from the job's checkpoint, completes the target.
"""
import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

from conftest import ENDED, poll, wait_until
from server_fixture import UnixHTTPConnection, free_port, reachable_state, start_server

ROUNDS = int(os.environ.get("TC_CRASH_ROUNDS", "8"))
STRICT = os.environ.get("TC_CRASH_STRICT") == "1"
# a job recorded lost with no restart left (max_restarts 0) has ended too:
# its supervisor went without recording an end, and nothing will run it again
SETTLED = ENDED + ("lost",)
SEED = int(os.environ.get("TC_CRASH_SEED", str(int(time.time()))))

JOB_SH = """for s in 1 2 3 4 5; do
  echo "DLLL {\\"timestamp\\": \\"170000000$s.0\\", \\"type\\": \\"LOG\\", \\"step\\": [0, $s], \\"data\\": {\\"train.loss\\": 2.$s}}"
  sleep 0.05
done
"""


def call(sock, method, path, body=None, timeout=10):
    con = UnixHTTPConnection(sock, "127.0.0.1", timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        con.request(method, path, body=data,
                    headers={"Content-Type": "application/json"} if data else {})
        r = con.getresponse()
        text = r.read().decode()
        return r.status, text
    finally:
        con.close()


class Submitter(threading.Thread):
    """Submits a job under a new name every ~50 ms; accepted: the names
    answered 201."""

    def __init__(self, sock, work):
        super().__init__(daemon=True)
        self.sock, self.work = sock, work
        self.accepted, self.tried = {}, []
        self.halt = threading.Event()

    def run(self):
        i = 0
        while not self.halt.is_set():
            name = f"cl{i}-{os.urandom(3).hex()}"
            i += 1
            self.tried.append(name)
            spec = {"name": name, "command": ["/bin/sh", str(self.work / "job.sh")],
                    "workdir": str(self.work), "devices": {"type": "cpu", "per_node": 1}}
            try:
                st, text = call(self.sock, "POST", "/api/v1/jobs", {"spec": spec})
                if st == 201:
                    self.accepted[name] = json.loads(text)["id"]
            except (OSError, ValueError):
                pass  # no server now, or killed before it answered: not accepted
            self.halt.wait(0.05)


def query(state, sql):
    """sql's rows from the state folder's database, opened read-only."""
    c = sqlite3.connect(f"file:{state}/trainctl.db?mode=ro", uri=True, timeout=30)
    try:
        return c.execute(sql).fetchall()
    finally:
        c.close()


def jobs(state):
    return query(state, "SELECT id, name, state FROM jobs")


def integrity(state):
    return query(state, "PRAGMA integrity_check")


def test_server_sigkilled_at_random_keeps_every_accepted_submission(trainctl, tmp_path):
    rng = random.Random(SEED)
    print(f"crash loop: {ROUNDS} rounds, TC_CRASH_SEED={SEED}")
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.sh").write_text(JOB_SH)
    state = tmp_path / "state"
    state.mkdir()
    reachable_state(state)
    env = dict(os.environ, TRAINCTL_HOME=str(state))
    for k in ("TRAINCTL_SERVER", "TRAINCTL_TOKEN"):
        env.pop(k, None)
    sock = str(state / "server.sock")
    log_path = tmp_path / "server.log"
    argv = [str(trainctl), "server", "--listen", f"127.0.0.1:{free_port()}", "--state", str(state)]
    if os.geteuid() == 0:
        argv.append("--allow-root-jobs")

    def up(proc):
        if proc.poll() is not None:
            raise AssertionError(f"the server exited {proc.returncode} after a restart:\n"
                                 f"{log_path.read_text(errors='replace')[-4000:]}")
        try:
            return call(sock, "GET", "/api/v1/jobs", timeout=2)[0] == 200
        except OSError:
            return False

    client = Submitter(sock, work)
    client.start()
    try:
        for r in range(ROUNDS):
            with open(log_path, "a") as log:
                log.write(f"--- crash loop round {r + 1}\n")
                log.flush()
                proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
            # a random moment: while starting, taking submissions, running jobs
            if rng.random() < 0.2:
                time.sleep(rng.uniform(0, 0.3))
            else:
                wait_until(lambda: up(proc), timeout=120, what=f"the server up in round {r + 1}")
                time.sleep(rng.uniform(0, 1.5))
            proc.kill()
            proc.wait()
    finally:
        client.halt.set()
        client.join()
    # the last restart: everything settles
    srv = start_server(trainctl, state)
    try:
        def settled():
            left = [j for j in jobs(state) if j[2] not in SETTLED]
            return not left or None
        ok = poll(settled, timeout=600, step=0.5)
        left = [j for j in jobs(state) if j[2] not in SETTLED]
        assert ok, f"{len(left)} jobs left active after the last restart: {left[:10]}\n{srv.log()[-3000:]}"
        names = [j[1] for j in jobs(state)]
        lost = [n for n in client.accepted if names.count(n) != 1]
        assert not lost, (f"accepted submissions not there exactly once:"
                          f" {[(n, names.count(n)) for n in lost[:10]]}")
        twice = sorted({n for n in names if names.count(n) > 1})
        assert not twice, f"submissions recorded twice: {twice[:10]}"
        assert set(names) <= set(client.tried), set(names) - set(client.tried)
        assert integrity(state) == [("ok",)]
        p = srv.cli("ps", "-a")
        assert p.returncode == 0, p.stderr
        lost = [j for j in jobs(state) if j[2] == "lost"]
        print(f"crash loop: {ROUNDS} kills, {len(client.tried)} submissions tried,"
              f" {len(client.accepted)} accepted, {len(names)} jobs recorded, all ended,"
              f" {len(lost)} of them lost: {lost[:5]}")
        assert not (STRICT and lost), f"jobs recorded lost: {lost}"
    finally:
        srv.stop()


def test_restart_waits_while_a_child_of_the_killed_server_holds_its_lock(trainctl, tmp_path):
    """A server SIGKILLed right after a fork leaves server.lock locked by its
    child until the child closes its fds: a restart waits for it (the crash
    loop met this on a loaded machine: "another server (pid N) already uses
    the state folder", N long gone) rather than refusing."""
    state = tmp_path / "state"
    state.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    lock = state / "server.lock"
    holder = subprocess.Popen(
        ["/usr/bin/python3", "-c",
         "import fcntl, sys, time\n"
         f"f = open({str(lock)!r}, 'w'); f.write('{gone.pid} 127.0.0.1:1\\n'); f.flush()\n"
         "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(1.5)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        srv = start_server(trainctl, state)
        try:
            assert holder.poll() is not None, "the server started while the lock was held"
        finally:
            srv.stop()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


# ---- a supervisor killed mid-upload ----

CKPT_PY = r'''
import os, sys, time
out = os.environ["TRAINCTL_OUTPUT_DIR"]
ck = os.path.join(out, "checkpoints")
os.makedirs(ck, exist_ok=True)
start = int(os.path.basename(os.environ.get("TRAINCTL_RESUME_FROM", "step_0.bin"))[5:-4] or 0)
release = sys.argv[1]
step = start
while True:
    step += 1
    tmp = os.path.join(ck, f".step_{step}.bin.tmp")
    with open(tmp, "wb") as f:
        # 24 MiB of bytes that tell where they are: a cut copy never matches
        for i in range(24):
            f.write(bytes([(step * 31 + i) % 251]) * (1 << 20))
    os.rename(tmp, os.path.join(ck, f"step_{step}.bin"))
    print(f"saved step {step}", flush=True)
    if os.path.exists(release):
        break
    time.sleep(0.3)
'''


def whole_or_missing(target, source):
    """Each file at its final name under target has the bytes of its source
    (a part is under a '.tc-part-' name, never the final one)."""
    bad = []
    for f in Path(target).rglob("*"):
        if not f.is_file() or f.name.startswith("."):
            continue
        src = Path(source) / f.relative_to(target)
        if src.exists() and f.stat().st_size != src.stat().st_size:
            bad.append(f"{f}: {f.stat().st_size} bytes of {src.stat().st_size}")
    return bad


def test_supervisor_sigkilled_mid_checkpoint_upload(trainctl, run_tc, home, tmp_path):
    target = tmp_path / "bucket"
    target.mkdir()
    release = tmp_path / "release"
    (tmp_path / "ck.py").write_text(CKPT_PY)
    spec = tmp_path / "ck.yaml"
    spec.write_text(f'name: ckup\ncommand: ["/usr/bin/python3", "{tmp_path}/ck.py", "{release}"]\n'
                    f"workdir: {tmp_path}\ndevices: {{type: cpu, per_node: 1}}\n"
                    f"checkpoint: {{keep: 3}}\n"
                    f"outputs: {{upload_to: 'file://{target}/{{job_id}}/', every_seconds: 1}}\n")
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    p = subprocess.Popen([str(trainctl), "run", "-q", str(spec)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # mid-upload: a part file in the target, while the job still writes
        def part():
            return [f for f in target.rglob(".tc-part-*")] or None
        seen_bad = []

        def mid_upload():
            seen_bad.extend(whole_or_missing(target, next(iter(home.glob("runs/*/output")), target)))
            # once a checkpoint is recorded complete: the rerun resumes from it
            logs = list(home.glob("runs/*/logs/supervisor.log"))
            return logs and "complete" in logs[0].read_text(errors="replace") and part()
        wait_until(mid_upload, timeout=240, step=0.01, what="a checkpoint upload under way")
        sup = p.pid  # `trainctl run` is the supervisor
        os.kill(sup, signal.SIGKILL)
        p.wait(timeout=60)
    finally:
        release.touch()
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    run_dir = next(home.glob("runs/*"))
    job = run_dir.name
    out = run_dir / "output"
    assert not seen_bad, f"a part taken for the whole while uploading: {seen_bad}"
    assert not whole_or_missing(target / job, out)
    # what the checkpoint rule sees in the target: no part among the complete
    r = run_tc("ckpt", "list", str(target / job / "checkpoints"))
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        for f in (target / job / "checkpoints").glob("step_*.bin"):
            if f.name in line and "complete" in line:
                assert f.stat().st_size == 24 << 20, f"{f} listed complete at {f.stat().st_size} bytes"
    # the job's end after the kill is recorded (doctor --fix), never left active
    r = run_tc("doctor", "--fix")
    st = json.loads(run_tc("show", "--json", job).stdout)["state"]
    assert st in ENDED + ("lost",), st
    # a rerun resuming from the job's checkpoint uploads the rest whole
    done = tmp_path / "release2"
    spec2 = tmp_path / "ck2.yaml"
    spec2.write_text(spec.read_text().replace(str(release), str(done)))
    done.touch()
    r = run_tc("run", "-q", "--resume", job, str(spec2), timeout=300)
    assert r.returncode == 0, r.stderr
    job2 = run_tc("ps", "--json").stdout
    job2 = [j["id"] for j in json.loads(job2) if j["id"] != job][0]
    out2 = home / "runs" / job2 / "output"
    assert not list((target / job2).rglob(".tc-part-*")), "a part left after a finished upload"
    assert not whole_or_missing(target / job2, out2)
    # uploads never delete: the target keeps what rotation removed
    missing = {f.name for f in (out2 / "checkpoints").glob("step_*.bin")} - \
        {f.name for f in (target / job2 / "checkpoints").glob("step_*.bin")}
    assert not missing, f"checkpoints not uploaded at the end: {missing}"
