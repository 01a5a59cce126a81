"""test_vendor_s3.py -- an S3 request that gets no answer says which request
(method and endpoint URL) and why in plain words (docs/storage.md): the
connection refused, the host name unknown to DNS, the time out.  No S3
server is needed: each endpoint is one that cannot answer."""
import os
import socket
import subprocess
import threading

from conftest import trainctl_path
from server_fixture import free_port


def _env(endpoint, tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OBS_"))}
    e.update(AWS_ACCESS_KEY_ID="AKIDTEST", AWS_SECRET_ACCESS_KEY="secret-test",
             AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1", TRAINCTL_S3_RETRIES="1",
             TRAINCTL_HOME=str(tmp_path / "home"))
    return e


def _tc(env, *args):
    return subprocess.run([str(trainctl_path()), *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=120)


def test_connection_refused_names_request(tmp_path):
    ep = f"http://127.0.0.1:{free_port()}"  # bound, then closed: nobody listens there
    env = _env(ep, tmp_path)
    p = _tc(env, "sync", "s3://bkt/data/", tmp_path / "out")
    assert p.returncode == 3, p.stdout + p.stderr
    assert f"s3://bkt/data/: list failed: GET {ep}/bkt/: connection refused" in p.stderr, p.stderr
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    p = _tc(env, "sync", src, "s3://bkt/up/")
    assert p.returncode == 3, p.stdout + p.stderr
    assert f"{ep}/bkt/" in p.stderr and ": connection refused" in p.stderr, p.stderr


def test_dns_failure_names_request(tmp_path):
    ep = "http://no-such-host.invalid:9000"
    p = _tc(_env(ep, tmp_path), "sync", "s3://bkt/data/", tmp_path / "out")
    assert p.returncode == 3, p.stdout + p.stderr
    assert f"s3://bkt/data/: list failed: GET {ep}/bkt/: host name not found (DNS)" in p.stderr, p.stderr


def test_timeout_names_request(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def accept():  # take connections and never answer
        while True:
            try:
                held.append(srv.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    ep = f"http://127.0.0.1:{srv.getsockname()[1]}"
    try:
        env = dict(_env(ep, tmp_path), TRAINCTL_S3_TIMEOUT="1")
        p = _tc(env, "sync", "s3://bkt/data/", tmp_path / "out")
    finally:
        srv.close()
        for c in held:
            c.close()
    assert p.returncode == 3, p.stdout + p.stderr
    assert f"s3://bkt/data/: list failed: GET {ep}/bkt/: timed out" in p.stderr, p.stderr
