"""The LLM client against a scripted OpenAI-compatible endpoint (``httpx.MockTransport``).

Each test runs a real SQLite store and writer under ``tmp_path``; the endpoint records every
request it sees with a timestamp, so limits are checked on what reached the wire.
"""

from __future__ import annotations

import base64
import contextlib
import inspect
import json
import logging
import time
import types
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

import streamrag.endpoint_health as endpoint_health
import streamrag.endpoint_reach as endpoint_reach
import streamrag.llm as llm_module
import streamrag.model_quirks as model_quirks
import streamrag.provider_errors as provider_errors
import streamrag.try_timeouts as try_timeouts
from streamrag.answer_cache import Answer
from streamrag.config import LLMSettings
from streamrag.errors import ConfigError, LLMError, LLMOutputError, LLMRequestError, LLMUnavailableError
from streamrag.llm import LLMClient, listed
from streamrag.notices import Notices, sharing_notices
from streamrag.prompts import Prompt
from streamrag.provider_errors import MORE_RETRIES
from streamrag.ratelimit import MinuteBudget, parse_retry_after
from streamrag.replies import CUT_OFF, CUT_OFF_UNASKED
from streamrag.store import Store
from streamrag.tokens import count_message_tokens, count_tokens
from streamrag.watch_lines import ends_outage
from streamrag.writer import Writer

pytestmark = pytest.mark.anyio

API = "http://llm.test/v1"
USAGE = {"prompt_tokens": 17, "completion_tokens": 5, "total_tokens": 22}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(autouse=True)
def no_refusals_seen(monkeypatch):
    """Each test starts from a process that has seen no model refuse a parameter, nor a server
    end its streams unmarked."""
    monkeypatch.setattr(model_quirks, "REFUSED", {})
    monkeypatch.setattr(model_quirks, "UNMARKED", set())


def ask(text: str = "hello") -> list[dict]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


def chat_body(text: str, usage: dict | None = USAGE) -> dict:
    body = {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    return body


def sse(events: list[dict | str]) -> bytes:
    lines = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events]
    return "".join(lines).encode()


class Endpoint:
    """Answers from ``script`` first (responses, exceptions or callables), then echoes; GET
    /models with a 404, counted in ``listings``."""

    def __init__(self, *script, latency: float = 0.0) -> None:
        self.script = list(script)
        self.latency = latency
        self.requests: list[tuple[float, httpx.Request, dict]] = []   # (the model calls)
        self.listings = 0

    @property
    def bodies(self) -> list[dict]:
        return [body for _, _, body in self.requests]

    @property
    def times(self) -> list[float]:
        return sorted(t for t, _, _ in self.requests)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":   # GET /models (asked after a refusal of a model): no listing
            self.listings += 1
            return httpx.Response(404)
        body = json.loads(request.content)
        self.requests.append((time.monotonic(), request, body))
        if self.latency:
            await anyio.sleep(self.latency)
        if self.script:
            step = self.script.pop(0)
            if isinstance(step, Exception):
                raise step
            if callable(step):
                step = step(body)
                if inspect.isawaitable(step):
                    step = await step
            return step
        if request.url.path.endswith("/embeddings"):
            data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0]}
                    for i, t in enumerate(body["input"])]
            return httpx.Response(200, json={"data": data, "usage": {"prompt_tokens": 3}})
        return httpx.Response(200, json=chat_body("echo: " + body["messages"][-1]["content"]))


@contextlib.asynccontextmanager
async def client(tmp_path, endpoint: Endpoint, *, key: str = "sk-test", clock=time.perf_counter,
                 **settings) -> AsyncIterator[tuple[LLMClient, Store]]:
    settings.setdefault("requests_per_minute", 0)
    settings.setdefault("tokens_per_minute", 0)
    store = Store(tmp_path / "index.db")  # left open: tests read llm_calls afterwards
    async with Writer(store) as writer:
        settings.setdefault("api_base", API)
        async with LLMClient(LLMSettings(**settings), key, store=store,
                             writer=writer, run_id="run-1", retry_base_s=0.05, clock=clock,
                             transport=httpx.MockTransport(endpoint)) as llm:
            yield llm, store


def calls(store: Store) -> list[dict]:
    return store.query("SELECT * FROM llm_calls ORDER BY id")


@pytest.mark.parametrize("by_endpoint", [True, False], ids=["ask", "index"])
async def test_an_answer_cached_by_its_endpoint_is_not_another_servers(tmp_path, by_endpoint):
    # `ask --api-base` another server answered from the cache of the first one's answers (the key
    # named the model, not the server). ask's client keys them by the endpoint too (its password
    # out: a new one is the same server); the index's calls still share a model's answers.
    gpu1, gpu2 = Endpoint(), Endpoint()
    asked = [(gpu1, "http://gpu1.test/v1"), (gpu2, "http://ada:first-pass@gpu2.test/v1/"),
             (gpu2, "http://ada:second-pass@gpu2.test/v1")]
    with anyio.fail_after(10):
        for endpoint, api in asked:
            async with client(tmp_path, endpoint, api_base=api) as (llm, _):
                llm.by_endpoint = by_endpoint
                await llm.chat(ask(), model="m1", stage="answer")
    assert (len(gpu1.requests), len(gpu2.requests)) == ((1, 1) if by_endpoint else (1, 0))


async def test_identical_request_is_served_from_the_cache(tmp_path):
    endpoint = Endpoint()
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            prompt = Prompt(name="extract", version="v1", system="", user="", path="")
            first = await llm.chat(ask(), model="m1", stage="extract", prompt=prompt)
            second = await llm.chat(ask(), model="m1", stage="extract", prompt=prompt)
    assert len(endpoint.requests) == 1
    assert first.text == second.text == "echo: hello"
    assert (first.cached, second.cached) == (False, True)
    assert (second.prompt_tokens, second.completion_tokens) == (17, 5)
    rows = calls(store)
    assert [r["cached"] for r in rows] == [0, 1]
    assert rows[0]["cache_key"] == rows[1]["cache_key"]
    assert {(r["run_id"], r["stage"], r["model"], r["prompt"], r["prompt_version"]) for r in rows} \
        == {("run-1", "extract", "m1", "extract", "v1")}
    assert (rows[0]["prompt_tokens"], rows[0]["completion_tokens"]) == (17, 5)
    assert rows[0]["error"] is None
    assert llm.stats == {"extract": {"calls": 2, "cached": 1, "prompt_tokens": 17,
                                     "completion_tokens": 5, "errors": 0, "unusable": 0, "asked_again": 0,
                                     "cancelled": 0, "gave_up": 0}}


async def test_cache_survives_a_new_client(tmp_path):
    endpoint = Endpoint()
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            await llm.chat(ask(), model="m1", stage="s")
        async with client(tmp_path, endpoint) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="s")
    assert result.cached and len(endpoint.requests) == 1


@pytest.mark.parametrize("change", [
    {"temperature": 0.3}, {"max_tokens": 64}, {"logit_bias": {"9642": 100}},
    {"model": "m2"}, {"stop": ["\n\n"]}, {"response_format": {"type": "json_object"}},
    {"prompt": Prompt(name="p", version="v2", system="", user="", path="")},
], ids=lambda c: next(iter(c)))
async def test_any_changed_option_misses_the_cache(tmp_path, change):
    endpoint = Endpoint()
    base = {"model": "m1", "stage": "s", "prompt": Prompt(name="p", version="v1", system="", user="", path="")}
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            await llm.chat(ask(), **base)
            result = await llm.chat(ask(), **{**base, **change})
    assert not result.cached
    assert len(endpoint.requests) == 2
    name, value = next(iter(change.items()))
    if name != "prompt":  # the prompt's version is ours, not the provider's
        assert endpoint.bodies[1][name] == value


async def test_429_with_retry_after_is_waited_out(tmp_path):
    endpoint = Endpoint(httpx.Response(429, headers={"Retry-After": "0.3"},
                                       json={"error": {"message": "slow down"}}))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            started = time.monotonic()
            result = await llm.chat(ask(), model="m1", stage="s")
            elapsed = time.monotonic() - started
    assert result.text == "echo: hello"
    assert len(endpoint.requests) == 2
    assert elapsed >= 0.3
    assert endpoint.times[1] - endpoint.times[0] >= 0.3
    assert [r["error"] for r in calls(store)] == [None]


@pytest.mark.parametrize("failure", [
    httpx.Response(500, json={"error": {"message": "boom"}}),
    httpx.Response(503, text="upstream overloaded"),
    httpx.ReadTimeout("no answer"),
    httpx.ConnectError("connection refused"),
    httpx.Response(200, content=b'{"choices": [{"mess'),
], ids=["500", "503", "timeout", "connect", "truncated-json"])
async def test_transient_failures_are_retried(tmp_path, failure):
    endpoint = Endpoint(failure, failure)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            result = await llm.chat(ask(), model="m1", stage="s")
    assert result.text == "echo: hello"
    assert len(endpoint.requests) == 3
    assert len(calls(store)) == 1


@pytest.mark.parametrize(("status", "advice"), [(503, "check that server and its logs"), (429, "requests_per_minute")])
async def test_exhausted_retries_raise_unavailable_and_are_recorded(tmp_path, status, advice):
    endpoint = Endpoint(*[httpx.Response(status, text="down")] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, store):
            with pytest.raises(LLMUnavailableError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    message = str(err.value)
    assert len(endpoint.requests) == 3
    assert f"{API}/chat/completions" in message and "m1" in message and f"HTTP {status}" in message
    assert advice in message and "\n" not in message
    rows = calls(store)
    assert len(rows) == 1 and rows[0]["error"] == message and rows[0]["cached"] == 0
    assert llm.stats["s"]["errors"] == 1


async def test_a_call_answered_only_an_empty_502_says_the_answer_was_empty(tmp_path):
    # A proxy's bare 502, no body: the error read "failed 2 times, last: HTTP 502: ; ...",
    # an empty message after the colon, in the error line and the call's llm_calls row.
    endpoint = Endpoint(*[httpx.Response(502)] * 2)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=1) as (llm, store):
            with pytest.raises(LLMUnavailableError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    message = str(err.value)
    assert "failed 2 times, last: HTTP 502 (empty answer); " in message and ": ;" not in message, message
    assert calls(store)[0]["error"] == message


@pytest.mark.parametrize("answer", [
    lambda: httpx.Response(503, text="Service Unavailable"),
    lambda: httpx.Response(503, json={"error": {"message": "try again later", "type": "error", "code": None}}),
], ids=["bare", "try-again-later"])
async def test_a_call_answered_only_503_says_the_server_behind_the_endpoint_is_to_check(tmp_path, answer):
    """A proxy whose server behind it is down answers every try 503, bare or "try again later"
    (a request to wait): the call's error says so, and that more retries help only a server failing
    now and then.
    (It said "the server kept answering with errors: check its logs, or raise llm.max_retries".)"""
    endpoint = Endpoint(*[lambda _body: answer()] * 4)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=3) as (llm, _):
            with pytest.raises(LLMUnavailableError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    message = str(err.value)
    assert len(endpoint.requests) == 4 and "failed 4 times, last: HTTP 503: " in message, message
    assert message.endswith("; the server behind llm.api_base answers only HTTP 503 (a proxy or load balancer "
                            "answers so while the server behind it is down): check that server and its logs; "
                            f"{MORE_RETRIES}"), message
    assert "raise llm.max_retries" not in message


async def test_a_call_whose_tries_were_not_all_http_errors_keeps_its_advice(tmp_path):
    """A dropped connection among the 503s is no answer of a server behind a proxy: the advice of
    the last try's kind, as before."""
    endpoint = Endpoint(httpx.ReadError(""), httpx.Response(503, text="Service Unavailable"))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=1) as (llm, _):
            with pytest.raises(LLMUnavailableError, match="the server kept answering with errors: check its logs"):
                await llm.chat(ask(), model="m1", stage="s")


@pytest.mark.parametrize("case", ["down", "died", "flaky"])
async def test_more_retries_are_said_alike_whatever_other_calls_got(tmp_path, case):
    """One run said "raising llm.max_retries only waits longer" of a call whose tries all got HTTP
    500 and "raise llm.max_retries" of one with a dropped connection among them: both are told
    alike, and alike whether the server never answered ("down"), answered before and then stopped
    ("died": it was told to raise llm.max_retries, and lost "answers only HTTP 500", once any try
    of the run had been answered) or answered other calls between their tries ("flaky"): one
    wording, true in each (``MORE_RETRIES``)."""
    count = {"one": 0, "two": 0}
    failed_once = {text: anyio.Event() for text in count}
    answered = {text: anyio.Event() for text in count}

    async def endpoint(request: httpx.Request) -> httpx.Response:
        text = json.loads(request.content)["messages"][-1]["content"]
        if text not in count:
            return httpx.Response(200, json=chat_body("hi"))
        n, count[text] = count[text], count[text] + 1
        if n == 0:
            failed_once[text].set()
        elif case == "flaky":
            await answered[text].wait()   # (another call answered between this call's tries)
        if text == "two" and n == 0:
            raise httpx.ReadError("")
        return httpx.Response(500, text="boom")

    said = {}

    async def fail(llm, text):
        with pytest.raises(LLMUnavailableError) as err:
            await llm.chat(ask(text), model="m1", stage="s")
        said[text] = str(err.value)

    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=1) as (llm, _):
            if case == "died":
                await llm.chat(ask("first"), model="m1", stage="s")
            for text in count:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(fail, llm, text)
                    if case == "flaky":
                        await failed_once[text].wait()
                        await anyio.wait_all_tasks_blocked()   # (its first failed try counted)
                        await llm.chat(ask(f"other {text}"), model="m1", stage="s")
                        answered[text].set()
    assert count == {"one": 2, "two": 2}
    assert all("failed 2 times, last: HTTP 500: boom; " in s for s in said.values()), said
    assert all(s.endswith(f"; {MORE_RETRIES}") for s in said.values()), said
    assert not any("only waits longer" in s or "or raise llm.max_retries" in s for s in said.values()), said
    assert "the server at llm.api_base answers only HTTP 500: check its logs" in said["one"], said


async def test_identical_failures_of_one_client_get_one_advice_whatever_the_call_order(tmp_path):
    """A server answering b.txt and failing a.txt and c.txt with HTTP 500 every try: a.txt, failed
    before any call was answered, was told "raising llm.max_retries only waits longer", and c.txt,
    after b.txt's answer, "or raise llm.max_retries" (707c041's rule read the client's state when a
    call failed). Now both get one advice, and a call with a dropped connection among its 500s the
    same about retries: what is known of each, every try got a server error."""
    boom = httpx.Response(500, text="boom")
    endpoint = Endpoint(boom, boom, lambda _body: httpx.Response(200, json=chat_body("hi")), boom, boom,
                        httpx.ReadError(""), boom)
    said = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=1) as (llm, _):
            for text in ("a.txt", "b.txt", "c.txt", "d.txt"):
                try:
                    await llm.chat(ask(text), model="m1", stage="s")
                except LLMUnavailableError as e:
                    said.append(str(e))
    assert len(said) == 3 and all(" failed 2 times, last: " in s for s in said), said
    a, c, dropped = (s.split(" failed 2 times, last: ", 1)[1] for s in said)
    assert a == c, (a, c)
    assert a.endswith(f"; {MORE_RETRIES}") and dropped.endswith(f"; {MORE_RETRIES}"), (a, dropped)
    assert "only waits longer" not in a and "or raise llm.max_retries" not in a + dropped, (a, dropped)


async def test_an_error_answer_nested_too_deep_to_decode_is_a_failed_call_not_a_crash(tmp_path):
    # A 500 whose JSON is nested deeper than Python's recursion limit: msgspec raised RecursionError
    # out of check_status (``provider_errors.read_error``), and the run crashed instead of recording
    # the call's failure. Now its text is its words, as a body that is not JSON.
    depth = 100_000
    endpoint = Endpoint(httpx.Response(500, content=b'{"error": ' * depth + b'"deep"' + b"}" * depth))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=0) as (llm, store):
            with pytest.raises(LLMUnavailableError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    message = str(err.value)
    assert 'failed 1 time, last: HTTP 500: {"error": {"error": ' in message, message
    assert calls(store)[0]["error"] == message


DEEP = 100_000


@pytest.mark.parametrize("where", ["answer", "stream event", "stream error"])
async def test_an_answer_nested_too_deep_to_decode_is_a_failed_call_not_a_crash(tmp_path, where):
    # As the error answer above: a 200's body, a streamed event, or a stream's error nested deeper
    # than Python's recursion limit raised RecursionError out of ``Replies`` (json,
    # stream_event, stream_error), crashing the run. Now each is an answer that cannot be read:
    # retried, then the call's recorded failure.
    deep = '{"a": ' * DEEP + '"deep"' + "}" * DEEP
    if where == "answer":
        answer = httpx.Response(200, content=deep.encode(), headers={"content-type": "application/json"})
    else:
        event = deep if where == "stream event" else json.dumps({"error": deep})
        answer = httpx.Response(200, content=sse([event]), headers={"content-type": "text/event-stream"})
    endpoint = Endpoint(answer, answer)
    stream = {} if where == "answer" else {"on_delta": lambda _t: None}
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, max_retries=1) as (llm, store):
            with pytest.raises(LLMUnavailableError) as err:
                await llm.chat(ask(), model="m1", stage="s", **stream)
    assert " failed 2 times, last: " in str(err.value), err.value
    assert calls(store)[-1]["error"] == str(err.value)


async def test_one_server_error_under_max_retries_0_is_not_said_to_repeat(tmp_path):
    endpoint = Endpoint(httpx.Response(500, text="boom"))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=0) as (llm, _):
            with pytest.raises(LLMUnavailableError, match=r"failed 1 time, last: HTTP 500: boom; "
                               r"the server answered with an error, not retried as llm\.max_retries = 0"):
                await llm.chat(ask(), model="m1", stage="s")


@pytest.mark.parametrize(("status", "provider_message", "expected"), [
    (401, "Incorrect API key provided", "the API key was rejected; set STREAMRAG_API_KEY"),
    (403, "forbidden", "the API key was rejected"),
    (404, "The model `m1` does not exist", "unknown model or wrong api_base: m1 at"),
    (400, "This model's maximum context length is 8192 tokens", "longer than m1's context allows"),
    (400, "'messages' must contain the word json", "must contain the word json"),
    (422, "invalid temperature", "HTTP 422: invalid temperature"),
    (403, "Project `proj_1` does not have access to model `m1`", "the key may not use m1 .*; give a model it may"),
    (413, "<html><body>413 Request Entity Too Large</body></html>", "larger than the server .* lower index.chunk_size"),
])
async def test_client_errors_fail_at_once_with_a_clear_message(tmp_path, status,
                                                                provider_message, expected):
    endpoint = Endpoint(httpx.Response(status, json={"error": {"message": provider_message}}))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            with pytest.raises(LLMRequestError, match=expected) as err:
                await llm.chat(ask(), model="m1", stage="s")
    assert err.value.status == status
    assert len(endpoint.requests) == 1
    assert "\n" not in str(err.value)
    assert calls(store)[0]["error"] == str(err.value)


@pytest.mark.parametrize(("status", "message", "named", "unnamed"), [
    (400, "model_not_found: the model `m1` does not exist",
     "give llm.summary_model = 'm1' a model the server serves, or check llm.api_base",
     "give a model the server serves, or check llm.api_base"),
    (404, "The model `m1` does not exist",
     "check llm.summary_model = 'm1': give a model the server serves, or llm.api_base",
     "give a model the server serves, or check llm.api_base"),
    (403, "Project `proj_1` does not have access to model `m1`",
     "give llm.summary_model a model it may use", "give a model it may use"),
])
async def test_a_rejection_of_a_model_no_setting_names_names_no_setting(tmp_path, status, message, named, unnamed):
    # A library's call of a model no setting names was told to fix "llm.*_model": no such setting.
    for summary_model in ("m1", "gpt-4o-mini"):
        endpoint = Endpoint(httpx.Response(status, json={"error": {"message": message}}))
        with anyio.fail_after(5):
            async with client(tmp_path, endpoint, summary_model=summary_model) as (llm, _):
                with pytest.raises(LLMRequestError) as err:
                    await llm.chat(ask(), model="m1", stage="s")
        said = str(err.value)
        assert "*_model" not in said
        assert (named if summary_model == "m1" else unnamed) in said, said


@pytest.mark.parametrize(("error", "expected"), [
    ({"message": "Country, region, or territory not supported", "code": "unsupported_country_region_territory",
      "type": "request_forbidden"},
     "HTTP 403: the provider does not serve requests from this country or region (Country, region, or "
     "territory not supported); use an endpoint that serves it: set llm.api_base to another provider's"),
    ({"message": "Request not allowed", "code": "unsupported_country_region_territory"},
     "HTTP 403: the provider does not serve requests from this country or region (Request not allowed)"),
    ({"message": "Your account has no credit balance left; add billing details"},
     "HTTP 403: the account behind the API key cannot pay for requests (Your account"),
    ({"message": "Your organization has been disabled."},
     "HTTP 403: the provider has disabled the account (Your organization has been disabled.)"),
    ({"message": "Your IP address is not on the allow list of this resource", "type": "forbidden"},
     "HTTP 403: the provider does not take requests from this machine's network address"),
    # About the key (or saying nothing else): the key's advice, as before.
    ({"message": "You have insufficient permissions for this operation: missing scopes; check that your "
                 "restricted API key has the necessary scopes", "type": "invalid_request_error"},
     "the API key was rejected"),
    ({"message": "Your API key has been disabled"}, "the API key was rejected"),
    ({"message": "Forbidden"}, "the API key was rejected"),
])
async def test_a_403_for_another_reason_than_the_key_leads_with_it(tmp_path, error, expected):
    # "Country, region, or territory not supported" said "the API key was rejected; set
    # STREAMRAG_API_KEY to a valid key", its reason in parentheses at the end.
    endpoint = Endpoint(httpx.Response(403, json={"error": error}))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    assert expected in str(err.value) and "\n" not in str(err.value)
    keyed = expected == "the API key was rejected"
    assert keyed == ("the API key was rejected" in str(err.value)), str(err.value)
    assert err.value.every_call and len(endpoint.requests) == 1


@pytest.mark.parametrize(("body", "expected"), [
    # (vLLM's error body, the openai library's type; a code that is a number gives way to the type)
    ({"object": "error", "message": "Country not supported", "type": "PermissionDeniedError", "param": None,
      "code": 403}, "HTTP 403: the provider does not serve requests from this country or region (Country not"),
    ({"error": {"message": "Request blocked: your country or region is not supported", "type": "permission_error",
                "param": None, "code": "403"}},   # (LiteLLM's shape)
     "HTTP 403: the provider does not serve requests from this country or region (Request blocked"),
    ({"detail": {"type": "permission_denied", "message": "Your IP address is not allowed"}},
     "HTTP 403: the provider does not take requests from this machine's network address"),
    ({"type": "error", "error": {"type": "permission_error", "message": "Your API key does not have permission "
                                                                        "to use the specified resource."}},
     "the API key was rejected"),
    ({"detail": {"code": "model_not_found", "message": "no such deployment"}}, "HTTP 403: the key may not use m1"),
])
async def test_a_403_whose_type_only_says_forbidden_is_told_by_its_message(tmp_path, body, expected):
    # read_error reads an error's type where its code is a number (or in the body, or its
    # "detail"): "PermissionDeniedError", "permission_error" then decided before the message
    # (their "permission" is a word of the key's), and a 403 for the country said to set the key.
    endpoint = Endpoint(httpx.Response(403, json=body))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    assert expected in str(err.value), str(err.value)
    assert ("the API key was rejected" in str(err.value)) == (expected == "the API key was rejected"), str(err.value)


LEAKED = "sk-LEAKCHECK-1234567890abcdef"


@pytest.mark.parametrize("status", [401, 400])
async def test_a_key_the_server_quotes_back_is_sent_but_never_said(tmp_path, status):
    # A server that quotes the request back (a proxy's 401 naming the key it refused) put the key
    # in the error on stderr and in the llm_calls row `status --failures` reads.
    def echo(request: httpx.Request) -> httpx.Response:
        said = f"Incorrect API key provided: {request.headers['Authorization']}"
        return httpx.Response(status, json={"error": {"message": said}})

    sent = []
    with anyio.fail_after(5):
        async with client(tmp_path, lambda r: sent.append(r) or echo(r), key=LEAKED) as (llm, store):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    assert sent[0].headers["Authorization"] == f"Bearer {LEAKED}"   # sent as before
    assert "Incorrect API key provided: Bearer ***" in str(err.value)
    assert LEAKED not in str(err.value) and LEAKED not in str([dict(r) for r in calls(store)])


async def test_a_password_in_api_base_is_sent_but_never_said(tmp_path):
    # http://user:password@host/v1: httpx sends it as Basic auth, as before; every error quoted
    # the URL with the password in it, and the call log kept it.
    sent = []

    def refuse(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(403, json={"error": {"message": "Forbidden"}})

    with anyio.fail_after(5):
        async with client(tmp_path, refuse, key="", api_base=f"http://me:{LEAKED}@llm.test/v1") as (llm, store):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    basic = base64.b64encode(f"me:{LEAKED}".encode()).decode()
    assert sent[0].headers["Authorization"] == f"Basic {basic}"
    assert str(err.value).startswith("http://llm.test/v1/chat/completions: HTTP 403")
    assert LEAKED not in str(err.value) and LEAKED not in str([dict(r) for r in calls(store)])


async def test_a_key_beside_a_password_in_api_base_is_said_not_sent_once(tmp_path, monkeypatch, caplog):
    # STREAMRAG_API_KEY set and http://user:password@ in llm.api_base: httpx's Basic auth takes
    # the Authorization header the key's Bearer would go in, and the key was silently not sent.
    monkeypatch.setenv("STREAMRAG_API_KEY", LEAKED)   # (a host of its own: said once per process)
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=chat_body("fine"))

    with anyio.fail_after(10), caplog.at_level(logging.WARNING, logger="streamrag.llm"):
        for i, api_base in enumerate([f"http://me:{LEAKED}@key-beside.test/v1"] * 2 + ["http://key-beside.test/v1"]):
            async with client(tmp_path, answer, key=LEAKED, api_base=api_base) as (llm, _):
                await llm.chat(ask(f"q{i}"), model="m1", stage="s")
        async with client(tmp_path, answer, key=LEAKED, api_base=f"http://me:{LEAKED}@key-beside.test/v1",
                          api_version="2024-10-21") as (llm, _):   # (Azure's api-key header: both sent)
            await llm.chat(ask("azure"), model="m1", stage="s")
    said = [r.getMessage() for r in caplog.records]
    assert said == ["the API key in STREAMRAG_API_KEY is not sent: llm.api_base (http://me:***@key-beside.test/v1) "
                    "holds a user and password, sent as Basic auth in the Authorization header the key would go in; "
                    "for a server that takes the key, remove the user:password from llm.api_base; for one that "
                    "takes the password, unset STREAMRAG_API_KEY"], said   # once: a watch makes a client per sync
    basic = base64.b64encode(f"me:{LEAKED}".encode()).decode()
    assert [r.headers["Authorization"] for r in sent] == [f"Basic {basic}"] * 2 + [f"Bearer {LEAKED}", f"Basic {basic}"]
    assert sent[-1].headers["api-key"] == LEAKED


@pytest.mark.parametrize(("api_base", "sent"), [(API, "Bearer"), ("http://me:pw-LEAKCHECK-42@llm.test/v1", "Basic")])
async def test_headers_a_reply_without_choices_echoes_are_never_said(tmp_path, api_base, sent):
    # A proxy's error sent as a 200 without choices, echoing the request's Authorization header
    # (the key as Bearer, or api_base's user:password as Basic, base64): the error and the call
    # log quoted it whole.
    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"error": {"message": f"echo: {request.headers['Authorization']}"}})

    with anyio.fail_after(5):
        async with client(tmp_path, echo, key=LEAKED, api_base=api_base, max_retries=0) as (llm, store):
            with pytest.raises(LLMError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    kept = str(err.value) + str([dict(r) for r in calls(store)])
    assert f"answer without choices (echo: {sent} ***)" in str(err.value), str(err.value)
    basic = base64.b64encode(b"me:pw-LEAKCHECK-42").decode()
    assert "LEAKCHECK" not in kept and basic not in kept


@pytest.mark.parametrize("from_env", [False, True])
async def test_a_404_on_a_base_without_v1_says_to_add_it(tmp_path, monkeypatch, from_env):
    # It said "unknown model or wrong api_base: m1", though the server has the model and only
    # the route was wrong (Ollama, vLLM and OpenAI serve under /v1).
    base = "http://llm.test:11434"
    if from_env:
        monkeypatch.setenv("STREAMRAG_API_BASE", base + "/")
    endpoint = Endpoint(httpx.Response(404, text="404 page not found"))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_base=base) as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    setting = "STREAMRAG_API_BASE" if from_env else "llm.api_base"
    assert str(err.value) == (f"{base}/chat/completions: HTTP 404, no such route (404 page not found); "
                              f"most servers serve the OpenAI API under /v1: set {setting} to '{base}/v1'")
    assert len(endpoint.requests) == 1

    # Given with --api-base, the flag is named.
    endpoint = Endpoint(httpx.Response(404, text="404 page not found"))
    async with client(tmp_path / "flag", endpoint, api_base=base) as (llm, _):
        llm._replies.base_from = "--api-base"
        with pytest.raises(LLMRequestError, match=f"set --api-base to '{base}/v1'"):
            await llm.chat(ask(), model="m1", stage="s")

    # A base with a version in its path (Gemini's /v1beta/openai, a gateway's) is not told so.
    versioned = "http://llm.test/v1beta/openai"
    endpoint = Endpoint(httpx.Response(404, text="404 page not found"))
    with anyio.fail_after(5):
        async with client(tmp_path / "v", endpoint, api_base=versioned) as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    assert str(err.value).startswith("unknown model or wrong api_base: m1 at ")


async def test_long_provider_messages_are_cut(tmp_path):
    endpoint = Endpoint(httpx.Response(400, json={"error": {"message": "bad " * 200}}))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    assert len(str(err.value)) < 320


async def test_a_fresh_client_sends_a_minutes_budget_at_once(tmp_path):
    # The defaults (500 requests, 200000 tokens a minute): an idle client sends large requests
    # without waiting, up to the whole minute's budget (here ~20 x 8k tokens).
    endpoint = Endpoint()
    big = "lorem ipsum " * 4000
    n = 20
    cost = count_message_tokens(ask(big + "00")) + 256
    assert 7000 < cost and n * cost < LLMSettings().tokens_per_minute
    with anyio.fail_after(30):
        async with client(tmp_path, endpoint, requests_per_minute=LLMSettings().requests_per_minute,
                          tokens_per_minute=LLMSettings().tokens_per_minute,
                          concurrency=64) as (llm, _):
            await llm.chat(ask(big), model="m1", stage="s")
            # Nothing waited for, the first request either (the old one-second bucket held it
            # 1.4 s): counted by the budgets' waits, not timed.
            assert llm._tpm.waited_s == 0 and llm._rpm.waited_s == 0
            async with anyio.create_task_group() as tg:
                for i in range(n - 1):
                    tg.start_soon(lambda i=i: llm.chat(ask(f"{big}{i:02}"), model="m1", stage="s"))
            assert llm._tpm.waited_s == 0 and llm._rpm.waited_s == 0
            assert llm._rpm.total == n
    assert len(endpoint.requests) == n


def admissions(budget: MinuteBudget) -> list[tuple[float, float]]:
    """Filled as ``budget`` lets each request go: the time on its clock, and its waits so far."""
    let_go: list[tuple[float, float]] = []
    take = budget.take

    def taking(amount: float) -> list[float]:
        ticket = take(amount)
        let_go.append((ticket[0], budget.waited_s))
        return ticket

    budget.take = taking
    return let_go


async def test_requests_beyond_a_minutes_budget_wait_for_the_window(tmp_path, monkeypatch):
    # The window shrunk from 61 s to 0.4 s: 5 requests a window, so of 12 sent at once, every
    # request goes at least a window after the one 5 before it (no window holds more than 5).
    # Times are the limiter's own, as it let each request go (``admissions``): where they
    # arrive, a busy machine delayed one by tens of milliseconds (without the limiter the gaps
    # would be about zero).
    import streamrag.ratelimit

    window = 0.4
    monkeypatch.setattr(streamrag.ratelimit, "WINDOW_S", window)
    endpoint = Endpoint()
    n, limit = 12, 5
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, requests_per_minute=limit, concurrency=64) as (llm, _):
            let_go = admissions(llm._rpm)
            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(lambda i=i: llm.chat(ask(f"q{i}"), model="m1", stage="s"))
    assert len(endpoint.requests) == len(let_go) == n
    times = [t for t, _ in let_go]
    for i in range(limit, n):
        assert times[i] - times[i - limit] >= window - 1e-9, f"request {i} too early"
    assert [waited for _, waited in let_go[:limit]] == [0] * limit   # the first window's worth went at once



async def test_a_long_wait_for_rate_budget_is_said_with_the_setting(tmp_path, caplog):
    """A run waiting a minute for tokens_per_minute looked stuck: the wait is said, once.
    The budget's minute is the test's own clock, which only the client's waits move on: on a
    busy machine (load 20) a real 0.4 s window had partly passed before the next request came,
    and its shorter wait went unsaid."""
    now = [0.0]

    async def wait(seconds: float) -> None:   # the client's wait (``_backoff``), on that clock
        now[0] += seconds
        waits.append(seconds)
        await anyio.sleep(0)

    waits: list[float] = []
    limit = count_message_tokens(ask("q0")) + 40   # one request a minute
    with anyio.fail_after(10), caplog.at_level(logging.DEBUG, logger="streamrag.llm"):
        async with client(tmp_path, Endpoint(), tokens_per_minute=limit) as (llm, _):
            llm._tpm.clock = lambda: now[0]
            llm._backoff = wait
            for i in range(3):
                await llm.chat(ask(f"q{i}"), model="m1", stage="s", max_tokens=40)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1 and said[0].startswith("waiting ")
    assert f"llm.tokens_per_minute ({limit:,}) is used up" in said[0] and "set it to 0" in said[0]
    assert len([r for r in caplog.records if r.getMessage().startswith("waiting ")]) == 2
    assert len(waits) == 2 and min(waits) >= llm_module.WAIT_NOTICE_S   # (a minute's window each)


async def test_retries_are_one_warning_then_debug_lines(tmp_path, caplog):
    """A flaky endpoint printed a warning per retry (fifty for one small run)."""
    def flaky(body):
        return httpx.Response(500, json={"error": {"message": "busy"}})
    endpoint = Endpoint(flaky, flaky, flaky, httpx.Response(200, json=chat_body("ok")), flaky, flaky)
    with anyio.fail_after(10), caplog.at_level(logging.DEBUG, logger="streamrag.llm"):
        async with client(tmp_path, endpoint, max_retries=3) as (llm, _):
            for i in range(2):
                await llm.chat(ask(f"q{i}"), model="m1", stage="s")
    retries = [r for r in caplog.records if "retry" in r.getMessage()]
    assert len(retries) == 5
    assert [r.levelno for r in retries].count(logging.WARNING) == 1 and retries[0].levelno == logging.WARNING


