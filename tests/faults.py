"""A TCP proxy on 127.0.0.1 in front of a test server, that injects the faults a network
and an endpoint really have: it can freeze (connections are taken and bytes read, but
nothing is forwarded or answered, as a stalled server does) and thaw, add latency, or
reset every connection. It serves only loopback and stops with its `close`."""

from __future__ import annotations

import socket
import struct
import threading
import time


class FaultProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.latency = 0.0  # seconds added before each forwarded piece
        self.reset = False  # close every connection at once, with RST
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
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._connections += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
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
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
