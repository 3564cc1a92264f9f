"""A TCP proxy on loopback that a test can cut or stall: the network between the backend and its API server.

The fault matrix (tests/real/test_fault_matrix.py) needs what a load balancer or a flaky network does to a
long-lived watch: the connection reset mid-stream, or every byte held for a while with the connections
left open. The backend's `kubernetes_cluster_url` points here; bytes are copied both ways untouched, so
TLS runs end to end between the client and kube-apiserver (whose certificate names 127.0.0.1) and the
proxy never sees a request. Two threads copy each connection; that is a few threads for a backend's
handful of pooled connections, and keeps the code obvious.

    with CuttableProxy(("127.0.0.1", 6443)) as proxy:
        url = proxy.url           # https://127.0.0.1:<port>
        proxy.cut()               # every open connection reset (RST), new ones accepted
        proxy.stall()             # bytes held in both directions, connections kept open ...
        proxy.resume()            # ... and delivered now
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

CHUNK = 65536


class _Pair:
    """One proxied connection: the client's socket and ours to the server, copied by two pumps."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client, self.server = client, server
        self.cut = False
        self.ended = threading.Barrier(2)  # both pumps ended: the sockets can be closed

    def reset(self) -> None:
        """Make both pumps stop and the closes send RST. A close() from here would not wake a pump blocked
        in recv() (Linux releases the socket only when that call returns): shutting the reading side
        down does, and sends nothing; the pumps then close with SO_LINGER 0, which sends the RST."""
        self.cut = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RD)


class CuttableProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.url = f"https://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._flowing = threading.Event()  # cleared while stalled
        self._flowing.set()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True)
        self._thread.start()

    def __enter__(self) -> CuttableProxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- faults ------------------------------------------------------------------------------------

    def cut(self) -> int:
        """Reset every open connection at once, as a load balancer dropping them does; returns how many."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.reset()
        return len(pairs)

    def stall(self) -> None:
        """Hold every byte in both directions (connections stay open, new ones are accepted and held)."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()

    # -- plumbing ----------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                _reset(client)  # the API server is down: the client sees its connection reset
                continue
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.append(pair)
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(pair, source, target), name="tcp-proxy-pump",
                                 daemon=True).start()  # fmt: skip

    def _pump(self, pair: _Pair, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(CHUNK)
                if not data or pair.cut:
                    break
                self._flowing.wait()  # a stall holds what was read (the kernel buffers the rest)
                if pair.cut or self._closed.is_set():
                    break
                target.sendall(data)
        except OSError:
            pass  # reset by either end
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)
        if not pair.cut:  # one side ended: pass the end on (a clean end stays clean)
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)
        if pair.ended.wait() == 0:  # both pumps ended: one of them closes the two sockets
            pair.client.close()
            pair.server.close()


def _reset(sock: socket.socket) -> None:
    """Close with RST rather than FIN (SO_LINGER 0): the peer sees 'connection reset', not an end."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
