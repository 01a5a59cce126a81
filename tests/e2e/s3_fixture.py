"""Real S3 servers on loopback for the storage and checkpoint tests.

Two servers, each started once per test session on 127.0.0.1 and a free port:

  s3rver   (npm, pinned in tests/s3/package.json, installed with `npm ci` on
           first use) with a temporary data folder; its account is
           S3RVER / S3RVER. It checks Signature V4 but forgives what AWS does
           not; the proxies that fake a listing sit in front of it alone.
  rgw      Ceph's radosgw (rgw_fixture.py), a strict server: what it refuses,
           AWS refuses.

Every request of the suite reaches either through a SigCheckProxy
(sigcheck_proxy.py), which refuses a request signing a header it does not
send; the `s3` fixture fails the test that made one.

`s3` is s3rver; a test that should hold on both servers says so:

    @both_servers
    def test_x(s3): ...        # runs as test_x[s3rver] and test_x[rgw]

and one that only radosgw can serve says @rgw_only.

The helpers below (bucket, keys, get, put) sign their own requests (a few
lines of Signature V4, independent of trainctl and of libcurl), so they look
at what trainctl did the same way on both servers.
"""
import datetime
import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import poll
from sigcheck_proxy import SigCheckProxy

ROOT = Path(__file__).resolve().parents[2]
S3DIR = ROOT / "tests" / "s3"
ACCESS = "S3RVER"  # s3rver's account (the `s3` fixture's default server)
SECRET = "S3RVER"
REGION = "us-east-1"
SERVERS = ("s3rver", "rgw")
both_servers = pytest.mark.parametrize("s3", SERVERS, indirect=True)
# s3rver answers "500 InternalError" to any ListObjectsV2 page that is not
# the last one, so what needs more than one page runs on radosgw alone
rgw_only = pytest.mark.parametrize("s3", ["rgw"], indirect=True)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class S3:
    """One server as the tests see it: `endpoint` and `port` are its
    signature-checking proxy's (the server's own without `check`, for the
    benchmark); `name` is "s3rver" or "rgw"."""

    def __init__(self, name, server_port, access, secret, check=True):
        self.name = name
        self.server_port = server_port
        self.proxy = SigCheckProxy(server_port).start() if check else None
        self.port = self.proxy.port if check else server_port
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.access, self.secret = access, secret

    def env(self, endpoint=None):
        """Environment for a trainctl talking to this server (or a proxy in front)."""
        e = dict(os.environ)
        for k in list(e):
            if k.startswith(("AWS_", "OBS_")):
                del e[k]
        e.update(AWS_ACCESS_KEY_ID=self.access, AWS_SECRET_ACCESS_KEY=self.secret,
                 AWS_ENDPOINT_URL=endpoint or self.endpoint, AWS_REGION=REGION)
        return e

    def request(self, method, bucket, key="", query=None, data=b"", port=None, unsent=None):
        """One signed request (path style); the answer's body, HTTPError on 4xx/5xx.
        `port`: another way in (the server's own port); `unsent`: headers
        signed but left off the wire, to see what a server says to that."""
        port = port or self.port
        path = "/" + bucket + ("/" + urllib.parse.quote(key, safe="/~") if key else "")
        qs = "&".join(f"{urllib.parse.quote(k, safe='~')}={urllib.parse.quote(v, safe='~')}"
                      for k, v in sorted((query or {}).items()))
        now = datetime.datetime.now(datetime.timezone.utc)
        amzdate, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        payload = hashlib.sha256(data).hexdigest()
        signed = {"host": f"127.0.0.1:{port}", "x-amz-content-sha256": payload, "x-amz-date": amzdate,
                  **(unsent or {})}
        names = ";".join(sorted(signed))
        canonical = (f"{method}\n{path}\n{qs}\n"
                     + "".join(f"{n}:{signed[n]}\n" for n in sorted(signed))
                     + f"\n{names}\n{payload}")
        scope = f"{day}/{REGION}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{amzdate}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        k = _hmac(("AWS4" + self.secret).encode(), day)
        for part in (REGION, "s3", "aws4_request"):
            k = _hmac(k, part)
        sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
        headers = {n: v for n, v in signed.items() if n not in (unsent or {})}
        headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access}/{scope}, "
                                    f"SignedHeaders={names}, Signature={sig}")
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}" + ("?" + qs if qs else ""),
                                     data=data if method in ("PUT", "POST") else None,
                                     method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.read()

    def make_bucket(self, name):
        """Make the bucket `name` unless this server already has it."""
        try:
            self.request("PUT", name)
        except urllib.error.HTTPError as e:
            if b"BucketAlreadyOwnedByYou" not in e.read():
                raise

    def bucket(self):
        """A new empty bucket; returns its name."""
        name = "b" + uuid.uuid4().hex[:12]
        self.request("PUT", name)
        return name

    def keys(self, bucket, prefix=""):
        """{key: size} of every object under prefix (ListObjectsV2, every page)."""
        out, token = {}, None
        while True:
            q = {"list-type": "2", "prefix": prefix}
            if token:
                q["continuation-token"] = token
            root = ET.fromstring(self.request("GET", bucket, query=q))
            ns = {"s": root.tag.split("}")[0][1:]} if root.tag.startswith("{") else {}
            pre = "s:" if ns else ""
            for c in root.findall(f"{pre}Contents", ns):
                out[c.find(f"{pre}Key", ns).text] = int(c.find(f"{pre}Size", ns).text)
            trunc = root.find(f"{pre}IsTruncated", ns)
            if trunc is None or trunc.text != "true":
                return out
            token = root.find(f"{pre}NextContinuationToken", ns).text

    def get(self, bucket, key):
        return self.request("GET", bucket, key)

    def put(self, bucket, key, data):
        self.request("PUT", bucket, key, data=data)


