"""The agent's line to Gatehouse: ask permission for tool calls, stream progress, report results.

One WebSocket to `/ws/agent/` carries every request in flight, each keyed by a client
`ref` until the server names it with an `id`. When the socket drops, the client
reconnects with exponential backoff, re-sends requests the server never acknowledged
(the same `tool_use_id`, so the server replays rather than duplicates) and sends
`resume` with the ids still waiting, so a decision made while it was away still
arrives. When the socket cannot be opened at all — or stays down — it falls back to
HTTP long-polling (`POST /api/v1/permission-requests?wait=`, then `GET …/{id}?wait=`).

`GatehouseClient` is async; `SyncGatehouseClient` wraps it for plain scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from agent.facts import gather

log = logging.getLogger("gatehouse.agent")

Transport = Literal["auto", "websocket", "http"]
T = TypeVar("T")

# Close codes the relay uses for credentials it will never accept: retrying is pointless.
AUTH_CLOSE_CODES = frozenset({4401, 4403})


class GatehouseError(Exception):
    """Gatehouse refused or failed a request; ``code`` is the server's error code."""

    def __init__(self, message: str, code: str = "error") -> None:
        super().__init__(message)
        self.code = code


class GatehouseUnavailable(GatehouseError):
    """The server could not be reached (fail closed: treat as deny)."""


class GatehouseTimeout(GatehouseError):
    """No decision arrived within the caller's timeout; the request was withdrawn."""


@dataclass(frozen=True)
class PermissionDecision:
    """The server's verdict on one request (SPEC §7 `decision` frame)."""

    behavior: str
    message: str = ""
    updated_input: dict[str, Any] | None = None
    reason: dict[str, Any] = field(default_factory=dict)
    decided_by: str = ""
    surface: str = ""
    request_id: str | None = None

    @property
    def allowed(self) -> bool:
        return self.behavior == "allow"

    @classmethod
    def from_wire(cls, decision: dict[str, Any], request_id: str | None) -> PermissionDecision:
        # Anything but an explicit allow is a deny: an unknown behavior must never run a tool.
        behavior = "allow" if decision.get("behavior") == "allow" else "deny"
        updated = decision.get("updated_input")
        reason = decision.get("reason")
        return cls(
            behavior=behavior,
            message=str(decision.get("message") or ""),
            updated_input=updated if isinstance(updated, dict) else None,
            reason=reason if isinstance(reason, dict) else {},
            decided_by=str(decision.get("decided_by") or ""),
            surface=str(decision.get("surface") or ""),
            request_id=request_id,
        )


