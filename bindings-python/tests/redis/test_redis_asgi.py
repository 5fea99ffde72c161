"""RateLimitMiddleware over the asyncio stores of ratekeeper.redis, in a real
Starlette app driven through httpx's ASGI transport, against a real server:
each answer is the one the in-process KeyedLimiter or Policy of the same
configuration gives; with the server down, the one of the store's on_error."""

from __future__ import annotations

import asyncio
import functools
import uuid
from typing import Any, Callable, Optional

import httpx
import pytest
import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis_fixtures import url
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import ratekeeper
from ratekeeper import FixedWindow, Gcra, KeyedLimiter, Limiter, Policy, RateLimitError, RateLimitTypeError, TokenBucket
from ratekeeper.asgi import RateLimitMiddleware, Scope
from ratekeeper.redis import AsyncRedisLimiter, AsyncRedisPolicy, RedisDecision, RedisLimiter, RedisPolicy, ScriptError

# A limiter for the middleware, built on a redis.asyncio client of the
# test's loop (a client belongs to the loop it first ran on), or in-process.
Build = Callable[[redis.asyncio.Redis], Any]
# Makes such a client.
Connect = Callable[[], redis.asyncio.Redis]

ASYNC_NO_RETRY = AsyncRetry(NoBackoff(), 0)
# Two limits, one keyed by a field the other is not: the request's
# fields from the default (client, method, path).
POLICY = {
    "limits": [
        {"name": "per-client", "algorithm": "gcra", "rate": "3/hour", "by": ["client"]},
        {"name": "per-route", "algorithm": "token_bucket", "rate": "2/hour", "by": ["client", "path"]},
    ]
}
# Both sides decide at one instant, on a clock of the test's own: every
# header is then exact, however long a request takes.
T0 = 2_000_000_000.0


def frozen() -> float:
    return T0


ALICE: dict[str, Any] = {"headers": {"x-api-key": "alice"}}
BOB: dict[str, Any] = {"headers": {"x-api-key": "bob"}}


async def hello(request: Request) -> PlainTextResponse:
    request.app.state.calls.append(request.url.path)
    return PlainTextResponse("hello", headers={"x-app": "yes"})


def by_api_key(scope: Scope) -> Optional[str]:
    key = dict(scope["headers"]).get(b"x-api-key")
    return key.decode() if key else None


def by_method(scope: Scope) -> int:
    return 2 if scope["method"] == "POST" else 1


def answers(
    connect: Connect, build: Build, requests: list[dict[str, Any]], **options: Any
) -> tuple[list[httpx.Response], list[str]]:
    """The responses to ``requests``, sent in order to an app limited by
    ``build(connect())``, and the paths the app saw."""

    async def main() -> tuple[list[httpx.Response], list[str]]:
        client = connect()
        try:
            routes = [Route("/", hello, methods=["GET", "POST"]), Route("/health", hello), Route("/other", hello)]
            middleware = [Middleware(RateLimitMiddleware, limiter=build(client), **options)]
            app = Starlette(routes=routes, middleware=middleware)
            app.state.calls = []
            transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 1234), raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                sent = [
                    await http.request(r.get("method", "GET"), r.get("path", "/"), headers=r.get("headers"))
                    for r in requests
                ]
            return sent, app.state.calls
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.fixture
def server(url: str) -> Connect:
    """Makes a client of the server, in the loop that calls it (a client
    belongs to the loop it first ran on)."""
    return lambda: redis.asyncio.Redis.from_url(url)


def fresh() -> str:
    """A prefix of keys no other test uses."""
    return f"rk-py-asgi:{uuid.uuid4().hex}:"


def seen(responses: list[httpx.Response]) -> list[tuple[int, bytes, list[tuple[str, str]]]]:
    """What a client sees of each response: status, body, every header in order."""
    return [(r.status_code, r.content, list(r.headers.items())) for r in responses]


def alike(
    server: Connect, local: Callable[[], Any], shared: Build, requests: list[dict[str, Any]], **options: Any
) -> tuple[list[httpx.Response], list[str]]:
    """The answers of an app limited by the Redis store ``shared`` builds,
    checked equal to those of one limited by the in-process ``local()``:
    each response as a client sees it, and the requests the app saw."""
    expected, expected_calls = answers(server, lambda client: local(), requests, **options)
    responses, calls = answers(server, shared, requests, **options)
    assert seen(responses) == seen(expected)
    assert calls == expected_calls
    return responses, calls


