"""Claude Code hook command: `python -m agent.hook --server URL`.

Reads one hook input JSON on stdin (PreToolUse, PermissionRequest, PostToolUse,
PostToolUseFailure), asks Gatehouse (`POST /hooks/claude-code`), and prints the hook
output Claude Code honours. Standard library only and no Django, so it starts fast:
Claude Code runs it before every tool call.

Contracts matched here (Claude Code 2.1.x):
- A hook that outlives its configured `timeout`, or exits 1, counts as no decision and
  Claude Code carries on, so this command answers before its own `--timeout` (keep it
  shorter than the hook timeout) and then applies `--on-timeout` (default deny).
- Claude Code 2.1.332 sends a waiting PermissionRequest hook SIGTERM when the person
  refuses at its own dialog or the session ends; on SIGTERM/SIGINT/SIGHUP the pending
  request is withdrawn ("answered at the terminal"). A "Yes" at the dialog leaves the
  hook running: the call's PostToolUse ends the ask on the server.
- Nothing here may print a traceback into the transcript, and stdout carries nothing
  but the one JSON answer (Claude Code runs the call on stdout that is not JSON).
- Only an unreachable server (refused, no such name, no answer in time, 502/503/504)
  follows `--on-unreachable` (default ask), and even then the hook prints `ask` or
  `deny` (or the opted-in `allow`), never nothing. Any other answer (4xx, 500, a body
  that is not the hook output, an answer whose `Gatehouse-Answer-For` is not the SHA-256
  of the body sent) is denied with its reason.

Start-up is most of what the hook costs beside the server's answer, so the common path
imports only the C halves of json, socket and signal (`python3 -X importtime -m agent.hook`):
- Their Python halves import `re` and `enum`, ~40 M instructions, more than the
  interpreter's own start; `urllib.request` and `http.client` add `email` and `ssl`
  (~140 M more). So HTTP/1.1 is spoken here on a plain socket, and the server's answer,
  already the hook output, is printed as it came.
- `ssl` is imported for https:// servers only, urllib only when an `http(s)_proxy`
  variable names a proxy (so proxies work as before), `json` only for answers made here
  and for JSON the C scanner rejects (its error messages), `argparse` only for `--help`
  and mistakes (exit 2, which Claude Code takes as "block the call").
- The installers start it as `python3 -I -S -c` importing this module
  (`agent.install.launcher`): no `site` and no runpy, and its bytecode cached, in the
  bundle too (`agent.install.add_bytecode`).
"""

from __future__ import annotations

