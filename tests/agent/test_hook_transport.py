"""The hook's own HTTP/1.1, URL, JSON and option parsing, on the bytes and words they meet."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agent.hook import Endpoint, Refused, parse_args, parse_json, parse_response
from tests.e2e.claude_code.hookrun import ROOT

BODY = b'{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}'


class ResponseParsingTests:
    def test_it_reads_a_body_by_its_content_length(self) -> None:
        data = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY
        assert parse_response(data, ended=False) == (200, BODY)
        assert parse_response(data[:-1], ended=False) is None

    def test_it_reads_a_chunked_body(self) -> None:
        data = b'HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\n{"a":\r\n3\r\n 1}\r\n0\r\n\r\n'
        assert parse_response(data, ended=False) == (202, b'{"a": 1}')
        assert parse_response(data[: data.index(b"0\r\n\r\n")], ended=False) is None

    def test_it_reads_to_the_end_without_a_length(self) -> None:
        data = b"HTTP/1.0 401 Unauthorized\r\nServer: x\r\n\r\n" + BODY
        assert parse_response(data, ended=False) is None
        assert parse_response(data, ended=True) == (401, BODY)

    def test_it_skips_interim_answers(self) -> None:
        data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
        assert parse_response(data, ended=False) == (200, b"{}")

    def test_it_calls_a_cut_answer_a_connection_fault_worth_a_retry(self) -> None:
        with pytest.raises(ConnectionResetError):
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", ended=True)
        with pytest.raises(ConnectionResetError):
            parse_response(b"", ended=True)

    @pytest.mark.parametrize(
        "data",
        [
            b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
            b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20000,
        ],
    )
    def test_it_rejects_what_is_not_http(self, data: bytes) -> None:
        with pytest.raises(Refused):
            parse_response(data, ended=False)


class EndpointTests:
    @pytest.mark.parametrize(
        ("url", "tls", "host", "port", "prefix", "netloc"),
        [
            ("http://127.0.0.1:8000", False, "127.0.0.1", 8000, "", "127.0.0.1:8000"),
            ("https://gate.example.com/", True, "gate.example.com", 443, "", "gate.example.com"),
            ("HTTP://gate.example.com/gatehouse/", False, "gate.example.com", 80, "/gatehouse", "gate.example.com"),
            ("http://[::1]:9000/x", False, "::1", 9000, "/x", "[::1]:9000"),
        ],
    )
    def test_it_splits_a_server_url(self, url: str, tls: bool, host: str, port: int, prefix: str, netloc: str) -> None:
        endpoint = Endpoint(url)
        assert (endpoint.tls, endpoint.host, endpoint.port, endpoint.prefix, endpoint.netloc) == (
            tls,
            host,
            port,
            prefix,
            netloc,
        )

    @pytest.mark.parametrize(
        "url",
        [
            "127.0.0.1:8000",
            "ftp://host",
            "http://",
            "http://host:port",
            "http://host:99999",
            "http://[::1",
            "http://host/a b",
            "http://host/\r\nX-Injected: 1",
            "http://hôst",
        ],
    )
    def test_it_refuses_what_is_not_an_http_url(self, url: str) -> None:
        with pytest.raises(Refused):
            Endpoint(url)


class JsonTests:
    @pytest.mark.parametrize(
        "data",
        [
            b'{"a": [1, 2.5, "\\u00e9\xc3\xa9", null, true, false, {}]}',
            b" \n[1]\r\n",
            b'"x"',
            b"NaN",
            b'\xef\xbb\xbf{"bom": 1}',
            '{"utf16": 1}'.encode("utf-16"),
        ],
    )
    def test_it_reads_what_json_loads_reads(self, data: bytes) -> None:
        assert repr(parse_json(data)) == repr(json.loads(data))

    @pytest.mark.parametrize("data", [b"", b"{", b'{"a": }', b"[1] [2]", b"\xff", b'"\x01"'])
    def test_it_rejects_what_json_loads_rejects(self, data: bytes) -> None:
        with pytest.raises(ValueError):
            json.loads(data)
        with pytest.raises(ValueError):
            parse_json(data)


class OptionsTests:
    @pytest.mark.parametrize(
        "argv",
        [
            [],
            ["--server", "http://h:1", "--timeout", "30", "--on-timeout", "ask", "--on-unreachable", "deny"],
            ["--server=http://h:1", "--timeout=2.5", "--ask-locally", "--poll", "1"],
            ["--on-timeout", "ask", "--on-timeout", "deny"],
            ["--serv", "http://abbreviated:1", "--timeout=-5"],
        ],
    )
    def test_it_reads_options_as_argparse_does(self, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
        from agent import hook

        monkeypatch.setenv("GATEHOUSE_URL", "http://from-env:1")
        monkeypatch.setenv("GATEHOUSE_HOOK_TIMEOUT", "42")
        names = ("server", "timeout", "on_timeout", "on_unreachable", "ask_locally", "poll")
        fast, reference = parse_args(argv), hook._argparse(argv)
        assert {n: getattr(fast, n) for n in names} == {n: getattr(reference, n) for n in names}

    @pytest.mark.parametrize(
        ("argv", "env"),
        [
            (["--on-timeout", "maybe"], {}),
            (["--timeout"], {}),
            (["--ask-locally=yes"], {}),
            (["stray"], {}),
            ([], {"GATEHOUSE_HOOK_TIMEOUT": "soon"}),
        ],
    )
    def test_it_exits_2_with_usage_on_a_mistake(self, argv: list[str], env: dict[str, str]) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "agent.hook", *argv],
            cwd=ROOT,
            input='{"hook_event_name": "PreToolUse"}',
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", **env},
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("usage: python -m agent.hook") and done.stdout == ""

    def test_it_prints_help(self) -> None:
        done = subprocess.run([sys.executable, "-m", "agent.hook", "--help"], cwd=ROOT, capture_output=True, text=True)
        # Help too goes to stderr: Claude Code reads stdout as the answer, so only JSON may go there.
        assert done.returncode == 0 and "--on-unreachable" in done.stderr and done.stdout == ""
