#!/usr/bin/python3
"""A TCP proxy for HTTP/1.1 that refuses any S3 request signing a header it does not send.

Signature V4 names the headers it covers in `SignedHeaders` (of the
Authorization header, or `X-Amz-SignedHeaders` of a presigned URL). A server
recomputes the signature from the headers it receives, so a name signed but
never sent (libcurl before 8.3.0 signed the empty `Expect:` that only removes
the header) fails every request with 403 SignatureDoesNotMatch on a strict
server, and on a lenient test server not at all. This proxy sits in front of
every server of the storage tests and checks each request head itself: a
request that signs a header it does not carry gets "400 SignedHeaderNotSent"
and is never forwarded, and is written down in `violations`, which the
fixtures turn into a failed test.

Everything else is passed through as it comes: the head at once, then the
body (Content-Length or chunked) as it arrives, so `Expect: 100-continue`
works; answers are copied back untouched.

Run alone:  sigcheck_proxy.py UPSTREAM_PORT  (prints the port it listens on)
"""
import socket
import sys
import threading
import urllib.parse

from faulty_proxy import LoopbackProxy

MAX_HEAD = 64 * 1024


def signed_but_not_sent(head):
    """The names a request head signs and does not send, sorted; [] when it
    signs nothing (an anonymous request) or sends all it signs."""
    lines = head.decode("latin-1").split("\r\n")
    target = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else ""
    sent = set()
    signed = set()
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        name = name.strip().lower()
        sent.add(name)
        if name == "authorization" and value.strip().startswith("AWS4-HMAC-SHA256"):
            for item in value.strip()[len("AWS4-HMAC-SHA256"):].split(","):
                k, _, v = item.strip().partition("=")
                if k == "SignedHeaders":
                    signed.update(n for n in v.strip().lower().split(";") if n)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
    for v in query.get("X-Amz-SignedHeaders", []):
        signed.update(n for n in v.lower().split(";") if n)
    return sorted(signed - sent)


class SigCheckProxy(LoopbackProxy):
    def __init__(self, upstream_port, host="127.0.0.1"):
        super().__init__(upstream_port, host, backlog=128)
        self.violations = []  # "METHOD /path: signed, not sent: a, b"

    def take_violations(self):
        """The violations seen since the last call, and forget them."""
        with self.lock:
            v, self.violations = self.violations, []
            return v

    def _serve(self, client):
        try:
            up = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        threading.Thread(target=self._pump_back, args=(up, client), daemon=True).start()
        reader = _Reader(client)
        try:
            while True:
                head = reader.head()
                if head is None:
                    return
                with self.lock:
                    self.count += 1
                missing = signed_but_not_sent(head)
                if missing:
                    line = head.split(b"\r\n", 1)[0].decode("latin-1").rsplit(" ", 1)[0]
                    what = f"{line}: signed, not sent: {', '.join(missing)}"
                    with self.lock:
                        self.violations.append(what)
                    msg = (f"<?xml version=\"1.0\"?><Error><Code>SignedHeaderNotSent</Code>"
                           f"<Message>sigcheck_proxy: {what}</Message></Error>").encode()
                    client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/xml\r\n"
                                   b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(msg) + msg)
                    return
                up.sendall(head)
                if not reader.body(head, up.sendall):
                    return
        except OSError:
            return
        finally:
            for s in (client, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    @staticmethod
    def _pump_back(up, client):
        try:
            while True:
                data = up.recv(65536)
                if not data:
                    break
                client.sendall(data)
        except OSError:
            pass
        for s in (client, up):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Reader:
    """Request heads and bodies off one client socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _more(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def head(self):
        try:
            while b"\r\n\r\n" not in self.buf:
                if len(self.buf) > MAX_HEAD:
                    return None
                self._more()
        except EOFError:
            return None
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return head + b"\r\n\r\n"

    def _line(self):
        while b"\r\n" not in self.buf:
            self._more()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _pass(self, n, send):
        while n > 0:
            if not self.buf:
                self._more()
            chunk, self.buf = self.buf[:n], self.buf[n:]
            send(chunk)
            n -= len(chunk)

    def body(self, head, send):
        """Pass the body that follows head to send(); False when the client went away."""
        length, chunked = 0, False
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            k = k.strip().lower()
            if k == b"content-length":
                length = int(v.strip())
            elif k == b"transfer-encoding" and b"chunked" in v.lower():
                chunked = True
        try:
            if not chunked:
                self._pass(length, send)
                return True
            while True:
                line = self._line()
                send(line + b"\r\n")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers, up to the empty line
                        t = self._line()
                        send(t + b"\r\n")
                        if not t:
                            return True
                self._pass(size + 2, send)  # the chunk and its CRLF
        except EOFError:
            return False


if __name__ == "__main__":
    p = SigCheckProxy(int(sys.argv[1])).start()
    print(p.port, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        p.stop()
