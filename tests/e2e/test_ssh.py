"""The ssh endpoint and `trainctl ssh` (docs/exec.md), with a real sshd
(Debian's openssh-server) and a test key made in tmp_path.

* a local job: `trainctl ssh JOB --rank R -- -i KEY CMD` runs CMD in rank
  R's environment and working folder, its exit status back; the job's own
  host key is checked; a wrong key is refused; a session still open is hung
  up when the job ends, and no sshd is left, its port closed;
* a root server's job of a real account whose key is in its ~/.ssh: the
  sshd runs as that account, which logs in as itself.
"""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import wait_until
from server_fixture import as_user, port_open, start_server, token_for, unix_accounts

SSH = shutil.which("ssh")
SSHD = "/usr/sbin/sshd"

pytestmark = pytest.mark.skipif(not (SSH and os.access(SSHD, os.X_OK)),
                                reason="needs openssh-server and openssh-client (scripts/install-deps.sh)")

HOLD = 'echo ready $RANK; while [ ! -e "{release}" ]; do sleep 0.05; done'
QUIET = ["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR"]


def keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(path)], check=True)
    return path


def sshd_pids(config):
    """Processes whose command line names this sshd_config (zombies have none)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if config.encode() in f.read():
                    found.append(int(name))
        except OSError:
            pass
    return found


def endpoint_dir(home, job, name="ssh"):
    return os.path.join(str(home), "runs", job, "endpoints", name)


@pytest.fixture
def ssh_job(trainctl, home, tmp_path, run_tc):
    key = keygen(tmp_path / "key")
    work = tmp_path / "work"
    work.mkdir()
    release = tmp_path / "release"
    spec = tmp_path / "job.json"
    pub = (tmp_path / "key.pub").read_text().strip()
    spec.write_text(json.dumps({"name": "sshjob", "command": HOLD.format(release=release), "workdir": str(work),
                                "devices": {"type": "cpu", "per_node": 2},
                                "endpoints": [{"kind": "ssh", "public_key": pub}]}))
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env.pop("TRAINCTL_SERVER", None)
    proc = subprocess.Popen([str(trainctl), "run", "-q", str(spec)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        last = []

        def up():
            p = run_tc("ssh", "sshjob", "--rank", "1", "--", "-i", key, *QUIET, "true")
            last[:] = [p.stderr]
            return p.returncode == 0
        wait_until(up, timeout=120, what=lambda: f"the job's ssh endpoint to let the key in: {last}")
        job = run_tc("ps", "--format", "csv", "-o", "id").stdout.split()[1]
        yield job, key, work, release, proc
    finally:
        release.touch()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_ssh_session_in_the_ranks_environment(run_tc, home, tmp_path, ssh_job):
    job, key, work, _, _ = ssh_job
    p = run_tc("ssh", job, "--rank", "1", "--", "-i", key, *QUIET,
               'echo "$RANK $TRAINCTL_JOB_ID"; pwd; exit 3')
    assert p.returncode == 3, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"1 {job}" and os.path.realpath(lines[1]) == os.path.realpath(work), p.stdout
    p = run_tc("ssh", job, "--", "-i", key, *QUIET, "echo $RANK")
    assert p.returncode == 0 and p.stdout.strip() == "0", p.stderr
    # plain ssh with the recorded port and host key works the same
    d = endpoint_dir(home, job)
    port = int(run_tc("endpoints", job).stdout.split("127.0.0.1:")[1].split()[0])
    p = subprocess.run([SSH, "-p", str(port), "-i", str(key), *QUIET, "-o", "StrictHostKeyChecking=yes",
                        "-o", f"UserKnownHostsFile={d}/known_hosts", "-o", "SetEnv=TRAINCTL_SSH_RANK=1",
                        "root@127.0.0.1", "echo $RANK"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr


def test_ssh_refusals(run_tc, home, tmp_path, ssh_job):
    job, key, _, _, _ = ssh_job
    wrong = keygen(tmp_path / "wrong")
    p = run_tc("ssh", job, "--", "-i", wrong, *QUIET, "true")
    assert p.returncode == 255 and "Permission denied" in p.stderr, p.stderr
    p = run_tc("ssh", job, "--rank", "2", "--", "-i", key, *QUIET, "true")
    assert p.returncode == 2 and "has ranks 0-1 (not 2)" in p.stderr, p.stderr
    # the host key is checked strictly against the job's own
    kh = os.path.join(endpoint_dir(home, job), "known_hosts")
    saved = open(kh).read()
    other = keygen(tmp_path / "otherhost")
    host = saved.split()[0]
    with open(kh, "w") as f:
        f.write(f"{host} {(tmp_path / 'otherhost.pub').read_text()}")
    try:
        p = run_tc("ssh", job, "--", "-i", key, *QUIET, "true")
        assert p.returncode == 255 and "Host key verification failed" in p.stderr, p.stderr
    finally:
        with open(kh, "w") as f:
            f.write(saved)
    assert other


def job_processes(job):
    """Processes whose environment carries the job's id: its workers, its
    sidecars and whatever a session started there (zombies have none)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if f"TRAINCTL_JOB_ID={job}".encode() in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            pass
    return found


