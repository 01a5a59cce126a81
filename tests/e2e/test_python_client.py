"""The Python client (python/trainctl, docs/python.md) against a real server
with real jobs: every call, its errors as typed exceptions, over the Unix
socket and over TCP with a token; the package installs offline; the
examples of docs/python.md run."""
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from server_fixture import root_server, start_server, wait_for

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import trainctl  # noqa: E402

# a job that logs loss at steps 10, 20, ... (DLLogger "step": N) and accuracy per epoch
LOSS = r'''
import json, os, sys, time
steps = int(os.environ.get("STEPS", "5"))
for i in range(1, steps + 1):
    print("DLLL " + json.dumps({"type": "LOG", "step": 10 * i, "data": {"loss": 1.0 / i}}), flush=True)
    time.sleep(float(os.environ.get("PAUSE", "0")))
print("DLLL " + json.dumps({"type": "LOG", "step": [1], "data": {"val.accuracy": float(os.environ.get("ACC", "0.5"))}}), flush=True)
print("done", flush=True)
'''


def cpu_job(name, command, **extra):
    spec = {"name": name, "command": command, "devices": {"type": "cpu", "per_node": 1}}
    spec.update(extra)
    return spec


@pytest.fixture(scope="module")
def srv(trainctl, tmp_path_factory):
    s = start_server(trainctl, tmp_path_factory.mktemp("pyclient") / "state", fake="gpu:2",
                     args=["--cpu-slots", "4"])
    yield s
    s.stop()


@pytest.fixture
def c(srv):
    """The client over the server's Unix socket, as the test's own account."""
    return trainctl.Client(socket=srv.socket)


def write_loss(tmp_path, name="loss.yaml", **env):
    (tmp_path / "loss.py").write_text(LOSS)
    envs = ", ".join(f"{k}: '{v}'" for k, v in env.items())
    spec = tmp_path / name
    spec.write_text(f"name: lossy\ncommand: [/usr/bin/python3, loss.py]\nenv: {{{envs}}}\n"
                    "devices: {type: cpu, per_node: 1}\n")
    return spec


def test_submit_file_wait_logs_metrics(c, tmp_path):
    # a relative workdir is the spec file's folder's, as with `trainctl submit`
    spec = write_loss(tmp_path, STEPS=5)
    job = c.submit(str(spec), set={"env.STEPS": 6}, name="py-lossy")
    assert isinstance(job, trainctl.Job) and job.name == "py-lossy"
    assert job.wait(timeout=120) == "succeeded"
    assert job.data["state"] == "succeeded" and job.refresh().data["exit_code"] == 0
    assert job.data["spec"]["overrides"] == {"env.STEPS": "6"}
    lines = list(job.logs())
    assert lines[-1] == "done" and sum("DLLL" in s for s in lines) == 7
    assert all(line.rank == 0 for line in lines)
    assert list(job.logs(tail=1)) == ["done"]
    assert list(job.logs(rank=0, follow=True))[-1] == "done"   # an ended job: its tail, then the end
    # the logged steps, not the points' positions, with each point's time
    loss = job.metrics("train.loss" if "train.loss" in job.metric_names() else "loss")
    assert [p.step for p in loss] == [10, 20, 30, 40, 50, 60]
    assert [round(p.value, 6) for p in loss] == [round(1.0 / i, 6) for i in range(1, 7)]
    created = job.data["created"]
    assert all(created - 5 <= p.time <= time.time() + 5 for p in loss), (created, loss)
    assert loss.name in ("loss", "train.loss") and loss.rank == 0
    acc = job.metrics("val.accuracy")     # epoch records: the step is the epoch
    assert [(p.step, p.value) for p in acc] == [(1, 0.5)]
    with pytest.raises(trainctl.NotFound) as e:
        job.metrics("los")
    assert "has no metric 'los'" in e.value.message and "val.accuracy" in e.value.message
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs pandas"):
            loss.to_pandas()
    else:
        df = loss.to_pandas()
        assert list(df.columns) == ["step", "value", "time"] and list(df["step"]) == [10, 20, 30, 40, 50, 60]


def test_follow_waits_for_start_and_streams(c, tmp_path):
    job = c.submit(cpu_job("py-follow", "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done"))
    got = list(job.logs(follow=True))   # queued at first: the follow waits for its first worker
    assert got == [f"line {i}" for i in range(1, 6)]
    assert job.wait(60) == "succeeded"


def test_two_ranks_log_lines_say_their_rank(c):
    job = c.submit(cpu_job("py-ranks", "echo hello from $RANK", devices={"type": "cpu", "per_node": 2}))
    assert job.wait(120) == "succeeded"
    lines = sorted(job.logs())
    assert lines == ["[0] hello from 0", "[1] hello from 1"] and [s.rank for s in lines] == [0, 1]
    assert [str(s) for s in job.logs(rank=1)] == ["hello from 1"]


