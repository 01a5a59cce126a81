"""The examples of docs/server.md, run in order against one live server.

A ```sh block whose first line is `# example: NAME` runs with bash -euo
pipefail in a shared folder, with `trainctl` (the binary under test) first
on PATH, TRAINCTL_SERVER set to the server and TRAINCTL_HOME to its state
folder (so `trainctl token create` reaches it, and the CLI and curl its Unix
socket, STATE/server.sock).  It must exit 0, and each
`# expect: TEXT` line names text its output must contain.

The Auth section's recipe starts its own server: its numbered steps' sh
blocks run as one script (their variables carry from step to step) with a
fresh state folder, a free port for 8470 and a real account of the test's
own for `alice`; each step's `# expect:` lines are looked for in that
step's output."""
import os
import re
import signal
import subprocess
import textwrap

import pytest

from conftest import REPO, trainctl_path
from server_fixture import free_port, reachable_state, start_server, unix_accounts

DOC = REPO / "docs" / "server.md"
BLOCK = re.compile(r"```sh\n(# example: (\S+)\n.*?)```", re.S)


def examples():
    return [(m.group(2), m.group(1)) for m in BLOCK.finditer(DOC.read_text())]


def test_docs_have_examples():
    names = [n for n, _ in examples()]
    assert len(names) >= 10 and len(set(names)) == len(names), names
    # the tokens example makes an account's token: it comes last
    assert names[-1] == "tokens", names


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    path = trainctl_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"trainctl binary not found at {path}: run `make` or set TRAINCTL", pytrace=False)
    base = tmp_path_factory.mktemp("server-docs")
    # the tokens example's user is an account of this machine (a root server
    # refuses tokens of names without one): made here when missing, and removed
    made = False
    if subprocess.run(["getent", "passwd", "alice"], capture_output=True).returncode != 0:
        p = subprocess.run(["useradd", "--no-create-home", "alice"], capture_output=True, text=True)
        assert p.returncode == 0, f"useradd alice: {p.stderr}"
        made = True
    try:
        srv = start_server(path, base / "state", fake="gpu:2", args=["--cpu-slots", "2", "--sample-seconds", "1"])
        work = base / "work"
        work.mkdir()
        yield srv, work
        srv.stop()
    finally:
        if made:
            subprocess.run(["userdel", "--force", "alice"], capture_output=True)


@pytest.mark.parametrize("name,body", examples(), ids=[n for n, _ in examples()])
def test_doc_example(live, name, body):
    srv, work = live
    env = dict(srv.env)
    env["PATH"] = f"{trainctl_path().parent}{os.pathsep}{env.get('PATH', '')}"
    env["TRAINCTL_SERVER"] = srv.url
    env.pop("TRAINCTL_TOKEN", None)
    try:
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=work, env=env,
                           capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name}: ran past 300 s\nstdout: {e.stdout}\nstderr: {e.stderr}\n"
                    f"server log:\n{srv.log()[-3000:]}", pytrace=False)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"{name}: exit {p.returncode}\n{out}\nserver log:\n{srv.log()[-3000:]}"
    for want in re.findall(r"^# expect: (.+)$", body, re.M):
        assert want in p.stdout, f"{name}: '{want}' not in the output:\n{out}"


def recipe():
    """The sh blocks of the Auth section's recipe, dedented, in order."""
    text = DOC.read_text()
    start = text.index("### Recipe: a user's token")
    section = text[start:text.index("\n## ", start)]
    found = re.findall(r"^( *)```sh\n(.*?)^ *```", section, re.S | re.M)
    return [textwrap.dedent(body) for _, body in found]


def test_the_auth_recipe(tmp_path):
    steps = recipe()
    assert len(steps) == 5, steps
    base = tmp_path / "recipe"
    state = base / "state"
    state.mkdir(parents=True)
    reachable_state(state)
    port = free_port()
    script = "".join(f"echo '=== step {i}'\n{body}" for i, body in enumerate(steps, 1))
    env = {k: v for k, v in os.environ.items() if k not in ("TRAINCTL_SERVER", "TRAINCTL_TOKEN")}
    env["PATH"] = f"{trainctl_path().parent}{os.pathsep}{env.get('PATH', '')}"
    env["TRAINCTL_HOME"] = str(state)
    with unix_accounts("r") as names:
        user = names["r"]
        script = script.replace("127.0.0.1:8470", f"127.0.0.1:{port}").replace("alice", user)
        try:
            p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=base, env=env,
                               capture_output=True, text=True, timeout=120)
        finally:
            # the server of step 1, when a later step failed before step 5 ended it
            lock = state / "server.lock"
            pid = lock.read_text().split()[0] if lock.exists() and lock.read_text().strip() else ""
            try:
                argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0") if pid.isdigit() else []
            except OSError:
                argv = []  # gone: step 5 stopped it
            if b"server" in argv and f"127.0.0.1:{port}".encode() in argv:
                os.kill(int(pid), signal.SIGTERM)
        log = (base / "server.log").read_text() if (base / "server.log").exists() else ""
        assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}\nserver log:\n{log[-3000:]}"
        parts = re.split(r"^=== step \d+\n", p.stdout, flags=re.M)[1:]
        assert len(parts) == len(steps), p.stdout
        for i, (body, out) in enumerate(zip(steps, parts), 1):
            for want in re.findall(r"^# expect: (.+)$", body, re.M):
                want = want.replace("127.0.0.1:8470", f"127.0.0.1:{port}").replace("alice", user)
                assert want in out, f"step {i}: '{want}' not in its output:\n{out}\n{p.stderr}"
