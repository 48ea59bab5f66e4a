"""`python -m gatehouse.serve`: Daphne, with a drain on SIGTERM so a restart loses nothing.

Daphne's own SIGTERM stops the reactor at once and cancels every connection. Here, on
SIGTERM (or SIGINT):

1. stop listening, so the proxy sends new connections to the other processes;
2. mark the process draining (`/readyz` answers 503) and send every open WebSocket a
   `reconnect` frame and a 4012 close (`relay.drain`): agents reconnect through the
   proxy and resume their pending requests there;
3. let HTTP requests in flight (a hook call waiting for its answer) finish, and the
   doorbells they rang reach Redis, for up to `GATEHOUSE_DRAIN_SECONDS` (default 30);
4. stop.

It sends each WebSocket frame as it is handed over, where Twisted would wait for the
event loop's next turn (`send_now`). It also bounds what one WebSocket may hold unsent:
a client that never reads (while the server keeps pushing cards, or answering its
frames) would otherwise grow the process's memory without end. Once a socket's unsent
bytes — Twisted's write buffer, past what the kernel took — pass
`GATEHOUSE_MAX_SOCKET_UNSENT_BYTES` (default 4 MiB) it is aborted at once (a clean close
would queue behind the same buffer); the client reconnects and refetches, as after any
gap.

Takes Daphne's own arguments: `python -m gatehouse.serve -b 127.0.0.1 -p 8001
gatehouse.asgi:application`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from django.conf import settings
from prometheus_client import Counter
from twisted.internet import defer, reactor

from gatehouse.bodylimit import too_large

log = logging.getLogger("gatehouse.serve")
UNSENT_ABORTS = Counter(
    "gatehouse_socket_unsent_aborts_total", "WebSockets aborted because their unsent data passed the limit."
)

DRAIN_SECONDS = float(os.environ.get("GATEHOUSE_DRAIN_SECONDS", "30"))
DRAIN_POLL_SECONDS = 0.1
SHUTDOWN_GRACE_SECONDS = 5.0
MAX_SOCKET_UNSENT_BYTES = int(os.environ.get("GATEHOUSE_MAX_SOCKET_UNSENT_BYTES", str(4 * 1024 * 1024)))


def _descriptor(transport: Any) -> Any | None:
    """The Twisted `FileDescriptor` under `transport` (wrappers such as `ProtocolWrapper`
    and TLS walked down to it), or None when there is none."""
    for _ in range(4):
        if transport is None or hasattr(transport, "_tempDataLen"):
            break
        transport = getattr(transport, "transport", None)
    return transport if transport is not None and hasattr(transport, "_tempDataLen") else None


def unsent_bytes(transport: Any) -> int | None:
    """What the transport holds unsent, or None when it is not a Twisted file descriptor.

    - Twisted's `FileDescriptor` keeps what the kernel has not taken in `dataBuffer` (from
      `offset`) plus `_tempDataBuffer` (`_tempDataLen` bytes); it has no public getter.
    """
    fd = _descriptor(transport)
    if fd is None:
        return None
    return len(fd.dataBuffer) - int(fd.offset) + int(fd._tempDataLen)


def send_now(transport: Any) -> None:
    """Hand what `transport` holds to the kernel now, instead of on the event loop's next turn.

    Twisted's `write` only buffers: the reactor sends once the loop next polls the socket,
    after every callback already queued on it. A card for 20 dashboards thus left for
    all of them after the 20th was handed over, and an agent's decision after whatever the
    loop had queued behind it (the decided card's fan-out): a frame's hand-over to its
    arrival took 2.0 ms at p50 where it now takes 0.36 ms (docs/PERFORMANCE.md,
    twenty-sixth pass).

    - This is the reactor's own `doWrite`, called early: what the kernel does not take
      stays buffered, and the reactor sends it as before.
    - Left to the reactor: a connection closing (its last write closes it, and only the
      reactor can act on that) and a failed send (its own `doWrite` meets the failure
      again and closes the connection).
    """
    fd = _descriptor(transport)
    if fd is None or fd.disconnecting or getattr(fd, "_writeDisconnecting", False) or not unsent_bytes(fd):
        return
    fd.doWrite()


class BoundedWebRequest(WebRequest):
    """Daphne's request, with the server's own work on a body bounded.

    - **No form parsing.** Twisted parses the body of every form POST (multipart/form-data,
      urlencoded) into `request.args`, on the event loop, before Daphne hands the request
      to the application, which reads the raw body and never those arguments. Three
      unauthenticated 1.4 MB multipart bodies held every request and socket of the
      process for 0.45 s.
    - **No body past the limit.** Twisted reads a whole body (to a temporary file past
      100 KB) before the application, and so the body limit (`gatehouse.bodylimit`), sees
      any of it: a client declaring 50 MB was read to the end before its 413. A body
      declared larger than `GATEHOUSE_MAX_BODY_BYTES`, or a chunked one that grows past
      it, is answered 413 here, at once, and the connection closed.

    (tests/security/test_body_parsing.py, docs/SECURITY.md)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False  # Twisted's switch, set by its Request.__init__
        self._received = 0
        self._refused = False

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > body_limit():
            self._refuse()
            length = 0
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:
            return
        self._received += len(data)
        if self._received > body_limit():
            self._refuse()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if not self._refused:  # a refused body's request never reaches the application
            super().requestReceived(command, path, version)

    def _refuse(self) -> None:
        self._refused = True
        body = too_large(body_limit())
        head = f"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
        self.channel.transport.write(f"{head}\r\nConnection: close\r\n\r\n".encode() + body)
        self.channel.transport.loseConnection()


def body_limit() -> int:
    return int(settings.GATEHOUSE_MAX_BODY_BYTES)  # read per request: Django is set up by then


class BoundedWebSocketProtocol(WebSocketProtocol):
    """Daphne's WebSocket protocol that sends each frame at once (`send_now`) and aborts a
    socket whose unsent data passes the limit."""

    def serverSend(self, content: Any, binary: bool = False) -> None:
        super().serverSend(content, binary)
        send_now(self.transport)
        unsent = unsent_bytes(self.transport)
        if unsent is not None and unsent > MAX_SOCKET_UNSENT_BYTES and self.transport is not None:
            log.warning(
                "websocket %s aborted: %d bytes unsent (limit %d); the client is not reading",
                self.path.decode(errors="replace") if isinstance(self.path, bytes) else self.path,
                unsent,
                MAX_SOCKET_UNSENT_BYTES,
            )
            UNSENT_ABORTS.inc()
            self.transport.abortConnection()


class DrainingServer(Server):
    """Daphne's server with our signal handling: drain, then stop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["signal_handlers"] = False
        super().__init__(*args, **kwargs)
        self.ports: list[Any] = []
        self.draining = False

    def listen_success(self, port: Any) -> None:
        # Before the reactor accepts a connection on the port: every socket is bounded,
        # and a request's body is neither parsed by the server nor read past the limit.
        self.ws_factory.protocol = BoundedWebSocketProtocol
        self.http_factory.buildProtocol = self._http_protocol
        self.ports.append(port)
        super().listen_success(port)

    def _http_protocol(self, addr: Any) -> Any:
        protocol = HTTPFactory.buildProtocol(self.http_factory, addr)
        protocol.requestFactory = BoundedWebRequest
        return protocol

    def run(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.on_signal)
        super().run()

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        # A Python signal handler runs between bytecodes of the reactor's thread: hand
        # the work to the reactor instead of doing it here.
        reactor.callFromThread(self.begin_drain, signum)

    def begin_drain(self, signum: int) -> None:
        if self.draining:
            log.warning("second signal %s: stopping now", signum)
            self.stop_within(SHUTDOWN_GRACE_SECONDS)
            return
        self.draining = True
        log.info("signal %s: draining (up to %.0fs)", signum, DRAIN_SECONDS)
        stopped = [defer.maybeDeferred(port.stopListening) for port in self.ports]
        finished = defer.DeferredList(stopped).addCallback(lambda _: defer.Deferred.fromFuture(self._drain_future()))
        finished.addBoth(lambda _: self.stop_within(SHUTDOWN_GRACE_SECONDS))

    def stop_within(self, seconds: float) -> None:
        """Stop the reactor; exit anyway if its shutdown has not finished in `seconds`.

        Daphne's shutdown waits for every application task to finish its cancellation,
        and a socket's channel-layer receive (channels-redis) can stay "cancelling" for
        good. By now every socket was told to move and every request in flight finished
        (or had its `GATEHOUSE_DRAIN_SECONDS`), so nothing is left to lose by leaving.
        """
        watchdog = threading.Timer(seconds, self._exit_now, args=(seconds,))
        watchdog.daemon = True
        watchdog.start()
        self.stop()

    @staticmethod
    def _exit_now(seconds: float) -> None:
        log.warning("shutdown still waiting for application tasks after %.0fs; exiting", seconds)
        logging.shutdown()
        os._exit(0)

    def _drain_future(self) -> asyncio.Future[None]:
        return asyncio.ensure_future(self.drain())

    async def drain(self) -> None:
        from approvals import events
        from relay import drain

        await drain.drain_sockets()
        deadline = time.monotonic() + DRAIN_SECONDS
        while self.busy_connections() and time.monotonic() < deadline:
            await asyncio.sleep(DRAIN_POLL_SECONDS)
        left = self.busy_connections()
        if left:
            log.warning("drain: %d connection(s) still busy after %.0fs; stopping anyway", left, DRAIN_SECONDS)
        # The last requests' doorbells (rung on this loop, relay's dashboards elsewhere hear them).
        try:
            await asyncio.wait_for(events.DOORBELLS.idle(), max(deadline - time.monotonic(), DRAIN_POLL_SECONDS))
        except TimeoutError:
            log.warning("drain: %d doorbell(s) not sent; stopping anyway", events.DOORBELLS.in_flight())

    def busy_connections(self) -> int:
        """Open connections whose application still runs: a request in flight, a socket closing.

        A connection the client already closed is not waited for: nobody is listening,
        and an application still unwinding there (a channel-layer receive that is slow
        to cancel) would only hold the drain to its limit.
        """
        return sum(
            1
            for details in self.connections.values()
            if "disconnected" not in details
            and details.get("application_instance") is not None
            and not details["application_instance"].done()
        )


class DrainingCommandLine(CommandLineInterface):
    server_class = DrainingServer


def main(argv: list[str] | None = None) -> None:
    DrainingCommandLine().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