def test_pause_resume_clone_stop_delete_and_conflicts(c):
    job = c.submit(cpu_job("py-acts", "for i in $(seq 1 600); do echo step $i; sleep 0.1; done"))
    wait_for(lambda: job.state == "running", timeout=60)
    job.pause()
    wait_for(lambda: job.state == "paused", timeout=60)
    assert job.state == "paused"
    job.resume()
    with pytest.raises(trainctl.Conflict) as e:
        job.resume()                    # not paused any more
    assert e.value.status == 409 and e.value.message
    copy = job.clone(set={"name": "py-acts-copy"})
    assert copy.id != job.id and copy.refresh().data["name"] == "py-acts-copy"
    with pytest.raises(trainctl.Conflict):
        copy.delete()                   # still active
    copy.stop()
    job.stop()
    assert copy.wait(60) == "killed" and job.wait(60) == "killed"
    with pytest.raises(trainctl.Conflict):
        job.stop()                      # ended
    copy.delete()
    with pytest.raises(trainctl.NotFound):
        copy.refresh()
    assert job in c.jobs(state="killed") and copy not in c.jobs()
    assert c.job(job.id) == job and c.job(job.id[:-2]).id == job.id


def test_dict_spec_numbers_reach_the_job_as_written(c):
    job = c.submit(cpu_job("py-floats", "echo", args={"lr": 0.1, "wd": 1e-5, "n": 3}))
    assert job.wait(60) == "succeeded"
    assert list(job.logs()) == ["--lr 0.1 --wd 1e-05 --n 3"]


def test_jobs_filters(c):
    a = c.submit(cpu_job("py-list-a", "true"))
    b = c.submit(cpu_job("py-list-b", "false"))
    assert a.wait(60) == "succeeded" and b.wait(60) == "failed"
    ok = c.jobs(state="succeeded")
    assert a in ok and b not in ok
    both = c.jobs(state=["succeeded", "failed"], name="py-list-b")
    assert both == [b]
    assert c.jobs(limit=1) == [c.jobs()[0]]
    assert c.job("py-list-a") == a      # by name
    with pytest.raises(trainctl.BadSpec):
        c.jobs(state="bogus")


