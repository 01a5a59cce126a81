"""Endpoints of a job with image: run in the job's image (docs/endpoints.md,
docs/containers.md), with a real podman and the tests' cached image.

  - a generic endpoint (python3's http.server) of an image job serves,
    through a root server's proxy, a file that exists only in the image
    (a marker layer committed onto the test image for this module): it ran
    in its own container, trainctl-JOB-ep-web, which goes with the job;
  - a SIGKILLed supervisor leaves no endpoint container (the reaper);
  - an endpoint whose program the image lacks (Debian's jupyter-notebook,
    which the host has; a generic command's program) fails by name, with
    the image named, and never falls back to the host; the job itself
    goes on.

Only this module's jobs' containers are removed on the way out (other
tests may run containers of their own at the same time).
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import uuid

import pytest

from conftest import job_id_in, wait_on_job, wait_until
import image_fixture
from server_fixture import port_open, start_server

TEXT = "served from the image\n"


def podman_run(env, *args, check=True):
    return subprocess.run(["podman", *args], env=dict(os.environ, **env), capture_output=True,
                          text=True, check=check)


@pytest.fixture(scope="module")
def ep_image():
    """(image, env with CONTAINERS_CONF, a folder that only the image has):
    the test image with one more layer, made here and removed afterwards."""
    why = image_fixture.podman_usable()
    if why:
        pytest.skip(f"podman cannot be installed here: {why}")
    d = tempfile.mkdtemp(prefix="tc-ep-image-", dir="/tmp")
    tag = uuid.uuid4().hex[:12]
    image = f"localhost/trainctl-test-ep:{tag}"
    marker = f"/srv/trainctl-only-in-image-{tag}"
    env = {}
    try:
        conf = image_fixture.containers_conf(d)
        env = {"CONTAINERS_CONF": str(conf)}
        base = image_fixture.ensure_image(conf)
        maker = f"tc-ep-image-{tag}"
        podman_run(env, "run", "--name", maker, base, "/bin/sh", "-c",
                   f"mkdir -p {marker} && printf '{TEXT}' > {marker}/hello.txt")
        podman_run(env, "commit", "-q", maker, image)
        podman_run(env, "rm", maker)
        assert not os.path.exists(marker)
        yield image, env, marker
    finally:
        podman_run(env, "rm", "-f", f"tc-ep-image-{tag}", check=False)
        podman_run(env, "rmi", "-f", image, check=False)
        shutil.rmtree(d, ignore_errors=True)


def containers(env, job_id):
    """Names of the job's containers (running or created)."""
    r = podman_run(env, "ps", "-a", "--format", "{{.Names}}", "--filter",
                   f"label=trainctl.job={job_id}")
    return r.stdout.split()


def remove_containers(env, job_id):
    if job_id:
        left = containers(env, job_id)
        if left:
            podman_run(env, "rm", "-f", "--time=0", *left, check=False)


def endpoints_json(run_tc, job, env):
    r = run_tc("endpoints", job, "--json", env=env)
    return {e["name"]: e for e in json.loads(r.stdout)["endpoints"]} if r.returncode == 0 else {}


def run_job(run_tc, jid, env, p, log_path):
    """The job of a foreground `trainctl run` (p) as `show --json` has it, for
    wait_on_job: a run that exited with no job recorded fails the test now."""
    r = run_tc("show", jid, "--json", env=env) if jid else None
    if r is not None and r.returncode == 0:
        return json.loads(r.stdout)
    assert p.poll() is None, f"trainctl run exited {p.returncode}:\n{open(log_path).read()}"
    return None


def start_run(trainctl, home, spec, env, log):
    return subprocess.Popen([str(trainctl), "run", str(spec)],
                            env=dict(os.environ, TRAINCTL_HOME=str(home), **env),
                            stdout=log, stderr=subprocess.STDOUT)


def test_generic_endpoint_runs_in_the_image_through_the_proxy(trainctl, tmp_path, ep_image):
    image, env, marker = ep_image
    work = tmp_path / "work"
    work.mkdir()
    release = work / "release"
    # the runtime's settings reach a server's jobs only when the admin passes them
    srv = start_server(trainctl, tmp_path / "state", env=env, args=["--pass-env", "CONTAINERS_CONF"])
    job = None
    try:
        # root's own job over the Unix socket: its supervisor, and so its podman, are root's
        job = srv.submit({
            "name": "ep-in-image", "image": image, "container": {"pull": "never"},
            "workdir": str(work),
            "command": f"while [ ! -e '{release}' ]; do sleep 0.1; done",
            "endpoints": [{"name": "web", "command":
                           f"python3 -m http.server --bind 127.0.0.1 --directory {marker} $PORT"}]})

        def served():
            st, body = srv.call("GET", f"/jobs/{job}/endpoints/web/hello.txt")
            return body if st == 200 else None
        body = srv.wait_job(job, served, timeout=180, step=0.2,
                            what=lambda: f"the endpoint through the proxy\n{srv.run_logs(job)}")
        # the file exists only in the image: the endpoint ran there, not on the host
        assert body == TEXT
        assert not os.path.exists(marker)
        st, eps = srv.call("GET", f"/api/v1/jobs/{job}/endpoints")
        assert st == 200 and eps["endpoints"][0]["state"] == "running", eps
        # in a container of its own, with the job's label (the reaper's filter) and its name
        r = podman_run(env, "ps", "--format", "{{.Names}} {{.Labels}}", "--filter",
                       f"label=trainctl.job={job}")
        line = [x for x in r.stdout.splitlines() if x.startswith(f"trainctl-{job}-ep-web ")]
        assert line and "trainctl.endpoint:web" in line[0], r.stdout
        run_dir = srv.job(job)["run_dir"]
        sup_log = open(os.path.join(run_dir, "logs", "supervisor.log")).read()
        assert f"endpoint web (generic) on 127.0.0.1:" in sup_log and f"in image {image}" in sup_log
        release.write_text("")
        done = srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=180)
        assert done["state"] == "succeeded", (done["root_cause"], srv.run_logs(job))
        # stopped with the job: the row says so, its container and its env file are gone
        def state():
            return srv.call("GET", f"/api/v1/jobs/{job}/endpoints")[1]["endpoints"][0]["state"]
        wait_until(lambda: state() == "stopped", what=lambda: state())
        wait_until(lambda: containers(env, job) == [], timeout=60,
                   what=lambda: f"no container left (have {containers(env, job)})")
        assert not [n for n in os.listdir(run_dir) if n.startswith("container-")], os.listdir(run_dir)
    finally:
        release.write_text("")
        srv.stop()
        remove_containers(env, job)


