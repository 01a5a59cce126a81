"""The smallest Ceph that serves S3, on loopback, for the storage tests.

A strict S3 server beside s3rver: Ceph's radosgw checks Signature V4 the way
AWS does, where s3rver forgives. One cluster per test session, from Debian's
packages (scripts/install-deps.sh), in a temporary folder with its own fsid:

  one monitor     on 127.0.0.1 and a free port, msgr2 only
  one OSD         `osd objectstore = memstore`: objects in RAM, no disk
  radosgw         the beast frontend on 127.0.0.1 and a free port

and nothing else: no manager daemon, no systemd, no keys (`auth ... = none`).
Facts that cost time to find: with auth none, radosgw hangs for five minutes
unless every `ms_*_mode` is `crc`; pools need size 1 (`mon allow pool size
one`, and the default pool size 1). A user and its keys come from
`radosgw-admin user create`. Every daemon runs in the foreground as a child
of the test session and is stopped at its end; startup waits on conditions
(the monitor answering, the OSD up, the port answering), about 20 s in all.
"""
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import uuid
from pathlib import Path

from conftest import poll

PROGRAMS = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph", "monmaptool")
ACCESS = "TRAINCTLRGWTESTKEY01"
SECRET = "trainctl-rgw-test-secret-not-a-real-one"
PR_SET_PDEATHSIG = 1
MS_MODES = ("ms cluster mode", "ms service mode", "ms client mode",
            "ms mon cluster mode", "ms mon service mode", "ms mon client mode")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _own_session_ended_with_us():
    """In the child before exec: a session of its own (a ^C at the terminal
    is pytest's to handle) and SIGTERM when the test session dies, however
    it dies, so that no daemon outlives it."""
    os.setsid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def missing_programs():
    return [p for p in PROGRAMS if not shutil.which(p)]


class Rgw:
    """A running mon + OSD + radosgw under `folder`; stop() ends all of them."""

    def __init__(self, folder, memstore_bytes=4 << 30):
        self.dir = Path(folder)
        self.memstore_bytes = memstore_bytes  # the most the OSD keeps in RAM
        self.fsid = str(uuid.uuid4())
        self.mon_port = free_port()
        self.port = None
        self.procs = {}  # name -> Popen
        self.access, self.secret = ACCESS, SECRET

    # ---- the pieces ----

    def _conf(self):
        d = self.dir
        lines = [
            "[global]",
            f"fsid = {self.fsid}",
            f"mon host = [v2:127.0.0.1:{self.mon_port}]",
            "public addr = 127.0.0.1",
            "cluster addr = 127.0.0.1",
            "ms bind msgr1 = false",
            "auth cluster required = none",
            "auth service required = none",
            "auth client required = none",
            *(f"{m} = crc" for m in MS_MODES),
            "keyring = /dev/null",
            f"run dir = {d}/run",
            f"admin socket = {d}/run/$name.asok",
            f"log file = {d}/log/$name.log",
            f"mon data = {d}/mon/$id",
            f"osd data = {d}/osd/$id",
            "osd objectstore = memstore",
            f"memstore device bytes = {self.memstore_bytes}",
            "osd pool default size = 1",
            "osd pool default min size = 1",
            "osd pool default pg num = 8",
            "osd pool default pgp num = 8",
            "osd crush chooseleaf type = 0",
            "mon allow pool size one = true",
            # a nearly full /tmp is the tests' business, not a reason to stop
            "mon data avail warn = 1",
            "mon data avail crit = 0",
        ]
        (d / "ceph.conf").write_text("\n".join(lines) + "\n")

    def _cli(self, *argv, timeout=60):
        """A one-shot Ceph command; its stdout, or AssertionError with its stderr."""
        p = subprocess.run([*argv, "-c", str(self.dir / "ceph.conf")], capture_output=True,
                           text=True, timeout=timeout)
        if p.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()}\n"
                                 f"{self.logs()}")
        return p.stdout

    def _daemon(self, name, *argv):
        log = open(self.dir / "log" / f"{name}.out", "wb")
        self.procs[name] = subprocess.Popen(
            [*argv, "-f", "-c", str(self.dir / "ceph.conf")], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, preexec_fn=_own_session_ended_with_us)
        log.close()

    def pids(self):
        return [p.pid for p in self.procs.values() if p.poll() is None]

    def _alive(self):
        dead = [f"{n} exited {p.returncode}" for n, p in self.procs.items() if p.poll() is not None]
        if dead:
            raise AssertionError(f"{', '.join(dead)}\n{self.logs()}")

    def _wait(self, pred, what, timeout=120):
        def step():
            self._alive()
            return pred()
        if not poll(step, timeout=timeout, step=0.25):
            raise AssertionError(f"Ceph: timed out after {timeout} s waiting for {what}\n{self.logs()}")

    def logs(self, lines=15):
        out = []
        for f in sorted((self.dir / "log").glob("*")):
            tail = f.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {f} (last {len(tail)} lines)\n" + "\n".join(tail))
        return "\n".join(out)

    # ---- start and stop ----

    def start(self):
        d = self.dir
        for sub in ("run", "log", "mon/a", "osd/0"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        self._conf()
        self._cli("monmaptool", "--create", "--addv", "a", f"[v2:127.0.0.1:{self.mon_port}]",
                  "--fsid", self.fsid, str(d / "monmap"))
        self._cli("ceph-mon", "--mkfs", "-i", "a", "--monmap", str(d / "monmap"))
        self._daemon("mon", "ceph-mon", "-i", "a")
        # `ceph` keeps trying to reach the monitor for --connect-timeout seconds
        osd_uuid = str(uuid.uuid4())
        osd_id = self._cli("ceph", "--connect-timeout", "60", "osd", "new", osd_uuid, timeout=90).strip()
        assert osd_id == "0", osd_id
        self._cli("ceph-osd", "--mkfs", "-i", "0", "--osd-uuid", osd_uuid)
        self._daemon("osd", "ceph-osd", "-i", "0")

        def osd_up():
            dump = json.loads(self._cli("ceph", "osd", "dump", "-f", "json"))
            return any(o["osd"] == 0 and o["up"] for o in dump["osds"])
        self._wait(osd_up, "osd.0 to be up")
        # the user first: radosgw-admin makes radosgw's pools, which radosgw
        # would otherwise make while the tests' first requests wait
        self._cli("radosgw-admin", "user", "create", "--uid", "trainctl-tests",
                  "--display-name", "trainctl tests", "--access-key", ACCESS,
                  "--secret-key", SECRET, timeout=180)
        self.port = free_port()
        self._daemon("rgw", "radosgw", "-n", "client.rgw",
                     "--rgw-frontends", f"beast endpoint=127.0.0.1:{self.port}")

        def answers():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                    return s.recv(16).startswith(b"HTTP/1.")
            except OSError:
                return False
        self._wait(answers, f"radosgw to answer on 127.0.0.1:{self.port}")
        return self

    def stop(self):
        """SIGTERM to radosgw, the OSD and the monitor, in that order; SIGKILL
        to whatever has not exited 30 s later. Nothing of the cluster is left."""
        for name in ("rgw", "osd", "mon"):
            p = self.procs.get(name)
            if p and p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
