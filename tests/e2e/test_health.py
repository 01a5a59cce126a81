"""Device health before launch and between restarts (devices/health.h,
docs/diagnostics.md), through fakes: a stand-in libnvidia-ml.so.1 built by
the test build (tests/fake/fake_nvml.c, driven by the file named in
TRAINCTL_FAKE_NVML) and an npu-smi script printing a table."""
import json
import os
import shlex
import sqlite3

import pytest

from conftest import wait_until



def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def unhealthy(home):
    with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
        return c.execute("SELECT device_type, device_id, reason FROM device_health").fetchall()


def test_devices_health_reads_nvml(run_tc, nvml):
    conf, env = nvml
    conf.write_text("count 3\n1 remap_pending\n1 ecc 2\n2 xid 79\n2 xid 13\n")
    p = run_tc("devices", "--health", "--json", env=env)
    assert p.returncode == 0, p.stderr
    h = {(d["type"], d["id"]): d["health"] for d in json.loads(p.stdout)}
    assert h[("cpu", 0)] is None  # not checked
    assert h[("gpu", 0)] == "ok"
    assert h[("gpu", 1)] == "row remapping pending (reset the GPU); 2 uncorrectable ECC errors"
    # XID 13 is the application's (a bad kernel), 79 the device's
    assert h[("gpu", 2)] == "XID 79 in the last 10 minutes"
    conf.write_text("count 2\n0 retired_pending\nno_remap\n")
    p = run_tc("devices", "--health", env=env)
    assert "gpu 0: retired pages pending (reset the GPU)" in p.stdout
    assert "gpu 1: ok" in p.stdout


def test_run_refuses_a_named_unhealthy_gpu(run_tc, home, tmp_path, nvml):
    conf, env = nvml
    conf.write_text("count 3\n1 remap_pending\n")
    job = write(tmp_path, "job.yaml", 'command: ["true"]\ndevices: {type: gpu, ids: [0, 1]}\n')
    p = run_tc("run", job, env=env)
    assert p.returncode == 3, p.stderr
    assert "gpu 1 failed its health check: row remapping pending" in p.stderr
    assert "devices.min_per_node" in p.stderr
    # refused before the job exists; the device is marked for the server
    assert unhealthy(home) == [("gpu", 1, "row remapping pending (reset the GPU)")]
    with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
        assert c.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_run_takes_other_healthy_gpus_or_fewer(run_tc, home, tmp_path, nvml):
    conf, env = nvml
    conf.write_text("count 3\n1 ecc 4\n")
    echo = 'command: ["sh", "-c", "echo visible=$CUDA_VISIBLE_DEVICES world=$WORLD_SIZE"]\n'
    # no ids named: the healthy ones are taken
    job = write(tmp_path, "any.yaml", echo + "devices: {type: gpu, per_node: 2}\n")
    p = run_tc("run", job, env=env)
    assert p.returncode == 0, p.stderr
    assert "visible=0,2 world=2" in p.stdout
    # ids named, fewer allowed: runs on the healthy one
    job = write(tmp_path, "fewer.yaml", echo + "devices: {type: gpu, ids: [0, 1], min_per_node: 1}\n")
    p = run_tc("run", job, env=env)
    assert p.returncode == 0, p.stderr
    assert "visible=0 world=1" in p.stdout
    assert "gpu 1 failed its health check: 4 uncorrectable ECC errors" in p.stderr
    # healthy again: the mark goes
    conf.write_text("count 3\n")
    assert run_tc("run", job, env=env).returncode == 0
    assert unhealthy(home) == []


# rank 0 raises the XID and fails; rank 1 fails once the XID is written, so
# that the group never stops before the health check can see it (a race on
# a loaded machine when rank 1 exited first)
RESTART = '''command: ["sh", "-c", "if [ \\"$TORCHELASTIC_RESTART_COUNT\\" = 0 ]; then if [ $RANK = 0 ]; then echo '0 xid 79' >> {conf}; else while ! grep -q xid {conf}; do sleep 0.05; done; fi; exit 1; fi; echo visible=$CUDA_VISIBLE_DEVICES"]
restart: {{max_restarts: 1}}
devices: {{type: gpu, ids: [0, 1]{extra}}}
'''