def test_sigkill_of_the_supervisor_leaves_no_endpoint_container(trainctl, run_tc, home, tmp_path,
                                                                ep_image):
    image, env, marker = ep_image
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""
name: ep-killed
image: {image}
container: {{pull: never}}
workdir: {tmp_path}
command: ["sleep", "600"]
endpoints:
  - name: web
    command: "python3 -m http.server --bind 127.0.0.1 --directory {marker} $PORT"
""")
    jid = None
    with open(tmp_path / "run.log", "w") as log:
        p = start_run(trainctl, home, spec, env, log)
    try:
        log_path = tmp_path / "run.log"
        jid = wait_on_job(lambda: job_id_in(home), lambda: run_job(run_tc, None, env, p, log_path),
                          timeout=120, what="the job's record")
        ep = wait_on_job(lambda: endpoints_json(run_tc, jid, env).get("web"),
                         lambda: run_job(run_tc, jid, env, p, log_path), timeout=120,
                         what=lambda: "its endpoint web\n" + log_path.read_text())
        wait_until(lambda: port_open(ep["port"]), timeout=120, what="the endpoint's port")
        wait_until(lambda: f"trainctl-{jid}-ep-web" in containers(env, jid), timeout=60,
                   what=lambda: f"the endpoint's container (have {containers(env, jid)})")
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        # the watchdog kills the clients; the reaper removes what their monitors keep running
        wait_until(lambda: containers(env, jid) == [], timeout=120, step=0.2,
                   what=lambda: f"no container left (have {containers(env, jid)})")
        r = podman_run(env, "ps", "-q", "--filter", f"label=trainctl.job={jid}")
        assert r.stdout.strip() == "", r.stdout
        wait_until(lambda: not port_open(ep["port"]), timeout=60, what="the port closed")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        remove_containers(env, jid)


def test_a_program_the_image_lacks_fails_the_endpoint_by_name(trainctl, run_tc, home, tmp_path,
                                                              ep_image):
    image, env, _ = ep_image
    release = tmp_path / "release"
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""
name: ep-missing
image: {image}
container: {{pull: never}}
workdir: {tmp_path}
command: "while [ ! -e '{release}' ]; do sleep 0.1; done"
endpoints:
  - jupyter
  - name: tool
    command: "no-such-tool --port $PORT"
""")
    jid = None
    with open(tmp_path / "run.log", "w") as log:
        p = start_run(trainctl, home, spec, env, log)
    try:
        log_path = tmp_path / "run.log"
        jid = wait_on_job(lambda: job_id_in(home), lambda: run_job(run_tc, None, env, p, log_path),
                          timeout=120, what="the job's record")

        def both_failed():
            eps = endpoints_json(run_tc, jid, env)
            return eps if all(eps.get(n, {}).get("state") == "failed" for n in ("jupyter", "tool")) \
                else None
        # a job that ends (say, its image check failed) never records them: fail at once
        eps = wait_on_job(both_failed, lambda: run_job(run_tc, jid, env, p, log_path),
                          timeout=120, step=0.2,
                          what=lambda: f"both endpoints failed: {endpoints_json(run_tc, jid, env)}\n"
                                       + log_path.read_text())
        assert eps["jupyter"]["note"] == \
            f"program 'jupyter-notebook' is not in image '{image}' (exit status 127)", eps
        assert eps["tool"]["note"] == \
            f"exit status 127: a program its command runs is not in image '{image}'", eps
        run_dir = json.loads(run_tc("show", jid, "--json").stdout)["run_dir"]
        logs = os.path.join(run_dir, "logs")
        assert "jupyter-notebook: not found in the image" in open(f"{logs}/endpoint-jupyter.log").read()
        assert "no-such-tool: not found" in open(f"{logs}/endpoint-tool.log").read()
        text = open(f"{logs}/supervisor.log").read()
        assert (f"warning: endpoint jupyter failed: program 'jupyter-notebook' is not in image "
                f"'{image}'") in text, text
        # never the host's program (the host may have jupyter-notebook: the tests' Jupyter)
        assert not port_open(eps["jupyter"]["port"])
        # the job goes on: an endpoint is never the job's failure
        assert json.loads(run_tc("show", jid, "--json").stdout)["state"] == "running"
        release.write_text("")
        assert p.wait(timeout=180) == 0, (tmp_path / "run.log").read_text()
        assert containers(env, jid) == []
        assert not [n for n in os.listdir(run_dir) if n.startswith("container-")], os.listdir(run_dir)
    finally:
        release.write_text("")
        if p.poll() is None:
            p.kill()
            p.wait()
        remove_containers(env, jid)
