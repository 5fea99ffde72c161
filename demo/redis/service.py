"""The demo's Python service: an ASGI app limited by ratekeeper.redis.AsyncRedisPolicy.

Every request is decided against demo/redis/policy.json (per client: per
second, minute and hour; overall, per method, per endpoint; all or nothing)
in the Redis at RATEKEEPER_REDIS_URL, under the key prefix DEMO_PREFIX, the
same limits the Node service (service.cjs) uses. Served by a minimal HTTP/1.1
server from the standard library (any ASGI server would do).

    python service.py <port>      prints "listening <port>" when ready
"""

import asyncio
import json
import os
import sys
from pathlib import Path

import redis.asyncio as aioredis

from ratekeeper.redis import AsyncRedisPolicy

CONFIG = json.loads((Path(__file__).parent / "policy.json").read_text())


def make_app(policy: AsyncRedisPolicy):
    """The ASGI app: 200 or 429, RateLimit headers, a JSON body saying who decided."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        request = {"client": headers.get("x-client", "anonymous"), "method": scope["method"], "endpoint": scope["path"]}
        d = await policy.try_acquire(request)
        body = json.dumps({"service": "python", "allowed": d.allowed, "deniedBy": d.denied_by, "fromStore": d.from_store})
        out = [(k.encode(), v.encode()) for k, v in d.headers().items()] + [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200 if d.allowed else 429, "headers": out})
        await send({"type": "http.response.body", "body": body.encode()})

    return app


async def serve(app, port: int) -> None:
    """Just enough HTTP/1.1 to call an ASGI app: one request per connection, no request body."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        method, target, _ = head[0].split(" ", 2)
        fields = [line.split(":", 1) for line in head[1:] if ":" in line]
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
            "path": target.split("?", 1)[0], "query_string": target.partition("?")[2].encode(),
            "headers": [(k.strip().lower().encode(), v.strip().encode()) for k, v in fields],
        }
        response = {}

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            response.setdefault(message["type"], message)

        await app(scope, receive, send)
        start, body = response["http.response.start"], response["http.response.body"]["body"]
        lines = [f"HTTP/1.1 {start['status']} {'OK' if start['status'] == 200 else 'Too Many Requests'}"]
        lines += [f"{k.decode()}: {v.decode()}" for k, v in start["headers"]]
        lines += [f"content-length: {len(body)}", "connection: close", "", ""]
        writer.write("\r\n".join(lines).encode() + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


async def main() -> None:
    client = aioredis.Redis.from_url(os.environ["RATEKEEPER_REDIS_URL"])
    policy = AsyncRedisPolicy(client, CONFIG, prefix=os.environ.get("DEMO_PREFIX", "ratekeeper-demo:"))
    await serve(make_app(policy), int(sys.argv[1]) if len(sys.argv) > 1 else 0)


if __name__ == "__main__":
    asyncio.run(main())
