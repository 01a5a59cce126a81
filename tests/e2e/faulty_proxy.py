#!/usr/bin/python3
"""A TCP proxy for HTTP/1.1 that breaks every Nth request, for storage tests.

It sits between trainctl and s3rver on loopback. Requests are counted as
they pass (heads parsed, bodies sized by Content-Length); every Nth one gets
one of these faults, in turn:

  503    answered "503 Slow Down" by the proxy, never forwarded
  drop   the connection closed as soon as the request head arrives
  cutreq half the request head forwarded (the whole head of a bodiless request),
         then both sides closed
  cutres forwarded whole, but only part of the answer comes back

and, only when asked for by name (faults=...):

  cuthead forwarded whole, but the answer stops after its status line and
          first header (libcurl 7.88 calls that a success with an empty body)

Run alone:  faulty_proxy.py UPSTREAM_PORT EVERY  (prints the port it listens on)
"""
import socket
import sys
import threading

FAULTS = ("503", "drop", "cutreq", "cutres")


class LoopbackProxy:
    """A TCP proxy on loopback: a thread accepts, _serve(client) each
    connection in a thread of its own (the subclass's). The plumbing the
    fault proxy and the signing check (sigcheck_proxy.py) share."""

    def __init__(self, upstream_port, host="127.0.0.1", backlog=64):
        self.upstream = (host, upstream_port)
        self.lock = threading.Lock()
        self.count = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, client):
        raise NotImplementedError


class FaultyProxy(LoopbackProxy):
    def __init__(self, upstream_port, every=5, faults=FAULTS, host="127.0.0.1"):
        super().__init__(upstream_port, host)
        self.every = every
        self.faults = faults
        self.injected = {f: 0 for f in faults}

    def _next_fault(self):
        with self.lock:
            self.count += 1
            if self.every and self.count % self.every == 0:
                f = self.faults[(self.count // self.every) % len(self.faults)]
                self.injected[f] += 1
                return f
            return None

    def _serve(self, client):
        try:
            up = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        state = {"cut": None, "closed": False}
        back = threading.Thread(target=self._pump_back, args=(up, client, state), daemon=True)
        back.start()
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = client.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                head += b"\r\n\r\n"
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v.strip())
                while len(buf) < length:
                    data = client.recv(min(1 << 20, length - len(buf)))
                    if not data:
                        return
                    buf += data
                body, buf = buf[:length], buf[length:]
                fault = self._next_fault()
                if fault == "503":
                    msg = (b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                           b"<Message>injected by faulty_proxy</Message></Error>")
                    client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
                                   b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(msg) + msg)
                    return
                if fault == "drop":
                    return
                if fault == "cutreq":
                    # s3rver stores a PUT whose body was cut off (even after
                    # the client's successful retry), where S3 answers
                    # IncompleteBody and stores nothing: a cut body would test
                    # s3rver, so bodies are cut before they start.
                    up.sendall(head[: len(head) // 2] if body else head)
                    return
                if fault == "cutres":
                    state["cut"] = 200  # bytes of the answer that still get through
                if fault == "cuthead":
                    state["cut"] = "head"
                up.sendall(head + body)
        except OSError:
            return
        finally:
            state["closed"] = True
            for s in (client, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    @staticmethod
    def _pump_back(up, client, state):
        try:
            while True:
                data = up.recv(65536)
                if not data:
                    break
                if state["cut"] == "head":
                    while data.count(b"\r\n") < 2:  # the status line and one header
                        more = up.recv(65536)
                        if not more:
                            break
                        data += more
                    client.sendall(b"\r\n".join(data.split(b"\r\n")[:2]) + b"\r\n")
                    break
                if state["cut"] is not None:
                    client.sendall(data[: state["cut"]])
                    break
                client.sendall(data)
        except OSError:
            pass
        for s in (client, up):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


if __name__ == "__main__":
    p = FaultyProxy(int(sys.argv[1]), int(sys.argv[2])).start()
    print(p.port, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        p.stop()
