"""The model client's pure parts, without HTTP: the hopeless rule (endpoint_health), whether
the endpoint answers (endpoint_reach), each model's timeout (try_timeouts), what a reply says
(replies), what an answer must be (replies.checker) and what a model refuses (model_quirks). The
client's own tests (test_llm) drive them through a mock transport."""

import base64
import json
from collections import Counter

import anyio
import httpx
import pytest

import streamrag.endpoint_health as endpoint_health
import streamrag.model_quirks as model_quirks
from streamrag.answer_cache import Answer
from streamrag.call_log import UNUSABLE
from streamrag.config import LLMSettings
from streamrag.endpoint_health import HOPELESS_TRIES, EndpointHealth, GaveUp, failure
from streamrag.endpoint_reach import EndpointReach
from streamrag.errors import LLMRequestError, LLMUnavailableError
from streamrag.provider_errors import Retryable, crowded_advice, sent_secrets
from streamrag.replies import CUT_OFF, Replies, chat_answer, checker, event_deltas, event_usage
from streamrag.try_timeouts import (TIMEOUT_GROWTH_MAX, TIMEOUT_SHRINK_AFTER, ModelTimeouts, arriving, progress,
                                    request_timeout, timed_out_said, try_under_way)


def test_what_a_failed_try_says_of_the_endpoint():
    assert failure(Retryable("HTTP 500: boom", 500)) == "hard"
    assert failure(Retryable("HTTP 503: Service Unavailable", 503)) == "hard"   # a bare 503
    assert failure(Retryable("HTTP 503: server busy, please try again", 503)) == "wait"   # Ollama's queue
    assert failure(Retryable("HTTP 429: slow down", 429)) == "wait"
    assert failure(Retryable("HTTP 408: Request Timeout", 408)) == "wait"
    assert failure(Retryable("HTTP 503: Service Unavailable, please try again later", 503)) == "wait"
    assert failure(Retryable("HTTP 503: Loading model", 503)) == "loading"
    # llama.cpp's KV cache, shared by its slots, filled by the requests in progress: a server up and
    # answering, crowded (it counted as one failing everything), streamed or not.
    assert failure(Retryable("HTTP 500: Context size has been exceeded.", 500, crowded=True)) == "wait"
    assert failure(Retryable("error in the stream: Context size has been exceeded.", 500, crowded=True)) == "wait"
    # Its words are not read here (``Replies.reject`` tells it, ``crowded``; a 502 of others: hard).
    assert failure(Retryable("HTTP 502: Context size has been exceeded.", 502)) == "hard"
    assert failure(Retryable("HTTP 504: gateway timeout", 504)) == "timeout"
    assert failure(Retryable("no answer within 30 s (timeout)", timed_out=True)) == "timeout"
    assert failure(Retryable("connection failed", refused=True)) == "timeout"
    assert failure(Retryable("the answer was not valid JSON (truncated?)", 200)) == "hard"


def test_hard_failures_over_hopeless_s_make_an_endpoint_hopeless(monkeypatch):
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    health = EndpointHealth()
    said = [health.tried("hard") for _ in range(HOPELESS_TRIES)]
    assert said == [False] * (HOPELESS_TRIES - 1) + [True]   # said once, by the try that made it
    assert health.hopeless and not health.tried("hard")
    error = health.error("http://x/v1/chat/completions", "llm.api_base")
    assert isinstance(error, GaveUp) and isinstance(error, LLMUnavailableError)
    assert str(error).startswith(f"http://x/v1/chat/completions failed every one of the {HOPELESS_TRIES} "
                                 "tries made in <0.1 s (12 HTTP errors, dropped connections or malformed answers)")
    assert "check the server and the model at llm.api_base" in str(error)
    assert error.run_again and str(error).endswith(endpoint_health.RUN_AGAIN)   # (a run's words say it once)


def test_hard_failures_over_a_few_seconds_say_their_tenths(monkeypatch):
    """They were said in whole seconds, "tries made in 0 s" below one (HOPELESS_S lowered, as
    tests do), where the other give-up says "the last 0.5 s" (provider_errors.duration)."""
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 2.0)
    clock = Clock()
    health = EndpointHealth(clock=clock)
    while not health.hopeless:   # a hard failure every 0.5 s, the last HOPELESS_S or more after the first
        health.tried("hard")
        clock.now += 0.5
    error = str(health.error("http://x/v1/chat/completions", "llm.api_base", then=""))
    assert f" of the {HOPELESS_TRIES} tries made in 5.5 s (" in error, error   # (12 tries, 0.5 s apart)


def test_an_endpoint_up_and_working_is_never_hopeless(monkeypatch):
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    # Cut-off answers and waits as many as the hard failures: a server that is up.
    health = EndpointHealth()
    for kind in ["hard", "cut_off", "wait"] * 8:
        health.tried(kind)
    assert not health.hopeless
    # Timeouts count neither way; unusable answers alone never make it.
    for kinds in (["timeout"] * 30 + ["hard"] * 2, ["unusable"] * 30):
        health = EndpointHealth()
        for kind in kinds:
            health.tried(kind)
        assert not health.hopeless, kinds
    # One usable answer, and no number of failures after it counts.
    health = EndpointHealth()
    health.tried("usable")
    for _ in range(3 * HOPELESS_TRIES):
        health.tried("hard")
    assert not health.hopeless and not health.failed


def test_hopeless_needs_hopeless_s_since_the_first_hard_failure():
    hard = Counter(hard=HOPELESS_TRIES)
    assert not endpoint_health.hopeless(hard, endpoint_health.HOPELESS_S - 1)
    assert endpoint_health.hopeless(hard, endpoint_health.HOPELESS_S)
    assert not endpoint_health.hopeless(Counter(hard=2, unusable=20), endpoint_health.HOPELESS_S)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_endpoint_that_only_asks_to_wait_is_hopeless_after_give_up_after_s():
    """A proxy whose server behind it is down answers every try "try again later" (or 408): up
    and asking to wait, so never hopeless by the tries before any usable answer; after
    give_up_after_s of nothing else it is, whether the model answered earlier in the run or not."""
    for first in (None, "usable"):
        clock = Clock()
        health = EndpointHealth(300.0, clock)
        if first:
            health.tried(first)
            clock.now += 3600   # an hour idle: no outage
        said = []
        for _ in range(30):   # a try every 10 s for 290 s
            said.append(health.tried("wait"))
            clock.now += 10
        assert not any(said) and not health.hopeless
        assert health.tried("wait")   # (300 s after the first) and health.hopeless and not health.tried("wait")
        error = health.error("http://x/v1/chat/completions", "llm.api_base")
        assert isinstance(error, GaveUp) and "\n" not in str(error)
        assert str(error).startswith("http://x/v1/chat/completions answered none of the 31 tries of the last "
                                     "5 min (31 asked to wait): a proxy or load balancer answers so while the "
                                     "server behind it is down: check that server and the model behind "
                                     "llm.api_base"), str(error)
        assert "raising llm.give_up_after_s (300 s) waits longer" in str(error), str(error)


