"""Fixtures of the Redis tests (imported by each module: a conftest.py here
would clash with tests/conftest.py): a real server named by RATEKEEPER_REDIS_URL.

The normal Python suite skips these tests when no server is given;
``scripts/redis.sh test`` starts one (and a 3-node cluster) and fails if any
test is skipped.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

import ratekeeper.redis._async

URL = os.environ.get("RATEKEEPER_REDIS_URL")
CLUSTER_URL = os.environ.get("RATEKEEPER_REDIS_CLUSTER_URL")


@pytest.fixture
def url() -> str:
    """The server's URL; the test is skipped without one."""
    if not URL:
        pytest.skip("no Redis server: set RATEKEEPER_REDIS_URL (scripts/redis.sh test does)")
    return URL


@pytest.fixture
def client(url: str) -> Iterator[redis.Redis]:
    """A sync client on a flushed database."""
    r = redis.Redis.from_url(url)
    r.flushdb()
    yield r
    r.close()


@pytest.fixture
def cluster_url() -> str:
    if not CLUSTER_URL:
        pytest.skip("no Redis Cluster: set RATEKEEPER_REDIS_CLUSTER_URL (scripts/redis.sh test does)")
    return CLUSTER_URL


async def given_back() -> None:
    """Waits until the tasks that the running loop runs give-backs (and
    batches) in, which nobody awaits, are done: a cancelled call raises at
    once, its give-back on its way (once Redis answers, for a call in flight)."""
    loop = asyncio.get_running_loop()
    while True:
        under_way = [task for task in list(ratekeeper.redis._async._TASKS) if task.get_loop() is loop and not task.done()]
        if not under_way:
            return
        await asyncio.wait(under_way)


class Server:
    """A redis-server of the test's own, on a free port, stopped and restarted by its pid."""

    def __init__(self, directory: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        self.process = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", self.directory],
            stdout=subprocess.DEVNULL,
        )
        probe = redis.Redis(port=self.port)
        for _ in range(200):
            try:
                probe.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        probe.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def own_server(url: str, tmp_path: object) -> Iterator[Server]:
    """A server this test may stop and restart (needs a server to be given, like the rest)."""
    server = Server(str(tmp_path))
    server.start()
    yield server
    server.stop()