async def test_clients_made_while_sharing_notices_say_one_retry_line_between_them(tmp_path, caplog):
    """watch makes a client per sync: as each had its own limit, a long outage said a retry
    line per sync. Shared, the limit carries across clients (per endpoint); ``held``, nothing is
    said; a client made outside keeps its own limit, as before."""
    def down(body):
        return httpx.Response(500, json={"error": {"message": "boom"}})

    async def fail(name: str, **settings) -> None:
        (tmp_path / name).mkdir()
        async with client(tmp_path / name, Endpoint(down, down), max_retries=1, **settings) as (llm, _):
            with pytest.raises(LLMError):
                await llm.chat(ask(), model="m1", stage="s")

    notices = Notices()
    with anyio.fail_after(10), caplog.at_level(logging.DEBUG, logger="streamrag.llm"):
        with sharing_notices(notices):
            for i in range(3):
                await fail(f"sync{i}")
            await fail("other", api_base="http://other.test/v1")   # another endpoint: its own line
            notices.held = True                                    # (watch says its outage)
            await fail("held", api_base="http://third.test/v1")
            notices.held = False
            await fail("after", api_base="http://third.test/v1")
        await fail("outside")
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [m.split("/v1")[0] for m in said] == [API.split("/v1")[0], "http://other.test",
                                                 "http://third.test", API.split("/v1")[0]], said
    assert all("HTTP 500: boom; retry 1/1 in " in m for m in said), said
    assert said[2].endswith("(and 1 more like it since the last; -v shows each)"), said
    assert sum("HTTP 500: boom" in r.getMessage() for r in caplog.records) == 7   # each try, at -v

async def test_a_retry_line_ends_a_servers_sentence_once(tmp_path, caplog):
    # OpenAI's 500 says "... Sorry about that." and the simulator's "(fault injection).": the
    # retry line read "Sorry about that.; retry 1/1 in 0.8 s", two stops in a row.
    def down(body):
        return httpx.Response(500, json={"error": {"message": "The server had an error. Sorry about that."}})

    with anyio.fail_after(10), caplog.at_level(logging.WARNING, logger="streamrag.llm"):
        async with client(tmp_path, Endpoint(down, down), max_retries=1) as (llm, _):
            with pytest.raises(LLMError):
                await llm.chat(ask(), model="m1", stage="s")
    (said,) = [r.getMessage() for r in caplog.records if "retry 1/1" in r.getMessage()]
    assert "Sorry about that; retry 1/1 in " in said, said


async def test_tokens_beyond_a_minutes_budget_wait_and_an_oversized_request_still_goes(
        tmp_path, monkeypatch):
    import streamrag.ratelimit

    window = 0.4
    monkeypatch.setattr(streamrag.ratelimit, "WINDOW_S", window)
    endpoint = Endpoint()
    max_tokens = 40
    cost = count_message_tokens(ask("q00")) + max_tokens
    limit = 3 * cost  # three requests a window
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, tokens_per_minute=limit, concurrency=64) as (llm, _):
            let_go = admissions(llm._tpm)   # (the limiter's times: see the test above)
            async with anyio.create_task_group() as tg:
                for i in range(7):
                    tg.start_soon(lambda i=i: llm.chat(ask(f"q{i:02}"), model="m1", stage="s",
                                                       max_tokens=max_tokens))
            # Bigger than a whole window's budget: clamped to it, so it waits, but it goes.
            await llm.chat(ask("huge " * 2000), model="m1", stage="s", max_tokens=max_tokens)
            assert llm._tpm.total <= limit
    assert len(endpoint.requests) == len(let_go) == 8
    times = [t for t, _ in let_go]
    for i in range(3, 7):
        assert times[i] - times[i - 3] >= window - 1e-9, f"request {i} too early"
    assert times[7] - times[6] >= window - 1e-9  # the oversized one waited for an empty window


@pytest.mark.parametrize("per_minute", [1, 2, 7, 60, 500, 200000])
def test_minute_budget_never_exceeds_the_limit_in_any_window(per_minute):
    import random as rnd

    from streamrag.ratelimit import WINDOW_S, MinuteBudget

    now = [0.0]
    budget = MinuteBudget(per_minute, clock=lambda: now[0])
    rng = rnd.Random(per_minute)
    sent: list[tuple[float, float]] = []
    assert budget.wait_s(per_minute) == 0  # idle: a whole minute's budget at once
    while now[0] < 10 * WINDOW_S:
        amount = rng.choice([1, max(1, per_minute // 7), per_minute, 3 * per_minute])
        wait = budget.wait_s(amount)
        assert wait < WINDOW_S + 1e-6  # never a deadlock, even above the limit
        now[0] += wait
        assert budget.wait_s(amount) == 0
        budget.take(amount)
        sent.append((now[0], min(amount, per_minute)))
        now[0] += rng.choice([0.0, 0.0, 0.5, 3.0])
    for start, _ in sent:
        in_window = sum(a for t, a in sent if start <= t < start + WINDOW_S)
        assert in_window <= per_minute + 1e-6

    # Saturated with equal requests, it runs close to the limit: a window's worth per window.
    now[0] += WINDOW_S
    budget, sent, step = MinuteBudget(per_minute, clock=lambda: now[0]), [], max(1, per_minute // 7)
    started = now[0]
    while now[0] < started + 10 * WINDOW_S:
        now[0] += budget.wait_s(step)
        budget.take(step)
        sent.append(step)
    assert sum(sent) >= 0.85 * per_minute * 10


def test_tokens_used_beyond_a_booking_are_a_debt_the_next_window_carries():
    # A request books what its answer may be; one that used more takes the rest when it is
    # answered, and the rest stays in the window a minute from then, past the booking's own.
    from streamrag.ratelimit import WINDOW_S, MinuteBudget

    now = [0.0]
    budget = MinuteBudget(6000, clock=lambda: now[0])
    ticket = budget.take(300)
    now[0] = 10.0
    budget.settle(ticket, 450)
    assert budget.total == 450 and budget.wait_s(5551) > 0
    now[0] = WINDOW_S + 1.0   # the booking left the window, the debt not yet
    assert budget.wait_s(5851) == pytest.approx(9.0)
    assert budget.wait_s(5850) == 0
    budget.settle(budget.take(100), 50)   # (used less than booked, none of it a guess: kept booked)
    assert budget.total == 250


def test_tokens_booked_for_a_guessed_answer_and_not_used_are_given_back():
    # A request without max_tokens books the answers' mean; a shorter answer gives back the part
    # of the guess it did not use (never below what it used), while its booking is in the window.
    from streamrag.ratelimit import WINDOW_S, MinuteBudget

    now = [0.0]
    budget = MinuteBudget(6000, clock=lambda: now[0])
    budget.settle(budget.take(1000), 700, refund=256)    # (a 256-token guess, a 0-token answer ...)
    assert budget.total == 1000 - 256
    budget.settle(budget.take(1000), 700, refund=500)    # (... never below what it used)
    assert budget.total == 744 + 700
    assert budget.wait_s(6000 - 1444) == 0 and budget.wait_s(6000 - 1443) > 0
    late = budget.take(1000)
    now[0] = WINDOW_S + 1.0   # the first two left the window; a long answer's booking too, before it is settled
    budget.settle(late, 100, refund=900)
    assert budget.total == 0 and not budget.taken


async def test_an_answer_longer_than_booked_takes_its_tokens_from_the_minute(tmp_path):
    # llm.tokens_per_minute 6,000: requests without max_tokens booked their prompt and the
    # answers' mean, and answers of 3,000 tokens were not counted beyond it: a minute's window
    # saw 6,117 tokens, and the one after it let as many through again. The clock is faked.
    long_answer = {"prompt_tokens": 100, "completion_tokens": 3000, "total_tokens": 3100}
    endpoint = Endpoint(httpx.Response(200, json=chat_body("long", long_answer)))
    now = [0.0]
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, tokens_per_minute=6000) as (llm, _):
            llm._tpm.clock = lambda: now[0]
            await llm.chat(ask("first"), model="m1", stage="s")
            assert llm._tpm.total == 3100   # (booked: its prompt and 256, the mean guessed)
            now[0] = 30.0
            # The next, booking the answers' mean now, waits for the long answer to leave.
            assert llm._tpm.wait_s(3000) > 0


async def test_an_answer_shorter_than_its_guess_gives_the_rest_back(tmp_path):
    # llm.tokens_per_minute: a request without max_tokens booked its prompt and the answers' mean
    # (256 before any answer), and kept it all booked for a minute however short its answer: five
    # synth_small documents, 48,588 tokens, waited a minute at a limit of 57,300. With max_tokens
    # the booking is kept (OpenAI counts max_tokens as sent). The clock is faked.
    short = {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}
    endpoint = Endpoint(*[httpx.Response(200, json=chat_body("ok", short)) for _ in range(3)])
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, tokens_per_minute=6000) as (llm, _):
            llm._tpm.clock = lambda: 0.0
            prompt = count_message_tokens(ask("first"), llm.encoding)
            assert prompt < 30   # (the server counted more of the prompt: that is taken as well)
            await llm.chat(ask("first"), model="m1", stage="s")
            assert llm._tpm.total == 34   # (was the prompt and 256 guessed)
            await llm.chat(ask("again"), model="m1", stage="s")   # (the mean guessed: 4, as used)
            assert llm._tpm.total == 68
            await llm.chat(ask("third"), model="m1", stage="s", max_tokens=100)
            assert llm._tpm.total == 68 + count_message_tokens(ask("third"), llm.encoding) + 100


async def test_an_answer_a_server_says_is_0_tokens_is_booked_as_the_text_it_wrote(tmp_path):
    # A server that says completion_tokens 0 of an answer it wrote is not believed (the text is
    # counted, as the call's row counts it), but the token budget believed it: the request's
    # guess was given back whole, and a 300-token answer was booked as its prompt alone.
    text = " ".join(["Scrooge"] * 300)
    zero = {"prompt_tokens": 30, "completion_tokens": 0, "total_tokens": 30}
    endpoint = Endpoint(httpx.Response(200, json=chat_body(text, zero)))
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, tokens_per_minute=6000) as (llm, _):
            llm._tpm.clock = lambda: 0.0
            result = await llm.chat(ask("first"), model="m1", stage="s")
            written = count_tokens(text, llm.encoding)
            assert result.completion_tokens == written >= 300
            assert llm._tpm.total == 30 + written


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_an_answer_without_usage_is_booked_as_its_local_count(tmp_path, streamed):
    # A server that says no usage (llama.cpp, some vLLM versions, a stream whose server ignores
    # stream_options) left a request's booking as it was: a short answer kept its 256 guessed
    # tokens booked for a minute, and a long one took nothing beyond them. Now its tokens are
    # counted here (tiktoken), as its row counts them, and the booking settled with them.
    short, long = "ok", " ".join(["Marley"] * 3000)

    def reply(text: str) -> httpx.Response:
        if not streamed:
            return httpx.Response(200, json=chat_body(text, usage=None))
        words = text.split(" ")
        events = [{"choices": [{"index": 0, "delta": {"content": w if not i else " " + w},
                                "finish_reason": None}]} for i, w in enumerate(words)]
        events[-1]["choices"][0]["finish_reason"] = "stop"
        return httpx.Response(200, content=sse([*events, "[DONE]"]),
                              headers={"content-type": "text/event-stream"})

    endpoint = Endpoint(reply(short), reply(long))
    asked = dict(on_delta=lambda _t: None) if streamed else {}
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, tokens_per_minute=20000) as (llm, store):
            llm._tpm.clock = lambda: 0.0
            first = await llm.chat(ask("first"), model="m1", stage="s", **asked)
            booked = count_message_tokens(ask("first"), llm.encoding) + count_tokens(short, llm.encoding)
            assert (first.prompt_tokens, first.completion_tokens) == (booked - count_tokens(short, llm.encoding),
                                                                      count_tokens(short, llm.encoding))
            assert llm._tpm.total == booked   # (was its prompt and the 256 guessed)
            second = await llm.chat(ask("second"), model="m1", stage="s", **asked)
            assert second.completion_tokens == count_tokens(long, llm.encoding) > 3000
            assert llm._tpm.total == booked + second.prompt_tokens + second.completion_tokens
    rows = calls(store)
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in rows] == \
        [(first.prompt_tokens, first.completion_tokens), (second.prompt_tokens, second.completion_tokens)]


@pytest.mark.parametrize("names", [("reasoning_content",), ("reasoning", "reasoning_content")])
async def test_thinking_streamed_apart_is_counted_once_in_an_answer_without_usage(tmp_path, names):
    # Its thinking (vLLM's reasoning_content) is paid for as the answer is: counted with it when
    # the server says no usage, in the row and the token budget (it was the answer's text alone).
    # A server that streams it under the old name and the new one alike (vLLM kept
    # reasoning_content beside reasoning when it renamed it; mlx-vlm sends both) was paid twice.
    thinking, text = " ".join(["ponder"] * 200), "(Paris, France)"
    events = [{"choices": [{"index": 0, "delta": {name: thinking for name in names}, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}, "[DONE]"]
    endpoint = Endpoint(httpx.Response(200, content=sse(events), headers={"content-type": "text/event-stream"}))
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, tokens_per_minute=20000) as (llm, store):
            llm._tpm.clock = lambda: 0.0
            result = await llm.chat(ask(), model="m1", stage="s", on_delta=lambda _t: None)
            paid = count_tokens(thinking + text, llm.encoding)
            assert result.text == text and result.completion_tokens == paid > 200
            assert llm._tpm.total == result.prompt_tokens + paid
    assert calls(store)[0]["completion_tokens"] == paid


@pytest.mark.parametrize("streamed", [False, True])   # (True: a server that ignores "stream" answers whole)
async def test_thinking_of_a_whole_answer_is_counted_in_an_answer_without_usage(tmp_path, streamed):
    # A whole answer's message.reasoning_content (vLLM's reasoning parsers, not streamed) was
    # never counted when the server said no usage: its row and the token budget took the answer
    # alone (5 tokens for 205), where a streamed answer's thinking was counted with it.
    thinking, text = " ".join(["ponder"] * 200), "(Paris, France)"
    body = chat_body(text, usage=None)
    body["choices"][0]["message"]["reasoning_content"] = thinking
    endpoint = Endpoint(httpx.Response(200, json=body))
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, tokens_per_minute=20000) as (llm, store):
            llm._tpm.clock = lambda: 0.0
            result = await llm.chat(ask(), model="m1", stage="s", on_delta=(lambda _t: None) if streamed else None)
            paid = count_tokens(text + thinking, llm.encoding)
            assert result.text == text and result.completion_tokens == paid, (result.completion_tokens, paid)
            assert llm._tpm.total == result.prompt_tokens + paid
    assert calls(store)[0]["completion_tokens"] == paid


async def test_the_first_minute_s_burst_stays_within_the_token_limit(tmp_path):
    # Before any answer, a request without max_tokens booked its prompt and 256 tokens: at
    # llm.tokens_per_minute 6,000, four 1,000-token prompts went out at once, whose 600-token
    # answers (an extraction's share of its text) made 6,420 tokens in the first minute, above
    # the limit: refused by a provider that counts them. The clock is faked (stopped at 0: one
    # minute throughout), the answers held until the first requests are out.
    held = anyio.Event()
    sent: list[int] = []   # the tokens each request sent uses, prompt and answer
    done: list[int] = []

    async def answer(body: dict) -> httpx.Response:
        prompt = count_message_tokens(body["messages"], llm.encoding)
        sent.append(prompt + 600)
        await held.wait()
        return httpx.Response(200, json=chat_body("x", {"prompt_tokens": prompt, "completion_tokens": 600,
                                                         "total_tokens": prompt + 600}))

    async def one(i: int) -> None:
        await llm.chat(ask(f"{i} " + "word " * 990), model="m1", stage="s")
        done.append(i)

    def held_back() -> bool:
        """Whether a request waits for the window, or for the answers under way (``_admit``)."""
        released = getattr(llm, "_released", None)   # (a client that holds no request for them: None)
        return llm._tpm.waited_s > 0 or released is not None and released.statistics().tasks_waiting > 0

    endpoint = Endpoint(*[answer] * 8)
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, tokens_per_minute=6000, concurrency=16) as (llm, _):
            llm._tpm.clock = lambda: 0.0
            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(one, i)
                # The first requests out, the others waiting to be let go (one of them held in admission) ...
                while not (held_back() and len(sent) + 1 + llm._admission.statistics().tasks_waiting == 8):
                    await anyio.sleep(0.01)
                first = len(sent)
                held.set()
                # ... then answered, and the next waiting for the window.
                while len(done) < len(sent) or not llm._tpm.waited_s:
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
    assert first >= 2 and sum(sent) <= 6000, sent
    assert len(sent) == 3   # (a fourth fits no window of 6,000 beside three of 1,605)


async def test_a_refused_connection_gives_its_budget_back(tmp_path):
    # One request a minute: a retry that had to wait for budget would take a minute here.
    refused = [httpx.ConnectError("connection refused") for _ in range(2)]
    endpoint = Endpoint(httpx.Response(200, json=chat_body("up")), *refused)
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, requests_per_minute=2,
                          tokens_per_minute=100000, max_retries=4) as (llm, _):
            await llm.chat(ask("first"), model="m1", stage="s")
            answer = await llm.chat(ask("second"), model="m1", stage="s")
            assert llm._rpm.total == 2  # the two answered attempts, not the refused ones
            assert llm._rpm.waited_s == 0 and llm._tpm.waited_s == 0
    assert answer.text == "echo: second" and len(endpoint.requests) == 4


def long_stream(words: list[str], usage: dict | None = None, *, hang: bool = False) -> httpx.Response:
    """A stream of ``words`` that ends with neither a finish_reason nor [DONE] (cut short), each
    event carrying ``usage`` when given (vLLM's continuous usage stats); ``hang``: it then stays
    open, sending nothing."""
    events = [{"choices": [{"index": 0, "delta": {"content": w if not i else " " + w}, "finish_reason": None}],
               **({"usage": usage} if usage else {})} for i, w in enumerate(words)]

    async def body() -> AsyncIterator[bytes]:
        yield sse(events)
        if hang:
            await anyio.sleep_forever()

    return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})


@pytest.mark.parametrize("usage", [None, {"prompt_tokens": 40, "completion_tokens": 5000}],
                         ids=["counted", "said"])
async def test_a_stream_cut_short_books_what_it_streamed(tmp_path, usage):
    # A try whose stream was cut short is billed for what the model wrote, but its booking stayed
    # the prompt and the answers' mean (256 before any answer): 3,000 tokens streamed went
    # uncounted, and its retry went out at once. Now what it streamed is booked: as its stream
    # said it, else counted here. The clock is faked.
    words = ["Marley"] * 3000
    endpoint = Endpoint(long_stream(words, usage), stream_of(["ok"]))
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, tokens_per_minute=100000) as (llm, _):
            llm._tpm.clock = lambda: 0.0
            await llm.chat(ask(), model="m1", stage="s", on_delta=lambda _t: None)
            prompt = count_message_tokens(ask(), llm.encoding)
            cut = 5040 if usage else prompt + count_tokens(" ".join(words), llm.encoding)
            assert llm._tpm.total == cut + USAGE["total_tokens"]   # (and the retry's answer)
    assert len(endpoint.requests) == 2


async def test_a_call_cancelled_midway_books_what_it_streamed(tmp_path):
    # Ctrl-C, or a run that gave up, cancelled a call whose answer was streaming: the provider
    # writes (and bills) it whatever the client does, but what came was not booked.
    words = ["Fezziwig"] * 2000
    seen: list[str] = []
    endpoint = Endpoint(long_stream(words, hang=True))
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, tokens_per_minute=100000) as (llm, _):
            llm._tpm.clock = lambda: 0.0
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: llm.chat(ask(), model="m1", stage="s", on_delta=seen.append))
                while "".join(seen).count("Fezziwig") < len(words):
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
            streamed = count_tokens(" ".join(words), llm.encoding)
            assert llm._tpm.total == count_message_tokens(ask(), llm.encoding) + streamed


async def test_concurrency_bounds_requests_in_flight(tmp_path):
    in_flight = peak = 0

    async def slow(body: dict) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.05)
        in_flight -= 1
        return httpx.Response(200, json=chat_body("ok"))

    endpoint = Endpoint(*[slow] * 12)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, concurrency=3) as (llm, _):
            async with anyio.create_task_group() as tg:
                for i in range(12):
                    tg.start_soon(lambda i=i: llm.chat(ask(f"q{i}"), model="m1", stage="s"))
    assert peak == 3


async def test_missing_usage_is_counted(tmp_path):
    endpoint = Endpoint(httpx.Response(200, json=chat_body("one two three", usage=None)))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            result = await llm.chat(ask(), model="m1", stage="s")
    assert result.prompt_tokens == count_message_tokens(ask())
    assert result.completion_tokens == 3
    row = calls(store)[0]
    assert (row["prompt_tokens"], row["completion_tokens"]) == (result.prompt_tokens, 3)


def stream_of(pieces: list[str], usage: dict = USAGE) -> httpx.Response:
    events: list[dict | str] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    events += [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
               for p in pieces]
    events += [{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
               {"choices": [], "usage": usage}, "[DONE]"]
    return httpx.Response(200, content=sse(events), headers={"content-type": "text/event-stream"})


async def test_streaming_deltas_make_the_text_and_usage_is_recorded(tmp_path):
    endpoint = Endpoint(stream_of(["The ", "quick ", "fox"]))
    deltas: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            result = await llm.chat(ask(), model="m1", stage="answer", on_delta=deltas.append)
            # The same request without streaming is the same answer: streaming is not in the key.
            again = await llm.chat(ask(), model="m1", stage="answer")
            replay: list[str] = []
            await llm.chat(ask(), model="m1", stage="answer", on_delta=replay.append)
    assert deltas == ["The ", "quick ", "fox"]
    assert result.text == "The quick fox" and result.finish_reason == "stop"
    assert endpoint.bodies[0]["stream"] is True
    assert endpoint.bodies[0]["stream_options"] == {"include_usage": True}
    assert again.cached and again.text == result.text
    assert replay == ["The quick fox"]
    assert len(endpoint.requests) == 1
    row = calls(store)[0]
    assert (row["prompt_tokens"], row["completion_tokens"]) == (17, 5)


async def test_a_cut_stream_is_retried(tmp_path):
    cut = httpx.Response(200, content=sse([{"choices": [{"delta": {"content": "The "}}]}]))
    endpoint = Endpoint(cut, stream_of(["The ", "end"]))
    deltas: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="s", on_delta=deltas.append)
    assert result.text == "The end"
    assert "".join(deltas) == "The end"  # what was shown is not shown twice
    assert len(endpoint.requests) == 2



async def test_a_whole_answer_to_a_streamed_request_is_taken(tmp_path):
    # A server that ignores "stream": true (some gateways) answered the whole JSON completion,
    # paid: it was read as a stream cut short, asked 3 times, and `ask` failed with "the stream
    # ended before the answer did (truncated)".
    whole = httpx.Response(200, json=chat_body("The quay was rebuilt."))
    endpoint = Endpoint(whole)
    deltas: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            result = await llm.chat(ask(), model="m1", stage="s", on_delta=deltas.append)
    assert result.text == "".join(deltas) == "The quay was rebuilt."
    assert (result.prompt_tokens, result.completion_tokens, result.finish_reason) == (17, 5, "stop")
    assert len(endpoint.requests) == 1
    assert [c["error"] for c in calls(store)] == [None]

async def streamed_after_a_cut(tmp_path, first: list[str], second: list[str]):
    """A streamed answer whose stream of ``first`` ends unmarked (cut), asked again: ``second``.
    Returns the result and the text pieces shown, in order."""
    cut = httpx.Response(200, content=sse([delta({"content": p}) for p in first]))
    endpoint = Endpoint(cut, stream_of(second))
    deltas: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="s", on_delta=deltas.append)
    return result, deltas


@pytest.mark.parametrize("shown, retry", [
    # After a dropped stream the retry's text was shown only past the length already shown: a
    # model that samples gave "Scrooge is a miser he miser, changes his ways." on the terminal
    # while the answer (and --json, and its checked citations) said another thing.
    (["Scrooge is ", "a miser he"], ["Ebenezer Scrooge, ", "the miser, ", "changes his ways."]),
    # ... and a retry whose whole answer is shorter than what was shown is shown again too.
    (["The answer is 42", ", and also 43"], ["The answer ", "is 42"]),
])
async def test_a_retry_whose_answer_differs_is_shown_from_its_start_after_a_line_saying_so(tmp_path, shown, retry):
    result, deltas = await streamed_after_a_cut(tmp_path, shown, retry)
    assert result.text == "".join(retry)
    assert "".join(deltas) == "".join(shown) + llm_module.RESTARTED + result.text


def unmarked_stream(pieces: list[str]) -> httpx.Response:
    """A whole answer streamed with neither a finish_reason nor [DONE] (a quirky server)."""
    return httpx.Response(200, content=sse([{"choices": [{"delta": {"content": p}}]} for p in pieces]))


async def test_a_server_that_never_marks_a_streams_end_is_believed_after_the_same_text_twice(
        tmp_path, caplog):
    endpoint = Endpoint(*(lambda body: unmarked_stream(["Answer to ", body["messages"][-1]["content"]])
                          for _ in range(9)))
    deltas: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=6) as (llm, store):
            first = await llm.chat(ask("one"), model="m1", stage="answer", on_delta=deltas.append)
            second = await llm.chat(ask("two"), model="m1", stage="answer", on_delta=lambda _: None)
    assert first.text == "Answer to one" and "".join(deltas) == "Answer to one"
    assert second.text == "Answer to two"
    # One retry tells the quirk from a cut; then each stream is taken as it ends (it was 7 paid
    # calls, all the retries, and an error).
    assert len(endpoint.requests) == 3
    assert [r["error"] for r in calls(store)] == [None, None]
    assert sum("with neither a finish_reason nor [DONE]" in r.message for r in caplog.records) == 1


async def test_a_stream_cut_at_different_places_is_still_retried_to_the_end(tmp_path):
    endpoint = Endpoint(unmarked_stream(["The "]), unmarked_stream(["The ", "qu"]),
                        unmarked_stream(["The ", "quick"]))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, _):
            with pytest.raises(LLMUnavailableError, match="ended before the answer did"):
                await llm.chat(ask(), model="m1", stage="answer", on_delta=lambda _: None)
    assert len(endpoint.requests) == 3


async def test_a_server_loading_its_model_is_waited_for_beyond_max_retries(tmp_path, monkeypatch,
                                                                           caplog):
    monkeypatch.setattr(llm_module, "REFUSED_WAIT_MAX_S", 0.02)
    loading = httpx.Response(503, json={"error": {"code": 503, "message": "Loading model",
                                                  "type": "unavailable_error"}})
    endpoint = Endpoint(*[loading] * 8)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, _):
            answer = await llm.chat(ask(), model="m1", stage="s")
    assert answer.text == "echo: hello" and len(endpoint.requests) == 9
    assert any("loading its model" in r.message for r in caplog.records)


async def test_a_model_that_never_finishes_loading_still_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(llm_module, "LOADING_MAX_S", 0.2)
    monkeypatch.setattr(llm_module, "REFUSED_WAIT_MAX_S", 0.02)
    endpoint = Endpoint(*[httpx.Response(503, text="Loading model")] * 1000)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=1) as (llm, _):
            with pytest.raises(LLMUnavailableError, match="HTTP 503: Loading model"):
                await llm.chat(ask(), model="m1", stage="s")


class Trickle:
    """A server that answers 200, then sends a little every ``every`` s and never finishes: each
    read comes well within any per-read timeout. ``sse``: text; ``keepalive``: SSE comments
    only; ``json``: a JSON body that never ends; ``silent``: not even the headers."""

    def __init__(self, kind: str, every: float = 0.05) -> None:
        self.kind, self.every = kind, every
        self.sent: list[int] = []   # pieces sent, per request

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(0)
        if self.kind == "silent":
            await anyio.sleep(3600)
        return httpx.Response(200, content=self.body(len(self.sent) - 1),
                              headers={"content-type": "application/json" if self.kind == "json"
                                       else "text/event-stream"})

    async def body(self, i: int) -> AsyncIterator[bytes]:
        if self.kind == "json":
            yield b'{"choices": [{"message": {"content": "'
        while True:
            self.sent[i] += 1
            yield {"sse": sse([delta({"content": "x"})]), "keepalive": b": keep-alive\n\n",
                   "json": b"x"}[self.kind]
            await anyio.sleep(self.every)


@pytest.mark.parametrize("kind, said", [
    ("keepalive", "the streamed answer was under way but sent no text for 0.6 s (timeout)"),
    # (A whole answer arriving a byte at a time was said to have "made no progress".)
    ("json", "the answer was still arriving after 0.6 s (timeout)"),
    ("silent", "no answer within 0.6 s (timeout)")])
async def test_an_answer_that_makes_no_progress_is_abandoned_at_request_timeout_s(tmp_path, kind, said):
    # A server trickling bytes (keep-alives, a body that never ends) hung index and ask forever:
    # httpx's timeout is per read. A try that makes no progress for request_timeout_s (and a
    # margin) is now a timeout, retried as max_retries says. (Each server here never ends, or is
    # silent for an hour: a try not cut short meets the guard.)
    endpoint = Trickle(kind)
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, request_timeout_s=0.3, max_retries=1) as (llm, store):
            with pytest.raises(LLMUnavailableError) as err:
                await llm.chat(ask(), model="m1", stage="s",
                               on_delta=(lambda _t: None) if kind == "keepalive" else None)
    message = str(err.value)   # (the retry had twice the time)
    assert f"last: {said};" in message and "raise llm.request_timeout_s" in message
    assert "failed 2 times" in message and "\n" not in message
    assert len(endpoint.sent) == 2                                   # retried once, as max_retries says
    assert calls(store)[0]["error"] == message


@contextlib.asynccontextmanager
async def stalling_server(content_type: str) -> AsyncIterator[str]:
    """A real loopback server that answers every request with 200 and its headers, then sends
    nothing more until the block ends (it is stopped then); gives its api_base."""
    async def stall(conn: anyio.abc.SocketStream) -> None:
        async with conn:
            await conn.receive()   # (the request's first bytes: enough to answer)
            await conn.send(f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n"
                            "content-length: 100000\r\n\r\n".encode())
            await anyio.sleep_forever()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, stall)
        yield f"http://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}/v1"
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("streamed, said", [
    (False, "the answer began but nothing more came for 1 s (timeout)"),
    (True, "the streamed answer was under way but sent no text for 1 s (timeout)")])
async def test_an_answer_that_stalls_after_its_headers_is_not_said_unanswered(tmp_path, streamed, said):
    # httpx's own per-read timeout comes before the try's deadline: a reply whose headers came
    # and whose body then stalled was said "no answer within 1 s", as if the server never
    # answered (a real socket: MockTransport has no read timeout).
    with anyio.fail_after(60):
        async with stalling_server("text/event-stream" if streamed else "application/json") as api:
            store = Store(tmp_path / "index.db")
            async with Writer(store) as writer, LLMClient(
                    LLMSettings(api_base=api, requests_per_minute=0, tokens_per_minute=0,
                                request_timeout_s=1.0, max_retries=0), "sk-test",
                    store=store, writer=writer, run_id="run-1") as llm:
                with pytest.raises(LLMUnavailableError) as err:
                    await llm.chat(ask(), model="m1", stage="s",
                                   on_delta=(lambda _t: None) if streamed else None)
    assert f"failed 1 time, last: {said};" in str(err.value)
    assert "raise llm.request_timeout_s" in str(err.value)


async def test_a_try_that_timed_out_gives_the_next_one_twice_the_time(tmp_path):
    # A whole answer that takes longer than request_timeout_s (a long report from a model on a
    # CPU) timed out the same way on each of its 7 tries, every one generated in full.
    endpoint = Endpoint(latency=0.7)
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, request_timeout_s=0.3, max_retries=3) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="report")
            again = await llm.chat(ask("next"), model="m1", stage="report")   # the model's time is kept
    assert result.text == "echo: hello" and again.text == "echo: next"
    assert len(endpoint.requests) == 3   # 0.3 s, then 0.6 s: answered; the next call has 0.6 s
    # Growth stops at TIMEOUT_GROWTH_MAX times the setting, and a try timed out at that ends the
    # call: a server that never answers fails after 0.1 + 0.2 + 0.4 s of tries.
    slow = Endpoint(latency=1.0)
    with anyio.fail_after(60):
        async with client(tmp_path / "slow", slow, request_timeout_s=0.1, max_retries=6) as (llm, _):
            with pytest.raises(LLMUnavailableError, match=r"failed 3 times, last: no answer within "
                                                          r"0.4 s \(timeout\)"):
                await llm.chat(ask(), model="m1", stage="report")


async def test_a_server_that_hangs_now_and_then_keeps_every_calls_retries(tmp_path):
    # Once the model's timeout had grown to its longest, any one hang ended a call with no
    # retry ("failed 1 time" under max_retries 6), for the rest of the run.
    async def hang(body):
        await anyio.sleep(3600)

    endpoint = Endpoint(hang, hang)   # then answers
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, request_timeout_s=0.1, max_retries=6) as (llm, _):
            first = await llm.chat(ask("a"), model="m1", stage="s")    # 0.1, 0.2 s timed out; answered
            second = await llm.chat(ask("b"), model="m1", stage="s")   # empty script: answered at once
            endpoint.script[:0] = [hang]
            third = await llm.chat(ask("c"), model="m1", stage="s")    # 0.4 s timed out once: retried
    assert [r.text for r in (first, second, third)] == ["echo: a", "echo: b", "echo: c"]


async def test_a_grown_timeout_comes_back_down_once_answers_are_quick_again(tmp_path):
    # A server that hung once left every later try of the run (a daemon's whole life) waiting 4
    # times request_timeout_s: the next real hang took 4 times as long to be noticed.
    # How long each answer took is the test's clock, which only its answers move on (a quick
    # answer took more than half a grown timeout on a machine at load 20); a try timing out is
    # httpx's read timeout, as a server that stops sending gives it.
    now = [0.0]

    def hang(body):
        raise httpx.ReadTimeout("timed out")

    def slow(body):   # within the grown 0.8 s, not within half of it
        now[0] += 0.45
        return httpx.Response(200, json=chat_body("slow"))

    class Timed(Endpoint):
        def __init__(self, *script) -> None:
            super().__init__(*script)
            self.timeouts: list[float] = []   # each try's timeout

        async def __call__(self, request: httpx.Request) -> httpx.Response:
            self.timeouts.append(try_timeouts.TRY.get().timeout)
            return await super().__call__(request)

    n = try_timeouts.TIMEOUT_SHRINK_AFTER
    endpoint = Timed(hang, hang)
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, request_timeout_s=0.2, max_retries=6,
                          clock=lambda: now[0]) as (llm, _):
            await llm.chat(ask("a"), model="m1", stage="s")   # 0.2, 0.4 s timed out; quick at 0.8
            endpoint.script[:] = [slow]   # not quick: the quick answers are counted again from 0
            for i in range(1 + 2 * n + 1):
                await llm.chat(ask(f"q{i}"), model="m1", stage="s")
    assert endpoint.timeouts == [0.2, 0.4, 0.8, 0.8] + [0.8] * n + [0.4] * n + [0.2]


class Hangs(Endpoint):
    """Hangs on every request while ``hanging``, else echoes."""

    def __init__(self) -> None:
        super().__init__()
        self.hanging = True
        self.timeouts: list[float] = []   # each try's timeout

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.timeouts.append(try_timeouts.TRY.get().timeout)
        if self.hanging:
            self.requests.append((time.monotonic(), request, json.loads(request.content)))
            await anyio.sleep(3600)
        return await super().__call__(request)


async def gather_errors(llm: LLMClient, texts: list[str]) -> dict[str, str]:
    """Each call's answer text, or its error."""
    out: dict[str, str] = {}

    async def one(text: str) -> None:
        try:
            out[text] = (await llm.chat(ask(text), model="m1", stage="extract")).text
        except LLMUnavailableError as e:
            out[text] = str(e)

    async with anyio.create_task_group() as tg:
        for text in texts:
            tg.start_soon(one, text)
    return out


