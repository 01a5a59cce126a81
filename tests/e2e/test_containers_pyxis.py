"""image: on Slurm through pyxis (docs/containers.md#slurm).

There is no pyxis or enroot in Debian, so the localhost cluster of this
module loads a test double of pyxis (tests/fake/pyxis/fake_pyxis.c, a SPANK
plugin built here against Debian's libslurm-dev): it takes pyxis's srun
options and runs each task chrooted into the image's file system, which it
gets from root's podman store (`podman image mount`).  So the real pyxis is
not tested here: what is, is trainctl's side (the runtime chosen on the
submit host, each worker a Slurm step with srun --container-image, logs,
exit codes, stop, no step left behind).

The image is a few MB of this host's programs (image_fixture.tiny_rootfs_tar)
with a file the host does not have, /etc/trainctl-image-marker.
"""
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from conftest import REPO, wait_until
from slurm_cluster import Cluster, have_slurm
import image_fixture

MARKER = "inside the pyxis test image"


def _need_root_and_tools():
    if os.getuid() != 0:
        pytest.skip("the fake pyxis mounts and chroots: slurmd must run as root")
    if not have_slurm():
        pytest.fail("Slurm is not installed (scripts/install-deps.sh)", pytrace=False)
    if image_fixture.podman_usable():
        pytest.skip("podman cannot be installed here")
    if not os.path.exists("/usr/include/slurm/spank.h"):
        r = subprocess.run(["flock", "/tmp/apt.lock", "apt-get", "install", "-y", "-qq", "libslurm-dev"],
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.fail(f"libslurm-dev (spank.h) is missing: {r.stderr[-300:]}", pytrace=False)


@pytest.fixture(scope="module")
def pyxis(tmp_path_factory):
    """(cluster with the fake pyxis, image name) for the module."""
    _need_root_and_tools()
    d = tmp_path_factory.mktemp("pyxis")
    so = d / "fake_pyxis.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wall", "-o", str(so),
                    str(REPO / "tests/fake/pyxis/fake_pyxis.c")], check=True)
    (d / "plugstack.conf").write_text(f"required {so}\n")
    tar = image_fixture.tiny_rootfs_tar(str(d / "tiny.tar"))
    with tarfile.open(tar, "a") as t:
        data = (MARKER + "\n").encode()
        ti = tarfile.TarInfo("etc/trainctl-image-marker")
        ti.size, ti.mode = len(data), 0o644
        t.addfile(ti, io.BytesIO(data))
    image = f"localhost/trainctl-pyxis-test:{uuid.uuid4().hex[:8]}"
    subprocess.run(["podman", "import", "-q", tar, image], check=True, capture_output=True)
    cluster = None
    try:
        cluster = Cluster(d / "slurm", plugstack=d / "plugstack.conf").start()
        yield cluster, image
    finally:
        if cluster:
            cluster.stop()
        # the fake keeps the image mounted, as pyxis keeps a named container
        subprocess.run(["podman", "image", "unmount", "--force", image], capture_output=True)
        subprocess.run(["podman", "rmi", "-f", image], capture_output=True)


def _spec(tmp_path, name, image, command, nodes=2, per_node=1):
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"""name: {name}
image: {image}
command: {json.dumps(command)}
devices: {{type: cpu, per_node: {per_node}}}
nodes: {nodes}
backend: slurm
""")
    return p


def _steps(cluster, slurm_id):
    r = subprocess.run(["squeue", "-h", "-s", "-j", str(slurm_id), "-o", "%i %j"], env=cluster.env,
                       capture_output=True, text=True)
    return r.stdout.split("\n") if r.stdout.strip() else []


def _procs_with(token):
    """pids of processes whose command line holds token (the job's workers)"""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out