def test_errors_are_typed_with_the_servers_message(c, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ncommand: echo hi\ndevices: {type: cpu, per_nod: 1}\n")
    with pytest.raises(trainctl.BadSpec) as e:
        c.submit(str(bad))
    assert e.value.status == 400 and e.value.file == str(bad) and e.value.line == 3
    assert e.value.key == "devices.per_nod" and "did you mean" in e.value.message
    with pytest.raises(trainctl.BadSpec) as e:
        c.submit(cpu_job("py-badset", "echo $2", args={"x": 1}), set=["devices.per_nod=1"])
    assert e.value.key == "devices.per_nod" and "--set devices.per_nod=1" in e.value.message
    with pytest.raises(trainctl.BadSpec) as e:
        c.submit(cpu_job("py-big", "true", devices={"type": "gpu", "per_node": 5}))
    assert e.value.key == "devices.per_node" and "has 2" in e.value.message
    with pytest.raises(trainctl.BadSpec, match="No such file"):
        c.submit(str(tmp_path / "missing.yaml"))
    with pytest.raises(trainctl.NotFound) as e:
        c.job("nosuchjob")
    assert e.value.status == 404 and "nosuchjob" in str(e.value)
    assert isinstance(e.value, trainctl.TrainctlError)
    # teams: None is every submit's; a team on a server without teams is refused clearly
    with pytest.raises(trainctl.BadSpec, match="no teams") as e:
        c.submit(cpu_job("py-team", "true"), team="ml")
    assert e.value.key is None or e.value.key == "team"
    j = c.submit(cpu_job("py-team", "true"), team=None)
    assert j.wait(60) == "succeeded"


def test_wait_timeout(c):
    job = c.submit(cpu_job("py-slow", "sleep 60"))
    t0 = time.monotonic()
    with pytest.raises(trainctl.WaitTimeout) as e:
        job.wait(timeout=0.5)
    assert time.monotonic() - t0 < 5 and isinstance(e.value, TimeoutError)
    job.stop()
    assert job.wait(60) == "killed"


def test_events_stream_and_reconnect(srv, c):
    """The stream gives each change of the caller's jobs; when the server
    goes away and comes back, it goes on after the last event it gave."""
    seen = []
    done = threading.Event()

    def reader():
        for ev in c.events(after=0, reconnect_for=120):
            seen.append(ev)
            if ev.job == second and ev.state == "succeeded":
                break
        done.set()

    second = None
    first = c.submit(cpu_job("py-ev1", "true"))
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    assert first.wait(60) == "succeeded"
    wait_for(lambda: any(e.job == first.id and e.state == "succeeded" for e in seen), timeout=30)
    srv.stop(signal.SIGKILL)      # the stream breaks mid-answer
    srv.start()
    second = c.submit(cpu_job("py-ev2", "true")).id
    assert done.wait(120), f"no event of {second} after the server came back: {seen[-5:]}"
    ids = [e.id for e in seen]
    assert ids == sorted(ids) and len(ids) == len(set(ids)), "an event repeated or out of order"
    mine = [e.state for e in seen if e.job == second]
    assert mine[0] == "queued" and mine[-1] == "succeeded"
    assert all(isinstance(e, trainctl.Event) and e.event for e in seen)
    # from an event id on: exactly those after it
    after = list(itertools.islice(c.events(after=ids[0], timeout=10), 2))
    assert [e.id for e in after] == ids[1:3]


def test_sweep_wait_best(c, tmp_path):
    spec = write_loss(tmp_path, name="trial.yaml", STEPS=2)
    (tmp_path / "sweep.yaml").write_text(
        "name: py-sweep\nspec: trial.yaml   # beside this file\n"
        "parameters:\n  env.ACC: [0.25, 0.75, 0.5]\n"
        "objective: {metric: val.accuracy, mode: max}\nparallel: 2\n")
    sw = c.sweep(str(tmp_path / "sweep.yaml"))
    assert isinstance(sw, trainctl.Sweep) and sw.name == "py-sweep"
    assert sw.wait(timeout=240) == "done"
    best = sw.best()
    assert best is not None and best.params["env.ACC"] in ("0.75", 0.75)
    assert best.objective == 0.75 and best.state == "succeeded"
    assert best.job.wait(10) == "succeeded" and best.job.metrics("val.accuracy")[0].value == 0.75
    assert len(sw.trials()) == 3 and spec.exists()
    assert sw.id in [s.id for s in c.sweeps()]
    with pytest.raises(trainctl.BadSpec) as e:
        c.sweep({"spec": {"command": "true"}, "parameters": {"args.lr": "nolist"}})
    assert e.value.status == 400


def test_env_finds_the_server_like_the_cli(srv, monkeypatch):
    monkeypatch.setenv("TRAINCTL_SERVER", srv.url)
    monkeypatch.setenv("TRAINCTL_HOME", srv.state)
    monkeypatch.delenv("TRAINCTL_TOKEN", raising=False)
    monkeypatch.delenv("TRAINCTL_SOCKET", raising=False)
    c = trainctl.Client()   # the state folder's server is the URL's: its socket, no token
    assert c.whoami()["admin"] is True and "socket" in repr(c)
    monkeypatch.delenv("TRAINCTL_SERVER")
    assert trainctl.Client().whoami()["admin"] is True   # no URL: the local socket
    monkeypatch.setenv("TRAINCTL_SERVER", srv.url)
    monkeypatch.setenv("TRAINCTL_SOCKET", "")             # no socket: TCP, and no token
    with pytest.raises(trainctl.Unauthorized) as e:
        trainctl.Client().jobs()
    assert e.value.status == 401 and "TRAINCTL_TOKEN" in e.value.message
    assert isinstance(e.value, trainctl.Forbidden)
    monkeypatch.delenv("TRAINCTL_SERVER")
    monkeypatch.setenv("TRAINCTL_HOME", "/nonexistent-trainctl-home")
    monkeypatch.delenv("TRAINCTL_SOCKET")
    with pytest.raises(trainctl.Unavailable, match="TRAINCTL_SERVER"):
        trainctl.Client()
    with pytest.raises(trainctl.Unavailable):
        trainctl.Client(url="http://127.0.0.1:9", socket=False).whoami()
    with pytest.raises(trainctl.TrainctlError, match="not an http"):
        trainctl.Client(url="ftp://x")


def test_tcp_with_tokens_and_other_users(request):
    """Over TCP with a token, as a remote script: a user's own jobs, and
    another user's refused (403)."""
    binary = request.getfixturevalue("trainctl")   # the fixture's name is the package's
    with root_server(binary, "tc-pyclient-", "alice", "bob") as (srv, users, base):
        alice = trainctl.Client(url=srv.url, token=srv.token, socket=False)
        bob = trainctl.Client(url=srv.url, token=srv.bob, socket=False)
        assert alice.whoami() == {"user": users["alice"], "admin": False}
        job = alice.submit(cpu_job("py-tcp", "echo I am $(id -un); for i in 1 2 3; do echo "
                                   "DLLL '{\"type\": \"LOG\", \"step\": [0, '$i'], \"data\": {\"loss\": 0.5}}'; done"))
        lines = list(job.logs(follow=True))
        assert lines[0] == f"I am {users['alice']}"
        assert job.wait(60) == "succeeded"
        assert [p.step for p in job.metrics("loss")] == [1, 2, 3]
        assert [j.id for j in alice.jobs()] == [job.id]
        with pytest.raises(trainctl.Forbidden) as e:
            bob.job(job.id)
        assert e.value.status == 403
        with pytest.raises(trainctl.Forbidden):
            bob.jobs(user=users["alice"])
        with pytest.raises(trainctl.Forbidden):
            trainctl.Client(url=srv.url, token=srv.bob, socket=False)._t.call(
                "POST", f"/api/v1/jobs/{job.id}/stop", body={})
        assert bob.jobs() == []
        ev = next(alice.events(after=0, timeout=10))
        assert ev.job == job.id and ev.state == "queued"
        with pytest.raises(trainctl.Unauthorized):
            trainctl.Client(url=srv.url, token="tc_" + "0" * 48, socket=False).jobs()
        sw = alice.sweep({"name": "py-tcp-sweep", "spec": {"command": "echo 'DLLL {\"type\": \"LOG\", \"step\": 1, \"data\": {\"loss\": 0.5}}'; true", "args": {"x": 1},
                                                            "devices": {"type": "cpu", "per_node": 1}},
                          "parameters": {"args.x": [1, 2]}, "objective": {"metric": "loss"}})
        assert sw.wait(120) == "done" and len(sw.trials()) == 2


def test_importing_the_client_loads_no_job_helper():
    code = ("import sys, trainctl; assert 'trainctl.job' not in sys.modules;"
            " print(sorted(n for n in trainctl.__all__))")
    p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(REPO / "python")),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for name in ("Client", "TrainctlError", "NotFound", "Forbidden", "BadSpec", "Conflict", "Unavailable"):
        assert name in p.stdout


