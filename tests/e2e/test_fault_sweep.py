"""Injected I/O errors (issue 28), as SQLite's test suite injects them.

A short job (`trainctl run` of a shell job printing four metric lines) runs
once clean under the fault injector (tests/fake/fault_io.c) to count the I/O
calls each of its processes makes on the state folder; then, for N over
those calls, the Nth write, pwrite, fsync, fdatasync, rename, open or openat
fails with ENOSPC, EIO or EDQUOT.  The same for a server handling a few
submissions.  After each run, whatever it did:

  - no crash (no signal, no sanitizer report) and no hang (a deadline);
  - a run that failed says which file and what it was doing;
  - trainctl.db passes `PRAGMA integrity_check`;
  - with the fault gone, `ps` and `show` work, the job is not left active
    (`doctor --fix` for a `run`, the restarted server for a submission),
    and a new job runs.

`make check` runs a sample (TC_FAULT_SAMPLE points per op for the job,
TC_FAULT_SERVER_SAMPLE for the server, each sweep within TC_FAULT_BUDGET
s, 100 by default); `make soak` (TC_FAULT_SWEEP=all) runs every N of every
op, with each errno for the job and the errnos in turn for the server, and
writes the table of docs/reliability.md to $TC_FAULT_REPORT.  One point:

    TC_FAULT_ONLY=job:pwrite:240:EIO pytest tests/e2e/test_fault_sweep.py -k job

Whether the job's outcome and metrics survived a fault is counted in the
table (refused before it ran, kept, lost); TC_FAULT_STRICT=1 makes a lost
outcome fail the sweep too.
"""
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ENDED
from server_fixture import (UnixHTTPConnection, free_port, port_open, reachable_state,
                            start_server)

OPS = ("write", "pwrite", "fsync", "fdatasync", "rename", "open", "openat")
ERRNOS = ("ENOSPC", "EIO", "EDQUOT")
SWEEP_ALL = os.environ.get("TC_FAULT_SWEEP") == "all"
STRICT = os.environ.get("TC_FAULT_STRICT") == "1"
SEED = int(os.environ.get("TC_FAULT_SEED", "28"))
SAMPLE = int(os.environ.get("TC_FAULT_SAMPLE", "2"))
SERVER_SAMPLE = int(os.environ.get("TC_FAULT_SERVER_SAMPLE", "1"))
BUDGET_S = float(os.environ.get("TC_FAULT_BUDGET", "0" if SWEEP_ALL else "100"))
DEADLINE = 180  # one run, under ASan on a loaded machine: past it, a hang
CRASH_RC = (134, 139)  # a shell's 128+SIGABRT, 128+SIGSEGV
SANITIZER = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
# words of a message that says what was being done when the I/O failed
OP_WORDS = re.compile(r"writ|sync|renam|open|creat|read|full|quota|sav|stor|record|lock|delet|"
                      r"truncat|mov|replac|map|mkdir|make", re.I)

JOB_SH = """for s in 1 2 3 4; do
  echo "DLLL {\\"timestamp\\": \\"170000000$s.0\\", \\"type\\": \\"LOG\\", \\"step\\": [0, $s], \\"data\\": {\\"train.loss\\": 2.$s}}"
done
"""


def injector(trainctl):
    lib = Path(os.environ.get("TC_FAULT_IO_LIB") or
               Path(trainctl).parent / "fault-io" / "libfault_io.so")
    if not lib.exists():
        pytest.fail(f"the fault injector {lib} is missing: `make build` builds it", pytrace=False)
    return str(lib)


def fault_env(lib, home, log, op=None, n=None, err=None):
    """The environment of a run under the injector.  An ASan trainctl wants
    its runtime first in LD_PRELOAD; the check is turned off instead, so
    that the shell workers, which have no ASan, load the injector alone."""
    env = dict(os.environ, TRAINCTL_HOME=str(home), LD_PRELOAD=lib, TC_FAULT_LOG=str(log),
               TC_FAULT_PATH=os.path.realpath(home))
    asan = env.get("ASAN_OPTIONS", "")
    env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "verify_asan_link_order=0"
    env.pop("TRAINCTL_SERVER", None)
    env.pop("TRAINCTL_TOKEN", None)
    if op:
        env.update(TC_FAULT_OP=op, TC_FAULT_N=str(n), TC_FAULT_ERRNO=err)
    return env