async def test_once_a_server_hangs_other_calls_fail_at_once_until_it_answers_again(tmp_path):
    # A server that stopped answering mid-run made each batch of calls wait out its whole
    # schedule of timeouts: 60 documents took 5 minutes at a 1 s timeout (10 hours at 120 s).
    endpoint = Hangs()
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, request_timeout_s=0.1, max_retries=6, concurrency=4) as (llm, _):
            results = await gather_errors(llm, [f"c{i}" for i in range(40)])
            # Still hanging: the try that checks has the setting's time, not the grown one
            # (each stage of a run paid four timeouts to learn the server still hangs).
            assert "has answered nothing" in (await gather_errors(llm, ["check"]))["check"]
            assert endpoint.timeouts[-1] == 0.1 < llm._timeouts.grown["m1"]
            endpoint.hanging = False   # back: the next call's one try finds out, and calls go on
            again = {**await gather_errors(llm, ["d1"]), **await gather_errors(llm, ["d2"])}
    # Nothing answered for one call's schedule (0.1 + 0.2 + 0.4 s of tries), then one try at a
    # time: not ten batches of schedules (about 7 s, 85 tries), counted by the tries, not timed.
    assert len(endpoint.requests) <= 24, len(endpoint.requests)
    silent = [m for m in results.values() if "has answered nothing for" in m]
    assert len(results) == 40 and len(silent) >= 30
    assert all(m in silent or "(timeout)" in m for m in results.values())
    assert ("every try timed out (one try at a time checks whether it answers again): the server hangs, "
            "or is too slow for llm.request_timeout_s = 0.1") in silent[0]
    assert again == {"d1": "echo: d1", "d2": "echo: d2"}


async def test_calls_that_come_while_one_checks_a_hung_server_go_on_when_it_answers(tmp_path):
    # Calls that came while one try checked whether the hung server was back failed at once,
    # even when that try was answered: a run that saw the server come back ended with failures.
    endpoint = Hangs()
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, request_timeout_s=0.1, max_retries=6, concurrency=4) as (llm, _):
            await gather_errors(llm, [f"c{i}" for i in range(4)])
            assert llm._reach.silent
            endpoint.hanging, endpoint.latency = False, 0.05   # back, and each answer takes 0.05 s
            sent = len(endpoint.timeouts)
            after = await gather_errors(llm, [f"d{i}" for i in range(6)])
    assert after == {f"d{i}": f"echo: d{i}" for i in range(6)}
    assert endpoint.timeouts[sent] == 0.1 and len(endpoint.timeouts) == sent + 6   # one checked first
    assert not llm._reach.silent


async def test_a_call_timed_out_while_one_checks_a_hung_server_waits_for_that_check(tmp_path):
    # A try begun before the server was found silent, timing out while another try checked
    # whether it was back, ended its call as "has answered nothing" though the check was answered.
    async def answer(request: httpx.Request) -> httpx.Response:
        text = json.loads(request.content)["messages"][-1]["content"]
        await anyio.sleep(3600 if text == "slow" else 0.25)   # the check: within its 0.2 + 0.2 s
        return httpx.Response(200, json=chat_body("echo: " + text))

    out: dict[str, str] = {}
    with anyio.fail_after(60):
        async with client(tmp_path, answer, request_timeout_s=0.2, max_retries=6, concurrency=4) as (llm, _):
            async def probe() -> None:   # from 0.25 s to 0.5 s; "slow" times out at 0.4 s
                await anyio.sleep(0.25)
                llm._reach.silent = True   # as found after 1 + 2 + 4 timeouts
                out.update(await gather_errors(llm, ["check"]))

            async with anyio.create_task_group() as tg:
                tg.start_soon(probe)
                out.update(await gather_errors(llm, ["slow"]))
    assert out["check"] == "echo: check"
    assert "has answered nothing" not in out["slow"] and "failed 3 times" in out["slow"], out["slow"]


async def test_a_slow_call_does_not_make_a_server_that_answers_others_silent(tmp_path):
    # One call too slow for any timeout, while other calls are answered: only it fails.
    async def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["messages"][-1]["content"] == "slow":
            await anyio.sleep(3600)
        await anyio.sleep(0.05)
        return httpx.Response(200, json=chat_body("echo: " + body["messages"][-1]["content"]))

    with anyio.fail_after(60):
        async with client(tmp_path, answer, request_timeout_s=0.1, max_retries=6, concurrency=2) as (llm, _):
            async def others() -> list[str]:
                return [(await llm.chat(ask(f"q{i}"), model="m1", stage="s")).text for i in range(30)]

            results = await gather_errors(llm, ["slow"])   # alone, nothing else asked: not silent
            assert "failed 3 times" in results["slow"] and not llm._reach.silent
            assert (await gather_errors(llm, ["next"])) == {"next": "echo: next"}
            out: dict[str, object] = {}
            async with anyio.create_task_group() as tg:
                async def slow() -> None:
                    out["slow"] = (await gather_errors(llm, ["slow"]))["slow"]

                async def rest() -> None:
                    out["rest"] = await others()
                tg.start_soon(slow)
                tg.start_soon(rest)
    assert "failed" in str(out["slow"]) and "has answered nothing" not in str(out["slow"])
    assert out["rest"] == [f"echo: q{i}" for i in range(30)]


async def test_silence_counts_from_the_last_answer(tmp_path):
    # A try begun before the last answer and timed out after it counted from its start: the
    # server was called silent 0.75 s after an answer where 1 + 2 + 4 timeouts (1.4 s) are due.
    # The answer's time is taken as the server sends it, before the client can have it: a busy
    # machine that hands it over late makes the span only longer.
    seen: dict[str, float] = {}

    async def answer(request: httpx.Request) -> httpx.Response:
        text = json.loads(request.content)["messages"][-1]["content"]
        if text.startswith("slow"):
            await anyio.sleep(3600)
        seen["answer"] = time.monotonic() - started
        return httpx.Response(200, json=chat_body("echo: " + text))

    with anyio.fail_after(30):
        async with client(tmp_path, answer, request_timeout_s=0.2, max_retries=6, concurrency=8) as (llm, _):
            llm._timeouts.grown["m1"] = 0.8   # as after earlier timeouts
            started = time.monotonic()

            async def later(name: str, delay: float) -> None:
                await anyio.sleep(delay)
                await gather_errors(llm, [name])

            async def watch() -> None:
                while not llm._reach.silent:
                    await anyio.sleep(0.005)
                seen["silent"] = time.monotonic() - started

            async with anyio.create_task_group() as tg:
                tg.start_soon(later, "slowA", 0.0)
                tg.start_soon(later, "slowB", 0.65)
                tg.start_soon(later, "quick", 1.5)
                tg.start_soon(watch)
    assert seen["silent"] - seen["answer"] >= 1.4 * (1 - 1e-6), seen


async def test_a_refused_connection_after_a_hang_is_said_as_refused(tmp_path, monkeypatch):
    # The server hung, then was stopped: calls went on failing as "every try timed out: the
    # server hangs", and a restart's refusals were not waited out.
    monkeypatch.setattr(llm_module, "DOWN_AFTER_S", 0.3)
    monkeypatch.setattr(llm_module, "REFUSED_WAIT_MAX_S", 0.02)
    mode = {"now": "ok"}

    async def answer(request: httpx.Request) -> httpx.Response:
        if mode["now"] == "hang":
            await anyio.sleep(3600)
        if mode["now"] == "refuse":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return httpx.Response(200, json=chat_body("fine"))

    with anyio.fail_after(30):
        async with client(tmp_path, answer, request_timeout_s=0.1, max_retries=6, concurrency=4) as (llm, _):
            await gather_errors(llm, ["first"])
            mode["now"] = "hang"
            await gather_errors(llm, [f"c{i}" for i in range(4)])
            assert llm._reach.silent
            mode["now"] = "refuse"
            probe = await gather_errors(llm, ["d0"])   # one try at a time: this one, refused
            later = await gather_errors(llm, ["d1"])
    assert not llm._reach.silent
    assert "refused every connection" in probe["d0"] and "refused every connection" in later["d1"], (probe, later)


async def test_the_longer_timeout_reaches_the_http_request(tmp_path):
    # httpx's own timeout (a mock transport ignores it) must grow with the try's.
    from streamrag.simulator import Simulator, SimulatorConfig

    store = Store(tmp_path / "index.db")
    with Simulator(SimulatorConfig(latency_ms=600)) as sim:
        async with Writer(store) as writer:
            settings = LLMSettings(api_base=sim.base_url, requests_per_minute=0, tokens_per_minute=0,
                                   request_timeout_s=0.4, max_retries=2)
            async with LLMClient(settings, "sk-test", store=store, writer=writer, run_id="run-1",
                                 retry_base_s=0.05) as llm:
                result = await llm.chat(ask(), model="gpt-4o-mini", stage="answer", on_delta=lambda _t: None)
                await llm.chat(ask("again"), model="gpt-4o-mini", stage="answer")
        assert result.text and sim.requests == 3   # 0.4 s timed out, 0.8 s answered; then 0.8 s at once
    store.close()


async def test_a_slow_streamed_answer_longer_than_request_timeout_s_is_not_cut(tmp_path):
    # A slow local server streams a long answer for longer than request_timeout_s: a deadline
    # on the whole try cut it, and every retry the same way, until the call failed.
    async def slowly() -> AsyncIterator[bytes]:
        for _ in range(12):                      # 1.2 s in all, a piece each 0.1 s
            yield sse([delta({"content": "word "})])
            await anyio.sleep(0.1)
        yield sse([STOP, "[DONE]"])

    endpoint = Endpoint(lambda body: httpx.Response(200, content=slowly(),
                                                    headers={"content-type": "text/event-stream"}))
    shown: list[str] = []
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, request_timeout_s=0.3, max_retries=0) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="s", on_delta=shown.append)
    assert result.text == "word " * 12 and "".join(shown) == result.text
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning", "thinking"])
async def test_a_model_thinking_aloud_in_its_own_field_is_not_cut_off(tmp_path, key):
    # vLLM (reasoning_content), Ollama and OpenRouter (reasoning) stream a model's thinking
    # apart from its answer: only answer text counted as progress, so a model that thought for
    # longer than request_timeout_s was cut off and asked again, then said to hang.
    async def thinking() -> AsyncIterator[bytes]:
        for _ in range(10):                      # 1 s of thinking, a piece each 0.1 s
            yield sse([delta({"content": None, key: "hmm "})])
            await anyio.sleep(0.1)
        yield sse([delta({"content": "done"}), STOP, "[DONE]"])

    endpoint = Endpoint(lambda body: httpx.Response(200, content=thinking(),
                                                    headers={"content-type": "text/event-stream"}))
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, request_timeout_s=0.3, max_retries=0) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="s", on_delta=lambda _t: None)
    assert result.text == "done" and len(endpoint.requests) == 1


async def test_thinking_that_never_ends_is_cut_off_like_an_answer_that_never_ends(tmp_path):
    # Thinking streamed apart from the answer counted as progress but not towards the cut-off
    # of a server that ignores max_tokens: a model thinking in a loop held the call for ever.
    async def forever() -> AsyncIterator[bytes]:
        while True:
            yield sse([delta({"content": None, "reasoning_content": "and so "})])
            await anyio.sleep(0)

    endpoint = Endpoint(lambda body: httpx.Response(200, content=forever(),
                                                    headers={"content-type": "text/event-stream"}))
    with anyio.fail_after(20):
        async with client(tmp_path, endpoint, request_timeout_s=0.3, max_retries=0) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="s", max_tokens=10, on_delta=lambda _t: None)
    assert result.finish_reason == "length" and result.text == ""


async def test_a_stream_that_runs_past_max_tokens_ends_as_cut_off(tmp_path):
    # A server that ignores max_tokens and streams on forever.
    endpoint = Trickle("sse", every=0.002)
    shown: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, request_timeout_s=0.3, max_retries=0) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="s", max_tokens=5, on_delta=shown.append)
    assert result.finish_reason == "length" and result.text == "x" * len(result.text)
    assert 5 < len(result.text) <= 2 * 5 + 64 + 1 and "".join(shown) == result.text
    assert len(endpoint.sent) == 1


async def test_a_cancel_from_outside_still_cancels_a_call_under_its_deadline(tmp_path):
    # The answer streams on forever and the other server is silent for an hour, each try having
    # an hour too: a cancel not heard meets the guard.
    endpoint = Trickle("sse")
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, request_timeout_s=3600) as (llm, _):
            with anyio.move_on_after(0.3) as outer:
                await llm.chat(ask(), model="m1", stage="s", on_delta=lambda _text: None)
            assert outer.cancelled_caught                # cancelled, not retried nor an error
            assert len(endpoint.sent) == 1
            # The client is still usable afterwards (the slot was given back).
            endpoint.kind = "silent"
            with anyio.move_on_after(0.1) as other:
                await llm.chat(ask("other"), model="m1", stage="s")
            assert other.cancelled_caught and len(endpoint.sent) == 2


async def test_concurrent_identical_requests_are_sent_once(tmp_path):
    endpoint = Endpoint(latency=0.2)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            results = []

            async def one() -> None:
                results.append(await llm.chat(ask(), model="m1", stage="s"))

            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(one)
    assert len(endpoint.requests) == 1
    assert {r.text for r in results} == {"echo: hello"}
    assert sorted(r.cached for r in results) == [False, True, True, True, True]
    assert sorted(r["cached"] for r in calls(store)) == [0, 1, 1, 1, 1]


async def test_a_shared_failure_fails_every_waiter_without_resending(tmp_path):
    endpoint = Endpoint(httpx.Response(401, json={"error": {"message": "bad key"}}), latency=0.1)
    errors = []

    async def one() -> None:
        try:
            await llm.chat(ask(), model="m1", stage="s")
        except LLMRequestError as e:
            errors.append(e)

    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(one)
    assert len(errors) == 3 and len(endpoint.requests) == 1


async def test_unusable_answers_are_not_cached_and_asked_again(tmp_path):
    endpoint = Endpoint(httpx.Response(200, json=chat_body("garbage")),
                        httpx.Response(200, json=chat_body("GOOD")))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            result = await llm.chat(ask(), model="m1", stage="s", validate=lambda t: t == "GOOD")
            again = await llm.chat(ask(), model="m1", stage="s", validate=lambda t: t == "GOOD")
            with pytest.raises(LLMOutputError, match="no usable answer"):
                await llm.chat(ask("x"), model="m1", stage="s", validate=lambda t: False)
    assert result.text == "GOOD" and again.cached
    assert len(endpoint.requests) == 2 + 3
    assert [r["error"] for r in calls(store)][:3] == ["unusable answer", None, None]


async def test_embeddings_are_cached_per_text_and_batched(tmp_path):
    endpoint = Endpoint()
    texts = [f"text {i}" for i in range(130)]
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            first = await llm.embed(["a", "bb", "a"], model="e1", stage="embed")
            second = await llm.embed(["bb", "ccc"], model="e1", stage="embed")
            many = await llm.embed(texts, model="e1", stage="embed")
            other_model = await llm.embed(["a"], model="e2", stage="embed")
    assert first == [[1.0, 1.0], [2.0, 1.0], [1.0, 1.0]]
    assert second == [[2.0, 1.0], [3.0, 1.0]]
    assert many == [[float(len(t)), 1.0] for t in texts]
    assert other_model == [[1.0, 1.0]]
    inputs = [body["input"] for body in endpoint.bodies]
    assert inputs[:2] == [["a", "bb"], ["ccc"]]
    assert sorted(len(i) for i in inputs[2:5]) == [2, 64, 64]
    assert inputs[5] == ["a"] and len(inputs) == 6
    rows = calls(store)
    assert sum(r["cached"] for r in rows) == 1 and all(r["stage"] == "embed" for r in rows)


@pytest.mark.parametrize("row", ['{"not": "a vector"}', "[1.0, 2."])
async def test_an_unreadable_cached_embedding_is_asked_again(tmp_path, row):
    # A cached row cut short ended `embed` with "DecodeError: Input data was truncated".
    endpoint = Endpoint()
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            await llm.embed(["a"], model="e1", stage="embed")
            store.conn.execute("UPDATE llm_cache SET response = ?", (row,))
            again = await llm.embed(["a"], model="e1", stage="embed")
            # ... once: the new vector replaces the row (it stayed, and was paid for every time)
            third = await llm.embed(["a"], model="e1", stage="embed")
    assert again == third == [[1.0, 1.0]] and len(endpoint.bodies) == 2


@pytest.mark.parametrize("row", ['{"not": "an answer"}', '{"text": "cut sh'])
async def test_an_unreadable_cached_answer_is_asked_again_once(tmp_path, row):
    # The row stayed (INSERT OR IGNORE), so the question was paid for on every ask.
    endpoint = Endpoint()
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            await llm.chat(ask(), model="m1", stage="s")
            store.conn.execute("UPDATE llm_cache SET response = ?", (row,))
            again = await llm.chat(ask(), model="m1", stage="s")
            third = await llm.chat(ask(), model="m1", stage="s")
    assert not again.cached and third.cached and third.text == again.text
    assert len(endpoint.requests) == 2


async def _three_identical_calls(llm, caught: type[Exception]) -> list[str]:
    """Three identical calls at once, sharing one request: the errors (``caught``) they raised."""
    errors: list[str] = []

    async def one() -> None:
        try:
            await llm.chat(ask(), model="m1", stage="s")
        except caught as e:
            errors.append(str(e))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    return errors


async def test_callers_sharing_a_refused_request_count_one_call_and_one_error(tmp_path):
    # Three identical calls share one request the endpoint refused: each waiter was recorded as
    # a failed call of its own, so the stats and `status` said 3 calls, 3 errors of one request
    # (identical calls sharing a usable answer count it paid once, the waiters' rows cached).
    from streamrag.index_rows import usage_rows

    endpoint = Endpoint(httpx.Response(400, json={"error": {"message": "bad request"}}), latency=0.1)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            errors = await _three_identical_calls(llm, LLMError)
            run = llm.stats["s"]
    rows = calls(store)
    assert len(endpoint.requests) == 1 and len(errors) == 3   # each caller failed
    assert (run["calls"], run["cached"], run["errors"]) == (1, 0, 1), run
    (usage,) = usage_rows(store)
    assert (usage["calls"], usage["cached"], usage["errors"]) == (1, 0, 1), usage
    # Every caller has its row, the waiters' marked as sharing it (cached: they asked nothing).
    assert len(rows) == 3 and all(r["error"] == errors[0] for r in rows)
    assert sorted(r["cached"] for r in rows) == [0, 1, 1]


async def test_callers_sharing_a_content_filter_s_stop_count_it_unusable_once(tmp_path):
    # Three identical calls share one request a content filter stopped: each waiter's row was an
    # unusable answer of its own, so status and the estimate counted three stops of one.
    from streamrag.index_rows import asked_again, unusable_answers, unusable_calls, usage_rows

    filtered = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "According to"},
                                                  finish_reason="content_filter"))
    endpoint = Endpoint(filtered, latency=0.1)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            errors = await _three_identical_calls(llm, LLMOutputError)
            stats = llm.stats
            await llm.chat(ask(), model="m1", stage="s")   # asked again later in the run, answered
            run = llm.stats["s"]
    assert len(endpoint.requests) == 2 and len(errors) == 3
    # The cache answered none of them: status's cached (and hit rate) said 2, the run's 0; the
    # waiters, which asked nothing, are calls of neither (the stop and the call answered later).
    (usage,) = usage_rows(store)
    assert (usage["calls"], usage["cached"]) == (run["calls"], run["cached"]) == (2, 0), (usage, run)
    assert unusable_calls(store) == 1 and unusable_answers(store)[("s", "m1")][1] == 1
    assert asked_again(store) == 1   # (of the unusable answers: not the waiters')
    # The waiters' rows are cached, as those of a usable answer shared; each call failed all the same.
    assert sorted(r["cached"] for r in calls(store)) == [0, 0, 1, 1]
    assert stats["s"]["errors"] == stats["s"]["unusable"] == 1 and ends_outage(stats), stats


@pytest.mark.parametrize("waiting", [2, 4])
async def test_a_content_filter_s_stop_shared_by_identical_calls_is_one_error_in_every_count(tmp_path, waiting):
    # One request a content filter stopped, shared by identical calls: `status` counted it
    # unusable once, but the run's stats counted each waiter (errors and unusable 1 + waiting),
    # so its end line, index --json and the watch's lines said 3 unusable answers of one stop;
    # and `status` said errors 3 beside unusable 1, two calls the endpoint failed.
    from streamrag.daemon import _failed_ahead
    from streamrag.status import format_status, gather_status
    from streamrag.watch_lines import calls_failed, calls_said, paid

    filtered = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "According to"},
                                                  finish_reason="content_filter"))
    endpoint = Endpoint(filtered, latency=0.1)
    caught: list[LLMOutputError] = []

    async def one() -> None:
        try:
            await llm.chat(ask(), model="m1", stage="s")
        except LLMOutputError as e:
            caught.append(e)

    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            async with anyio.create_task_group() as tg:
                for _ in range(1 + waiting):
                    tg.start_soon(one)
            stats = llm.stats
    assert len(endpoint.requests) == 1 and len(caught) == 1 + waiting   # each caller failed
    run = stats["s"]
    assert (run["calls"], run["cached"], run["errors"], run["unusable"]) == (1, 0, 1, 1), run
    # `status --json` of the same index says what the run said.
    info = gather_status(store)
    assert (info["llm"]["calls"], info["llm"]["cached"], info["llm"]["errors"], info["unusable"]) == \
        (run["calls"], run["cached"], run["errors"], run["unusable"]), info
    calls_line = next(line for line in format_status(info, tmp_path / "index.db").splitlines()
                      if line.startswith("  LLM calls"))
    assert calls_line.endswith("; 1 answer unusable (in errors)"), calls_line
    # The watch's lines: one failed call, an unusable answer, no endpoint error claimed.
    assert calls_failed(stats) == 1 and ends_outage(stats)
    assert calls_said(paid(stats), 0, stats) == "1 LLM call, failed"
    assert _failed_ahead(1 + waiting, stats, "the sync") == \
        f"; {1 + waiting} chunks failed (the model's answers were unusable): the sync tries them again"


async def test_without_a_store_nothing_is_cached_or_recorded(tmp_path):
    endpoint = Endpoint()
    settings = LLMSettings(api_base=API, requests_per_minute=0, tokens_per_minute=0)
    with anyio.fail_after(5):
        async with LLMClient(settings, "", transport=httpx.MockTransport(endpoint)) as llm:
            await llm.chat(ask(), model="m1", stage="s")
            await llm.chat(ask(), model="m1", stage="s")
    assert len(endpoint.requests) == 2
    assert "authorization" not in endpoint.requests[0][1].headers
    assert llm.stats["s"]["calls"] == 2 and llm.stats["s"]["prompt_tokens"] == 34


async def test_cache_off_still_records(tmp_path):
    endpoint = Endpoint()
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, cache=False) as (llm, store):
            await llm.chat(ask(), model="m1", stage="s")
            await llm.chat(ask(), model="m1", stage="s")
    assert len(endpoint.requests) == 2
    assert len(calls(store)) == 2 and store.scalar("SELECT count(*) FROM llm_cache") == 0


async def test_urls_and_auth_headers(tmp_path):
    endpoint = Endpoint()
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            await llm.chat(ask(), model="m1", stage="s")
        async with client(tmp_path, endpoint, api_version="2024-06-01") as (llm, _):
            await llm.embed(["a"], model="e1", stage="embed")
    openai_request, azure_request = (r for _, r, _ in endpoint.requests)
    assert str(openai_request.url) == f"{API}/chat/completions"
    assert openai_request.headers["authorization"] == "Bearer sk-test"
    assert str(azure_request.url) == f"{API}/embeddings?api-version=2024-06-01"
    assert azure_request.headers["api-key"] == "sk-test"
    assert "authorization" not in azure_request.headers


@pytest.mark.parametrize("azure", [dict(api_version="2024-10-21"),
                                   dict(api_base="https://res.openai.azure.com/openai/v1")],
                         ids=["api_version", "v1_host"])
async def test_an_azure_request_always_sends_a_max_tokens_and_books_it(tmp_path, azure):
    # Azure books a request as it comes at its prompt plus max_tokens, and one without max_tokens
    # at the model's whole context, while the client booked the prompt and the answers' mean
    # (256 before any): the deployment's minute was full long before the client's. Now a request
    # that sets none sends AZURE_MAX_TOKENS (max_completion_tokens, with the reasoning's room,
    # to a model that refuses max_tokens), booked as sent; its cache key is the request as asked.
    endpoint = Endpoint(*[refusing("max_tokens")] * 4)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, tokens_per_minute=100000, **azure) as (llm, store):
            llm._tpm.clock = lambda: 0.0
            await llm.chat(ask(), model="gpt-4o", stage="extract")
            booked = llm._tpm.total
            await llm.chat(ask("reason"), model="o3-mini", stage="extract")
            await llm.chat(ask("short"), model="gpt-4o", stage="check", max_tokens=3)
            keys = [r["cache_key"] for r in calls(store)]
        async with client(tmp_path, Endpoint()) as (other, _):   # (not Azure: as asked)
            cached = await other.chat(ask(), model="gpt-4o", stage="extract")
    prompt = count_message_tokens(ask(), llm.encoding)
    assert endpoint.bodies[0]["max_tokens"] == llm_module.AZURE_MAX_TOKENS
    assert booked == prompt + llm_module.AZURE_MAX_TOKENS   # (kept: Azure keeps it booked)
    assert endpoint.bodies[-2]["max_completion_tokens"] == llm_module.AZURE_MAX_TOKENS + \
        model_quirks.REASONING_ALLOWANCE and "max_tokens" not in endpoint.bodies[-2]
    assert endpoint.bodies[-1]["max_tokens"] == 3   # (a max asked for is sent as it is)
    assert cached.cached and keys[0] == cached.key


def capped_at_4096(answer: httpx.Response):
    """An Azure deployment of a model whose answers are capped at 4096 tokens (gpt-35-turbo,
    gpt-4-turbo, the first gpt-4o): a larger max_tokens is a 400, else ``answer``."""
    def reply(body: dict) -> httpx.Response:
        if body.get("max_tokens", 0) > 4096:
            return httpx.Response(400, json={"error": {
                "message": f"max_tokens is too large: {body['max_tokens']}. This model supports at most "
                           "4096 completion tokens, whereas you provided " f"{body['max_tokens']}.",
                "type": "invalid_request_error", "param": "max_tokens", "code": None}})
        return answer
    return reply


def cut_at(max_tokens: int, text: str = "(Paris, Fra") -> httpx.Response:
    """An answer cut off at ``max_tokens``, as its usage says."""
    usage = {"prompt_tokens": 17, "completion_tokens": max_tokens, "total_tokens": 17 + max_tokens}
    return httpx.Response(200, json={**chat_with(message={"role": "assistant", "content": text},
                                                 finish_reason="length"), "usage": usage})


def writes(tokens: int, text: str = "(Paris, France)"):
    """A model whose answer is ``tokens`` long: cut off at any max_tokens below that."""
    def reply(body: dict) -> httpx.Response:
        if body["max_tokens"] < tokens:
            return cut_at(body["max_tokens"])
        return httpx.Response(200, json=chat_body(text, usage={"prompt_tokens": 17, "completion_tokens": tokens,
                                                               "total_tokens": 17 + tokens}))
    return reply


def cut_answer(tokens: int) -> Answer:
    return Answer("(Paris, Fra", "length", 17, tokens)


def test_more_room_doubles_a_max_the_caller_asked_for_after_any_cut():
    more_room = llm_module.more_room
    assert more_room(CUT_OFF, cut_answer(1000), False, 1000, asked=True) == 2000
    assert more_room(CUT_OFF, cut_answer(5), False, 1000, asked=True) == 2000    # broken off before it too
    assert more_room(CUT_OFF, cut_answer(2000), False, 2000, asked=True) == 4000  # (each try twice the last)


def test_more_room_doubles_azures_own_max_only_when_the_answer_reached_it():
    more_room, azure = llm_module.more_room, llm_module.AZURE_MAX_TOKENS
    assert more_room(CUT_OFF, cut_answer(azure), False, azure, asked=False) == 2 * azure
    assert more_room(CUT_OFF, cut_answer(2 * azure), False, 2 * azure, asked=False) == 4 * azure
    # Broken off before it (the provider, a context full): asked again as it was.
    assert more_room(CUT_OFF, cut_answer(azure - 1), False, azure, asked=False) is None
    assert more_room(CUT_OFF, cut_answer(azure + 1), False, 2 * azure, asked=False) is None
    # Its counts counted here (the server said none) tell nothing: room, as for an answer that reached it.
    assert more_room(CUT_OFF, cut_answer(5), True, azure, asked=False) == 2 * azure


def test_more_room_counts_a_reasoning_models_room_beyond_the_max_as_sent():
    # Sent max_completion_tokens = max + REASONING_ALLOWANCE; its counts include the reasoning.
    more_room, azure, extra = llm_module.more_room, llm_module.AZURE_MAX_TOKENS, model_quirks.REASONING_ALLOWANCE
    assert more_room(CUT_OFF, cut_answer(azure + extra), False, azure, asked=False, extra=extra) == 2 * azure
    assert more_room(CUT_OFF, cut_answer(5000), False, azure, asked=False, extra=extra) is None
    assert more_room(CUT_OFF, cut_answer(5000), False, azure, asked=False) == 2 * azure   # (without: reached)
    assert more_room(CUT_OFF, cut_answer(5), False, azure, asked=True, extra=extra) == 2 * azure


def test_more_room_gives_none_to_an_answer_not_cut_at_a_max_sent():
    more_room = llm_module.more_room
    assert more_room(CUT_OFF_UNASKED, cut_answer(500), False, None, asked=False) is None   # none sent
    assert more_room(CUT_OFF, cut_answer(500), False, None, asked=False) is None
    assert more_room("unusable answer: rejected", cut_answer(1000), False, 1000, asked=True) is None


async def test_an_answer_cut_at_the_azure_max_gets_twice_the_room_and_is_whole(tmp_path):
    # An extraction running past AZURE_MAX_TOKENS (sent though no setting asked for it) was asked
    # once more with the same 4096, cut again, and its chunk failed, where before any max was sent
    # a model that writes more (gpt-4o-2024-08-06, gpt-4.1, the o-series) answered it whole. Now
    # it gets twice the room, as a cut answer of a caller's max does; the answer is cached under
    # the request as asked.
    endpoint = Endpoint(*[writes(5000)] * 2)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version="2024-10-21") as (llm, store):
            result = await llm.chat(ask(), model="gpt-4o", stage="extract")
            again = await llm.chat(ask(), model="gpt-4o", stage="extract")
            assert llm.stats["extract"]["asked_again"] == 1
    assert result.text == "(Paris, France)" and again.cached
    assert [b["max_tokens"] for b in endpoint.bodies] == [llm_module.AZURE_MAX_TOKENS, 2 * llm_module.AZURE_MAX_TOKENS]
    # Cut at every room (three tries), the error says the rooms and what to lower: no setting
    # sets this max.
    endpoint = Endpoint(*[writes(100_000)] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path / "more", endpoint, api_version="2024-10-21") as (llm, _):
            with pytest.raises(LLMOutputError) as e:
                await llm.chat(ask(), model="gpt-4.1", stage="extract")
    assert [b["max_tokens"] for b in endpoint.bodies] == [4096, 8192, 16384]
    said = str(e.value)
    assert "in 3 tries" in said and "cut off at max_tokens=4096 and at 16384 on the last try" in said, said
    assert "lower index.chunk_size" in said and "raise" not in said


async def test_an_answer_cut_at_the_azure_max_of_a_model_refusing_more_says_what_to_lower(tmp_path):
    # A model capped at 4096 (gpt-35-turbo, gpt-4-turbo, the first gpt-4o) refuses the 8192 a
    # cut answer is asked again with: that 400 ends the tries with the cut's error, which names
    # the setting to lower (none sets this max), not the 400.
    endpoint = Endpoint(*[capped_at_4096(cut_at(4096))] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version="2024-10-21") as (llm, store):
            with pytest.raises(LLMOutputError) as e:
                await llm.chat(ask(), model="gpt-4o", stage="extract")
            errors = [c["error"] for c in calls(store)]
    assert [b["max_tokens"] for b in endpoint.bodies] == [4096, 8192]
    said = str(e.value)
    assert "in 1 try" in said and "it was cut off at max_tokens=4096, and the model refused 8192" in said, said
    assert "streamrag sends Azure OpenAI max_tokens=4096" in said and "lower index.chunk_size" in said
    assert "raise" not in said and errors[0] == CUT_OFF and len(errors) == 2
    assert not model_quirks.server_cuts(API, "gpt-4o")   # (no server's limit)


async def test_an_answer_broken_off_before_the_azure_max_comes_whole_when_asked_again(tmp_path):
    cut = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "(Paris, Fra"},
                                             finish_reason="length"))
    endpoint = Endpoint(capped_at_4096(cut), capped_at_4096(httpx.Response(200, json=chat_body("(Paris, France)"))))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version="2024-10-21") as (llm, store):
            result = await llm.chat(ask(), model="gpt-4o", stage="glean")
            assert llm.stats["glean"]["asked_again"] == 1
    assert result.text == "(Paris, France)"
    assert [b["max_tokens"] for b in endpoint.bodies] == [llm_module.AZURE_MAX_TOKENS] * 2


async def test_answers_broken_off_before_the_azure_max_twice_are_said_so(tmp_path):
    # Cut (finish_reason length) at 5 tokens, far before the 4096 sent: more room is no help and
    # a model capped at 4096 would refuse it; asked once more as it was, then the error says the
    # max did not cut them (it said "cut off at max_tokens=4096" and "lower index.chunk_size" only).
    cut = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "(Paris, Fra"},
                                             finish_reason="length"))
    endpoint = Endpoint(*[capped_at_4096(cut)] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version="2024-10-21") as (llm, store):
            with pytest.raises(LLMOutputError) as e:
                await llm.chat(ask(), model="gpt-4o", stage="extract")
            errors = [c["error"] for c in calls(store)]
    assert [b["max_tokens"] for b in endpoint.bodies] == [llm_module.AZURE_MAX_TOKENS] * 2
    said = str(e.value)
    assert "in 2 tries" in said and "cut off (finish_reason length) before max_tokens=4096" in said, said
    # The model's context filling up stops an answer so too (Azure AI Foundry), which a rerun does
    # not help: what shortens the request comes first (it said "the provider stopped them; run the
    # same command again later, lower index.chunk_size ...").
    assert ("the provider or the model's context stopped them; lower index.chunk_size (a shorter chunk's "
            "extraction is shorter), run the same command again later, or try another model") in said, said
    assert "raise" not in said and errors == [CUT_OFF] * 2 and not model_quirks.server_cuts(API, "gpt-4o")


