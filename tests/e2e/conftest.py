"""Fixtures for trainctl's end-to-end tests (real processes, real torch).

    pytest tests/e2e                         # uses <repo>/build/trainctl
    TRAINCTL=/path/to/trainctl pytest tests/e2e

Nothing here skips a test: a missing binary or a missing torch is a failure
with a message saying what to build or install.
"""
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


_OWN_BASETEMP = None


def pytest_configure(config):
    """A root server starts each job's supervisor as the job's account, which
    must reach its run folder (docs/security.md). As root, the session's
    temporary folders therefore live in a folder of their own under /tmp that
    others may pass through (server_fixture.reachable_state opens the way to
    a state folder), not in /tmp/pytest-of-root, which every new pytest
    session, another terminal's too, resets to 0700."""
    global _OWN_BASETEMP
    if os.geteuid() == 0 and not config.option.basetemp:
        _OWN_BASETEMP = tempfile.mkdtemp(prefix="tc-e2e-", dir="/tmp")
        os.chmod(_OWN_BASETEMP, 0o711)
        config.option.basetemp = os.path.join(_OWN_BASETEMP, "t")


def pytest_sessionfinish(session, exitstatus):
    # kept when something failed, for a look at the run folders
    if _OWN_BASETEMP and exitstatus == 0:
        shutil.rmtree(_OWN_BASETEMP, ignore_errors=True)

REPO = Path(__file__).resolve().parents[2]


def chromium_or_fail():
    """node, for the browser tests (Debian's chromium through playwright-core); fails saying what is missing."""
    node = shutil.which("node")
    if not node or not (REPO / "tests" / "ui" / "node_modules" / "playwright-core").is_dir() \
            or not os.path.exists("/usr/bin/chromium"):
        pytest.fail("the browser tests need node, `npm ci --prefix tests/ui` and /usr/bin/chromium "
                    "(scripts/install-deps.sh)", pytrace=False)
    return node


PYTHON = "/usr/bin/python3"  # Debian's python3-torch / python3-sklearn live here
TORCHRUN_WRAPPER = REPO / "tests" / "e2e" / "torchrun_wrapper.py"
ENV_DUMP = REPO / "tests" / "e2e" / "env_dump.py"
DIGITS = REPO / "examples" / "digits"
DEFAULT_TIMEOUT = 300  # one command, on a loaded machine, under ASan


def poll(pred, timeout=60, step=0.05):
    """pred()'s first truthy value, asked every `step` s; None after `timeout` s.

    For waits whose caller words its own failure; wait_until says what it
    waited for."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            return None
        time.sleep(step)


def wait_until(pred, timeout=60, what="the condition", step=0.05):
    """Wait for a condition, never for a time: pred()'s first truthy value.

    Deadlines are generous (a loaded 2-core CI machine runs these tests under
    ASan, see `make soak`); a timeout fails the test naming `what`, which may
    be a string or a function called then for the details."""
    v = poll(pred, timeout, step)
    if not v:
        detail = what() if callable(what) else what
        raise AssertionError(f"timed out after {timeout} s waiting for {detail}")
    return v


# states after which a job does nothing more ("lost" is not one: a server
# requeues a lost job within its restart budget)
ENDED = ("succeeded", "failed", "killed")


def job_id_of(r):
    """The job id a `trainctl run` printed on stderr (its first line names it)."""
    m = re.search(r"job (\d{8}-\d{6}-\d{3}-[0-9a-f]{4})", r.stderr)
    assert m, r.stderr
    return m.group(1)


def job_id_in(home):
    """the id of the one job in home's database, None before it is recorded"""
    try:
        with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
            row = c.execute("SELECT id FROM jobs").fetchone()
        return row and row[0]
    except sqlite3.OperationalError:
        return None


def fail_if_ended(job, what="the condition"):
    """job: a job's JSON object (job_to_json) or None.  One that has ended
    fails the test now, naming what was awaited, its state and root cause."""
    if job and job.get("state") in ENDED:
        detail = what() if callable(what) else what
        raise AssertionError(
            f"job {job.get('id')} ended {job.get('state')} (exit {job.get('exit_code')}) while the"
            f" test waited for {detail}; its root cause: {job.get('root_cause') or 'none recorded'}")


def wait_on_job(pred, job, timeout=60, what="the condition", step=0.05):
    """wait_until for something of a job (its row, an endpoint, a metric, a
    log line) that fails at once, with the job's root cause, when the job
    has ended and the condition has not come, rather than at the timeout.

    job() returns the job's JSON object (job_to_json: state, root_cause,
    exit_code), or None while there is none yet; it is asked each round
    after pred().  pred() is asked once more after the end is seen: what the
    job recorded just before it ended still counts."""
    def check():
        v = pred()
        if v:
            return v
        j = job()
        if j and j.get("state") in ENDED:
            v = pred()
            if not v:
                fail_if_ended(j, what)
        return v

    return wait_until(check, timeout=timeout, what=what, step=step)


def holds_for(pred, seconds, what="the condition"):
    """pred() stays true for `seconds` (a check that something does NOT
    happen, e.g. a job stays queued): asked all along, not once at the end."""
    broke = poll(lambda: not pred(), seconds, 0.05)
    assert not broke, f"{what} stopped holding within {seconds} s"


# ---- a job read back, a process, completion: helpers of more than one test file ----