@pytest.mark.parametrize("url, status", [("http://x/v1/chat/completions", 503), ("https://x/v1/chat/completions", 503),
                                         ("http://x/v1/chat/completions", 500)])
def test_an_endpoint_given_up_on_through_a_proxy_names_it_once(url, status):
    """Tries through a proxy answered only 503 for give_up_after_s were said twice over, "the
    server behind llm.api_base answers only HTTP 503 (a proxy or load balancer ...)" and "requests
    go through the proxy ...: check it too": now as the proxy's (an http:// endpoint's), or the
    server's (an https:// one's, tunnelled: 92f7351), once. A 500 is no proxy's: named as before."""
    from streamrag.proxies import Proxy

    proxy = Proxy("HTTP_PROXY", "http://corp:3128", "x", "")
    clock = Clock()
    health = EndpointHealth(60.0, clock)
    health.tried("usable")
    for _ in range(HOPELESS_TRIES + 1):
        health.tried("hard", status)
        clock.now += 5
    error = str(health.error(url, "llm.api_base", then="", proxy=proxy))
    assert error.count("the proxy http://corp:3128") == (status == 500 or url.startswith("http:")), error
    assert ("a proxy or load balancer" in error) == url.startswith("https:"), error
    assert ("check it too" in error) == (status == 500), error
    if status == 503 and url.startswith("http:"):
        assert "go through the proxy http://corp:3128 (set by HTTP_PROXY), which answers only HTTP 503" in error, error


@pytest.mark.parametrize("url", ["http://x/v1/chat/completions", "https://x/v1/chat/completions"])
@pytest.mark.parametrize("statuses", [(429,), (429, None)])   # (None: a wait no status says, a busy answer)
def test_an_endpoint_only_asking_to_wait_through_a_proxy_names_it_once(url, statuses):
    """Tries through a proxy answered only with 429s (or those and other requests to wait) for
    give_up_after_s were said twice over, "a proxy or load balancer answers so ..." and "requests
    go through the proxy ...: check it too", as the 502/503 case was: now as the proxy's (an
    http:// endpoint's), or the server's side (an https:// one's, tunnelled), once."""
    from streamrag.proxies import Proxy

    proxy = Proxy("HTTP_PROXY", "http://corp:3128", "x", "")
    clock = Clock()
    health = EndpointHealth(60.0, clock)
    health.tried("usable")
    while not health.hopeless:
        for status in statuses:
            health.tried("wait", status)
        clock.now += 5
    error = str(health.error(url, "llm.api_base", then="", proxy=proxy))
    assert error.count("the proxy http://corp:3128") == url.startswith("http:"), error
    assert ("a proxy or load balancer" in error) == url.startswith("https:"), error
    assert "check it too" not in error, error
    assert "(for HTTP 429, the account's limits)" in error, error


@pytest.mark.parametrize("other", [None, 500])   # (500: a try whose error said nothing to change)
def test_an_endpoint_given_up_on_says_what_every_tries_error_said_to_change(other):
    """Tries answered only with llama.cpp's KV cache full for give_up_after_s said "answers only
    HTTP 500: check its logs"; now what every one's error said to change (``Retryable.fix``), and,
    one try among them of another error, as before."""
    clock = Clock()
    health = EndpointHealth(60.0, clock)
    health.tried("usable")
    fix = "the server's context filled ...: raise -c"
    while not health.hopeless:
        health.tried("wait", 500, fix)
        clock.now += 5
        if other is not None and health.unanswered.total() == 2:
            health.tried("hard", other)
    error = str(health.error("http://x/v1/chat/completions", "llm.api_base", then=""))
    said = fix if other is None else "the server at llm.api_base answers only HTTP 500: check its logs"
    assert f"): {said}; raising llm.give_up_after_s (60 s) waits longer" in error, error


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_an_endpoint_given_up_on_for_what_every_error_said_to_change_names_no_proxy_whatever_its_status(status):
    """Tries through a proxy answered only with llama.cpp's KV cache full for give_up_after_s: a
    500's error added "requests go through the proxy ...: check it too", a 502's, 503's or (relayed
    by a gateway, f99c9a5) 504's did not, for one failure. Now none: the server's own words came
    through the proxy, which so reached it, as the call's own advice (``LLMClient._call_advice``)
    names no proxy for them."""
    from streamrag.proxies import Proxy

    proxy = Proxy("HTTP_PROXY", "http://corp:3128", "x", "")
    clock = Clock()
    health = EndpointHealth(60.0, clock)
    health.tried("usable")
    fix = "the server's context filled ...: raise -c"
    while not health.hopeless:
        health.tried("wait", status, fix)
        clock.now += 5
    error = str(health.error("http://x/v1/chat/completions", "llm.api_base", then="", proxy=proxy))
    assert f"): {fix}; raising llm.give_up_after_s (60 s) waits longer" in error, error
    assert "corp:3128" not in error and "check it too" not in error, error


def test_a_give_up_after_half_a_second_says_its_tenths():
    """llm.give_up_after_s = 0.5 said "answered none of the 13 tries of the last 0 s"."""
    clock = Clock()
    health = EndpointHealth(0.5, clock)
    health.tried("usable")
    while not health.hopeless:   # HOPELESS_TRIES 429s at once, then one 0.5 s later
        health.tried("wait", 429)
        clock.now += 0.5 if health.unanswered.total() >= HOPELESS_TRIES else 0
    error = str(health.error("http://x/v1/chat/completions", "llm.api_base", then=""))
    assert " tries of the last 0.5 s (" in error, error
    assert "raising llm.give_up_after_s (0.5 s) waits longer" in error, error


def test_errors_alone_long_after_an_answer_make_an_endpoint_hopeless_too():
    """A server that died mid-run answering 500 to everything: hopeless after give_up_after_s
    (before any usable answer HOPELESS_S of them is enough); the error says to check it."""
    clock = Clock()
    health = EndpointHealth(60.0, clock)
    health.tried("usable")
    for _ in range(HOPELESS_TRIES):   # a try every 5 s: twelve in 55 s
        assert not health.tried("hard")
        clock.now += 5
    assert health.tried("hard")
    error = str(health.error("http://x/v1/chat/completions", "--api-base"))
    assert error.startswith("http://x/v1/chat/completions answered none of the 13 tries of the last 60 s "
                            "(13 HTTP errors, dropped connections or malformed answers): check the server "
                            "and the model at --api-base; raising llm.give_up_after_s (60 s) waits longer; "
                            "then run the same command (finished work is kept)"), error