import _signal
import _socket
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` is ~30 M instructions of start-up; annotations are strings here
    from collections.abc import Callable
    from typing import Any

DEFAULT_SERVER = "http://127.0.0.1:8000"
DECIDING_EVENTS = ("PreToolUse", "PermissionRequest")
RECORDING_EVENTS = ("PostToolUse", "PostToolUseFailure", "PermissionDenied")
# Each long-poll stays well under common proxy idle timeouts (often 30-60 s).
POLL_CHUNK = 25.0
# How long to keep trying a server we have never reached before giving up on it.
CONNECT_RETRY = 5.0
TRANSIENT_STATUS = (502, 503, 504)
# No "allow" on timeout: a deadline is the server's to decide. `--on-unreachable allow` is a
# documented local opt-in, for a server that was never reached.
# "defer": a headless session (`claude -p`) stops with the call pending, and its resume
# (`claude -p --resume <session>`) gets the person's answer.
BEHAVIORS = {"--on-timeout": ("deny", "ask", "defer"), "--on-unreachable": ("ask", "deny", "allow")}
MAX_HEAD = 65536  # http.client's limit for one header line; ours for the whole head
MAX_RESPONSE = 64 * 1024 * 1024


class Unreachable(Exception):
    """Gatehouse could not be reached or answered something unusable."""


class Refused(Exception):
    """Gatehouse (or whatever answered) gave no usable decision for this call: deny.

    Not "unreachable": a 4xx, a 500, a body that is not the hook output, or an answer
    for another call must never fall back to `--on-unreachable` (which may allow).
    """


class Answer:
    """One HTTP answer: status, parsed JSON, the raw body and the headers."""

    def __init__(self, status: int, parsed: Any, raw: bytes, headers: dict[str, str]) -> None:
        self.status, self.parsed, self.raw, self.headers = status, parsed, raw, headers


class Interrupted(BaseException):
    """Claude Code stopped the hook (SIGTERM/SIGINT/SIGHUP)."""


# --- options -------------------------------------------------------------------------


class Options:
    """What the command line and the environment ask for (`--help` lists it)."""

    server = DEFAULT_SERVER
    timeout = 300.0
    on_timeout = "deny"
    on_unreachable = "ask"
    ask_locally = False
    # Opt-in: send the user's last prompt (read from Claude Code's transcript) for the card.
    send_prompt = False
    poll = POLL_CHUNK

    def take(self, flag: str, value: str) -> None:
        """Set one `--flag value`; ValueError for anything argparse should judge instead."""
        if value.startswith("-"):
            raise ValueError(flag)
        if flag == "--server":
            self.server = value
        elif flag == "--timeout":
            self.timeout = float(value)
        elif flag == "--poll":
            self.poll = float(value)
        elif flag in BEHAVIORS and value in BEHAVIORS[flag]:
            setattr(self, flag[2:].replace("-", "_"), value)
        else:
            raise ValueError(flag)


def parse_args(argv: list[str] | None = None) -> Options:
    """The options, from the command line, GATEHOUSE_URL and GATEHOUSE_HOOK_TIMEOUT.

    - The spellings installers write (`--flag value`, `--flag=value`) are read here;
      anything else (`--help`, abbreviations, mistakes) goes to argparse, which exits 2.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    options = Options()
    try:
        options.server = os.environ.get("GATEHOUSE_URL") or DEFAULT_SERVER
        options.timeout = float(os.environ.get("GATEHOUSE_HOOK_TIMEOUT") or 300)
        words = iter(argv)
        for word in words:
            flag, equals, value = word.partition("=")
            if word == "--ask-locally":
                options.ask_locally = True
            elif word == "--send-prompt":
                options.send_prompt = True
            elif equals:
                options.take(flag, value)
            else:
                following = next(words, None)
                if following is None:
                    raise ValueError(word)
                options.take(word, following)
    except ValueError:
        return _argparse(argv)
    return options


def _argparse(argv: list[str]) -> Options:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m agent.hook", description="Gatehouse hook for Claude Code.")
    parser.add_argument("--server", default=os.environ.get("GATEHOUSE_URL") or DEFAULT_SERVER)
    parser.add_argument(
        # A string default goes through type= too: a bad GATEHOUSE_HOOK_TIMEOUT is a usage error.
        "--timeout",
        type=float,
        default=os.environ.get("GATEHOUSE_HOOK_TIMEOUT") or "300",
        help="seconds to wait for a decision; keep it shorter than the hook timeout in Claude Code",
    )
    parser.add_argument("--on-timeout", choices=BEHAVIORS["--on-timeout"], default="deny")
    parser.add_argument("--on-unreachable", choices=BEHAVIORS["--on-unreachable"], default="ask")
    parser.add_argument(
        "--ask-locally",
        action="store_true",
        help="when Gatehouse says ask, let Claude Code prompt locally instead of waiting for a remote answer",
    )
    parser.add_argument(
        "--send-prompt",
        action="store_true",
        help="send the user's last prompt (from Claude Code's transcript) with each call, for the approver's card",
    )
    parser.add_argument("--poll", type=float, default=POLL_CHUNK, help=argparse.SUPPRESS)
    options = Options()
    vars(options).update(vars(parser.parse_args(argv)))
    return options


def read_token() -> str:
    token = os.environ.get("GATEHOUSE_TOKEN", "").strip()
    path = os.environ.get("GATEHOUSE_TOKEN_FILE", "")
    if not token and path:
        # `~` too: the Agents page's snippet names ~/.config/gatehouse-token inside quotes.
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            token = handle.read().strip()
    if not token:
        raise Refused("no token: set GATEHOUSE_TOKEN or GATEHOUSE_TOKEN_FILE")
    if not (token.isascii() and token.isprintable()):
        raise Refused("the token has characters no Gatehouse token has")
    return token


# --- JSON ----------------------------------------------------------------------------


class _JsonContext:
    """The settings json.loads hands its C scanner (json.decoder.JSONDecoder's defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    array_hook = None  # read from Python 3.15 on
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


def _c_scanner() -> Callable[[str, int], tuple[Any, int]] | None:
    try:
        from _json import make_scanner

        return make_scanner(_JsonContext())  # type: ignore[arg-type]  # duck-typed, as json.decoder does
    except Exception:  # another Python, or a changed private API: json.loads does it all
        return None


_SCAN = _c_scanner()


def parse_json(data: bytes) -> Any:
    """json.loads(data), on the C scanner alone for the UTF-8 JSON it accepts."""
    if _SCAN is not None:
        try:
            text = data.decode("utf-8").strip(" \t\n\r")
            value, end = _SCAN(text, 0)
            if end == len(text):
                return value
        except (ValueError, StopIteration):
            pass
    import json  # for everything else, and for its error messages

    return json.loads(data)


def json_line(value: Any) -> bytes:
    import json  # only for answers made here, off the common path

    return json.dumps(value).encode() + b"\n"


# --- HTTP ----------------------------------------------------------------------------


class Endpoint:
    """Where Gatehouse listens, split once from `--server`: scheme, host, port, path prefix."""

    def __init__(self, server: str) -> None:
        self.url = server.rstrip("/")
        scheme, sep, rest = self.url.partition("://")
        netloc, slash, path = rest.partition("/")
        self.tls = scheme.lower() == "https"
        self.prefix = slash + path
        self.netloc = netloc
        host, port = netloc, ""
        if netloc.startswith("["):  # an IPv6 literal: [::1]:8000
            host, bracket, port = netloc[1:].partition("]")
            if not bracket or port[:1] not in ("", ":"):
                host = ""
            port = port[1:]
        elif ":" in netloc:
            host, _, port = netloc.partition(":")
        self.host = host
        if not port:
            self.port = 443 if self.tls else 80
        else:
            self.port = int(port) if port.isascii() and port.isdigit() else 0
        usable = sep and scheme.lower() in ("http", "https") and host and 0 < self.port < 65536
        if not usable or not self.url.isascii() or any(ch <= " " or ch == "\x7f" for ch in self.url):
            raise Refused(f"--server is not an http:// or https:// URL: {server!r}")


def proxied(scheme: str) -> bool:
    """Whether urllib would send this scheme to a proxy named in the environment."""
    wanted = f"{scheme}_proxy"
    return any(value and name.lower() == wanted for name, value in os.environ.items())


def http_post(
    endpoint: Endpoint, path: str, body: bytes, token: str, timeout: float
) -> tuple[int, dict[str, str], bytes]:
    """POST on a new connection; return the answer's status, headers (lower-case names) and body.

    - Connection faults are OSError (worth a retry); an answer that is not HTTP is
      Unreachable. `timeout` bounds the connect and each read, as urlopen's did.
    """
    head = (
        f"POST {endpoint.prefix}{path} HTTP/1.1\r\nHost: {endpoint.netloc}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Accept-Encoding: identity\r\nConnection: close\r\nUser-Agent: gatehouse-hook\r\n\r\n"
    )
    sock = connect(endpoint, timeout)
    try:
        sock.sendall(head.encode("ascii") + body)  # one write: no Nagle wait between head and body
        received = bytearray()
        while True:
            chunk = sock.recv(65536)
            received += chunk
            answer = parse_full_response(bytes(received), ended=not chunk)
            if answer is not None:
                return answer
            if len(received) > MAX_RESPONSE:
                raise Refused("the server's answer is too long")
    finally:
        sock.close()


def connect(endpoint: Endpoint, timeout: float) -> Any:
    """A connected socket (TLS for https://); socket.create_connection on the C module."""
    if endpoint.tls:
        import socket
        import ssl

        # What urlopen did: the system's trust store (SSL_CERT_FILE too), host name checked.
        context = ssl.create_default_context()
        context.set_alpn_protocols(["http/1.1"])
        raw = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
        return context.wrap_socket(raw, server_hostname=endpoint.host)
    problem = OSError(f"no address for {endpoint.host}")
    # Bytes: a str host is IDNA-encoded, which imports encodings.idna and re (the URL is ASCII).
    host = endpoint.host.encode("ascii")
    for family, kind, proto, _, address in _socket.getaddrinfo(host, endpoint.port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            problem = exc
    raise problem


def parse_response(data: bytes, *, ended: bool) -> tuple[int, bytes] | None:
    """The status and body of the HTTP/1.x response in `data`; None while it is incomplete."""
    answer = parse_full_response(data, ended=ended)
    return None if answer is None else (answer[0], answer[2])


def parse_full_response(data: bytes, *, ended: bool) -> tuple[int, dict[str, str], bytes] | None:
    """The status, headers and body of the HTTP/1.x response in `data`; None while incomplete.

    - `ended`: the server closed the connection, so `data` is all there will be.
    """
    status, headers = 100, dict[str, str]()
    while 100 <= status < 200:  # interim answers (100 Continue, 103 Early Hints) precede the real one
        head_end = data.find(b"\r\n\r\n")
        if head_end < 0:
            if len(data) > MAX_HEAD:
                raise Refused("the server's answer has a head that is too long")
            if ended:
                raise ConnectionResetError("the server closed the connection without a whole answer")
            return None
        status, headers = _parse_head(data[:head_end])
        data = data[head_end + 4 :]
    if status in (204, 304):
        return status, headers, b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(data)
    elif "content-length" in headers:
        length = headers["content-length"]
        if not (length.isascii() and length.isdigit()):
            raise Refused(f"the server answered {status} with a Content-Length that is not a number")
        body = data[: int(length)] if len(data) >= int(length) else None
    else:
        body = data if ended else None  # the connection's end is the body's end (Connection: close)
    if body is None and ended:
        raise ConnectionResetError("the server closed the connection in the middle of its answer")
    return None if body is None else (status, headers, body)


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    words = lines[0].split(None, 2)
    status = words[1] if len(words) > 1 and words[0].startswith("HTTP/1.") else ""
    if not (len(status) == 3 and status.isascii() and status.isdigit()):
        raise Refused(f"the server answered something that is not HTTP/1.x: {lines[0][:60]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status), headers


def _dechunk(data: bytes) -> bytes | None:
    """The body of a chunked answer; None until its last chunk has arrived."""
    body, at = bytearray(), 0
    while True:
        line_end = data.find(b"\r\n", at)
        if line_end < 0:
            return None
        size_text = data[at:line_end].split(b";", 1)[0].strip()
        if not (size_text.isalnum() and all(ch in b"0123456789abcdefABCDEF" for ch in size_text)):
            raise Refused(f"the server answered a bad chunk size: {size_text[:20]!r}")
        size = int(size_text, 16)
        if size == 0:
            return bytes(body)  # trailers, if any, are not read: the connection closes
        at = line_end + 2
        if len(data) < at + size + 2:
            return None
        body += data[at : at + size]
        at += size + 2


def post_through_proxy(url: str, body: bytes, token: str, timeout: float) -> tuple[int, dict[str, str], bytes]:
    """POST with urllib, which honours `http_proxy`/`https_proxy`/`no_proxy` exactly."""
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


class Gatehouse:
    """The few HTTP calls the hook makes, with retries inside one deadline."""

    def __init__(self, server: str, token: str, deadline: float) -> None:
        self.endpoint = Endpoint(server)
        self.server = self.endpoint.url
        self.token = token
        self.deadline = deadline
        self.started = time.monotonic()
        self.reached = False
        self.proxied = proxied("https" if self.endpoint.tls else "http")

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _post(self, path: str, body: bytes, timeout: float) -> Answer:
        """One POST: its status, parsed JSON (None for a proxy's fault page), raw body, headers."""
        if self.proxied:
            status, headers, raw = post_through_proxy(self.server + path, body, self.token, timeout)
        else:
            status, headers, raw = http_post(self.endpoint, path, body, self.token, timeout)
        self.reached = True
        try:
            return Answer(status, parse_json(raw or b"{}"), raw, headers)
        except ValueError:
            if status in TRANSIENT_STATUS:
                return Answer(status, None, raw, headers)
            raise Refused(f"Gatehouse answered {status} with a body that is not JSON") from None

    def hook(self, body: bytes, *, wait: float, on_timeout: str | None, ask_locally: bool) -> Answer:
        """POST the hook input, retrying transient faults while the deadline allows."""
        # Every value is a number or one of the --on-timeout choices: nothing to escape.
        query = f"wait={max(wait, 0):.1f}"
        if on_timeout:
            query += f"&on_timeout={on_timeout}"
        if ask_locally:
            query += "&ask=local"
        delay = 0.1
        while True:
            try:
                # A server that accepts and never answers must not keep us past our own
                # deadline: Claude Code would kill the hook and carry on without a decision.
                read_timeout = max(min(wait + 10, self.remaining()), 0.1)
                answer = self._post("/hooks/claude-code?" + query, body, timeout=read_timeout)
                if answer.status not in TRANSIENT_STATUS:
                    return answer
                problem = f"Gatehouse answered {answer.status}"
            except OSError as exc:  # urllib's URLError is an OSError too; so are timeouts
                problem = f"cannot reach Gatehouse at {self.server}: {getattr(exc, 'reason', exc)}"
            # A server never reached gets a short grace; a known one, the whole deadline.
            budget = self.remaining() if self.reached else min(self.remaining(), CONNECT_RETRY - self.elapsed())
            if budget <= delay:
                raise Unreachable(problem)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def cancel(self, request_id: str, hook_body: bytes) -> None:
        """Withdraw a pending request ("answered at the terminal"); best effort, about a second."""
        from urllib.parse import quote  # only when Claude Code stops us

        path = f"/api/v1/permission-requests/{quote(request_id)}/cancel"
        try:
            status = (
                self._post(path, b'{"reason": "answered at the terminal"}', timeout=1.0).status if request_id else 404
            )
            if status in (404, 405):
                # A server without the REST cancel route: withdraw through the hook endpoint.
                self._post("/hooks/claude-code?withdraw=1", hook_body, timeout=1.0)
        except (Unreachable, Refused, OSError):
            pass


# --- the command ---------------------------------------------------------------------


def local_answer(event: str, behavior: str, reason: str) -> dict[str, Any] | None:
    """The output for a decision made here, without the server; None only for other events.

    - Never silence for a deciding event: silence lets Claude Code decide alone, which
      in bypass or auto mode runs the call unreviewed. "ask" is PreToolUse's `ask`; a
      PermissionRequest is Claude Code's own prompt already, so "ask" leaves it to that
      prompt (headless: refused) and says why.
    """
    if event not in DECIDING_EVENTS:
        return None
    if behavior == "defer" and event != "PreToolUse":
        behavior = "deny"  # only a PreToolUse answer can park a call
    if event == "PreToolUse":
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": behavior,
                "permissionDecisionReason": reason,
            }
        }
    if behavior == "ask":
        return {"systemMessage": f"{reason} Claude Code asks you instead."}
    decision: dict[str, Any] = {"behavior": behavior}
    if behavior == "deny":
        decision["message"] = reason
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}


def checked_output(event: str, answer: Answer, body: bytes) -> bytes:
    """The server's hook output as Claude Code reads it, once it is proven to be ours.

    - Bound to this call: `Gatehouse-Answer-For` names the SHA-256 of the exact body sent
      (its tool_use_id, tool name and input), so an answer for another call is refused.
    - Shaped as this event's output; `{}` (withdrawn) becomes an explicit ask.
    """
    if answer.headers.get("gatehouse-answer-for") != answer_binding(body):
        raise Refused("the answer is not bound to this call (Gatehouse-Answer-For does not match)")
    output = answer.parsed
    if not isinstance(output, dict):
        raise Refused("the answer is not a JSON object")
    if not output:
        local = local_answer(event, "ask", "Gatehouse has no answer for this call (withdrawn).")
        return json_line(local)
    specific = output.get("hookSpecificOutput")
    if not isinstance(specific, dict) or specific.get("hookEventName") != event:
        raise Refused(f"the answer is not a {event} hook output")
    if event == "PreToolUse":
        valid = specific.get("permissionDecision") in ("allow", "deny", "ask", "defer")
    else:
        decision = specific.get("decision")
        valid = isinstance(decision, dict) and decision.get("behavior") in ("allow", "deny")
    if not valid:
        raise Refused(f"the answer has no {event} decision Claude Code honours")
    line = answer.raw.strip()
    # The endpoint answers exactly the hook output; re-encoding it would import json.
    return line + b"\n" if b"\n" not in line else json_line(output)


def answer_binding(body: bytes) -> str:
    try:  # the C module alone: hashlib's Python half costs start-up time on every call
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        from hashlib import sha256
    return "sha256=" + sha256(body).hexdigest()


# Seconds of the hook's own deadline kept for the server's last answer after its last
# wait: it applies --on-timeout (an audit row) and answers. On a loaded machine 1 s was
# not always enough, and a late answer reads as "unreachable" (--on-unreachable).
ANSWER_MARGIN = 2.0


def decide(args: Options, event: str, body: bytes) -> bytes | None:
    """Ask Gatehouse until it decides or our deadline comes; return the hook output line."""
    client = Gatehouse(args.server, read_token(), time.monotonic() + max(args.timeout, 1.0))
    # Remembered so a signal handler can withdraw the call, even before its id is known.
    _PENDING.update(client=client, body=body, id="")
    # The first call does not wait, so a pending request's id is known (and can be
    # withdrawn if Claude Code kills us) before any long wait starts.
    wait, final = 0.0, False
    while True:
        answer = client.hook(
            body, wait=wait, on_timeout=args.on_timeout if final else None, ask_locally=args.ask_locally
        )
        if event in RECORDING_EVENTS:
            return None
        if answer.status == 200:
            return checked_output(event, answer, body)
        pending = answer.parsed.get("gatehouse") if isinstance(answer.parsed, dict) else None
        if answer.status != 202 or not isinstance(pending, dict) or pending.get("status") != "pending":
            error = answer.parsed.get("error") if isinstance(answer.parsed, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            raise Refused(f"Gatehouse answered {answer.status}: {message or answer.raw[:200]!r}")
        if answer.headers.get("gatehouse-answer-for") != answer_binding(body):
            raise Refused("the pending answer is not bound to this call (Gatehouse-Answer-For does not match)")
        _PENDING["id"] = str(pending.get("id", ""))
        if final:
            # The server should have applied on_timeout; if it did not, do it here.
            output = local_answer(event, args.on_timeout, "Nobody answered in Gatehouse before the hook's deadline.")
            return json_line(output) if output else None
        remaining = client.remaining()
        wait = min(args.poll, max(remaining - ANSWER_MARGIN, 0.0))
        final = remaining - ANSWER_MARGIN <= args.poll


def add_facts(raw: bytes, hook_input: dict[str, Any]) -> bytes:
    """The hook input with this machine's facts (`agent/facts.py`, beside this file).

    - Run by its path (`python3 /path/to/agent/hook.py`) from any directory, `agent` is
      not importable: the sibling file is loaded from this file's directory. (The
      installers' command imports this module from the bundle or the checkout, where
      `agent.facts` is beside it: `agent.install.launcher`.) A lone copy of this file
      sends no facts, like an http hook: the server then asks where a path rule would
      need them.
    """
    try:
        from agent.facts import with_facts
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        if not os.path.exists(os.path.join(here, "facts.py")):
            return raw
        sys.path.insert(0, os.path.dirname(here))
        from agent.facts import with_facts
    return with_facts(raw, hook_input)


PROMPT_LIMIT = 4000  # characters: what the card shows of it (the server keeps as much)
TRANSCRIPT_TAIL = 512 * 1024  # bytes read from the transcript's end: its last prompt is there


PROMPT_WAIT = 0.5  # seconds: how long to wait for Claude Code to write this turn's prompt


def last_prompt(transcript_path: str, prompt_id: str = "", *, wait: float = PROMPT_WAIT) -> str:
    """The user's typed prompt of this turn in a Claude Code transcript (JSONL), or "".

    - A user line whose content is text (a string or text blocks); tool results, which
      Claude Code also records as user lines, are skipped. Only the file's tail is read.
    - With the hook input's `prompt_id`, only that turn's prompt: Claude Code writes the
      transcript on its own time (measured with 2.1.332: a hook that reads at once can
      find the file without this turn's prompt yet), so the file is read again for up to
      `wait` seconds, and an older turn's prompt is never sent in its place.
    """
    deadline = time.monotonic() + wait
    while True:
        found = _typed_prompt(transcript_path, prompt_id)
        if found is not None or time.monotonic() >= deadline:
            return found or ""
        time.sleep(0.02)  # re-reading the file Claude Code is writing, until the deadline


def _typed_prompt(transcript_path: str, prompt_id: str) -> str | None:
    """The newest typed prompt (of `prompt_id`'s turn when given); None when none is there yet."""
    try:
        with open(transcript_path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - TRANSCRIPT_TAIL))
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if b'"user"' not in line:
            continue
        try:
            entry = parse_json(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or (prompt_id and entry.get("promptId") != prompt_id):
            continue
        message = entry.get("message") if entry.get("type") == "user" else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
                continue
            content = "\n".join(
                str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
            )
        if isinstance(content, str) and content.strip() and not entry.get("isMeta"):
            return content.strip()[:PROMPT_LIMIT]
    return None


def add_prompt(raw: bytes, hook_input: dict[str, Any]) -> bytes:
    """The hook input with `user_prompt` (opted in with --send-prompt); unchanged when none."""
    path = hook_input.get("transcript_path")
    prompt_id = hook_input.get("prompt_id")
    prompt_id = prompt_id if isinstance(prompt_id, str) else ""
    prompt = last_prompt(path, prompt_id) if isinstance(path, str) and path else ""
    text = raw.rstrip()
    if not prompt or not text.endswith(b"}") or "user_prompt" in hook_input:
        return raw
    encoded = json_line(prompt).strip()
    separator = b"," if text[:-1].strip() not in (b"{", b"") else b""
    hook_input["user_prompt"] = prompt
    return text[:-1] + separator + b'"user_prompt":' + encoded + b"}"


_PENDING: dict[str, Any] = {}


def _on_signal(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def _withdraw() -> None:
    client, request_id = _PENDING.get("client"), _PENDING.get("id", "")
    if isinstance(client, Gatehouse):
        client.cancel(request_id, _PENDING["body"])


def run(argv: list[str] | None = None, stdin: Any = None) -> int:
    """The whole command; returns the exit code. Prints at most one JSON line, and only that."""
    out = sys.stdout.buffer
    # Claude Code reads stdout as the hook's answer and runs the call on anything that
    # is not JSON, so nothing else may ever reach it: stray prints go to stderr.
    sys.stdout = sys.stderr
    for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(sig, _on_signal)
    args = parse_args(argv)
    event = ""
    try:
        raw = (stdin or sys.stdin.buffer).read()
        hook_input = parse_json(raw or b"null")
        if not isinstance(hook_input, dict):
            raise Refused("stdin is not Claude Code's hook input (a JSON object)")
        event = str(hook_input.get("hook_event_name", ""))
        if event not in DECIDING_EVENTS + RECORDING_EVENTS:
            return 0
        if event in RECORDING_EVENTS:
            args.timeout = min(args.timeout, 10.0)
        else:  # the server decides on this machine's paths and home, as reported here
            if args.send_prompt:
                raw = add_prompt(raw, hook_input)
            raw = add_facts(raw, hook_input)
        output = decide(args, event, raw)
    except Interrupted:
        _withdraw()
        return 1
    except Unreachable as exc:
        # Only a server never reached, or gone silent, follows --on-unreachable.
        print(f"gatehouse hook: {exc}; applying --on-unreachable {args.on_unreachable}", file=sys.stderr)
        answer = local_answer(event, args.on_unreachable, f"Gatehouse unreachable ({exc}).")
        output = json_line(answer) if answer else None
    except Exception as exc:  # never a traceback into Claude Code's transcript; fail closed
        reason = str(exc) if isinstance(exc, Refused) else f"unexpected {type(exc).__name__}: {exc}"
        print(f"gatehouse hook: {reason}; denying", file=sys.stderr)
        answer = local_answer(event, "deny", f"Gatehouse gave no usable answer ({reason}), so the call is denied.")
        output = json_line(answer) if answer else None
    if output:
        out.write(output)
        out.flush()
    return 0


def main() -> None:
    try:
        code = run()
    except Interrupted:
        _withdraw()
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