def show(run_tc, job):
    p = run_tc("show", "--json", job)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def notes(job, kind):
    return [e for e in job["events"] if e.get("kind") == kind]


def rank_log(job, rank):
    return open(os.path.join(job["run_dir"], "logs", f"rank-{rank}.log")).read()


def alive(pid):
    """pid runs: not gone, not a zombie (its name may hold ") ")."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def bash_complete(trainctl, home, words):
    """Source `trainctl completion bash`, run _trainctl on words, return COMPREPLY."""
    script = subprocess.run([str(trainctl), "completion", "bash"], capture_output=True, text=True, check=True).stdout
    words = [str(trainctl)] + words
    prog = f"""
source /dev/stdin <<'TRAINCTL_COMPLETION'
{script}
TRAINCTL_COMPLETION
complete -p trainctl >&2
COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})
COMP_CWORD={len(words) - 1}
_trainctl
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env.pop("TRAINCTL_SERVER", None)
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog], capture_output=True, text=True, env=env,
                       cwd=home.parent.parent)
    assert p.returncode == 0 and "-F _trainctl trainctl" in p.stderr, p.stderr
    return [w for w in p.stdout.splitlines() if w]


def trainctl_path():
    return Path(os.environ.get("TRAINCTL", REPO / "build" / "trainctl")).resolve()


def torchrun_cmd():
    """argv prefix that runs torchrun (through the Python 3.11 fix-up wrapper)."""
    return [PYTHON, str(TORCHRUN_WRAPPER)]


@pytest.fixture(scope="session")
def trainctl():
    path = trainctl_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"trainctl binary not found at {path}: run `make` or set TRAINCTL", pytrace=False)
    return path


@pytest.fixture
def home(tmp_path):
    """A fresh, empty TRAINCTL_HOME for this test."""
    h = tmp_path / "trainctl-home"
    h.mkdir()
    return h


@pytest.fixture
def run_tc(trainctl, home):
    """run_tc(*args, env=None, timeout=..., cwd=None, input=None) -> CompletedProcess.

    Runs the binary with TRAINCTL_HOME set to this test's home; `env` adds to
    (or, with value None, removes from) the inherited environment. Output is
    captured as text.
    """

    def run(*args, env=None, timeout=DEFAULT_TIMEOUT, cwd=None, input=None):
        full_env = dict(os.environ)
        full_env["TRAINCTL_HOME"] = str(home)
        for k, v in (env or {}).items():
            if v is None:
                full_env.pop(k, None)
            else:
                full_env[k] = str(v)
        return subprocess.run(
            [str(trainctl)] + [str(a) for a in args],
            env=full_env, cwd=cwd, input=input, timeout=timeout,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    return run


@pytest.fixture(scope="session")
def torch_available():
    r = subprocess.run([PYTHON, "-c", "import torch, sklearn"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"{PYTHON} cannot import torch/sklearn (apt install python3-torch "
                    f"python3-sklearn):\n{r.stderr}", pytrace=False)
    return True


@pytest.fixture(name="PYTHON")
def python_fixture():
    return PYTHON


@pytest.fixture(name="REPO")
def repo_fixture():
    return REPO


@pytest.fixture(name="torchrun_cmd")
def torchrun_cmd_fixture():
    return torchrun_cmd


@pytest.fixture
def nvml(trainctl, tmp_path):
    """Environment for 3 fake GPUs whose faults the test writes to `conf`."""
    lib = Path(trainctl).parent / "fake-nvml"
    assert (lib / "libnvidia-ml.so.1").exists(), f"no fake NVML in {lib}: build the tree"
    conf = tmp_path / "nvml.conf"
    conf.write_text("count 3\n")
    env = {"LD_LIBRARY_PATH": str(lib), "TRAINCTL_FAKE_NVML": str(conf),
           "TRAINCTL_FAKE_DEVICES": None}
    return conf, env


def _leftover_trainctl(root):
    """pids of trainctl processes (supervisors, drivers, node supervisors)
    whose TRAINCTL_HOME or TRAINCTL_RUN_DIR lies under root (a server's
    supervisor runs as the job's account with no TRAINCTL_HOME, and waits for
    its hub at exit long after a test's server has stopped)."""
    root = os.path.realpath(str(root)) + os.sep
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0]
            if os.path.basename(argv0) != b"trainctl":
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        for kv in env:
            key, _, val = kv.partition(b"=")
            if key in (b"TRAINCTL_HOME", b"TRAINCTL_RUN_DIR"):
                where = os.path.realpath(val.decode(errors="replace"))
                if (where + os.sep).startswith(root):
                    found.append(int(name))
                    break
    return found


def _end_leftovers(root):
    pids = _leftover_trainctl(root)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if not poll(lambda: not _leftover_trainctl(root), timeout=15):
            pids = _leftover_trainctl(root)
        else:
            break


@pytest.fixture(autouse=True)
def no_leftover_jobs(tmp_path):
    """A test that fails midway may leave a server's supervisors (detached by
    design) running its jobs; end them, so one failure does not load the
    machine under the tests that follow.  Runs after the test's own
    fixtures have stopped their servers."""
    yield
    _end_leftovers(tmp_path)


@pytest.fixture(scope="session", autouse=True)
def no_leftover_jobs_at_the_end(tmp_path_factory):
    """The same for servers of module-scoped fixtures, whose folders are not
    under any one test's tmp_path: nothing of the suite outlives it."""
    yield
    _end_leftovers(tmp_path_factory.getbasetemp())
