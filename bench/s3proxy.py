"""An HTTP/1.1 proxy for an S3 endpoint on 127.0.0.1 that delays every request (a round
trip to a real bucket) and counts what it forwards: requests by kind, and how many were
in flight at once (time-weighted mean while any was, and the most).

    proxy = LatencyProxy("http://127.0.0.1:5000", latency=0.02).start()
    ... point the client at proxy.url ...
    proxy.counts()   # {"get": 3, "range": 12, "list": 1, ..., "mean_in_flight": 9.7}

Runs its asyncio loop in a thread of the calling process. Each client connection gets
one upstream connection (keep-alive both sides); bodies are streamed, never held."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from urllib.parse import parse_qs, urlsplit

_STREAM = 1 << 16


class LatencyProxy:
    def __init__(self, upstream: str, latency: float = 0.02) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port or 80)
        self.latency = latency
        self.url = ""
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self.reset()

    # ------------------------------------------------------------------ counters
    def reset(self) -> None:
        with self._lock:
            self._kinds: Counter = Counter()
            self.requests: list[tuple[str, str, str]] = []  # (kind, path, range)
            self.spans: list[list[float]] = []  # [arrived, answered] of each, seconds since the reset
            self._in_flight = 0
            self._max_in_flight = 0
            self._since = self._reset_at = time.monotonic()
            self._weighted = 0.0  # integral of requests in flight over time
            self._busy = 0.0  # time with at least one in flight

    def _tick(self, delta: int) -> None:
        now = time.monotonic()
        elapsed = now - self._since
        self._weighted += self._in_flight * elapsed
        if self._in_flight:
            self._busy += elapsed
        self._since = now
        self._in_flight += delta
        self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def counts(self) -> dict:
        with self._lock:
            self._tick(0)
            out = dict(self._kinds)
            out["total"] = sum(self._kinds.values())
            out["max_in_flight"] = self._max_in_flight
            out["mean_in_flight"] = round(self._weighted / self._busy, 2) if self._busy else 0.0
            return out

    # ------------------------------------------------------------------ life
    def start(self) -> LatencyProxy:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            port = self._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=run, name="latency-proxy", daemon=True).start()
        ready.wait()
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._server.close)
            self._loop.call_soon_threadsafe(self._loop.stop)

    # ------------------------------------------------------------------ forwarding
    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        upstream_r = upstream_w = None
        try:
            while True:
                try:
                    head = await client_r.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                method, target, headers, lines = _parse_head(head)
                with self._lock:  # counted as it arrives: its client may be answered before
                    self._tick(+1)  # this task runs again, and reset the counts meanwhile
                    kind = _kind(method, target, headers)
                    self._kinds[kind] += 1
                    self.requests.append((kind, urlsplit(target).path, headers.get("range", "")))
                    span = [time.monotonic() - self._reset_at, -1.0]
                    self.spans.append(span)
                try:
                    if headers.get("expect", "").lower() == "100-continue":
                        client_w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                        lines = [line for line in lines if not line.lower().startswith(b"expect:")]
                    body = await _read_body(client_r, headers)
                    await asyncio.sleep(self.latency)
                    if upstream_w is None:
                        upstream_r, upstream_w = await asyncio.open_connection(*self.upstream)
                    upstream_w.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
                    await upstream_w.drain()
                    keep = await self._relay_response(method, upstream_r, client_w)
                finally:
                    with self._lock:
                        self._tick(-1)
                        span[1] = time.monotonic() - self._reset_at
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            client_w.close()
            if upstream_w is not None:
                upstream_w.close()

    async def _relay_response(self, method: str, upstream: asyncio.StreamReader, client: asyncio.StreamWriter) -> bool:
        """Copy one response to the client; returns whether the connection stays open."""
        head = await upstream.readuntil(b"\r\n\r\n")
        client.write(head)
        _, _, headers, lines = _parse_head(head)
        status = int(lines[0].split()[1])
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            pass
        elif "content-length" in headers:
            await _copy(upstream, client, int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = await upstream.readuntil(b"\r\n")
                client.write(size_line)
                size = int(size_line.split(b";")[0], 16)
                await _copy(upstream, client, size + 2)
                if size == 0:
                    break
        else:
            while data := await upstream.read(_STREAM):
                client.write(data)
                await client.drain()
            return False
        await client.drain()
        return headers.get("connection", "").lower() != "close"


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    while n > 0:
        data = await reader.read(min(n, _STREAM))
        if not data:
            raise ConnectionError("upstream closed mid-body")
        writer.write(data)
        n -= len(data)
        await writer.drain()


async def _read_body(reader: asyncio.StreamReader, headers: dict) -> bytes:
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            parts.append(size_line + await reader.readexactly(size + 2))
            if size == 0:
                return b"".join(parts)
    return b""


def _parse_head(head: bytes) -> tuple[str, str, dict, list[bytes]]:
    lines = head[:-4].split(b"\r\n")
    first = lines[0].decode("latin-1").split()
    headers = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    method, target = (first[0], first[1]) if len(first) >= 2 else ("", "")
    return method, target, headers, lines


def _kind(method: str, target: str, headers: dict) -> str:
    """get, range, list, head, put, delete, post."""
    if method != "GET":
        return method.lower()
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    if "list-type" in query or "delimiter" in query or "prefix" in query or parts.path.strip("/").count("/") == 0:
        return "list"
    return "range" if "range" in headers else "get"


def main() -> None:
    """`python bench/s3proxy.py UPSTREAM LATENCY`: prints the proxy's URL, then answers
    each line on stdin ("reset", "counts", "log": the requests since the last reset, as
    [kind, path, range], or "spans": when each of them arrived and was answered, seconds
    after the reset, -1 while unanswered) with one line of JSON."""
    import json
    import sys

    proxy = LatencyProxy(sys.argv[1], float(sys.argv[2])).start()
    print(proxy.url, flush=True)
    for line in sys.stdin:
        if line.strip() == "reset":
            proxy.reset()
            print("{}", flush=True)
        elif line.strip() == "log":
            with proxy._lock:
                print(json.dumps(proxy.requests), flush=True)
        elif line.strip() == "spans":
            with proxy._lock:
                print(json.dumps([[round(t, 4) for t in span] for span in proxy.spans]), flush=True)
        else:
            print(json.dumps(proxy.counts()), flush=True)


if __name__ == "__main__":
    main()
