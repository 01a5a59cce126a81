"""Jobs in container images (docs/containers.md), with a real podman.

The image is built here from Debian packages (image_fixture.py, cached by
content hash).  These tests skip only when podman cannot be installed;
CI installs it (scripts/install-deps.sh), so there they run.
"""
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import DIGITS, PYTHON, job_id_in, poll, wait_until
import image_fixture


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    """(image name, env with CONTAINERS_CONF) for the module."""
    why = image_fixture.podman_usable()
    if why:
        pytest.skip(f"podman cannot be installed here: {why}")
    # a folder of its own, readable by the job accounts a root server's supervisors run as
    d = tempfile.mkdtemp(prefix="tc-containers-", dir="/tmp")
    try:
        conf = image_fixture.containers_conf(d)
        image = image_fixture.ensure_image(conf)
        yield image, {"CONTAINERS_CONF": str(conf)}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def containers(env, job_id=None):
    """Names of the running (and created) containers of trainctl's jobs."""
    args = ["podman", "ps", "-a", "--format", "{{.Names}}"]
    args += ["--filter", f"label=trainctl.job={job_id}" if job_id else "label=trainctl.job"]
    r = subprocess.run(args, env=dict(os.environ, **env), capture_output=True, text=True, check=True)
    return r.stdout.split()


def own_job_ids(root):
    """The ids of the jobs recorded in every trainctl.db under root (this test's own)."""
    ids = []
    for db in Path(root).rglob("trainctl.db"):
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                ids += [r[0] for r in c.execute("SELECT id FROM jobs")]
        except sqlite3.Error:
            pass
    return ids


def own_containers(env, root):
    """Containers of this test's jobs only: other suites may run containers beside it."""
    return [n for jid in own_job_ids(root) for n in containers(env, jid)]


@pytest.fixture
def no_containers_left(podman, tmp_path):
    """Every test ends with none of its containers left, whatever happened."""
    _, env = podman
    yield
    left = own_containers(env, tmp_path)
    if left:
        subprocess.run(["podman", "rm", "-f", "--time=0"] + left, env=dict(os.environ, **env),
                       capture_output=True)


def dll_val_acc(path):
    acc = []
    for line in open(path):
        if line.startswith("DLLL "):
            r = json.loads(line[5:])
            if r.get("type") == "LOG" and "val.accuracy" in r.get("data", {}):
                acc.append(r["data"]["val.accuracy"])
    return acc


DIGITS_SPEC = """
name: {name}
command: ["/usr/bin/python3", "train.py"]
workdir: {digits}
args: {{epochs: 4, lr: 0.05, batch-size: 32, seed: 1234{extra_args}}}
devices: {{type: cpu, per_node: 2}}
env: {{OMP_NUM_THREADS: "1"}}
restart: {{max_restarts: {restarts}}}
{image}
"""


def digits_spec(tmp_path, name, image=None, restarts=0, extra_args=""):
    p = tmp_path / f"{name}.yaml"
    p.write_text(DIGITS_SPEC.format(name=name, digits=DIGITS, restarts=restarts,
                                    extra_args=extra_args, image=f"image: {image}" if image else ""))
    return p


def test_digits_in_an_image_matches_the_host(run_tc, tmp_path, podman, no_containers_left,
                                             torch_available):
    image, env = podman
    host = run_tc("run", "--quiet", digits_spec(tmp_path, "digits-host"), env=env, timeout=400)
    assert host.returncode == 0, host.stderr
    ctr = run_tc("run", "--quiet", digits_spec(tmp_path, "digits-ctr", image), env=env, timeout=400)
    assert ctr.returncode == 0, ctr.stderr
    accs = {}
    for name in ("digits-host", "digits-ctr"):
        job = json.loads(run_tc("show", name, "--json").stdout)
        assert job["state"] == "succeeded" and job["workers"] == 2
        accs[name] = [dll_val_acc(os.path.join(job["run_dir"], "logs", f"rank-{r}.log"))[-1]
                      for r in (0, 1)]
    # the same torch from the same Debian release, the same seed: the same model
    assert accs["digits-ctr"] == pytest.approx(accs["digits-host"], abs=0.01), accs
    assert min(accs["digits-ctr"]) >= 0.85, accs
    job = json.loads(run_tc("show", "digits-ctr", "--json").stdout)
    assert job["spec"]["image"] == image
    # checkpoints were written through the mounted run folder, as the user
    ck = os.path.join(job["run_dir"], "output", "checkpoints")
    assert sorted(os.listdir(ck)) and all(os.stat(os.path.join(ck, n)).st_uid == os.getuid()
                                          for n in os.listdir(ck))
    text = run_tc("show", "digits-ctr").stdout
    assert re.search(r"image\s+" + re.escape(image), text), text
    assert containers(env, job["id"]) == []
    # the env files (the workers' values, secrets too) are gone with the attempt
    assert not [n for n in os.listdir(job["run_dir"]) if n.startswith("container-rank-")]