@pytest.mark.parametrize("kind", ["hard", "wait"])   # a bare 503, a 503 "try again later"
def test_an_endpoint_answering_only_503_is_said_to_have_its_server_down_behind_it(kind):
    """A proxy whose server behind it is down answers 503 to everything, bare or "try again later":
    either way the error names the status and the server behind the endpoint, as a call's own
    give-up does (``only_errors``). (A bare 503, an HTTP error, said only "check the server and
    the model at llm.api_base"; both told a daemon to run the same command.)"""
    clock = Clock()
    health = EndpointHealth(60.0, clock)
    health.tried("usable")
    for _ in range(HOPELESS_TRIES + 1):
        hopeless = health.tried(kind, 503)
        clock.now += 5
    assert hopeless
    assert not health.error("http://x/v1/chat/completions", "llm.api_base", then="").run_again
    error = str(health.error("http://x/v1/chat/completions", "llm.api_base", then=""))
    assert error.endswith(": the server behind llm.api_base answers only HTTP 503 (a proxy or load balancer "
                          "answers so while the server behind it is down): check that server and its logs; "
                          "raising llm.give_up_after_s (60 s) waits longer"), error
    assert "run the same command" not in error


def test_what_tries_answered_only_with_errors_say():
    said = endpoint_health.only_errors
    assert said(Counter({503: 7}), "--api-base").startswith("the server behind --api-base answers only HTTP 503 (")
    assert said(Counter({502: 2, 503: 1}), "llm.api_base").startswith("the server behind llm.api_base answers "
                                                                      "only HTTP 502 and 503 (")
    assert said(Counter({500: 3}), "llm.api_base") == "the server at llm.api_base answers only HTTP 500: check its logs"
    assert said(Counter({503: 2, 429: 1}), "x").endswith("its logs and, for HTTP 429, the account's limits")
    assert said(Counter({409: 12}), "x") == "the server at x answers only HTTP 409: check its logs"
    # Not only HTTP errors and requests to wait: a dropped connection, a gateway's timeout (a slow
    # model), a rate limit alone, none at all: each has its own advice.
    for other in ({503: 2, None: 1}, {504: 3}, {429: 3}, {}, {503: 1, 400: 1}):
        assert said(Counter(other), "x") is None, other


def test_a_rate_limit_with_answers_between_and_a_short_blip_are_never_hopeless():
    clock = Clock()
    health = EndpointHealth(300.0, clock)
    # A provider's rate limit for an hour: a 429 a second, and some request let through every
    # four minutes (a model's answer of any kind, usable or not, is one).
    for minute in range(60):
        for _ in range(60):
            health.tried("wait")
            clock.now += 1
        if minute % 4 == 3:
            health.tried(["usable", "cut_off", "unusable"][minute % 3])
    assert not health.hopeless
    # A blip: 503s and 500s for two minutes, fifty of them, then answers again.
    for _ in range(50):
        health.tried("wait")
        health.tried("hard")
        clock.now += 2.4
    health.tried("usable")
    assert not health.hopeless
    # A model loading for ten minutes (the client waits LOADING_MAX_S), then timeouts: neither way.
    for kind in ["loading"] * 100 + ["timeout"] * 100:
        health.tried(kind)
        clock.now += 6
    assert not health.hopeless
    # Fewer than HOPELESS_TRIES tries, however long (a server's Retry-After pauses).
    health = EndpointHealth(300.0, clock)
    for _ in range(HOPELESS_TRIES - 1):
        health.tried("wait")
        clock.now += 600
    assert not health.hopeless
    # 0: never.
    health = EndpointHealth(0.0, clock)
    for _ in range(1000):
        health.tried("wait")
        clock.now += 60
    assert not health.hopeless


def test_a_models_timeout_grows_after_timeouts_and_comes_back_down():
    timeouts = ModelTimeouts(1.0)
    assert timeouts.of("m") == 1.0
    timeouts.timed_out("m", 1.0)
    assert timeouts.of("m") == 2.0 and timeouts.of("other") == 1.0
    for _ in range(5):
        timeouts.timed_out("m", timeouts.of("m"))
    assert timeouts.of("m") == TIMEOUT_GROWTH_MAX * 1.0
    # Quick answers in a row halve it; a slow one among them starts the count again.
    for _ in range(TIMEOUT_SHRINK_AFTER - 1):
        timeouts.answered("m", 0.1)
    timeouts.answered("m", 3.0)
    assert timeouts.of("m") == TIMEOUT_GROWTH_MAX
    for _ in range(TIMEOUT_SHRINK_AFTER):
        timeouts.answered("m", 0.1)
    assert timeouts.of("m") == TIMEOUT_GROWTH_MAX / 2
    for _ in range(TIMEOUT_SHRINK_AFTER):
        timeouts.answered("m", 0.1)
    assert timeouts.of("m") == 1.0 and "m" not in timeouts.grown   # not below the setting
    assert timeouts.hang_s() == pytest.approx((2 * TIMEOUT_GROWTH_MAX - 1) * 1.0)


def test_the_try_under_way_is_told_its_answer_and_moved_on_by_it():
    # What the client's requests tell (the answer began, it moved on) and ask (their timeout)
    # is the try's its block gives; outside a try, nothing is told and httpx's default holds.
    async def main() -> None:
        arriving(streamed=True)   # (no try: nothing to tell)
        assert request_timeout() is httpx.USE_CLIENT_DEFAULT
        with anyio.CancelScope(deadline=0) as scope, try_under_way(scope, 5.0, 1.5) as under_way:
            assert request_timeout().read == 1.5 and not under_way.answering
            arriving(streamed=True)
            progress()
            assert under_way.answering and under_way.streamed and scope.deadline > 0
            assert timed_out_said(under_way).startswith("the streamed answer was under way")
        assert request_timeout() is httpx.USE_CLIENT_DEFAULT

    anyio.run(main)


def answer(text: str = "ok", finish: str | None = "stop") -> Answer:
    return Answer(text=text, finish_reason=finish, prompt_tokens=1, completion_tokens=1)


def test_what_an_answer_must_be():
    check = checker(lambda t: t == "ok", "retry")
    assert check(answer()) is None
    assert check(answer("chatty")) == UNUSABLE
    assert check(answer("ok", "length")) == CUT_OFF
    assert check(answer("ok", "content_filter")) == UNUSABLE + ": stopped by a content filter"
    assert checker(None, "accept")(answer("anything", "length")) is None
    assert checker(None, "keep")(answer("anything", "length")) is None
    assert checker(None, lambda t: len(t) < 5)(answer("short", "length")) == CUT_OFF
    assert checker(None, lambda t: len(t) < 9)(answer("short", "length")) is None
    # Nothing at all, cut off (thinking ran to max_tokens): asked again with more room.
    assert checker(lambda t: bool(t.strip()), "accept")(answer("  ", "length")) == CUT_OFF


def test_a_chat_reply_is_read_or_retried():
    resp = httpx.Response(200, json={})
    got = chat_answer({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 1}}, resp, ())
    assert got == Answer(text="hi", finish_reason="stop", prompt_tokens=3, completion_tokens=1)
    assert chat_answer({"choices": [{"message": None}]}, resp, ()).prompt_tokens == -1   # no usage: counted here
    for body, said in (([], "not a JSON object"), ({"choices": {}}, "'choices' is not a list"),
                       ({"choices": []}, "answer without choices"),
                       ({"choices": [{"message": "hi"}]}, "'message' is not an object")):
        with pytest.raises(Retryable, match=said):
            chat_answer(body, resp, ())


