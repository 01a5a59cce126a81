"""GET /api/v1/info: the job states, and the backends a job may use on this
server with the reason when one cannot (what the web UI's submit form
offers): local always, unless --backend slurm; slurm when sbatch is on the
server's PATH and Slurm is configured, unless --backend local."""
import os
import stat

from server_fixture import start_server

STATES = ["queued", "starting", "running", "restarting", "paused", "preempted",
          "succeeded", "failed", "killed", "lost"]


def info(trainctl, state, args=(), env=None):
    srv = start_server(trainctl, state, fake="gpu:1", args=args, env=env)
    try:
        st, body = srv.call("GET", "/api/v1/info")
        assert st == 200, body
        st, other = srv.call("POST", "/api/v1/info", {})
        assert st == 405 and other["error"] == "use GET", other
    finally:
        srv.stop()
    return body


def backends(body):
    return {b["name"]: b for b in body["backends"]}


def fake_slurm(tmp_path):
    """A folder with an sbatch on it, and a Slurm configuration file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text("#!/bin/sh\nexit 1\n")
    sbatch.chmod(sbatch.stat().st_mode | stat.S_IXUSR)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=none\n")
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "SLURM_CONF": str(conf)}


def test_info_states_and_version(trainctl, tmp_path):
    body = info(trainctl, tmp_path / "state", env={"SLURM_CONF": str(tmp_path / "none.conf")})
    assert [s["name"] for s in body["states"]] == STATES
    assert [s["name"] for s in body["states"] if s["terminal"]] == ["succeeded", "failed", "killed", "lost"]
    assert [s["name"] for s in body["states"] if s["active"]] == ["starting", "running", "restarting"]
    assert body["version"] and body["version"][0].isdigit()
    b = backends(body)
    assert b["local"] == {"name": "local", "available": True, "multi_node": False, "why": None}
    # no configuration: sbatch could not reach a cluster
    assert not b["slurm"]["available"] and b["slurm"]["multi_node"]
    assert "no Slurm configuration" in b["slurm"]["why"] or "sbatch" in b["slurm"]["why"]


def test_info_without_sbatch(trainctl, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    b = backends(info(trainctl, tmp_path / "state", env={"PATH": str(empty)}))
    assert b["local"]["available"]
    assert b["slurm"]["why"] == "sbatch is not on the server's PATH" and not b["slurm"]["available"]


def test_info_with_slurm(trainctl, tmp_path):
    env = fake_slurm(tmp_path)
    b = backends(info(trainctl, tmp_path / "state", env=env))
    assert b["local"]["available"] and b["slurm"]["available"] and b["slurm"]["why"] is None
    # --backend: the other one is not offered, and says why
    b = backends(info(trainctl, tmp_path / "state2", args=["--backend", "slurm"], env=env))
    assert b["slurm"]["available"]
    assert not b["local"]["available"] and b["local"]["why"] == "server started with --backend slurm"
    b = backends(info(trainctl, tmp_path / "state3", args=["--backend", "local"], env=env))
    assert b["local"]["available"]
    assert not b["slurm"]["available"] and b["slurm"]["why"] == "server started with --backend local"
