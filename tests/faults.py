"""A TCP proxy on 127.0.0.1 in front of a test server, that injects the faults a network
and an endpoint really have: it can freeze (connections are taken and bytes read, but
nothing is forwarded or answered, as a stalled server does) and thaw, add latency, or
reset every connection, answer every request with an HTTP error status (as an
overloaded S3 does: 503 SlowDown) or only the requests that match a pattern, cut every
response short after some bytes, or send responses a trickle at a time (each piece in
time for any read timeout, the whole never). It serves only loopback and stops with its
`close`."""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
import time


class FaultProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.latency = 0.0  # seconds added before each forwarded piece
        self.reset = False  # close every connection at once, with RST
        self.status: int | None = None  # answer each request with this HTTP status instead
        self.error_code = "SlowDown"  # the S3 error code in those answers
        self.truncate_after: int | None = None  # close each response after this many bytes
        self.trickle: float | None = None  # send responses 256 bytes at a time, this many seconds apart
        # answer each request whose request line holds this with `refuse_status` and
        # `error_code` (a request that fails while others succeed: one part of an upload)
        self.refuse_matching: bytes | None = None
        self.refuse_status = 500
        # of the requests refuse_matching picks out (counted in `matched`), let the first
        # `pass_first` through, then refuse `refuse_count` (None: every one after them)
        self.pass_first = 0
        self.refuse_count: int | None = None
        # refuse a DeleteObjects as S3 does where a policy denies the deletes: 200, with an
        # <Error> for each key in the answer, nothing deleted (not the whole request's error)
        self.refuse_each_key = False
        self.matched = 0
        self._thawed = threading.Event()
        self._thawed.set()
        self._closed = False
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def freeze(self) -> None:
        self._thawed.clear()

    def thaw(self) -> None:
        self._thawed.set()

    def close(self) -> None:
        self._closed = True
        self._thawed.set()
        self._listener.close()
        with self._lock:
            for conn in self._connections:
                _close(conn)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.reset:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                continue
            if self.status is not None:
                threading.Thread(target=self._refuse, args=(client, self.status, self.error_code), daemon=True).start()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._connections += [client, upstream]
            for source, sink, limit, response in (
                (client, upstream, None, False),
                (upstream, client, self.truncate_after, True),
            ):
                threading.Thread(target=self._pump, args=(source, sink, limit, response), daemon=True).start()

    def _refused(self, data: bytes) -> bool:
        """Whether `data` starts a request that refuse_matching picks out, and is to be
        refused (pass_first, refuse_count)."""
        pattern = self.refuse_matching
        line = data.split(b"\r\n", 1)[0]
        if pattern is None or line.split(b" ", 1)[0] not in _METHODS or pattern not in line:
            return False
        with self._lock:
            self.matched += 1
            n = self.matched - self.pass_first
        return n > 0 and (self.refuse_count is None or n <= self.refuse_count)

    def _refuse(self, client: socket.socket, status: int, code: str, read: bool = True) -> None:
        try:
            if read:
                client.recv(65536)  # the request (its first piece is enough to answer it)
            body = b"<Error><Code>%s</Code><Message>injected</Message></Error>" % code.encode()
            client.sendall(
                b"HTTP/1.1 %d Injected\r\nContent-Type: application/xml\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (status, len(body), body)
            )
        except OSError:
            pass
        finally:
            _close(client)

    def _refuse_each_key(self, client: socket.socket, data: bytes) -> None:
        """Answer the DeleteObjects request begun with `data` with an error for each key."""
        try:
            head, _, body = data.partition(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            while length is not None and len(body) < int(length.group(1)):
                more = client.recv(65536)
                if not more:
                    break
                body += more
            errors = b"".join(
                b"<Error><Key>%s</Key><Code>%s</Code><Message>injected</Message></Error>"
                % (key, self.error_code.encode())
                for key in re.findall(rb"<Key>(.*?)</Key>", body)
            )
            answer = (
                b'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">%s</DeleteResult>'
                % errors
            )
            client.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(answer), answer)
            )
        except OSError:
            pass
        finally:
            _close(client)

    def _pump(
        self, source: socket.socket, sink: socket.socket, limit: int | None = None, response: bool = False
    ) -> None:
        sent = 0
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                self._thawed.wait()  # frozen: hold every byte, answer nothing
                if self.latency:
                    time.sleep(self.latency)
                if self._closed:
                    break
                if not response and self._refused(data):
                    if self.refuse_each_key:
                        self._refuse_each_key(source, data)
                    else:
                        self._refuse(source, self.refuse_status, self.error_code, read=False)
                    break
                if limit is not None and sent + len(data) > limit:
                    sink.sendall(data[: limit - sent])  # the response cut short
                    break
                trickle = self.trickle  # (a test may end the trickle while a piece is sent)
                if response and trickle:  # every piece within any read timeout, the whole never
                    for start in range(0, len(data), 256):
                        sink.sendall(data[start : start + 256])
                        time.sleep(trickle)
                else:
                    sink.sendall(data)
                sent += len(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


_METHODS = {b"GET", b"PUT", b"POST", b"DELETE", b"HEAD"}


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