def test_a_reply_without_choices_quotes_the_server_with_the_key_hidden():
    # A proxy's error sent as a 200 ({"error": ...}, no choices) that quotes the request back was
    # said whole: "answer without choices (bad key sk-...)", on stderr and in the call log.
    key = "sk-LEAKCHECK-1234567890abcdef"
    secrets = Replies(LLMSettings(api_base="http://x/v1"), key, "", "http://x/v1/chat/completions", "").secrets
    # (the key past 200 characters: hidden before the words are cut, or its first part is said)
    for words, said in ((f"bad key {key}", "answer without choices (bad key ***)"),
                        ("x" * 190 + f" {key}", "answer without choices (" + "x" * 190 + " ***)")):
        resp = httpx.Response(200, json={"error": {"message": words}})
        with pytest.raises(Retryable) as e:
            chat_answer(resp.json(), resp, secrets)
        assert str(e.value) == said and "LEAKCHECK" not in str(e.value)


def test_a_password_the_server_echoes_as_its_basic_header_is_never_said():
    # http://user:password@host/v1 goes as "Authorization: Basic base64(user:password)"; a server
    # echoing its headers quoted that, which decodes to the password, unhidden.
    url = "http://x/v1/chat/completions"
    basic = base64.b64encode(b"me:pw-LEAKCHECK-42").decode()
    said = Replies(LLMSettings(api_base="http://me:pw-LEAKCHECK-42@x/v1"), "", "", url, "http://x/v1/embeddings")
    for status, raised in ((401, LLMRequestError), (500, Retryable)):
        with pytest.raises(raised) as e:
            said.check_status(httpx.Response(status, json={"error": {"message": f"Authorization: Basic {basic}"}}),
                              url, "m1")
        assert "Authorization: Basic ***" in str(e.value) and basic not in str(e.value), status
    with pytest.raises(Retryable, match=r"error in the stream: refused Basic \*\*\*$"):
        said.stream_error(f"refused Basic {basic}", "m1", "extract")
    # A password of a few characters is not hidden (as a short key), nor its encoding.
    assert Replies(LLMSettings(api_base="http://me:pw@x/v1"), "", "", url, "http://x/v1/embeddings").secrets == ()


def test_a_streamed_events_pieces_thinking_and_finish():
    event = {"choices": [{"delta": {"content": "Hel"}}, {"delta": {"reasoning_content": "hm"}},
                         {"delta": {}, "finish_reason": "stop"}], "usage": {"completion_tokens": 2}}
    assert list(event_deltas(event)) == [("Hel", [], None), ("", ["hm"], None), ("", [], "stop")]
    assert event_usage(event) == {"completion_tokens": 2} and event_usage({"usage": {}}) is None
    # A malformed choice raises when it comes: the choices before it were taken.
    deltas = event_deltas({"choices": [{"delta": {"content": "a"}}, "b"]})
    assert next(deltas) == ("a", [], None)
    with pytest.raises(Retryable, match="choice is not an object"):
        next(deltas)


def replies(base_from: str = "") -> Replies:
    settings = LLMSettings(api_base="http://x/v1")
    return Replies(settings, "", base_from, "http://x/v1/chat/completions", "http://x/v1/embeddings")


def test_an_error_status_is_retried_or_says_what_to_change():
    url = "http://x/v1/chat/completions"
    said = replies()
    said.check_status(httpx.Response(200, json={}), url, "m1")
    with pytest.raises(Retryable) as e:
        said.check_status(httpx.Response(503, headers={"Retry-After": "7"}, json={"error": {"message": "busy"}}),
                          url, "m1")
    assert e.value.retry_after == 7 and e.value.status == 503   # the client pauses every request for it
    with pytest.raises(LLMRequestError, match=r"wrong api_base: m1 at .*, or check --api-base \(404 page not found\)"):
        replies("--api-base").check_status(httpx.Response(404, text="404 page not found"), url, "m1")
    with pytest.raises(LLMRequestError, match="longer than m1's context"):
        said.stream_error({"message": "maximum context length exceeded", "code": 400}, "m1", "extract")
    with pytest.raises(Retryable, match="error in the stream: boom"):
        said.stream_error("boom", "m1", "extract")


@pytest.mark.parametrize("words", [
    "Context size has been exceeded.",
    # (its words from 2024 into 2025, examples/server/server.cpp, and ik_llama.cpp's still: they
    # were retried as any 500, "hard", not crowded, and ended "check its logs")
    "Input prompt is too big compared to KV size. Please try increasing KV size.",
], ids=["now", "2024"])
@pytest.mark.parametrize("way", ["status", "stream", "stream-event-string"])
def test_llama_cpps_kv_cache_full_is_retryable_and_says_what_to_change_should_it_last(way, words):
    # llama.cpp's 500 "Context size has been exceeded." (server-context.cpp: no room in the KV cache
    # its slots share, sent to every request in progress) was final, "lower index.chunk_size".
    said = replies()
    error = {"code": 500, "message": words, "type": "server_error"}
    with pytest.raises(Retryable) as e:
        if way == "status":
            said.check_status(httpx.Response(500, json={"error": error}), "http://x/v1/chat/completions", "m1", "report")
        else:   # (an ``error:`` event's data, or a ``data:`` event's {"error": ...})
            said.stream_error(error if way == "stream" else json.dumps({"error": error}), "m1", "report")
    assert e.value.status == 500 and e.value.retry_after is None and e.value.busy   # the normal backoff
    assert "-c" in e.value.fix and "-np" in e.value.fix and "--kv-unified" in e.value.fix
    assert "llm.concurrency (16)" in e.value.fix
    assert e.value.fix.endswith("or lower index.report_max_input_tokens or index.report_max_output_tokens")
    # A prompt longer than the context is a 400, whatever its words: final, as before.
    with pytest.raises(LLMRequestError, match="longer than m1's context allows"):
        said.stream_error({"message": "Context size has been exceeded.", "code": 400}, "m1", "report")


KV_WORDS = "Context size has been exceeded."
KV_WORDS_BEFORE = "Input prompt is too big compared to KV size. Please try increasing KV size."
LLAMA_KV_ERROR = {"code": 500, "message": KV_WORDS, "type": "server_error"}


def litellm_500(upstream: str) -> dict:
    """LiteLLM's proxy relaying an OpenAI-compatible server's 500, as it answers it (BerriAI/litellm:
    litellm_core_utils/exception_mapping_utils.py _map_openai_exception, status 500: InternalServerError
    "InternalServerError: OpenAIException - " + the upstream's message; exceptions.py prefixes
    "litellm.InternalServerError: "; proxy/_types.py ProxyException.to_dict: type and param null,
    code the status as a string). ``upstream``: llama.cpp's message, or its body whole."""
    return {"error": {"message": f"litellm.InternalServerError: InternalServerError: OpenAIException - {upstream}",
                      "type": None, "param": None, "code": "500"}}


