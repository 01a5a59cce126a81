"""trainctl server --config FILE and --check-config FILE (docs/server.md,
"The settings file"), and the server's log lines under journald.

The file's keys are the server's options without "--"; the command line
wins; --check-config exits 0, or 2 with FILE:LINE: key: errors.  Under
systemd (JOURNAL_STREAM names stderr) each log line is "<N>text", without
a time of its own; elsewhere "TIME trainctl server: text".
"""
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, poll
from server_fixture import free_port, port_open as listening


def check(trainctl, path, *args):
    return subprocess.run([str(trainctl), "server", "--check-config", str(path), *args],
                          capture_output=True, text=True, timeout=60)


class Started:
    """A server started with args, its stderr in a file; stopped with SIGTERM."""

    def __init__(self, trainctl, tmp_path, args, env=None, stderr_name="server.err"):
        self.err_path = tmp_path / stderr_name
        self.err = open(self.err_path, "w")
        full = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "home"))
        full.pop("JOURNAL_STREAM", None)
        full.update(env or {})
        self.proc = subprocess.Popen([str(trainctl), "server", *args], env=full,
                                     stdout=subprocess.DEVNULL, stderr=self.err,
                                     start_new_session=True)

    def log(self):
        return self.err_path.read_text()

    def wait_log(self, pattern):
        def seen():
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}:\n{self.log()}")
            return re.search(pattern, self.log(), re.M)
        assert poll(seen, 90), f"no {pattern!r} in the server's log:\n{self.log()}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        self.err.close()
        return self.proc.returncode


@pytest.fixture
def started(trainctl, tmp_path):
    servers = []

    def start(args, **kw):
        s = Started(trainctl, tmp_path, args, **kw)
        servers.append(s)
        return s
    yield start
    for s in servers:
        s.stop()


def test_the_file_sets_the_options(trainctl, tmp_path, started):
    port = free_port()
    conf = tmp_path / "etc" / "server.yaml"
    conf.parent.mkdir()
    conf.write_text(f"listen: 127.0.0.1:{port}\n"
                    "state: ../state        # relative to the file's folder\n"
                    "host-name: [gpu01.example.org, gpu01]\n"
                    "quota:\n  alice: 4\n  '*': 2\n"
                    "sample-seconds: 1\n"
                    "behind-https: false\n")
    r = check(trainctl, conf)
    assert r.returncode == 0, r.stderr
    srv = started(["--config", str(conf)])
    srv.wait_log(rf"listening on http://127\.0\.0\.1:{port}/")
    assert listening(port)
    # state: is the file's ../state, not the cwd's or TRAINCTL_HOME
    assert poll(lambda: (tmp_path / "state" / "server.sock").exists(), 30)
    assert not (tmp_path / "home" / "server.sock").exists()
    assert srv.stop() == 0


def test_the_command_line_wins(trainctl, tmp_path, started):
    file_port, cli_port = free_port(), free_port()
    conf = tmp_path / "server.yaml"
    conf.write_text(f"listen: 127.0.0.1:{file_port}\nstate: {tmp_path / 'st'}\n")
    srv = started(["--config", str(conf), "--listen", f"127.0.0.1:{cli_port}"])
    srv.wait_log(rf"listening on http://127\.0\.0\.1:{cli_port}/")
    assert not listening(file_port)
    assert srv.stop() == 0


@pytest.mark.parametrize("text, where", [
    ("listen: 127.0.0.1:1\nlisen: x\n", r":2: unknown key 'lisen' \(did you mean 'listen'\?\)"),
    ("cpu-slots: [1, 2]\n", r":1: cpu-slots: must be a single value, not a list"),
    ("quiet: yes please\n", r":1: quiet: must be true or false, not 'yes please'"),
    ("# a comment\n\ncpu-slots: 0\n", r":3: cpu-slots: --cpu-slots must be 1\.\.4096"),
    ("backend: slrum\n", r":1: backend: '?slrum'? is not a backend"),
    ("quota: [alice=4, bob]\n", r":1: quota: --quota takes USER=N, not 'bob'"),
    ("listen: a\nlisten: b\n", r":2: key 'listen' is given twice"),
    ("- listen\n", r":1: the file must be a mapping"),
    ("listen: [\n", r":\d+: syntax error"),
    ("help: true\n", r":1: unknown key 'help'"),
])
def test_check_config_names_file_line_and_key(trainctl, tmp_path, text, where):
    conf = tmp_path / "bad.yaml"
    conf.write_text(text)
    r = check(trainctl, conf)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert re.search(re.escape(str(conf)) + where, r.stderr), r.stderr
    # the same error stops a server started with the file, before it listens
    s = subprocess.run([str(trainctl), "server", "--config", str(conf)], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, TRAINCTL_HOME=str(tmp_path / "h")))
    assert s.returncode == 2 and re.search(where, s.stderr), s.stderr


