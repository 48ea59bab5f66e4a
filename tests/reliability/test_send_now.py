"""A WebSocket frame goes to the kernel as it is handed over (`gatehouse.serve.send_now`).

Twisted's `write` only buffers; the reactor sends once the event loop next polls the
socket, after every callback already queued on it. So a card for 20 dashboards left for
all of them after the 20th was handed over, and an agent's decision after the work the
loop had queued behind it. These tests drive a real Twisted TCP transport over a real
socket pair; the reactor beside it only records which descriptors it was asked to watch
for writing, as the reactor's `IReactorFDSet` does, so every send seen here is
`send_now`'s and nothing waits for a loop.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from twisted.internet import tcp
from twisted.internet.protocol import Protocol
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory

from gatehouse.serve import BoundedWebSocketProtocol, send_now, unsent_bytes


class WatchedForWriting:
    """The part of Twisted's reactor a transport's writes use: which descriptors it watches."""

    def __init__(self) -> None:
        self.writers: set[Any] = set()

    def addWriter(self, writer: Any) -> None:
        self.writers.add(writer)

    def removeWriter(self, writer: Any) -> None:
        self.writers.discard(writer)

    def addReader(self, reader: Any) -> None:
        pass

    def removeReader(self, reader: Any) -> None:
        pass


@pytest.fixture
def pair() -> Iterator[tuple[tcp.Connection, socket.socket, WatchedForWriting]]:
    ours, peer = socket.socketpair()
    peer.setblocking(False)
    reactor = WatchedForWriting()
    transport = tcp.Connection(ours, Protocol(), reactor=reactor)  # type: ignore[arg-type]
    transport.connected = True  # as Twisted's server marks an accepted connection
    yield transport, peer, reactor
    ours.close()
    peer.close()


def received(peer: socket.socket) -> bytes:
    """What the peer can read now, without waiting."""
    chunks = []
    while True:
        try:
            chunk = peer.recv(1 << 20)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_write_is_sent_at_once_and_the_reactor_no_longer_watches_it(pair: Any) -> None:
    transport, peer, reactor = pair
    transport.write(b'{"type": "request.created"}')
    # Twisted alone: buffered, the socket watched for the loop's next turn.
    assert received(peer) == b"" and transport in reactor.writers
    send_now(transport)
    assert received(peer) == b'{"type": "request.created"}'
    assert unsent_bytes(transport) == 0 and transport not in reactor.writers


def test_a_wrapped_transport_is_walked_down_to_its_socket(pair: Any) -> None:
    transport, peer, _ = pair
    wrapper = ProtocolWrapper(WrappingFactory(Protocol()), Protocol())  # type: ignore[arg-type]
    wrapper.makeConnection(transport)
    wrapper.write(b"through the wrapper")
    send_now(wrapper)
    assert received(peer) == b"through the wrapper"


def test_what_the_kernel_does_not_take_stays_for_the_reactor(pair: Any) -> None:
    transport, peer, reactor = pair
    big = b"x" * (16 << 20)  # more than a socket pair's buffers hold while nobody reads
    transport.write(big)
    send_now(transport)
    left = unsent_bytes(transport)
    assert left is not None and 0 < left < len(big)
    assert transport in reactor.writers  # the reactor sends the rest as the peer reads
    got = received(peer)
    assert 0 < len(got) == len(big) - left


def test_a_closing_connection_is_left_to_the_reactor(pair: Any) -> None:
    transport, peer, reactor = pair
    transport.write(b"last words")
    transport.loseConnection()
    # Its last write closes the connection, which only the reactor can act on.
    send_now(transport)
    assert received(peer) == b"" and transport in reactor.writers
    assert unsent_bytes(transport) == len(b"last words")


def test_a_failed_send_is_left_to_the_reactor(pair: Any) -> None:
    transport, peer, reactor = pair
    peer.close()
    transport.write(b"to nobody")
    send_now(transport)  # no exception: the reactor's own doWrite meets the failure and closes
    assert transport in reactor.writers and unsent_bytes(transport) == len(b"to nobody")


def test_nothing_to_send_is_a_no_op(pair: Any) -> None:
    transport, peer, reactor = pair
    send_now(transport)
    send_now(None)
    send_now(object())  # not a Twisted descriptor: nothing to do
    assert received(peer) == b"" and reactor.writers == set()


class FramedAsText(BoundedWebSocketProtocol):
    """Daphne's protocol with autobahn's framing left out: the frame's text is the bytes."""

    def sendMessage(self, payload: bytes, isBinary: bool = False, *args: Any) -> None:
        self.transport.write(payload)


def test_the_servers_websocket_protocol_sends_each_frame_at_once(pair: Any) -> None:
    transport, peer, reactor = pair
    protocol = FramedAsText()
    protocol.state = protocol.STATE_OPEN
    protocol.client_addr = ["127.0.0.1", 1]
    protocol.transport = transport
    protocol.serverSend('{"type": "decision"}')
    assert received(peer) == b'{"type": "decision"}' and transport not in reactor.writers