@pytest.mark.parametrize("status, body", [
    (500, litellm_500(KV_WORDS)),                                          # LiteLLM, llama.cpp's message
    (500, litellm_500(json.dumps({"error": LLAMA_KV_ERROR}))),             # ... its body whole, as JSON text
    (500, litellm_500(KV_WORDS_BEFORE)),                                   # ... the 2024-2025 wording
    (500, litellm_500(f"{'x' * 300} {KV_WORDS}")),                         # (past the 200 characters said)
    (502, {"error": LLAMA_KV_ERROR}),                                      # a gateway passing its JSON on
    (503, {"error": LLAMA_KV_ERROR}),
    (504, {"error": LLAMA_KV_ERROR}),
    (503, {"error": {"message": f"upstream said: {KV_WORDS}"}}),
    (500, {"error": KV_WORDS}),                                            # an error given as a string
    (500, {"error": {"message": KV_WORDS}}),                               # another server's shape
    (500, {"error": {"code": 500, "message": KV_WORDS, "type": "invalid_request_error"}}),
    (500, {"error": {"code": 500, "message": f"{KV_WORDS} (8192 tokens)", "type": "server_error"}}),
    (500, f"Internal error: {KV_WORDS}"),                                  # no JSON at all
], ids=["litellm", "litellm-body", "litellm-2024", "litellm-long", "502-relayed", "503-relayed", "504-relayed",
         "503-quoting",
        "500-string", "500-no-type", "500-other-type", "500-more-words", "500-text"])
def test_llama_cpps_kv_cache_full_is_crowded_in_any_shape(status, body):
    # llama.cpp's KV-cache-full sentence was known only in its own error object, a 500 of
    # server_error word for word. Relayed in another shape (LiteLLM's 500, whose message quotes it;
    # a gateway's 502 or 503 passing its JSON on) the crowded server was said to be a prompt too
    # long (a 500: final, "give the model a longer context") or a server failing (a 502, 503:
    # retried without the crowded advice). Now a 5xx whose message holds the sentence whole is it.
    resp = httpx.Response(status, json=body) if isinstance(body, dict) else httpx.Response(status, text=body)
    with pytest.raises(Retryable) as e:
        replies().check_status(resp, "http://x/v1/chat/completions", "m1", "report")
    assert e.value.status == status and e.value.busy, (e.value.detail, e.value.fix)
    assert e.value.fix == crowded_advice("report", 16), e.value.fix
    # The endpoint's health counts it as the advice says it: a crowded server, up, asking to wait
    # (a gateway's 504 quoting it counted as a timeout, neither way, while its advice was the
    # crowded one: tries all so were never given up on after llm.give_up_after_s).
    assert failure(e.value) == "wait"
    # ... and an error event of a stream so (LiteLLM's: {"error": its ProxyException's dict}).
    error = body["error"] if isinstance(body, dict) else body
    error = {**error, "code": str(status)} if isinstance(error, dict) and "code" not in error else error
    with pytest.raises(Retryable) as e:
        replies().stream_error(json.dumps({"error": error}), "m1", "report")
    assert e.value.busy and e.value.fix == crowded_advice("report", 16), (e.value.detail, e.value.fix)
    assert failure(e.value) == "wait"


@pytest.mark.parametrize("status, body, final", [
    (500, {"error": {"message": "context size has been exceeded"}}, True),  # not its sentence as it sends it
    (500, {"error": {"message": "Context size has been exceeded"}}, True),
    (500, litellm_500("This model's maximum context length is 8192 tokens. However, you requested 9118 tokens"),
     True),                                                                 # another overflow, as before
    (502, f"<html><head><title>502 Bad Gateway</title></head><body>{KV_WORDS}</body></html>", False),
], ids=["500-lowercase", "500-no-stop", "litellm-other-overflow", "502-html"])
def test_only_llama_cpps_kv_sentence_whole_is_said_crowded(status, body, final):
    # Other words are what they are: a context overflow (a 500 wording one: final, as any other
    # wording of one), or a proxy's page (its title said), a server error retried.
    resp = httpx.Response(status, json=body) if isinstance(body, dict) else httpx.Response(status, text=body)
    with pytest.raises(LLMRequestError if final else Retryable) as e:
        replies().check_status(resp, "http://x/v1/chat/completions", "m1", "report")
    if final:
        assert "longer than m1's context allows" in str(e.value) and "-np" not in str(e.value), str(e.value)
    else:
        assert not e.value.busy and not e.value.fix and e.value.status == 502, (e.value.detail, e.value.fix)
    # Nor in a stream: a 4xx's event is final, whatever its words.
    with pytest.raises(LLMRequestError, match="longer than m1's context allows"):
        replies().stream_error({"message": KV_WORDS, "code": 400}, "m1", "report")


@pytest.mark.parametrize("status, body", [
    (502, {"error": {"message": "upstream: the request exceeds the available context size, try increasing it"}}),
    (503, {"error": {"message": "upstream said: maximum context length exceeded"}}),
    (504, {"error": {"message": "upstream: This model's maximum context length is 8192 tokens. However, you "
                                "requested 9118 tokens"}}),
], ids=["502-quoting", "503-quoting", "504-quoting"])
def test_a_gateways_status_quoting_an_overflow_is_retried(status, body):
    # A 502, 503 or 504 is a gateway's (or an unavailable server's): the words it quotes are those of
    # the server behind it, whose own status it does not pass on. They ended the call at once: "the
    # request is longer than m1's context allows; lower ..., or give the model a longer context".
    # Now retried as the server error it is, its words said should every try fail so (crowded only
    # when they are llama.cpp's KV cache full, above).
    with pytest.raises(Retryable) as e:
        replies().check_status(httpx.Response(status, json=body), "http://x/v1/chat/completions", "m1", "report")
    assert e.value.status == status and not e.value.busy and not e.value.fix, (e.value.detail, e.value.fix)
    assert body["error"]["message"] in e.value.detail
    # ... and an error event of a stream with such a code.
    with pytest.raises(Retryable) as e:
        replies().stream_error({"code": status, "message": body["error"]["message"]}, "m1", "report")
    assert e.value.status == status and not e.value.busy and not e.value.fix


@pytest.mark.parametrize("message", [
    "input (9000 tokens) is too large to process. increase the physical batch size (current batch size: 512)",
    "input is too large to process. increase the physical batch size",   # (its words before)
])
@pytest.mark.parametrize("stage, bound", [
    ("embed", "lower index.chunk_size (a chunk is embedded whole)"),
    ("embed_question", "shorten the question (it is embedded whole)"),
])
def test_llama_cpps_input_longer_than_its_batch_says_the_stages_bound(message, stage, bound):
    # llama.cpp's 500 for an embedding input longer than its physical batch (server-context.cpp: a
    # slot that cannot split its input) was retried as any 500, then "the server kept answering with
    # errors: check its logs". Asking again gets the same: final, saying what bounds the input.
    error = {"code": 500, "message": message, "type": "server_error"}
    url = "http://x/v1/embeddings"
    with pytest.raises(LLMRequestError) as e:
        replies().check_status(httpx.Response(500, json={"error": error}), url, "e1", stage)
    said = str(e.value)
    assert e.value.status == 500 and said.startswith(f"{url}: HTTP 500: the input is longer than"), said
    assert f"({message}); {bound}, or raise the server's physical batch size" in said and "-ub" in said, said
    # Its words in another shape, or another status, are a server error as before (retried).
    for status, other in ((500, {"message": message}), (502, error)):
        with pytest.raises(Retryable) as r:
            replies().check_status(httpx.Response(status, json={"error": other}), url, "e1", stage)
        assert not r.value.fix


