"""The server's listening socket, bound before anything is loaded.

uvicorn binds only once the repositories are loaded and then, on a port in use, logs an error
after `pagerag serve` had already printed its URL. Binding first means a port that is taken (or
an address that is not this machine's) is one line and a non-zero exit within a second, nothing
that looks like success is printed, and with `--port 0` the URL shown is the port really bound.
"""
from __future__ import annotations

import errno
import socket

from ..errors import ConfigError


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to host:port and listening (connections wait until the app serves them)."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart need not wait out TIME_WAIT
    try:
        sock.bind((address, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(_why(exc, host, port)) from None
    sock.set_inheritable(True)
    return sock


def _why(exc: OSError, host: str, port: int) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is already in use (another server?): stop it, or choose another port "
                "with --port (--port 0 picks a free one)")
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {host}: it is not an address of this machine"
    if exc.errno == errno.EACCES:
        return f"port {port} needs privileges this user does not have: choose one above 1023 with --port"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


def url_of(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}/"