def test_check_config_of_a_missing_file(trainctl, tmp_path):
    r = check(trainctl, tmp_path / "nothing.yaml")
    assert r.returncode == 2 and "nothing.yaml" in r.stderr, r.stderr


def server_options(trainctl):
    text = subprocess.run([str(trainctl), "server", "--help"], capture_output=True,
                          text=True).stdout
    return sorted(set(re.findall(r"--([a-z][a-z0-9-]*)", text)))


def test_every_option_has_a_key(trainctl, tmp_path):
    """Each option of `trainctl server --help` but --help, --config and
    --check-config is a key of the file (its value may be refused, its name not)."""
    opts = [o for o in server_options(trainctl) if o not in ("help", "config", "check-config")]
    assert "listen" in opts and "quota" in opts and "allow-root-jobs" in opts
    for o in opts:
        conf = tmp_path / f"{o}.yaml"
        conf.write_text(f"{o}: true\n")
        r = check(trainctl, conf)
        # taken (exit 0), or its value refused by the key's own check
        assert r.returncode == 0 or re.search(rf":1: {o}: ", r.stderr), (o, r.stderr)
        assert "unknown key" not in r.stderr, (o, r.stderr)


def test_the_docs_example_is_good(trainctl, tmp_path):
    """docs/server.md's example settings file passes --check-config."""
    doc = (REPO / "docs" / "server.md").read_text()
    m = re.search(r"```yaml\n(# /etc/trainctl/server\.yaml.*?)```", doc, re.S)
    assert m, "docs/server.md has no ```yaml block starting '# /etc/trainctl/server.yaml'"
    conf = tmp_path / "server.yaml"
    conf.write_text(m.group(1))
    (tmp_path / "notify.yaml").write_text("notify: []\n")
    r = check(trainctl, conf)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{conf}: good"


def test_the_packaged_file_is_good(trainctl):
    r = check(trainctl, REPO / "packaging" / "deb" / "server.yaml")
    assert r.returncode == 0, r.stderr


TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def test_log_lines_under_journald(trainctl, tmp_path, started):
    """JOURNAL_STREAM naming stderr: "<N>text", no time of its own."""
    port = free_port()
    err = tmp_path / "journal.err"
    err.touch()
    st = os.stat(err)
    srv = started(["--listen", f"127.0.0.1:{port}", "--state", str(tmp_path / "st")],
                  env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, stderr_name="journal.err")
    srv.wait_log(r"^<6>listening on http://")
    srv.wait_log(r"^<5>open the web UI \(one use\): http://")
    assert srv.stop() == 0
    lines = srv.log().splitlines()
    assert lines and all(re.match(r"<[0-7]>", ln) for ln in lines), lines
    assert not any(re.search(TIME, ln) for ln in lines), lines
    assert any(re.match(r"<5>Terminated: stopping", ln) for ln in lines), lines


@pytest.mark.parametrize("journal", [None, "other"])
def test_log_lines_elsewhere(trainctl, tmp_path, started, journal):
    """No JOURNAL_STREAM, or one that names another file: today's lines."""
    env = {}
    if journal:
        other = tmp_path / "other"
        other.touch()
        env["JOURNAL_STREAM"] = f"{os.stat(other).st_dev}:{os.stat(other).st_ino}"
    port = free_port()
    srv = started(["--listen", f"127.0.0.1:{port}", "--state", str(tmp_path / "st")], env=env)
    srv.wait_log(rf"^{TIME} trainctl server: listening on http://")
    srv.wait_log(rf"^{TIME} trainctl server: open the web UI \(one use\): http://")
    assert srv.stop() == 0
    assert not re.search(r"^<\d>", srv.log(), re.M), srv.log()
