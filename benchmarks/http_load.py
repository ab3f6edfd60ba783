"""A small closed-loop HTTP/1.1 load generator (keep-alive, N connections) for POST bodies on 127.0.0.1.

Run as its own process so that it does not share the server's interpreter. Each connection sends a request,
waits for the whole response, records the latency and sends the next one. Bodies are built from a template
with a sequence number, so every request carries a fresh `external_event_id`. Prints one JSON line:
{"requests", "seconds", "per_second", "p50_ms", "p99_ms", "max_ms", "statuses"}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from urllib.parse import urlsplit


def _request(host: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _connection(
    host: str,
    port: int,
    path: str,
    headers: dict[str, str],
    template: str,
    counter: list[int],
    total: int,
    latencies: list[float],
    statuses: Counter[int],
    accepted_ids: list[str],
    customers: int,
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while counter[0] < total:
            sequence = counter[0]
            counter[0] += 1
            event_id = f"{template.split('|')[0]}{sequence}"
            body = (
                template.split("|", 1)[1]
                .replace("{id}", event_id)
                .replace("{n}", str(sequence))
                .replace("{c}", str(sequence % customers))
                .encode()
            )
            started = time.perf_counter()
            writer.write(_request(f"{host}:{port}", path, headers, body))
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            latencies.append((time.perf_counter() - started) * 1000)
            statuses[status] += 1
            if 200 <= status < 300:
                accepted_ids.append(event_id)
    finally:
        writer.close()


async def run(
    url: str, headers: dict[str, str], template: str, total: int, connections: int, customers: int = 1000
) -> dict[str, object]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    counter = [0]
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    accepted: list[str] = []
    started = time.perf_counter()
    await asyncio.gather(
        *(
            _connection(
                host, port, parts.path, headers, template, counter, total, latencies, statuses, accepted, customers
            )
            for _ in range(connections)
        )
    )
    seconds = time.perf_counter() - started
    latencies.sort()

    def at(fraction: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * fraction))], 2) if latencies else 0.0

    return {
        "requests": len(latencies),
        "seconds": round(seconds, 3),
        "per_second": round(len(latencies) / seconds, 1),
        "p50_ms": at(0.50),
        "p99_ms": at(0.99),
        "max_ms": round(latencies[-1], 2) if latencies else 0.0,
        "statuses": {str(code): count for code, count in sorted(statuses.items())},
        "accepted": len(accepted),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--customers", type=int, default=1000, help="{c} cycles over 0..customers-1")
    parser.add_argument("--header", action="append", default=[], help="Name: value")
    parser.add_argument("--template", required=True, help="ID_PREFIX|BODY with {id}, {n} and {c} placeholders")
    args = parser.parse_args()
    headers = dict(item.split(": ", 1) for item in args.header)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        pass
    print(
        json.dumps(asyncio.run(run(args.url, headers, args.template, args.requests, args.connections, args.customers)))
    )


if __name__ == "__main__":
    main()
