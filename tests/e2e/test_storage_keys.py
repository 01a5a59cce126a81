"""Listed keys that would write outside a local destination (issue 16, 1.1).

S3 allows `..` in keys, so a bucket can list `pre/fix/../escaped.txt`; a
sync of `pre/` into a folder must not write `escaped.txt` beside that folder.
s3rver normalises keys when it stores them (it keeps objects as files), so
it cannot list such a key itself: a small HTTP proxy in front of the real
s3rver rewrites the keys of its ListObjectsV2 answers and forwards every
other request unchanged (the signatures stay valid), except a GET of a
rewritten key, which s3rver could not find: the proxy answers it, so that a
trainctl without the fix really writes outside the destination. The unit tests
(tests/unit/test_storage_keys.c) feed the same listings to the sync code
directly, and cover symbolic links inside the destination.
"""
import http.client
import http.server
import os
import threading

from s3_fixture import s3  # noqa: F401  (the fixture)
from storage_helpers import run, tc  # noqa: F401  (tc is a fixture)


class ListingRewriter:
    """Forwards requests to s3rver; in listings, <Key>old</Key> becomes <Key>new</Key>."""

    def __init__(self, upstream_port, rewrite, body=b"evil\n"):
        self.rewrite = {f"<Key>{a}</Key>".encode(): f"<Key>{b}</Key>".encode()
                        for a, b in rewrite.items()}
        self.served = [b.rsplit("/", 1)[1] for b in rewrite.values()]
        self.evil = body
        self.paths = []  # every request line's path, in order
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                outer.paths.append(self.path)
                if self.command == "GET" and "list-type" not in self.path and \
                        any(x in self.path for x in outer.served):
                    data, rng = outer.evil, self.headers.get("Range")
                    if rng:  # "bytes=A-B", as trainctl asks
                        a, _, z = rng.split("=", 1)[1].partition("-")
                        a, z = int(a), min(int(z or len(data) - 1), len(data) - 1)
                        self.send_response(206)
                        self.send_header("Content-Range", f"bytes {a}-{z}/{len(data)}")
                        data = data[a:z + 1]
                    else:
                        self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                up = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                headers = {k: v for k, v in self.headers.items()}
                up.request(self.command, self.path, body=body, headers=headers)
                r = up.getresponse()
                data = r.read()
                if self.command == "GET" and "list-type=2" in self.path:
                    for a, b in outer.rewrite.items():
                        data = data.replace(a, b)
                self.send_response(r.status, r.reason)
                for k, v in r.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                length = r.getheader("Content-Length") if self.command == "HEAD" else len(data)
                self.send_header("Content-Length", str(length or 0))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                up.close()

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _bucket_with_bad_listing(s3):
    """Under pre/fix/: ok.txt, and keys relative "/abs.txt", "../../deep.txt", "../escaped.txt"."""
    b = s3.bucket()
    s3.put(b, "pre/fix/ok.txt", b"fine\n")
    for k in ("abs.txt", "deep.txt", "escaped.txt"):
        s3.put(b, f"pre/fix/{k}", b"evil\n")
    proxy = ListingRewriter(s3.port, {"pre/fix/abs.txt": "pre/fix//abs.txt",
                                      "pre/fix/deep.txt": "pre/fix/../../deep.txt",
                                      "pre/fix/escaped.txt": "pre/fix/../escaped.txt"})
    return b, proxy


def test_sync_refuses_dotdot_keys(tc, s3, tmp_path):
    b, proxy = _bucket_with_bad_listing(s3)
    try:
        dst = tmp_path / "area" / "dst"
        p = run(tc, "sync", f"s3://{b}/pre/fix/", str(dst), env=s3.env(proxy.endpoint()),
                check=False)
    finally:
        proxy.stop()
    # nothing was created beside or above the destination
    assert sorted(os.listdir(tmp_path / "area")) == ["dst"]
    assert not (tmp_path / "deep.txt").exists()
    assert sorted(os.listdir(dst)) == ["ok.txt"]
    assert (dst / "ok.txt").read_bytes() == b"fine\n"
    # each refused key is named in a warning, counted in the summary and the error
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "warning: skipped '../escaped.txt': the key has a '..' path segment" in p.stderr
    assert "warning: skipped '../../deep.txt': the key has a '..' path segment" in p.stderr
    assert "warning: skipped '/abs.txt': the key is an absolute path" in p.stderr
    assert "1 copied, 0 skipped, 0 deleted" in p.stdout and "3 refused" in p.stdout, p.stdout
    assert "refused 3 keys that could write outside" in p.stderr
    # and the refused objects were never even fetched
    assert not any(x in y for x in proxy.served for y in proxy.paths if "list-type" not in y)


def test_job_inputs_fail_on_a_refused_key(tc, s3, tmp_path):
    b, proxy = _bucket_with_bad_listing(s3)
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""name: refused
command: "true"
inputs:
  - {{from: "s3://{b}/pre/fix/", to: staged}}
""")
    env = s3.env(proxy.endpoint())
    env["TRAINCTL_HOME"] = str(tmp_path / "home")
    try:
        p = run(tc, "run", str(spec), env=env, check=False)
    finally:
        proxy.stop()
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "staging inputs failed (no worker started)" in p.stderr
    assert "refused 3 keys that could write outside" in p.stderr
    assert "first '/abs.txt': the key is an absolute path" in p.stderr
    runs = list((tmp_path / "home" / "runs").iterdir())
    assert len(runs) == 1
    assert not any(x.name in proxy.served for x in (tmp_path / "home").rglob("*"))