def test_pip_installs_offline(tmp_path):
    """`pip install ./python` with no network at all (a network namespace of
    its own) into a bare virtual environment: the build backend takes the
    installed setuptools instead of downloading it; --target works too."""
    src = tmp_path / "python"   # setuptools builds in place: not in the repository
    shutil.copytree(REPO / "python", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    offline = ["unshare", "--net"] if os.geteuid() == 0 and shutil.which("unshare") else []
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    venv = tmp_path / "venv"
    # a venv without its own pip (the system's pip installs into it): no setuptools in it
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    for cmd in (["/usr/bin/python3", "-m", "pip", "--python", str(venv / "bin" / "python"), "install", str(src)],
                ["/usr/bin/python3", "-m", "pip", "install", "--target", str(tmp_path / "site"), str(src)]):
        p = subprocess.run(offline + cmd, capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
    code = "import os, trainctl; print(trainctl.__file__); print(sorted(os.listdir(os.path.dirname(trainctl.__file__))))"
    q = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert q.returncode == 0 and q.stdout.startswith(str(venv)), q.stderr
    assert "py.typed" in q.stdout and "client.py" in q.stdout
    q = subprocess.run(["/usr/bin/python3", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")))
    assert q.returncode == 0 and q.stdout.startswith(str(tmp_path / "site")), q.stderr


@pytest.mark.parametrize("prefix", ["/usr", "/usr/local"])
def test_make_install_puts_it_where_the_system_python_looks(tmp_path, prefix):
    dest = tmp_path / "root"
    p = subprocess.run(["make", "-s", "-C", str(REPO), "install-python", f"DESTDIR={dest}",
                        f"PREFIX={prefix}"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    found = sorted(dest.rglob("trainctl/__init__.py"))
    assert len(found) == 1 and (found[0].parent / "py.typed").exists(), found
    site = "/" + str(found[0].parent.parent.relative_to(dest))
    q = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert site in q.stdout.splitlines(), f"{site} is not on the system python's path:\n{q.stdout}"


def python_examples():
    text = (REPO / "docs" / "python.md").read_text()
    return re.findall(r"```python\n# example: (\S+)\n(.*?)```", text, re.S)


def test_docs_examples_run(srv, tmp_path):
    """Every `# example:` block of docs/python.md runs, in order, against a
    live server (TRAINCTL_SERVER and TRAINCTL_HOME set as for the CLI), in
    one folder; `# expect: TEXT` lines name text its output must contain."""
    blocks = python_examples()
    assert len(blocks) >= 4
    env = dict(srv.env, TRAINCTL_SERVER=srv.url, PYTHONPATH=str(REPO / "python"))
    for name, code in blocks:
        p = subprocess.run(["/usr/bin/python3", "-c", code], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        out = p.stdout + p.stderr
        assert p.returncode == 0, f"example {name} exited {p.returncode}:\n{out}"
        for want in re.findall(r"^# expect: (.*)$", code, re.M):
            assert want in out, f"example {name}: no '{want}' in:\n{out}"