async def test_a_reasoning_models_answer_broken_off_before_its_azure_max_is_not_given_more_room(tmp_path):
    # A model that refuses max_tokens is sent max_completion_tokens 4096 + REASONING_ALLOWANCE,
    # and its usage counts the reasoning: an answer cut at 5,000 tokens of the 12,288 sent was
    # taken as one that reached Azure's 4096, asked again with twice the room (booked so) and a
    # third time, where an answer broken off before the max is asked once more as it was.
    model_quirks.REFUSED[(API, "o3")] = {"max_tokens"}

    def broken(body: dict) -> httpx.Response:
        usage = {"prompt_tokens": 17, "completion_tokens": 5000, "total_tokens": 5017}
        return httpx.Response(200, json={**chat_with(message={"role": "assistant", "content": "(Paris, Fra"},
                                                     finish_reason="length"), "usage": usage})

    endpoint = Endpoint(*[broken] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version="2024-10-21") as (llm, _):
            with pytest.raises(LLMOutputError) as e:
                await llm.chat(ask(), model="o3", stage="extract")
    sent = llm_module.AZURE_MAX_TOKENS + model_quirks.REASONING_ALLOWANCE
    assert [b["max_completion_tokens"] for b in endpoint.bodies] == [sent] * 2
    assert f"cut off (finish_reason length) before max_completion_tokens={sent}" in str(e.value), str(e.value)
    # Cut at the max sent (its reasoning's room too), it gets twice the room, as before.
    endpoint = Endpoint(lambda body: cut_at(body["max_completion_tokens"]), httpx.Response(200, json=chat_body("ok")))
    with anyio.fail_after(5):
        async with client(tmp_path / "reached", endpoint, api_version="2024-10-21") as (llm, _):
            await llm.chat(ask(), model="o3", stage="extract")
    assert [b["max_completion_tokens"] for b in endpoint.bodies] == [sent, sent + llm_module.AZURE_MAX_TOKENS]


def test_the_advice_to_lower_chunk_size_is_given_where_a_chunk_is_the_request():
    # Written out three times in the cut-off errors, each with its own stage test (shorter_answer).
    for stage in ("extract", "glean", "claims"):
        assert llm_module._either(provider_errors.shorter_answer(stage), "try another model") == \
            "lower index.chunk_size (a shorter chunk's extraction is shorter), or try another model"
    # The gleaning check holds the chunk, but answers YES or NO: no shorter chunk shortens that.
    for stage in ("glean_check", "rate", "answer", "reduce", "embed"):
        assert provider_errors.shorter_answer(stage) == ""
        assert llm_module._either("wait", provider_errors.shorter_answer(stage), "try another model") == \
            "wait, or try another model"
    assert llm_module._either("a", "b", "c") == "a, b, or c" and llm_module._either("", "a") == "a"


@pytest.mark.parametrize("stage", ["extract", "glean", "glean_check", "claims"])
async def test_each_chunk_stage_says_chunk_size_and_the_gleaning_check_only_of_its_request(tmp_path, stage):
    # llm.CHUNK_STAGES (extract, glean, claims) and provider_errors' budgets (those and
    # glean_check) listed them apart. Each request holds a chunk (the gleaning check sends it again,
    # gleaner.check_messages): one too long for the context says to lower index.chunk_size. A cut
    # answer of each says so too, but the gleaning check's, YES or NO, which no shorter chunk shortens.
    overflow = httpx.Response(400, json={"error": {"message": "This model's maximum context length is 8192 tokens"}})
    endpoint = Endpoint(overflow, *[lambda body: cut_at(body["max_tokens"])] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMRequestError) as overflowed:
                await llm.chat(ask(), model="m1", stage=stage, max_tokens=100)
            with pytest.raises(LLMOutputError) as cut:
                await llm.chat(ask("again"), model="m1", stage=stage, max_tokens=100)
    assert "; lower index.chunk_size, or give the model a longer context" in str(overflowed.value), str(overflowed.value)
    said = str(cut.value)
    assert said.endswith("cut off at max_tokens=100 and at 400 on the last try: "
                         + ("" if stage == "glean_check" else
                            "lower index.chunk_size (a shorter chunk's extraction is shorter), or ")
                         + "try a model that writes shorter answers"), said
    assert not hasattr(llm_module, "CHUNK_STAGES")   # (listed once: provider_errors')


@pytest.mark.parametrize("stage, setting", [
    ("summarize", "lower index.summary_max_descriptions (0 takes every description) or index.summary_max_tokens"),
    ("report", "lower index.report_max_input_tokens or index.report_max_output_tokens"),
    ("rate", "lower query.map_max_tokens (the reports' lines one rating request holds)"),
    ("answer", "lower query.local_max_tokens (a local or basic search's context) or query.answer_max_tokens"),
    ("reduce", "lower query.reduce_max_tokens or query.answer_max_tokens"),
    ("embed", "lower index.chunk_size (a chunk is embedded whole)"),
    ("embed_question", "shorten the question (it is embedded whole)"),   # a query's (``query``)
])
async def test_a_context_overflow_names_the_setting_that_bounds_its_stage(tmp_path, stage, setting):
    # A rating request was told to lower index.report_max_output_tokens, though the reports' lines
    # it rates are packed to query.map_max_tokens; an embedding's overflow named query.*_max_tokens
    # (its stage was not passed on). Each now names what bounds its own request.
    overflow = httpx.Response(400, json={"error": {"message": "This model's maximum context length is 8192 tokens"}})
    endpoint = Endpoint(overflow)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, embedding_model="e1") as (llm, _):
            with pytest.raises(LLMRequestError) as e:
                if stage.startswith("embed"):
                    await llm.embed(["a chunk"], model="e1", stage=stage)
                else:
                    await llm.chat(ask(), model="m1", stage=stage, max_tokens=100)
    assert f"context allows (This model's maximum context length is 8192 tokens); {setting}, or give" \
        in str(e.value), str(e.value)


@pytest.mark.parametrize("stage, advice", [
    ("map", ": lower query.map_max_tokens (fewer reports a request, fewer points to list), or try a model "
            "that writes shorter answers"),
    ("rate", ": try a model that writes shorter answers"),
])
async def test_a_cut_off_at_a_stages_own_room_says_what_shortens_its_answer(tmp_path, stage, advice):
    # A map request's room is the code's (MAP_MAX_OUTPUT), no setting's: its answers cut off at
    # every room ended "cut off at max_tokens=1000 and at 4000 on the last try" and nothing to do.
    endpoint = Endpoint(*[lambda body: cut_at(body["max_tokens"])] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMOutputError) as e:
                await llm.chat(ask(), model="m1", stage=stage, max_tokens=1000)
    assert [b["max_tokens"] for b in endpoint.bodies] == [1000, 2000, 4000]
    assert str(e.value).endswith("cut off at max_tokens=1000 and at 4000 on the last try" + advice), str(e.value)


async def test_answers_broken_off_before_the_azure_max_count_in_a_row_only(tmp_path):
    # Broken off, then cut at the max (given twice the room), then broken off at the larger max:
    # the two were counted as "cut twice in a row" and the call ended after 3 of its 4 tries. Now
    # a cut given room restarts the count, and the fourth try comes whole. (With the usual 3
    # tries the same: a run of two needs no room between them.)
    broken = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "(Paris, Fra"},
                                                finish_reason="length"))
    whole = httpx.Response(200, json=chat_body("(Paris, France)"))
    endpoint = Endpoint(broken, lambda body: cut_at(body["max_tokens"]), broken, whole)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version="2024-10-21") as (llm, store):
            result = await llm.chat(ask(), model="gpt-4o", stage="extract", tries=4)
            errors = [c["error"] for c in calls(store)]
    azure = llm_module.AZURE_MAX_TOKENS
    assert result.text == "(Paris, France)" and errors == [CUT_OFF] * 3 + [None]
    assert [b["max_tokens"] for b in endpoint.bodies] == [azure, azure, 2 * azure, 2 * azure]


async def test_a_max_asked_for_is_still_doubled_after_a_cut_on_azure(tmp_path):
    cut = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "(Paris, Fra"},
                                             finish_reason="length"))
    endpoint = Endpoint(cut, httpx.Response(200, json=chat_body("(Paris, France)")))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version="2024-10-21") as (llm, _):
            await llm.chat(ask(), model="gpt-4o", stage="report", max_tokens=1000)
    assert [b["max_tokens"] for b in endpoint.bodies] == [1000, 2000]


@pytest.mark.parametrize("api_version", ["2024-10-21", ""], ids=["azure", "openai"])
async def test_a_larger_max_the_model_refuses_after_a_cut_says_what_the_cut_says(tmp_path, api_version):
    # A report cut at its max (3000) was asked again with 6000, which a model writing at most 4096
    # (gpt-4-turbo, on Azure and OpenAI alike) refuses: the 400 was the report's error, naming no
    # setting. Now the cut's error, saying the model's most.
    cut = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "# Report"},
                                             finish_reason="length"))
    endpoint = Endpoint(*[capped_at_4096(cut)] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version=api_version) as (llm, _):
            with pytest.raises(LLMOutputError) as e:
                await llm.chat(ask(), model="gpt-4-turbo", stage="report", max_tokens=3000,
                               budget_setting="index.report_max_output_tokens")
    assert [b["max_tokens"] for b in endpoint.bodies] == [3000, 6000]
    said = str(e.value)
    assert "in 1 try" in said and "it was cut off at max_tokens=3000, and the model refused 6000" in said, said
    assert "raise index.report_max_output_tokens as far as the model takes (less than 6000)" in said


def context_of(tokens: int, answer: httpx.Response, prompt: int = 118):
    """A deployment of a model whose context holds ``tokens`` (gpt-4-0613: 8192): a request whose
    prompt and max_tokens are more is Azure's (and OpenAI's) 400 context_length_exceeded."""
    def reply(body: dict) -> httpx.Response:
        if prompt + body["max_tokens"] > tokens:
            return httpx.Response(400, json={"error": {
                "message": f"This model's maximum context length is {tokens} tokens. However, you requested "
                           f"{prompt + body['max_tokens']} tokens ({prompt} in the messages, {body['max_tokens']} "
                           "in the completion). Please reduce the length of the messages or completion.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
        return answer
    return reply


@pytest.mark.parametrize("api_version, max_tokens", [("2024-10-21", None), ("", 5000), ("2024-10-21", 5000)],
                         ids=["azure-own", "openai-asked", "azure-asked"])
async def test_a_larger_max_overflowing_the_context_after_a_cut_says_what_the_cut_says(tmp_path, api_version,
                                                                                        max_tokens):
    # An extraction cut at Azure's 4096 was asked again with 8192, which an 8k deployment
    # (gpt-4-0613) refuses with a 400 context_length_exceeded: not the wording of a max refused,
    # so the user saw a context-length error where the cut is what to act on. Now the cut's error.
    first = max_tokens or llm_module.AZURE_MAX_TOKENS
    endpoint = Endpoint(*[context_of(8192, cut_at(first))] * 3)
    budget = "index.report_max_output_tokens" if max_tokens else ""
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version=api_version) as (llm, store):
            with pytest.raises(LLMOutputError) as e:
                await llm.chat(ask(), model="gpt-4", stage="extract", max_tokens=max_tokens, budget_setting=budget)
            errors = [c["error"] for c in calls(store)]
    assert [b["max_tokens"] for b in endpoint.bodies] == [first, 2 * first]
    said = str(e.value)
    assert ("in 1 try (stage extract, prompt -): unusable answer: cut off at max_tokens (finish_reason length)"
            in said), said
    assert (f"it was cut off at max_tokens={first}, and the model refused {2 * first} (more than its context "
            "holds beside the prompt)") in said, said
    if max_tokens:
        assert f"raise {budget} as far as the model takes (less than {2 * first})" in said
    else:
        assert "lower index.chunk_size" in said and "raise" not in said
    assert errors[0] == CUT_OFF and "context allows" in errors[1]   # (its row says the 400, as before)
    # Overflowing before any cut, the request's own error is the context's, as before.
    endpoint = Endpoint(context_of(8192, cut_at(first), prompt=8000))
    with anyio.fail_after(5):
        async with client(tmp_path / "long", endpoint, api_version=api_version) as (llm, _):
            with pytest.raises(LLMRequestError, match="longer than gpt-4's context allows"):
                await llm.chat(ask(), model="gpt-4", stage="extract", max_tokens=max_tokens, budget_setting=budget)


@pytest.mark.parametrize("status, refusal, cut_error", [
    (400, "'max_tokens' or 'max_completion_tokens' is too large: 6000. This model's maximum context length is "
          "8192 tokens and your request has 3000 input tokens (6000 > 8192 - 3000).", True),            # vLLM
    (400, "max_tokens must be less than or equal to `4096`, the maximum value for `max_tokens` is less than "
          "the `context_window` for this model", True),                                                # Groq
    (400, "max_tokens: 6000 > 4096, which is the maximum allowed number of output tokens", True),
    (422, "max_tokens: Input should be less than or equal to 4096", True),                  # pydantic's words
    (400, "This model's maximum context length is 8192 tokens. However, you requested 9118 tokens (3118 in the "
          "messages, 6000 in the completion). Please reduce the length of the messages or completion.", True),
    (400, "request (9118 tokens) exceeds the available context size (8192 tokens), try increasing it",
     True),                                       # llama.cpp's server: its prompt too long, ever a 400
    (500, "Context size has been exceeded.", False),     # llama.cpp's KV cache full: retried, as any 500
    (500, "Jinja Exception: System message must be at the beginning", False),       # another 500: retried
    (500, "This model's maximum context length is 8192 tokens. However, you requested 9118 tokens (3118 in the "
          "messages, 6000 in the completion).", True),   # a 500 wording an overflow: final, as the 400
    (422, [{"type": "less_than_equal", "loc": ["body", "max_tokens"], "msg": "Input should be less than or "
            "equal to 4096", "input": 6000, "ctx": {"le": 4096}}], True),                # FastAPI's own 422
    (400, "Invalid 'messages[1].content': string too long. Expected a string with maximum length 10485760", False),
    (400, "Invalid value for 'temperature': must be at most 2", False),
    (422, [{"type": "less_than_equal", "loc": ["body", "temperature"], "msg": "Input should be less than or "
            "equal to 2", "input": 3, "ctx": {"le": 2}}], False),
], ids=["vllm", "groq", "greater-than", "422-message", "context", "llama.cpp-400", "llama.cpp-500",
        "other-500", "overflow-500", "422-detail", "other-400", "other-param", "other-422"])
@pytest.mark.parametrize("api_version, max_tokens", [("", 3000), ("2024-10-21", None)], ids=["asked", "azure-own"])
async def test_only_a_refusal_of_the_larger_max_after_a_cut_is_the_cuts_error(tmp_path, status, refusal, cut_error,
                                                                              api_version, max_tokens):
    # The wordings MAX_TOO_LARGE names, in a 400 or a 422 (a server validating its requests with
    # pydantic: vLLM's "Input should be less than or equal to 4096" was the report's error), and
    # a context overflow, end the tries with the cut's error; any other 400 or 422 after a cut is
    # the call's error, as before: after a caller's max, or Azure's own (cut at it, given twice).
    # llama.cpp's server answers a prompt longer than its context in a 400 ("exceed_context_size_error",
    # or "invalid_request_error" before): the cut's error. Its 500 "Context size has been exceeded."
    # is its KV cache, shared by its slots, filled by the requests in progress: retried, as another
    # 500 is (here with max_retries 0: the server's error, which for that one says what to change).
    # A 500 of another server wording an overflow is final, as its 400 would be: the cut's error too
    # (it ended with "the request is longer than gpt-4-turbo's context allows", though the same
    # prompt with the smaller max fitted).
    first = max_tokens or llm_module.AZURE_MAX_TOKENS
    body = {"detail": refusal} if isinstance(refusal, list) else \
        {"error": {"message": refusal, "type": "invalid_request_error"}}
    if status == 500:
        body = {"error": {"code": 500, "message": refusal, "type": "server_error"}}
    refused = httpx.Response(status, json=body)
    endpoint = Endpoint(cut_at(first, "# Report"), refused)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_version=api_version, max_retries=0) as (llm, _):
            with pytest.raises(LLMOutputError if cut_error else LLMError) as e:
                await llm.chat(ask(), model="gpt-4-turbo", stage="report", max_tokens=max_tokens,
                               budget_setting="index.report_max_output_tokens" if max_tokens else "")
    assert [b["max_tokens"] for b in endpoint.bodies] == [first, 2 * first]
    assert (f"the model refused {2 * first}" in str(e.value)) == cut_error, str(e.value)
    if not cut_error:
        assert isinstance(e.value, LLMUnavailableError if status == 500 else LLMRequestError), repr(e.value)
    if status == 500:
        assert ("llm.concurrency" in str(e.value)) == ("Context size" in refusal), str(e.value)


def waits_of(llm: LLMClient, endpoint: Endpoint) -> list[tuple[int, float]]:
    """The client's backoffs from now on (``_backoff``, made to wait no time), each as the requests
    sent before it and the seconds it was asked to wait."""
    waits: list[tuple[int, float]] = []

    async def wait(seconds: float) -> None:
        waits.append((len(endpoint.requests), seconds))
        await anyio.sleep(0)

    llm._backoff = wait
    return waits


KV_CACHE_FULL = {"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}}


@pytest.mark.parametrize("error", [
    {"error": {"code": 500, "message": "boom", "type": "server_error"}},
    KV_CACHE_FULL,   # llama.cpp's KV cache, shared by its slots, filled by the requests in progress
], ids=["other-500", "kv-cache-full"])
async def test_a_server_error_after_a_cut_is_retried_with_the_larger_max(tmp_path, error):
    # A 500 that says no overflow (llama.cpp's template error, a crash) is no refusal of the room:
    # retried, after the backoff, and the larger max answered. Nor is llama.cpp's "Context size has
    # been exceeded.", which ended the tries with the cut's error as a refused room: its slots are
    # cleared with it, and the next try usually fits.
    first = 3000
    endpoint = Endpoint(cut_at(first, "# Report"), httpx.Response(500, json=error),
                        httpx.Response(200, json=chat_body("# Report done")))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, concurrency=4) as (llm, _):
            waits = waits_of(llm, endpoint)
            result = await llm.chat(ask(), model="m1", stage="report", max_tokens=first,
                                    budget_setting="index.report_max_output_tokens")
    assert result.text == "# Report done"
    assert [b["max_tokens"] for b in endpoint.bodies] == [first, 2 * first, 2 * first]
    # One backoff, after the 500 (the second request) and before the retry: none after the cut,
    # which is asked again at once with more room.
    assert [sent for sent, _ in waits] == [2], waits
    assert 0 <= waits[0][1] <= llm._retry_base_s   # (the first retry's: jittered up to the base)


def kv_cache_full(style: str, words: str = KV_CACHE_FULL["error"]["message"], status: int = 500) -> httpx.Response:
    """llama.cpp's 500 when its KV cache fills as it decodes (server-context.cpp), as each request
    in progress gets it: an error status, or an ``error:`` event of a stream under way; ``status``:
    another that relays its body (a gateway's)."""
    error = {**KV_CACHE_FULL["error"], "message": words}
    if style == "stream-error-event":
        return httpx.Response(200, content=b'data: {"choices": [{"index": 0, "delta": {"content": "(Par"}}]}\n\n'
                              b"error: " + json.dumps(error).encode() + b"\n\n",
                              headers={"content-type": "text/event-stream"})
    return httpx.Response(status, json={"error": error})


@pytest.mark.parametrize("style", ["status", "streamed-status", "stream-error-event"])
async def test_llama_cpps_kv_cache_full_is_retried(tmp_path, style):
    # Its 500 "Context size has been exceeded." goes to every request in progress when the KV cache
    # its slots share fills, and clears their slots: with llm.concurrency > 1 a retry usually fits.
    # It ended the call at once, saying to lower index.chunk_size.
    endpoint = Endpoint(kv_cache_full(style), httpx.Response(200, json=chat_body("(Paris, France)")))
    shown: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, concurrency=4) as (llm, store):
            waits = waits_of(llm, endpoint)
            result = await llm.chat(ask(), model="m1", stage="extract",
                                    on_delta=shown.append if style != "status" else None)
            rows = calls(store)
    assert result.text == "(Paris, France)" and len(endpoint.requests) == 2
    assert [sent for sent, _ in waits] == [1]   # the normal backoff before the retry
    assert [r["error"] for r in rows] == [None]   # one call, answered


async def test_llama_cpps_kv_cache_full_relayed_by_a_gateway_is_retried(tmp_path):
    # A proxy in front of llama.cpp passing its 500 on as a 502, the error object as it was: the
    # call ended at once, "the request is longer than m1's context allows", though a retry fits.
    endpoint = Endpoint(httpx.Response(502, json=KV_CACHE_FULL), httpx.Response(200, json=chat_body("(Paris, France)")))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, concurrency=4) as (llm, _):
            waits = waits_of(llm, endpoint)
            result = await llm.chat(ask(), model="m1", stage="extract")
    assert result.text == "(Paris, France)" and len(endpoint.requests) == 2
    assert [sent for sent, _ in waits] == [1]


# LiteLLM's proxy relaying llama.cpp's 500 (BerriAI/litellm: exception_mapping_utils.py
# _map_openai_exception, status 500; exceptions.py InternalServerError; proxy/_types.py
# ProxyException.to_dict), as an answer, or as a stream's data event once the stream is under way.
LITELLM_KV_CACHE_FULL = {"error": {"message": "litellm.InternalServerError: InternalServerError: OpenAIException - "
                                              "Context size has been exceeded.",
                                   "type": None, "param": None, "code": "500"}}


def litellm_kv_cache_full(style: str) -> httpx.Response:
    if style == "stream-data-event":
        return httpx.Response(200, content=b'data: {"choices": [{"index": 0, "delta": {"content": "(Par"}}]}\n\n'
                              b"data: " + json.dumps(LITELLM_KV_CACHE_FULL).encode() + b"\n\n",
                              headers={"content-type": "text/event-stream"})
    return httpx.Response(500, json=LITELLM_KV_CACHE_FULL)


@pytest.mark.parametrize("style", ["status", "stream-data-event"])
async def test_llama_cpps_kv_cache_full_relayed_by_litellm_is_retried_with_its_advice(tmp_path, style):
    # llama.cpp behind LiteLLM's proxy: its KV cache full came as LiteLLM's own 500, its sentence
    # quoted in the message, and ended the call at once, "the request is longer than m1's context
    # allows; ... give the model a longer context", though the next try usually fits.
    streamed = style != "status"
    endpoint = Endpoint(litellm_kv_cache_full(style), httpx.Response(200, json=chat_body("(Paris, France)")))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, concurrency=4) as (llm, _):
            waits = waits_of(llm, endpoint)
            result = await llm.chat(ask(), model="m1", stage="extract", on_delta=[].append if streamed else None)
    assert result.text == "(Paris, France)" and len(endpoint.requests) == 2
    assert [sent for sent, _ in waits] == [1]
    # Every try so: llama.cpp's advice for a crowded server, not a prompt too long.
    endpoint = Endpoint(*[lambda _body: litellm_kv_cache_full(style)] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path / "every", endpoint, concurrency=4, max_retries=2) as (llm, _):
            waits_of(llm, endpoint)
            with pytest.raises(LLMUnavailableError) as e:
                await llm.chat(ask(), model="m1", stage="extract", on_delta=[].append if streamed else None)
    said = str(e.value)
    assert len(endpoint.requests) == 3 and "failed 3 times" in said, said
    assert said.endswith("raise -c or lower -np, lower llm.concurrency (4) so fewer requests share it, or lower "
                         "index.chunk_size"), said
    assert "longer context" not in said, said


@pytest.mark.parametrize("words", [
    "Context size has been exceeded.",
    # (llama.cpp's words from 2024 into 2025, and ik_llama.cpp's: a "hard" failure, so that these
    # tries ended in the client's GaveUp, "check its logs")
    "Input prompt is too big compared to KV size. Please try increasing KV size.",
], ids=["now", "2024"])
@pytest.mark.parametrize("stage, bound", [
    ("extract", "lower index.chunk_size"),
    ("answer", "lower query.local_max_tokens (a local or basic search's context) or query.answer_max_tokens"),
])
async def test_a_kv_cache_full_to_every_try_names_the_slots_context_and_concurrency(tmp_path, monkeypatch, stage,
                                                                                     bound, words):
    # Every try so (a server whose slots' context is too small for what it is asked at once): the
    # call ends after llm.max_retries, saying what to change: the server's context per slot, the
    # requests at once, or the stage's requests. (Not "the server kept answering with errors: check
    # its logs", nor "raising llm.max_retries only waits longer".)
    # Nor are HOPELESS_TRIES of them, none answered, a sign of a server that fails everything (a
    # crowded one, up and answering): each call ends with its own advice, not the client's GaveUp.
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    tries = endpoint_health.HOPELESS_TRIES + 1
    endpoint = Endpoint(*[lambda _body: kv_cache_full("status", words)] * tries)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, concurrency=4, max_retries=tries - 1) as (llm, store):
            waits = waits_of(llm, endpoint)
            with pytest.raises(LLMUnavailableError) as e:
                await llm.chat(ask(), model="m1", stage=stage, max_tokens=100)
            hopeless = llm.hopeless
    said = str(e.value)
    assert len(endpoint.requests) == tries and [sent for sent, _ in waits] == list(range(1, tries))
    assert f"failed {tries} times, last: HTTP 500: {words}; " in said, said
    assert said.endswith("(llama.cpp: -c is split among its -np slots, or shared by them all with --kv-unified): "
                         f"raise -c or lower -np, lower llm.concurrency (4) so fewer requests share it, or {bound}"), said
    assert "check its logs" not in said and "only waits longer" not in said
    assert not hopeless and not isinstance(e.value, endpoint_health.GaveUp)
    # Not retried (llm.max_retries 0): said so, as a retry may have fitted.
    endpoint = Endpoint(kv_cache_full("status"))
    with anyio.fail_after(5):
        async with client(tmp_path / "once", endpoint, concurrency=4, max_retries=0) as (llm, _):
            with pytest.raises(LLMUnavailableError, match=r"failed 1 time, .*; not retried as llm\.max_retries = 0 "
                               r"\(a retry may fit\): the server's context filled .* lower llm\.concurrency \(4\)"):
                await llm.chat(ask(), model="m1", stage=stage, max_tokens=100)


async def _four_calls_given_up(tmp_path, endpoint, *, give_up_after_s: float) -> list[str]:
    """A first call ``endpoint`` answers, then four calls at once, each with 1,000 retries, that it
    answers with nothing usable until ``give_up_after_s`` gives the endpoint up (asserted): their
    four errors."""
    errors: list[str] = []
    one = _asking_into(errors)
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, max_retries=1000, concurrency=4,
                          give_up_after_s=give_up_after_s) as (llm, _):
            assert (await llm.chat(ask("first"), model="m1", stage="s")).text == "fine"
            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(one, llm, f"q{i}")
            assert llm.hopeless
    assert len(errors) == 4, errors[:1]
    return errors


@pytest.mark.parametrize("status", [500, 504])
async def test_a_kv_cache_full_to_every_try_for_give_up_after_s_is_given_up_on_with_its_advice(tmp_path, monkeypatch,
                                                                                             status):
    # Counted as requests to wait (a crowded server, up), tries all so for llm.give_up_after_s end
    # every call (``EndpointHealth``'s span of tries answered only with errors and requests to wait).
    # The client's error said "the server at llm.api_base answers only HTTP 500: check its logs",
    # which say only that its context filled: now what every try's error said to change. (A
    # gateway's 504 relaying it was a timeout, neither way: each call spent all its retries.)
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.02)
    endpoint = Endpoint(httpx.Response(200, json=chat_body("fine")),
                        *[lambda _body: kv_cache_full("status", status=status)] * 10_000)
    errors = await _four_calls_given_up(tmp_path, endpoint, give_up_after_s=0.3)
    assert all(" asked to wait): the server's context filled with the requests it was answering at once "
               "(llama.cpp: -c is split among its -np slots, or shared by them all with --kv-unified): raise -c or "
               "lower -np, lower llm.concurrency (4) so fewer requests share it, or lower index.chunk_size or "
               "query.*_max_tokens; raising llm.give_up_after_s (0.3 s) waits longer" in e for e in errors), errors[0]
    assert not any("check its logs" in e for e in errors), errors[0]


@pytest.mark.parametrize("base, azure", [
    ("https://res.openai.azure.com/openai/v1", True),
    ("https://RES.OpenAI.Azure.com/openai/v1", True),
    ("https://res.openai.azure.us/openai/v1", True),           # Azure Government
    ("https://res.openai.azure.cn/openai/v1", True),           # Azure China
    ("https://res.cognitiveservices.azure.us/openai/v1", True),
    ("https://res.services.ai.azure.com/openai/v1", True),     # Azure AI Foundry
    ("https://gw.azure-api.net/openai/v1", True),              # API Management, no api-version
    ("https://gw.azure-api.us/ai/v1", True),
    ("https://api.openai.com/v1", False),
    ("https://openai.azure.com.evil.example/v1", False),
    ("https://res.openai.azure.com.evil.example/v1", False),
    ("https://gw.azure-api.net.evil.example/v1", False),
    ("https://res.notopenai.azure.example/v1", False),
    ("https://myazure-api.net/v1", False),
])
async def test_an_azure_host_is_known_by_its_name_in_each_cloud_and_no_other_is(tmp_path, base, azure):
    # Azure Government's and China's hosts, and API Management's gateways (no api-version to tell
    # them by), sent no max_tokens: Azure booked each request at the model's whole context.
    endpoint = Endpoint()
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_base=base) as (llm, _):
            await llm.chat(ask(), model="gpt-4o", stage="extract")
    assert endpoint.bodies[0].get("max_tokens") == (llm_module.AZURE_MAX_TOKENS if azure else None)


@pytest.mark.parametrize("base, setting, capped", [
    ("https://gw.azure-api.net/openai/v1", "auto", True),
    ("https://gw.azure-api.net/openai/v1", False, False),    # a gateway in front of another provider
    ("https://res.openai.azure.com/openai/v1", False, False),
    ("https://llm.example.com/v1", True, True),               # Azure behind a host of one's own
    ("https://llm.example.com/v1", "auto", False),
])
async def test_llm_azure_says_whether_the_endpoint_gets_azures_max_tokens(tmp_path, base, setting, capped):
    # An API Management gateway (*.azure-api.net) in front of a provider that is not Azure got
    # AZURE_MAX_TOKENS on every request that sets none, and no setting turned it off.
    endpoint = Endpoint()
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_base=base, azure=setting) as (llm, _):
            await llm.chat(ask(), model="gpt-4o", stage="extract")
            await llm.chat(ask("short"), model="gpt-4o", stage="check", max_tokens=3)
    assert endpoint.bodies[0].get("max_tokens") == (llm_module.AZURE_MAX_TOKENS if capped else None)
    assert endpoint.bodies[1]["max_tokens"] == 3   # (a max asked for is sent as it is, either way)


def test_no_api_base_is_a_config_error():
    with pytest.raises(ConfigError, match="set llm.api_base"):
        LLMClient(LLMSettings(api_base=""), "")


def test_retry_after_parsing():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    now = 1_700_000_000.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now=now) == pytest.approx(10.0)
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:00 GMT", now=now) == 0.0


@pytest.mark.parametrize("detail", ["[Errno -2] Name or service not known",
                                    "[Errno -3] Temporary failure in name resolution",
                                    "[Errno 8] nodename nor servname provided, or not known",
                                    "[Errno 11001] getaddrinfo failed",
                                    # musl (Alpine's images): "nothing answers at ...; start the server"
                                    "[Errno -2] Name does not resolve", "[Errno -3] Try again"])
async def test_a_host_name_that_cannot_be_looked_up_is_said_as_one(tmp_path, detail):
    # `--api-base https://api.opnai.com/v1` (or no network) was told "nothing answers at ...;
    # start the server", which no one can do for a provider's host: the name is to check.
    endpoint = Endpoint(*[httpx.ConnectError(detail) for _ in range(5)])
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, max_retries=6) as (llm, _):
            with pytest.raises(LLMUnavailableError) as e:
                await llm.chat(ask(), model="m1", stage="s")
    said = str(e.value)
    assert "the host name llm.test could not be looked up" in said and "start the server" not in said, said
    assert "check its spelling in llm.api_base" in said, said


async def test_a_refused_connection_fails_fast_until_the_endpoint_has_answered(tmp_path):
    refused = [httpx.ConnectError("connection refused") for _ in range(20)]
    endpoint = Endpoint(*refused)
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, max_retries=6) as (llm, _):
            with pytest.raises(LLMUnavailableError, match="nothing answers at .*api_base"):
                await llm.chat(ask(), model="m1", stage="s")
    assert len(endpoint.requests) == 3          # not 7: nothing listens there

    # Once the endpoint has answered, a refused connection is a restart: the full budget applies.
    endpoint = Endpoint(httpx.Response(200, json=chat_body("up")), *refused[:5])
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, max_retries=6) as (llm, _):
            await llm.chat(ask("first"), model="m1", stage="s")
            answer = await llm.chat(ask("second"), model="m1", stage="s")
    assert answer.text == "echo: second" and len(endpoint.requests) == 7


async def _refused_after_answering(tmp_path, detail: str, *, retried: bool, stopped: bool = False):
    """The LLMUnavailableError (pytest's ExceptionInfo) of a client of an endpoint that answered
    ten minutes ago and now fails every connection with ``detail``; ``retried``: a daemon's;
    ``stopped``: one whose daemon has stopped."""
    endpoint = Endpoint(*[httpx.ConnectError(detail) for _ in range(5)])
    store = Store(tmp_path / "index.db")
    async with Writer(store) as writer:
        async with LLMClient(LLMSettings(api_base="https://llm.test/v1", requests_per_minute=0,
                                         tokens_per_minute=0), "sk-test", store=store, writer=writer,
                             run_id="run-1", retry_base_s=0.05, transport=httpx.MockTransport(endpoint),
                             retried=retried, answered_at=time.time() - 600,
                             stopped=(lambda: stopped)) as llm:
            with anyio.fail_after(10), pytest.raises(LLMUnavailableError) as e:
                await llm.chat(ask(), model="m1", stage="s")
    store.close()
    return e


@pytest.mark.parametrize("detail, said", [
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired",
     "https://llm.test/v1/chat/completions: the server's certificate is not trusted ("),
    ("[SSL: WRONG_VERSION_NUMBER] wrong version number",
     "https://llm.test/v1/chat/completions: the server there speaks plain HTTP, not HTTPS (")])
async def test_a_tls_failure_of_an_endpoint_that_answered_before_is_said_as_one(tmp_path, detail, said):
    # A daemon's client knows the endpoint answered before (``answered_at``): a certificate
    # expired since was said "stopped answering (it last answered at ...): every connection is
    # refused (...); retried until it answers", not that the certificate is not trusted.
    e = await _refused_after_answering(tmp_path, detail, retried=True)
    assert str(e.value).startswith(said) and "stopped answering" not in str(e.value), e.value


@pytest.mark.parametrize("retried", [True, False])
async def test_a_host_name_not_looked_up_after_it_answered_is_said_as_one(tmp_path, retried):
    # api.openai.com answered the last run, and this machine is offline now: "stopped answering
    # (...): every connection is refused ([Errno -3] Temporary failure in name resolution); start
    # the server again", of a provider's host.
    e = await _refused_after_answering(tmp_path, "[Errno -3] Temporary failure in name resolution", retried=retried)
    said = str(e.value)
    assert said.startswith("https://llm.test/v1/chat/completions: the host name llm.test could not be looked up "
                           "(connection failed (ConnectError: [Errno -3] Temporary failure in name resolution)), "
                           "though it answered at "), said
    assert "start the server" not in said and "check that this machine is online (its network and DNS)" in said, said
    assert said.endswith("retried until it answers") == retried and e.value.run_again != retried, said


