"""A small keep-alive HTTP/1.1 load generator on raw asyncio streams.

A client library would spend more CPU per request than the server does on a no-op, and
on a 2-core machine client and server share the CPU; raw streams keep the client cheap,
and the same client drives the baseline and the measured endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Sample:
    seconds: float
    status: int
    body: bytes


@dataclass
class LoadResult:
    samples: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def throughput(self) -> float:
        return len(self.samples) / self.wall_s if self.wall_s else 0.0


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):  # the peer may already have gone
                await self.writer.wait_closed()

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> Sample:
        if self.writer is None or self.writer.is_closing():
            await self.open()
        assert self.reader is not None and self.writer is not None
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        started = time.perf_counter()
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            if b":" in line:
                name, _, value = line.partition(b":")
                fields[name.strip().lower()] = value.strip()
        if b"content-length" in fields:
            payload = await self.reader.readexactly(int(fields[b"content-length"]))
        elif fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            payload = await self._chunked()
        else:
            payload = await self.reader.read()
            await self.close()
            self.writer = None
        if fields.get(b"connection", b"").lower() == b"close":
            await self.close()
            self.writer = None
        return Sample(time.perf_counter() - started, status, payload)

    async def _chunked(self) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)


RequestFactory = Callable[[int, int], tuple[str, str, dict[str, str], bytes]]
Check = Callable[[Sample], str | None]


async def run_load(
    ports: list[int], concurrency: int, total: int, make_request: RequestFactory, check: Check
) -> LoadResult:
    """`total` requests over `concurrency` keep-alive connections (spread over `ports`)."""
    result = LoadResult()
    counter = iter(range(total))
    connections = [Connection("127.0.0.1", ports[i % len(ports)]) for i in range(concurrency)]
    await asyncio.gather(*(c.open() for c in connections))

    async def worker(index: int, conn: Connection) -> None:
        for n in counter:
            method, path, headers, body = make_request(index, n)
            try:
                sample = await conn.request(method, path, headers, body)
            except Exception as exc:
                result.errors.append(f"{type(exc).__name__}: {exc}")
                await conn.close()
                conn.writer = None
                continue
            problem = check(sample)
            if problem:
                result.errors.append(problem)
            else:
                result.samples.append(sample.seconds)

    started = time.perf_counter()
    await asyncio.gather(*(worker(i, c) for i, c in enumerate(connections)))
    result.wall_s = time.perf_counter() - started
    await asyncio.gather(*(c.close() for c in connections))
    return result


def json_body(value: Any) -> bytes:
    return json.dumps(value).encode()
