"""The HTTP server does no work on a request's body before Gatehouse sees the request.

The class: work the server did on a body before any of our code (the body limit, the
token check) could refuse it. Twisted, under Daphne, parsed every POST whose type was
`multipart/form-data` or `application/x-www-form-urlencoded` into form arguments that
nothing reads, on the event loop: three unauthenticated 1.4 MB multipart bodies of
20,000 parts each held every request and socket of the process for 0.45 s
(docs/SECURITY.md). `gatehouse.serve` turns that parsing off.

Twisted answers 400 itself, before the application, when a "multipart" body is not
multipart; so every spelling of the type below, sent with such a body, reaching
Gatehouse's own answer proves that Twisted parsed nothing.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

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