async def hello_app(scope: Scope, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


async def receive() -> Any:
    return {"type": "http.request", "body": b""}


async def ignore(message: Any) -> None:
    pass


def scope_of(client: Optional[str], *headers: tuple[bytes, bytes]) -> Scope:
    return {
        "type": "http",
        "method": "GET",
        "path": "/",
        "headers": list(headers),
        "client": None if client is None else (client, 1),
    }


@pytest.mark.parametrize(
    "make",
    [
        functools.partial(TokenBucket, 2, 1, 3600, name="hourly"),
        functools.partial(Gcra, 2, 1800, name="per-key"),
        functools.partial(FixedWindow, 2, 3600, name="hourly"),
    ],
    ids=["token_bucket", "gcra", "fixed_window"],
)
def test_an_async_redis_limiter_answers_as_a_keyed_limiter(server: Connect, make: Callable[..., Limiter]) -> None:
    requests = [ALICE, BOB, ALICE, ALICE, BOB, BOB]
    for options in ({"key": by_api_key}, {}):  # a key of the app's, or the client's address
        prefix = fresh()
        local = lambda: KeyedLimiter(make(clock=frozen))
        shared: Build = lambda client: AsyncRedisLimiter(client, make(), prefix=prefix, clock=frozen)
        responses, calls = alike(server, local, shared, requests, **options)
    # What both answered (one key, the client's address): RateLimit headers on
    # allowed responses too, and 429 with Retry-After, the app never called.
    assert [r.status_code for r in responses] == [200, 200, 429, 429, 429, 429]
    assert responses[0].headers["ratelimit"].startswith(f'"{make().name}";r=1;t=')
    assert "retry-after" not in responses[0].headers and responses[0].headers["x-app"] == "yes"
    assert responses[2].content == b"Too Many Requests" and int(responses[2].headers["retry-after"]) > 0
    assert calls == ["/", "/"]


def test_an_async_redis_policy_answers_as_a_policy(server: Connect) -> None:
    local = lambda: Policy(POLICY, clock=frozen)
    # The default fields, as for a Policy: client, method, path.
    requests = [{}, {"path": "/other"}, {}, {}, {"path": "/other"}, {"method": "POST"}]
    prefix = fresh()
    responses, calls = alike(
        server, local, lambda client: AsyncRedisPolicy(client, POLICY, prefix=prefix, clock=frozen), requests
    )
    assert calls == ["/", "/other", "/"]
    assert [r.status_code for r in responses] == [200, 200, 200, 429, 429, 429]
    # Every limit listed, on allowed and denied responses.
    assert responses[0].headers["ratelimit-policy"] == '"per-client";q=3;w=3600, "per-route";q=2;w=3600'
    assert responses[3].headers["ratelimit"].startswith('"per-client";r=0;t=')
    assert int(responses[3].headers["retry-after"]) > 0
    # Fields of the app's own.
    fields = lambda scope: {"client": by_api_key(scope) or "", "path": "/"}
    prefix = fresh()
    responses, _ = alike(
        server,
        local,
        lambda client: AsyncRedisPolicy(client, POLICY, prefix=prefix, clock=frozen),
        [ALICE, BOB, ALICE, ALICE],
        fields=fields,
    )
    assert [r.status_code for r in responses] == [200, 200, 200, 429]


def test_skip_and_cost_as_in_process(server: Connect) -> None:
    health, post = {**ALICE, "path": "/health"}, {**ALICE, "method": "POST"}
    requests = [health, post, ALICE, health, ALICE, BOB]
    skip = lambda scope: scope["path"] == "/health"
    for cost in (by_method, 2):
        prefix = fresh()
        responses, _ = alike(
            server,
            lambda: KeyedLimiter(Gcra(3, 60, clock=frozen)),
            lambda client: AsyncRedisLimiter(client, Gcra(3, 60), prefix=prefix, clock=frozen),
            requests,
            key=by_api_key,
            skip=skip,
            cost=cost,
        )
        # Skipped: to the app undecided, without RateLimit headers.
        assert responses[0].status_code == responses[3].status_code == 200
        assert "ratelimit" not in responses[0].headers and "ratelimit" not in responses[3].headers
    # A cost of 2 each: alice's first request leaves 1 unit, her next is denied.
    assert [r.status_code for r in responses] == [200, 200, 429, 200, 429, 200]
    prefix = fresh()
    responses, _ = alike(
        server,
        lambda: Policy(POLICY, clock=frozen),
        lambda client: AsyncRedisPolicy(client, POLICY, prefix=prefix, clock=frozen),
        [{"path": "/health"}, {"method": "POST"}, {}, {}],
        skip=skip,
        cost=by_method,
    )
    assert [r.status_code for r in responses] == [200, 200, 429, 429]


def test_a_skipped_request_charges_nothing_on_redis(server: Connect) -> None:
    async def main() -> int:
        client = server()
        limiter = AsyncRedisLimiter(client, Gcra(3, 60), prefix=fresh())
        middleware = RateLimitMiddleware(hello_app, limiter, skip=lambda scope: True)
        await middleware(scope_of("203.0.113.7"), receive, ignore)
        remaining = (await limiter.peek("203.0.113.7", 0)).remaining
        await client.aclose()
        return remaining

    assert asyncio.run(main()) == 3


def test_a_fixed_cost_above_the_limit_is_refused_when_built() -> None:
    # As for an in-process limiter: each request would be refused (a 500).
    client = redis.asyncio.Redis(port=1)
    for limiter in (AsyncRedisLimiter(client, Gcra(2, 1.0)), AsyncRedisPolicy(client, "5/second;2/minute")):
        with pytest.raises(RateLimitError) as raised:
            RateLimitMiddleware(hello_app, limiter, cost=3)
        assert raised.value.code == "cost_exceeds_limit"
        assert RateLimitMiddleware(hello_app, limiter, cost=2)._cost == 2
        for cost, error, code in ((-1, RateLimitError, "invalid_value"), ("1", RateLimitTypeError, "invalid_type")):
            with pytest.raises(error) as refused:
                RateLimitMiddleware(hello_app, limiter, cost=cost)  # type: ignore[arg-type]
            assert refused.value.code == code


def down() -> redis.asyncio.Redis:
    """A client of no server, failing at once (on_error answers)."""
    return redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=ASYNC_NO_RETRY)