@pytest.mark.parametrize("detail, run_again", [
    ("[Errno 111] Connection refused", True),
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired", False)])
async def test_an_unavailable_error_says_whether_its_words_end_with_run_again(tmp_path, detail, run_again):
    # An index's client (not retried) of an endpoint that answered before: "start the server again, then
    # run the same command (finished work is kept)" of a stopped server, carried as ``run_again``
    # for the run's own words not to repeat it (``Indexer._unavailable`` read it in the text); a
    # TLS failure says what to fix instead, and no such words.
    e = await _refused_after_answering(tmp_path, detail, retried=False)
    assert e.value.run_again is run_again
    assert str(e.value).endswith(endpoint_health.RUN_AGAIN) is run_again, e.value


@pytest.mark.parametrize("retried, stopped, then", [(False, False, endpoint_health.RUN_AGAIN),
                                                      (True, True, endpoint_health.START_AGAIN)])
async def test_a_stopped_server_s_error_names_what_to_start_again_without_it(tmp_path, retried, stopped, then):
    # A stopped watch's error said "start it again, then start the watch again (it was stopped;
    # ...)": "it" the server, then the watch. Now each is named: the server, then the command.
    e = await _refused_after_answering(tmp_path, "[Errno 111] Connection refused", retried=retried, stopped=stopped)
    advice = str(e.value).rsplit("); ", 1)[1]
    assert advice == f"start the server again, {then}", advice
    assert " it " not in f" {advice} ".replace("(", " ").replace(";", " "), advice


async def test_a_restarted_endpoint_is_waited_for_beyond_max_retries(tmp_path, monkeypatch, caplog):
    # An endpoint down 12 s during index made a call fail after 7 quick tries ("failed 7
    # time(s), last: connection failed"): refusals of an endpoint that answered before use none
    # of max_retries until the stop rule (DOWN_AFTER_S of refusals) says it has stopped.
    monkeypatch.setattr(llm_module, "REFUSED_WAIT_MAX_S", 0.02)
    refused = [httpx.ConnectError("connection refused") for _ in range(10)]
    endpoint = Endpoint(httpx.Response(200, json=chat_body("up")), *refused)
    with anyio.fail_after(3), caplog.at_level(logging.DEBUG, logger="streamrag.llm"):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, store):
            await llm.chat(ask("first"), model="m1", stage="s")
            answer = await llm.chat(ask("second"), model="m1", stage="s")
    assert answer.text == "echo: second" and len(endpoint.requests) == 12
    assert [row["error"] for row in calls(store)] == [None, None]
    lines = [r.getMessage() for r in caplog.records if "this call refused for" in r.getMessage()]
    assert len(lines) == 10 and "until it answers, or has refused every connection for 60 s" in lines[0]
    assert all(float(line.split("retry in ")[1].split()[0]) <= 0.02 for line in lines)   # capped


async def test_max_retries_0_never_retries_a_restarted_endpoint_either(tmp_path, monkeypatch):
    # "0 = never retry": a refusal of an endpoint that answered before was retried for 60 s.
    monkeypatch.setattr(llm_module, "REFUSED_WAIT_MAX_S", 0.02)
    endpoint = Endpoint(httpx.Response(200, json=chat_body("up")),
                        *[httpx.ConnectError("connection refused") for _ in range(5)])
    with anyio.fail_after(3):
        async with client(tmp_path, endpoint, max_retries=0) as (llm, _):
            await llm.chat(ask("first"), model="m1", stage="s")
            with pytest.raises(LLMUnavailableError, match="failed 1 time"):
                await llm.chat(ask("second"), model="m1", stage="s")
    assert len(endpoint.requests) == 2


async def test_after_a_restart_other_errors_still_use_up_max_retries(tmp_path, monkeypatch):
    monkeypatch.setattr(llm_module, "REFUSED_WAIT_MAX_S", 0.02)
    refused = [httpx.ConnectError("connection refused") for _ in range(6)]
    endpoint = Endpoint(httpx.Response(200, json=chat_body("up")), *refused,
                        *[httpx.Response(503, text="upstream busy")] * 3)
    with anyio.fail_after(3):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, _):
            await llm.chat(ask("first"), model="m1", stage="s")
            with pytest.raises(LLMUnavailableError, match=r"failed 9 times, last: HTTP 503"):
                await llm.chat(ask("second"), model="m1", stage="s")
    assert len(endpoint.requests) == 10   # the 6 refusals, then max_retries + 1 answers of 503


async def test_an_endpoint_refusing_longer_than_the_stop_rule_still_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(llm_module, "DOWN_AFTER_S", 0.3)
    monkeypatch.setattr(llm_module, "REFUSED_WAIT_MAX_S", 0.05)
    server = {"up": True}

    def answer(request: httpx.Request) -> httpx.Response:
        if not server["up"]:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json=chat_body("up"))

    seen: list[float] = []
    # The clock the client and its EndpointReach read (time.monotonic in their modules) moves
    # 0.1 s a try, in the test's steps: a busy machine's pause between two tries counted on the
    # real one (the span was over 1 s so) and the tries came fewer.
    clock = [1000.0]
    for module in (llm_module, endpoint_reach):
        held = types.ModuleType("time")
        held.__dict__.update(vars(time))
        held.monotonic = lambda: clock[0]
        monkeypatch.setattr(module, "time", held)

    def endpoint(request: httpx.Request) -> httpx.Response:
        clock[0] += 0.1
        seen.append(clock[0])
        return answer(request)

    with anyio.fail_after(30):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, _):
            await llm.chat(ask("first"), model="m1", stage="s")
            server["up"] = False
            with pytest.raises(LLMUnavailableError, match=r"refused every connection for \d+ s.*start it again"):
                await llm.chat(ask("second"), model="m1", stage="s")
    refusals = seen[1:]
    assert len(refusals) > 3                       # beyond max_retries + 1 tries
    # (the client counts the 0.3 s from after each refusal reached it, the endpoint saw them a
    # moment before: under load the tries it saw spanned 0.29987 s)
    assert 0.25 <= refusals[-1] - refusals[0] < 1.0


async def test_a_call_refused_while_others_are_answered_still_ends(tmp_path, monkeypatch):
    # The endpoint keeps answering other calls, so it is never 'down'; the refused call's own
    # refusals are free for DOWN_AFTER_S only, then use up max_retries.
    monkeypatch.setattr(llm_module, "DOWN_AFTER_S", 0.3)
    monkeypatch.setattr(llm_module, "REFUSED_WAIT_MAX_S", 0.05)

    def endpoint(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["messages"][-1]["content"] == "stuck":
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json=chat_body("ok"))

    with anyio.fail_after(3):
        async with client(tmp_path, endpoint, max_retries=2, cache=False) as (llm, _):
            await llm.chat(ask("first"), model="m1", stage="s")

            async def others() -> None:
                while True:
                    await llm.chat(ask("other"), model="m1", stage="s")
                    await anyio.sleep(0.01)

            async with anyio.create_task_group() as tg:
                tg.start_soon(others)
                with pytest.raises(LLMUnavailableError, match=r"failed \d+ times, last: connection failed"):
                    await llm.chat(ask("stuck"), model="m1", stage="s")
                tg.cancel_scope.cancel()


# -- answers of an unexpected shape ----------------------------------------------------------
# Valid JSON of another shape raised AttributeError / KeyError / TypeError out of the client
# (index aborted, ask died with an ExceptionGroup): now such an answer cannot be read like
# invalid JSON is (recorded, retried, never cached, an LLMError), except a bad 'usage', which is
# ignored like a missing one, and content as a list of parts, whose text is taken.

def chat_with(**choice_changes) -> dict:
    body = chat_body("x")
    body["choices"][0].update(choice_changes)
    return body


def stream_events(*events: dict | str) -> httpx.Response:
    return httpx.Response(200, content=sse([*events, "[DONE]"]),
                          headers={"content-type": "text/event-stream"})


def delta(value) -> dict:
    return {"choices": [{"index": 0, "delta": value, "finish_reason": None}]}


STOP = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}

MALFORMED_CHATS = {
    "message-a-string": (chat_with(message="ok"), "the answer's 'message' is not an object (a string)"),
    "choices-an-object": ({"choices": {"0": chat_body("x")["choices"][0]}, "usage": USAGE},
                          "the answer's 'choices' is not a list (an object)"),
    "choice-a-string": ({"choices": ["ok"]}, "the answer's first choice is not an object (a string)"),
    "body-a-list": ([chat_body("x")], "the answer is not a JSON object (a list)"),
    "content-a-number": (chat_with(message={"role": "assistant", "content": 7}),
                         "the answer's 'content' is neither text nor a list of parts (a number)"),
    "content-part-a-number": (chat_with(message={"role": "assistant", "content": [1]}),
                              "the answer's 'content' has a part that is not an object (a number)"),
    "text-part-without-text": (chat_with(message={"content": [{"type": "text", "text": None}]}),
                               "the answer's 'content' has a text part without text (null)"),
}
MALFORMED_STREAMS = {
    "delta-a-string": ([delta("hello"), STOP], "a streamed event's 'delta' is not an object (a string)"),
    "choices-an-object": ([{"choices": {"0": {"delta": {"content": "hi"}}}}, STOP],
                          "a streamed event's 'choices' is not a list (an object)"),
    "choice-a-list": ([{"choices": [[1]]}, STOP], "a streamed event's choice is not an object (a list)"),
    "content-an-object": ([delta({"content": {"text": "hi"}}), STOP],
                          "a streamed event's 'content' is neither text nor a list of parts (an object)"),
}


def malformed_responses(case: str, streamed: bool) -> list[httpx.Response]:
    if streamed:
        events, _ = MALFORMED_STREAMS[case]
        return [stream_events(*events) for _ in range(3)]
    body, _ = MALFORMED_CHATS[case]
    return [httpx.Response(200, json=body) for _ in range(3)]


@pytest.mark.parametrize(("streamed", "case"), [(False, c) for c in MALFORMED_CHATS]
                         + [(True, c) for c in MALFORMED_STREAMS],
                         ids=[f"post-{c}" for c in MALFORMED_CHATS]
                         + [f"stream-{c}" for c in MALFORMED_STREAMS])
async def test_an_answer_of_another_shape_cannot_be_read_and_is_retried(tmp_path, streamed, case):
    expected = (MALFORMED_STREAMS if streamed else MALFORMED_CHATS)[case][1]
    shown: list[str] = []
    on_delta = shown.append if streamed else None
    # Every try malformed: an LLMError (no AttributeError/KeyError/TypeError), one line, recorded.
    endpoint = Endpoint(*malformed_responses(case, streamed))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, store):
            with pytest.raises(LLMUnavailableError) as err:
                await llm.chat(ask(), model="m1", stage="s", on_delta=on_delta)
            # A malformed try, then a good one: the good one is taken and cached.
            good = stream_of(["echo: ", "again"]) if streamed else httpx.Response(
                200, json=chat_body("echo: again"))
            endpoint.script = [*malformed_responses(case, streamed)[:1], good]
            result = await llm.chat(ask("again"), model="m1", stage="s", on_delta=on_delta)
            again = await llm.chat(ask("again"), model="m1", stage="s")
    message = str(err.value)
    assert expected in message and "could not be read" in message and "\n" not in message
    assert len(endpoint.requests) == 3 + 2
    rows = calls(store)
    assert rows[0]["error"] == message and rows[0]["cached"] == 0
    assert result.text == "echo: again" and again.cached
    assert store.scalar("SELECT count(*) FROM llm_cache") == 1     # only the good answer
    assert llm.stats["s"]["errors"] == 1


@pytest.mark.parametrize("usage", ["lots", [1, 2], 3, True, {"prompt_tokens": "7",
                                                             "completion_tokens": True}])
async def test_a_bad_usage_is_ignored_like_a_missing_one(tmp_path, usage):
    posted = chat_body("one two three", usage=None)
    posted["usage"] = usage
    streamed = stream_events(delta({"content": "one two "}), delta({"content": "three"}), STOP,
                             {"choices": [], "usage": usage})
    endpoint = Endpoint(httpx.Response(200, json=posted), streamed)
    shown: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            first = await llm.chat(ask("a"), model="m1", stage="s")
            second = await llm.chat(ask("b"), model="m1", stage="s", on_delta=shown.append)
    assert len(endpoint.requests) == 2      # not retried: the answers are good
    for result, question in ((first, "a"), (second, "b")):
        assert result.text == "one two three" and result.finish_reason == "stop"
        assert result.prompt_tokens == count_message_tokens(ask(question))
        assert result.completion_tokens == 3
    assert "".join(shown) == "one two three"
    assert [r["error"] for r in calls(store)] == [None, None]
    assert [r["completion_tokens"] for r in calls(store)] == [3, 3]


CONTENT_PARTS = [{"type": "text", "text": "o"}, {"type": "image_url", "image_url": {"url": "x"}},
                 {"type": "reasoning", "text": "NOT THIS"}, {"text": "k"}, {"type": "output_text", "text": "!"},
                 {"type": "text", "text": {"value": "?", "annotations": []}}]   # the last two: other APIs' shapes


async def test_content_as_a_list_of_parts_is_joined(tmp_path):
    posted = chat_with(message={"role": "assistant", "content": CONTENT_PARTS})
    streamed = stream_events(delta({"role": "assistant", "content": CONTENT_PARTS[:3]}),
                             delta({"content": CONTENT_PARTS[3:]}), STOP)
    endpoint = Endpoint(httpx.Response(200, json=posted), streamed)
    shown: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            first = await llm.chat(ask("a"), model="m1", stage="s")
            second = await llm.chat(ask("b"), model="m1", stage="s", on_delta=shown.append)
            cached = await llm.chat(ask("a"), model="m1", stage="s")
    assert first.text == second.text == cached.text == "ok!?"
    assert shown == ["o", "k!?"]
    assert cached.cached and len(endpoint.requests) == 2


async def test_a_non_string_finish_reason_is_taken_as_none(tmp_path):
    endpoint = Endpoint(httpx.Response(200, json=chat_with(finish_reason=["stop"])))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="s")
    assert result.text == "x" and result.finish_reason is None


EMBEDDING = {"object": "embedding", "index": 0, "embedding": [1.0, 2.0]}


@pytest.mark.parametrize(("body", "expected"), [
    ({"data": ["x"]}, "embedding 0 of the answer is not an object (a string)"),
    ({"data": [{"index": 0}]}, "embedding 0 of the answer is not a list of numbers (null)"),
    ({"data": [{"index": 0, "embedding": "AAAA"}]},
     "embedding 0 of the answer is not a list of numbers (a string)"),
    ({"data": [{"index": 0, "embedding": []}]},
     "embedding 0 of the answer is not a list of numbers (an empty list)"),
    ({"data": [{"index": 0, "embedding": [1, "2"]}]},
     "not a list of numbers (a list holding other things than numbers)"),
    ({"data": [{"index": "0", "embedding": [1.0]}]}, "has an 'index' that is not a whole number"),
    ({"data": [EMBEDDING, {**EMBEDDING, "index": 1, "embedding": [1.0]}]},
     "the answer's embeddings are not all of the same length"),
    ({"data": {"0": EMBEDDING}}, "expected 1 embeddings, got none"),
    (["x"], "expected 1 embeddings, got none"),
], ids=["item-a-string", "no-embedding", "base64", "empty", "not-numbers", "index-a-string",
        "lengths-differ", "data-an-object", "body-a-list"])
async def test_an_embeddings_answer_of_another_shape_cannot_be_read(tmp_path, body, expected):
    texts = ["a", "b"] if isinstance(body, dict) and len(body["data"]) == 2 else ["a"]
    endpoint = Endpoint(*[httpx.Response(200, json=body) for _ in range(3)])
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, store):
            with pytest.raises(LLMUnavailableError) as err:
                await llm.embed(texts, model="e1")
            # A malformed try, then a good one (the echo): the good one is taken.
            endpoint.script = [httpx.Response(200, json=body)]
            vectors = await llm.embed(texts, model="e1")
    message = str(err.value)
    assert expected in message and "could not be read" in message and "\n" not in message
    assert calls(store)[0]["error"] == message
    assert vectors == [[1.0, 1.0] for _ in texts]
    assert store.scalar("SELECT count(*) FROM llm_cache") == len(texts)


@pytest.mark.parametrize("usage", ["lots", [1, 2], {"prompt_tokens": -4}])
async def test_an_embeddings_answer_with_a_bad_usage_is_counted(tmp_path, usage):
    data = [{"index": 1, "embedding": [2, 0]}, {"index": 0, "embedding": [3.5, 1]}]  # out of order
    endpoint = Endpoint(httpx.Response(200, json={"data": data, "usage": usage}))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            vectors = await llm.embed(["one", "two"], model="e1")
    assert vectors == [[3.5, 1.0], [2.0, 0.0]]
    assert calls(store)[0]["prompt_tokens"] == 2 and calls(store)[0]["error"] is None


# -- models that think aloud -----------------------------------------------------------------
@pytest.mark.parametrize("first, second", [
    # The retry thinks longer: the shown text was "The qua" + its thinking's tail.
    (["<think>Brief.</think>", "\n\nThe qua"], ["<think>Thought for much longer.</think>", "\n\nThe quay ", "was rebuilt."]),
    # Cut off inside its thinking, the retry thinking less: nothing was shown at all.
    (["<think>A long, long thought ", "that goes on"], ["<think>Short.</think>", "The quay ", "was rebuilt."]),
])
async def test_a_streamed_retry_shows_the_answer_once_and_never_the_thinking(tmp_path, first, second):
    result, deltas = await streamed_after_a_cut(tmp_path, first, second)
    assert result.text == "The quay was rebuilt." == "".join(deltas)


async def test_a_cached_answer_from_before_loses_its_thinking_too(tmp_path):
    endpoint = Endpoint(httpx.Response(200, json=chat_body("<think>secret</think>\n\nThe quay.")))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            first = await llm.chat(ask(), model="m1", stage="s")
            key = calls(store)[0]["cache_key"]
            store.conn.execute("UPDATE llm_cache SET response = ? WHERE key = ?",   # as cached before
                               (json.dumps({"text": "<think>secret</think>\n\nThe quay.", "finish_reason": "stop",
                                            "prompt_tokens": 5, "completion_tokens": 9}), key))
            llm.thinking.clear()
            shown: list[str] = []
            again = await llm.chat(ask(), model="m1", stage="s", on_delta=shown.append)
            assert "m1" in llm.thinking
    assert first.text == again.text == "The quay." == "".join(shown) and again.cached


async def test_thinking_is_counted_when_the_server_sends_no_usage(tmp_path):
    thought = "<think>" + "Let me weigh every sentence of the text. " * 40 + "</think>\n\nYES"
    endpoint = Endpoint(httpx.Response(200, json=chat_body(thought, usage=None)))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            result = await llm.chat(ask(), model="m1", stage="s")
    assert result.text == "YES" and calls(store)[0]["completion_tokens"] > 300


async def test_an_answer_that_speaks_of_a_closing_tag_comes_back_from_the_cache_whole(tmp_path):
    endpoint = Endpoint(httpx.Response(200, json=chat_body("<think>plan</think>Close it with </think> and go on.")))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            first = await llm.chat(ask(), model="m1", stage="s")
            again = await llm.chat(ask(), model="m1", stage="s", validate=lambda t: t.startswith("Close"))
    assert first.text == again.text == "Close it with </think> and go on." and again.cached
    assert len(endpoint.requests) == 1


async def test_a_model_seen_thinking_by_another_client_has_its_prompt_opened_thinking_held_back(tmp_path):
    # A chat template that opens <think> in the prompt: only </think> is in the answer.
    first = Endpoint(httpx.Response(200, json=chat_body("<think>x</think>A")))
    second = Endpoint(stream_of(["I should think ", "about it.\n</think>", "\n\nAnswer: ", "42"]))
    deltas: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, first) as (llm, _):
            await llm.chat(ask(), model="thinker-r1", stage="s")
        async with client(tmp_path / "b", second) as (llm, _):   # a new client, as each ask makes
            result = await llm.chat(ask(), model="thinker-r1", stage="s", on_delta=deltas.append)
    assert result.text == "Answer: 42" == "".join(deltas)


# --- providers' quirks (OpenAI's reasoning models, Azure, llama.cpp, Ollama) ---------------

def test_retry_after_ms_counts_milliseconds():
    # It was read as seconds, capped at 600, then divided: 10 s became 0.6 s, and a run against
    # Azure's rate limit failed after seven quick tries.
    assert parse_retry_after("10000", unit=0.001) == pytest.approx(10.0)
    assert parse_retry_after("250", unit=0.001) == pytest.approx(0.25)


async def test_a_429_with_only_retry_after_ms_is_waited_out(tmp_path):
    endpoint = Endpoint(httpx.Response(429, headers={"retry-after-ms": "800"},
                                       json={"error": {"message": "rate limit"}}))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            await llm.chat(ask(), model="m1", stage="s")
    assert endpoint.times[1] - endpoint.times[0] >= 0.8


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_answer_stopped_by_a_content_filter_fails_at_once_and_is_not_cached(tmp_path, streamed):
    if streamed:
        filtered = stream_events(delta({"content": "According to"}),
                                 {"choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]})
    else:
        filtered = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": None},
                                                      finish_reason="content_filter"))
    endpoint = Endpoint(filtered, filtered)
    shown: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            for _ in range(2):
                with pytest.raises(LLMOutputError, match="content filter stopped m1's answer"):
                    await llm.chat(ask(), model="m1", stage="extract", validate=lambda t: t.startswith("("),
                                   on_delta=shown.append if streamed else None)
            stats = llm.stats
    assert len(endpoint.requests) == 2   # once per call (not three tries), and never from the cache
    # Answers, unusable: counted as endpoint errors, they kept a watch's outage open.
    assert stats["extract"]["errors"] == stats["extract"]["unusable"] == 2, stats
    assert ends_outage(stats)
    assert [r["cached"] for r in calls(store)] == [0, 0]
    assert store.query("SELECT count(*) AS n FROM llm_cache")[0]["n"] == 0


def context_error(style: str) -> httpx.Response:
    if style == "llamacpp-400":
        return httpx.Response(400, json={"error": {"code": 400, "type": "exceed_context_size_error",
                              "message": "the request exceeds the available context size, try increasing it"}})
    if style == "llamacpp-500":
        return httpx.Response(500, json={"error": {"code": 500, "type": "server_error",
                              "message": "the request exceeds the available context size, try increasing it"}})
    if style == "stream-error-event":   # llama.cpp: an `error:` line in the stream
        body = ('error: {"code": 400, "message": "the request exceeds the available context size, '
                'try increasing it", "type": "exceed_context_size_error"}\n\n')
        return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})
    assert style == "stream-error-data"
    return stream_events({"error": {"code": 400, "message": "This model's maximum context length is 4096 tokens"}})


@pytest.mark.parametrize("style", ["llamacpp-400", "llamacpp-500", "stream-error-event", "stream-error-data"])
async def test_a_context_overflow_fails_at_once_naming_the_stages_settings(tmp_path, style):
    endpoint = Endpoint(*[context_error(style)] * 3)
    streamed = style.startswith("stream")
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="answer",
                               on_delta=(lambda _t: None) if streamed else None)
    message = str(err.value)
    assert len(endpoint.requests) == 1
    assert "longer than m1's context allows" in message
    assert "query.local_max_tokens" in message and "index.chunk_size" not in message


async def test_an_error_in_a_stream_without_a_client_code_is_retried_and_said(tmp_path):
    failing = stream_events({"error": {"message": "CUDA out of memory"}})
    endpoint = Endpoint(failing, failing, failing)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, _):
            with pytest.raises(LLMUnavailableError) as err:
                await llm.chat(ask(), model="m1", stage="answer", on_delta=lambda _t: None)
    assert len(endpoint.requests) == 3
    assert "error in the stream: CUDA out of memory" in str(err.value)
    assert "check its logs" in str(err.value)


async def test_http_501_is_final_and_embeddings_say_how_to_do_without(tmp_path):
    endpoint = Endpoint(httpx.Response(501, json={"error": {"message": "This server does not support embeddings"}}))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMRequestError, match='embedding_model = ""') as err:
                await llm.embed(["a text"], model="e1")
    assert len(endpoint.requests) == 1 and "--embeddings" in str(err.value)


async def test_an_embedding_longer_than_llama_cpps_batch_is_final_and_names_the_chunk_size(tmp_path):
    # llama.cpp's 500 for an input longer than its physical batch (server-context.cpp), which an
    # embedding must fit whole: retried llm.max_retries times, then "the server kept answering with
    # errors: check its logs". The same input gets the same answer: one request, the stage's bound.
    error = {"code": 500, "message": "input (9000 tokens) is too large to process. increase the physical "
                                     "batch size (current batch size: 512)", "type": "server_error"}
    endpoint = Endpoint(*[httpx.Response(500, json={"error": error})] * 3)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.embed(["a text"], model="e1")
    said = str(err.value)
    assert len(endpoint.requests) == 1, said
    assert "lower index.chunk_size (a chunk is embedded whole), or raise the server's physical batch size" in said
    assert "-ub" in said and "check its logs" not in said


@pytest.mark.parametrize("answer", [
    httpx.Response(404, json={"error": {"code": "404", "message": "Resource not found"}}),
    # (a page, as a gateway in front of it answers: told to add /v1 to the deployment's URL)
    httpx.Response(404, text="<html><head><title>404 Not Found</title></head></html>",
                   headers={"content-type": "text/html"}),
], ids=["json", "page"])
async def test_an_azure_deployment_without_api_version_is_told_to_set_it(tmp_path, answer):
    base = "https://acme.openai.azure.com/openai/deployments/gpt4o"
    endpoint = Endpoint(answer)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_base=base) as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    assert "needs llm.api_version" in str(err.value)
    assert "'https://acme.openai.azure.com/openai/v1'" in str(err.value) and "gpt4o/v1" not in str(err.value)


async def test_a_usage_of_zero_prompt_tokens_is_estimated(tmp_path):
    # Ollama reports prompt_tokens 0 for a prompt it had cached.
    endpoint = Endpoint(httpx.Response(200, json=chat_body("one two three",
                                                           usage={"prompt_tokens": 0, "completion_tokens": 0})))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="s")
    assert result.prompt_tokens == count_message_tokens(ask())
    assert result.completion_tokens == 3


def refusing(*params: str):
    """An endpoint like OpenAI's reasoning models: a 400 for each of ``params`` a request holds."""
    messages = {
        "max_tokens": ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                       "Use 'max_completion_tokens' instead.", "unsupported_parameter"),
        "temperature": ("Unsupported value: 'temperature' does not support 0.0 with this model. "
                        "Only the default (1) value is supported.", "unsupported_value"),
        "logit_bias": ("Unsupported parameter: 'logit_bias' is not supported with this model.",
                       "unsupported_parameter"),
        "stream_options": ("Unrecognized request argument supplied: stream_options", None),
    }

    def answer(body: dict) -> httpx.Response:
        for param in params:
            if param in body and not body["model"].startswith("gpt-4"):
                message, code = messages[param]
                error = {"message": message, "type": "invalid_request_error", "code": code}
                if code:
                    error["param"] = param
                return httpx.Response(400, json={"error": error})
        if body.get("stream"):
            return stream_of(["YES"], usage=None)
        return httpx.Response(200, json=chat_body("YES"))
    return answer


async def test_a_refusal_between_server_errors_does_not_restart_the_retries(tmp_path):
    busy = httpx.Response(503, text="busy")
    endpoint = Endpoint(busy, busy, refusing("temperature"), *[busy] * 5)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, _):
            with pytest.raises(LLMUnavailableError, match=r"failed 4 times, last: HTTP 503"):
                await llm.chat(ask(), model="o3-mini", stage="s")
    # max_retries + 1 server errors in all, and the refusal (each refusal made 3 more).
    assert len(endpoint.requests) == 4 and "temperature" not in endpoint.bodies[-1]


async def test_a_reasoning_model_is_asked_without_the_parameters_it_refuses(tmp_path, caplog):
    answer = refusing("max_tokens", "temperature", "logit_bias")
    endpoint = Endpoint(*[answer] * 10)
    with anyio.fail_after(5), caplog.at_level(logging.WARNING, logger="streamrag.llm"):
        async with client(tmp_path, endpoint) as (llm, store):
            result = await llm.chat(ask(), model="o3-mini", stage="glean_check", max_tokens=1,
                                    logit_bias={"31958": 100}, on_length="accept")
            again = await llm.chat(ask("other"), model="o3-mini", stage="glean_check", max_tokens=1,
                                   logit_bias={"31958": 100}, on_length="accept")
            await llm.chat(ask("third"), model="gpt-4o-mini", stage="s", max_tokens=5)
    assert result.text == again.text == "YES"
    assert len(endpoint.requests) == 4 + 1 + 1   # three refusals, then one request per call
    sent = endpoint.bodies[3]
    assert sent["max_completion_tokens"] == 1 + model_quirks.REASONING_ALLOWANCE
    assert not {"max_tokens", "temperature", "logit_bias"} & sent.keys()
    assert endpoint.bodies[4] == {**sent, "messages": ask("other")}
    assert endpoint.bodies[5]["max_tokens"] == 5 and endpoint.bodies[5]["temperature"] == 0.0  # other models as before
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3 and all(w.startswith("o3-mini does not take ") for w in warnings)
    assert [r["error"] for r in calls(store)] == [None, None, None]   # the refusals are no failed calls
    # The cache key is the request as asked: the next client finds the answers.
    async with client(tmp_path, Endpoint()) as (llm, _):
        cached = await llm.chat(ask(), model="o3-mini", stage="glean_check", max_tokens=1,
                                logit_bias={"31958": 100}, on_length="accept")
    assert cached.cached and cached.text == "YES"
    # What a model refuses is known to the whole process (every `ask` makes a client).
    endpoint = Endpoint(answer)
    async with client(tmp_path / "next", endpoint) as (llm, _):
        await llm.chat(ask("fourth"), model="o3-mini", stage="answer", max_tokens=9)
    assert len(endpoint.requests) == 1 and endpoint.bodies[0]["max_completion_tokens"] == 9 + 8192


@pytest.mark.parametrize("error", [
    # A value out of range, worded as "not supported": the parameter itself is taken.
    {"message": "max_tokens values above 4096 are not supported for this model"},
    # Another parameter refused, in a message that names temperature too.
    {"message": "Unsupported value: 'response_format' json_schema is not supported with this model "
                "at this temperature", "param": "response_format"},
])
async def test_a_refusal_of_something_else_leaves_no_parameter_out(tmp_path, error):
    endpoint = Endpoint(httpx.Response(400, json={"error": error}))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMRequestError, match="rejected the request"):
                await llm.chat(ask(), model="m1", stage="s", max_tokens=5000)
            await llm.chat(ask("next"), model="m1", stage="s", max_tokens=100)
    assert len(endpoint.requests) == 2
    assert endpoint.bodies[1]["max_tokens"] == 100 and endpoint.bodies[1]["temperature"] == 0.0


async def test_a_rate_limit_inside_a_stream_is_said_as_one(tmp_path):
    limited = stream_events({"error": {"code": 429, "message": "Rate limit reached for requests"}})
    endpoint = Endpoint(limited, limited, limited)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=2) as (llm, _):
            with pytest.raises(LLMUnavailableError, match="requests_per_minute"):
                await llm.chat(ask(), model="m1", stage="answer", on_delta=lambda _t: None)
    assert len(endpoint.requests) == 3


async def test_an_answer_cached_with_finish_reason_content_filter_is_asked_again(tmp_path):
    endpoint = Endpoint()
    async with client(tmp_path, endpoint) as (llm, store):
        options = llm_module.request_options(0.0)
        key = llm_module.cache_key("m1", ask(), options, "", "")
        store.cache_put(key, "m1", json.dumps({"text": "According to", "finish_reason": "content_filter",
                                               "prompt_tokens": 5, "completion_tokens": 2}))
        result = await llm.chat(ask(), model="m1", stage="s")
    assert result.text == "echo: hello" and not result.cached and len(endpoint.requests) == 1


async def test_an_old_azure_api_version_streams_without_stream_options(tmp_path):
    endpoint = Endpoint(*[refusing("stream_options")] * 3)
    shown: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            result = await llm.chat(ask(), model="m1", stage="answer", on_delta=shown.append)
    assert shown == ["YES"] and result.completion_tokens == 1
    assert len(endpoint.requests) == 2 and "stream_options" not in endpoint.bodies[1]


async def test_a_parameter_refused_again_after_it_was_left_out_is_an_error(tmp_path):
    # A server that names max_tokens in every refusal: no endless loop.
    stubborn = httpx.Response(400, json={"error": {"message": "max_tokens is not supported", "param": "max_tokens"}})
    endpoint = Endpoint(stubborn, stubborn, stubborn)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMRequestError, match="max_tokens is not supported"):
                await llm.chat(ask(), model="m1", stage="s", max_tokens=3)
    assert len(endpoint.requests) == 2


def fastapi_refusing(param: str):
    """vLLM and other FastAPI servers: pydantic's extra_forbidden error for ``param`` (as a
    Python repr inside the message), or vLLM's out-of-vocabulary refusal of logit_bias."""
    def answer(body: dict) -> httpx.Response:
        if param in body:
            if param == "logit_bias":
                message = ("token_id(s) ['31958', '14695'] in logit_bias contain out-of-vocab token ids. "
                           "Vocabulary size: 32000")
            else:
                message = (f"[{{'type': 'extra_forbidden', 'loc': ('body', '{param}'), 'msg': 'Extra inputs "
                           f"are not permitted', 'input': {{'include_usage': True}}}}]")
            return httpx.Response(400, json={"object": "error", "message": message, "type": "BadRequestError",
                                             "param": None, "code": 400})
        if body.get("stream"):
            return stream_of(["YES"], usage=None)
        return httpx.Response(200, json=chat_body("YES"))
    return answer


@pytest.mark.parametrize("param", ["stream_options", "logit_bias"])
async def test_a_fastapi_servers_refusal_leaves_the_parameter_out(tmp_path, param):
    endpoint = Endpoint(*[fastapi_refusing(param)] * 4)
    asked = dict(on_delta=lambda _t: None) if param == "stream_options" else \
        dict(max_tokens=1, logit_bias={"31958": 100}, on_length="accept")
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            result = await llm.chat(ask(), model="Qwen/Qwen2.5-7B-Instruct", stage="glean_check", **asked)
            await llm.chat(ask("again"), model="Qwen/Qwen2.5-7B-Instruct", stage="glean_check", **asked)
    assert result.text == "YES"
    assert len(endpoint.requests) == 3 and param in endpoint.bodies[0]
    assert not any(param in body for body in endpoint.bodies[1:])
    assert llm.refuses("Qwen/Qwen2.5-7B-Instruct", param)


@pytest.mark.parametrize("said", [
    {"json": {"error": {"message": "Rate limit reached for m1 on requests per min (RPM): Limit 3, Used 3. "
                                   "Please try again in 400ms. Visit ..."}}},
    {"json": {"error": {"code": "429", "message": "Please retry after 0.4 seconds."}}},
    {"json": {"error": {"message": "Rate limit reached"}},
     "headers": {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "400ms",
                 "x-ratelimit-remaining-tokens": "9000", "x-ratelimit-reset-tokens": "6m0s"}},
], ids=["openai-message", "azure-message", "openai-headers"])
async def test_a_429_without_retry_after_waits_as_long_as_the_provider_says(tmp_path, said):
    # With no Retry-After, the wait the provider names (in its message, or the reset of the
    # limit its headers say is used up) is waited out, for every call: no early retries.
    endpoint = Endpoint(httpx.Response(429, **said))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: llm.chat(ask(), model="m1", stage="s"))
                await anyio.sleep(0.1)
                tg.start_soon(lambda: llm.chat(ask("other"), model="m1", stage="s"))
    assert len(endpoint.requests) == 3
    assert min(endpoint.times[1:]) - endpoint.times[0] >= 0.4


