"""A real 2-node Slurm cluster on localhost for the tests and the benchmark.

Debian's slurm-wlm is built with multiple-slurmd support, so one host runs
two slurmd (-N n1, -N n2) on two ports next to one slurmctld; munged runs
with a generated key and its own socket. Everything lives in one temporary
folder and runs as the current user (root in CI); nothing touches
/etc/slurm or /run/munge. Commands find the cluster through SLURM_CONF
(cluster.env).

    python3 tests/e2e/slurm_cluster.py DIR      # start, print the env, wait for Ctrl-C

The nodes have 2 CPUs each (CPUs=2 whatever the machine has: the tests
oversubscribe), no gres, and one partition "debug" holding both.
"""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import poll
from server_fixture import start_server, token_for, unix_accounts

# The two-phase counter of the hub tests (test_hub.py, test_multinode_leftovers.py), a
# Python program for each rank (the caller puts a number for STEPS): STEPS DLLL points,
# "half", a wait for the file argv[1], STEPS more, "done RANK".
HUB_COUNTER = r'''
import os, sys, time
rank = int(os.environ["RANK"])
go = sys.argv[1]
def step(i):
    print('DLLL {"type": "LOG", "step": [0, %d], "data": {"train.loss": %d.5}}' % (i, i), flush=True)
for i in range(STEPS):
    step(i)
    time.sleep(0.01)
print("half", flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
for i in range(STEPS, 2 * STEPS):
    step(i)
print("done", rank, flush=True)
'''


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def common_conf(folder, kill_wait):
    """The slurm.conf lines both test clusters (this one and mhost_cluster.py)
    share: Slurm's state, pid and log files under `folder`, and plugins that
    need no daemon or kernel feature of their own."""
    return f"""StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool/%n
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd-%n.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
KillWait={kill_wait}
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=10
"""


def have_slurm():
    return all(shutil.which(p) for p in ("slurmctld", "slurmd", "munged", "sbatch", "srun"))


class Cluster:
    def __init__(self, root, cpus=2, kill_wait=5, plugstack=None, conf_set=None, before_ctld=None,
                 nodes=2):
        self.root = Path(root)
        self.names = [f"n{i + 1}" for i in range(nodes)]  # slurmd n1, n2, ...
        self.cpus = cpus
        self.kill_wait = kill_wait
        self.plugstack = plugstack  # a plugstack.conf (SPANK plugins: the fake pyxis), or None
        # {Key: value} replacing (or added to) slurm.conf's lines, and a call made once
        # munged runs, before slurmctld starts: the accounting fixture (slurmdbd_fixture.py)
        self.conf_set = conf_set or {}
        self.before_ctld = before_ctld
        self.procs = []
        self.conf = self.root / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))

    # ---- configuration ----

    def _write_conf(self):
        r = self.root
        self.ctld_port = _free_port()
        self.node_ports = [_free_port() for _ in self.names]
        lines = f"""ClusterName=tctest
SlurmctldHost=localhost
SlurmctldPort={self.ctld_port}
AuthType=auth/munge
AuthInfo=socket={r}/munge/munge.socket
CryptoType=crypto/munge
SlurmUser={os.environ.get("USER", "root") if os.getuid() else "root"}
SlurmdUser=root
{common_conf(r, self.kill_wait)}SlurmdTimeout=30
MessageTimeout=5
""" + "".join(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs={self.cpus}"
              f" State=UNKNOWN\n" for n, port in zip(self.names, self.node_ports)) + f"""\
PartitionName=debug Nodes=n[1-{len(self.names)}] Default=YES MaxTime=INFINITE State=UP
"""
        if self.plugstack:
            lines += f"PlugStackConfig={self.plugstack}\n"
        if self.conf_set:
            kept = [l for l in lines.splitlines() if l.split("=", 1)[0] not in self.conf_set]
            lines = "\n".join(kept + [f"{k}={v}" for k, v in self.conf_set.items()]) + "\n"
        self.conf.write_text(lines)

    # ---- start / stop ----

    def start(self, timeout=120):
        r = self.root
        for d in ("state", "spool", "log", "munge"):
            (r / d).mkdir(parents=True, exist_ok=True)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        os.chmod(r / "munge", 0o755)
        self._write_conf()
        # munged refuses keys others can read; -f lets it run as root
        self._run(["munged", "-f", f"--socket={r}/munge/munge.socket", f"--key-file={key}",
                   f"--log-file={r}/log/munged.log", f"--pid-file={r}/munge/munged.pid",
                   f"--seed-file={r}/munge/munged.seed"])
        if self.before_ctld:
            try:
                self.before_ctld(self)
            except Exception:
                self.stop()
                raise
        self._run(["slurmctld", "-f", str(self.conf), "-i"])
        for n in self.names:
            self._run(["slurmd", "-f", str(self.conf), "-N", n])
        seen = {"out": ""}

        def idle():
            p = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env,
                               capture_output=True, text=True)
            seen["out"] = p.stdout + p.stderr
            states = dict(l.split() for l in p.stdout.splitlines() if len(l.split()) == 2)
            return all(states.get(n) == "idle" for n in self.names)

        if poll(idle, timeout, 0.3):
            return self
        out = seen["out"]
        self.stop()
        raise RuntimeError(f"the test Slurm cluster did not come up: {out}\n" + self.logs())

    def _run(self, argv):
        p = subprocess.run(argv, env=self.env, capture_output=True, text=True)
        if p.returncode != 0:
            self.stop()
            raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr}\n{self.logs()}")

    def _pids(self):
        r = self.root
        files = [r / f"slurmd-{n}.pid" for n in self.names] + [r / "slurmctld.pid", r / "munge" / "munged.pid"]
        out = []
        for f in files:
            try:
                out.append(int(f.read_text().strip()))
            except (OSError, ValueError):
                pass
        return out

    def stop(self):
        # jobs first, so that no job step outlives the cluster
        subprocess.run(["scancel", "--full", "--user", str(os.getuid())], env=self.env,
                       capture_output=True, timeout=30)
        stop_daemons(self._pids())

    def logs(self):
        return log_tails(self.root / "log")

    def squeue(self):
        return subprocess.run(["squeue", "-h", "-o", "%i %T"], env=self.env, capture_output=True,
                              text=True).stdout

    def job_state(self, job_id):
        """JobState as scontrol shows it: COMPLETING until every node is done
        with the job (squeue already shows the next state then); None when
        Slurm does not know the job"""
        p = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], env=self.env,
                           capture_output=True, text=True)
        for f in p.stdout.split():
            if f.startswith("JobState="):
                return f.split("=", 1)[1]
        return None

    def nodes_idle(self):
        """every node idle: no job on it, none completing"""
        p = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env,
                           capture_output=True, text=True)
        states = dict(l.split() for l in p.stdout.splitlines() if len(l.split()) == 2)
        return sorted(states) == sorted(self.names) and set(states.values()) == {"idle"}


