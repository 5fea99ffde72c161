"""RateLimitMiddleware in a real Starlette app, driven through httpx's ASGI transport."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import json
import re
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Awaitable, Callable, Generator, Optional, TypeVar, Union
from urllib.parse import unquote

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from ratekeeper import FixedWindow, KeyedLimiter, Policy, RateLimitError, RateLimitMemoryError, RateLimitTypeError, TokenBucket
from ratekeeper.asgi import RateLimitMiddleware, Scope, client_host, ip_key, request_fields

calls: list[str] = []
T = TypeVar("T")


def held() -> float:
    """A clock standing still, for windows under an hour: on the default
    ``time.monotonic`` a minute's window may end between two requests of a
    test (its windows are aligned to the machine's boot), which then finds
    a fresh window where it expects a spent one."""
    return 1000.0


async def hello(request: Request) -> PlainTextResponse:
    calls.append(request.url.path)
    return PlainTextResponse("hello", headers={"x-app": "yes"})


def make_app(limiter: Any, **options: Any) -> Starlette:
    calls.clear()
    middleware = [Middleware(RateLimitMiddleware, limiter=limiter, **options)]
    routes = [Route("/", hello, methods=["GET", "POST"]), Route("/health", hello)]
    return Starlette(routes=routes, middleware=middleware)


def get_all(
    app: Union[Starlette, RateLimitMiddleware], requests: list[dict[str, Any]], *, raise_errors: bool = True
) -> list[httpx.Response]:
    """Sends the requests in order through one client; returns the responses
    (with ``raise_errors=False``, a request that failed is Starlette's 500)."""

    async def main() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 1234), raise_app_exceptions=raise_errors)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [
                await client.request(r.get("method", "GET"), r.get("path", "/"), headers=r.get("headers"))
                for r in requests
            ]

    return asyncio.run(main())


def test_allowed_responses_carry_ratelimit_headers_and_denials_get_429() -> None:
    app = make_app(KeyedLimiter(FixedWindow(2, 3600, name="hourly")))
    first, second, third = get_all(app, [{}, {}, {}])
    assert (first.status_code, first.text, first.headers["x-app"]) == (200, "hello", "yes")
    assert first.headers["ratelimit-policy"] == '"hourly";q=2;w=3600'
    assert first.headers["ratelimit"].startswith('"hourly";r=1;t=')
    assert "retry-after" not in first.headers
    assert second.headers["ratelimit"].startswith('"hourly";r=0;t=')
    assert third.status_code == 429
    # Byte for byte what the JS helpers answer (middleware.test.cjs): the reason phrase alone.
    assert (third.content, third.headers["content-length"]) == (b"Too Many Requests", "17")
    assert third.headers["ratelimit-policy"] == '"hourly";q=2;w=3600'
    assert third.headers["ratelimit"].startswith('"hourly";r=0;t=')
    assert 0 < int(third.headers["retry-after"]) <= 3600
    assert third.headers["content-type"] == "text/plain; charset=utf-8"
    assert calls == ["/", "/"]  # the app never saw the denied request


def test_a_denied_head_request_gets_no_content() -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    middleware = RateLimitMiddleware(app, limiter=FixedWindow(1, 3600))

    async def sent(method: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []

        async def send(message: Any) -> None:
            messages.append(message)

        async def receive() -> Any:
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "method": method, "path": "/", "headers": [], "client": ("203.0.113.7", 1)}
        await middleware(scope, receive, send)
        return messages

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        await sent("GET")
        return await sent("HEAD"), await sent("GET")

    head, get = asyncio.run(main())
    assert head[0]["status"] == get[0]["status"] == 429
    assert head[1]["body"] == b"" and get[1]["body"] == b"Too Many Requests"
    assert dict(head[0]["headers"])[b"content-length"] == dict(get[0]["headers"])[b"content-length"]


def by_api_key(scope: Scope) -> Optional[str]:
    headers = dict(scope["headers"])
    key = headers.get(b"x-api-key")
    return key.decode() if key else None


def test_one_limiter_per_key() -> None:
    store = KeyedLimiter(TokenBucket(1, 1, 3600))
    app = make_app(store, key=by_api_key)
    alice, bob = {"headers": {"x-api-key": "alice"}}, {"headers": {"x-api-key": "bob"}}
    codes = [r.status_code for r in get_all(app, [alice, bob, alice, bob])]
    assert codes == [200, 200, 429, 429]
    assert len(store) == 2


def test_a_request_that_cannot_be_keyed_fails_and_is_charged_nothing() -> None:
    """``key`` returning None (a header the client left out) failed nothing:
    the request went through unlimited, so any client could skip the limit
    by leaving the header out. Now it is a server error, as in the JS
    helpers, and nothing is charged."""
    store = KeyedLimiter(FixedWindow(5, 3600, name="per-key"))
    policy = Policy()
    policy.add("global", FixedWindow(5, 3600))

    def fields(scope: Scope) -> Optional[dict[str, str]]:
        key = by_api_key(scope)
        return None if key is None else {"api_key": key}

    alice = {"headers": {"x-api-key": "alice"}}
    cases: list[tuple[Any, str, Any, str]] = [
        (store, "key", by_api_key, "per-key"),
        (policy, "fields", fields, "global"),
    ]
    for limiter, option, function, name in cases:
        app = make_app(limiter, **{option: function})
        refused, allowed = get_all(app, [{}, alice], raise_errors=False)
        assert refused.status_code == 500
        assert "ratelimit" not in refused.headers
        assert calls == ["/"]  # the app never saw the refused request
        assert allowed.headers["ratelimit"].startswith(f'"{name}";r=4;t=')  # nothing charged
        middleware = RateLimitMiddleware(app, limiter, **{option: function})
        refusal = f"^`{option}` returned None: a request that cannot be keyed"
        with pytest.raises(RateLimitTypeError, match=refusal) as raised:
            middleware.decide({"type": "http", "headers": []})
        assert raised.value.code == "invalid_type"