def test_failing_rank_in_a_container_restarts_and_resumes(run_tc, tmp_path, podman,
                                                          no_containers_left, torch_available):
    image, env = podman
    spec = digits_spec(tmp_path, "ctr-restart", image, restarts=1,
                       extra_args=", fail-rank: 1, fail-raise: null, fail-until-restart: 1")
    p = run_tc("run", "--quiet", spec, env=env, timeout=400)
    assert p.returncode == 0, p.stderr
    job = json.loads(run_tc("show", "ctr-restart", "--json").stdout)
    assert job["state"] == "succeeded" and job["restarts"] == 1
    restart = [e for e in job["events"] if e["state"] == "restarting"]
    # the cause names the rank's exception first (its error file, written in its container)
    assert restart and restart[0]["reason"].startswith(
        "rank 1: RuntimeError: rank 1: failing on purpose"), restart
    assert "(exited with code 1)" in restart[0]["reason"], restart
    log0 = open(os.path.join(job["run_dir"], "logs", "rank-0.log")).read()
    assert re.search(r"resumed from (\S+) at epoch (\d+)", log0), "rank 0 did not resume"
    assert containers(env, job["id"]) == []
    # without restarts left, the root cause is the rank's own error file, written in its container
    spec = digits_spec(tmp_path, "ctr-fails", image, restarts=0,
                       extra_args=", epochs: 2, fail-rank: 1, fail-raise: null")
    spec.write_text(spec.read_text().replace("epochs: 4, ", ""))
    p = run_tc("run", "--quiet", spec, env=env, timeout=400)
    assert p.returncode == 1, p.stderr
    job = json.loads(run_tc("show", "ctr-fails", "--json").stdout)
    assert job["state"] == "failed" and job["root_cause"].startswith("rank 1: RuntimeError: ")
    assert "error reported by rank 1" in job["root_cause"], job["root_cause"]
    assert "RuntimeError: rank 1: failing on purpose" in job["root_cause"], job["root_cause"]
    assert containers(env, job["id"]) == []