def stop_daemons(pids):
    """SIGTERM to each of our daemons, SIGKILL to those still there 30 s later."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    poll(lambda: not any(_alive(p) for p in pids), 30, 0.1)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def log_tails(folder):
    """The last lines of each *.log in folder, for a failure's message."""
    text = []
    for f in sorted(Path(folder).glob("*.log")):
        lines = f.read_text(errors="replace").splitlines()[-15:]
        text.append(f"--- {f.name}\n" + "\n".join(lines))
    return "\n".join(text)


def serve(c):
    """By hand: print how to reach cluster c, then wait for Ctrl-C or SIGTERM."""
    print(f"export SLURM_CONF={c.conf}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


# The fixtures a test module gets by importing them (`from slurm_cluster import
# cluster, slurm_tc`): one cluster per module, stopped at its end, and run_tc
# with SLURM_CONF pointing at it.
def module_cluster(tmp_path_factory, nodes=2):
    """the body of a module's cluster fixture: started, yielded, stopped"""
    if not have_slurm():
        pytest.fail("Slurm is not installed (apt install slurm-wlm munge; scripts/install-deps.sh)",
                    pytrace=False)
    c = Cluster(tmp_path_factory.mktemp("slurm"), nodes=nodes).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from module_cluster(tmp_path_factory)


@pytest.fixture
def slurm_tc(run_tc, cluster):
    def run(*args, env=None, **kw):
        return run_tc(*args, env=dict(env or {}, SLURM_CONF=cluster.conf), **kw)
    return run

@contextlib.contextmanager
def root_slurm_server(trainctl, prefix, role, env=None):
    """A real account, a localhost cluster and a real root server submitting
    to it (env added to its environment), in a folder the account may pass
    through (0711; the cluster's folder 0755: its slurm.conf and munge socket):
    yielded as (srv, {role: name}, cluster, base), srv.token the account's.
    The account's Slurm jobs, the server, the cluster, the account and base
    are removed afterwards, also on failure."""
    if not have_slurm():
        pytest.fail("Slurm is not installed (apt install slurm-wlm munge; scripts/install-deps.sh)",
                    pytrace=False)
    base = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(base, 0o711)
    croot = os.path.join(base, "slurm")
    os.makedirs(croot)
    os.chmod(croot, 0o755)
    state = os.path.join(base, "state")
    cluster = None
    try:
        cluster = Cluster(croot).start()
        with unix_accounts(role) as u:
            tok = token_for(trainctl, state, u[role])
            srv = start_server(trainctl, state, env=dict(env or {}, SLURM_CONF=str(cluster.conf)))
            srv.token = tok
            try:
                yield srv, u, cluster, base
            finally:
                srv.stop()
                subprocess.run(["scancel", "--full", "--user", u[role]], env=cluster.env,
                               capture_output=True, timeout=30)
    finally:
        if cluster:
            cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/trainctl-slurm").resolve()
    c = Cluster(root).start()
    try:
        serve(c)
    finally:
        c.stop()