@pytest.mark.parametrize("kind", ["keyed", "policy"])
def test_a_client_of_unknown_address_is_refused_by_the_defaults(kind: str) -> None:
    """The default ``key`` and ``fields`` read the client's address: where the
    server gives none (a Unix socket's client), the request is refused as
    for a ``key`` returning None, as the JS helpers refuse it, charged
    nothing. It was counted under the key "" that all such requests shared."""
    limiter: Any = KeyedLimiter(FixedWindow(5, 3600)) if kind == "keyed" else Policy("5/hour", by=["client"])
    option = "key" if kind == "keyed" else "fields"

    async def main() -> httpx.Response:
        app = make_app(limiter)
        transport = httpx.ASGITransport(app=app, client=None, raise_app_exceptions=False)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get("/")

    refused = asyncio.run(main())
    assert refused.status_code == 500
    assert "ratelimit" not in refused.headers
    assert calls == []
    if kind == "keyed":
        assert len(limiter) == 0
    else:
        assert limiter.peek({"client": ""}, 0).remaining == 5
    middleware = RateLimitMiddleware(make_app(limiter), limiter)
    for scope in ({"type": "http", "method": "GET", "path": "/"}, {"type": "http", "client": ("", 0)}):
        with pytest.raises(RateLimitTypeError) as raised:
            middleware.decide(scope)
        # The JS helpers' words. Not "`key` returned None": the app passed no
        # `key`, and behind a proxy over a Unix socket every request fails so.
        assert str(raised.value) == (
            f"the client's address, read by the default `{option}`, is unknown (a Unix socket's client, say): "
            f"behind a proxy, let the server trust its forwarded address, or pass `{option}`; "
            "a request that cannot be keyed is refused, not let through unlimited"
        )
        assert raised.value.code == "invalid_type"
    # The same default, passed by name.
    default: dict[str, Any] = {option: client_host if kind == "keyed" else request_fields}
    with pytest.raises(RateLimitTypeError, match=r"^the client's address, read by the default"):
        RateLimitMiddleware(make_app(limiter), limiter, **default).decide({"type": "http"})


def test_skip_lets_a_request_through_undecided_and_uncharged() -> None:
    """``skip`` exempts requests (health checks), now that a key of None is
    refused: the app gets them without RateLimit headers, charged nothing,
    as the JS helpers' ``skip`` does."""
    store = KeyedLimiter(FixedWindow(1, 3600, name="per-key"))
    app = make_app(store, key=by_api_key, skip=lambda scope: scope["path"] == "/health")
    alice = {"headers": {"x-api-key": "alice"}}
    health = {"path": "/health", "headers": {"x-api-key": "alice"}}
    responses = get_all(app, [health, health, {"path": "/health"}, alice, alice])
    assert [r.status_code for r in responses] == [200, 200, 200, 200, 429]
    assert all("ratelimit" not in r.headers for r in responses[:3])
    assert responses[3].headers["ratelimit"].startswith('"per-key";r=0;t=')  # alice's one request was left
    assert calls == ["/health", "/health", "/health", "/"]


def test_skip_may_answer_numpy_bool() -> None:
    """NumPy's bool is a bool to ``skip``, as to every flag of the library."""
    numpy = pytest.importorskip("numpy")
    store = KeyedLimiter(FixedWindow(1, 3600, name="per-key"))
    app = make_app(store, key=by_api_key, skip=lambda scope: numpy.bool_(scope["path"] == "/health"))
    alice = {"headers": {"x-api-key": "alice"}}
    health = {"path": "/health", "headers": {"x-api-key": "alice"}}
    responses = get_all(app, [health, health, alice, alice])
    assert [r.status_code for r in responses] == [200, 200, 200, 429]


def test_skip_must_be_a_function_answering_a_bool() -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        raise AssertionError("not reached")

    store = KeyedLimiter(FixedWindow(1, 3600))
    with pytest.raises(RateLimitTypeError, match="^`skip` must be a function, not bool"):
        RateLimitMiddleware(app, store, skip=True)  # type: ignore[arg-type]
    middleware = RateLimitMiddleware(app, store, skip=lambda scope: "yes")  # type: ignore[arg-type,return-value]
    with pytest.raises(RateLimitTypeError, match="^`skip` must return a bool, not str") as raised:
        asyncio.run(middleware({"type": "http", "path": "/", "headers": []}, None, None))  # type: ignore[arg-type]
    assert raised.value.code == "invalid_type"
    assert len(store) == 0