def _ensure_s3rver():
    bin_js = S3DIR / "node_modules" / "s3rver" / "bin" / "s3rver.js"
    if not bin_js.exists():
        npm = shutil.which("npm")
        if not npm:
            pytest.skip("npm is not installed (scripts/install-deps.sh installs it)")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=S3DIR,
                       check=True, timeout=600)
    return bin_js


def _start_s3rver(tmp_path_factory):
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node is not installed (scripts/install-deps.sh installs it)")
    bin_js = _ensure_s3rver()
    data = tmp_path_factory.mktemp("s3rver")
    port = _free_port()
    log = open(data.parent / f"s3rver-{port}.log", "wb")
    proc = subprocess.Popen([node, str(bin_js), "-d", str(data), "-a", "127.0.0.1", "-p", str(port),
                             "--silent"], stdout=log, stderr=subprocess.STDOUT)

    def stop():
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()

    def listening():
        if proc.poll() is not None:
            return "exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return "up"
        except OSError:
            return None

    if poll(listening, timeout=120, step=0.1) != "up":
        stop()
        raise RuntimeError(f"s3rver did not start (see {log.name})")
    return S3("s3rver", port, ACCESS, SECRET), stop


def _start_rgw(tmp_path_factory):
    import rgw_fixture
    missing = rgw_fixture.missing_programs()
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/install-deps.sh installs "
                    "ceph-mon, ceph-osd, radosgw and ceph-common)")
    cluster = rgw_fixture.Rgw(tmp_path_factory.mktemp("rgw"))
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return S3("rgw", cluster.port, cluster.access, cluster.secret), cluster.stop


_STARTERS = {"s3rver": _start_s3rver, "rgw": _start_rgw}
_started = {}  # name -> S3, or the exception its start raised


def _server(request, name):
    """The session's server `name`, started on first use and stopped at the
    end of the session (a failed start is not tried again)."""
    if name not in _started:
        try:
            srv, stop = _STARTERS[name](request.getfixturevalue("tmp_path_factory"))
        except pytest.skip.Exception:
            raise
        except Exception as e:  # noqa: BLE001  (kept for the tests that follow)
            _started[name] = e
            raise

        def finish():
            _started.pop(name, None)
            srv.proxy.stop()
            stop()
        _started[name] = srv
        request.session.addfinalizer(finish)
    srv = _started[name]
    if isinstance(srv, Exception):
        raise RuntimeError(f"{name} did not start earlier in this session: {srv}")
    return srv


@pytest.fixture
def s3(request):
    """The server a test talks to: s3rver, or each of SERVERS under
    @both_servers. The test fails if any of its requests signed a header it
    did not send."""
    srv = _server(request, getattr(request, "param", "s3rver"))
    srv.proxy.take_violations()
    yield srv
    bad = srv.proxy.take_violations()
    assert not bad, f"{srv.name}: requests signed headers they did not send:\n" + "\n".join(bad)
