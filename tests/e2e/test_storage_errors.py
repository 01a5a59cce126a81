"""What a failed S3 request says: the operation, the object, the request
(method and URL) and the server's code, and nothing dangling.

A small S3 stand-in answers every request with an error whose <Message> is
empty, as some servers do (s3rver accepts any signature, so a refused
signature is tested against radosgw, test_storage_rgw files).
"""
import http.server
import threading

from s3_fixture import s3  # noqa: F401  (the fixture)
from storage_helpers import run, tc  # noqa: F401  (tc is a fixture)


class _Refuser(http.server.BaseHTTPRequestHandler):
    """403 with an S3 error whose Message is empty, to every request."""

    def _refuse(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                b'<Message></Message></Error>')
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _refuse

    def log_message(self, *args):
        pass


def _refuser():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuser)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_an_error_names_operation_object_request_and_code(tc, s3, tmp_path):
    srv = _refuser()
    try:
        ep = f"http://127.0.0.1:{srv.server_address[1]}"
        p = run(tc, "sync", "s3://bkt/some/dir/", str(tmp_path / "out"), env=s3.env(ep),
                check=False)
    finally:
        srv.shutdown()
    assert p.returncode == 3, (p.stdout, p.stderr)
    err = p.stderr
    assert "s3://bkt/some/dir/: list failed: HTTP 403 AccessDenied" in err, err
    assert f"(GET {ep}/bkt/)" in err, err
    # an empty Message leaves no ": " dangling after the code
    assert "AccessDenied:" not in err and "AccessDenied (GET" in err, err


def test_staging_names_the_location_once(tc, s3, tmp_path):
    srv = _refuser()
    spec = tmp_path / "job.yaml"
    spec.write_text("""name: refused-input
command: "true"
inputs:
  - {from: "s3://bkt/data/", to: staged}
""")
    env = s3.env(f"http://127.0.0.1:{srv.server_address[1]}")
    env["TRAINCTL_HOME"] = str(tmp_path / "home")
    try:
        p = run(tc, "run", str(spec), env=env, check=False)
    finally:
        srv.shutdown()
    assert p.returncode == 3, (p.stdout, p.stderr)
    line = next(x for x in p.stderr.splitlines() if "staging inputs failed" in x)
    assert line.count("s3://bkt/data") == 1, line
    assert "list failed: HTTP 403 AccessDenied" in line, line