def test_supervisor_sigkill_leaves_no_container(trainctl, home, tmp_path, podman,
                                                no_containers_left):
    image, env = podman
    spec = tmp_path / "sleep.yaml"
    spec.write_text(f"""
name: ctr-sleep
image: {image}
command: ["sleep", "600"]
devices: {{type: cpu, per_node: 2}}
""")
    full = dict(os.environ, TRAINCTL_HOME=str(home), **env)
    proc = subprocess.Popen([str(trainctl), "run", "--quiet", str(spec)], env=full,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        jid = wait_until(lambda: job_id_in(home), timeout=120, what="the job's record")
        wait_until(lambda: len(containers(env, jid)) == 2, timeout=120, step=0.2,
                   what=lambda: f"2 running containers (have {containers(env, jid)})")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        # the clients die with it; their monitors keep the containers until the watchdog removes them
        wait_until(lambda: containers(env, jid) == [], timeout=120, step=0.2,
                   what=lambda: f"no container left (have {containers(env, jid)})")
        r = subprocess.run(["podman", "ps", "-q"], env=full, capture_output=True, text=True)
        assert r.stdout.strip() == "", r.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stop_with_grace_removes_the_containers(trainctl, home, tmp_path, podman, run_tc,
                                                no_containers_left):
    image, env = podman
    spec = tmp_path / "stubborn.yaml"
    spec.write_text(f"""
name: ctr-stubborn
image: {image}
command: "trap '' TERM; echo ready; while :; do sleep 1; done"
devices: {{type: cpu, per_node: 1}}
restart: {{grace_seconds: 1}}
""")
    full = dict(os.environ, TRAINCTL_HOME=str(home), **env)
    proc = subprocess.Popen([str(trainctl), "run", str(spec)], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(own_containers(env, tmp_path)) == 1, timeout=120, step=0.2,
                   what="the container")
        p = run_tc("stop", "ctr-stubborn", env=env)
        assert p.returncode == 0, p.stderr
        out, err = proc.communicate(timeout=120)
        job = json.loads(run_tc("show", "ctr-stubborn", "--json").stdout)
        assert job["state"] == "killed", (job["state"], err)
        # SIGTERM was ignored: the client was killed after the grace period, its container removed
        assert containers(env, job["id"]) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_missing_image_is_exit_3_with_the_runtimes_message(run_tc, tmp_path, podman,
                                                           no_containers_left):
    _, env = podman
    spec = tmp_path / "missing.yaml"
    spec.write_text("""
name: ctr-missing
image: localhost/trainctl-no-such-image:1
container: {pull: never}
command: ["true"]
""")
    p = run_tc("run", spec, env=env)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "image 'localhost/trainctl-no-such-image:1' is not in podman's local storage" in p.stderr
    job = json.loads(run_tc("show", "ctr-missing", "--json").stdout)
    assert job["state"] == "failed" and job["exit_code"] == 3
    # pull: missing asks the registry, and says what the runtime said
    spec.write_text(spec.read_text().replace("container: {pull: never}\n", ""))
    p = run_tc("run", spec, env=env)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "podman cannot pull image 'localhost/trainctl-no-such-image:1': Error:" in p.stderr, p.stderr
    # no silent host fallback: the command never ran
    assert "2 workers started" not in p.stderr and "worker started" not in p.stderr


def test_runtime_missing_is_exit_3(run_tc, tmp_path, podman):
    spec = tmp_path / "rt.yaml"
    spec.write_text("""
name: ctr-nort
image: localhost/x:1
container: {runtime: podman}
command: ["true"]
""")
    env = dict(podman[1], PATH="/nonexistent")
    p = run_tc("run", spec, env=env)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "container runtime 'podman' is not installed" in p.stderr


def test_spec_errors_are_exit_2(run_tc, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: bad\nimage: x\ncommand: [true]\ncontainer:\n  pul: never\n")
    p = run_tc("run", spec)
    assert p.returncode == 2
    assert "bad.yaml:5: unknown key 'container.pul' (did you mean 'container.pull'?)" in p.stderr


def test_slurm_job_in_an_image(run_tc, home, tmp_path, podman, no_containers_left):
    from slurm_cluster import Cluster, have_slurm
    if not have_slurm():
        pytest.fail("Slurm is not installed (scripts/install-deps.sh)", pytrace=False)
    image, env = podman
    cluster = Cluster(tmp_path / "slurm").start()
    try:
        spec = tmp_path / "slurm.yaml"
        spec.write_text(f"""
name: ctr-slurm
image: {image}
command: "echo rank $RANK of $WORLD_SIZE on $SLURMD_NODENAME under $(tr '\\\\0' ' ' < /proc/1/cmdline)"
devices: {{type: cpu, per_node: 1}}
nodes: 2
backend: slurm
""")
        p = run_tc("run", spec, env=dict(env, SLURM_CONF=cluster.conf), timeout=400)
        assert p.returncode == 0, p.stderr + cluster.logs()
        job = json.loads(run_tc("show", "ctr-slurm", "--json").stdout)
        assert job["state"] == "succeeded" and job["workers"] == 2
        for r in range(2):
            text = open(os.path.join(job["run_dir"], "logs", f"rank-{r}.log")).read()
            assert f"rank {r} of 2 on n{r + 1} under /run/podman-init" in text, text
    finally:
        cluster.stop()


def test_server_job_in_an_image(trainctl, tmp_path, podman, no_containers_left):
    """The API takes image:, the job JSON and the UI show it, the submit form has the field;
    a user's job runs in its container as that user, and may not widen it."""
    from server_fixture import unix_accounts
    image, env = podman
    with unix_accounts("u") as names:
        server_job_as_user(trainctl, tmp_path, image, env, names["u"])


def server_job_as_user(trainctl, tmp_path, image, env, user):
    from server_fixture import start_server, token_for
    import pwd
    # a root server's supervisor runs as the account: its podman is rootless, its images its own
    tar = image_fixture.tiny_rootfs_tar(str(Path(env["CONTAINERS_CONF"]).parent / "tiny.tar"))
    image = "localhost/trainctl-tiny:1"
    image_fixture.import_as(user, tar, image, env["CONTAINERS_CONF"])
    # the runtime's settings reach a server's jobs only when the admin passes them
    srv = start_server(trainctl, tmp_path / "state", env=env, args=["--pass-env", "CONTAINERS_CONF"])
    try:
        pw = pwd.getpwnam(user)
        tok = token_for(trainctl, srv.state, user)
        st, body = srv.call("POST", "/api/v1/jobs", {"spec": {
            "name": "srv-ctr", "image": image, "workdir": pw.pw_dir,
            "command": "echo in $(tr '\\0' ' ' < /proc/1/cmdline) as $(id -u):$(id -g); "
                       "touch $TRAINCTL_OUTPUT_DIR/mine",
            "devices": {"type": "cpu", "per_node": 1}}}, token=tok)
        assert st == 201, body
        jid = body["id"]
        job = srv.wait_state(jid, ["succeeded", "failed", "killed", "lost"], timeout=180)
        assert job["state"] == "succeeded", (job["root_cause"], srv.run_logs(jid))
        assert job["spec"]["image"] == image
        log = open(os.path.join(job["run_dir"], "logs", "rank-0.log")).read()
        assert "in /run/podman-init -- /bin/sh -c" in log, log
        assert f"as {pw.pw_uid}:{pw.pw_gid}" in log, log
        assert os.stat(os.path.join(job["run_dir"], "output", "mine")).st_uid == pw.pw_uid
        # a non-admin may not widen a container (the allowlist); the answer says which option
        st, body = srv.call("POST", "/api/v1/jobs", {"spec": {
            "name": "srv-priv", "image": image, "command": "true", "workdir": pw.pw_dir,
            "container": {"extra": ["--privileged"]}}}, token=tok)
        assert st == 403 and "container.extra '--privileged'" in body["error"], (st, body)
        # a folder the user cannot read is not mounted for the user by a root client
        st, body = srv.call("POST", "/api/v1/jobs", {"spec": {
            "name": "srv-mount", "image": image, "command": "ls /root", "workdir": pw.pw_dir,
            "container": {"mounts": ["/root"]}}}, token=tok)
        assert st == 201, body
        job = srv.wait_state(body["id"], ["succeeded", "failed", "killed", "lost"], timeout=180)
        assert job["state"] == "failed", job
        assert "container.mounts '/root': the job's user cannot read it" in job["root_cause"], job
        assert own_containers(env, tmp_path) == []
        st, js = srv.call("GET", "/app.js")
        assert st == 200 and 'id="s-image"' in js and "spec.image" in js
        text = srv.cli("show", jid).stdout
        assert re.search(r"image\s+" + re.escape(image), text), text
    finally:
        srv.stop()


def test_docs_example(run_tc, tmp_path, podman, no_containers_left):
    """docs/containers.md's example, with the tests' image for its TAG."""
    image, env = podman
    from conftest import REPO
    text = (REPO / "docs" / "containers.md").read_text()
    m = re.search(r"```yaml\n# example: (\S+)\n(.*?)```", text, re.S)
    assert m, "docs/containers.md lost its example"
    spec = tmp_path / m.group(1)
    spec.write_text(m.group(2).replace("localhost/trainctl-test-py:TAG", image))
    p = run_tc("run", spec, env=env)
    assert p.returncode == 0, p.stderr
    assert re.search(r"\[0\] rank 0 of 2 in 12\.\d+", p.stdout), p.stdout
    assert "checking it with podman (pull: never)" in p.stderr