def test_an_error_status_with_an_empty_answer_says_no_empty_message():
    # An empty body gives no message: "HTTP 502: " and "... or llm.api_base ()" said nothing.
    url = "http://x/v1/chat/completions"
    with pytest.raises(Retryable) as e:
        replies().check_status(httpx.Response(502), url, "m1")
    assert e.value.detail == "HTTP 502 (empty answer)" and e.value.status == 502
    with pytest.raises(Retryable, match=r"^HTTP 500: boom$"):   # (a message, said as before)
        replies().check_status(httpx.Response(500, json={"error": {"message": "boom"}}), url, "m1")
    for status in (401, 404, 413, 418):
        with pytest.raises(LLMRequestError) as e:
            replies().check_status(httpx.Response(status, content=b" \n"), url, "m1")
        said = str(e.value)
        assert "()" not in said and not said.endswith(": ") and ": ;" not in said, said
    assert said.endswith("rejected the request for m1: HTTP 418 (empty answer)"), said


@pytest.mark.parametrize("base, told", [
    ("http://x", True), ("http://x:11434/", True), ("http://x/api", True), ("http://x/v1", False),
    ("http://x/v1/", False), ("http://x/v1beta/openai", False), ("http://x/api/v2", False)])
def test_a_404_and_a_web_page_tell_the_same_bases_to_try_v1(base, told):
    # Each read the base's version with a regex of its own: they must agree on every base.
    url = base.rstrip("/") + "/chat/completions"
    said = Replies(LLMSettings(api_base=base), "", "", url, base.rstrip("/") + "/embeddings")
    with pytest.raises(LLMRequestError) as e:
        said.check_status(httpx.Response(404, text="404 page not found"), url, "m1")
    assert ("serve the OpenAI API under /v1" in str(e.value)) is told
    assert ("it has no /v1" in str(said.web_page("an HTML page", "JSON", url))) is told


def test_a_key_or_password_the_server_quotes_back_is_never_said():
    # A server echoing the request (its headers in a 500, the key in a 401) put the key in the
    # message said on stderr and kept in llm_calls and failures; api_base's password too.
    key, url = "sk-LEAKCHECK-1234567890abcdef", "http://x/v1/chat/completions"
    said = Replies(LLMSettings(api_base="http://me:pw-LEAKCHECK-42@x/v1"), key, "", url, "http://x/v1/embeddings")
    echoed = {"error": {"message": f"headers: Authorization: Bearer {key}; password pw-LEAKCHECK-42"}}
    for status, raised in ((401, LLMRequestError), (400, LLMRequestError), (500, Retryable)):
        with pytest.raises(raised) as e:
            said.check_status(httpx.Response(status, json=echoed), url, "m1")
        assert "Bearer ***; password ***" in str(e.value) and "LEAKCHECK" not in str(e.value), status
    with pytest.raises(Retryable) as e:
        said.stream_error({"message": f"bad key {key}"}, "m1", "extract")
    assert str(e.value) == "error in the stream: bad key ***"
    # The fix a 404 gives names the endpoint without the password.
    unversioned = Replies(LLMSettings(api_base="http://me:pw-LEAKCHECK-42@x"), key, "", "http://x/chat/completions",
                          "http://x/embeddings")
    with pytest.raises(LLMRequestError, match=r"set llm.api_base to 'http://me:\*\*\*@x/v1'"):
        unversioned.check_status(httpx.Response(404, text="404 page not found"), "http://x/chat/completions", "m1")
    # A key of a few characters ("ollama": Ollama takes any) is no secret: words holding it stay.
    short = Replies(LLMSettings(api_base="http://x/v1"), "ollama", "", url, "http://x/v1/embeddings")
    with pytest.raises(LLMRequestError, match="HTTP 400: ollama says no"):
        short.check_status(httpx.Response(400, json={"error": {"message": "ollama says no"}}), url, "m1")


def test_a_refused_max_tokens_is_sent_as_max_completion_tokens(monkeypatch):
    monkeypatch.setattr(model_quirks, "REFUSED", {})
    payload = {"model": "o3", "messages": [], "max_tokens": 10, "temperature": 0.0}
    assert model_quirks.sendable("http://x/v1", payload) is payload
    model_quirks.leave_out("http://x/v1", "o3", "max_tokens")
    model_quirks.leave_out("http://x/v1", "o3", "temperature")
    assert model_quirks.sendable("http://x/v1", payload) == {
        "model": "o3", "messages": [], "max_completion_tokens": 10 + model_quirks.REASONING_ALLOWANCE}
    assert model_quirks.refuses("http://x/v1", "o3", "temperature")
    assert not model_quirks.refuses("http://other/v1", "o3", "temperature")   # per endpoint


def test_an_endpoint_is_silent_once_tries_of_two_calls_timed_out_for_the_hang(monkeypatch):
    import streamrag.endpoint_reach as endpoint_reach

    clock = [100.0]
    monkeypatch.setattr(endpoint_reach.time, "monotonic", lambda: clock[0])
    reach = EndpointReach()
    assert not reach.reached and reach.down_s() == 0.0
    clock[0] += 10
    reach.timed_out(1, 10.0, 7.0)
    assert not reach.silent            # one call slower than any timeout is not a silent server
    reach.timed_out(2, 10.0, 7.0)
    assert reach.silent                # two calls' tries, timing out for the hang
    assert reach.silent_error("http://x/v1/chat/completions", 1.0, "then run the same command").run_again
    said = str(reach.silent_error("http://x/v1/chat/completions", 1.0, "then run the same command"))
    assert said.startswith("http://x/v1/chat/completions has answered nothing for 10 s, every try timed out")
    assert said.endswith("raise the setting, then run the same command"), said
    # A daemon retries by itself: nothing to run again (watch said "run the same command").
    assert str(reach.silent_error("http://x/v1/chat/completions", 1.0, "")).endswith("raise the setting")
    assert not reach.silent_error("http://x/v1/chat/completions", 1.0, "").run_again
    reach.refused()                    # down, not hung
    assert not reach.silent
    clock[0] += 5
    assert reach.down_s() == 5.0
    reach.answered()
    assert reach.reached and reach.down_s() == 0.0
    clock[0] += 3
    reach.timed_out(1, 10.0, 7.0)      # a try begun before the last answer counts from it
    reach.timed_out(2, 10.0, 7.0)
    assert not reach.silent


