"""The HTTP server does no work on a request's body before Gatehouse sees the request,
and reads no body past the limit.

The class: work the server did on a body before any of our code (the body limit, the
token check) could refuse it. Twisted, under Daphne, parsed every POST whose type was
`multipart/form-data` or `application/x-www-form-urlencoded` into form arguments that
nothing reads, on the event loop: three unauthenticated 1.4 MB multipart bodies of
20,000 parts each held every request and socket of the process for 0.45 s
(docs/SECURITY.md). `gatehouse.serve` turns that parsing off. It also read every body to
its end (to a temporary file) before the body limit could answer: a client declaring 50 MB
was read to the end before its 413. Now a body declared or grown past the limit is
answered 413 at once.

Twisted answers 400 itself, before the application, when a "multipart" body is not
multipart; so every spelling of the type below, sent with such a body, reaching
Gatehouse's own answer proves that Twisted parsed nothing.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

from tests.live import LiveServer, live_server

pytestmark = pytest.mark.django_db(transaction=True)

# Every spelling Twisted's parser takes for multipart/form-data (it reads the type as an
# e-mail header: case, parameters and spaces do not matter).
MULTIPART_TYPES = [
    "multipart/form-data",
    "MULTIPART/FORM-DATA",
    "Multipart/Form-Data; charset=utf-8",
    "multipart/form-data ; x=y",
    " multipart/form-data",
    "multipart/form-data; boundary=",
    "multipart/form-data; boundary=zz",  # a boundary the body never has
    'multipart/form-data; boundary="quoted"',
]
# Bodies Twisted's parser refuses under those types.
NOT_MULTIPART = [b"", b"x", b"a=1&b=2", b'{"tool_name": "Bash"}', b"--other\r\n\r\nx\r\n--other--\r\n"]
# Where a body can go without a token: a view with a token check, the probes, a page.
PATHS = ["/api/v1/permission-requests", "/hooks/claude-code", "/healthz", "/accounts/login/"]


@pytest.fixture(scope="module")
def served() -> Iterator[LiveServer]:
    with live_server(server="serve") as srv:
        yield srv


def post(srv: LiveServer, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def twisted_refused(status: int, body: bytes) -> bool:
    # Twisted's own answer to a body it could not parse: a 400 with no body at all (every
    # answer of Gatehouse's says what was wrong).
    return status == 400 and body == b""


class BodyParsingTests:
    @pytest.mark.parametrize("content_type", MULTIPART_TYPES)
    def test_no_multipart_spelling_is_parsed_before_gatehouse_answers(
        self, served: LiveServer, content_type: str
    ) -> None:
        for path in PATHS:
            for body in NOT_MULTIPART:
                status, answer = post(served, path, body, content_type)
                assert not twisted_refused(status, answer), (path, body, status, answer[:200])
                assert status < 500, (path, body, status, answer[:200])

    def test_gatehouse_answers_such_a_post_itself(self, served: LiveServer) -> None:
        status, answer = post(served, "/api/v1/permission-requests", b"x", "multipart/form-data")
        # The token check answers, in the API's own shape.
        assert status == 401 and json.loads(answer)["error"]["code"] == "not_authenticated", answer[:200]

    def test_a_form_post_still_reaches_its_view(self, served: LiveServer, alice: Any) -> None:
        # The login form is read by Django, not by the server: it still gets its fields.
        status, answer = post(
            served, "/accounts/login/", b"username=alice&password=wrong", "application/x-www-form-urlencoded"
        )
        assert status in (200, 403), (status, answer[:200])


def raw_exchange(srv: LiveServer, head: bytes, body: bytes = b"") -> bytes:
    """Send `head` and `body`, then read what the server answers (b"" when it closes without a word)."""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
            part = sock.recv(65536)
            if not part:
                break
            answer += part
        return answer


def post_head(length: int | None) -> bytes:
    size = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    return (
        b"POST /api/v1/permission-requests HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + size
        + b"\r\n\r\n"
    )


def chunked(total: int, size: int = 64 * 1024) -> bytes:
    """`total` bytes of chunks, without the last (empty) chunk: the body goes on."""
    out = b""
    while total > 0:
        n = min(size, total)
        out += b"%x\r\n" % n + b"x" * n + b"\r\n"
        total -= n
    return out


class BodyLimitTests:
    @pytest.mark.parametrize("over", [1, 4096, 10**6, 10**12])
    def test_a_body_declared_past_the_limit_is_refused_before_it_is_sent(self, served: LiveServer, over: int) -> None:
        # Only the head is sent: the answer must not wait for a body.
        answer = raw_exchange(served, post_head(settings.GATEHOUSE_MAX_BODY_BYTES + over))
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "payload_too_large"

    @pytest.mark.parametrize("over", [1, 100_000])
    def test_a_chunked_body_growing_past_the_limit_is_refused_as_it_passes(self, served: LiveServer, over: int) -> None:
        # The body never ends: the answer must come as it passes the limit.
        answer = raw_exchange(served, post_head(None), chunked(settings.GATEHOUSE_MAX_BODY_BYTES + over))
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]

    @pytest.mark.parametrize("length", [0, 2, "limit"])
    def test_a_body_within_the_limit_reaches_gatehouse(self, served: LiveServer, length: int | str) -> None:
        size = settings.GATEHOUSE_MAX_BODY_BYTES if length == "limit" else int(length)
        body = b"{}" if size == 2 else b" " * size
        status, answer = post(served, "/api/v1/permission-requests", body, "application/json")
        # The token check answers, not the body limit.
        assert status == 401 and json.loads(answer)["error"]["code"] == "not_authenticated", answer[:200]