def test_workers_run_in_the_image_as_slurm_steps(run_tc, tmp_path, pyxis):
    cluster, image = pyxis
    assert not os.path.exists("/etc/trainctl-image-marker")  # the host has no such file
    spec = _spec(tmp_path, "pyx-ok", image,
                 "echo rank $RANK of $WORLD_SIZE on $SLURMD_NODENAME: $(cat /etc/trainctl-image-marker) "
                 "in $(pwd)")
    p = run_tc("run", spec, env={"SLURM_CONF": cluster.conf}, timeout=300)
    assert p.returncode == 0, p.stderr + cluster.logs()
    assert f"image {image}: pyxis (each worker a Slurm step, srun --container-image)" in p.stderr
    show = run_tc("show", "pyx-ok").stdout
    assert f"image      {image} (pyxis)" in show
    job = json.loads(run_tc("show", "pyx-ok", "--json").stdout)
    assert job["state"] == "succeeded" and job["workers"] == 2
    assert job["spec"]["container"]["runtime"] == "pyxis"
    for r in range(2):
        text = open(os.path.join(job["run_dir"], "logs", f"rank-{r}.log")).read()
        assert f"rank {r} of 2 on n{r + 1}: {MARKER} in {tmp_path}" in text, text
    assert _steps(cluster, job["slurm"]["job"]) == []


def test_failing_rank_gives_its_exit_code_and_root_cause(run_tc, tmp_path, pyxis):
    cluster, image = pyxis
    spec = _spec(tmp_path, "pyx-fail", image,
                 "if [ $RANK = 1 ]; then echo 'boom: rank one failed in the image' >&2; exit 3; fi; "
                 "sleep 60")
    p = run_tc("run", spec, env={"SLURM_CONF": cluster.conf}, timeout=300)
    assert p.returncode == 1, p.stderr + cluster.logs()
    assert "rank 1 exited with code 3" in p.stderr, p.stderr
    assert "boom: rank one failed in the image" in p.stderr
    job = json.loads(run_tc("show", "pyx-fail", "--json").stdout)
    assert job["state"] == "failed"
    assert "rank 1 exited with code 3" in run_tc("show", "pyx-fail").stdout
    wait_until(lambda: cluster.job_state(job["slurm"]["job"]) not in ("RUNNING", "COMPLETING"), 60,
               "the Slurm job's end")
    assert _steps(cluster, job["slurm"]["job"]) == []


def _run_forever(trainctl, home, tmp_path, cluster, image, name, tag):
    """`trainctl run` (in the foreground, its own session) of a job whose ranks
    run until stopped, each with a token in its command line to find it by:
    (token, env, the run's Popen)."""
    token = f"{tag}{uuid.uuid4().hex[:6]}"
    spec = _spec(tmp_path, name, image,
                 f"echo started $RANK; while true; do sleep 0.2; done # {token}")
    env = dict(os.environ, TRAINCTL_HOME=str(home), SLURM_CONF=str(cluster.conf))
    fg = subprocess.Popen([str(trainctl), "run", str(spec)], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True)
    return token, env, fg


def test_stop_leaves_no_step_or_process(trainctl, run_tc, home, tmp_path, pyxis):
    cluster, image = pyxis
    token, env, fg = _run_forever(trainctl, home, tmp_path, cluster, image, "pyx-stop", "pyxstop")
    try:
        def both_started():
            p = run_tc("show", "pyx-stop", "--json", env={"SLURM_CONF": cluster.conf})
            if p.returncode != 0:
                return False
            logs = Path(json.loads(p.stdout)["run_dir"]) / "logs"
            texts = [(logs / f"rank-{r}.log") for r in range(2)]
            return all(t.exists() and f"started {r}" in t.read_text() for r, t in enumerate(texts))
        wait_until(both_started, 120, "both ranks started in the image")
        job = json.loads(run_tc("show", "pyx-stop", "--json", env={"SLURM_CONF": cluster.conf}).stdout)
        names = [line.split()[1] for line in _steps(cluster, job["slurm"]["job"]) if line.strip()]
        assert sum(n.startswith("trainctl-") and "-r" in n for n in names) == 2, names
        assert run_tc("stop", "pyx-stop", env={"SLURM_CONF": cluster.conf}).returncode == 0
        out, err = fg.communicate(timeout=120)
        assert fg.returncode != 0
        job = json.loads(run_tc("show", "pyx-stop", "--json", env={"SLURM_CONF": cluster.conf}).stdout)
        assert job["state"] == "killed", err
        wait_until(lambda: _steps(cluster, job["slurm"]["job"]) == [], 60, "no step of the job left")
        wait_until(lambda: _procs_with(token) == [], 30, "no worker process left")
    finally:
        if fg.poll() is None:
            os.killpg(fg.pid, signal.SIGKILL)
            fg.wait()


