"""A real S3 server on loopback for the storage and checkpoint tests.

s3rver (npm, pinned in tests/s3/package.json) is installed with `npm ci` on
first use and started once per test session on 127.0.0.1 with a free port
and a temporary data folder. Its dummy account is S3RVER / S3RVER and it
checks Signature V4, so the tests exercise real signing. Anonymous requests
are accepted too, which the helpers below use to look at what trainctl did.
"""
import os
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import poll

ROOT = Path(__file__).resolve().parents[2]
S3DIR = ROOT / "tests" / "s3"
ACCESS = "S3RVER"
SECRET = "S3RVER"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3:
    def __init__(self, port):
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"

    def env(self, endpoint=None):
        """Environment for a trainctl talking to this server (or a proxy in front)."""
        e = dict(os.environ)
        for k in list(e):
            if k.startswith(("AWS_", "OBS_")):
                del e[k]
        e.update(AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET,
                 AWS_ENDPOINT_URL=endpoint or self.endpoint, AWS_REGION="us-east-1")
        return e

    def bucket(self):
        """A new empty bucket; returns its name."""
        name = "b" + uuid.uuid4().hex[:12]
        req = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        urllib.request.urlopen(req, timeout=60).read()
        return name

    def keys(self, bucket, prefix=""):
        """{key: size} of every object under prefix (anonymous ListObjectsV2)."""
        out, token = {}, None
        while True:
            q = {"list-type": "2", "prefix": prefix}
            if token:
                q["continuation-token"] = token
            url = f"{self.endpoint}/{bucket}?{urllib.parse.urlencode(q)}"
            root = ET.fromstring(urllib.request.urlopen(url, timeout=60).read())
            ns = {"s": root.tag.split("}")[0][1:]} if root.tag.startswith("{") else {}
            pre = "s:" if ns else ""
            for c in root.findall(f"{pre}Contents", ns):
                out[c.find(f"{pre}Key", ns).text] = int(c.find(f"{pre}Size", ns).text)
            trunc = root.find(f"{pre}IsTruncated", ns)
            if trunc is None or trunc.text != "true":
                return out
            token = root.find(f"{pre}NextContinuationToken", ns).text

    def get(self, bucket, key):
        url = f"{self.endpoint}/{bucket}/{urllib.parse.quote(key)}"
        return urllib.request.urlopen(url, timeout=60).read()

    def put(self, bucket, key, data):
        url = f"{self.endpoint}/{bucket}/{urllib.parse.quote(key)}"
        req = urllib.request.Request(url, data=data, method="PUT")
        urllib.request.urlopen(req, timeout=60).read()


def _ensure_s3rver():
    bin_js = S3DIR / "node_modules" / "s3rver" / "bin" / "s3rver.js"
    if not bin_js.exists():
        npm = shutil.which("npm")
        if not npm:
            pytest.skip("npm is not installed (scripts/install-deps.sh installs it)")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=S3DIR,
                       check=True, timeout=600)
    return bin_js


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node is not installed (scripts/install-deps.sh installs it)")
    bin_js = _ensure_s3rver()
    data = tmp_path_factory.mktemp("s3rver")
    port = _free_port()
    log = open(data.parent / f"s3rver-{port}.log", "wb")
    proc = subprocess.Popen([node, str(bin_js), "-d", str(data), "-a", "127.0.0.1", "-p", str(port),
                             "--silent"], stdout=log, stderr=subprocess.STDOUT)
    def listening():
        if proc.poll() is not None:
            return "exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return "up"
        except OSError:
            return None

    if poll(listening, timeout=120, step=0.1) != "up":
        proc.kill()
        raise RuntimeError(f"s3rver did not start (see {log.name})")
    yield S3(port)
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
