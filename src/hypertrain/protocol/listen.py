"""Claiming a listening port before a server creates any state.

Every server of the project (challenge service, relay, beacon, dataset server) binds
its port first, through :func:`bind_listener`, and only then opens its state
directory or database: a port that something else holds ends the command with one
line naming the address and the port, and exit status 1, before anything was written.
"""

from __future__ import annotations

import errno
import socket


class PortInUseError(ValueError):
    """The address and port a server was told to bind are taken (or not bindable)."""


def bind_listener(host: str, port: int, *, what: str = "the server") -> socket.socket:
    """A socket bound to ``(host, port)`` and listening; :class:`PortInUseError` if taken.

    ``SO_REUSEADDR`` is set, as uvicorn and the standard library servers do, so a port
    left in ``TIME_WAIT`` by a stopped server can be bound again at once, while one
    that a live process listens on is refused.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise PortInUseError(f"{what}: cannot bind {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise PortInUseError(_explain(exc, host, port, what)) from None
    return sock


def ensure_port_free(host: str, port: int, *, what: str = "the server") -> None:
    """Refuse (:class:`PortInUseError`) a port that is taken, before any state is created.

    For servers that bind the port themselves a moment later (the standard library's
    ``ThreadingHTTPServer``); the probe socket is closed again at once.
    """
    bind_listener(host, port, what=what).close()


def _explain(exc: OSError, host: str, port: int, what: str) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{what}: port {port} on {host} is already in use: stop the process that holds it"
            " (`ss -ltnp` shows it) or choose another port with --port"
        )
    if exc.errno == errno.EACCES:
        return f"{what}: no permission to bind port {port} on {host}: use a port above 1023"
    return f"{what}: cannot bind port {port} on {host}: {exc.strerror}"


def serve_asgi(app: object, sock: socket.socket | None, *, fd: int | None, debug: bool) -> None:
    """Run an ASGI app under uvicorn on ``sock`` (or an inherited descriptor ``fd``).

    Request lines (polling, mostly) are logged only at ``debug``: a server at rest
    stays quiet.
    """
    import uvicorn

    level = "debug" if debug else "info"
    if sock is None:
        uvicorn.run(app, fd=fd, access_log=debug, log_level=level)  # type: ignore[arg-type]
        return
    config = uvicorn.Config(app, access_log=debug, log_level=level)  # type: ignore[arg-type]
    uvicorn.Server(config).run(sockets=[sock])