def test_the_default_key_is_the_client_address() -> None:
    assert client_host({"type": "http", "client": ("198.51.100.1", 80)}) == "198.51.100.1"
    assert client_host({"type": "http"}) is None
    assert client_host({"type": "http", "client": None}) is None

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await PlainTextResponse("ok")(scope, receive, send)

    store = KeyedLimiter(TokenBucket(1, 1, 3600))
    middleware = RateLimitMiddleware(app, store)

    async def main() -> list[int]:
        transport = httpx.ASGITransport(app=middleware, client=("203.0.113.7", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [(await client.get("/")).status_code for _ in range(2)]

    assert asyncio.run(main()) == [200, 429]
    assert not store.peek("203.0.113.7", now=0).allowed
    assert store.peek("203.0.113.8", now=0).allowed


# The key of a client's address (ip_key, and the default key and fields,
# which key by it): an IPv6 client by its network, /56 unless `ipv6_subnet`
# says otherwise. The cases are the shared vectors of
# tests/vectors/server/ip_keys.json, written from ipaddress and read by the
# JS helpers' tests too (ip-key.test.cjs): a client has one key in both
# bindings. Each address was a key of its own, so that an IPv6 client, who
# may take a new address within its network at will, got a fresh limit with each.
SERVER_VECTORS = Path(__file__).resolve().parent / ".." / ".." / "tests" / "vectors" / "server"
IP_KEYS: list[dict[str, Any]] = json.loads((SERVER_VECTORS / "ip_keys.json").read_text(encoding="utf-8"))["scenarios"]


def test_the_shared_ip_key_vectors_are_all_there() -> None:
    index = json.loads((SERVER_VECTORS / "index.json").read_text(encoding="utf-8"))
    assert index == {"files": {"ip_keys.json": len(IP_KEYS)}}
    assert any("%" in case["address"] and case["key"] != case["address"] for case in IP_KEYS)
    assert any(case["address"].startswith("::ffff:") and ":" not in case["key"] for case in IP_KEYS)
    assert any(":" in case["address"] and case["key"] == case["address"] for case in IP_KEYS)


@pytest.mark.parametrize("case", IP_KEYS, ids=[case["name"] for case in IP_KEYS])
def test_ip_key_and_the_defaults_key_each_address_as_the_vectors_say(case: dict[str, Any]) -> None:
    address, subnet, key = case["address"], case["ipv6_subnet"], case["key"]
    assert ip_key(address, subnet) == key
    if subnet == 56:
        assert ip_key(address) == key
    if not address:
        return  # no address: the defaults refuse the request
    scope = {"type": "http", "client": (address, 1234), "method": "GET", "path": "/"}
    assert client_host(scope, ipv6_subnet=subnet) == key
    assert request_fields(scope, ipv6_subnet=subnet) == {"client": key, "method": "GET", "path": "/"}

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    store = KeyedLimiter(FixedWindow(5, 3600))
    policy = Policy("5/hour", by=["client"])
    RateLimitMiddleware(app, store, ipv6_subnet=subnet).decide(scope)
    RateLimitMiddleware(app, policy, ipv6_subnet=subnet).decide(scope)
    assert store.peek(key, 0).remaining == 4
    assert policy.peek({"client": key}, 0).remaining == 4


def test_the_default_ipv6_subnet_is_56() -> None:
    scope = {"type": "http", "client": ("2001:db8:1234:5678::1", 1)}
    assert ip_key("2001:db8:1234:5678::1") == "2001:db8:1234:5600::/56"
    assert client_host(scope) == "2001:db8:1234:5600::/56"
    fields = request_fields(scope)
    assert fields is not None and fields["client"] == "2001:db8:1234:5600::/56"
    # Shown as 56 in help() and signatures.
    for function in (ip_key, client_host, request_fields, RateLimitMiddleware):
        default = inspect.signature(function).parameters["ipv6_subnet"].default
        assert (default, repr(default)) == (56, "56")


@pytest.mark.parametrize(
    ("subnet", "error", "code", "message"),
    [
        (0, RateLimitError, "invalid_value", "`ipv6_subnet` must be a prefix length from 1 to 128, not 0"),
        (129, RateLimitError, "invalid_value", "`ipv6_subnet` must be a prefix length from 1 to 128, not 129"),
        (-56, RateLimitError, "invalid_value", "`ipv6_subnet` must be a prefix length from 1 to 128, not -56"),
        # A bool is no int here, as for `cost`.
        (True, RateLimitTypeError, "invalid_type", "`ipv6_subnet` must be an int or None, not bool"),
        (False, RateLimitTypeError, "invalid_type", "`ipv6_subnet` must be an int or None, not bool"),
        (56.0, RateLimitTypeError, "invalid_type", "`ipv6_subnet` must be an int or None, not float"),
        ("56", RateLimitTypeError, "invalid_type", "`ipv6_subnet` must be an int or None, not str"),
    ],
)
def test_a_bad_ipv6_subnet_is_refused(subnet: Any, error: type[RateLimitError], code: str, message: str) -> None:
    """With the JS helpers' errors for the same mistakes (ip-key.test.cjs)."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    scope = {"type": "http", "client": ("::1", 1)}
    for call in (
        lambda: ip_key("::1", subnet),
        lambda: client_host(scope, ipv6_subnet=subnet),
        lambda: request_fields(scope, ipv6_subnet=subnet),
        lambda: RateLimitMiddleware(app, KeyedLimiter(FixedWindow(1, 1)), ipv6_subnet=subnet),
        lambda: RateLimitMiddleware(app, Policy("1/second", by=["client"]), ipv6_subnet=subnet),
    ):
        with pytest.raises(error) as raised:
            call()
        assert type(raised.value) is error
        assert (str(raised.value), raised.value.code) == (message, code)


def test_ip_key_takes_a_str_and_any_int() -> None:
    with pytest.raises(RateLimitTypeError, match="^`address` must be a str, not bytes$") as raised:
        ip_key(b"::1")  # type: ignore[arg-type]
    assert raised.value.code == "invalid_type"
    assert ip_key("::1", 1) == "::/1"
    assert ip_key("::1", 128) == "::1/128"
    assert ip_key("::1", None) == "::1"
    numpy = pytest.importorskip("numpy")
    assert ip_key("::1", numpy.int64(64)) == "::/64"


def test_ipv6_subnet_where_no_default_reads_an_address_is_refused() -> None:
    """Beside a key or fields of one's own, or one limiter for all, it would be
    ignored: refused, with the JS helpers' words, as ``key`` beside a
    Policy is. ``client_host`` and ``request_fields`` passed by name are the
    defaults themselves, and take it."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    store = KeyedLimiter(FixedWindow(1, 3600))
    policy = Policy("1/hour", by=["client"])
    refusals: list[tuple[Any, dict[str, Any], str]] = [
        (store, {"key": by_api_key}, "`ipv6_subnet` is for the default `key`: with `key` of your own, apply ip_key(address, ipv6_subnet) in it"),
        (policy, {"fields": lambda scope: {"client": "c"}}, "`ipv6_subnet` is for the default `fields`: with `fields` of your own, apply ip_key(address, ipv6_subnet) in it"),
        (FixedWindow(1, 1), {}, "`ipv6_subnet` is for a KeyedLimiter or a Policy: one limiter that every request shares reads no address"),
    ]
    for limiter, options, message in refusals:
        for subnet in (56, 64, None):
            with pytest.raises(RateLimitTypeError) as raised:
                RateLimitMiddleware(app, limiter, ipv6_subnet=subnet, **options)
            assert (str(raised.value), raised.value.code) == (message, "invalid_type")
        RateLimitMiddleware(app, limiter, **options)
    scope = {"type": "http", "client": ("2001:db8:0:1::5", 1), "method": "GET", "path": "/"}
    RateLimitMiddleware(app, store, key=client_host, ipv6_subnet=64).decide(scope)
    RateLimitMiddleware(app, policy, fields=request_fields, ipv6_subnet=64).decide(scope)
    assert store.peek("2001:db8:0:1::/64", 0).remaining == 0
    assert policy.peek({"client": "2001:db8:0:1::/64"}, 0).remaining == 0
    # A key of one's own keys by ip_key itself.
    own = KeyedLimiter(FixedWindow(1, 3600))
    RateLimitMiddleware(app, own, key=lambda scope: ip_key(by_api_key(scope) or "", 48)).decide(
        {"type": "http", "headers": [(b"x-api-key", b"2001:db8:0:1::5")]}
    )
    assert own.peek("2001:db8::/48", 0).remaining == 0


def get_from(app: Any, addresses: list[str]) -> list[int]:
    """Sends one request from each of ``addresses`` in turn (the scope's client): the statuses."""

    async def main() -> list[int]:
        statuses = []
        for address in addresses:
            transport = httpx.ASGITransport(app=app, client=(address, 1234))
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                statuses.append((await client.get("/")).status_code)
        return statuses

    return asyncio.run(main())


def test_the_default_key_of_an_ipv6_client_is_its_slash_56() -> None:
    """Two addresses of one /56 share a limit; another /56 has its own. An
    IPv4 client of a server listening on ``::`` keys as its IPv4 address."""
    store = KeyedLimiter(FixedWindow(1, 3600, name="per-client"))
    app = make_app(store)
    siblings = ["2001:db8:1234:5601::1", "2001:db8:1234:56ff:abcd::2", "2001:DB8:1234:5600::3"]
    assert get_from(app, siblings) == [200, 429, 429]
    assert get_from(app, ["2001:db8:1234:5700::1", "::ffff:203.0.113.7", "203.0.113.7", "testclient"]) == [200, 200, 429, 200]
    assert store.peek("2001:db8:1234:5600::/56", 0).remaining == 0
    assert len(store) == 4  # the two /56, 203.0.113.7 and testclient
    # A policy's default fields: its client the same.
    policy = Policy("1/hour", by=["client"])
    assert get_from(make_app(policy), siblings) == [200, 429, 429]
    assert policy.peek({"client": "2001:db8:1234:5600::/56"}, 0).remaining == 0


@pytest.mark.parametrize(
    ("subnet", "statuses"),
    [
        (64, [200, 429, 200, 200]),
        (48, [200, 429, 429, 200]),
        # Each address whole (in canonical text: 2001:db8:0:1::0001 is 2001:db8:0:1::1).
        (None, [200, 429, 200, 200]),
    ],
)
def test_ipv6_subnet_sets_the_network_of_the_default_key(subnet: Optional[int], statuses: list[int]) -> None:
    store = KeyedLimiter(FixedWindow(1, 3600))
    app = make_app(store, ipv6_subnet=subnet)
    addresses = ["2001:db8:0:1::1", "2001:db8:0:1:0:0:0:0001", "2001:db8:0:2::1", "2001:db9::1"]
    if subnet is None:
        addresses[2] = "2001:db8:0:1::2"
    assert get_from(app, addresses) == statuses


def test_a_policy_per_client_and_route_and_global() -> None:
    """A Policy in a real Starlette app: per-client, per-client-and-route and
    whole-app limits, all or nothing, every limit in the headers."""
    policy = Policy()
    policy.add("per-client", FixedWindow(3, 3600), by=["client"])
    policy.add("per-route", FixedWindow(2, 3600), by=["client", "path"])
    policy.add("global", FixedWindow(4, 3600))
    app = make_app(policy)
    root, health = {"path": "/"}, {"path": "/health"}
    responses = get_all(app, [root, root, root, health, health])
    assert [r.status_code for r in responses] == [200, 200, 429, 200, 429]
    assert calls == ["/", "/", "/health"]
    first, _, denied_route, _, denied_client = responses
    assert first.headers["ratelimit-policy"] == (
        '"per-client";q=3;w=3600, "per-route";q=2;w=3600, "global";q=4;w=3600'
    )
    assert first.headers["ratelimit"].startswith('"per-client";r=2;t=')
    assert ', "per-route";r=1;t=' in first.headers["ratelimit"]
    assert ', "global";r=3;t=' in first.headers["ratelimit"]
    assert "retry-after" not in first.headers
    # The third "/" is over its route's limit; nothing was consumed anywhere.
    assert '"per-route";r=0;t=' in denied_route.headers["ratelimit"]
    assert '"per-client";r=1;t=' in denied_route.headers["ratelimit"]
    assert 0 < int(denied_route.headers["retry-after"]) <= 3600
    # Then the client's own limit (3) is spent: "/health" is denied by it.
    assert '"per-client";r=0;t=' in denied_client.headers["ratelimit"]
    assert '"global";r=1;t=' in denied_client.headers["ratelimit"]
    decision = policy.peek({"client": "203.0.113.7", "path": "/other"}, now=0)
    assert (decision.allowed, decision.denied_by) == (False, "per-client")


def test_a_policy_with_its_own_fields() -> None:
    policy = Policy()
    policy.add("per-key", TokenBucket(1, 1, 3600), by=["api_key"])

    def fields(scope: Scope) -> Optional[dict[str, str]]:
        key = by_api_key(scope)
        return None if key is None else {"api_key": key}

    app = make_app(policy, fields=fields, cost=1)
    alice, bob = {"headers": {"x-api-key": "alice"}}, {"headers": {"x-api-key": "bob"}}
    codes = [r.status_code for r in get_all(app, [alice, alice, bob])]
    assert codes == [200, 429, 200]


def test_fields_lacking_a_field_the_policy_is_keyed_by_fail_with_try_acquires_error() -> None:
    """The error ``policy.try_acquire(request)`` raises for such a request, a
    RateLimitError (``invalid_value``), as the JS helpers fail it with
    tryAcquire's RangeError (``invalid_value``): the server answers 500."""
    policy = Policy("5/hour", by=["user"])
    with pytest.raises(RateLimitError) as in_process:
        policy.try_acquire({"client": "203.0.113.7"})
    app = make_app(policy, fields=lambda scope: {"client": client_host(scope)})
    with pytest.raises(RateLimitError) as raised:
        get_all(app, [{}])
    assert type(raised.value) is type(in_process.value) is RateLimitError
    assert raised.value.code == in_process.value.code == "invalid_value"
    assert str(raised.value) == str(in_process.value)
    assert str(raised.value) == "`request` lacks the field 'user' that limit '5/hour' is keyed by"
    assert calls == []


@pytest.mark.parametrize("as_policy", [False, True])
def test_a_full_store_that_refuses_new_keys_answers_503(as_policy: bool) -> None:
    store = KeyedLimiter(FixedWindow(5, 3600), max_keys=1, eviction="refuse")
    limiter: Any = store
    options: dict[str, Any] = {"key": by_api_key}
    if as_policy:
        limiter = Policy()
        limiter.add("per-key", store, by=["key"])
        options = {"fields": lambda scope: {"key": by_api_key(scope) or ""}}
    app = make_app(limiter, **options)
    alice, bob = {"headers": {"x-api-key": "alice"}}, {"headers": {"x-api-key": "bob"}}
    held, refused, again = get_all(app, [alice, bob, alice])
    assert (held.status_code, again.status_code) == (200, 200)
    assert (refused.status_code, refused.content) == (503, b"Service Unavailable")
    assert refused.headers["content-length"] == "19"
    assert refused.headers["content-type"] == "text/plain; charset=utf-8"
    assert "ratelimit" not in refused.headers and "retry-after" not in refused.headers
    assert calls == ["/", "/"]  # the app never saw the refused request


def test_stacked_middlewares_list_every_item_the_outer_one_first() -> None:
    """Two in a row, as an app limits every route and then one of them: each
    response lists both limits in the order the request meets them, outer
    first, as the JS helpers do and a policy lists its own. The outer one's
    items came after the inner one's."""
    outer = KeyedLimiter(FixedWindow(100, 60, name="global", clock=held))
    inner = KeyedLimiter(FixedWindow(1, 60, name="login", clock=held))
    app = Starlette(
        routes=[Route("/", hello)],
        middleware=[
            Middleware(RateLimitMiddleware, limiter=outer, key=lambda scope: "everyone"),
            Middleware(RateLimitMiddleware, limiter=inner, key=by_api_key),
        ],
    )
    alice = {"headers": {"x-api-key": "alice"}}
    first, denied = get_all(app, [alice, alice])
    assert first.status_code == 200
    assert first.headers["ratelimit-policy"] == '"global";q=100;w=60, "login";q=1;w=60'
    assert re.fullmatch(r'"global";r=99;t=\d+, "login";r=0;t=\d+', first.headers["ratelimit"])
    assert "retry-after" not in first.headers
    assert denied.status_code == 429
    assert denied.headers["ratelimit-policy"] == '"global";q=100;w=60, "login";q=1;w=60'
    assert re.fullmatch(r'"global";r=98;t=\d+, "login";r=0;t=\d+', denied.headers["ratelimit"])
    assert 0 < int(denied.headers["retry-after"]) <= 60
    assert len(denied.headers.get_list("retry-after")) == 1
    # One field line each, the items joined, as the JS helpers send them: a
    # client that reads one line of a field (Go's Header.Get) saw only the
    # outer limit when each middleware sent a line of its own.
    for response in (first, denied):
        raw = [name for name, _ in response.headers.raw]
        assert (raw.count(b"ratelimit-policy"), raw.count(b"ratelimit")) == (1, 1)


def test_items_join_the_apps_own_line_of_a_field() -> None:
    """An app that sends RateLimit fields of its own (a route deciding its
    own limit with ``decide``) gets the middleware's items in front of its
    own, in its line of each field: one line, as the JS helpers join an
    earlier helper's items and theirs."""

    async def own(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello", headers={"RateLimit-Policy": '"route";q=1;w=1', "RateLimit": '"route";r=0;t=1'})

    app = Starlette(
        routes=[Route("/", own)],
        middleware=[Middleware(RateLimitMiddleware, limiter=KeyedLimiter(FixedWindow(5, 60, name="global", clock=held)))],
    )
    (response,) = get_all(app, [{}])
    assert response.headers.get_list("ratelimit-policy") == ['"global";q=5;w=60, "route";q=1;w=1']
    assert re.fullmatch(r'"global";r=4;t=\d+, "route";r=0;t=1', response.headers["ratelimit"])
    assert len(response.headers.get_list("ratelimit")) == 1


def raw_app(headers: list[tuple[bytes, bytes]]) -> Callable[[Scope, Any, Any], Awaitable[None]]:
    """A plain ASGI app answering "ok" with ``headers`` as they are given."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


def test_items_join_a_line_of_any_case_and_take_the_place_of_an_empty_one() -> None:
    """Field names are case-insensitive (an ASGI app may send them as it
    writes them): the middleware's items join the app's ``RateLimit-Policy``
    line, not a line of their own beside it. An empty line of the app's is
    replaced: joined, it would leave a dangling ", " that a structured-field
    parser refuses, dropping the whole field."""
    app = raw_app([(b"RateLimit-Policy", b'"route";q=1;w=1'), (b"RateLimit", b" ")])
    (response,) = get_all(RateLimitMiddleware(app, KeyedLimiter(FixedWindow(5, 60, name="global", clock=held))), [{}])
    assert response.headers.get_list("ratelimit-policy") == ['"global";q=5;w=60, "route";q=1;w=1']
    assert re.fullmatch(r'"global";r=4;t=\d+', response.headers["ratelimit"])
    names = [name.lower() for name, _ in response.headers.raw]
    assert (names.count(b"ratelimit-policy"), names.count(b"ratelimit")) == (1, 1)


def test_the_apps_own_messages_are_left_as_they_are() -> None:
    """The headers go on a copy of the app's start message: an app that
    sends one message it keeps (a constant) would otherwise find the last
    request's items in it, and each response would list every earlier
    request's as well."""
    headers = [(b"content-type", b"text/plain")]
    start = {"type": "http.response.start", "status": 200, "headers": headers}

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send(start)
        await send({"type": "http.response.body", "body": b"ok"})

    middleware = RateLimitMiddleware(app, KeyedLimiter(FixedWindow(5, 60, name="global", clock=held)))
    first, second = get_all(middleware, [{}, {}])
    assert re.fullmatch(r'"global";r=4;t=\d+', first.headers["ratelimit"])
    assert re.fullmatch(r'"global";r=3;t=\d+', second.headers["ratelimit"])
    assert start == {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
    assert start["headers"] is headers


def test_other_errors_of_the_limiter_propagate() -> None:
    app = make_app(KeyedLimiter(FixedWindow(5, 3600)), key=lambda scope: 1.5)
    with pytest.raises(TypeError):
        get_all(app, [{}])


def test_request_fields() -> None:
    """The JS helpers' default fields are the same (middleware.test.cjs): the
    path as the scope has it, percent-decoded and without its query."""
    scope = {"type": "http", "client": ("198.51.100.1", 80), "method": "GET", "path": "/café", "query_string": b"a=1"}
    assert request_fields(scope) == {"client": "198.51.100.1", "method": "GET", "path": "/café"}
    # No address: no request, refused as the default key refuses it.
    assert request_fields({"type": "http", "method": "GET", "path": "/a"}) is None


def _path_field(raw_path: Optional[bytes], path: str, **scope: Any) -> Any:
    fields = request_fields({"type": "http", "client": ("198.51.100.1", 80), "method": "GET", "path": path, "raw_path": raw_path, **scope})
    assert fields is not None
    return fields["path"]


def test_request_fields_path_is_the_js_helpers_path_of_the_target() -> None:
    """As uvicorn's h11 parser builds a scope (``raw_path``: the target up to
    its ``?``; ``path``: that, percent-decoded), ``path`` kept a fragment and
    the scheme and host of an absolute-form target: each a new key, a fresh
    limit, where the JS helpers (server.cjs, ``pathOf``) and Starlette's
    routing see one path."""
    cases = {
        "/caf%C3%A9": "/café",
        "/caf%C3%A9#1": "/café",
        "/caf%C3%A9#x%23": "/café",
        "http://elsewhere.example/caf%C3%A9": "/café",
        "HTTP://h.example:80/p%20q": "/p q",
        "http://elsewhere.example": "/",
        "http://elsewhere.example#top": "/",
        # An encoded '#' is a character of the path; a scheme that is encoded is no scheme.
        "/caf%C3%A9%231": "/café#1",
        "http%3A//host/a": "http://host/a",
        "/a/http://b/c": "/a/http://b/c",
        "*": "*",
        "/%ff": "/\ufffd",
    }
    for raw, expected in cases.items():
        assert _path_field(raw.encode(), unquote(raw)) == expected, raw
    # uvicorn's root_path is in front of both, and stays.
    assert _path_field(b"/api/a#b", "/api/a#b", root_path="/api") == "/api/a"
    # A path an outer middleware rewrote (its raw_path stale), or no raw_path: the scope's path.
    assert _path_field(b"/v1/a#b", "/a#b") == "/a#b"
    assert _path_field(None, "/a") == "/a"
    assert _path_field(None, "") == ""


@contextlib.contextmanager
def _uvicorn(app: Any, http: str) -> Generator[int, None, None]:
    """A real uvicorn server with the ``http`` parser on a free port of 127.0.0.1, in a thread."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, http=http, lifespan="off", log_level="critical"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(1000):
            if server.started:
                break
            time.sleep(0.01)
        assert server.started
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _raw_get(port: int, target: str) -> int:
    """The status of ``GET target`` sent as it is (httpx would resolve an
    absolute-form target, and never sends a fragment)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET " + target.encode() + b" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_request_fields_path_under_uvicorn_is_the_routed_path(http: str) -> None:
    """The JS helpers' test of the same name (middleware.test.cjs), under a
    real uvicorn: with h11, a fragment or an absolute-form target made a new
    key per fragment or host named, a fresh limit for a route each time."""
    policy = Policy.from_rates("1/minute", by=["client", "method", "path"])

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    with _uvicorn(RateLimitMiddleware(app, limiter=policy), http) as port:
        assert _raw_get(port, "/caf%C3%A9?page=1") == 404
        assert _raw_get(port, "/caf%C3%A9?page=2") == 429
        for target in ["http://elsewhere.example/caf%C3%A9", "/caf%C3%A9#1", "/caf%C3%A9#2?page=3"]:
            assert _raw_get(port, target) == 429, target
        assert _raw_get(port, "/") == 404
        for target in ["http://elsewhere.example", "http://elsewhere.example?page=2"]:
            # httptools refuses an absolute-form target without a path itself.
            assert _raw_get(port, target) == (429 if http == "h11" else 400), target
        # An encoded '#' is a character of the path: another path.
        assert _raw_get(port, "/caf%C3%A9%231") == 404
    request = {"client": "127.0.0.1", "method": "GET", "path": "/café"}
    # The keys taken: the paths routed, and no other.
    for held in ["/café", "/", "/café#1"]:
        assert not policy.peek({**request, "path": held}).allowed, held
    for stray in ["/café#2", "http://elsewhere.example/café", "http://elsewhere.example", ""]:
        assert policy.peek({**request, "path": stray}).allowed, stray


def test_one_shared_limiter_and_its_cost() -> None:
    shared = TokenBucket(5, 1, 3600)
    app = make_app(shared, cost=2)
    codes = [r.status_code for r in get_all(app, [{}, {}, {}])]
    assert codes == [200, 200, 429]
    assert shared.peek(0).remaining == 1


def test_lifespan_and_other_scopes_pass_through() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    # A limit of one: were a WebSocket handshake limited (and charged) as a
    # request is, the second would be answered 429.
    limiter = FixedWindow(1, 3600)
    middleware = RateLimitMiddleware(app, limiter)

    async def receive() -> dict[str, Any]:
        return {}

    async def send(message: Any) -> None:
        raise AssertionError("nothing to send")

    for kind in ("lifespan", "websocket", "websocket", "lifespan"):
        asyncio.run(middleware({"type": kind}, receive, send))
    assert seen == ["lifespan", "websocket", "websocket", "lifespan"]
    assert limiter.peek(0).remaining == 1


SHARED = (
    "one limiter that every request shares takes neither `key` nor `fields` "
    "(pass KeyedLimiter(limiter) for one per key)"
)


@pytest.mark.parametrize(
    ("limiter", "options", "message"),
    [
        (42, {}, "`limiter` must be a ratekeeper KeyedLimiter, Policy or limiter"),
        (lambda: FixedWindow(1, 1), {}, "`limiter` must be a ratekeeper KeyedLimiter, Policy or limiter"),
        # An option of another kind of limiter would be ignored, or read
        # otherwise than meant: refused, with the JS helpers' messages.
        (FixedWindow(1, 1), {"key": client_host}, f"`key` is for a KeyedLimiter: {SHARED}"),
        (FixedWindow(1, 1), {"fields": request_fields}, f"`fields` is for a Policy: {SHARED}"),
        # 0.1 read a policy's request from `key`.
        (Policy("1/second"), {"key": request_fields}, "`key` is for a KeyedLimiter: a Policy takes `fields`"),
        (KeyedLimiter(FixedWindow(1, 1)), {"fields": request_fields}, "`fields` is for a Policy: a KeyedLimiter takes `key`"),
        (Policy("1/second"), {"key": "x-api-key"}, "`key` is for a KeyedLimiter: a Policy takes `fields`"),
        (KeyedLimiter(FixedWindow(1, 1)), {"key": "x-api-key"}, "`key` must be a function, not str"),
        (Policy("1/second"), {"fields": {"client": "c"}}, "`fields` must be a function, not dict"),
    ],
)
def test_bad_configuration(limiter: Any, options: dict[str, Any], message: str) -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    with pytest.raises(RateLimitTypeError) as raised:
        RateLimitMiddleware(app, limiter, **options)
    assert str(raised.value) == message
    assert raised.value.code == "invalid_type"


def test_the_middleware_needs_no_redis_py() -> None:
    """It takes the limiters of ratekeeper.redis, which needs redis-py, an
    optional dependency: it tells them apart without importing that module,
    so an app without redis-py uses it as before (tests/redis runs it with
    them)."""
    program = (
        "import sys\n"
        "sys.modules['redis'] = None  # as if not installed\n"
        "import ratekeeper, ratekeeper.asgi\n"
        "async def app(scope, receive, send): pass\n"
        "ratekeeper.asgi.RateLimitMiddleware(app, ratekeeper.KeyedLimiter(ratekeeper.Gcra(1, 1.0)))\n"
        "try:\n"
        "    ratekeeper.asgi.RateLimitMiddleware(app, 42)\n"
        "except ratekeeper.RateLimitTypeError as error:\n"
        "    print(error)\n"
        "print(sorted(name for name in sys.modules if name.startswith('ratekeeper.redis')))\n"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout == "`limiter` must be a ratekeeper KeyedLimiter, Policy or limiter\n[]\n"


def test_a_policy_keyed_by_fields_the_default_request_lacks_is_refused_at_once() -> None:
    """With the error each request's ``try_acquire`` would raise (a
    RateLimitError, ``invalid_value``), naming ``fields``, as the JS helpers
    throw tryAcquire's RangeError (``invalid_value``)."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    policy = Policy("1/second", by=["user"])
    with pytest.raises(RateLimitError) as raised:
        RateLimitMiddleware(app, policy)
    assert str(raised.value) == (
        "`fields` must be given: limit '1/second' of `limiter` is keyed by 'user', "
        "which the default fields (client, method, path) lack"
    )
    assert type(raised.value) is RateLimitError and raised.value.code == "invalid_value"
    # With fields of its own, the request's fields are the caller's business.
    RateLimitMiddleware(app, policy, fields=lambda scope: {"user": "u"})
    RateLimitMiddleware(app, Policy("1/second", by=["client", "path"]))


@pytest.mark.parametrize(
    ("cost", "error", "code"),
    [
        ("1", RateLimitTypeError, "invalid_type"),
        (True, RateLimitTypeError, "invalid_type"),
        (-1, RateLimitError, "invalid_value"),
        (3, RateLimitError, "cost_exceeds_limit"),
        # No call takes it (as a call says it), whatever the limit: an empty
        # policy, which has none, took it here and failed every request.
        (2**64, RateLimitError, "invalid_value"),
    ],
)
def test_a_bad_cost_is_refused_at_once(cost: Any, error: type[RateLimitError], code: str) -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    policy = Policy({"limits": [{"name": "a", "algorithm": "fixed_window", "rate": "2/second"}]})
    limiters: list[Any] = [FixedWindow(2, 1), KeyedLimiter(FixedWindow(2, 1)), policy]
    if code != "cost_exceeds_limit":
        limiters.append(Policy())  # no limits: any cost a call takes is within them
    for limiter in limiters:
        with pytest.raises(error, match="`cost`") as raised:
            RateLimitMiddleware(app, limiter, cost=cost)
        assert raised.value.code == code


def by_method(scope: Scope) -> int:
    return 2 if scope["method"] == "POST" else 1


@pytest.mark.parametrize("kind", ["keyed", "policy", "limiter"])
def test_a_cost_function_charges_each_request_its_cost(kind: str) -> None:
    """``cost`` may be a function of the scope, as the JS helpers' ``cost(request)``:
    it was an int only, the same for every request."""
    options: dict[str, Any] = {"cost": by_method}
    limiter: Any
    if kind == "keyed":
        limiter = KeyedLimiter(FixedWindow(3, 3600, name="per-key"))
        options["key"] = by_api_key
    elif kind == "policy":
        limiter = Policy()
        limiter.add("per-key", FixedWindow(3, 3600), by=["api_key"])
        options["fields"] = lambda scope: {"api_key": by_api_key(scope) or ""}
    else:
        limiter = FixedWindow(3, 3600, name="per-key")
    app = make_app(limiter, **options)
    post, get = {"method": "POST", "headers": {"x-api-key": "alice"}}, {"headers": {"x-api-key": "alice"}}
    responses = get_all(app, [post, get, post, get])
    assert [r.status_code for r in responses] == [200, 200, 429, 429]
    assert responses[0].headers["ratelimit"].startswith('"per-key";r=1;t=')
    assert responses[1].headers["ratelimit"].startswith('"per-key";r=0;t=')
    assert calls == ["/", "/"]


@pytest.mark.parametrize(
    ("answer", "error", "code", "message"),
    [
        (None, RateLimitTypeError, "invalid_type", "`cost` must return an int, not NoneType"),
        ("2", RateLimitTypeError, "invalid_type", "`cost` must return an int, not str"),
        (1.0, RateLimitTypeError, "invalid_type", "`cost` must return an int, not float"),
        (True, RateLimitTypeError, "invalid_type", "`cost` must return an int, not bool"),
        (-1, RateLimitError, "invalid_value", "`cost` must not be negative"),
        (6, RateLimitError, "cost_exceeds_limit", "`cost` 6 exceeds the limit 5"),
    ],
)
def test_a_cost_function_answering_no_cost_fails_the_request_and_charges_nothing(
    answer: Any, error: type[RateLimitError], code: str, message: str
) -> None:
    """As the JS helpers refuse a cost function's bad answer (a 500, naming
    ``cost``): ``None`` is no default 1, and nothing is charged."""
    store = KeyedLimiter(FixedWindow(5, 3600, name="per-key"))
    app = make_app(store, key=by_api_key, cost=lambda scope: answer if scope["method"] == "POST" else 1)
    alice = {"headers": {"x-api-key": "alice"}}
    refused, allowed = get_all(app, [{**alice, "method": "POST"}, alice], raise_errors=False)
    assert refused.status_code == 500
    assert "ratelimit" not in refused.headers
    assert allowed.headers["ratelimit"].startswith('"per-key";r=4;t=')  # nothing charged
    assert calls == ["/"]
    middleware = RateLimitMiddleware(app, store, key=by_api_key, cost=lambda scope: answer)
    with pytest.raises(error, match=f"^{re.escape(message)}") as raised:
        middleware.decide({"type": "http", "method": "POST", "headers": [(b"x-api-key", b"bob")]})
    assert raised.value.code == code
    assert store.peek("bob", 0).remaining == 5


def test_a_cost_is_an_int_or_a_function() -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    for cost in ("1", 1.0, None):
        refused = f"^`cost` must be an int or a function, not {type(cost).__name__}"
        with pytest.raises(RateLimitTypeError, match=refused):
            RateLimitMiddleware(app, FixedWindow(2, 1), cost=cost)  # type: ignore[arg-type]


def test_a_cost_may_be_any_int_of_index() -> None:
    class Int:
        def __index__(self) -> int:
            return 2

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    assert RateLimitMiddleware(app, FixedWindow(2, 1), cost=Int())._cost == 2  # type: ignore[arg-type]


class Ready:
    """An awaitable that is no coroutine (as a Future or a Task is not),
    suspending once before its value, as a lookup in a store would."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, Any]:
        yield from asyncio.sleep(0).__await__()
        return self.value


def as_coroutine_function(function: Callable[[Scope], T]) -> Callable[[Scope], Awaitable[T]]:
    async def answer(scope: Scope) -> T:
        await asyncio.sleep(0)  # a real suspension, as a session lookup's
        return function(scope)

    return answer


def as_awaitable(function: Callable[[Scope], T]) -> Callable[[Scope], Awaitable[T]]:
    return lambda scope: Ready(function(scope))


def as_is(function: Callable[[Scope], T]) -> Callable[[Scope], T]:
    return function


WRAPS = {"sync": as_is, "async def": as_coroutine_function, "awaitable": as_awaitable}


@pytest.mark.parametrize("how", list(WRAPS))
@pytest.mark.parametrize("kind", ["keyed", "policy"])
def test_key_fields_skip_and_cost_may_answer_through_awaitables(kind: str, how: str) -> None:
    """As the JS helpers' functions may return promises, the middleware's may
    be coroutine functions or return awaitables (a key looked up in a session
    store): each answer is awaited, then decided as a plain one. A coroutine
    was taken for the key itself (a TypeError, the server's 500)."""
    wrap = WRAPS[how]
    limiter: Any
    option = "key" if kind == "keyed" else "fields"
    if kind == "keyed":
        limiter = KeyedLimiter(FixedWindow(3, 3600, name="per-key"))
        key: Callable[[Scope], Any] = by_api_key
    else:
        limiter = Policy()
        limiter.add("per-key", FixedWindow(3, 3600), by=["api_key"])

        def key(scope: Scope) -> Optional[dict[str, str]]:
            api_key = by_api_key(scope)
            return None if api_key is None else {"api_key": api_key}

    app = make_app(
        limiter,
        **{option: wrap(key)},
        cost=wrap(by_method),
        skip=wrap(lambda scope: scope["path"] == "/health"),
    )
    alice = {"headers": {"x-api-key": "alice"}}
    post = {**alice, "method": "POST"}
    health = {"path": "/health"}
    responses = get_all(app, [health, post, alice, post, alice, {}, health], raise_errors=False)
    assert [r.status_code for r in responses] == [200, 200, 200, 429, 429, 500, 200]
    assert "ratelimit" not in responses[0].headers  # skipped, no key asked
    assert responses[1].headers["ratelimit"].startswith('"per-key";r=1;t=')  # POST costs 2
    assert responses[2].headers["ratelimit"].startswith('"per-key";r=0;t=')
    assert "ratelimit" not in responses[5].headers  # no key: refused, not let through
    assert calls == ["/health", "/", "/", "/health"]


@pytest.mark.parametrize("how", ["async def", "awaitable"])
@pytest.mark.parametrize(
    ("option", "answer", "message"),
    [
        ("key", None, "`key` returned None: a request that cannot be keyed is refused"),
        ("skip", "yes", "`skip` must return a bool, not str"),
        ("cost", None, "`cost` must return an int, not NoneType"),
        ("cost", "2", "`cost` must return an int, not str"),
    ],
)
def test_an_awaited_answer_is_checked_as_a_plain_one(option: str, answer: Any, message: str, how: str) -> None:
    """The request fails (500, RateLimitTypeError naming the function),
    charging nothing, as for the same answer given at once."""
    store = KeyedLimiter(FixedWindow(5, 3600, name="per-key"))
    options: dict[str, Any] = {"key": by_api_key, option: WRAPS[how](lambda scope: answer)}
    app = make_app(store, **options)
    refused = get_all(app, [{"headers": {"x-api-key": "alice"}}], raise_errors=False)[0]
    assert refused.status_code == 500
    assert "ratelimit" not in refused.headers
    assert calls == []
    assert store.peek("alice", 0).remaining == 5  # nothing charged
    middleware = RateLimitMiddleware(app, store, **options)
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"x-api-key", b"alice")]}
    with pytest.raises(RateLimitTypeError, match=f"^{re.escape(message)}") as raised:
        asyncio.run(middleware(scope, None, None))  # type: ignore[arg-type]
    assert raised.value.code == "invalid_type"
    assert store.peek("alice", 0).remaining == 5


def test_decide_async_awaits_what_decide_cannot() -> None:
    """``decide`` is sync: an awaitable key or cost is refused, naming it, and
    closed (no "never awaited" warning); ``decide_async`` awaits it."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    store = KeyedLimiter(FixedWindow(5, 3600))
    scope = {"type": "http", "method": "POST", "headers": [(b"x-api-key", b"alice")]}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"key": as_coroutine_function(by_api_key)}, "key"),
        ({"key": by_api_key, "cost": as_coroutine_function(by_method)}, "cost"),
    ]
    for options, name in cases:
        middleware = RateLimitMiddleware(app, store, **options)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            refused = f"^`{name}` returned an awaitable, which decide\\(\\) cannot await"
            with pytest.raises(RateLimitTypeError, match=refused):
                middleware.decide(scope)
            gc.collect()
        assert [str(w.message) for w in caught] == []
        assert store.peek("alice", 0).remaining == 5
    assert asyncio.run(middleware.decide_async(scope)).remaining == 3
    skipping = RateLimitMiddleware(app, store, key=by_api_key, skip=as_coroutine_function(lambda scope: True))
    with pytest.raises(RateLimitTypeError, match="^`skip` returned an awaitable, which skips\\(\\) cannot await"):
        skipping.skips(scope)


def test_sync_functions_decide_without_suspending() -> None:
    """Plain functions keep the request free of awaits: the middleware runs
    to the app's answer in one step of its coroutine."""
    sent: list[Any] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message: Any) -> None:
        sent.append(message["type"])

    store = KeyedLimiter(FixedWindow(5, 3600, name="per-key"))
    middleware = RateLimitMiddleware(app, store, key=by_api_key, cost=by_method, skip=lambda scope: False)
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"x-api-key", b"a")]}
    running = middleware(scope, None, send)  # type: ignore[arg-type]
    with pytest.raises(StopIteration):
        running.send(None)
    assert sent == ["http.response.start"]
    assert store.peek("a", 0).remaining == 4


def test_a_store_out_of_memory_answers_503() -> None:
    """A store that could not grow for the request's key (``out_of_memory``,
    which a flood of new keys brings: see test_out_of_memory.py) is answered
    as a full one is, 503 without RateLimit headers, not 500. Raised here by
    a store of the middleware's kinds whose ``try_acquire`` raises it."""
    import redis.asyncio

    from ratekeeper.redis import AsyncRedisLimiter

    class OutOfMemory(AsyncRedisLimiter):
        async def try_acquire(self, key: Any, cost: int = 1, now: Any = None) -> Any:
            raise RateLimitMemoryError("out of memory: the store could not grow for this request, which changed nothing", "out_of_memory")

    app = make_app(OutOfMemory(redis.asyncio.Redis(), FixedWindow(5, 3600)), key=by_api_key)
    (refused,) = get_all(app, [{"headers": {"x-api-key": "alice"}}])
    assert (refused.status_code, refused.content) == (503, b"Service Unavailable")
    assert "ratelimit" not in refused.headers and "retry-after" not in refused.headers
    assert calls == []
