"""A loopback listener that records every connection made to it: point a proxy or an endpoint
variable at it to prove that nothing tried to leave the machine."""
from __future__ import annotations

import socket
import threading


class ConnectionRecorder:
    """A TCP listener on 127.0.0.1 that records every connection made to it (its first bytes) and
    closes it: point a proxy or an endpoint variable at it to prove nothing tried to go out."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.seen: list[bytes] = []
        self._stop = threading.Event()

    def __enter__(self) -> "ConnectionRecorder":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.seen.append(conn.recv(200))
                except OSError:
                    self.seen.append(b"")

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.sock.close()