@pytest.mark.parametrize("said", [{"headers": {"retry-after": "25920"}},
                                  {"json": {"error": {"message": "Limit reached for requests per day. "
                                                                 "Please try again in 7h12m0s."}}}])
async def test_a_wait_of_hours_is_an_error_at_once_that_stops_a_run(tmp_path, said):
    endpoint = Endpoint(httpx.Response(429, **said))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, _):
            with pytest.raises(LLMRequestError, match=r"asks to wait 7 h 12 min before the next request") as e:
                await llm.chat(ask(), model="m1", stage="s")
    assert e.value.every_call and len(endpoint.requests) == 1


async def test_no_quota_stops_a_run_and_rate_limit_advice_fits_the_setting(tmp_path):
    quota = httpx.Response(429, json={"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}})
    async with client(tmp_path, Endpoint(quota)) as (llm, _):
        with pytest.raises(LLMRequestError, match="no quota left") as e:
            await llm.chat(ask(), model="m1", stage="s")
    assert e.value.every_call
    limited = httpx.Response(429, json={"error": {"message": "Rate limit reached"}})
    for rpm, advice in ((0, "set llm.requests_per_minute and llm.tokens_per_minute to your provider's limits"),
                        (60, "lower llm.requests_per_minute")):
        async with client(tmp_path / str(rpm), Endpoint(limited, limited), max_retries=1,
                          requests_per_minute=rpm) as (llm, _):
            with pytest.raises(LLMUnavailableError, match=advice):
                await llm.chat(ask(), model="m1", stage="s")


NGINX_502 = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway"
             "</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n")


@pytest.mark.parametrize("failure, said", [
    (httpx.Response(502, text=NGINX_502, headers={"content-type": "text/html"}),
     "last: HTTP 502: an HTML page: 502 Bad Gateway;"),
    (httpx.ReadError(""), "last: connection failed (ReadError: the connection broke while reading the answer);"),
], ids=["proxy-502", "read-error"])
async def test_what_failed_is_said_in_words_not_markup(tmp_path, failure, said):
    endpoint = Endpoint(failure, failure)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=1) as (llm, _):
            with pytest.raises(LLMUnavailableError) as e:
                await llm.chat(ask(), model="m1", stage="s")
    assert said in str(e.value) and "<" not in str(e.value)


async def test_a_prompt_refused_by_azures_content_filter_fails_at_once_in_words(tmp_path):
    filtered = httpx.Response(400, json={"error": {
        "code": "content_filter", "status": 400, "param": "prompt",
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
                   "policy. Please modify your prompt and retry."}})
    endpoint = Endpoint(filtered, filtered)
    async with client(tmp_path, endpoint) as (llm, _):
        with pytest.raises(LLMRequestError, match=r"^the provider's content filter refused the request to m1 "
                                                  r"\(stage extract: The response was filtered"):
            await llm.chat(ask(), model="m1", stage="extract")
    assert len(endpoint.requests) == 1


async def test_a_wait_named_late_in_a_long_message_is_read(tmp_path):
    # The message was cut to 200 characters before the wait was looked for in it.
    long = ("Rate limit reached for ft:gpt-4o-mini-2024-07-18:acme-research::9xYzAbCd in organization "
            "org-AbCdEfGhIjKlMnOpQrStUvWx on tokens per day (TPD): Limit 2000000, Used 1999000, Requested "
            "2400. Please try again in 7h12m0s. Visit https://platform.openai.com/account/rate-limits to "
            "learn more.")
    endpoint = Endpoint(httpx.Response(429, json={"error": {"message": long, "code": "rate_limit_exceeded"}}))
    async with client(tmp_path, endpoint) as (llm, _):
        with pytest.raises(LLMRequestError, match="asks to wait 7 h 12 min"):
            await llm.chat(ask(), model="m1", stage="s")


async def test_a_503_asking_for_a_long_pause_is_no_daily_limit(tmp_path):
    # Maintenance: waited for (at most MAX_RETRY_AFTER_S at a time), not called a daily limit.
    endpoint = Endpoint(httpx.Response(503, headers={"Retry-After": "3600"}, text="scheduled maintenance"))
    async with client(tmp_path, endpoint, max_retries=0) as (llm, _):
        with pytest.raises(LLMUnavailableError, match="HTTP 503: scheduled maintenance"):
            await llm.chat(ask(), model="m1", stage="s")


async def test_an_empty_answer_cut_off_at_max_tokens_gets_more_room(tmp_path):
    # A thinking model's reasoning ran to max_tokens and left no answer: asked again with the
    # same max_tokens each time, then "try another model or prompt".
    def answer(body):
        if body["max_tokens"] < 1600:
            return httpx.Response(200, json=chat_with(message={"role": "assistant", "content": ""},
                                                      finish_reason="length"))
        return httpx.Response(200, json=chat_body("The quay was rebuilt."))
    endpoint = Endpoint(answer, answer, answer)
    async with client(tmp_path, endpoint) as (llm, _):
        result = await llm.chat(ask(), model="m1", stage="answer", max_tokens=400, on_length="keep",
                                validate=lambda t: bool(t.strip()))
    assert result.text == "The quay was rebuilt."
    assert [b["max_tokens"] for b in endpoint.bodies] == [400, 800, 1600]


async def test_an_answer_the_servers_own_limit_cut_off_is_asked_once_more_then_once(tmp_path):
    # No max_tokens sent (extraction): the server's own limit (Ollama's num_predict, llama.cpp's
    # -n) cut the answer, and cuts the same request at temperature 0 the same way: it was asked 3
    # times, each paid, and the error said "try another model or prompt". Asked once more (an
    # answer broken off by a fault comes whole), then the model is known to be cut so. The row
    # and the error said "cut off at max_tokens" of a request that sent none.
    cut = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "(Paris, Fra"},
                                             finish_reason="length"))
    endpoint = Endpoint(cut, cut, cut)
    async with client(tmp_path, endpoint) as (llm, store):
        with pytest.raises(LLMOutputError) as e:
            await llm.chat(ask(), model="m1", stage="extract")
        assert len(endpoint.requests) == 2
        said = str(e.value)
        assert said.startswith("m1 gave no usable answer in 2 tries (stage extract, prompt -): unusable answer: "
                               "cut off by the server's own limit, no max_tokens sent (finish_reason length);"), said
        assert ("streamrag sent no max_tokens, so the server's own output or context limit cut them off: raise it "
                "(Ollama: num_predict, OLLAMA_CONTEXT_LENGTH;") in said and "lower index.chunk_size" in said
        assert "at max_tokens" not in said
        assert [c["error"] for c in calls(store)] == [CUT_OFF_UNASKED] * 2
        # Known now: another request of the model cut off so is asked once.
        endpoint.script = [cut, cut, cut]
        with pytest.raises(LLMOutputError, match=r"in 1 try .*cut it off: raise it"):
            await llm.chat(ask("another"), model="m1", stage="extract")
        assert len(endpoint.requests) == 3
        # Sampling may answer otherwise: at a temperature above 0 it is asked again.
        endpoint.script = [cut, cut, cut]
        with pytest.raises(LLMOutputError, match="in 3 tries"):
            await llm.chat(ask(), model="m1", stage="extract", temperature=0.7)
    assert len(endpoint.requests) == 6


async def test_an_answer_broken_off_with_no_max_tokens_sent_is_asked_once_more(tmp_path):
    # The simulator's truncated answers (a provider's answer broken off: finish_reason length, no
    # max_tokens sent, temperature 0) were not asked again: the gleaning round's chunk failed until
    # the next run (five synth_small documents at fault_rate 0.3: failures 1).
    cut = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "(Paris, Fra"},
                                             finish_reason="length"))
    endpoint = Endpoint(cut, httpx.Response(200, json=chat_body("(Paris, France)")))
    async with client(tmp_path, endpoint) as (llm, store):
        result = await llm.chat(ask(), model="m1", stage="glean")
        assert result.text == "(Paris, France)" and len(endpoint.requests) == 2
        assert [c["error"] for c in calls(store)] == [CUT_OFF_UNASKED, None]
        assert llm.stats["glean"]["asked_again"] == 1
        assert not model_quirks.server_cuts(API, "m1")   # (one cut is no limit known)


def sized(text: str, prompt_tokens: int, completion_tokens: int, finish_reason: str = "stop") -> httpx.Response:
    """An answer of ``text`` the server says is of these sizes."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    body = chat_body(text, usage)
    body["choices"][0]["finish_reason"] = finish_reason
    return httpx.Response(200, json=body)


def well_formed(text: str) -> bool:
    return text.startswith("(")


def cut_off() -> httpx.Response:
    """An answer cut off at the 50th token of a 100-token prompt (finish_reason "length")."""
    return sized("(Paris, Fra", 100, 50, "length")


@contextlib.asynccontextmanager
async def cut_twice(tmp_path, caplog) -> AsyncIterator[tuple[LLMClient, Endpoint]]:
    """A client whose endpoint cut m1's answer to ``ask()`` off twice (``cut_off``), no
    max_tokens sent: the server marked as cutting at its own limit. In the block, warnings of
    streamrag.llm are caught by ``caplog``."""
    cut = cut_off()
    endpoint = Endpoint(cut, cut)
    async with client(tmp_path, endpoint) as (llm, _):
        with caplog.at_level(logging.WARNING, logger="streamrag.llm"):
            with pytest.raises(LLMOutputError, match="in 2 tries"):
                await llm.chat(ask(), model="m1", stage="extract")
            yield llm, endpoint


async def test_cut_answers_not_in_a_row_are_no_sign_of_the_servers_limit(tmp_path):
    # Cut, malformed, cut marked the server as cutting at its own limit (and warned so), though
    # the same request at temperature 0 was answered otherwise in between: the cuts were counted,
    # not the cuts in a row. Each cut answer of the model was asked once after.
    cut = sized("(Paris, Fra", 100, 50, "length")
    endpoint = Endpoint(cut, sized("no idea", 100, 3), cut)
    async with client(tmp_path, endpoint) as (llm, store):
        with pytest.raises(LLMOutputError, match="in 3 tries"):
            await llm.chat(ask(), model="m1", stage="extract", validate=well_formed)
        assert not model_quirks.server_cuts(API, "m1")
        # Another request cut off once is asked again, and comes whole.
        endpoint.script = [cut, sized("(Rome, Italy)", 100, 6)]
        result = await llm.chat(ask("another"), model="m1", stage="extract", validate=well_formed)
    assert result.text == "(Rome, Italy)" and len(endpoint.requests) == 5


async def test_a_longer_whole_answer_disproves_the_servers_limit(tmp_path, caplog):
    # Two answers of a request broken off in a row (a provider's fault; the simulator's
    # fault_rate 0.3 did so in 5 of 10 christmas_carol runs) marked the server as cutting at its
    # own limit for the rest of the process: a long `watch` asked every cut answer of the model
    # once, with a warning of a limit the server had not. A whole answer longer than the cut ones
    # (in completion tokens, and in prompt + completion) is one no such limit lets through.
    cut = cut_off()
    async with cut_twice(tmp_path, caplog) as (llm, endpoint):
        assert model_quirks.server_cuts(API, "m1")
        # Not longer in both (a context limit lets a shorter prompt have a longer answer; an
        # output limit, a longer prompt), not whole, of a request that sent max_tokens (which
        # Ollama takes for its num_predict), or cached: the mark holds.
        endpoint.script = [sized("(a)", 20, 70), sized("(b)", 200, 40), sized("(c)", 200, 90, "length"),
                           sized("(d)", 200, 90)]
        for text in ("a", "b", "c"):
            await llm.chat(ask(text), model="m1", stage="extract", on_length="accept")
        await llm.chat(ask("d"), model="m1", stage="extract", max_tokens=500)
        await llm.chat(ask("a"), model="m1", stage="extract")   # (cached)
        assert model_quirks.server_cuts(API, "m1") and len(endpoint.requests) == 6
        endpoint.script = [sized("(e)", 100, 51)]
        await llm.chat(ask("e"), model="m1", stage="extract")
        assert not model_quirks.server_cuts(API, "m1")
        # Its cut answers are asked twice again.
        endpoint.script = [cut, sized("(Rome, Italy)", 100, 6)]
        result = await llm.chat(ask("another"), model="m1", stage="extract")
        assert result.text == "(Rome, Italy)" and len(endpoint.requests) == 9
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 2, said
    assert said[0].startswith(f"m1 at {API}/chat/completions cut an answer off twice though no max_tokens was "
                              "sent (50 tokens long): the server's own output or context limit, it seems"), said
    assert "until the model writes a longer whole answer or for 10 minutes" in said[0], said
    assert said[1].startswith(f"m1 at {API}/chat/completions wrote a whole answer of 51 tokens, longer than the "
                              "two it cut off (50): no limit of the server cut those, they broke off"), said


async def test_sizes_counted_here_disprove_the_servers_limit_only_by_a_margin(tmp_path, caplog):
    # A server that says no usage: the cut answers' sizes and the whole one's are counted here,
    # with another tokenizer than its limit's, which counts two texts the limit counts alike some
    # percent apart. A whole answer counted a little longer than the cut ones took a limit the
    # server has back ("no limit of the server cut those"); now it takes a margin.
    def unsized(text: str, finish_reason: str = "stop") -> httpx.Response:
        body = chat_body(text, usage=None)
        body["choices"][0]["finish_reason"] = finish_reason
        return httpx.Response(200, json=body)

    def words(n: int) -> str:
        return "(" + " ".join(["Scrooge"] * n)

    cut = unsized(words(100), "length")
    endpoint = Endpoint(cut, cut, unsized(words(110)), unsized(words(300)))
    async with client(tmp_path, endpoint) as (llm, store):
        with caplog.at_level(logging.WARNING, logger="streamrag.llm"):
            with pytest.raises(LLMOutputError, match="in 2 tries"):
                await llm.chat(ask(), model="m1", stage="extract")
            assert model_quirks.server_cuts(API, "m1")
            a_little = await llm.chat(ask("a"), model="m1", stage="extract")
            assert a_little.completion_tokens > count_tokens(words(100), llm.encoding)
            assert model_quirks.server_cuts(API, "m1")   # (within what two tokenizers disagree by)
            assert a_little.estimated
            await llm.chat(ask("b"), model="m1", stage="extract")   # (three times as long)
            assert not model_quirks.server_cuts(API, "m1")
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 2 and "wrote a whole answer of " in said[1], said


async def test_a_whole_answer_counted_here_disproves_a_limit_the_server_counted_only_by_the_margin(tmp_path, caplog):
    # The mixed case: the cut answers' sizes said by the server (its tokenizer's, usage sent),
    # the whole answer's counted here (a stream whose server ignores stream_options; llama.cpp).
    # A whole answer counted 30% longer than the cut ones took back the limit at a margin of
    # 1.25, a spread measured between tokenizers over kinds of text (a Llama-2-like count of
    # digits and whitespace against o200k: 1.30); now it takes ESTIMATE_MARGIN (1.4).
    def answer(text: str, finish_reason: str = "stop", usage: dict | None = None) -> httpx.Response:
        body = chat_body(text, usage=usage)
        body["choices"][0]["finish_reason"] = finish_reason
        return httpx.Response(200, json=body)

    def words(tokens: int) -> str:   # (counted here: a word a token)
        text = "(" + " the" * tokens
        assert count_tokens(text, "o200k_base") == tokens + 1
        return text

    cut = answer(words(99), "length", usage={"prompt_tokens": 5, "completion_tokens": 100, "total_tokens": 105})
    endpoint = Endpoint(cut, cut, answer(words(129)), answer(words(299)))
    async with client(tmp_path, endpoint) as (llm, store):
        assert llm.encoding == "o200k_base"
        with caplog.at_level(logging.WARNING, logger="streamrag.llm"):
            with pytest.raises(LLMOutputError, match="in 2 tries"):
                await llm.chat(ask(), model="m1", stage="extract")
            assert model_quirks.server_cuts(API, "m1")
            longer = await llm.chat(ask("a"), model="m1", stage="extract")
            assert longer.estimated and longer.completion_tokens == 130 and longer.prompt_tokens + 130 > 105 * 1.25
            assert model_quirks.server_cuts(API, "m1")   # (within what two tokenizers disagree by)
            await llm.chat(ask("b"), model="m1", stage="extract")   # (three times as long)
            assert not model_quirks.server_cuts(API, "m1")
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 2 and "wrote a whole answer of 300 tokens" in said[1], said


async def test_the_servers_limit_is_forgotten_after_ten_minutes_and_found_again(tmp_path, caplog, monkeypatch):
    # A mark no whole answer disproves (a fault broke off the model's longest answers) lapsed
    # never. A limit the server has is found again by the next cut answer, asked twice, and not
    # warned of again.
    now = [1000.0]
    monkeypatch.setattr(model_quirks, "clock", lambda: now[0])
    cut = cut_off()
    async with cut_twice(tmp_path, caplog) as (llm, endpoint):
        now[0] += model_quirks.SERVER_CUT_LAPSE_S - 1
        endpoint.script = [cut, cut, cut]
        with pytest.raises(LLMOutputError, match="in 1 try"):
            await llm.chat(ask("b"), model="m1", stage="extract")
        now[0] += 1
        assert not model_quirks.server_cuts(API, "m1")
        with pytest.raises(LLMOutputError, match="in 2 tries"):
            await llm.chat(ask("c"), model="m1", stage="extract")
        assert model_quirks.server_cuts(API, "m1")
        endpoint.script = [cut, cut, cut]
        with pytest.raises(LLMOutputError, match="in 1 try"):
            await llm.chat(ask("d"), model="m1", stage="extract")
    assert len(endpoint.requests) == 6
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


async def test_an_answer_cut_off_by_the_servers_limit_is_asked_again_of_a_model_that_refuses_temperature(tmp_path):
    # temperature 0 is left out of its requests (o3-mini: "Only the default (1) value is
    # supported"): it samples at its own, and asked again may answer within the server's limit.
    refused = refusing("temperature")({"model": "o3-mini", "temperature": 0.0})
    cut = httpx.Response(200, json=chat_with(message={"role": "assistant", "content": "(Paris, Fra"},
                                             finish_reason="length"))
    endpoint = Endpoint(refused, cut, cut, httpx.Response(200, json=chat_body("(Paris, France)")))
    with anyio.fail_after(30):
        async with client(tmp_path, endpoint) as (llm, store):
            result = await llm.chat(ask(), model="o3-mini", stage="extract")
    assert result.text == "(Paris, France)"
    assert len(endpoint.requests) == 4 and "temperature" not in endpoint.bodies[-1]
    assert [c["error"] for c in calls(store)] == [CUT_OFF_UNASKED, CUT_OFF_UNASKED, None]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_web_page_where_the_api_should_answer_is_named_and_not_asked_again(tmp_path, streamed):
    # A proxy's sign-in page answered 200 on every try: asked 7 times, half a minute an ask.
    page = httpx.Response(200, text="<html><head><title></title></head><body><h1>Sign in &amp; continue</h1>"
                                    "</body></html>", headers={"content-type": "text/html"})
    endpoint = Endpoint(page, page)
    wanted = "a stream of events" if streamed else "JSON"
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=3) as (llm, _):
            with pytest.raises(LLMRequestError, match=f"the answer was an HTML page: Sign in & continue, not "
                                                      f"{wanted}: the address leads to a web page .*; check llm.api_base"):
                await llm.chat(ask(), model="m1", stage="answer", on_delta=(lambda _t: None) if streamed else None)
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_web_page_on_a_base_without_v1_says_to_try_it(tmp_path, streamed):
    # A web UI at the server's root answers /chat/completions with its page (200), where the API
    # is under /v1: it said "check llm.api_base" alone. A base with a version is not told so.
    page = httpx.Response(200, text="<!doctype html><html><head><title>Open WebUI</title></head></html>",
                          headers={"content-type": "text/html"})
    wanted = "a stream of events" if streamed else "JSON"
    for base, told in (("http://llm.test:8080", True), ("http://llm.test:8080/v1", False)):
        endpoint = Endpoint(page)
        with anyio.fail_after(5):
            async with client(tmp_path / base[-2:], endpoint, api_base=base) as (llm, _):
                with pytest.raises(LLMRequestError) as err:
                    await llm.chat(ask(), model="m1", stage="answer",
                                   on_delta=(lambda _t: None) if streamed else None)
        said = (f"{base}/chat/completions: the answer was an HTML page: Open WebUI, not {wanted}: the address "
                "leads to a web page (a proxy's sign-in, a wrong path), not the API; check llm.api_base")
        hint = (": it has no /v1; most OpenAI-compatible servers (Ollama, vLLM, llama.cpp) serve under /v1: "
                f"try setting llm.api_base to '{base}/v1'")
        assert str(err.value) == said + (hint if told else "")


async def test_a_404_on_ollamas_own_api_base_says_its_openai_one(tmp_path):
    # Ollama serves its own API at /api and the OpenAI one at /v1: a 404 on http://host:11434/api
    # said "set llm.api_base to 'http://host:11434/api/v1'", another 404 (then "unknown model").
    base = "http://llm.test:11434/api"
    endpoint = Endpoint(httpx.Response(404, text="404 page not found"))
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, api_base=base) as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="m1", stage="s")
    assert str(err.value).endswith("most servers serve the OpenAI API under /v1 (Ollama's /api is its own API): "
                                   "set llm.api_base to 'http://llm.test:11434/v1'"), str(err.value)
    from streamrag.provider_errors import without_version

    assert without_version(base + "/", "llm.api_base").endswith(
        ": try setting llm.api_base to 'http://llm.test:11434/v1'")


def test_the_v1_hint_reads_right_for_a_flag_or_a_variable_setting_api_base():
    # "try --api-base = '...'" was said of a base given by the flag: no command line reads so.
    from streamrag.provider_errors import without_version

    for setting in ("--api-base", "STREAMRAG_API_BASE", "llm.api_base"):
        assert without_version("http://llm.test:8080/", setting).endswith(
            f": try setting {setting} to 'http://llm.test:8080/v1'")


async def _hang(_body: dict) -> httpx.Response:
    await anyio.sleep(3600)
    raise AssertionError("unreachable")


async def test_a_call_cancelled_after_its_requests_went_out_is_recorded_as_cancelled(tmp_path):
    # A sync that gave up cancelled the calls still under way: a soak tester's endpoint answering
    # HTTP 500 got 186 requests while llm_calls held 12 calls; the cancelled ones were not there.
    from streamrag.status import gather_status

    endpoint = Endpoint(httpx.Response(500, text="boom"), _hang)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint, max_retries=3, concurrency=1) as (llm, store):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: llm.chat(ask("one"), model="m1", stage="s"))
                while len(endpoint.requests) < 2:   # a 500, then the retry that hangs
                    await anyio.sleep(0.01)
                tg.start_soon(lambda: llm.chat(ask("two"), model="m1", stage="s"))
                await anyio.sleep(0.05)   # it waits for the one slot: it asks nothing
                tg.cancel_scope.cancel()
            stats = llm.stats["s"]
            await llm.chat(ask("three"), model="m1", stage="s")   # its row goes with this one's
            rows = calls(store)
            assert [(r["cancelled"], r["error"] is None) for r in rows] == [(1, False), (0, True)], rows
    assert stats["calls"] == stats["cancelled"] == 1 and stats["errors"] == 0, stats
    row = rows[0]
    assert row["error"].startswith("cancelled after 2 tries, none answered"), row["error"]
    assert row["stage"] == "s" and row["model"] == "m1" and row["cached"] == 0 and row["run_id"] == "run-1"
    assert row["prompt_tokens"] == row["completion_tokens"] == 0 and row["latency_ms"] > 0
    assert row["created_at"] <= rows[1]["created_at"]
    info = gather_status(store)
    assert info["llm"]["calls"] == 2 and info["llm"]["cancelled"] == 1 and info["llm"]["errors"] == 0, info["llm"]
    store.close()


async def _cancelled_once_sent(tmp_path, call, stage: str, billed_answer: list[int] | None = None):
    """Runs ``call(llm)`` against a simulator slow to answer and cancels it once its request is
    out: (its ``llm_calls`` row, the client's stats of ``stage``, the prompt tokens the simulator
    billed; its completion tokens billed are ``billed_answer[0]``)."""
    from streamrag.simulator import Simulator, SimulatorConfig

    store = Store(tmp_path / "index.db")
    with Simulator(SimulatorConfig(latency_ms=20_000)) as sim:
        async with Writer(store) as writer:
            settings = LLMSettings(api_base=sim.base_url, requests_per_minute=0, tokens_per_minute=0)
            async with LLMClient(settings, "sk-test", store=store, writer=writer, run_id="run-1") as llm:
                with anyio.fail_after(10):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(call, llm)
                        # (billed, not merely arrived: the simulator bills a request after it
                        # has read it and written its answer, and a loaded machine read 0 here)
                        while sim.stats()["prompt_tokens"] < 1:
                            await anyio.sleep(0.01)
                        tg.cancel_scope.cancel()
                stats = llm.stats[stage]
        billed = sim.stats()["prompt_tokens"]
        if billed_answer is not None:
            billed_answer.append(sim.stats()["completion_tokens"])
    (row,) = calls(store)
    store.close()
    return row, stats, billed


@pytest.mark.parametrize("streamed", [True, False])
async def test_a_call_cancelled_while_its_request_is_out_records_the_prompt_it_sent(tmp_path, streamed):
    # `ask` stopped (SIGTERM) while a slow endpoint worked on the answer: its row said 0 tokens,
    # though the provider had the prompt, and bills it (the simulator does). Not streamed, the
    # answer is billed too (the simulator bills it as the request comes), of a length unknown
    # here: the row said "no answer begun"; it says that answer is not counted.
    answer_billed: list[int] = []
    row, stats, billed = await _cancelled_once_sent(
        tmp_path, lambda llm: llm.chat(ask("Who is Ada?"), model="gpt-4o-mini", stage="answer",
                                       on_delta=(lambda _t: None) if streamed else None), "answer", answer_billed)
    assert billed == count_message_tokens(ask("Who is Ada?")) > 0 and answer_billed[0] > 0
    assert (row["cancelled"], row["prompt_tokens"], row["completion_tokens"]) == (1, billed, 0), row
    said = ("its request sent, no answer begun" if streamed else
            "its request sent, its answer not read (its prompt is counted; the answer a provider goes on to "
            "write is billed too, and not counted)")
    assert row["error"].startswith(f"cancelled after 1 try, {said}: its caller stopped waiting"), row["error"]
    assert (stats["cancelled"], stats["prompt_tokens"], stats["completion_tokens"]) == (1, billed, 0), stats


async def test_an_embedding_call_cancelled_while_its_request_is_out_records_the_inputs_it_sent(tmp_path):
    # A run stopped while a slow endpoint embedded a batch: its row said 0 prompt tokens (a chat
    # call's says its prompt), though the provider had the inputs, and bills them (the simulator does).
    texts = ["Ada Lovelace wrote the first program.", "Charles Babbage designed the Analytical Engine."]
    row, stats, billed = await _cancelled_once_sent(
        tmp_path, lambda llm: llm.embed(texts, model="text-embedding-3-small"), "embed")
    assert billed == sum(count_tokens(t) for t in texts) > 0
    assert (row["cancelled"], row["prompt_tokens"], row["completion_tokens"]) == (1, billed, 0), row
    assert row["error"].startswith("cancelled after 1 try, its request sent, no answer begun"), row["error"]
    assert (stats["cancelled"], stats["prompt_tokens"]) == (1, billed), stats


class FailsAfterSending(httpx.AsyncBaseTransport):
    """Answers every request with HTTP 500 after its body went out, as httpcore does (its trace
    says the request was sent whole)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        trace = request.extensions.get("trace")
        if trace is not None:
            await trace("http11.send_request_body.complete", {})
        return httpx.Response(500, json={"error": {"message": "boom"}})


async def test_an_embedding_call_a_hopeless_client_ends_counts_no_inputs_of_tries_answered_with_errors(
        tmp_path, monkeypatch):
    """Embedding calls ended while they waited to try again after HTTP 500s: those inputs were
    refused, not billed (as a chat call's prompt)."""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)


    store = Store(tmp_path / "index.db")
    settings = LLMSettings(api_base=API, requests_per_minute=0, tokens_per_minute=0, max_retries=20,
                           concurrency=4)
    errors: list[str] = []

    async def one(llm: LLMClient, i: int) -> None:
        try:
            await llm.embed([f"text {i}"], model="e1")
        except LLMUnavailableError as e:
            errors.append(str(e))

    async with Writer(store) as writer:
        async with LLMClient(settings, "sk-test", store=store, writer=writer, run_id="run-1",
                             retry_base_s=0.05, transport=FailsAfterSending()) as llm:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    for i in range(4):
                        tg.start_soon(one, llm, i)
    rows = calls(store)
    store.close()
    assert len(errors) == 4 and all("failed every one of the" in e for e in errors), errors[:1]
    assert [(r["cancelled"], r["prompt_tokens"]) for r in rows] == [(0, 0)] * 4, [r["error"] for r in rows]


async def test_a_streamed_answer_cancelled_midway_records_what_it_streamed(tmp_path):
    pieces = ["Ada Lovelace ", "wrote the first ", "program for the ", "Analytical Engine"]

    async def streaming_then_stalled() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield sse([delta({"content": piece})])
        yield sse([delta({"reasoning_content": "and then"})])
        await anyio.sleep(3600)   # the rest never comes: the caller stops waiting

    endpoint = Endpoint(lambda body: httpx.Response(200, content=streaming_then_stalled(),
                                                    headers={"content-type": "text/event-stream"}))
    shown: list[str] = []
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: llm.chat(ask(), model="m-stalled", stage="answer", on_delta=shown.append))
                while "".join(shown) != "".join(pieces):   # (a model no test saw think aloud)
                    await anyio.sleep(0.01)
                await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
            stats = llm.stats["answer"]
    (row,) = calls(store)
    store.close()
    # Counted here as an estimate would: the prompt, and the answer (its thinking too) so far.
    streamed = count_tokens("".join(pieces) + "and then")
    assert (row["cancelled"], row["prompt_tokens"], row["completion_tokens"]) == (
        1, count_message_tokens(ask()), streamed), row
    assert streamed > 1 and row["error"].startswith(f"cancelled after 1 try, its answer cut short after {streamed:,} tokens")
    assert (stats["prompt_tokens"], stats["completion_tokens"]) == (count_message_tokens(ask()), streamed)


async def test_a_call_cancelled_last_is_recorded_as_the_client_closes(tmp_path):
    endpoint = Endpoint(_hang)
    with anyio.fail_after(5):
        async with client(tmp_path, endpoint) as (llm, store):
            with anyio.move_on_after(0.2):   # (Ctrl-C, a task group cancelled)
                await llm.embed(["a text"], model="e1")
            assert calls(store) == []   # nothing awaited where the cancellation was delivered
    rows = calls(store)
    assert len(rows) == 1 and rows[0]["cancelled"] == 1 and rows[0]["stage"] == "embed", rows
    assert rows[0]["error"].startswith("cancelled after 1 try, none answered"), rows[0]["error"]
    assert llm.stats["embed"]["cancelled"] == 1 and llm.stats["embed"]["errors"] == 0
    store.close()



async def _twelve_calls(llm: LLMClient) -> list[str]:
    """Twelve calls at once through ``llm``: the errors of those the endpoint was found
    unavailable for."""
    errors: list[str] = []

    async def one(i: int) -> None:
        try:
            await llm.chat(ask(f"q{i}"), model="m1", stage="s")
        except LLMUnavailableError as e:
            errors.append(str(e))

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(one, i)
    return errors


async def _twelve_unavailable_calls(tmp_path, endpoint: Endpoint) -> list[str]:
    """``_twelve_calls`` through one client of ``endpoint`` (10 retries each)."""
    async with client(tmp_path, endpoint, max_retries=10, concurrency=12) as (llm, _):
        return await _twelve_calls(llm)


async def test_a_hopeless_client_does_not_wait_out_a_pause_to_try_again(tmp_path, monkeypatch):
    """Once every try failed (HOPELESS_TRIES over HOPELESS_S), every call ends at once: one
    waiting out the pause a server asked for (Retry-After) too. (It waited the 30 s, then sent
    a try more, which could hang for a timeout: that wait was not cut short, nor looked at after.)
    The pause asked here is the longest waited (600 s): a wait not cut short meets the guard."""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)

    arrived = [0]

    async def failing(body: dict) -> httpx.Response:
        arrived[0] += 1
        n = arrived[0]
        await anyio.sleep({1: 0.15, 2: 0.1}.get(n, 0.5))
        if n == 2:   # the server asks for a pause, and the first try's retry waits it out
            return httpx.Response(503, headers={"Retry-After": "600"}, json={"error": {"message": "busy"}})
        return httpx.Response(500, json={"error": {"message": "boom"}})

    assert parse_retry_after("600") == 600
    endpoint = Endpoint(*[failing] * 40)
    with anyio.fail_after(100):
        errors = await _twelve_unavailable_calls(tmp_path, endpoint)
    assert len(endpoint.requests) == 12
    assert len(errors) == 12 and all("failed every one of the 12 tries" in e for e in errors)


async def test_a_hopeless_client_says_what_its_failed_tries_were(tmp_path, monkeypatch):
    """Twelve HTTP errors and no unusable answer: the error does not speak of unusable ones.
    (It said '12 HTTP errors or dropped connections, the others unusable answers'.)"""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    endpoint = Endpoint(*[httpx.Response(500, json={"error": {"message": "boom"}})] * 40)
    with anyio.fail_after(10):
        errors = await _twelve_unavailable_calls(tmp_path, endpoint)
    assert len(errors) == 12 and all("failed every one of the 12 tries" in e for e in errors)
    said = "(12 HTTP errors, dropped connections or malformed answers)"
    assert all(said in e and "unusable" not in e for e in errors), errors[0]


async def test_a_gateway_timeout_is_no_sign_the_endpoint_fails_everything(tmp_path, monkeypatch):
    """A proxy's 504 (or Cloudflare's 524) in front of a slow model is a timeout, not an error of
    the model: thirteen of them, then an answer, and the call gets it (a slow model's first
    answers ended the run as hopeless)."""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.01)
    gateway = [httpx.Response(504, text="Gateway Time-out"), httpx.Response(524, text="A timeout occurred")]
    endpoint = Endpoint(*(gateway * 7)[:13], httpx.Response(200, json=chat_body("fine")))
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, max_retries=20) as (llm, _):
            answer = await llm.chat(ask("q"), model="m1", stage="s")
            assert not llm.hopeless
    assert answer.text == "fine"


async def test_a_busy_server_is_no_sign_the_endpoint_fails_everything(tmp_path, monkeypatch):
    """A server that is up and asks to wait (Ollama with its queue full, a 503 with Retry-After,
    an overloaded engine), nine times, with three HTTP 500s besides: the call waits, and gets its
    answer. (Every 503 not saying "loading" counted as an HTTP error: the twelfth try ended the run.)"""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.01)
    busy = [httpx.Response(503, json={"error": "server busy, please try again.  maximum pending requests exceeded"}),
            httpx.Response(503, headers={"Retry-After": "0"}, text="Service Unavailable"),
            httpx.Response(503, json={"error": {"message": "The engine is currently overloaded, please try again later",
                                                "type": "server_error"}})]
    boom = httpx.Response(500, json={"error": {"message": "boom"}})
    endpoint = Endpoint(*busy * 3, boom, boom, boom, httpx.Response(200, json=chat_body("fine")))
    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, max_retries=20) as (llm, _):
            answer = await llm.chat(ask("q"), model="m1", stage="s")
            assert not llm.hopeless
    assert answer.text == "fine" and len(endpoint.requests) == 13