@pytest.mark.parametrize("status", [401, 403])
def test_a_password_in_api_base_refused_is_said_so_not_that_no_key_was_sent(status):
    # Basic credentials were sent; a 401 said "no API key was sent (none of ... is set); export
    # the key in one of them", of a server that asks a password.
    url = "http://x/v1/chat/completions"
    said = Replies(LLMSettings(api_base="http://me:pw-LEAKCHECK-42@x/v1"), "", "STREAMRAG_API_BASE", url,
                   "http://x/v1/embeddings")
    with pytest.raises(LLMRequestError) as e:
        said.check_status(httpx.Response(status, json={"error": {"message": "Unauthorized"}}), url, "m1")
    assert (f"{url}: HTTP {status}: the password in STREAMRAG_API_BASE (http://me:***@x/v1) was refused; fix the "
            "user and password there") in str(e.value)
    assert "no API key was sent" not in str(e.value) and "LEAKCHECK" not in str(e.value)
    # A key sent as Azure's api-key header beside them is the key's advice, as before.
    azure = Replies(LLMSettings(api_base="http://me:pw-LEAKCHECK-42@x/v1", api_version="2024-10-21"), "sk-azure-key-1",
                    "", url, "http://x/v1/embeddings")
    with pytest.raises(LLMRequestError, match="the API key was rejected; set STREAMRAG_API_KEY"):
        azure.check_status(httpx.Response(status, json={"error": {"message": "Unauthorized"}}), url, "m1")


def test_a_password_in_api_base_refused_beside_a_key_set_says_the_key_is_sent_once_they_are_removed(monkeypatch):
    # STREAMRAG_API_KEY set, Basic auth sent in its stead: the 401 said to "remove them and
    # `export STREAMRAG_API_KEY=...`", a variable already holding the key.
    monkeypatch.setenv("STREAMRAG_API_KEY", "sk-set-beside-1")
    url = "http://x/v1/chat/completions"
    said = Replies(LLMSettings(api_base="http://me:pw-LEAKCHECK-42@x/v1"), "sk-set-beside-1", "", url,
                   "http://x/v1/embeddings")
    with pytest.raises(LLMRequestError) as e:
        said.check_status(httpx.Response(401, json={"error": {"message": "Unauthorized"}}), url, "m1")
    assert str(e.value) == (f"{url}: HTTP 401: the password in llm.api_base (http://me:***@x/v1) was refused; fix the "
                            "user and password there, or, for a server that takes an API key, remove them: the key "
                            "in STREAMRAG_API_KEY is then sent (Unauthorized)")


def test_a_web_page_answered_with_200_is_quoted_with_the_secrets_sent_hidden():
    # A proxy's login page quoting the request in its title was said by it, the key and all.
    key, url = "sk-LEAKCHECK-1234567890abcdef", "http://x/v1/chat/completions"
    said = Replies(LLMSettings(api_base="http://me:pw-LEAKCHECK-42@x/v1"), key, "", url, "http://x/v1/embeddings")
    page = httpx.Response(200, text=f"<html><head><title>Sign in (Bearer {key}, pw-LEAKCHECK-42)</title></head></html>",
                          request=httpx.Request("POST", url))
    with pytest.raises(LLMRequestError) as e:
        said.json(page)
    assert "the answer was an HTML page: Sign in (Bearer ***, ***), not JSON" in str(e.value)
    assert "LEAKCHECK" not in str(e.value)


def test_a_proxys_password_from_the_environment_is_never_said(monkeypatch):
    # httpx sends ALL_PROXY's (HTTPS_PROXY's ...) user:password as Proxy-Authorization; a proxy's
    # 407 or 502 echoing the request put its base64, which decodes to the password, on stderr,
    # in llm_calls and failures (a transport error's own words hold neither: checked).
    proxy_basic = base64.b64encode(b"puser:proxy-LEAKCHECK-7").decode()
    monkeypatch.setenv("ALL_PROXY", "http://puser:proxy-LEAKCHECK-7@127.0.0.1:3128")
    url = "http://x/v1/chat/completions"
    said = Replies(LLMSettings(api_base="http://x/v1"), "", "", url, "http://x/v1/embeddings")
    echoed = {"error": {"message": f"Proxy-Authorization: Basic {proxy_basic} (proxy-LEAKCHECK-7)"}}
    for status, raised in ((407, LLMRequestError), (502, Retryable)):
        with pytest.raises(raised) as e:
            said.check_status(httpx.Response(status, json=echoed), url, "m1")
        assert "Proxy-Authorization: Basic *** (***)" in str(e.value) and "LEAKCHECK" not in str(e.value), status
    # A proxy variable httpx could not read either is passed over.
    assert sent_secrets("", "http://x/v1", ["http://u:p@h:bad", "http://u:short@h"]) == ()


def test_the_proxy_of_a_url_is_the_one_httpx_takes():
    # As httpx reads them (urllib's getproxies, then its own NO_PROXY rules): the scheme's
    # variable before ALL_PROXY, a lowercase one before its upper-case twin (an empty one unsets
    # it), no upper-case HTTP_PROXY under CGI, NO_PROXY's hosts passed over; no loopback
    # address is passed over by itself.
    from streamrag.proxies import proxy_for

    def taken(url: str, **environ: str) -> tuple[str, str] | None:
        proxy = proxy_for(url, environ)
        return None if proxy is None else (proxy.variable, proxy.address)

    local, remote = "http://127.0.0.1:8000/v1", "https://api.openai.com/v1"
    assert taken(local) is None and taken(remote, HTTP_PROXY="http://p:1") is None
    assert taken(local, HTTP_PROXY="http://u:pw-LEAKCHECK@p:1") == ("HTTP_PROXY", "http://u:***@p:1")
    assert taken(remote, ALL_PROXY="p:3128") == ("ALL_PROXY", "http://p:3128")
    assert taken(remote, ALL_PROXY="http://a:1", HTTPS_PROXY="http://s:1") == ("HTTPS_PROXY", "http://s:1")
    assert taken(local, HTTP_PROXY="http://p:1", http_proxy="http://q:2") == ("http_proxy", "http://q:2")
    assert taken(local, HTTP_PROXY="http://p:1", http_proxy="") is None
    assert taken(local, HTTP_PROXY="http://p:1", REQUEST_METHOD="GET") is None
    assert taken(local, HTTP_PROXY="http://p:1", NO_PROXY="127.0.0.1", no_proxy="") == ("HTTP_PROXY", "http://p:1")
    for no_proxy, passed in (("127.0.0.1", True), ("localhost", False), ("*", True), ("127.0.0.1:8000", True),
                             ("127.0.0.1:9000", False), ("example.com, 127.0.0.1", True)):
        assert (taken(local, HTTP_PROXY="http://p:1", NO_PROXY=no_proxy) is None) is passed, no_proxy
    for no_proxy, passed in (("openai.com", True), (".openai.com", True), ("api.openai.com", True),
                             (".api.openai.com", False), ("penai.com", False)):
        assert (taken(remote, HTTPS_PROXY="http://p:1", no_proxy=no_proxy) is None) is passed, no_proxy


