"""Blob servers on loopback written on raw sockets, so a test chooses how slowly they send.

A pause between bytes is the hostile server's behaviour (a miner's relay that trickles),
never the test's synchronisation. The ``servers`` fixture closes every server a test
started with :func:`serve_blobs` (a test module imports it by name).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class BlobServer:
    """Serves ``GET /blobs/<sha256>`` from ``blobs``; with ``gap_s``, one byte at a time.

    ``trickle_head`` trickles the status line and headers too (else only the body).
    ``sent`` holds, per request, how many bytes went out before it ended.
    """

    blobs: dict[str, bytes]
    gap_s: float = 0.0
    trickle_head: bool = False
    sock: socket.socket = field(default_factory=socket.socket)
    sent: list[int] = field(default_factory=list)
    answering: list[threading.Thread] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def start(self) -> BlobServer:
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def finish(self) -> None:
        """Wait until every request the server took has ended (its byte count is in)."""
        for thread in list(self.answering):
            thread.join(timeout=60)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._answer, args=(conn,), daemon=True)
            self.answering.append(thread)
            thread.start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            path = conn.recv(65536).split(b" ", 2)[1].decode()
            body = self.blobs.get(path.removeprefix("/blobs/"))
            status = "200 OK" if body is not None else "404 Not Found"
            body = body if body is not None else b""
            head = f"HTTP/1.1 {status}\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            count = 0
            try:
                if not self.gap_s:
                    conn.sendall(head + body)
                    count = len(head) + len(body)
                else:
                    if not self.trickle_head:
                        conn.sendall(head)
                    for byte in (head if self.trickle_head else b"") + body:
                        time.sleep(self.gap_s)  # the hostile server's pace
                        conn.sendall(bytes([byte]))
                        count += 1
            except OSError:
                pass
            self.sent.append(count)


@pytest.fixture
def servers() -> Iterator[list[BlobServer]]:
    started: list[BlobServer] = []
    yield started
    for server in started:
        server.sock.close()


def serve_blobs(servers: list[BlobServer], blobs: dict[str, bytes], **kw: Any) -> BlobServer:
    """A :class:`BlobServer` of ``blobs`` started; the ``servers`` fixture closes it."""
    server = BlobServer(blobs, **kw).start()
    servers.append(server)
    return server
