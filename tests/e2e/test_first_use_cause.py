"""Issue 29, items 11, 12 and 16: the root cause in one line (the exception a
rank died of, in `ps`, the API, webhooks and Slack; the traceback printed
once), what exactly ran (each worker's argv in supervisor.log, job.env and
`show`), and `logs --timestamps` / `--merge` (locally and through a server)."""
import json
import os
import re

import pytest

from conftest import PYTHON, wait_until
from server_fixture import start_server


def write(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def show(run_tc, job):
    return json.loads(run_tc("show", job, "--json").stdout)


# ---- 11: the root cause in one line ------------------------------------------

class Receiver:
    """A webhook receiver on 127.0.0.1 that keeps every POSTed body."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        self.bodies = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                outer.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_exception_line_is_the_root_cause(run_tc, home, tmp_path, receiver):
    script = write(tmp_path, "crash.py", """
import os, time
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    if os.environ["RANK"] == "1":
        print("loading the config", flush=True)
        return {}["missing_key"]
    time.sleep(120)

main()
""")
    spec = write(tmp_path, "job.yaml", f"""
name: cause-keyerror
command: ["{PYTHON}", "{script}"]
devices: {{type: cpu, per_node: 2}}
restart: {{grace_seconds: 5}}
notify:
  - url: {receiver.url}
    events: [failed]
  - url: {receiver.url}
    events: [failed]
    format: slack
""")
    p = run_tc("run", spec, timeout=300)
    assert p.returncode == 1, p.stderr
    want = "rank 1: KeyError: 'missing_key' (exited with code 1)"
    assert want in p.stderr
    # the end of `run` shows the traceback once (the error file's), then the
    # log's lines before it
    assert p.stderr.count("Traceback (most recent call last):") == 1, p.stderr
    assert "error reported by rank 1" in p.stderr
    assert "loading the config" in p.stderr.split("error reported by rank 1")[1]
    job = show(run_tc, "cause-keyerror")
    assert job["root_cause"].startswith(want)
    assert f"root cause: {want}" in run_tc("show", "cause-keyerror").stdout
    ps = run_tc("ps", "-a", "-o", "name,result")
    assert ps.returncode == 0, ps.stderr
    assert "exit 1: rank 1: KeyError: 'missing_key'" in ps.stdout, ps.stdout
    wait_until(lambda: len(receiver.bodies) == 2, what="the two failed deliveries")
    hook = next(b for b in receiver.bodies if "event" in b)
    slack = next(b for b in receiver.bodies if "text" in b)
    assert want in hook["reason"], hook
    assert "KeyError: 'missing_key'" in slack["text"], slack


def test_exception_line_from_the_log(run_tc, home, tmp_path):
    # no @record: the traceback at the end of the rank's log names it
    p = run_tc("run", "--", PYTHON, "-c", "raise ValueError('bad learning rate 42')", timeout=120)
    assert p.returncode == 1
    want = "rank 0: ValueError: bad learning rate 42 (exited with code 1)"
    assert want in p.stderr
    assert p.stderr.count("Traceback (most recent call last):") == 1, p.stderr
    job = json.loads(run_tc("ps", "-a", "--format", "json").stdout)[0]
    assert job["root_cause"].startswith(want)
    # a rank that exits without an exception keeps the plain cause
    p = run_tc("run", "--", "/bin/sh", "-c", "exit 3")
    assert "rank 0 exited with code 3" in p.stderr


# ---- 12: what exactly ran ----------------------------------------------------

def test_each_workers_argv_is_recorded(run_tc, home, tmp_path):
    spec = write(tmp_path, "job.yaml", f"""
name: argv-shown
command: ["{PYTHON}", "-c", "import sys; print(sys.argv[1:])"]
args: {{lr: "0.1", note: "it's two words"}}
devices: {{type: cpu, per_node: 2}}
""")
    p = run_tc("run", spec, timeout=300)
    assert p.returncode == 0, p.stderr
    argv = f"""{PYTHON} -c 'import sys; print(sys.argv[1:])' --lr 0.1 --note 'it'\\''s two words'"""
    job = show(run_tc, "argv-shown")
    log = open(os.path.join(job["run_dir"], "logs", "supervisor.log")).read()
    for r in (0, 1):
        assert f"attempt 0 rank {r} runs: {argv}\n" in log, log
    env = open(os.path.join(job["run_dir"], "job.env")).read()
    assert f"# every worker runs: {argv}\n" in env, env
    assert job["argv"] == [PYTHON, "-c", "import sys; print(sys.argv[1:])",
                                   "--lr", "0.1", "--note", "it's two words"]
    assert f"argv       {argv}\n" in run_tc("show", "argv-shown").stdout
    # the line reads back as the same argv
    assert "['--lr', '0.1', '--note', \"it's two words\"]" in p.stdout


def test_shell_command_argv(run_tc, home, tmp_path):
    spec = write(tmp_path, "job.yaml", """
name: argv-shell
command: echo hello
args: {epochs: "2"}
""")
    assert run_tc("run", spec).returncode == 0
    out = run_tc("show", "argv-shell").stdout
    assert """argv       /bin/sh -c 'echo hello "$@"' trainctl-job --epochs 2\n""" in out, out


def test_image_jobs_runtime_command_line(run_tc, home, tmp_path):
    import image_fixture
    why = image_fixture.podman_usable()
    if why:
        pytest.skip(f"podman cannot be installed here: {why}")
    conf = image_fixture.containers_conf(str(tmp_path))
    image = image_fixture.ensure_image(conf)
    spec = write(tmp_path, "job.yaml", f"""
name: argv-image
image: {image}
command: ["/usr/bin/python3", "-c", "print('in the image')"]
""")
    p = run_tc("run", spec, env={"CONTAINERS_CONF": str(conf)}, timeout=300)
    assert p.returncode == 0, p.stderr
    job = show(run_tc, "argv-image")
    log = open(os.path.join(job["run_dir"], "logs", "supervisor.log")).read()
    line = next(x for x in log.splitlines() if "attempt 0 rank 0 runs: " in x)
    assert re.search(r"runs: \S*podman run ", line), line
    assert "--env-file" in line and "TRAINCTL_JOB_ID=" not in line, line
    assert line.endswith(f" {image} /usr/bin/python3 -c 'print('\\''in the image'\\'')'"), line


# ---- 16: logs --timestamps and --merge ---------------------------------------

# rank 0 and 1 take turns (each waits for the other's file, then 0.1 s more,
# well above the supervisor's 10 ms read rounds)
TURNS = r'''
import os, sys, time
r = int(os.environ["RANK"]); d = sys.argv[1]
words = ["one", "two", "three", "four"]
for i, w in enumerate(words):
    if i % 2 != r:
        continue
    if i:
        while not os.path.exists(os.path.join(d, str(i - 1))):
            time.sleep(0.01)
        time.sleep(0.1)
    print(w, flush=True)
    open(os.path.join(d, str(i)), "w").close()
'''

MERGED = "[0] one\n[1] two\n[0] three\n[1] four\n"
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "


def turns_spec(tmp_path, name):
    script = write(tmp_path, "turns.py", TURNS)
    flags = tmp_path / f"flags-{name}"
    flags.mkdir()
    os.chmod(flags, 0o777)
    return f"""
name: {name}
command: ["{PYTHON}", "{script}", "{flags}"]
devices: {{type: cpu, per_node: 2}}
"""


def check_timed_logs(logs):
    """logs(*args) -> CompletedProcess of `trainctl logs JOB *args`."""
    # the stored logs stay byte-exact; by rank, as before
    assert logs("--rank", "0").stdout == "one\nthree\n"
    assert logs().stdout == "[0] one\n[0] three\n[1] two\n[1] four\n"
    p = logs("--merge")
    assert p.returncode == 0 and p.stdout == MERGED, p.stdout + p.stderr
    p = logs("--timestamps", "--rank", "1")
    assert re.fullmatch(f"{STAMP}two\n{STAMP}four\n", p.stdout), p.stdout
    p = logs("--merge", "--timestamps")
    lines = p.stdout.splitlines(keepends=True)
    assert [re.sub(f"^{STAMP}", "", x) for x in lines] == MERGED.splitlines(keepends=True), p.stdout
    stamps = [x[:24] for x in lines]
    assert stamps == sorted(stamps)
    p = logs("--merge", "--tail", "1")
    assert p.stdout == "[0] three\n[1] four\n"
    p = logs("--merge", "-f")
    assert p.returncode == 2 and "--merge reads the logs written so far: not with -f" in p.stderr


def test_logs_timestamps_and_merge_local(run_tc, home, tmp_path):
    spec = write(tmp_path, "job.yaml", turns_spec(tmp_path, "turns-local"))
    p = run_tc("run", spec, timeout=300)
    assert p.returncode == 0, p.stderr
    job = show(run_tc, "turns-local")
    # the times are beside the log, never in it
    assert open(os.path.join(job["run_dir"], "logs", "rank-1.log")).read() == "two\nfour\n"
    check_timed_logs(lambda *a: run_tc("logs", "turns-local", *a))


def test_logs_timestamps_and_merge_through_a_server(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2")
    try:
        job = srv.submit(turns_spec(tmp_path, "turns-remote"))
        srv.wait_state(job, "succeeded")
        check_timed_logs(lambda *a: srv.cli("logs", job, *a))
        st, body = srv.call("GET", f"/api/v1/jobs/{job}/logs?merge=1&follow=1")
        assert st == 400, body
    finally:
        srv.stop()