def test_between_restarts(run_tc, home, tmp_path, nvml):
    """A GPU that raises an XID during the first attempt is not handed to the
    restart: with min_per_node the job goes on without it, else it fails (3)."""
    conf, env = nvml
    job = write(tmp_path, "a.yaml", RESTART.format(conf=shlex.quote(str(conf)), extra=", min_per_node: 1"))
    p = run_tc("run", job, env=env)
    assert p.returncode == 0, p.stderr
    assert "visible=1" in p.stdout
    assert "gpu 0 failed its health check: XID 79 in the last 10 minutes" in p.stderr
    conf.write_text("count 3\n")
    job = write(tmp_path, "b.yaml", RESTART.format(conf=shlex.quote(str(conf)), extra=""))
    p = run_tc("run", job, env=env)
    assert p.returncode == 3, p.stderr
    with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
        state, cause = c.execute("SELECT state, root_cause FROM jobs ORDER BY created DESC").fetchone()
    assert state == "failed"
    assert "gpu 0 failed its health check: XID 79" in cause and "before the restart" in cause


NPU_TABLE = """\
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 97.4        41                0    / 0             |
| 0                         | 0000:C1:00.0  | 35          0    / 0          3300 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | Alarm         | 90.1        39                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          41200/ 65536         |
+===========================+===============+====================================================+
"""


def test_npu_smi_health(run_tc, home, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "table.txt").write_text(NPU_TABLE)
    (bin_dir / "npu-smi").write_text(f"#!/bin/sh\ncat {shlex.quote(str(bin_dir / 'table.txt'))}\n")
    (bin_dir / "npu-smi").chmod(0o755)
    hccn = write(tmp_path, "hccn.conf", "address_0=10.0.0.1\naddress_1=10.0.0.2\n")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TRAINCTL_FAKE_DEVICES": None}
    p = run_tc("devices", "--health", "--json", env=env)
    h = {(d["type"], d["id"]): d["health"] for d in json.loads(p.stdout)}
    assert h[("npu", 0)] == "ok" and h[("npu", 1)] == "npu-smi health Alarm"
    job = write(tmp_path, "job.yaml", f'command: ["true"]\ndevices: {{type: npu, ids: [0, 1], '
                                      f'hccn_conf: {hccn}}}\n')
    p = run_tc("run", job, env=env)
    assert p.returncode == 3, p.stderr
    assert "npu 1 failed its health check: npu-smi health Alarm" in p.stderr


def test_server_schedules_around_an_unhealthy_gpu(trainctl, tmp_path, nvml):
    from conftest import holds_for
    from server_fixture import held, start_server

    conf, env = nvml
    conf.write_text("count 2\n1 remap_pending\n")
    srv_env = {k: v for k, v in env.items() if v is not None}
    srv = start_server(trainctl, tmp_path / "state", args=("--sample-seconds", "0.2"), env=srv_env)
    try:
        srv.env.pop("TRAINCTL_FAKE_DEVICES", None)
        release = tmp_path / "release"
        a = srv.submit(held(str(release), name="a"))
        srv.wait_state(a, "running")
        assert srv.job(a)["devices"] == "0"
        b = srv.submit(held(str(release), name="b"))

        def gpu1_health():
            st, devs = srv.call("GET", "/api/v1/devices")
            assert st == 200
            return [d for d in devs["devices"] if d["type"] == "gpu" and d["id"] == 1][0]["unhealthy"]
        # the server's log and devices page come from its own health rounds:
        # wait for them, never assume one has already happened
        wait_until(lambda: gpu1_health() == "row remapping pending (reset the GPU)",
                   what=lambda: f"gpu 1 shown unhealthy, got {gpu1_health()!r}")
        wait_until(lambda: "gpu 1 is unhealthy (row remapping pending" in srv.log(),
                   what=lambda: f"the server's warning, log:\n{srv.log()[-2000:]}")
        # gpu 1 is free but unhealthy: b waits
        holds_for(lambda: srv.job(b)["state"] == "queued", 2, "b queued while gpu 1 is unhealthy")
        # the GPU was reset: b gets it.  The fake NVML rereads the file at
        # every call (the server's rounds and b's supervisor): replace it
        # whole, so that no reader sees it half written
        tmp = conf.with_name(conf.name + ".new")
        tmp.write_text("count 2\n")
        os.replace(tmp, conf)
        srv.wait_state(b, "running")
        assert srv.job(b)["devices"] == "1"
        wait_until(lambda: "gpu 1 passes its health check again" in srv.log(),
                   what=lambda: f"the server's note, log:\n{srv.log()[-2000:]}")
        release.touch()
        srv.wait_state(a, "succeeded")
        srv.wait_state(b, "succeeded")
    finally:
        srv.stop()