def test_ssh_ends_with_the_job(trainctl, run_tc, home, tmp_path, ssh_job):
    job, key, _, release, proc = ssh_job
    config = os.path.join(endpoint_dir(home, job), "sshd_config")
    port = int(run_tc("endpoints", job).stdout.split("127.0.0.1:")[1].split()[0])
    assert sshd_pids(config) and port_open(port)
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env.pop("TRAINCTL_SERVER", None)
    marker = tmp_path / "in-session"
    session = subprocess.Popen([str(trainctl), "ssh", job, "--", "-i", str(key), *QUIET,
                                f"touch {marker}; sleep 300; echo not-hung-up"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: marker.exists() or session.poll() is not None, timeout=60,
               what="the session's command to run")
    assert session.poll() is None, session.communicate()
    release.touch()
    assert proc.wait(timeout=120) == 0
    # the open session is hung up, sshd is gone, its port closed, nothing of the job left
    out, _ = session.communicate(timeout=60)
    assert "not-hung-up" not in out
    wait_until(lambda: not sshd_pids(config), timeout=60, what="the job's sshd to end")
    assert not port_open(port)
    wait_until(lambda: not job_processes(job), timeout=60,
               what=lambda: f"no process of the job (have {job_processes(job)})")
    p = run_tc("ssh", job, "--", "-i", key, *QUIET, "true")
    assert p.returncode == 2 and "has ended" in p.stderr, p.stderr


# ---- a root server's job of an unprivileged account ----

def test_ssh_as_the_jobs_user(trainctl):
    base = tempfile.mkdtemp(prefix="tc-ssh-", dir="/tmp")
    os.chmod(base, 0o711)
    state = os.path.join(base, "state")
    release = os.path.join(base, "release")
    try:
        with unix_accounts("alice") as u:
            name = u["alice"]
            pw = subprocess.run(["getent", "passwd", name], capture_output=True, text=True).stdout.split(":")
            uid, home = int(pw[2]), pw[5]
            # alice's own key, in her ~/.ssh: the endpoint's default
            subprocess.run(["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups", "sh", "-c",
                            f'mkdir -p -m 700 {home}/.ssh && ssh-keygen -q -t ed25519 -N "" -f {home}/.ssh/id_ed25519'],
                           check=True)
            tok = token_for(trainctl, state, name)
            srv = start_server(trainctl, state, fake="gpu:1")
            try:
                spec = {"name": "held", "command": HOLD.format(release=release), "workdir": "/tmp",
                        "devices": {"type": "gpu", "per_node": 1}, "endpoints": [{"kind": "ssh"}]}
                job = srv.submit(spec, token=tok)
                srv.wait_state(job, "running")
                key = f"{home}/.ssh/id_ed25519"

                def login():
                    return as_user(trainctl, srv, name, tok, "ssh", job, "--", "-i", key, *QUIET,
                                   "echo $RANK $TRAINCTL_JOB_ID; id -u")
                wait_until(lambda: login().returncode == 0, timeout=120, what="alice's ssh login")
                assert login().stdout.split() == ["0", job, str(uid)]
                config = os.path.join(state, "runs", job, "endpoints", "ssh", "sshd_config")
                pids = sshd_pids(config)
                assert pids
                for pid in pids:
                    with open(f"/proc/{pid}/status") as f:
                        uids = [ln.split()[1:] for ln in f if ln.startswith("Uid:")][0]
                    assert set(uids) == {str(uid)}, uids
            finally:
                open(release, "w").close()
                try:
                    srv.wait_state(job, ["succeeded", "failed", "killed", "lost"])
                finally:
                    srv.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_ssh_into_a_container_job(trainctl, home, tmp_path, run_tc):
    """The session of a job in an image runs in the rank's container (podman exec)."""
    image_fixture = pytest.importorskip("image_fixture")
    why = image_fixture.podman_usable()
    if why:
        pytest.skip(f"podman cannot be installed here: {why}")
    conf = image_fixture.containers_conf(tmp_path)
    image = image_fixture.ensure_image(conf)
    key = keygen(tmp_path / "key")
    work = tmp_path / "work"
    work.mkdir()
    release = work / "release"  # the workdir is mounted in the container
    spec = tmp_path / "ctr.json"
    spec.write_text(json.dumps({"name": "sshjob", "image": image, "command": HOLD.format(release=release),
                                "workdir": str(work), "devices": {"type": "cpu", "per_node": 2},
                                "endpoints": [{"kind": "ssh", "public_key": (tmp_path / "key.pub").read_text()}]}))
    env = dict(os.environ, TRAINCTL_HOME=str(home), CONTAINERS_CONF=str(conf))
    env.pop("TRAINCTL_SERVER", None)
    proc = subprocess.Popen([str(trainctl), "run", "-q", str(spec)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        show = 'test -e /run/.containerenv && echo "$RANK $TRAINCTL_JOB_ID"; pwd'

        def login():
            return run_tc("ssh", "sshjob", "--rank", "1", "--", "-i", key, *QUIET, show)
        wait_until(lambda: login().returncode == 0, timeout=120, what="a session in the container")
        jid = run_tc("ps", "--format", "csv", "-o", "id").stdout.split()[1]
        assert login().stdout.split() == ["1", jid, str(work)]
    finally:
        release.touch()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()