def limit_headers(response: httpx.Response) -> dict[str, str]:
    """The response's RateLimit headers and Retry-After, as ``headers()`` names them."""
    names = ("RateLimit-Policy", "RateLimit", "Retry-After")
    return {name: response.headers[name] for name in names if name in response.headers}


@pytest.mark.parametrize("kind", ["keyed", "policy"])
def test_an_outage_is_answered_by_on_error(kind: str) -> None:
    """Redis down: the store's ``on_error`` decides, and the middleware
    answers that decision as any other, with its headers."""
    config: Any = Gcra(2, 1800, name="per-key") if kind == "keyed" else POLICY
    store: Any = AsyncRedisLimiter if kind == "keyed" else AsyncRedisPolicy
    target: Any = "203.0.113.7" if kind == "keyed" else {"client": "203.0.113.7", "method": "GET", "path": "/"}

    def fallback() -> Any:
        return KeyedLimiter(Gcra(1, 60)) if kind == "keyed" else Policy("1/minute", by=["client"])

    async def decided(on_error: Callable[[], Any], times: int) -> list[dict[str, str]]:
        """The headers of what a store of the same on_error decides itself."""
        client = down()
        limiter = store(client, config, on_error=on_error())
        headers = [limiter.headers(await limiter.try_acquire(target)) for _ in range(times)]
        await client.aclose()
        return headers

    requests: list[dict[str, Any]] = [{}, {}, {}]
    cases: list[tuple[Callable[[], Any], list[int], Optional[str]]] = [
        (lambda: "open", [200, 200, 200], None),
        (lambda: "closed", [429, 429, 429], "1"),
        (fallback, [200, 429, 429], None),  # a limit of 1: the fallback counts
    ]
    for on_error, codes, retry_after in cases:
        responses, calls = answers(down, lambda client: store(client, config, on_error=on_error()), requests)
        assert [r.status_code for r in responses] == codes
        assert len(calls) == codes.count(200)
        assert [limit_headers(r) for r in responses] == asyncio.run(decided(on_error, len(requests)))
        assert responses[0].headers.get("retry-after") == retry_after


class Refusing(redis.asyncio.Redis):
    """A client whose every script call an ACL refuses: no outage, which
    ``on_error`` leaves to the caller (``ScriptError``)."""

    async def evalsha(self, *args: Any, **kwargs: Any) -> Any:
        raise redis.exceptions.NoPermissionError("User app has no permissions to run the 'evalsha' command")