def clean_env(home):
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    for k in ("LD_PRELOAD", "TRAINCTL_SERVER", "TRAINCTL_TOKEN"):
        env.pop(k, None)
    return env


def counts(log):
    """The most calls of each op any one process made (the injector's files)."""
    most = dict.fromkeys(OPS, 0)
    for f in Path(log).iterdir():
        if f.name == "injected":
            continue
        for m in re.finditer(r"(\w+)=(\d+)", f.read_text(errors="replace").split("/", 1)[0]):
            if m.group(1) in most:
                most[m.group(1)] = max(most[m.group(1)], int(m.group(2)))
    return most


def injected(log):
    """The injections made: [(op, n, errno, pid, path)]."""
    f = Path(log) / "injected"
    if not f.exists():
        return []
    return [tuple(l.split(" ", 4)) for l in f.read_text(errors="replace").splitlines() if l]


def stem(path):
    """The file a message names for path: the database for its -wal,
    -journal and -shm, the target for a temporary file."""
    return re.sub(r"(-wal|-journal|-shm|\.tmp\.\d+)$", "", path.strip())


def run_bounded(argv, env, cwd=None):
    """(returncode, output) of argv, or (None, output) when it ran past the
    deadline (then its whole session is killed)."""
    p = subprocess.Popen([str(a) for a in argv], env=env, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=DEADLINE)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out


def sanitizer_text(home, *texts):
    found = [t for t in texts if any(m in t for m in SANITIZER)]
    for f in Path(home).glob("runs/*/logs/supervisor.*"):
        t = f.read_text(errors="replace")
        if any(m in t for m in SANITIZER):
            found.append(f"{f}: {t[-3000:]}")
    return found


def integrity(home):
    """None when trainctl.db is sound (or was never made), else what is wrong."""
    db = Path(home) / "trainctl.db"
    if not db.exists():
        return None
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            rows = c.execute("PRAGMA integrity_check").fetchall()
        finally:
            c.close()
    except sqlite3.Error as e:
        return f"integrity_check: {e}"
    return None if rows == [("ok",)] else f"integrity_check: {rows[:5]}"


def jobs_in(home):
    """{id: (name, state)} of home's database ({} without one)."""
    db = Path(home) / "trainctl.db"
    if not db.exists():
        return {}
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return {r[0]: (r[1], r[2]) for r in c.execute("SELECT id, name, state FROM jobs")}
    except sqlite3.Error:
        return {}
    finally:
        c.close()


def message_problem(out, shots):
    """A failed run must name the file and what it did to it."""
    words = re.sub(r"\S*/\S*", " ", out)  # the paths name the test's folders, not the step
    if any(stem(s[4]) in out for s in shots) and OP_WORDS.search(words):
        return None
    return (f"its message does not name the file ({', '.join(stem(s[4]) for s in shots)})"
            f" and the operation: {out.strip()[-600:]!r}")


def exit_problems(who, rc, out, shots):
    """What is wrong with how a run under a fault ended (rc None: it hung)."""
    if rc is None:
        return [f"{who}no answer within {DEADLINE} s: {out[-600:]!r}"]
    if rc < 0 or rc in CRASH_RC:
        return [f"{who}crashed (status {rc}): {out[-1500:]!r}"]
    if rc != 0 and not shots:
        return [f"{who}failed (exit {rc}) although no fault was injected: {out[-600:]!r}"]
    p = rc != 0 and message_problem(out, shots)
    return [who + p] if p else []


# a point's counts: its outcome is one of refused (nothing ran: no job, or a
# job that failed before its workers ran, with its cause), kept (it ran and
# succeeded with its four metric points), lost (it ran, and its end or its
# metrics were not recorded as they were)
COLUMNS = ("run", "fired", "passed", "refused", "kept", "lost")


