"""`python -m bench.delay LISTEN_PORT TARGET_PORT DELAY_MS`: a TCP proxy on 127.0.0.1 that
holds every chunk it forwards, each way, for DELAY_MS: the database across a network.

`bench.ab --db-delay-ms` runs the servers' database connections through it, so a change
in a call's round trips to the database shows in its latency as it would where the
database is on another machine. The loop's timers have about a millisecond's grain, so
the delay a round trip gains is measured and printed, not assumed.
"""

from __future__ import annotations

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def forward() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            writer.write(data)
        writer.close()

    sender = asyncio.create_task(forward())
    try:
        while data := await reader.read(65536):
            queue.put_nowait((loop.time() + delay, data))
    except ConnectionError:
        pass
    queue.put_nowait((0.0, b""))
    await sender


async def _serve(listen: int, target: int, delay: float) -> None:
    async def connected(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(
            _pipe(client_reader, server_writer, delay),
            _pipe(server_reader, client_writer, delay),
            return_exceptions=True,
        )

    server = await asyncio.start_server(connected, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def main() -> None:
    listen, target, delay_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    asyncio.run(_serve(listen, target, delay_ms / 1000))


if __name__ == "__main__":
    main()