def test_neither_pyxis_nor_a_runtime_is_refused_before_submission(trainctl, run_tc, tmp_path, pyxis):
    cluster, image = pyxis
    # srun without the plugin (the same cluster, no PlugStackConfig), no podman or docker on PATH,
    # and an sbatch that tells if it ran
    conf = tmp_path / "slurm-no-pyxis.conf"
    conf.write_text("".join(l for l in open(cluster.conf) if not l.startswith("PlugStackConfig")))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(shutil.which("srun"), bin_dir / "srun")
    called = tmp_path / "sbatch-called"
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\ntouch {called}\nexit 1\n")
    os.chmod(bin_dir / "sbatch", 0o755)
    spec = _spec(tmp_path, "pyx-none", image, "true")
    p = run_tc("run", spec, env={"SLURM_CONF": conf, "PATH": bin_dir}, timeout=60)
    assert p.returncode == 2, p.stderr
    assert ("image: needs pyxis (srun --container-image) or podman/docker on the nodes; "
            "none found on this host") in p.stderr
    assert not called.exists()
    assert run_tc("ps", "--all").stdout.count("pyx-none") == 0
    # runtime: pyxis asked for where srun has no pyxis: refused too
    spec.write_text(spec.read_text() + "container: {runtime: pyxis}\n")
    p = run_tc("run", spec, env={"SLURM_CONF": conf, "PATH": bin_dir}, timeout=60)
    assert p.returncode == 2 and "srun has no --container-image" in p.stderr, p.stderr
    assert not called.exists()


def test_runtime_pyxis_needs_backend_slurm(run_tc, tmp_path):
    spec = tmp_path / "local.yaml"
    spec.write_text("command: [true]\nimage: localhost/x:1\ncontainer:\n  runtime: pyxis\n")
    p = run_tc("run", spec)
    assert p.returncode == 2
    assert ("local.yaml:4: container.runtime: pyxis runs workers as Slurm steps: it needs "
            "backend: slurm (backend is local)") in p.stderr


def test_supervisor_sigkill_leaves_no_step(trainctl, run_tc, home, tmp_path, pyxis):
    """A killed supervisor's srun clients die with it (their parent-death
    signal), and Slurm ends the step of a killed srun client."""
    cluster, image = pyxis
    token, env, fg = _run_forever(trainctl, home, tmp_path, cluster, image, "pyx-kill", "pyxkill")
    try:
        wait_until(lambda: len(_procs_with(token)) >= 2, 120, "both workers running")
        job = json.loads(run_tc("show", "pyx-kill", "--json", env={"SLURM_CONF": cluster.conf}).stdout)
        sups = [p for p in _procs_with("supervise-node")
                if _has_arg(p, job["id"]) and _argv0(p).endswith("trainctl")]
        assert sups, "no supervise-node process of the job"
        for pid in sups:
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: _procs_with(token) == [], 60, "no worker process left")
        out, err = fg.communicate(timeout=180)
        assert fg.returncode != 0
        wait_until(lambda: _steps(cluster, job["slurm"]["job"]) == [], 60, "no step of the job left")
    finally:
        if fg.poll() is None:
            os.killpg(fg.pid, signal.SIGKILL)
            fg.wait()


def _has_arg(pid, arg):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return arg.encode() in f.read().split(b"\0")
    except OSError:
        return False


def _argv0(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""