def test_slurm_restart_excludes_the_unhealthy_node(trainctl, home, tmp_path, nvml):
    """nodes: 1 in a 2-node allocation; the first node's GPU fails its check:
    the attempt fails there and the restart runs with srun --exclude."""
    from slurm_cluster import Cluster, have_slurm

    if not have_slurm():
        pytest.fail("Slurm is not installed (scripts/install-deps.sh)", pytrace=False)
    _, env = nvml
    (tmp_path / "nvml-.conf").write_text("count 1\n")    # the submitting host
    (tmp_path / "nvml-n1.conf").write_text("count 1\n0 remap_pending\n")
    (tmp_path / "nvml-n2.conf").write_text("count 1\n")
    env = dict(env, TRAINCTL_FAKE_NVML=str(tmp_path / "nvml-{node}.conf"))
    cluster = Cluster(tmp_path / "slurm").start()
    try:
        spec = write(tmp_path, "job.yaml", """
name: sick-node
command: ["sh", "-c", "echo ran on $SLURMD_NODENAME"]
devices: {type: gpu, per_node: 1}
backend: slurm
restart: {max_restarts: 1}
slurm: {gres: none, extra: ["--nodes=2"]}
""")
        full = dict(os.environ, TRAINCTL_HOME=str(home), SLURM_CONF=str(cluster.conf))
        for k, v in env.items():
            if v is None:
                full.pop(k, None)
            else:
                full[k] = v
        import subprocess
        p = subprocess.run([str(trainctl), "run", spec], env=full, capture_output=True, text=True,
                           timeout=300)
        with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
            (run_dir, state), = c.execute("SELECT run_dir, state FROM jobs").fetchall()
            events = c.execute("SELECT state, reason FROM events ORDER BY rowid").fetchall()
        log = open(os.path.join(run_dir, "logs", "supervisor.log")).read()
        assert p.returncode == 0, p.stderr + log + cluster.logs()
        assert state == "succeeded"
        restarting = [r for s, r in events if s == "restarting"]
        assert len(restarting) == 1 and "gpu 0 failed its health check" in restarting[0], events
        assert "node 0 (n1): its devices failed their health check" in log
        assert "ran on n2" in open(os.path.join(run_dir, "logs", "rank-0.log")).read()
        # the node reported to the job's hub: its finding is the job's, with the node's name
        notes = [r for s, r in events if r.startswith("unhealthy: ")]
        assert len(notes) == 1 and notes[0].startswith(
            "unhealthy: node 0 (n1): gpu 0 failed its health check"), events
        j = json.loads(subprocess.run([str(trainctl), "show", "sick-node", "--json"], env=full,
                                      capture_output=True, text=True, check=True).stdout)
        # one finding; each attempt's round note (docs/slurm.md, "Rounds") beside it
        assert [e["kind"] for e in j["events"] if e.get("kind") not in (None, "round")] \
            == ["unhealthy"], j["events"]
        rounds = j["rounds"]
        assert [r["members"] for r in rounds] == [["n1"], ["n2"]], rounds
        assert [(x["host"], x["why"]) for x in rounds[1]["left_out"]] == [("n1", "unhealthy")], rounds
    finally:
        cluster.stop()