def test_a_proxy_for_a_remote_endpoint_is_not_told_to_be_passed_over():
    # NO_PROXY is the advice for a server on this machine (localhost, 127.x, ::1) only: a remote
    # endpoint behind a company's proxy needs the proxy fixed.
    from streamrag.proxies import proxy_down, proxy_for, proxy_refused

    environ = {"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": "intranet"}
    said = proxy_down(proxy_for("https://api.openai.com/v1", environ), "https://api.openai.com/v1/x", "refused")
    assert said.endswith("; start the proxy, or fix HTTPS_PROXY") and "NO_PROXY" not in said, said
    said = proxy_refused(proxy_for("https://api.openai.com/v1", environ), "407 Proxy Authentication Required")
    # (the variable named once: it said "... in HTTPS_PROXY (...), or fix HTTPS_PROXY")
    assert said.endswith("give it a user and password in HTTPS_PROXY (http://user:password@host:port)"), said
    environ["ALL_PROXY"] = environ.pop("HTTPS_PROXY")
    for local, host in (("http://localhost:11434/v1", "localhost"), ("http://[::1]:8000/v1", "::1")):
        said = proxy_down(proxy_for(local, environ), local, "refused")
        assert said.endswith(f"`export NO_PROXY=intranet,{host}`, or unset ALL_PROXY; else start the proxy"), said


def test_a_proxy_whose_host_name_is_unknown_is_told_to_be_checked_not_started():
    # A proxy named by a mistyped host was told "nothing answers at the proxy ...; start the
    # proxy": its name could not be looked up, which no start fixes.
    from streamrag.proxies import proxy_down, proxy_for

    unknown = "connection failed (ConnectError: [Errno -2] Name or service not known)"
    environ = {"HTTPS_PROXY": "http://u:pw@proxy.crop:3128"}
    said = proxy_down(proxy_for("https://api.openai.com/v1", environ), "https://api.openai.com/v1/x", unknown)
    assert said == ("requests to https://api.openai.com/v1/x go through the proxy http://u:***@proxy.crop:3128: the "
                    f"host name proxy.crop could not be looked up ({unknown}); check its spelling in HTTPS_PROXY, "
                    "and that this machine is online (its network and DNS)"), said
    local = "http://localhost:11434/v1"   # (a server on this machine: passing the proxy over comes first)
    said = proxy_down(proxy_for(local, {"HTTP_PROXY": "http://proxy.crop:3128"}), local, unknown)
    assert "`export NO_PROXY=localhost`, or unset HTTP_PROXY; else http://proxy.crop:3128: the host name " \
           "proxy.crop could not be looked up" in said and "start the proxy" not in said, said


@pytest.mark.parametrize("local", ["http://127.0.0.1:8000/v1", "http://localhost:11434/v1", "http://[::1]:8000/v1"])
def test_the_no_proxy_advised_is_one_httpx_takes(monkeypatch, local):
    # `export NO_PROXY=[::1]` was advised for an endpoint at [::1]: httpx refuses the brackets
    # there, and every client made after it raised InvalidURL ("Invalid port: ':1]'").
    import re

    from streamrag.proxies import proxy_down, proxy_for

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.corp:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    advised = re.search(r"`export NO_PROXY=(\S+)`", proxy_down(proxy_for(local), local, "refused")).group(1)
    monkeypatch.setenv("NO_PROXY", advised)
    httpx.Client().close()   # (httpx reads NO_PROXY as a client is made)
    assert proxy_for(local) is None, advised


def test_a_providers_message_is_whole_so_a_key_past_200_characters_is_hidden_whole():
    """``provider_message`` cut the words to ~200 characters unless asked ``whole``: hidden
    after the cut, a key quoted at the cut showed in part. Now it gives them whole (its callers'
    form), for ``hidden`` first and ``one_line`` after."""
    from streamrag.provider_errors import hidden, one_line, provider_message

    key = "sk-" + "k3y" * 10
    words = "x " * 95 + f"{key} was refused"   # (the key from character 190, across the cut at 197)
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    resp = httpx.Response(401, json={"error": {"message": words}}, request=request)
    said = hidden(provider_message(resp), (key,))
    assert said == " ".join(words.replace(key, "***").split()), said
    assert one_line(said).endswith(" *** was..."), one_line(said)


# A server's words with escape sequences and other controls (a proxy's page, a gateway's error),
# in every shape a reply quotes them: an error status's JSON, an HTML page's title, a plain body,
# a stream's error event, a 200 without choices, a transport error's words.
_DRIVING = "bad \x1b[2J\x1b]0;pwned\x07 gateway \x1b[31mred\x1b[0m \x9b1;1H caf\u00e9 \x07 \u202eevil"


def _driving_said() -> list[str]:
    from streamrag.provider_errors import reason

    url = "http://x/v1/chat/completions"
    said = []
    for resp in (httpx.Response(400, json={"error": {"message": _DRIVING}}),
                 httpx.Response(502, text=f"<html><head><title>{_DRIVING}</title></head></html>"),
                 httpx.Response(500, text=_DRIVING), httpx.Response(404, json={"detail": _DRIVING})):
        with pytest.raises((LLMRequestError, Retryable)) as e:
            replies().check_status(resp, url, "m1")
        said.append(str(e.value))
    for event in ({"message": _DRIVING, "code": 400}, _DRIVING):
        with pytest.raises((LLMRequestError, Retryable)) as e:
            replies().stream_error(event, "m1", "extract")
        said.append(str(e.value))
    resp = httpx.Response(200, json={"error": {"message": _DRIVING}})
    with pytest.raises(Retryable) as e:
        chat_answer(resp.json(), resp, ())
    said.append(str(e.value))
    said.append(reason(httpx.RemoteProtocolError(_DRIVING)))
    return said


def test_a_servers_words_reach_no_terminal_with_their_controls():
    # Error lines kept ESC and the other controls of a server's body (``one_line`` collapsed
    # whitespace only): a proxy's "\x1b[2J" cleared the terminal, its "\x1b]0;...\x07" titled it,
    # from stderr, the log and `status --failures` (the call log keeps the line said).
    for said in _driving_said():
        assert not any(ch < " " or "\x7f" <= ch <= "\x9f" or ch == "\u202e" for ch in said), repr(said)
        # (the words read as they were: sequences dropped, a lone control shown escaped, letters kept)
        assert "bad gateway red" in said and "caf\u00e9" in said and "\\x07 \\u202eevil" in said, said


def test_an_html_404_of_the_embeddings_route_says_a_server_may_answer_chat_alone():
    # A proxy passing chat calls on and answering /embeddings with its 404 page: the address is
    # right for chat; "fix llm.api_base" alone sent the user to change what works.
    url = "http://x/v1/embeddings"
    with pytest.raises(LLMRequestError) as e:
        replies().check_status(httpx.Response(404, text="<html><title>404 Not Found</title></html>"), url, "e1")
    assert str(e.value).startswith(f"{url}: HTTP 404, an HTML page: 404 Not Found: the address leads to a web page")
    assert str(e.value).endswith('fix llm.api_base: set it to the address the OpenAI API answers under (it is '
                                 "'http://x/v1'); or, where chat calls are answered, serve embeddings there or set "
                                 'llm.embedding_model = "" (none)'), str(e.value)