async def test_a_bare_503_is_an_endpoint_not_serving(tmp_path, monkeypatch):
    """A load balancer with nothing behind it answers 503 without asking to wait: still an
    endpoint failing everything, ended after twelve tries."""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    endpoint = Endpoint(*[httpx.Response(503, text="no healthy upstream")] * 40)
    with anyio.fail_after(10):
        errors = await _twelve_unavailable_calls(tmp_path, endpoint)
    assert len(errors) == 12 and all("failed every one of the 12 tries" in e for e in errors), errors[:1]


@pytest.mark.parametrize("answer", [
    # A load balancer or proxy whose server behind it is down.
    lambda: httpx.Response(503, text="Service temporarily unavailable, please try again later"),
    lambda: httpx.Response(408, text="Request Timeout"),
], ids=["503-try-again-later", "408"])
async def test_an_endpoint_that_only_asks_to_wait_is_given_up_on_after_give_up_after_s(
        tmp_path, monkeypatch, answer):
    """The model answers once, then every try is answered with a request to wait: up, by the
    hopeless rule, so each call spent all its retries (a 1,000-chunk run: hours). After
    llm.give_up_after_s of nothing else, every call ends, saying what to check and which setting
    waits longer. (Each of the four calls went on to its 1,001st try.)"""
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.02)
    endpoint = Endpoint(httpx.Response(200, json=chat_body("fine")), *[lambda _body: answer()] * 10_000)
    errors = await _four_calls_given_up(tmp_path, endpoint, give_up_after_s=0.5)
    # Given up on, not tried to the end (counted by the tries, not timed): 0.5 s of tries of
    # 0.01 s each on average, four at once, is about 200.
    assert len(endpoint.requests) < 1 + 4 * 1001, len(endpoint.requests)
    assert all(" asked to wait)" in e and "raising llm.give_up_after_s (0.5 s) waits longer" in e
               and "check that server and its logs" in e and "the server behind llm.api_base answers only HTTP " in e
               for e in errors), errors[0]


async def test_a_rate_limit_that_lets_requests_through_is_never_given_up_on(tmp_path, monkeypatch):
    """A provider's rate limit refuses three tries in four with a 429 for longer than
    llm.give_up_after_s: each request let through starts the span again, and every call gets its
    answer."""
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.02)
    seen = [0]

    def limited(body: dict) -> httpx.Response:
        seen[0] += 1
        if seen[0] % 4:
            return httpx.Response(429, json={"error": {"message": "Rate limit reached", "type": "requests"}})
        return httpx.Response(200, json=chat_body("ok " + body["messages"][-1]["content"]))

    endpoint = Endpoint(*[limited] * 100_000, latency=0.01)
    started = time.monotonic()
    answers: list[str] = []
    with anyio.fail_after(20):
        async with client(tmp_path, endpoint, max_retries=1000, concurrency=2,
                          give_up_after_s=0.2) as (llm, _):
            async def one(i: int) -> None:
                answers.append((await llm.chat(ask(f"q{i}"), model="m1", stage="s")).text)

            async with anyio.create_task_group() as tg:
                for i in range(40):
                    tg.start_soon(one, i)
            assert not llm.hopeless
    assert sorted(answers) == sorted(f"ok q{i}" for i in range(40))
    assert time.monotonic() - started > 3 * 0.2 and len(endpoint.requests) >= 4 * 40 - 3


async def test_a_thinking_models_cut_off_first_answers_are_no_sign_the_endpoint_fails_everything(
        tmp_path, monkeypatch):
    """Six calls to a model whose thinking fills max_tokens twice before it answers (each answer
    cut off is asked again with twice the room), and three HTTP 500s on the way: every call gets
    its answer. (Twelve tries with none usable, three HTTP errors among them, ended the run.)"""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    cut_off = {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""},
                            "finish_reason": "length"}], "usage": USAGE}
    seen = [0]

    def thinking(body: dict) -> httpx.Response:
        seen[0] += 1
        if seen[0] in (3, 8, 12):
            return httpx.Response(500, json={"error": {"message": "boom"}})
        if body["max_tokens"] < 64:
            return httpx.Response(200, json=cut_off)
        return httpx.Response(200, json=chat_body("fine"))

    endpoint = Endpoint(*[thinking] * 40)
    answers: list[str] = []

    async def one(llm: LLMClient, i: int) -> None:
        answers.append((await llm.chat(ask(f"q{i}"), model="m1", stage="s", max_tokens=16)).text)

    with anyio.fail_after(10):
        async with client(tmp_path, endpoint, max_retries=5, concurrency=6) as (llm, _):
            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(one, llm, i)
            assert not llm.hopeless
    assert answers == ["fine"] * 6 and len(endpoint.requests) == 6 * 3 + 3


def _asking_into(errors: list[str]):
    """A call of ``llm.chat`` on ``question`` whose give-up error (the client found the endpoint
    hopeless) goes into ``errors``."""

    async def one(llm: LLMClient, question: str) -> None:
        try:
            await llm.chat(ask(question), model="m1", stage="s")
        except LLMUnavailableError as e:
            errors.append(str(e))
    return one


async def test_an_outage_after_tries_timed_out_is_waited_for_as_long_as_any(tmp_path, monkeypatch):
    """A slow model's first tries time out, then twelve HTTP 500s come at once: they are an
    outage of less than HOPELESS_S, waited out, and the call gets its answer. (The time was
    counted from the first timeout: the twelfth 500 ended the run at once.)"""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 1.0)
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.01)
    boom = httpx.Response(500, json={"error": {"message": "boom"}})
    endpoint = Endpoint(_hang, _hang, *[boom] * 12, httpx.Response(200, json=chat_body("fine")))
    started = time.monotonic()
    with anyio.fail_after(60):
        async with client(tmp_path, endpoint, max_retries=20, request_timeout_s=0.4) as (llm, _):
            answer = await llm.chat(ask("q"), model="m1", stage="s")
            assert not llm.hopeless
    assert answer.text == "fine" and time.monotonic() - started > 1.0

async def test_calls_a_hopeless_client_ends_are_recorded_as_failed_with_the_prompt_sent(tmp_path, monkeypatch):
    """The calls ended because every try failed are failed calls (not cancelled ones: the idle
    line and `status` said "cancelled" of calls the daemon's error lines counted as failed), and
    the try hung at the server when they ended counts the prompt it sent. (It had 0 prompt tokens.)"""
    from streamrag.simulator import Simulator, SimulatorConfig

    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    real = httpx.AsyncHTTPTransport()

    class Failing(httpx.AsyncBaseTransport):   # HTTP 500, but the slow question reaches the simulator
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if b"slow" in request.content:
                return await real.handle_async_request(request)
            return httpx.Response(500, json={"error": {"message": "boom"}})

    errors: list[str] = []
    one = _asking_into(errors)

    store = Store(tmp_path / "index.db")
    with Simulator(SimulatorConfig(latency_ms=20_000)) as sim:
        settings = LLMSettings(api_base=sim.base_url, requests_per_minute=0, tokens_per_minute=0,
                               max_retries=10, concurrency=13)
        async with Writer(store) as writer:
            async with LLMClient(settings, "sk-test", store=store, writer=writer, run_id="run-1",
                                 retry_base_s=0.05, transport=Failing()) as llm:
                with anyio.fail_after(10):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(one, llm, "slow")
                        while sim.requests < 1:
                            await anyio.sleep(0.01)
                        for i in range(12):
                            tg.start_soon(one, llm, f"q{i}")
                stats = llm.stats["s"]
    rows = calls(store)
    store.close()
    assert len(errors) == 13 and all("failed every one of the 12 tries" in e for e in errors), errors[:1]
    assert (stats["calls"], stats["errors"], stats["cancelled"], stats["gave_up"]) == (13, 13, 0, 13), stats
    assert [r["cancelled"] for r in rows] == [0] * 13, [r["error"] for r in rows]
    assert all("the client gave up" in r["error"] for r in rows), rows[0]["error"]
    (slow,) = [r for r in rows if r["prompt_tokens"]]
    assert slow["prompt_tokens"] == count_message_tokens(ask("slow")), slow
    assert slow["error"].startswith("ended after 1 try, its request sent, its answer not read"), slow["error"]


async def test_calls_a_hopeless_client_ends_in_their_backoff_count_no_prompt_of_tries_answered_with_errors(
        tmp_path, monkeypatch):
    """A call ended while it waited to try again after an HTTP 500 has no try under way: the
    prompts its tries sent were answered with errors, not billed. (Over a real connection, whose
    trace says the request went out whole, each such call was recorded "its request sent, no
    answer begun" with its prompt counted as paid: 1,076 and 1,422 tokens for an endpoint that
    answered nothing but 500s.)"""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)


    errors: list[str] = []
    one = _asking_into(errors)

    store = Store(tmp_path / "index.db")
    settings = LLMSettings(api_base=API, requests_per_minute=0, tokens_per_minute=0, max_retries=10,
                           concurrency=12)
    async with Writer(store) as writer:
        async with LLMClient(settings, "sk-test", store=store, writer=writer, run_id="run-1",
                             retry_base_s=0.05, transport=FailsAfterSending()) as llm:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    for i in range(12):
                        tg.start_soon(one, llm, f"q{i}")
            stats = llm.stats["s"]
    rows = calls(store)
    store.close()
    assert len(errors) == 12 and all("failed every one of the" in e for e in errors), errors[:1]
    assert [r["cancelled"] for r in rows] == [0] * 12, [r["error"] for r in rows]
    assert [r["prompt_tokens"] for r in rows] == [0] * 12, [r["error"] for r in rows]
    assert all(", none answered: the client gave up" in r["error"] for r in rows), rows[0]["error"]
    assert (stats["errors"], stats["cancelled"], stats["prompt_tokens"]) == (12, 0, 0), stats


async def test_a_long_answer_cached_compressed_is_not_paid_for_again_after_a_restart(tmp_path):
    # Stored compressed (a third of its JSON), it is still the answer a later process finds.
    from streamrag.answer_cache import PACKED

    long = "entity | Port Selden | geo | a harbour town on the north coast\n" * 50
    paid = Endpoint(httpx.Response(200, json=chat_body(long)))
    async with client(tmp_path, paid) as (llm, store):
        first = await llm.chat(ask(), model="m1", stage="extract")
        (raw,) = [r["response"] for r in store.query("SELECT response FROM llm_cache")]
    store.close()
    assert isinstance(raw, bytes) and raw.startswith(PACKED) and len(raw) * 5 < len(long)
    down = Endpoint(*[httpx.Response(500)] * 5)
    async with client(tmp_path, down, max_retries=0) as (llm, store):
        again = await llm.chat(ask(), model="m1", stage="extract")
        rows = store.query("SELECT cached, prompt_tokens FROM llm_calls ORDER BY id")
    store.close()
    assert again.text == first.text == long and again.cached and not down.requests
    assert [r["cached"] for r in rows] == [0, 1]


async def test_the_clients_of_one_process_share_one_tls_context(tmp_path, monkeypatch):
    # Each client (one per sync of a daemon) loaded the CA bundle into a new context of its own,
    # 50 ms and some 1 MB, an http:// endpoint's too.
    import ssl

    import certifi

    LLMClient(LLMSettings(api_base=API), "")   # (the process's first client makes it)
    made = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: made.append(k) or real(*a, **k))
    clients = [LLMClient(LLMSettings(api_base=base, concurrency=n), "")
               for n, base in enumerate((API, "https://api.example.com/v1", "http://127.0.0.1:9/v1"), 1)]
    for llm in clients:
        await llm.aclose()
    assert made == []
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())   # (read as httpx reads it)
    assert llm_module.tls_context() is llm_module.tls_context()
    assert made == [{"cafile": certifi.where()}]


@pytest.mark.parametrize("content, said", [(None, "no such file"), ("not a certificate\n", "holds no certificate")])
def test_a_ca_bundle_that_cannot_be_loaded_is_one_line_naming_its_variable(tmp_path, monkeypatch, content, said):
    # SSL_CERT_FILE naming a file gone (or not PEM) was a traceback from inside httpx, the
    # variable unnamed.
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_text(content)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    with pytest.raises(ConfigError) as e:
        LLMClient(LLMSettings(api_base="https://api.example.com/v1"), "")
    assert str(e.value).startswith(f"SSL_CERT_FILE={bundle}: {said}")
    assert "set SSL_CERT_FILE to a PEM file" in str(e.value) and "or unset it" in str(e.value)


def test_a_ca_folder_or_the_default_bundle_is_not_said_as_a_bundle_of_ssl_cert_file(tmp_path, monkeypatch):
    # SSL_CERT_DIR is read lazily, at a handshake: one naming a folder gone loads without error
    # (so unread_ca_bundle never named it). Without either variable, certifi's own bundle gone (a
    # broken install) was said "SSL_CERT_DIR=None: no such file; set SSL_CERT_DIR to a PEM file":
    # it is raised as it is.
    import ssl

    import certifi

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "gone"))
    assert isinstance(llm_module.tls_context(), ssl.SSLContext)
    monkeypatch.delenv("SSL_CERT_DIR")
    monkeypatch.setattr(certifi, "where", lambda: str(tmp_path / "gone.pem"))
    llm_module._tls.cache_clear()   # (the process's context, made by an earlier client)
    try:
        with pytest.raises(FileNotFoundError):
            llm_module.tls_context()
    finally:
        llm_module._tls.cache_clear()


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_web_page_quoting_the_key_is_said_with_the_key_hidden(tmp_path, streamed):
    # A proxy's login page answered with HTTP 200 was quoted by its title unhidden.
    page = httpx.Response(200, text=f"<html><head><title>Sign in: Bearer {LEAKED}</title></head></html>",
                          headers={"content-type": "text/html"})
    with anyio.fail_after(5):
        async with client(tmp_path, Endpoint(page), key=LEAKED) as (llm, store):
            with pytest.raises(LLMRequestError, match=r"the answer was an HTML page: Sign in: Bearer \*\*\*, not") as err:
                await llm.chat(ask(), model="m1", stage="answer", on_delta=(lambda _t: None) if streamed else None)
    assert LEAKED not in str(err.value) and LEAKED not in str([dict(r) for r in calls(store)])


def _models(status: int, body: bytes | dict = b"", sent: list | None = None, *, fail: Exception | None = None):
    """A MockTransport handler answering GET /models with ``status`` and ``body`` (``sent``:
    the requests it got), or raising ``fail``."""
    def handle(request: httpx.Request) -> httpx.Response:
        if sent is not None:
            sent.append(request)
        if fail is not None:
            raise fail
        assert request.method == "GET" and request.url.path == "/v1/models", request.url
        return httpx.Response(status, json=body) if isinstance(body, dict) else httpx.Response(status, content=body)
    return handle


async def test_check_key_asks_models_once_and_raises_what_a_chat_call_would_on_401(tmp_path):
    # A wrong key was found only where a call was sent: at a watch's first change, maybe hours later.
    refused = {"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}}
    sent: list[httpx.Request] = []
    with anyio.fail_after(5):
        async with client(tmp_path, _models(401, refused, sent), key="sk-wrong-key-1") as (llm, store):
            with pytest.raises(LLMRequestError) as checked:
                await llm.check_key()
            assert calls(store) == []   # no call of the model: nothing to record
        async with client(tmp_path, Endpoint(httpx.Response(401, json=refused)), key="sk-wrong-key-1") as (llm, _):
            with pytest.raises(LLMRequestError) as chatted:
                await llm.chat(ask(), model="m1", stage="extract")
    assert len(sent) == 1 and sent[0].headers["Authorization"] == "Bearer sk-wrong-key-1"
    assert str(checked.value) == str(chatted.value).replace("/chat/completions", "/models")
    assert "HTTP 401: the API key was rejected" in str(checked.value) and checked.value.every_call


@pytest.mark.parametrize("answer", [
    _models(404, {"error": {"message": "Resource not found"}}),    # Azure's deployments, some servers
    _models(500, {"error": {"message": "boom"}}),
    _models(200, b"<html><head><title>Sign in</title></head></html>"),
    _models(200, {"object": "list", "data": []}),
    # A restricted key may chat but not list models (OpenAI answers 401 so).
    _models(401, {"error": {"message": "You have insufficient permissions for this operation. Missing scopes: "
                                       "api.model.read."}}),
    _models(403, {"error": {"message": "This key may not list models"}}),
    _models(0, fail=httpx.ConnectError("connection refused")),
    _models(0, fail=httpx.ReadTimeout("timed out")),
])
async def test_check_key_says_nothing_of_any_other_answer(tmp_path, answer):
    sent: list[httpx.Request] = []
    with anyio.fail_after(5):
        async with client(tmp_path, lambda r: sent.append(r) or answer(r), max_retries=3) as (llm, _):
            await llm.check_key()
    assert len(sent) == 1   # one try: no retry, no backoff


# -- a proxy in the way (the environment's HTTP_PROXY, HTTPS_PROXY, ALL_PROXY) -----------------

PROXY_PASSWORD = "proxy-LEAKCHECK-7"


def _through(monkeypatch, variable: str, address: str) -> str:
    """Sets ``variable`` alone of the proxy variables to ``address`` with a user and password;
    how messages name that proxy."""
    from conftest import without_proxy_variables

    without_proxy_variables(monkeypatch)
    monkeypatch.setenv(variable, f"http://puser:{PROXY_PASSWORD}@{address}")
    return f"the proxy http://puser:***@{address} (set by {variable})"


def _direct(api_base: str, **settings) -> LLMClient:
    """A client with no transport of its own: httpx reads the environment's proxies."""
    return LLMClient(LLMSettings(api_base=api_base, requests_per_minute=0, tokens_per_minute=0, **settings),
                     retry_base_s=0.01)


async def test_a_proxy_that_is_down_is_said_as_the_proxy_not_as_the_server(simulator, monkeypatch):
    # A proxy set for the internet takes a loopback endpoint's requests too (httpx passes no
    # loopback address over by itself); down, it was said "nothing answers at
    # http://127.0.0.1:.../chat/completions ...; start the server, or fix llm.api_base", a
    # server that was up at a right address.
    from conftest import loopback_proxy

    with loopback_proxy("down") as (address, _):
        proxy = _through(monkeypatch, "HTTP_PROXY", address)
        with anyio.fail_after(30):
            async with _direct(simulator.base_url) as llm:
                with pytest.raises(LLMUnavailableError) as e:
                    await llm.chat(ask(), model="m1", stage="s")
        said = str(e.value)
        assert f"nothing answers at {proxy} that requests to {simulator.base_url}/chat/completions go " \
               "through (" in said, said
        assert "127.0.0.1 is this machine, which needs no proxy: `export NO_PROXY=127.0.0.1`, or unset " \
               "HTTP_PROXY; else start the proxy" in said, said
        assert "start the server" not in said and PROXY_PASSWORD not in said
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")   # as said: the server answers
        with anyio.fail_after(30):
            async with _direct(simulator.base_url) as llm:
                assert (await llm.chat(ask(), model="m1", stage="s")).text


@pytest.mark.parametrize("scheme, variable", [("http", "HTTP_PROXY"), ("https", "HTTPS_PROXY")])
async def test_a_proxy_asking_for_credentials_ends_the_run_at_its_first_refusal(simulator, monkeypatch,
                                                                                   scheme, variable):
    # A 407 to an http:// endpoint's request was said as the server's ("rejected the request
    # for m1: HTTP 407"), and every other call sent; to an https:// endpoint's tunnel (CONNECT)
    # it was retried as a dropped connection, then "check that the server is running".
    from conftest import loopback_proxy

    with loopback_proxy("407") as (address, seen):
        proxy = _through(monkeypatch, variable, address)
        api_base = simulator.base_url.replace("http://", f"{scheme}://")
        with anyio.fail_after(30):
            async with _direct(api_base, max_retries=3) as llm:
                with pytest.raises(LLMRequestError) as e:
                    await llm.chat(ask(), model="m1", stage="s")
    said = str(e.value)
    assert e.value.status == 407 and e.value.every_call
    assert f"{proxy} refused the request, asking for credentials (" + (
        "HTTP 407)" if scheme == "http" else "407 Proxy Authentication Required)") in said, said
    assert said.endswith(f"`export NO_PROXY=127.0.0.1`, or unset {variable}; else fix the user and "
                         f"password in {variable}"), said
    assert PROXY_PASSWORD not in said
    assert len(seen) == 1 and seen[0].startswith("CONNECT " if scheme == "https" else "POST "), seen


@pytest.mark.parametrize("kind, last", [("close", "RemoteProtocolError"), ("hang", "(timeout)")])
async def test_a_proxy_that_drops_or_holds_the_requests_is_named_in_the_advice(simulator, monkeypatch,
                                                                                kind, last):
    # It said "check that the server is running and reachable at llm.api_base" (or "still
    # answers"), the proxy between them unnamed.
    from conftest import loopback_proxy

    with loopback_proxy(kind) as (address, seen):
        proxy = _through(monkeypatch, "ALL_PROXY", address)
        with anyio.fail_after(30):
            async with _direct(simulator.base_url, max_retries=1, request_timeout_s=0.2) as llm:
                with pytest.raises(LLMUnavailableError) as e:
                    await llm.chat(ask(), model="m1", stage="s")
    said = str(e.value)
    assert last in said and f"; requests go through {proxy}: check it too; 127.0.0.1 is this machine, " \
                            "which needs no proxy: `export NO_PROXY=127.0.0.1`, or unset ALL_PROXY" in said, said
    assert PROXY_PASSWORD not in said and len(seen) == 2, seen


@pytest.mark.parametrize("status, max_retries", [("502", 1), ("503", 1), ("502", 0)])
async def test_a_proxys_502_or_503_names_the_proxy(simulator, monkeypatch, status, max_retries):
    # A proxy that cannot reach the server behind it answers an http:// endpoint's requests
    # itself: it said "the server behind llm.api_base answers only HTTP 502 (a proxy or load
    # balancer answers so ...)" (or, with llm.max_retries 0, "the server answered with an error:
    # check its logs"), the proxy in use unnamed, and no NO_PROXY for a server on this machine.
    from conftest import loopback_proxy

    with loopback_proxy(status) as (address, seen):
        proxy = _through(monkeypatch, "HTTP_PROXY", address)
        with anyio.fail_after(30):
            async with _direct(simulator.base_url, max_retries=max_retries) as llm:
                with pytest.raises(LLMUnavailableError) as e:
                    await llm.chat(ask(), model="m1", stage="s")
    said = str(e.value)
    bypass = "127.0.0.1 is this machine, which needs no proxy: `export NO_PROXY=127.0.0.1`, or unset HTTP_PROXY; else "
    if max_retries:
        assert said.endswith(f"; requests to the server at llm.api_base go through {proxy}, which answers only "
                             f"HTTP {status} (as a proxy does while the server behind it is down or out of its "
                             f"reach): {bypass}check that server, and the proxy's logs; {MORE_RETRIES}"), said
    else:
        assert said.endswith(f"; requests go through {proxy}: check it too; {bypass}check the proxy's logs"), said
    assert "a proxy or load balancer" not in said and PROXY_PASSWORD not in said
    assert len(seen) == max_retries + 1 and seen[0].startswith(f"POST {simulator.base_url}/chat/completions "), seen


@pytest.mark.parametrize("max_retries", [1, 0])
async def test_an_https_servers_503_through_a_proxy_is_not_said_as_the_proxys(monkeypatch, max_retries):
    # An https:// endpoint's requests go through HTTPS_PROXY's tunnel (CONNECT): a 503 is the
    # server's (a provider overloaded), the proxy's refusal of the tunnel no status at all
    # (httpx's ProxyError). It was said as the proxy's: "go through the proxy ..., which answers
    # only HTTP 503 ...: check that server, and the proxy's logs" ("check it too", retries 0).
    from collections import Counter

    from streamrag.provider_errors import Retryable

    _through(monkeypatch, "HTTPS_PROXY", "127.0.0.1:3128")
    async with _direct("https://llm.test/v1", max_retries=max_retries) as llm:
        said = llm._call_advice(Retryable("HTTP 503: Service Unavailable", 503), Counter({503: max_retries + 1}))
    assert "127.0.0.1:3128" not in said and "HTTPS_PROXY" not in said, said
    if max_retries:
        assert said.startswith("the server behind llm.api_base answers only HTTP 503 (a proxy or load balancer "), said


async def test_a_client_given_up_on_through_a_proxy_names_the_proxy(simulator, monkeypatch):
    # Every try dropped by the proxy, twelve calls at once: it said "... failed every one of the
    # 12 tries ...: check the server and the model at llm.api_base", the proxy unnamed.
    from conftest import loopback_proxy

    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    with loopback_proxy("close") as (address, _):
        proxy = _through(monkeypatch, "HTTP_PROXY", address)
        with anyio.fail_after(60):
            async with _direct(simulator.base_url, max_retries=10, concurrency=12) as llm:
                errors = await _twelve_calls(llm)
    assert len(errors) == 12 and all("failed every one of the 12 tries" in e for e in errors), errors
    assert all(f"check the server and the model at llm.api_base; requests go through {proxy}: check it too; "
               in e for e in errors), errors[0]


async def test_a_proxy_that_holds_every_request_is_named_when_the_server_is_found_silent(simulator, monkeypatch):
    # Every try held by the proxy, calls of more than one timing out for the hang: it said
    # "... has answered nothing for 1 s ...: the server hangs, or is too slow ...; restart it",
    # the proxy holding the requests unnamed, and no NO_PROXY for a server on this machine.
    from conftest import loopback_proxy

    with loopback_proxy("hang") as (address, _):
        proxy = _through(monkeypatch, "HTTP_PROXY", address)
        with anyio.fail_after(60):
            async with _direct(simulator.base_url, max_retries=6, request_timeout_s=0.1, concurrency=4) as llm:
                errors = await _twelve_calls(llm)
    silent = [e for e in errors if "has answered nothing for" in e]
    assert len(errors) == 12 and silent, errors
    assert all(f"restart it or raise the setting; requests go through {proxy}: check it too; 127.0.0.1 is this "
               "machine, which needs no proxy: `export NO_PROXY=127.0.0.1`, or unset HTTP_PROXY; else check the "
               "proxy's logs, then run the same command" in e for e in silent), silent[0]
    assert not any(PROXY_PASSWORD in e for e in errors)


@pytest.mark.parametrize("scheme, variable", [("http", "HTTP_PROXY"), ("https", "HTTPS_PROXY")])
async def test_a_watchs_key_check_says_a_proxy_asking_for_credentials(simulator, monkeypatch, scheme, variable):
    # GET /models answered 407 by the proxy said nothing (only a 401/403 stops a watch at its
    # start), and the first change's call met it, maybe hours later.
    from conftest import loopback_proxy

    with loopback_proxy("407") as (address, seen):
        proxy = _through(monkeypatch, variable, address)
        with anyio.fail_after(30):
            async with _direct(simulator.base_url.replace("http://", f"{scheme}://")) as llm:
                with pytest.raises(LLMRequestError) as e:
                    await llm.check_key()
    assert f"{proxy} refused the request, asking for credentials" in str(e.value) and e.value.every_call
    assert PROXY_PASSWORD not in str(e.value) and len(seen) == 1, seen


@pytest.mark.parametrize("variable, value", [("HTTP_PROXY", "http://puser:{p}@127.0.0.1:bad"),
                                             ("NO_PROXY", "[::1]")])
def test_proxy_settings_httpx_cannot_read_are_said_not_raised(monkeypatch, variable, value):
    # A proxy's URL with a port that is no number, or NO_PROXY's "[::1]": every command that
    # calls a model ended in a traceback of httpx's InvalidURL.
    _through(monkeypatch, "HTTPS_PROXY", "127.0.0.1:1")
    monkeypatch.setenv(variable, value.format(p=PROXY_PASSWORD))
    with pytest.raises(ConfigError) as e:
        _direct("http://127.0.0.1:2/v1")
    said = str(e.value)
    assert said.startswith("the proxy settings of the environment cannot be read (") and \
        f"check HTTPS_PROXY, {variable} (a proxy is http://[user:password@]host:port;" in said and \
        said.endswith("or unset them") and PROXY_PASSWORD not in said, said


def test_a_socks_proxy_httpx_cannot_reach_is_said_not_raised(monkeypatch):
    # ALL_PROXY=socks5://... without httpx's socksio package: every command that calls a model
    # ended in a traceback of httpx's ImportError.
    import importlib.util

    if importlib.util.find_spec("socksio") is not None:
        pytest.skip("socksio is installed: httpx reaches SOCKS proxies")
    _through(monkeypatch, "ALL_PROXY", "127.0.0.1:1")
    monkeypatch.setenv("ALL_PROXY", f"socks5://puser:{PROXY_PASSWORD}@127.0.0.1:1")
    with pytest.raises(ConfigError) as e:
        _direct("http://127.0.0.1:2/v1")
    assert str(e.value) == ("ALL_PROXY names a SOCKS proxy (socks5://puser:***@127.0.0.1:1), which httpx reaches "
                            "only with the socksio package, not installed here: `pip install 'httpx[socks]'`, or "
                            "unset ALL_PROXY")


async def test_a_longer_whole_answer_from_the_cache_does_not_disprove_the_servers_limit(tmp_path):
    # A cached answer was written before the cuts (a limit set lower since, a context shrunk):
    # it says nothing of the server now. fcb4ef8's test asked a cached answer too short to
    # disprove the mark either way (20 + 70 tokens against 100 + 50), so its check could not fail.
    cut = sized("(Paris, Fra", 100, 50, "length")
    endpoint = Endpoint(sized("(Rome, Italy)", 300, 400), cut, cut)
    async with client(tmp_path, endpoint) as (llm, store):
        await llm.chat(ask("long"), model="m1", stage="extract")          # paid, whole: no mark yet
        with pytest.raises(LLMOutputError, match="in 2 tries"):
            await llm.chat(ask(), model="m1", stage="extract")
        assert model_quirks.server_cuts(API, "m1")
        result = await llm.chat(ask("long"), model="m1", stage="extract")   # from the cache
        assert result.cached and len(endpoint.requests) == 3
        assert model_quirks.server_cuts(API, "m1")


# -- the models a run names, checked before its first call (``LLMClient.check_models``) ----------

def _lists(ids: list[str], sent: list, *, unknown: tuple[str, ...] = (), listing: int = 200):
    """An endpoint listing ``ids`` at GET /models (``listing``: its status), answering a request
    for a model of ``unknown`` 404 model_not_found, any other as served; ``sent`` gets each."""
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.method == "GET":
            return httpx.Response(listing, json={"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})
        model = json.loads(request.content)["model"]
        if model in unknown:
            return httpx.Response(404, json={"error": {"message": f"The model `{model}` does not exist",
                                                       "code": "model_not_found"}})
        return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]})
    return handle


async def test_check_models_stops_at_a_model_neither_listed_nor_served(tmp_path):
    # Only llm.summary_model wrong: a run extracted every chunk, then failed at its first summary.
    sent: list[httpx.Request] = []
    handler = _lists([f"model-{i}" for i in range(9)], sent, unknown=("missing-model",))
    with anyio.fail_after(5):
        async with client(tmp_path, handler, api_base="http://models-a.test/v1", extraction_model="model-1",
                          summary_model="missing-model", report_model="model-1") as (llm, store):
            with pytest.raises(LLMRequestError) as stopped:
                await llm.check_models(["extraction_model", "summary_model", "report_model"])
            # The request asking it by name is a call, recorded as any (refused: no tokens)
            [row] = calls(store)
    assert (row["stage"], row["model"], row["prompt_tokens"], row["completion_tokens"]) == \
        ("model_check", "missing-model", 0, 0) and "HTTP 404" in row["error"]
    assert row["apart"] == 0   # (the refusal, a failed call of its stage: `status` counts it among its errors)
    said = str(stopped.value)
    assert said.startswith("unknown model: llm.summary_model = 'missing-model': ") and stopped.value.every_call
    assert "http://models-a.test/v1/models lists: model-0, model-1, model-2, model-3, model-4, model-5 and 3 more" in said
    assert [(r.method, r.url.path) for r in sent] == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]


@pytest.mark.parametrize("ids, named", [
    (["llama3:latest", "qwen2:7b"], "llama3"),             # Ollama serves "llama3" as "llama3:latest"
    (["models/gemini-2.0-flash"], "gemini-2.0-flash"),   # Gemini lists models/...
])
async def test_check_models_reads_a_listing_as_servers_name_them(tmp_path, ids, named):
    sent: list[httpx.Request] = []
    with anyio.fail_after(5):
        async with client(tmp_path, _lists(ids, sent), api_base=f"http://{named}.test/v1",
                          summary_model=named) as (llm, _):
            await llm.check_models(["summary_model"])
    assert [r.method for r in sent] == ["GET"]   # listed: nothing asked of the model


async def test_check_models_lets_a_model_the_listing_leaves_out_go_on_when_it_is_served(tmp_path):
    # llama.cpp serves any name and lists one: a refusal would stop a run that works.
    sent: list[httpx.Request] = []
    with anyio.fail_after(5):
        for _ in range(2):
            async with client(tmp_path, _lists(["ggml-model-q4.gguf"], sent), api_base="http://models-b.test/v1",
                              summary_model="gpt-4o-mini") as (llm, store):
                await llm.check_models(["summary_model"])
    assert [r.method for r in sent] == ["GET", "POST"]   # found served once: not asked again
    assert json.loads(sent[1].content)["max_tokens"] == 1
    # A paid call (its prompt and its token; this server says no usage: counted, as a chat call's
    # is), recorded as any: it was not, and `status` and the benches missed what it cost.
    [row] = calls(store)
    assert (row["stage"], row["model"], row["error"], row["cached"]) == ("model_check", "gpt-4o-mini", None, 0)
    assert row["prompt_tokens"] == count_message_tokens(json.loads(sent[1].content)["messages"])
    assert row["completion_tokens"] == 1


@pytest.mark.parametrize("answer", [200, 500])
async def test_check_models_asks_a_model_its_index_saw_answered_by_name_no_more(tmp_path, answer):
    # Found served once a process: every `index` (a new process), an unchanged index's too, paid
    # the call again. Only an answer is noted: a server error tells nothing, asked again.
    from streamrag import llm as llm_module

    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "ggml-model-q4.gguf"}]})
        said = {"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]}
        return httpx.Response(answer, json=said if answer == 200 else {"error": {"message": "busy"}})
    with anyio.fail_after(5):
        for _ in range(2):
            llm_module._MODELS_SERVED.clear()   # (a command's process)
            async with client(tmp_path, handler, api_base="http://models-noted.test/v1",
                              summary_model="llama3") as (llm, store):
                await llm.check_models(["summary_model"])
    assert [r.method for r in sent] == (["GET", "POST", "GET"] if answer == 200 else ["GET", "POST"] * 2)


async def test_check_models_records_the_usage_a_server_says_of_the_request_by_name(tmp_path):
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "only-one"}]})
        usage = {"prompt_tokens": 9, "completion_tokens": 1}   # (each route's answer, as the API's)
        if request.url.path.endswith("/embeddings"):
            return httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.1, 0.2]}], "usage": usage})
        return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "length"}],
                                         "usage": usage})
    with anyio.fail_after(5):
        async with client(tmp_path, handler, api_base="http://models-usage.test/v1",
                          embedding_model="embedder", summary_model="summarizer") as (llm, store):
            await llm.check_models(["summary_model", "embedding_model"])
            rows = calls(store)
            stats = llm.stats["model_check"]
    assert sorted((r["model"], r["prompt_tokens"], r["completion_tokens"]) for r in rows) == \
        [("embedder", 9, 0), ("summarizer", 9, 1)]
    assert {r["stage"] for r in rows} == {"model_check"} and {r["run_id"] for r in rows} == {"run-1"}
    assert (stats["calls"], stats["prompt_tokens"], stats["completion_tokens"]) == (2, 18, 1)


