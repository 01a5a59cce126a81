"""One server per state folder, and devices never double-booked between the
server and `trainctl run` (docs/server.md, "One server per state folder").

A second server on a state folder a live one holds exits 2 naming the first
one's pid and address; the lock dies with its holder, also by SIGKILL, and
supervisors that outlive the server do not keep it.  A `trainctl run` of
(fake) GPUs leases them in the database: the server starts no queued job on
them until the run ends, and a run refuses (exit 3) devices a server job
holds.  Waits are on conditions, never on sleeps."""
import json
import os
import pwd
import re
import signal
import subprocess

from server_fixture import start_server, free_port, wait_for

# runs until the file named by $1 exists
UNTIL = "while [ ! -e {flag} ]; do sleep 0.05; done; echo released"


def spec_file(tmp_path, name, ids=None, per_node=None, command=None):
    d = {"type": "gpu"}
    if ids is not None:
        d["ids"] = ids
    if per_node is not None:
        d["per_node"] = per_node
    spec = {"name": name, "command": command, "devices": d}
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(spec))
    return p


def run_env(srv):
    e = dict(srv.env)  # TRAINCTL_HOME: the server's state; its fake devices
    e.pop("TRAINCTL_SERVER", None)
    return e


def jobs_named(srv, name):
    st, body = srv.call("GET", "/api/v1/jobs?limit=100")
    assert st == 200, body
    return [j for j in body["jobs"] if j["name"] == name]


def decisions(srv):
    st, text = srv.call("GET", "/metrics")
    assert st == 200
    return int(re.search(r"^trainctl_scheduler_decisions_total (\d+)", text, re.M).group(1))


def lock_fds(pid):
    """fds of process pid that point at a server.lock"""
    out = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").endswith("server.lock"):
                    out.append(fd)
            except OSError:
                pass
    except OSError:
        pass
    return out


def test_second_server_refused_until_first_dies(trainctl, tmp_path):
    state = tmp_path / "state"
    flag = tmp_path / "release"
    srv = start_server(trainctl, state, fake="gpu:2")
    srv2 = None
    try:
        # a job whose supervisor will outlive the server
        job = srv.submit({"name": "outlives", "command": UNTIL.format(flag=flag),
                          "devices": {"type": "gpu", "per_node": 1}})
        sup = srv.wait_state(job, "running")["supervisor_pid"]
        assert not lock_fds(sup), "the supervisor inherited the server's lock"

        port = free_port()
        p = subprocess.run([str(trainctl), "server", "--listen", f"127.0.0.1:{port}", "--state",
                            str(state)], env=srv.env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, p.stderr
        assert f"pid {srv.proc.pid}" in p.stderr and f"127.0.0.1:{srv.port}" in p.stderr, p.stderr
        assert str(state) in p.stderr, p.stderr
        assert srv.proc.poll() is None  # the first one goes on

        # SIGKILL: the kernel drops the lock; the running supervisor does not hold it
        srv.stop(signal.SIGKILL)
        srv2 = start_server(trainctl, state, fake="gpu:2")
        assert srv2.job(job)["state"] == "running"
        flag.write_text("")
        srv2.wait_state(job, "succeeded")
    finally:
        flag.write_text("")
        srv.stop(signal.SIGKILL)
        if srv2:
            srv2.stop()


def test_run_lease_holds_off_the_scheduler(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2")
    flag = tmp_path / "release"
    run = None
    try:
        spec = spec_file(tmp_path, "local-run", per_node=2, command=UNTIL.format(flag=flag))
        run = subprocess.Popen([str(trainctl), "run", "-q", str(spec)], env=run_env(srv),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        got = wait_for(lambda: [j for j in jobs_named(srv, "local-run") if j["state"] == "running"],
                       timeout=60)
        assert got, run.stderr.read() if run.poll() is not None else "run did not start"
        # the server shows who ran it on what, not "cpu:0" with no user
        rj = got[0]
        assert rj["user"] == pwd.getpwuid(os.getuid()).pw_name
        assert (rj["device_type"], rj["device_count"], rj["devices"]) == ("gpu", 2, "0,1"), rj
        assert not rj["managed"]

        queued = srv.submit({"name": "waits", "command": "echo ran on $CUDA_VISIBLE_DEVICES",
                             "devices": {"type": "gpu", "per_node": 1}})
        seen = decisions(srv)
        assert wait_for(lambda: decisions(srv) >= seen + 3, timeout=60)
        assert srv.job(queued)["state"] == "queued"   # scheduled around the leased gpus

        flag.write_text("")
        assert run.wait(timeout=60) == 0, run.stderr.read()
        done = srv.wait_state(queued, "succeeded", timeout=60)
        assert done["devices"] == "0", done
    finally:
        flag.write_text("")
        if run and run.poll() is None:
            run.kill()
            run.wait()
        srv.stop()


def test_run_refuses_devices_a_server_job_holds(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2")
    flag = tmp_path / "release"
    try:
        job = srv.submit({"name": "holder", "command": UNTIL.format(flag=flag),
                          "devices": {"type": "gpu", "ids": [0]}})
        srv.wait_state(job, "running")

        p = subprocess.run([str(trainctl), "run", str(spec_file(tmp_path, "same", ids=[0], command="true"))],
                           env=run_env(srv), capture_output=True, text=True, timeout=60)
        assert p.returncode == 3, p.stderr
        assert "gpu 0 is held by job " + job in p.stderr, p.stderr
        assert not jobs_named(srv, "same")   # nothing recorded

        # no ids named: the free one
        p = subprocess.run([str(trainctl), "run", str(spec_file(tmp_path, "other", per_node=1,
                                                                  command="echo dev=$CUDA_VISIBLE_DEVICES"))],
                           env=run_env(srv), capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "dev=1" in p.stdout, p.stdout
        flag.write_text("")
        srv.wait_state(job, "succeeded")
    finally:
        flag.write_text("")
        srv.stop()


def test_lease_dies_with_its_run(trainctl, run_tc, home, tmp_path):
    """A run killed with SIGKILL holds nothing: the next run takes its gpu."""
    flag = tmp_path / "never"
    env = dict(os.environ, TRAINCTL_HOME=str(home), TRAINCTL_FAKE_DEVICES="gpu:1")
    spec = spec_file(tmp_path, "killed", ids=[0], command=UNTIL.format(flag=flag))
    run = subprocess.Popen([str(trainctl), "run", str(spec)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def running():
            p = run_tc("ps", "--json", env={"TRAINCTL_FAKE_DEVICES": "gpu:1"})
            return p.returncode == 0 and '"running"' in p.stdout
        assert wait_for(running, timeout=60), "run did not start"
        again = spec_file(tmp_path, "again", ids=[0], command="true")
        p = run_tc("run", again, env={"TRAINCTL_FAKE_DEVICES": "gpu:1"})
        assert p.returncode == 3 and "gpu 0 is held by job" in p.stderr, p.stderr
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        p = run_tc("run", again, env={"TRAINCTL_FAKE_DEVICES": "gpu:1"})
        assert p.returncode == 0, p.stderr
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