class Sweep:
    """The points run and their outcome, per (kind, op, errno)."""

    def __init__(self):
        self.rows = {}
        self.problems = []
        self.started = time.monotonic()

    def over_budget(self):
        return BUDGET_S and time.monotonic() - self.started > BUDGET_S

    def note(self, kind, op, n, err, fired, problems, outcome):
        r = self.rows.setdefault((kind, op, err), dict.fromkeys(COLUMNS, 0))
        r["run"] += 1
        r["fired"] += bool(fired)
        r["passed"] += not problems
        r[outcome] += 1
        for p in problems:
            self.problems.append(f"{kind} {op} N={n} {err}: {p}"
                                 f" (again: TC_FAULT_ONLY={kind}:{op}:{n}:{err})")

    def table(self, clean):
        lines = ["| run | op | errno | calls in a clean run | points run | fault hit | passed"
                 " | refused before it ran | ran: outcome and metrics kept | ran: outcome lost |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for (kind, op, err), r in sorted(self.rows.items()):
            lines.append(f"| {kind} | {op} | {err} | {clean[kind][op]} | "
                         + " | ".join(str(r[k]) for k in COLUMNS) + " |")
        tot = [str(sum(r[k] for r in self.rows.values())) for k in COLUMNS]
        lines.append("| all | | | | " + " | ".join(tot) + " |")
        return "\n".join(lines)

    def finish(self, kind, clean):
        text = self.table({kind: clean})
        print(f"\nfault sweep ({kind}, seed {SEED}, {time.monotonic() - self.started:.0f} s):\n{text}")
        out = os.environ.get("TC_FAULT_REPORT")
        if out:
            with open(out, "a") as f:
                f.write(f"<!-- {kind}: seed {SEED}, {'every N' if SWEEP_ALL else 'sampled'} -->\n"
                        f"{text}\n\n")
        assert not self.problems, f"{len(self.problems)} injection points failed:\n" + \
            "\n".join(self.problems[:40])


def points(kind, clean, per_op, every_errno=True):
    """(op, N, errno) to run: one given point, every N (with every errno, or
    the errnos taken in turn), or per_op sampled Ns of each op, the errnos
    taken in turn."""
    only = os.environ.get("TC_FAULT_ONLY")
    if only:
        k, op, n, err = only.split(":")
        return [(op, int(n), err)] if k == kind else []
    rng = random.Random(f"{SEED}-{kind}")
    out = []
    for op in OPS:
        total = clean[op]
        if not total:
            continue
        if SWEEP_ALL:
            out += [(op, n, err) for err in ERRNOS for n in range(1, total + 1)
                    if every_errno or ERRNOS.index(err) == n % len(ERRNOS)]
            continue
        ns = sorted(rng.sample(range(1, total + 1), min(per_op, total)))
        out += [(op, n, ERRNOS[(i + OPS.index(op)) % len(ERRNOS)]) for i, n in enumerate(ns)]
    rng.shuffle(out)
    return out


# ---- the job: trainctl run ----

@pytest.fixture
def job_spec(tmp_path):
    (tmp_path / "job.sh").write_text(JOB_SH)
    spec = tmp_path / "job.yaml"
    spec.write_text(f'name: fsweep\ncommand: ["/bin/sh", "{tmp_path}/job.sh"]\n'
                    f"workdir: {tmp_path}\ndevices: {{type: cpu, per_node: 1}}\n")
    return spec


def run_point(trainctl, lib, spec, base, op=None, n=None, err=None):
    """One `trainctl run` under the injector in a state folder of its own:
    (its problems, its outcome (Sweep), the injections, log folder)."""
    tag = f"{op}-{n}-{err}" if op else "clean"
    home, log = base / tag / "home", base / tag / "log"
    home.mkdir(parents=True)
    log.mkdir()
    rc, out = run_bounded([trainctl, "run", "-q", spec], fault_env(lib, home, log, op, n, err))
    shots = injected(log)
    problems = exit_problems("", rc, out, shots)
    problems += [f"sanitizer: {t[-1500:]}" for t in sanitizer_text(home, out)]
    bad = integrity(home)
    if bad:
        problems.append(bad)
    env = clean_env(home)
    # the fault gone: the reads work, the job is not left active, a job runs
    jobs = jobs_in(home)
    if home.joinpath("trainctl.db").exists() or jobs:
        p = subprocess.run([str(trainctl), "ps", "-a"], env=env, capture_output=True, text=True,
                           timeout=DEADLINE)
        if p.returncode != 0:
            problems.append(f"ps after the fault: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    outcome = "refused"
    for job, (_, state) in sorted(jobs.items())[:1]:
        p = subprocess.run([str(trainctl), "show", job], env=env, capture_output=True, text=True,
                           timeout=DEADLINE)
        if p.returncode != 0:
            problems.append(f"show {job} after the fault: exit {p.returncode}: {p.stderr[-400:]}")
        if state not in ENDED + ("lost",):
            subprocess.run([str(trainctl), "doctor", "--fix"], env=env, capture_output=True,
                           timeout=DEADLINE)
            state = jobs_in(home).get(job, ("", state))[1]
            if state not in ENDED + ("lost",):
                problems.append(f"job {job} left {state} after the fault and `doctor --fix`")
        rank_log = home / "runs" / job / "logs" / "rank-0.log"
        ran = rank_log.exists() and "[0, 4]" in rank_log.read_text(errors="replace")
        if state == "succeeded":
            p = subprocess.run([str(trainctl), "metrics", job, "--format", "json"], env=env,
                               capture_output=True, text=True, timeout=DEADLINE)
            ran = True
        outcome = "refused" if not ran else "kept" if (
            state == "succeeded" and p.returncode == 0 and len(json.loads(p.stdout or "[]")) == 4) \
            else "lost"
    if op:
        r = subprocess.run([str(trainctl), "run", "-q", spec], env=env, capture_output=True,
                           text=True, timeout=DEADLINE)
        if r.returncode != 0:
            problems.append(f"a new run after the fault failed (exit {r.returncode}):"
                            f" {r.stderr.strip()[-400:]}")
        if STRICT and outcome == "lost":
            problems.append(f"the job's outcome or metrics were lost: {jobs}")
    return problems, outcome, shots, log


def test_fault_sweep_job(trainctl, job_spec, tmp_path):
    lib = injector(trainctl)
    problems, outcome, _, log = run_point(trainctl, lib, job_spec, tmp_path)
    assert not problems and outcome == "kept", f"the clean run under the injector: {problems}"
    clean = counts(log)
    assert clean["pwrite"] > 0, f"the injector saw none of SQLite's writes: {clean}"
    sweep = Sweep()
    for op, n, err in points("job", clean, SAMPLE):
        if sweep.over_budget():
            break
        problems, outcome, shots, _ = run_point(trainctl, lib, job_spec, tmp_path, op, n, err)
        sweep.note("job", op, n, err, shots, problems, outcome)
    sweep.finish("job", clean)


# ---- the server: a few submissions ----

def submit(sock, port, spec):
    """(status, body) of a submission over the Unix socket; (None, why) when
    the server did not answer."""
    con = UnixHTTPConnection(sock, f"127.0.0.1:{port}", timeout=60)
    try:
        con.request("POST", "/api/v1/jobs", body=json.dumps({"spec": spec}).encode(),
                    headers={"Content-Type": "application/json"})
        r = con.getresponse()
        text = r.read().decode()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text
    except OSError as e:
        return None, str(e)
    finally:
        con.close()


def server_point(trainctl, lib, work, base, op=None, n=None, err=None):
    """A server under the injector takes three submissions and runs them;
    then a clean server on the same state folder must show each accepted one,
    once, and end it.  (problems, outcome (Sweep), injections, log folder)."""
    tag = f"srv-{op}-{n}-{err}" if op else "srv-clean"
    state, log = base / tag / "state", base / tag / "log"
    state.mkdir(parents=True)
    log.mkdir()
    reachable_state(state)
    port = free_port()
    env = fault_env(lib, state, log, op, n, err)
    env["TRAINCTL_FAKE_DEVICES"] = "gpu:2"
    slog = base / tag / "server.log"
    argv = [str(trainctl), "server", "--listen", f"127.0.0.1:{port}", "--state", str(state)]
    if os.geteuid() == 0:
        argv.append("--allow-root-jobs")
    problems, accepted = [], {}
    with open(slog, "w") as f:
        proc = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    end = time.monotonic() + DEADLINE
    while proc.poll() is None and not port_open(port) and time.monotonic() < end:
        time.sleep(0.05)
    if proc.poll() is None and port_open(port):
        for i in range(3):
            name = f"fs{i}-{os.urandom(3).hex()}"
            st, body = submit(str(state / "server.sock"), port,
                              {"name": name, "command": ["/bin/sh", str(work / "job.sh")],
                               "workdir": str(work), "devices": {"type": "gpu", "per_node": 1}})
            if st == 201:
                accepted[name] = body["id"]

        def settled():
            if proc.poll() is not None:
                return True
            return all(jobs_in(state).get(j, ("", ""))[1] in ENDED for j in accepted.values())
        while not settled() and time.monotonic() < end:
            time.sleep(0.1)
        if not settled():
            problems.append(f"the server's jobs did not end within {DEADLINE} s:"
                            f" {jobs_in(state)}")
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            problems.append("the server ignored SIGTERM")
    text = slog.read_text(errors="replace")
    shots = injected(log)
    problems += exit_problems("the server: ", proc.returncode, text, shots)
    problems += [f"sanitizer: {t[-1500:]}" for t in sanitizer_text(state, text)]
    bad = integrity(state)
    if bad:
        problems.append(bad)
    if op or problems:
        kept = after_server(trainctl, state, accepted, problems)
    else:
        kept = all(jobs_in(state).get(j, ("", ""))[1] == "succeeded" for j in accepted.values())
        if len(accepted) != 3:
            problems.append(f"the clean server accepted {len(accepted)} of 3 submissions: {text[-600:]}")
    outcome = "refused" if not accepted else "kept" if kept else "lost"
    if STRICT and outcome == "lost":
        problems.append(f"an accepted job did not succeed: {jobs_in(state)}")
    return problems, outcome, shots, log


def after_server(trainctl, state, accepted, problems):
    """A clean server on the state folder: every accepted submission there
    once, and each ends.  Whether all succeeded."""
    try:
        srv = start_server(trainctl, state, fake="gpu:2")
    except AssertionError as e:
        problems.append(f"a clean server does not start after the fault: {str(e)[-800:]}")
        return False
    try:
        p = srv.cli("ps", "-a")
        if p.returncode != 0:
            problems.append(f"ps after the fault: exit {p.returncode}: {p.stderr[-400:]}")
        names = [j[0] for j in jobs_in(state).values()]
        for name, job in accepted.items():
            if names.count(name) != 1:
                problems.append(f"accepted submission {name} ({job}) is there {names.count(name)} times")
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end and any(
                jobs_in(state).get(j, ("", "succeeded"))[1] not in ENDED for j in accepted.values()):
            time.sleep(0.1)
        left = {j: s for j, (_, s) in jobs_in(state).items() if s not in ENDED}
        if left:
            problems.append(f"jobs left active under a clean server: {left}")
        return all(jobs_in(state).get(j, ("", ""))[1] == "succeeded" for j in accepted.values())
    finally:
        try:
            srv.stop()
        except AssertionError as e:
            problems.append(f"the clean server after the fault: {str(e)[-800:]}")


def test_fault_sweep_server(trainctl, job_spec, tmp_path):
    lib = injector(trainctl)
    work = job_spec.parent
    problems, outcome, _, log = server_point(trainctl, lib, work, tmp_path)
    assert not problems and outcome == "kept", f"the clean server under the injector: {problems}"
    clean = counts(log)
    sweep = Sweep()
    # a server makes about twice the calls of a job and each point costs a
    # server's start: every N once, the errnos in turn
    for op, n, err in points("server", clean, SERVER_SAMPLE, every_errno=False):
        if sweep.over_budget():
            break
        problems, outcome, shots, _ = server_point(trainctl, lib, work, tmp_path, op, n, err)
        sweep.note("server", op, n, err, shots, problems, outcome)
    sweep.finish("server", clean)