class PendingPermission:
    """One request in flight: ``await handle.accepted()`` for its id, ``handle.decision()``."""

    def __init__(self, ref: str, request: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        self.ref = ref
        self.request = request
        self.id: str | None = None
        self._accepted: asyncio.Future[str] = loop.create_future()
        self._decided: asyncio.Future[PermissionDecision] = loop.create_future()

    @property
    def done(self) -> bool:
        return self._decided.done()

    async def accepted(self) -> str:
        return await asyncio.shield(self._accepted)

    async def decision(self) -> PermissionDecision:
        return await asyncio.shield(self._decided)

    def _set_id(self, request_id: str) -> None:
        self.id = request_id
        if not self._accepted.done():
            self._accepted.set_result(request_id)

    def _decide(self, decision: PermissionDecision) -> None:
        if decision.request_id:
            self._set_id(decision.request_id)
        if not self._decided.done():
            self._decided.set_result(decision)

    def _fail(self, exc: BaseException) -> None:
        for future in (self._accepted, self._decided):
            if not future.done():
                future.set_exception(exc)
                # Retrieved here so an unawaited failure never logs "exception was never retrieved".
                future.exception()


class GatehouseClient:
    """Async Gatehouse client; use as ``async with GatehouseClient(url, token) as client``."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        transport: Transport = "auto",
        connect_timeout: float = 10.0,
        backoff_initial: float = 0.2,
        backoff_max: float = 15.0,
        http_fallback_after: int = 5,
        long_poll_seconds: float = 25.0,
        progress_interval: float = 0.25,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.transport: Transport = transport
        self.connect_timeout = connect_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        # Failed reconnects in a row before requests in flight move to HTTP long-poll.
        self.http_fallback_after = http_fallback_after
        self.long_poll_seconds = long_poll_seconds
        self.progress_interval = progress_interval
        self._progress: dict[str, dict[str, str]] = {}
        self._progress_flusher: asyncio.Task[None] | None = None
        self.mode: Literal["websocket", "http"] | None = None
        self.reconnects = 0
        # The server said it is restarting (a `reconnect` frame): reconnect without backoff.
        self._moved = False
        self._ws: ClientConnection | None = None
        self._connected = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._pollers: set[asyncio.Task[None]] = set()
        self._by_ref: dict[str, PendingPermission] = {}
        self._by_id: dict[str, PendingPermission] = {}
        self._start_lock = asyncio.Lock()
        self._closed = False
        # Set when the server rejected our credentials: every later request fails at once.
        self._fatal: GatehouseError | None = None
        self._http: httpx.AsyncClient | None = None

    # --- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> GatehouseClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def ws_url(self) -> str:
        base = self.url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
        return f"{base}/ws/agent/"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def start(self) -> None:
        """Open the socket, or settle on HTTP when it cannot be opened (``transport="auto"``)."""
        async with self._start_lock:
            if self.mode is not None:
                return
            if self.transport == "http":
                self.mode = "http"
                return
            try:
                self._ws = await self._open_socket()
            except GatehouseUnavailable as exc:
                if self.transport == "websocket":
                    raise
                log.warning("Gatehouse WebSocket unavailable (%s); using HTTP long-poll", exc)
                self.mode = "http"
                return
            self.mode = "websocket"
            self._connected.set()
            self._reader = asyncio.create_task(self._read_forever(), name="gatehouse-reader")

    async def close(self) -> None:
        """Stop reading, close the socket and fail whatever is still waiting."""
        self._closed = True
        tasks = [t for t in (self._reader, self._progress_flusher, *self._pollers) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._http is not None:
            await self._http.aclose()
        for handle in list(self._by_ref.values()):
            handle._fail(GatehouseUnavailable("the Gatehouse client was closed"))

    # --- the public operations ---------------------------------------------------------

    async def submit(self, request: dict[str, Any]) -> PendingPermission:
        """Send one permission request; return its handle at once (the decision comes later).

        - ``request`` holds tool_name, tool_input, tool_use_id, session_id, cwd,
          permission_mode, context; a missing ``tool_use_id`` is generated, because it is
          what makes a re-send after a reconnect idempotent.
        """
        await self.start()
        if self._fatal is not None:
            raise self._fatal
        request = dict(request)
        request.setdefault("tool_use_id", f"gh_{uuid.uuid4().hex}")
        if "facts" not in request:
            # This process runs where the tool will: report its disk, not the server's.
            request["facts"] = _facts_of(request)
        handle = PendingPermission(uuid.uuid4().hex, request)
        self._by_ref[handle.ref] = handle
        if self.mode == "websocket":
            await self._send_if_connected({"type": "permission_request", "ref": handle.ref, "request": request})
        else:
            self._spawn_poller(handle)
        return handle

    async def request_permission(self, request: dict[str, Any], *, timeout: float | None = None) -> PermissionDecision:
        """Submit and wait for the decision; withdraw the request on timeout or cancellation.

        Raises `GatehouseTimeout`, `GatehouseError` (refused) or `GatehouseUnavailable`.
        """
        handle = await self.submit(request)
        try:
            return await asyncio.wait_for(handle.decision(), timeout)
        except TimeoutError:
            await self._withdraw(handle)
            raise GatehouseTimeout(f"no decision within {timeout:g}s; the request was withdrawn", "timeout") from None
        except asyncio.CancelledError:
            # The agent stopped waiting (its task ended): the approvers must not keep seeing it.
            await asyncio.shield(self._withdraw(handle))
            raise
        finally:
            self._forget(handle)

    async def cancel(self, request_id: str) -> None:
        """Withdraw a pending request (it becomes `cancelled` on every surface)."""
        if self.mode == "websocket" and self._connected.is_set():
            await self._send_if_connected({"type": "cancel", "id": request_id})
            return
        with contextlib.suppress(httpx.HTTPError):
            await self._http_client().post(f"/api/v1/permission-requests/{request_id}/cancel", json={})

    async def progress(self, request_id: str, data: Any) -> None:
        """Stream tool output to the dashboard (best effort: dropped while disconnected).

        - ``{"stream", "text"}`` chunks are coalesced and sent at most every
          ``progress_interval`` seconds per request, each frame capped at
          ``PROGRESS_TEXT_CHARS`` (the newest text kept): a chatty command must not trip
          the server's frame-rate limit, which would cost the socket every request on it.
        """
        if self.mode != "websocket":
            return
        if not (isinstance(data, dict) and set(data) == {"stream", "text"} and isinstance(data["text"], str)):
            await self._send_if_connected({"type": "progress", "id": request_id, "data": data})
            return
        buffers = self._progress.setdefault(request_id, {})
        buffers[data["stream"]] = _tail(buffers.get(data["stream"], "") + data["text"])
        if self._progress_flusher is None or self._progress_flusher.done():
            self._progress_flusher = asyncio.create_task(self._flush_progress_later())

    async def _flush_progress_later(self) -> None:
        while self._progress and not self._closed:
            await asyncio.sleep(self.progress_interval)
            for request_id in list(self._progress):
                await self._flush_progress(request_id)

    async def _flush_progress(self, request_id: str) -> None:
        for stream, text in self._progress.pop(request_id, {}).items():
            frame = {"type": "progress", "id": request_id, "data": {"stream": stream, "text": text}}
            with contextlib.suppress(TimeoutError):
                # A stalled socket must not stall the tool whose output this is.
                await asyncio.wait_for(self._send_if_connected(frame), 5)

    async def tool_result(self, request_id: str, *, ok: bool, output: Any = None, error: str = "") -> None:
        """Report how the allowed call ended (best effort: dropped while disconnected)."""
        if self.mode != "websocket":
            return
        await self._flush_progress(request_id)
        frame: dict[str, Any] = {"type": "tool_result", "id": request_id, "ok": ok}
        if ok:
            frame["output"] = output
        else:
            frame["error"] = error
        await self._send_if_connected(frame)

    # --- WebSocket -----------------------------------------------------------------------

    async def _open_socket(self) -> ClientConnection:
        try:
            return await connect(
                self.ws_url,
                additional_headers=self.headers,
                open_timeout=self.connect_timeout,
                proxy=None,
                max_size=2**20,
            )
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise GatehouseUnavailable(f"cannot open {self.ws_url}: {exc}", "unreachable") from exc

    async def _send_if_connected(self, frame: dict[str, Any]) -> None:
        ws = self._ws
        if ws is None or not self._connected.is_set():
            return  # re-sent (requests) or dropped (progress) when the socket is back
        try:
            await ws.send(json.dumps(frame))
        except ConnectionClosed:
            pass  # the reader notices and reconnects; _resume re-sends requests

    async def _read_forever(self) -> None:
        while not self._closed:
            assert self._ws is not None
            code = await self._read_until_closed(self._ws)
            self._connected.clear()
            if self._closed:
                return
            if code in AUTH_CLOSE_CODES:
                self._fail_all(GatehouseError(f"Gatehouse rejected the token (close code {code})", "unauthorized"))
                return
            ws = await self._reconnect()
            if ws is None:
                self._fall_back_to_http()
                return
            self._ws = ws
            self._connected.set()
            await self._resume()

    async def _read_until_closed(self, ws: ClientConnection) -> int | None:
        try:
            async for raw in ws:
                self._on_frame(raw)
        except ConnectionClosed:
            pass
        return ws.close_code

    async def _reconnect(self) -> ClientConnection | None:
        delay = self.backoff_initial
        for attempt in range(self.http_fallback_after):
            # A draining server closed us on purpose, and the proxy has other processes:
            # the first attempt need not wait.
            if attempt or not self._moved:
                await asyncio.sleep(delay)
            self._moved = False
            try:
                ws = await self._open_socket()
            except GatehouseUnavailable as exc:
                log.info("Gatehouse reconnect failed: %s", exc)
                delay = min(delay * 2, self.backoff_max)
                continue
            self.reconnects += 1
            return ws
        return None

    async def _resume(self) -> None:
        """Re-send unacknowledged requests and ask for decisions of acknowledged ones."""
        waiting = [h for h in self._by_ref.values() if not h.done]
        ids = [h.id for h in waiting if h.id]
        if ids:
            await self._send_if_connected({"type": "resume", "ids": ids})
        for handle in waiting:
            if handle.id is None:
                frame = {"type": "permission_request", "ref": handle.ref, "request": handle.request}
                await self._send_if_connected(frame)

    def _on_frame(self, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
        except ValueError:
            log.warning("Gatehouse sent a frame that is not JSON; ignored")
            return
        if not isinstance(frame, dict):
            return
        kind = frame.get("type")
        handle = self._by_ref.get(str(frame.get("ref"))) or self._by_id.get(str(frame.get("id")))
        if kind == "pending" and handle is not None and frame.get("id"):
            handle._set_id(str(frame["id"]))
            self._by_id[str(frame["id"])] = handle
        elif kind == "decision" and handle is not None and isinstance(frame.get("decision"), dict):
            request_id = str(frame["id"]) if frame.get("id") else handle.id
            handle._decide(PermissionDecision.from_wire(frame["decision"], request_id))
        elif kind == "reconnect":
            log.info("Gatehouse asked us to reconnect: %s", frame.get("reason"))
            self._moved = True
        elif kind == "error":
            self._on_error_frame(frame, handle)

    def _on_error_frame(self, frame: dict[str, Any], handle: PendingPermission | None) -> None:
        code, message = str(frame.get("code") or "error"), str(frame.get("message") or "")
        if handle is not None and not handle.done:
            handle._fail(GatehouseError(message or code, code))
        else:
            log.warning("Gatehouse error frame %s: %s", code, message)

    # --- HTTP long-poll ------------------------------------------------------------------

    def _http_client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                base_url=self.url,
                headers=self.headers,
                timeout=httpx.Timeout(self.long_poll_seconds + 15, connect=self.connect_timeout),
            )
        return self._http

    def _fall_back_to_http(self) -> None:
        log.warning("Gatehouse WebSocket stayed down; moving requests in flight to HTTP long-poll")
        self.mode = "http"
        for handle in list(self._by_ref.values()):
            if not handle.done:
                self._spawn_poller(handle)

    def _spawn_poller(self, handle: PendingPermission) -> None:
        task = asyncio.create_task(self._poll(handle), name=f"gatehouse-poll-{handle.ref}")
        self._pollers.add(task)
        task.add_done_callback(self._pollers.discard)

    async def _poll(self, handle: PendingPermission) -> None:
        delay = self.backoff_initial
        failures = 0
        while not handle.done and not self._closed:
            try:
                await self._poll_once(handle)
                delay, failures = self.backoff_initial, 0
            except httpx.TransportError as exc:
                failures += 1
                if handle.id is None and failures >= self.http_fallback_after:
                    # Never reached the server at all: say so now rather than wait forever.
                    handle._fail(GatehouseUnavailable(f"cannot reach {self.url}: {exc}", "unreachable"))
                    return
                # A known request survives a server restart: keep it, retry with backoff.
                log.info("Gatehouse HTTP poll failed: %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
            except GatehouseError as exc:
                handle._fail(exc)

    async def _poll_once(self, handle: PendingPermission) -> None:
        wait = {"wait": f"{self.long_poll_seconds:g}"}
        if handle.id is None:
            response = await self._http_client().post("/api/v1/permission-requests", params=wait, json=handle.request)
        else:
            response = await self._http_client().get(f"/api/v1/permission-requests/{handle.id}", params=wait)
        body = _json_body(response)
        decision = body.get("decision")
        request_id = str(body["id"]) if body.get("id") else handle.id
        if isinstance(decision, dict) and decision.get("behavior") in ("allow", "deny"):
            # A 503 "audit unavailable" carries a deny decision too: honour it, fail closed.
            handle._decide(PermissionDecision.from_wire(decision, request_id))
        elif response.status_code in (200, 202) and request_id:
            handle._set_id(request_id)
            self._by_id[request_id] = handle
        elif response.status_code >= 500:
            raise httpx.TransportError(f"server error {response.status_code}")
        else:
            error: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else {}
            message = str(error.get("message") or f"HTTP {response.status_code}")
            raise GatehouseError(message, str(error.get("code") or response.status_code))

    # --- bookkeeping -------------------------------------------------------------------

    async def _withdraw(self, handle: PendingPermission) -> None:
        if handle.id is None:
            with contextlib.suppress(asyncio.TimeoutError, GatehouseError):
                await asyncio.wait_for(handle.accepted(), 2.0)
        if handle.id is not None and not handle.done:
            with contextlib.suppress(Exception):
                await self.cancel(handle.id)

    def _forget(self, handle: PendingPermission) -> None:
        self._by_ref.pop(handle.ref, None)
        if handle.id:
            self._by_id.pop(handle.id, None)

    def _fail_all(self, exc: GatehouseError) -> None:
        self._fatal = exc
        for handle in list(self._by_ref.values()):
            handle._fail(exc)


PROGRESS_TEXT_CHARS = 16_000


def _facts_of(request: dict[str, Any]) -> dict[str, Any]:
    tool_input, cwd = request.get("tool_input"), request.get("cwd")
    directories = request.get("additional_directories")
    home = request.get("home")
    return gather(
        str(request.get("tool_name", "")),
        tool_input if isinstance(tool_input, dict) else {},
        cwd if isinstance(cwd, str) else "",
        [d for d in directories if isinstance(d, str)] if isinstance(directories, list) else [],
        home if isinstance(home, str) and home else None,
    )


def _tail(text: str) -> str:
    if len(text) <= PROGRESS_TEXT_CHARS:
        return text
    kept = text[-PROGRESS_TEXT_CHARS:]
    return f"[… {len(text) - len(kept)} characters skipped …]\n{kept}"


def _json_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


class SyncGatehouseClient:
    """A blocking facade over `GatehouseClient` for scripts; its loop runs in a thread."""

    def __init__(self, url: str, token: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gatehouse-client", daemon=True)
        self._thread.start()
        self._client: GatehouseClient = self._run(self._make(url, token, options))

    async def _make(self, url: str, token: str, options: dict[str, Any]) -> GatehouseClient:
        return GatehouseClient(url, token, **options)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> SyncGatehouseClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def mode(self) -> str | None:
        return self._client.mode

    def request_permission(self, request: dict[str, Any], *, timeout: float | None = None) -> PermissionDecision:
        return self._run(self._client.request_permission(request, timeout=timeout))

    def cancel(self, request_id: str) -> None:
        self._run(self._client.cancel(request_id))

    def progress(self, request_id: str, data: Any) -> None:
        self._run(self._client.progress(request_id, data))

    def tool_result(self, request_id: str, *, ok: bool, output: Any = None, error: str = "") -> None:
        self._run(self._client.tool_result(request_id, ok=ok, output=output, error=error))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
