"""What can stand between the hook and Gatehouse: an HTTPS reverse proxy and an HTTP forward proxy.

Both are byte relays on 127.0.0.1 in front of a real Gatehouse server; they speak the real
wire format (TLS; absolute-form proxy requests) and forward everything unchanged.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with the openssl command."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@contextmanager
def _relay(accept: Callable[[socket.socket], tuple[socket.socket, socket.socket] | None]) -> Iterator[int]:
    """Listen on a free port; `accept` turns each connection into (client side, upstream) or None."""
    listener = socket.create_server(("127.0.0.1", 0))
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    def handle(conn: socket.socket) -> None:
        try:
            pair = accept(conn)
        except (OSError, ValueError):
            pair = None
        if pair is None:
            conn.close()
            return
        client, upstream = pair
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
        _pipe(client, upstream)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stopping.set()
        listener.close()
        thread.join(timeout=5)


@contextmanager
def https_front(target_port: int, cert: Path, key: Path) -> Iterator[int]:
    """TLS in front of a plain-HTTP server, as a reverse proxy terminates it; yields its port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def accept(conn: socket.socket) -> tuple[socket.socket, socket.socket] | None:
        conn.settimeout(10)
        client = context.wrap_socket(conn, server_side=True)  # raises if the client rejects our certificate
        return client, socket.create_connection(("127.0.0.1", target_port), timeout=10)

    with _relay(accept) as port:
        yield port


@contextmanager
def forward_proxy(seen: list[str]) -> Iterator[int]:
    """An HTTP proxy: takes absolute-form requests, forwards them in origin form; records request lines."""

    def accept(conn: socket.socket) -> tuple[socket.socket, socket.socket] | None:
        conn.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        request_line, rest = data.split(b"\r\n", 1)
        seen.append(request_line.decode("latin-1"))
        method, target, version = request_line.split(b" ")
        host_port, _, path = target.removeprefix(b"http://").partition(b"/")
        host, _, port = host_port.partition(b":")
        upstream = socket.create_connection((host.decode(), int(port or 80)), timeout=10)
        upstream.sendall(b" ".join((method, b"/" + path, version)) + b"\r\n" + rest)
        return conn, upstream

    with _relay(accept) as port:
        yield port
