"""A webhook receiver on 127.0.0.1 for the tests of webhooks (test_notify.py,
test_idle_limit.py): it records every POST and can fail or hang on purpose."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """A webhook receiver: records every POST; answers 500 to the first
    `fail_first` of them; with `hang`, holds every request open until
    release() (a server that accepts and never answers)."""

    def __init__(self, fail_first=0, hang=False):
        self.requests = []  # (headers dict, body bytes, answered status)
        self.fail_first = fail_first
        self.hang = hang
        self.released = threading.Event()
        self.pending = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with outer.lock:
                    i = len(outer.requests)
                    status = 500 if i < outer.fail_first else 200
                    outer.requests.append((dict(self.headers), body, status))
                    outer.pending += 1
                if outer.hang:
                    outer.released.wait(120)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the sender gave up first
                with outer.lock:
                    outer.pending -= 1

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/secret-path"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self):
        with self.lock:
            return [json.loads(b).get("event") for _, b, s in self.requests if s == 200]

    def release(self):
        self.released.set()

    def close(self):
        self.release()
        self.server.shutdown()
        self.server.server_close()
