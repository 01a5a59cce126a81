"""What a new user of `trainctl sync` trips over (issue 16, section 3):
an S3 address with a slash missing, a progress line that stands still
during one large object, units that disagree, and an empty prefix synced
without a word."""
import os
import pty
import re
import select
import socket
import subprocess
import threading
import time
from pathlib import Path

from s3_fixture import s3  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[2]


def exe():
    return os.environ.get("TRAINCTL") or str(ROOT / "build" / "trainctl")


def run(*args, env=None, cwd=None, timeout=120):
    return subprocess.run([exe(), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


# ---- a mistyped address ----

def test_s3_address_without_two_slashes_is_exit_2(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    for dst, hint in (("s3:/demo/x", "s3://demo/x"), ("s3:demo/x", "s3://demo/x"),
                      ("obs:/b/p/", "obs://b/p/")):
        p = run("sync", "./src", dst, cwd=tmp_path)
        assert p.returncode == 2, (dst, p.stdout, p.stderr)
        assert "needs two slashes" in p.stderr and f"({hint})" in p.stderr, p.stderr
        assert "copied" not in p.stdout, p.stdout
    # as a source too, and nothing named "s3:" was made
    p = run("sync", "s3:/demo/x", "./out", cwd=tmp_path)
    assert p.returncode == 2 and "(s3://demo/x)" in p.stderr, p.stderr
    assert sorted(os.listdir(tmp_path)) == ["src"]
    # a local folder of that name is still reachable, spelled as a path
    p = run("sync", "./src", "./s3:/demo/x", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "s3:" / "demo" / "x" / "a.txt").read_text() == "a\n"


def test_spec_locations_without_two_slashes_are_exit_2(tmp_path, home):
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    cases = {
        "inputs": 'command: [true]\ninputs:\n  - {from: "s3:/demo/data/", to: d}\n',
        "outputs": 'command: [true]\noutputs: {upload_to: "obs:/demo/runs/"}\n',
        "resume": 'command: [true]\ncheckpoint: {dir: ck, resume: "s3:/demo/ck/"}\n',
    }
    for name, text in cases.items():
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(text)
        p = run("run", str(spec), env=env)
        assert p.returncode == 2, (name, p.stderr)
        assert "needs two slashes" in p.stderr and f"{name}.yaml:" in p.stderr, p.stderr
    assert not (home / "runs").exists() or not os.listdir(home / "runs")


# ---- an empty source ----

def test_empty_or_missing_prefix_warns(s3, tmp_path):  # noqa: F811
    b = s3.bucket()
    env = s3.env()
    p = run("sync", f"s3://{b}/no/such/prefix/", str(tmp_path / "dst"), env=env)
    assert p.returncode == 0, p.stderr
    assert f"warning: nothing at s3://{b}/no/such/prefix/" in p.stderr, p.stderr
    assert "0 copied" in p.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    p = run("sync", str(empty), f"s3://{b}/x/", env=env)
    assert p.returncode == 0 and "warning: nothing at" in p.stderr, p.stderr
    # a source with something in it says nothing of the kind
    (empty / "f").write_text("f")
    p = run("sync", str(empty), f"s3://{b}/x/", env=env)
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr


# ---- progress of one large object, on a terminal ----

class Throttle:
    """A TCP forwarder that passes at most `rate` bytes/s each way, so that
    one object takes seconds however fast the machine is."""

    def __init__(self, port, rate):
        self.up, self.rate = ("127.0.0.1", port), rate
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(self.up)
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, a, b):
        chunk = 64 * 1024
        try:
            while True:
                data = a.recv(chunk)
                if not data:
                    break
                b.sendall(data)
                time.sleep(len(data) / self.rate)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.sock.close()


def on_a_terminal(args, env):
    """Run with stderr on a pseudo-terminal: (exit status, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([exe(), *args], env=env, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    deadline = time.time() + 120
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the other side is closed
                break
            if not data:
                break
            seen += data
        elif p.poll() is not None:
            break
    os.close(master)
    out = p.stdout.read().decode()
    return p.wait(timeout=30), out, seen.decode(errors="replace")


UNIT = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def progress_points(term):
    """(moved, total) of each progress line the terminal showed."""
    pts = []
    for m in re.finditer(r"([\d.]+) (B|KiB|MiB|GiB) of ([\d.]+) (B|KiB|MiB|GiB), ", term):
        pts.append((float(m.group(1)) * UNIT[m.group(2)], float(m.group(3)) * UNIT[m.group(4)]))
    return pts


def test_progress_moves_during_one_large_object(s3, tmp_path):  # noqa: F811
    size = 12 << 20
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.bin").write_bytes(os.urandom(size))
    th = Throttle(s3.port, 4 << 20)
    try:
        b = s3.bucket()
        # one PUT (below the multipart threshold): the case that sat at "0 B of 12.0 MiB"
        env = dict(s3.env(f"http://127.0.0.1:{th.port}"), TRAINCTL_MULTIPART_THRESHOLD=str(64 << 20))
        rc, out, term = on_a_terminal(["sync", str(src), f"s3://{b}/m/"], env)
        assert rc == 0, term
        pts = progress_points(term)
        assert any(0 < moved < total for moved, total in pts), term
        assert pts[-1] == (size, size), term
        assert [m for m, _ in pts] == sorted(m for m, _ in pts), term
        # one unit for both lines: the summary is in binary units too
        assert "1 copied, 0 skipped, 0 deleted, 12.0 MiB in " in out, out
        # and down again, in parts
        env["TRAINCTL_MULTIPART_THRESHOLD"] = str(6 << 20)
        env["TRAINCTL_PART_SIZE"] = str(5 << 20)
        rc, out, term = on_a_terminal(["sync", f"s3://{b}/m/", str(tmp_path / "down")], env)
        assert rc == 0, term
        assert any(0 < moved < total for moved, total in progress_points(term)), term
        assert (tmp_path / "down" / "model.bin").stat().st_size == size
    finally:
        th.close()
    # piped, the same sync prints no progress line
    p = run("sync", str(src), str(tmp_path / "local"))
    assert p.returncode == 0 and "\r" not in p.stderr and " of " not in p.stderr, p.stderr