@pytest.mark.parametrize("listing, version", [(404, ""), (500, ""), (200, "2024-10-21")])
async def test_check_models_asks_nothing_more_without_a_listing(tmp_path, listing, version):
    # No /models (some servers), an error, or Azure's deployments (named by llm.api_version).
    sent: list[httpx.Request] = []
    with anyio.fail_after(5):
        async with client(tmp_path, _lists(["other"], sent, unknown=("missing-model",), listing=listing),
                          api_base=f"http://models-c{listing}{version}.test/v1", api_version=version,
                          summary_model="missing-model") as (llm, _):
            await llm.check_models(["summary_model"])
            await llm.check_models(["summary_model"])   # (a watch's next sync: no listing, not asked again)
    assert [r.method for r in sent] == ([] if version else ["GET"])


@pytest.mark.parametrize("hangs", ["GET", "POST"])
async def test_check_models_waits_for_a_hanging_server_no_longer_than_models_timeout(tmp_path, monkeypatch, hangs):
    # A run with nothing to ask paid the whole llm.request_timeout_s for a listing or a model
    # asked by name that never came; it goes on after MODELS_TIMEOUT_S, as without a listing.
    monkeypatch.setattr(llm_module, "MODELS_TIMEOUT_S", 0.2)
    sent: list[httpx.Request] = []
    listing = _lists(["listed"], sent)

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.method == hangs:
            sent.append(request)
            await anyio.sleep(60)
        return listing(request)

    with anyio.fail_after(5):
        async with client(tmp_path, handler, api_base=f"http://models-hang-{hangs}.test/v1", request_timeout_s=30,
                          summary_model="unlisted") as (llm, store):
            await llm.check_models(["summary_model"])
            rows = calls(store)
    assert [r.method for r in sent] == (["GET"] if hangs == "GET" else ["GET", "POST"])
    # (the request by name went out: a call, recorded as one that got no answer)
    assert [(r["stage"], r["model"], r["error"].split(": ")[1]) for r in rows] == \
        ([] if hangs == "GET" else [("model_check", "unlisted", "no answer to the check of unlisted")])


async def test_check_models_names_every_setting_of_the_unknown_model(tmp_path):
    # The same wrong model in three settings was said of llm.extraction_model alone: fixed, the next
    # run stopped at llm.summary_model, then llm.report_model.
    sent: list[httpx.Request] = []
    with anyio.fail_after(5):
        async with client(tmp_path, _lists(["other"], sent, unknown=("missing-model",)),
                          api_base="http://models-d.test/v1", extraction_model="missing-model",
                          summary_model="missing-model", report_model="missing-model") as (llm, _):
            with pytest.raises(LLMRequestError) as stopped:
                await llm.check_models(["extraction_model", "summary_model", "report_model"])
    assert str(stopped.value).startswith("unknown model: llm.extraction_model / llm.summary_model / "
                                         "llm.report_model = 'missing-model': the endpoint does not serve it ")
    assert [r.method for r in sent] == ["GET", "POST"]


# -- a call's refusal of its model, said with what the endpoint lists (``LLMClient._refused_model``) --

async def test_a_refused_model_is_said_with_the_listing_asked_once_after_the_refusals(tmp_path):
    # `ask` checks no model before its first call (a GET /models on every question); a refusal
    # said "unknown model or wrong api_base ... check llm.answer_model", without what is served.
    sent: list[httpx.Request] = []
    handler = _lists(["gpt-4o", "gpt-4o-mini"], sent, unknown=("gpt-4o-mni",))
    with anyio.fail_after(5):
        async with client(tmp_path, handler, api_base="http://refused-a.test/v1", answer_model="gpt-4o-mni",
                          rating_model="gpt-4o-mini") as (llm, _):
            await llm.chat(ask(), model="gpt-4o-mini", stage="rate", max_tokens=1, on_length="accept")
            assert [r.method for r in sent] == ["POST"]   # an answer: no listing asked
            refused: list[BaseException] = []

            async def answer(i: int) -> None:
                try:
                    await llm.chat(ask(f"q{i}"), model="gpt-4o-mni", stage="answer")
                except LLMRequestError as e:
                    refused.append(e)
            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(answer, i)
    assert len(refused) == 4 and {str(e) for e in refused} == {
        "unknown model: llm.answer_model = 'gpt-4o-mni': the endpoint does not serve it (not among the models "
        "http://refused-a.test/v1/models lists: gpt-4o, gpt-4o-mini, and refused by name: The model `gpt-4o-mni` "
        "does not exist); give a model it serves, or check llm.api_base"}
    assert all(e.every_call for e in refused)
    assert [r.method for r in sent].count("GET") == 1


async def test_the_models_a_server_lists_reach_no_terminal_with_their_controls(tmp_path):
    # The ids of GET /models are a server's words too: the line of a model refused by name
    # (at the check, and at a call) printed them as they came, "\x1b[2J" and "\x1b]0;...\x07"
    # clearing and titling the terminal, a newline and a reordering mark in the line.
    sent: list[httpx.Request] = []
    handler = _lists(["llama3\x1b[2J\x1b]0;pwned\x07", "qwen\n2 \u202eevil", "caf\u00e9-\u6a21\u578b"], sent,
                     unknown=("gone",))
    said = []
    with anyio.fail_after(5):
        async with client(tmp_path, handler, api_base="http://listed-ids.test/v1", summary_model="gone") as (llm, _):
            with pytest.raises(LLMRequestError) as stopped:
                await llm.check_models(["summary_model"])
            said.append(str(stopped.value))
            with pytest.raises(LLMRequestError) as refused:
                await llm.chat(ask(), model="gone", stage="summarize")
            said.append(str(refused.value))
    for line in said:
        assert "lists: caf\u00e9-\u6a21\u578b, llama3, qwen 2 \\u202eevil, and refused by name" in line, line
        assert not any(ch < " " or "\x7f" <= ch <= "\x9f" or ch == "\u202e" for ch in line), repr(line)


def _ollama(sent: list, *, pulled: tuple[str, ...] = ("qwen2:7b",)):
    """Ollama at /v1: lists the models pulled, refuses any other 404 in its own words."""
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": i} for i in pulled]})
        model = json.loads(request.content)["model"]
        if listed(model, set(pulled)):
            return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]})
        return httpx.Response(404, json={"error": {"message": f'model "{model}" not found, try pulling it first',
                                                   "type": "api_error", "param": None, "code": None}})
    return handle


@pytest.mark.parametrize("how", ["ask", "check"])
async def test_a_refused_model_is_said_with_the_providers_words(tmp_path, how):
    # Ollama's refusal says the fix ("try pulling it first": `ollama pull llama3`); a refusal said
    # with the listing, a call's (ask's) or check_models', dropped it, and the api_base hint too.
    sent: list[httpx.Request] = []
    with anyio.fail_after(5):
        async with client(tmp_path, _ollama(sent), api_base=f"http://ollama-{how}.test/v1", answer_model="llama3",
                          summary_model="llama3") as (llm, _):
            with pytest.raises(LLMRequestError) as refused:
                if how == "ask":
                    await llm.chat(ask(), model="llama3", stage="answer")
                else:
                    await llm.check_models(["summary_model"])
    said = str(refused.value)
    assert said.startswith("unknown model: llm.summary_model / llm.answer_model = 'llama3': the endpoint does not "
                           f"serve it (not among the models http://ollama-{how}.test/v1/models lists: qwen2:7b, and "
                           'refused by name: model "llama3" not found, try pulling it first); give a model it '
                           "serves, or check llm.api_base")


async def test_a_refused_model_no_setting_names_is_said_without_a_setting(tmp_path):
    # A library's call of a model no setting names was said "llm.*_model = 'bad'": no such setting.
    sent: list[httpx.Request] = []
    with anyio.fail_after(5):
        async with client(tmp_path, _lists(["gpt-4o"], sent, unknown=("bad",)), api_base="http://refused-c.test/v1",
                          answer_model="gpt-4o") as (llm, _):
            with pytest.raises(LLMRequestError) as refused:
                await llm.chat(ask(), model="bad", stage="answer")
    assert str(refused.value).startswith("unknown model: 'bad': the endpoint does not serve it (not among the "
                                         "models http://refused-c.test/v1/models lists: gpt-4o, and refused by name")
    assert "llm.*_model" not in str(refused.value)


@pytest.mark.parametrize("stage", ["summarize", "embed"])
async def test_a_model_answered_by_name_then_refused_is_checked_again(tmp_path, stage):
    # Noted once answered by name (models_answered_by_name), it was asked no more: a server that
    # since stopped serving it had every later run do its work first and fail at its first call.
    from streamrag import llm as llm_module

    sent: list[httpx.Request] = []
    serves = {"llama3": True, "embedder": True}

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        model = json.loads(request.content)["model"]
        if not serves[model]:
            return httpx.Response(404, json={"error": {"message": f"The model `{model}` does not exist",
                                                       "code": "model_not_found"}})
        if request.url.path.endswith("/embeddings"):
            return httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.1, 0.2]}]})
        return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]})

    name, model = ("summary_model", "llama3") if stage == "summarize" else ("embedding_model", "embedder")
    settings = {"api_base": f"http://noted-{stage}.test/v1", name: model}
    with anyio.fail_after(5):
        llm_module._MODELS_SERVED.clear()
        async with client(tmp_path, handler, **settings) as (llm, store):
            await llm.check_models([name])   # answered by name: noted
        serves[model] = False   # (the server no longer serves it)
        llm_module._MODELS_SERVED.clear()   # (the next run, a new process)
        async with client(tmp_path, handler, **settings) as (llm, store):
            await llm.check_models([name])   # noted: not asked
            assert [r.method for r in sent] == ["GET", "POST", "GET"]
            with pytest.raises(LLMRequestError, match="^unknown model"):
                if stage == "summarize":
                    await llm.chat(ask(), model=model, stage=stage)
                else:
                    await llm.embed(["x"], model=model)
        del sent[:]
        async with client(tmp_path, handler, **settings) as (llm, store):   # (the process's next run, a sync)
            with pytest.raises(LLMRequestError, match="Stopped before any work of the run"):
                await llm.check_models([name])
        llm_module._MODELS_SERVED.clear()   # (a new process's run)
        async with client(tmp_path, handler, **settings) as (llm, store):
            with pytest.raises(LLMRequestError, match="Stopped before any work of the run"):
                await llm.check_models([name])
    assert [r.method for r in sent] == ["GET", "POST"] * 2


@pytest.mark.parametrize("ids, listing", [(["gpt-4o-mni"], 200), ([], 404)])
async def test_a_refused_model_the_listing_holds_or_without_a_listing_is_said_as_the_call_said_it(
        tmp_path, ids, listing):
    sent: list[httpx.Request] = []
    with anyio.fail_after(5):
        async with client(tmp_path, _lists(ids, sent, unknown=("gpt-4o-mni",), listing=listing),
                          api_base=f"http://refused-b{listing}.test/v1", answer_model="gpt-4o-mni") as (llm, _):
            with pytest.raises(LLMRequestError, match=r"^unknown model or wrong api_base: gpt-4o-mni at "):
                await llm.chat(ask(), model="gpt-4o-mni", stage="answer")


async def test_the_check_by_name_records_a_refusal_without_the_key_it_quotes(tmp_path):
    # A server quoting the request back put the API key in the check's llm_calls row, which
    # `status --failures` shows: a call's own rows hide it.
    key = "sk-secret-0123456789"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        said = f"model missing-model not found (request: Authorization: Bearer {key})"
        return httpx.Response(404, json={"error": {"message": said}})
    with anyio.fail_after(5):
        async with client(tmp_path, handler, key=key, api_base="http://models-key.test/v1",
                          summary_model="missing-model") as (llm, store):
            with pytest.raises(LLMRequestError) as stopped:
                await llm.check_models(["summary_model"])
            [row] = calls(store)
    assert key not in row["error"] and "Bearer ***" in row["error"]
    assert key not in str(stopped.value) and "Bearer ***" in str(stopped.value)


@pytest.mark.parametrize("body", ["<html><head><title>Sign in to the proxy</title></head></html>", "not json"])
async def test_a_page_answering_the_check_by_name_is_a_failed_call_not_an_answer(tmp_path, body):
    # Recorded as a paid call answered (its prompt and token counted): a watch's idle and outage
    # lines read the endpoint as answering (``watch_lines.answered``); a chat call's page is an error.
    from streamrag.watch_lines import answered

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        return httpx.Response(200, text=body, headers={"content-type": "text/html"})
    with anyio.fail_after(5):
        async with client(tmp_path, handler, api_base="http://models-page.test/v1", summary_model="unlisted") \
                as (llm, store):
            await llm.check_models(["summary_model"])   # (goes on: the run's first call says it)
            [row] = calls(store)
            stats = llm.stats
    assert row["error"] and (row["prompt_tokens"], row["completion_tokens"]) == (0, 0)
    assert ("Sign in to the proxy" in row["error"]) == body.startswith("<html")
    # (failed, no call of the run's work: counted in no stats, ``CallLog.record``'s apart)
    assert "model_check" not in stats and not answered(stats)
    assert store.get_meta(llm_module.MODELS_ANSWERED) is None


@pytest.mark.parametrize("name, body", [
    ("summary_model", {"error": {"message": "model unlisted not found (Bearer KEY)", "code": 404}}),
    ("summary_model", {"choices": []}),
    ("embedding_model", {"error": {"message": "model unlisted not found (Bearer KEY)"}}),
    ("embedding_model", {"object": "list", "data": []}),
])
async def test_a_json_answer_to_the_check_by_name_that_holds_no_answer_is_a_failed_call(tmp_path, name, body):
    # A 200 error object (a gateway's "model not found" sent with 200) is JSON, and was noted
    # answered: every later run asked the model no more, though each call of it fails ("answer
    # without choices"), and that failure is no unknown-model refusal, which takes the note back.
    key = "sk-secret-0123456789"   # (a server quoting the request back)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        return httpx.Response(200, text=json.dumps(body).replace("KEY", key),
                              headers={"content-type": "application/json"})
    settings = {"api_base": "http://models-json.test/v1", name: "unlisted"}
    with anyio.fail_after(5):
        async with client(tmp_path, handler, key=key, **settings) as (llm, store):
            await llm.check_models([name])   # (goes on: the run's first call says it)
            [row] = calls(store)
            stats = llm.stats
    assert row["error"] and (row["prompt_tokens"], row["completion_tokens"]) == (0, 0)
    assert key not in row["error"] and ("model unlisted not found" in row["error"]) == ("error" in body)
    assert "model_check" not in stats   # (failed, no call of the run's work: ``CallLog.record``'s apart)
    assert store.get_meta(llm_module.MODELS_ANSWERED) is None


@pytest.mark.parametrize("failure", ["no answer", "page", "error object", "server error"])
async def test_a_failed_check_by_name_is_asked_again_by_the_process_s_next_run(tmp_path, failure):
    # A check that failed was still taken as served for the process (``_MODELS_SERVED``): a long
    # watch asked the model by name no more, and found it unserved at its first call, an hour in.
    sent: list[httpx.Request] = []
    fails = [True]

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        if not fails[0]:
            return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]})
        if failure == "no answer":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        if failure == "page":
            return httpx.Response(200, text="<html><title>Sign in</title></html>", headers={"content-type": "text/html"})
        if failure == "error object":
            return httpx.Response(200, json={"error": {"message": "model unlisted not found"}})
        return httpx.Response(500, json={"error": {"message": "busy"}})
    api = f"http://models-failed-{failure.replace(' ', '-')}.test/v1"
    with anyio.fail_after(5):
        for run in range(4):   # (one process: a watch's syncs)
            fails[0] = run < 2
            async with client(tmp_path, handler, api_base=api, summary_model="unlisted") as (llm, store):
                await llm.check_models(["summary_model"])
    # failed twice: asked again; answered: asked no more
    assert [r.method for r in sent] == ["GET", "POST"] * 3
    assert json.loads(store.get_meta(llm_module.MODELS_ANSWERED)) == {f"{api}/models": ["unlisted"]}


async def test_a_refusal_whose_note_a_busy_index_kept_is_still_said_as_the_refusal(tmp_path, caplog):
    # Taking the refused model out of the index's note (models_answered_by_name) met another
    # program's write lock past the wait: its StoreBusyError replaced the refusal the user must see.
    import sqlite3

    from streamrag.errors import StoreBusyError

    refused = {"error": {"message": "The model `llama3` does not exist", "code": "model_not_found"}}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]})
    api = "http://noted-busy.test/v1"
    with anyio.fail_after(10), caplog.at_level(logging.DEBUG, logger="streamrag.llm"):
        async with client(tmp_path, handler, api_base=api, summary_model="llama3") as (llm, store):
            await llm.check_models(["summary_model"])   # answered by name: noted
        noted = store.get_meta(llm_module.MODELS_ANSWERED)
        assert json.loads(noted) == {f"{api}/models": ["llama3"]}
        store = Store(tmp_path / "index.db")
        holder = sqlite3.connect(tmp_path / "index.db", isolation_level=None)
        try:
            async with Writer(store, patience=0.2) as writer:
                async with LLMClient(LLMSettings(api_base=api, summary_model="llama3"), "sk-test", store=store,
                                     writer=writer, run_id="run-2", transport=httpx.MockTransport(handler)) as llm:
                    with pytest.raises(LLMRequestError) as refusal:   # (a call's, as the server words it)
                        llm._replies.check_status(httpx.Response(404, json=refused), llm.chat_url, "llama3")
                    holder.execute("BEGIN IMMEDIATE")   # (another program writing the index)
                    with pytest.raises(StoreBusyError):   # (held past the writer's patience)
                        await writer.run(lambda s: s.set_meta("k", "v"))
                    said = await llm._refused_model(refusal.value, "llama3")
        finally:
            holder.close()
    assert isinstance(said, LLMRequestError) and said.every_call
    assert str(said).startswith("unknown model: llm.summary_model = 'llama3': the endpoint does not serve it")
    assert (f"{api}/models", "llama3") not in llm_module._MODELS_SERVED   # (asked again by the next run)
    assert store.get_meta(llm_module.MODELS_ANSWERED) == noted   # (a later refusal takes it back)
    [line] = [r.getMessage() for r in caplog.records if "stays noted" in r.getMessage()]
    assert "llama3" in line and "locked by another process" in line


@pytest.mark.parametrize("how", ["refused", "shared"])
async def test_a_refusal_whose_row_a_busy_index_kept_out_is_still_said_as_the_refusal(tmp_path, caplog, how):
    # Its llm_calls row met another program's write lock past the writer's wait: the
    # StoreBusyError of that bookkeeping was raised in place of the refusal the user must act on.
    import sqlite3

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        if json.loads(request.content)["model"] == "gone":
            return httpx.Response(404, json={"error": {"message": "The model `gone` does not exist",
                                                       "code": "model_not_found"}})
        return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]})
    store = Store(tmp_path / "index.db")
    holder = sqlite3.connect(tmp_path / "index.db", isolation_level=None)
    try:
        with anyio.fail_after(10), caplog.at_level(logging.DEBUG, logger="streamrag.call_log"):
            async with Writer(store, patience=0.2) as writer:
                async with LLMClient(LLMSettings(api_base="http://busy-row.test/v1", summary_model="gone"), "sk-test",
                                     store=store, writer=writer, run_id="run-1",
                                     transport=httpx.MockTransport(handler)) as llm:
                    holder.execute("BEGIN IMMEDIATE")   # (another program writing the index)
                    refused: list[BaseException] = []

                    async def summarize() -> None:
                        try:
                            await llm.chat(ask(), model="gone", stage="summarize")
                        except Exception as e:   # noqa: BLE001 (what the caller gets is the question)
                            refused.append(e)
                    async with anyio.create_task_group() as tg:   # (two alike: the second waits on the first)
                        for _ in range(2 if how == "shared" else 1):
                            tg.start_soon(summarize)
                    holder.execute("ROLLBACK")
                    assert refused and all(isinstance(e, LLMRequestError) for e in refused), refused
                    assert str(refused[0]).startswith("unknown model: llm.summary_model = 'gone'")
                    await llm.chat(ask(), model="other", stage="summarize")   # (its write takes them along)
    finally:
        holder.close()
    rows = calls(store)
    assert [r["model"] for r in rows] == ["gone"] * len(refused) + ["other"]
    assert all(r["error"].startswith("unknown model") for r in rows[:-1]), rows
    assert any("kept for the next write" in r.getMessage() for r in caplog.records)


def _gone_unless_served(served: set[str]):
    """A server listing only "other" that answers a chat of a model in ``served`` (changed as a
    test goes) and refuses any other as OpenAI does (404, code model_not_found)."""
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        if json.loads(request.content)["model"] in served:
            return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]})
        return httpx.Response(404, json={"error": {"message": "The model `gone` does not exist",
                                                   "code": "model_not_found"}})
    return handler


@pytest.mark.parametrize("where", ["call", "check", "noted"])
@pytest.mark.parametrize("why", ["disk full", "read-only"])
async def test_a_refusal_whose_row_the_index_could_not_take_is_still_said_as_the_refusal(tmp_path, monkeypatch,
                                                                                         caplog, why, where):
    # Only another program's lock (StoreBusyError) was kept from replacing the refusal when its
    # llm_calls row (or the answered-by-name note's removal) could not be written: a full disk
    # or a read-only index raised "database or disk is full" in place of the unknown model.
    import sqlite3

    served = {"gone"} if where == "noted" else set()
    handler = _gone_unless_served(served)

    def full(*_args) -> None:
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorname = "SQLITE_FULL"   # (as SQLite's own says it)
        raise error
    llm_module._MODELS_SERVED.clear()
    with anyio.fail_after(10), caplog.at_level(logging.DEBUG):
        async with client(tmp_path, handler, api_base=f"http://{where}-unwritable.test/v1",
                          summary_model="gone") as (llm, store):
            if where == "noted":
                await llm.check_models(["summary_model"])   # answered by name: noted
                served.clear()
            if why == "disk full":
                monkeypatch.setattr(Store, "record_call", full)
                monkeypatch.setattr(Store, "set_meta", full)
            else:
                store.conn.execute("PRAGMA query_only = ON")   # (SQLite: "attempt to write a readonly database")
            with pytest.raises(LLMRequestError) as refused:
                if where == "check":
                    await llm.check_models(["summary_model"])
                else:
                    await llm.chat(ask(), model="gone", stage="summarize")
            store.conn.execute("PRAGMA query_only = OFF")
            monkeypatch.undo()
        llm_module._MODELS_SERVED.clear()
    assert str(refused.value).startswith("unknown model: llm.summary_model = 'gone': "), str(refused.value)
    # (kept for the next write: written as the client closed, the index writable again)
    assert [r["model"] for r in calls(store) if r["error"]] == ["gone"]
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not said, said


@pytest.mark.parametrize("where", ["call", "check", "noted"])
async def test_a_bug_of_the_index_at_a_refusals_row_is_raised_not_kept(tmp_path, monkeypatch, where):
    # A full disk or a read-only index is no bug, and the refusal is said in its place; an
    # OperationalError of another kind is one (a column a bad migration left out: SQLite's
    # SQLITE_ERROR, "no such column"), and was kept as a row for later, said as a warning at the
    # client's close: a traceback, as the CLI raises any such error (``cli._database_failed``).
    import sqlite3

    served = {"gone"} if where == "noted" else set()
    handler = _gone_unless_served(served)

    def broken(*_args) -> None:
        error = sqlite3.OperationalError("table llm_calls has no column named apart")
        error.sqlite_errorname = "SQLITE_ERROR"
        raise error
    llm_module._MODELS_SERVED.clear()
    with anyio.fail_after(10):
        async with client(tmp_path, handler, api_base=f"http://{where}-bug.test/v1",
                          summary_model="gone") as (llm, _):
            if where == "noted":
                await llm.check_models(["summary_model"])   # answered by name: noted
                served.clear()
            monkeypatch.setattr(Store, "record_call", broken)
            if where == "noted":   # (the note's removal, its call's row written)
                monkeypatch.undo()
                monkeypatch.setattr(Store, "set_meta", broken)
            with pytest.raises(sqlite3.OperationalError, match="no column named apart"):
                if where == "check":
                    await llm.check_models(["summary_model"])
                else:
                    await llm.chat(ask(), model="gone", stage="summarize")
            monkeypatch.undo()
        llm_module._MODELS_SERVED.clear()


_PAGE_404 = "<!DOCTYPE html><html><head><title>Model Gateway: 404 Not Found</title></head><body>nothing here</body></html>"


def _pages_404(sent: list, *, served: set[str]):
    """A proxy in front of a server: it lists the models, answers those ``served``, and any
    other request with its own HTML 404 page (a route it does not pass on)."""
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        if json.loads(request.content)["model"] in served:
            return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]})
        return httpx.Response(404, text=_PAGE_404, headers={"content-type": "text/html"})
    return handle


async def test_an_html_404_is_a_wrong_address_not_a_model_refused_by_name(tmp_path):
    # Any HTML 404 (a wrong base URL, a proxy's page) was "unknown model or wrong api_base": a
    # model answered by name before was taken out of the index's note and said "refused by name:
    # an HTML page: ...", and the check by name took a page naming "Model" for a refusal.
    sent: list[httpx.Request] = []
    served = {"llama3"}
    api = "http://html-404.test/v1"
    with anyio.fail_after(10):
        llm_module._MODELS_SERVED.clear()
        async with client(tmp_path, _pages_404(sent, served=served), api_base=api, summary_model="llama3") \
                as (llm, store):
            await llm.check_models(["summary_model"])   # answered by name: noted
            noted = store.get_meta(llm_module.MODELS_ANSWERED)
            assert json.loads(noted) == {f"{api}/models": ["llama3"]}
            served.clear()   # (the proxy's page now, whatever the model)
            with pytest.raises(LLMRequestError) as page:
                await llm.chat(ask(), model="llama3", stage="summarize")
            assert store.get_meta(llm_module.MODELS_ANSWERED) == noted   # (no refusal of the model's)
        llm_module._MODELS_SERVED.clear()
        async with client(tmp_path / "check", _pages_404(sent, served=set()), api_base=api,
                          summary_model="llama3") as (llm, _):
            await llm.check_models(["summary_model"])   # (goes on: the run's first call says it)
    said = str(page.value)
    assert said.startswith(f"{api}/chat/completions: HTTP 404, an HTML page: Model Gateway: 404 Not Found: the "
                           "address leads to a web page"), said
    assert "refused by name" not in said and "unknown model" not in said and "fix llm.api_base" in said, said
    assert page.value.every_call and page.value.status == 404


@pytest.mark.parametrize("route_404", [
    httpx.Response(404, json={"detail": "Not Found"}),   # (FastAPI's, vLLM's: a path it does not serve)
    httpx.Response(404, text="404 page not found"),      # (Go's, Ollama's)
], ids=["json", "plain"])
async def test_a_404_of_no_model_is_no_refusal_by_name(tmp_path, route_404):
    # A 404 whose words speak of no model (a path the server does not serve, behind a listing
    # that answers) took the model answered by name out of the index's note and was said
    # "refused by name: Not Found", where the check by name took the same words for no refusal.
    served = {"llama3"}
    api = "http://route-404.test/v1"

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        if json.loads(request.content)["model"] in served:
            return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]})
        return route_404
    with anyio.fail_after(10):
        llm_module._MODELS_SERVED.clear()
        async with client(tmp_path, handle, api_base=api, summary_model="llama3") as (llm, store):
            await llm.check_models(["summary_model"])   # answered by name: noted
            noted = store.get_meta(llm_module.MODELS_ANSWERED)
            served.clear()
            with pytest.raises(LLMRequestError) as refused:
                await llm.chat(ask(), model="llama3", stage="summarize")
            assert store.get_meta(llm_module.MODELS_ANSWERED) == noted
        llm_module._MODELS_SERVED.clear()
    said = str(refused.value)
    assert said.startswith(f"unknown model or wrong api_base: llama3 at {api}/chat/completions; check "
                           "llm.summary_model = 'llama3': give a model the server serves, or llm.api_base"), said
    assert "refused by name" not in said


@pytest.mark.parametrize("body", [
    {"error": {"message": "The requested resource was not found", "code": "model_not_found"}},
    {"code": "model_not_found", "message": "Not Found"},   # (a body that is its error)
], ids=["error.code", "code"])
async def test_a_404_whose_code_says_model_not_found_is_a_refusal_by_name(tmp_path, body):
    # Its words name neither "model" nor the model: the check by name took it for no refusal
    # (the run went on, to fail at the model's first call, an hour in), and a call refused so
    # kept the model noted answered by name. The code decides, as a 400's does.
    served = {"llama3"}

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        if json.loads(request.content)["model"] in served:
            return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]})
        return httpx.Response(404, json=body)
    with anyio.fail_after(10):
        llm_module._MODELS_SERVED.clear()
        async with client(tmp_path / "check", handle, api_base="http://code-404.test/v1",
                          summary_model="missing") as (llm, store):
            with pytest.raises(LLMRequestError) as stopped:
                await llm.check_models(["summary_model"])
            [row] = calls(store)
        async with client(tmp_path / "call", handle, api_base="http://code-404.test/v1",
                          summary_model="llama3") as (llm, store):
            await llm.check_models(["summary_model"])   # answered by name: noted
            served.clear()
            with pytest.raises(LLMRequestError) as refused:
                await llm.chat(ask(), model="llama3", stage="summarize")
            assert store.get_meta(llm_module.MODELS_ANSWERED) == "{}"   # (the note taken back)
        llm_module._MODELS_SERVED.clear()
    assert str(stopped.value).startswith("unknown model: llm.summary_model = 'missing': ") and row["apart"] == 0
    assert "refused by name" in str(stopped.value) and "refused by name" in str(refused.value), str(refused.value)


# An error body's shapes, and whether it refuses the model by its code. (Words anywhere are no
# refusal: a 400 about the check's max_tokens 1 that linked the provider's error codes stopped the
# run with "unknown model".)
_CODED_BODIES = [
    ({"error": {"message": "max_tokens must be at least 16", "type": "invalid_request_error", "param": "max_tokens",
                "code": "integer_below_min_value"}, "docs": "https://docs.test/errors (model_not_found, ...)"}, False),
    ({"error": {"message": "Invalid request: see model_not_found in the docs", "code": "bad_request"}}, False),
    ({"error": "model 'other' not found"}, False),   # (Ollama's words, of another model)
    ({"error": {"message": "not served", "code": "model_not_found"}}, True),
    ({"error": {"message": "not served", "code": 404, "type": "model_not_found"}}, True),
    ({"code": "model_not_found", "message": "Not Found"}, True),
    ({"detail": {"code": "model_not_found", "message": "no such deployment"}}, True),
    ({"detail": {"type": "model_not_found", "msg": "no such deployment"}}, True),
    ({"detail": "model_not_found"}, True),
    ({"error": "model_not_found"}, True),
]
_CODED_IDS = ["words-elsewhere", "words-in-message", "words-of-another", "error.code", "error.type",
              "code", "detail.code", "detail.type", "detail-is-code", "error-is-code"]


@pytest.mark.parametrize("body, refused", _CODED_BODIES, ids=_CODED_IDS)
async def test_a_400_refuses_the_model_by_its_code_not_by_the_words_anywhere(tmp_path, body, refused):
    # The check by name took a 400 (or 422) for a refusal of the model when "model_not_found"
    # stood anywhere in its body: one about the check's max_tokens 1 that named the provider's
    # error codes stopped the run with "unknown model". A code (or type) saying it decides, where
    # it stands in the JSON ({"detail": {"code": ...}} too).
    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        return httpx.Response(400, json=body)
    llm_module._MODELS_SERVED.clear()
    with anyio.fail_after(10):
        async with client(tmp_path, handle, api_base="http://code-400.test/v1",
                          summary_model="llama3") as (llm, store):
            if refused:
                with pytest.raises(LLMRequestError, match="unknown model: llm.summary_model = 'llama3'"):
                    await llm.check_models(["summary_model"])
            else:
                await llm.check_models(["summary_model"])   # (the run goes on: its first call says the 400)
            [row] = calls(store)
    llm_module._MODELS_SERVED.clear()
    assert row["stage"] == "model_check" and "HTTP 400" in row["error"] and row["apart"] == int(not refused)


@pytest.mark.parametrize("body, refused", _CODED_BODIES, ids=_CODED_IDS)
async def test_a_call_refused_so_is_an_unknown_model_as_the_check_says(tmp_path, body, refused):
    # The check by name found the code where the call did not ({"detail": {"code": ...}},
    # {"error": "model_not_found"}): the check stopped a run for a 400 a call said as any other
    # ("rejected the request"), so a run whose check had passed failed every call one by one.
    # Both read the code where read_error finds it.
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json=body)   # (GET /models too: no listing)
    with anyio.fail_after(10):
        async with client(tmp_path, handle, summary_model="llama3") as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="llama3", stage="summarize")
    said = str(err.value)
    if refused:
        assert said.startswith("unknown model: ") and "llm.summary_model = 'llama3'" in said, said
        assert err.value.every_call
    else:
        assert said.startswith("http://llm.test/v1/chat/completions rejected the request for llama3: HTTP 400"), said
        assert not err.value.every_call


async def test_openrouters_400_for_a_model_id_it_does_not_know_is_an_unknown_model(tmp_path):
    # {"error": {"message": "x is not a valid model ID", "code": 400}}: no code to read (a number),
    # and words _UNKNOWN_MODEL did not know, so each call failed as any 400 ("rejected the
    # request"), one by one, and the check by name passed it.
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "llama3 is not a valid model ID", "code": 400}})
    with anyio.fail_after(10):
        async with client(tmp_path, handle, summary_model="llama3") as (llm, _):
            with pytest.raises(LLMRequestError) as err:
                await llm.chat(ask(), model="llama3", stage="summarize")
    assert str(err.value).startswith("unknown model: ") and err.value.every_call, str(err.value)


@pytest.mark.parametrize("failure", ["no answer", "page", "server error"])
async def test_a_failed_check_by_name_is_no_failed_call_of_the_run(tmp_path, failure):
    # The check of a model by name that failed (stage model_check) was counted a failed call:
    # a watch's idle line said "2 LLM calls, 1 failed" of a sync whose every work call was
    # answered, its error lines counted it in llm_errors, and a sync with items left out for
    # another reason took it for an endpoint down (``watch_lines.calls_failed``, ``answered``).
    from streamrag.watch_lines import answered, calls_failed, calls_said, paid

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "other"}]})
        if json.loads(request.content)["model"] == "other":
            return httpx.Response(200, json={"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]})
        if failure == "no answer":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        if failure == "page":
            return httpx.Response(200, text="<html><title>Sign in</title></html>", headers={"content-type": "text/html"})
        return httpx.Response(500, json={"error": {"message": "busy"}})
    api = f"http://check-apart-{failure.replace(' ', '-')}.test/v1"
    with anyio.fail_after(10):
        async with client(tmp_path, handler, api_base=api, summary_model="unlisted", max_retries=0) as (llm, store):
            await llm.check_models(["summary_model"])   # (goes on: the run's first call says it)
            checked = llm.stats
            await llm.chat(ask(), model="other", stage="summarize")
            stats = llm.stats
    assert not answered(checked) and calls_failed(checked) == 0 and paid(checked) == 0
    assert calls_said(paid(stats), 0, stats) == "1 LLM call" and calls_failed(stats) == 0
    [check, call] = calls(store)   # (its row is kept: `status` lists it under its stage)
    assert check["stage"] == "model_check" and check["error"] and call["error"] is None
    # (the row says so, for `status` to count it as index and watch do: in no call)
    assert (check["apart"], call["apart"]) == (1, 0)