@pytest.mark.parametrize("kind", ["keyed", "policy"])
def test_an_error_on_error_does_not_answer_propagates(kind: str) -> None:
    def build(client: redis.asyncio.Redis) -> Any:
        if kind == "keyed":
            return AsyncRedisLimiter(client, Gcra(2, 1.0), on_error="open")
        return AsyncRedisPolicy(client, POLICY, on_error="open")

    async def main() -> None:
        client = Refusing(port=1)
        middleware = RateLimitMiddleware(hello_app, build(client))
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        with pytest.raises(ScriptError):
            await middleware(scope_of("203.0.113.7"), receive, send)
        assert sent == []  # no answer of its own: the server's 500
        with pytest.raises(ScriptError):
            await middleware.decide_async(scope_of("203.0.113.7"))
        await client.aclose()

    asyncio.run(main())
    # Through Starlette: a 500, the app never called.
    refused, calls = answers(lambda: Refusing(port=1), build, [{}])
    assert refused[0].status_code == 500 and "ratelimit" not in refused[0].headers and calls == []


def test_decide_async_answers_the_decision_and_decide_refuses(server: Connect) -> None:
    async def main() -> None:
        client = server()
        limiter = AsyncRedisLimiter(client, Gcra(3, 60, name="per-key"), prefix=fresh())
        # Typed as in-process limiters are (mypy --strict checks this file),
        # Starlette's add_middleware included, which reads the signature.
        Starlette().add_middleware(RateLimitMiddleware, limiter=limiter, key=by_api_key)
        middleware = RateLimitMiddleware(hello_app, limiter, key=by_api_key)
        alice = scope_of(None, (b"x-api-key", b"alice"))
        # decide answers at once: a round trip is decide_async's.
        with pytest.raises(RateLimitTypeError, match="await decide_async"):
            middleware.decide(alice)
        decision = await middleware.decide_async(alice)
        assert isinstance(decision, RedisDecision) and decision.from_store
        assert decision.allowed and decision.remaining == 2
        assert (await middleware.decide_async(alice)).remaining == 1
        # The key is refused as in-process.
        with pytest.raises(RateLimitTypeError, match="^`key` returned None"):
            await middleware.decide_async(scope_of(None))
        default = RateLimitMiddleware(hello_app, AsyncRedisPolicy(client, POLICY, prefix=fresh()))
        with pytest.raises(RateLimitTypeError, match="^the client's address, read by the default `fields`"):
            await default.decide_async(scope_of(None))
        decision = await default.decide_async(scope_of("203.0.113.7"))
        assert decision.headers()["RateLimit"].startswith('"per-client";r=2;t=')
        await client.aclose()

    asyncio.run(main())


def test_the_options_of_the_other_kind_and_the_sync_classes_are_refused() -> None:
    client = redis.Redis(port=1)
    aclient = redis.asyncio.Redis(port=1)
    cases: list[tuple[Any, dict[str, Any], type[RateLimitError], str]] = [
        (
            RedisLimiter(client, Gcra(2, 1.0)),
            {},
            RateLimitTypeError,
            "`limiter`: a RedisLimiter would block the event loop for each request's round trip to Redis: "
            "use AsyncRedisLimiter, with a redis.asyncio client",
        ),
        (
            RedisPolicy(client, POLICY),
            {},
            RateLimitTypeError,
            "`limiter`: a RedisPolicy would block the event loop for each request's round trip to Redis: "
            "use AsyncRedisPolicy, with a redis.asyncio client",
        ),
        (
            AsyncRedisLimiter(aclient, Gcra(2, 1.0)),
            {"fields": lambda scope: {}},
            RateLimitTypeError,
            "`fields` is for an AsyncRedisPolicy: an AsyncRedisLimiter takes `key`",
        ),
        (
            AsyncRedisPolicy(aclient, POLICY),
            {"key": by_api_key},
            RateLimitTypeError,
            "`key` is for an AsyncRedisLimiter: an AsyncRedisPolicy takes `fields`",
        ),
        # Keyed by a field the default fields lack: every request would fail.
        (
            AsyncRedisPolicy(aclient, "5/minute", by=["user"]),
            {},
            RateLimitError,
            "`fields` must be given: limit '5/minute' of `limiter` is keyed by 'user', "
            "which the default fields (client, method, path) lack",
        ),
        # So with its on_error Policy's: the Redis policy refuses every request lacking 'user', Redis up or down.
        (
            AsyncRedisPolicy(aclient, "5/minute", by=["client"], on_error=Policy.from_rates("5/minute", by=["user"])),
            {},
            RateLimitError,
            "`fields` must be given: limit '5/minute' of `limiter`'s on_error is keyed by 'user', "
            "which the default fields (client, method, path) lack",
        ),
    ]
    for limiter, options, error, message in cases:
        with pytest.raises(error) as raised:
            RateLimitMiddleware(hello_app, limiter, **options)
        assert str(raised.value) == message
        assert raised.value.code == ("invalid_value" if error is RateLimitError else "invalid_type")
    client.close()
