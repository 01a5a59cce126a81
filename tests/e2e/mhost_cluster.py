"""A real multi-host Slurm cluster on one machine, for the e2e tests.

Three simulated hosts, each a network namespace (`ip netns`) with a mount
and a UTS namespace of its own:

    login  10.87.0.10   munged, slurmctld, the hub (trainctl run / server)
    c1     10.87.0.11   munged, slurmd (NodeName=c1)
    c2     10.87.0.12   munged, slurmd (NodeName=c2)

Each host is a long-lived holder process (`nsenter --net=/run/netns/NS
unshare --mount --uts ... sleep`); everything else enters it with `nsenter
--target HOLDER --net --mount --uts`. In its mount namespace a host has:

* its own tmpfs on /tmp: $HOME (/tmp/home), $TRAINCTL_HOME (/tmp/home/.trainctl),
  every run folder, munged's socket, Slurm's state, spool and logs. Nothing
  there is seen by another host, nor by the test (except through
  /proc/<holder>/root, see path()).
* read-only, shared: the repository (the trainctl binary, examples/ as the
  workdir), the trainctl binary when it lives elsewhere, and the cluster's
  shared folder (/var/tmp/tcmh<pid>-<n>: slurm.conf, munge.key, hosts),
  whose `hosts` is bound over /etc/hosts.
* its netns's own /sys (the machine's cgroup tree moved over /sys/fs/cgroup:
  slurmd wants it).

Network: one veth pair per host to a bridge that sits in a namespace of its
own (tcmh<pid>-br); addresses exist only inside these namespaces, nothing is
routed beyond them, the machine's own namespace gets no interface at all.
Every namespace name carries the test process's pid, so clusters of
concurrent test runs never meet, and start() first deletes what a crashed
earlier run (a pid no longer alive) left behind. stop() deletes everything,
also after a failed start.

munge: one key (shared, read-only, 0400), one munged per host with its socket
at the same path in each host's private /tmp. Slurm runs as root with
proctrack/linuxproc and task/none, as in slurm_cluster.py.

    python3 tests/e2e/mhost_cluster.py      # start, print how to enter, wait for Ctrl-C

Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), iproute2, util-linux, slurm-wlm, munge.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import REPO, poll, trainctl_path  # noqa: E402
from slurm_cluster import common_conf  # noqa: E402

PREFIX = "tcmh"
SUBNET = "10.87.0"
HOSTS = {"login": 10, "c1": 11, "c2": 12}
COMPUTE = ("c1", "c2")
HOME = "/tmp/home"                       # $HOME on every host (private)
TRAINCTL_HOME = HOME + "/.trainctl"      # the default for that $HOME, set explicitly
SLURM_DIR = "/tmp/slurm"                 # Slurm's state, spool, pids, logs (private)
MUNGE_SOCKET = "/tmp/munge/munge.socket"  # per host, private
_SEQ = [0]


def have_multihost():
    """None when this machine can run the cluster, else why not."""
    if os.geteuid() != 0:
        return "needs root (network and mount namespaces)"
    missing = [p for p in ("ip", "unshare", "nsenter", "slurmctld", "slurmd", "munged", "srun",
                           "sbatch") if not shutil.which(p)]
    if missing:
        return ("missing " + ", ".join(missing) +
                " (apt install iproute2 util-linux slurm-wlm munge; scripts/install-deps.sh)")
    return None


def _sh(argv, check=True, timeout=60, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed ({p.returncode}): "
                           f"{p.stderr.strip()}")
    return p


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False


def _netns_list():
    p = _sh(["ip", "netns", "list"], check=False)
    return [l.split()[0] for l in p.stdout.splitlines() if l.split()]


def _kill_netns(ns):
    """End every process in ns (TERM, then KILL), then delete it."""
    def pids():
        p = _sh(["ip", "netns", "pids", ns], check=False)
        return [int(x) for x in p.stdout.split() if x.isdigit()]

    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        for pid in pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if poll(lambda: not any(_alive(p) for p in pids()), wait, 0.1):
            break
    _sh(["ip", "netns", "del", ns], check=False)


def cleanup_leftovers():
    """Delete the namespaces and shared folders of runs whose process is gone."""
    for ns in _netns_list():
        m = re.fullmatch(PREFIX + r"(\d+)-\d+-\w+", ns)
        if m and not _alive(int(m.group(1))):
            _kill_netns(ns)
    for d in Path("/var/tmp").glob(PREFIX + "*"):
        m = re.fullmatch(PREFIX + r"(\d+)-\d+", d.name)
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(d, ignore_errors=True)


class MultiHostCluster:
    def __init__(self, trainctl=None, kill_wait=5, cpus=2):
        _SEQ[0] += 1
        self.tag = f"{PREFIX}{os.getpid()}-{_SEQ[0]}"
        self.shared = Path("/var/tmp") / self.tag
        self.conf = self.shared / "slurm.conf"
        self.trainctl = Path(trainctl or trainctl_path()).resolve()
        self.kill_wait = kill_wait
        self.cpus = cpus
        self.holders = {}        # host -> Popen of the holder (its pid is the host's anchor)
        self.namespaces = []     # every netns this cluster created
        self.bridge_ns = f"{self.tag}-br"

    # ---- names ----

    def ns(self, host):
        return f"{self.tag}-{host}"

    @staticmethod
    def addr(host):
        return f"{SUBNET}.{HOSTS[host]}"

    def veth(self, host):
        """the bridge side of host's link (in the bridge's namespace)"""
        return f"v{host}"

    def path(self, host, p):
        """p as host sees it, readable from the test (through the holder's root)"""
        return Path(f"/proc/{self.holders[host].pid}/root") / str(p).lstrip("/")

    def env(self, extra=None):
        """the environment of a command on a host: private HOME and TRAINCTL_HOME"""
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("SLURM_", "TRAINCTL_", "MASTER_")) and k != "TMPDIR"}
        e.update(HOME=HOME, TRAINCTL_HOME=TRAINCTL_HOME, SLURM_CONF=str(self.conf))
        for k, v in (extra or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = str(v)
        return e

    def argv(self, host, argv, cwd="/"):
        return ["nsenter", f"--target={self.holders[host].pid}", "--net", "--mount", "--uts",
                f"--wd={cwd}", "--"] + [str(a) for a in argv]

    # ---- running things on a host ----

    def run(self, host, argv, env=None, timeout=300, cwd="/", input=None, check=False):
        """argv on host (nsenter execs it: no extra process) -> CompletedProcess (text)"""
        p = subprocess.run(self.argv(host, argv, cwd), env=self.env(env), input=input,
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"{host}: {' '.join(map(str, argv))} -> {p.returncode}\n"
                                 f"{p.stdout}\n{p.stderr}")
        return p

    def popen(self, host, argv, env=None, cwd="/", **kw):
        """argv on host in the background; the Popen's pid is argv's own process"""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        return subprocess.Popen(self.argv(host, argv, cwd), env=self.env(env), **kw)

    def tc(self, host, *args, **kw):
        """trainctl ARGS on host"""
        return self.run(host, [self.trainctl, *args], **kw)

    def write(self, host, p, text, mode=0o644):
        """a file in host's private view (e.g. a job spec under /tmp)"""
        f = self.path(host, p)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        os.chmod(f, mode)
        return Path(p)

    def link(self, host, up):
        """host's cable: the bridge side of its veth down (packets dropped) or up"""
        _sh(["ip", "-n", self.bridge_ns, "link", "set", self.veth(host), "up" if up else "down"])

    # ---- configuration ----

    def _write_shared(self):
        s = self.shared
        s.mkdir(mode=0o755)
        os.chmod(s, 0o755)
        key = s / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        for i, p in enumerate(self._shared_ro()):  # the stash points of _holder_script
            st = s / ".stash" / str(i)
            st.parent.mkdir(exist_ok=True)
            st.mkdir() if p.is_dir() else st.touch()
        (s / "hosts").write_text("127.0.0.1 localhost\n" + "".join(
            f"{self.addr(h)} {h}\n" for h in HOSTS))
        d = SLURM_DIR
        nodes = "".join(
            f"NodeName={h} NodeHostname={h} NodeAddr={self.addr(h)} CPUs={self.cpus} "
            f"State=UNKNOWN\n" for h in COMPUTE)
        self.conf.write_text(f"""ClusterName=tcmhost
SlurmctldHost=login({self.addr('login')})
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket={MUNGE_SOCKET}
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
{common_conf(d, self.kill_wait)}SlurmdTimeout=60
MessageTimeout=10
{nodes}PartitionName=debug Nodes={','.join(COMPUTE)} Default=YES MaxTime=INFINITE State=UP
""")

    def _shared_ro(self):
        """what every host sees read-only at its own path: the repository, the binary"""
        ro = [REPO]
        if not str(self.trainctl).startswith(str(REPO) + "/"):
            ro.append(self.trainctl)
        return ro

    def _holder_script(self, host):
        # The read-only paths are bound to stash points in the shared folder first
        # and moved back to their own paths once /tmp is the host's: that keeps
        # a repository or a binary under /tmp (a CI checkout) visible.
        q = shlex.quote
        stash = [(q(str(p)), q(str(self.shared / ".stash" / str(i))), p.is_dir())
                 for i, p in enumerate(self._shared_ro())]
        to_stash = "".join(f"mount --bind {p} {st}\n" for p, st, _ in stash)
        back = "".join(f"mkdir -p $(dirname {p})\n" + (f"mkdir -p {p}\n" if d else
                                                        f"[ -e {p} ] || touch {p}\n")
                       + f"mount --move {st} {p}\nmount -o remount,bind,ro {p}\n"
                       for p, st, d in stash)
        sh = q(str(self.shared))
        return f"""set -e
hostname {host}
{to_stash}mount -t tmpfs -o mode=1777,size=1g tcmh-{host} /tmp
# this netns's own /sys, with the machine's cgroup tree (slurmd needs it) moved over
mkdir /tmp/.cgroup
mount --rbind /sys/fs/cgroup /tmp/.cgroup
mount -t sysfs sysfs /sys
mount --move /tmp/.cgroup /sys/fs/cgroup
rmdir /tmp/.cgroup
{back}mount --bind {sh} {sh}
mount -o remount,bind,ro {sh}
mount --bind {sh}/hosts /etc/hosts
mkdir -p {HOME} {TRAINCTL_HOME} {SLURM_DIR}/state {SLURM_DIR}/spool/{host} {SLURM_DIR}/log
mkdir -m 0755 -p /tmp/munge
echo ready
exec sleep 2147483647
"""

    def _add_host(self, host):
        ns = self.ns(host)
        _sh(["ip", "netns", "add", ns])
        self.namespaces.append(ns)
        _sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        v = self.veth(host)
        _sh(["ip", "-n", self.bridge_ns, "link", "add", v, "type", "veth", "peer", "name", "eth0",
             "netns", ns])
        _sh(["ip", "-n", self.bridge_ns, "link", "set", v, "master", "br0", "up"])
        _sh(["ip", "-n", ns, "addr", "add", f"{self.addr(host)}/24", "dev", "eth0"])
        _sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
        # the holder: in the netns, a mount namespace (private propagation) and a
        # UTS namespace of its own; its script mounts the host's /tmp and /sys
        h = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "unshare", "--mount", "--uts",
                              "--propagation", "private", "--", "sh", "-c",
                              self._holder_script(host)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.holders[host] = h
        line = h.stdout.readline()  # the holder says ready or exits
        if line.strip() != "ready":
            raise RuntimeError(f"host {host} did not come up: {h.stderr.read()}")

    def start(self, timeout=180):
        cleanup_leftovers()
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout):
        self._write_shared()
        ns = self.bridge_ns
        _sh(["ip", "netns", "add", ns])
        self.namespaces.append(ns)
        _sh(["ip", "-n", ns, "link", "add", "br0", "type", "bridge"])
        _sh(["ip", "-n", ns, "link", "set", "br0", "up"])
        for h in HOSTS:
            self._add_host(h)
        for h in HOSTS:
            self.run(h, ["munged", "-f", f"--socket={MUNGE_SOCKET}",
                         f"--key-file={self.shared}/munge.key",
                         "--log-file=/tmp/munge/munged.log", "--pid-file=/tmp/munge/munged.pid",
                         "--seed-file=/tmp/munge/munged.seed"], check=True, timeout=60)
        self.run("login", ["slurmctld", "-f", self.conf, "-i"], check=True, timeout=60)
        for h in COMPUTE:
            self.run(h, ["slurmd", "-f", self.conf, "-N", h], check=True, timeout=60)
        if not poll(self.nodes_idle, timeout, 0.3):
            raise RuntimeError("the multi-host Slurm cluster did not come up: "
                               f"{self.sinfo()}\n{self.logs()}")

    def stop(self):
        """Everything goes: jobs, daemons, holders, namespaces, the shared folder."""
        if "login" in self.holders and _alive(self.holders["login"].pid):
            try:
                self.run("login", ["scancel", "--full", "--user", "0"], timeout=30)
            except (subprocess.TimeoutExpired, OSError):
                pass
        for ns in reversed(self.namespaces):
            _kill_netns(ns)
        for h in self.holders.values():
            try:
                h.kill()
            except ProcessLookupError:
                pass
            h.wait()
            for f in (h.stdout, h.stderr):
                f.close()
        self.namespaces = []
        shutil.rmtree(self.shared, ignore_errors=True)

    def leftovers(self):
        """what of this cluster still exists (after stop(): nothing)"""
        left = [n for n in _netns_list() if n.startswith(self.tag + "-")]
        if self.shared.exists():
            left.append(str(self.shared))
        return left

    # ---- Slurm's view ----

    def sinfo(self):
        p = self.run("login", ["sinfo", "-h", "-N", "-o", "%N %t"], timeout=60)
        return p.stdout + p.stderr

    def nodes_idle(self):
        """every compute node idle: no job on it, none completing"""
        states = dict(l.split() for l in self.sinfo().splitlines() if len(l.split()) == 2)
        return sorted(states) == sorted(COMPUTE) and set(states.values()) == {"idle"}

    def job_state(self, job_id):
        p = self.run("login", ["scontrol", "-o", "show", "job", str(job_id)], timeout=60)
        for f in p.stdout.split():
            if f.startswith("JobState="):
                return f.split("=", 1)[1]
        return None

    def logs(self, lines=15):
        """the tail of every daemon's log on every host, for failure messages"""
        out = []
        for h in self.holders:
            for d in (SLURM_DIR + "/log", "/tmp/munge"):
                try:
                    files = sorted(self.path(h, d).glob("*.log"))
                except OSError:
                    continue
                for f in files:
                    try:
                        tail = f.read_text(errors="replace").splitlines()[-lines:]
                    except OSError:
                        continue
                    out.append(f"--- {h}:{d}/{f.name}\n" + "\n".join(tail))
        return "\n".join(out)


if __name__ == "__main__":
    why = have_multihost()
    if why:
        sys.exit(f"mhost_cluster: {why}")
    c = MultiHostCluster().start()
    for h in HOSTS:
        print(f"# {h} ({c.addr(h)}): nsenter -t {c.holders[h].pid} -n -m -u "
              f"env HOME={HOME} TRAINCTL_HOME={TRAINCTL_HOME} SLURM_CONF={c.conf} bash", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        c.stop()
