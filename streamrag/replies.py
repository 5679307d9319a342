"""What the endpoint's HTTP replies say: an error status, a chat answer's JSON, a streamed
answer's events; and whether an answer read is one its caller can use.

A reply is read into an ``Answer`` or raises what it is: ``Retryable`` (worth another try; its
``retry_after``, the pause the server asked of every request, is the client's to keep; its
``fix``, what to do should every try fail so),
``Refused`` (a parameter the model does not take) or an ``LLMRequestError`` that names the
setting to change (``provider_errors`` words it). Nothing here sends, waits or keeps state
between replies: the client (``llm.LLMClient``) does, and decides what to do.

An answer is usable when its caller's ``validate`` accepts it and, unless the caller says
otherwise (``OnLength``), it was not cut off (``finish_reason`` length): ``checker`` says why one
is not, the ``llm_calls`` error of its row (``UNUSABLE``, ``CUT_OFF``, or ``CUT_OFF_UNASKED`` when
no max_tokens was sent and the server's own limit cut it), or None. The client asks again, with
more room after an answer cut off at max_tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal
from urllib.request import getproxies

import httpx
import msgspec

from streamrag.answer_cache import Answer
from streamrag.answer_json import json_kind, read_content, read_finish, read_usage
from streamrag.call_log import UNUSABLE
from streamrag.config import LLMSettings, without_secrets
from streamrag.errors import LLMRequestError, WebPageAnswer
from streamrag.provider_errors import (AZURE_HOST, CONTEXT_OVERFLOW, Refused, Retryable, aside, base_setting,
                                       batch_advice, batch_too_small, crowded_advice, duration, forbidden_reason,
                                       hidden, html_page, http_said, key_advice, kv_cache_full, model_not_found,
                                       model_settings,
                                       one_line, overflow_advice, provider_message, read_error, refused_param,
                                       sent_secrets, unknown_model, versioned, web_page,
                                       with_version, wrong_address)
from streamrag.proxies import Proxy, proxy_refused
from streamrag.ratelimit import MAX_RETRY_AFTER_S, asked_wait

RETRY_STATUS = frozenset({408, 409, 429})
# A gateway's statuses (or an unavailable server's): the words their answer quotes, a context
# overflow's too, are those of the server behind it, whose own status is not passed on: a server
# error, retried. (llama.cpp's KV cache full, relayed so, is told by its words: ``kv_cache_full``.)
GATEWAY_STATUS = frozenset({502, 503, 504})
# Where servers stream a model's thinking apart from its answer: vLLM's reasoning parsers
# (reasoning_content), Ollama and OpenRouter (reasoning), some proxies (thinking).
THINKING_KEYS = ("reasoning_content", "reasoning", "thinking")


class Replies:
    """How one client reads its endpoint's replies: the settings its errors name, its key, and
    which of its URLs a reply came from (chat or embeddings)."""

    def __init__(self, settings: LLMSettings, api_key: str, base_from: str, chat_url: str,
                 embeddings_url: str, *, proxy: Proxy | None = None) -> None:
        self.settings = settings
        self._api_key = api_key
        # What the server may quote back but no message of ours says (``hidden``).
        self.secrets = sent_secrets(api_key, settings.api_base, getproxies().values())
        self.base_from = base_from   # what set api_base (Settings.api_base_from), for messages
        self.chat_url = chat_url
        self.embeddings_url = embeddings_url
        self.proxy = proxy   # the environment's proxy the requests go through (``proxies.proxy_for``)

    @property
    def setting(self) -> str:
        """Where the endpoint came from, as the user would change it (``base_setting``)."""
        return base_setting(self.settings, self.base_from)

    @property
    def azure_unversioned(self) -> bool:
        """Whether api_base is an Azure OpenAI deployment's URL with no llm.api_version, which it needs."""
        parsed = httpx.URL(self.settings.api_base)
        return bool(AZURE_HOST.search(parsed.host)) and "/deployments/" in parsed.path and not self.settings.api_version

    def check_status(self, resp: httpx.Response, url: str, model: str, stage: str = "") -> None:
        """Nothing for a 2xx reply; else raises what its error is (``reject``): a ``Retryable``
        says in ``retry_after`` how long the server asked every request to wait."""
        status = resp.status_code
        if 200 <= status < 300:
            return
        answer = read_error(resp)   # (its body decoded once)
        # (All of it: a wait, a parameter may come late in it.)
        said = hidden(answer.said, self.secrets)
        message = one_line(said)
        if status == 429 and answer.code == "insufficient_quota":
            raise LLMRequestError(f"the account behind the API key has no quota left ({message}); "
                                  "add credit or use another key", status, every_call=True)
        if status == 400 and answer.code == "content_filter":   # Azure's filter, on the prompt
            raise LLMRequestError(f"the provider's content filter refused the request to {model} (stage "
                                  f"{stage or '-'}: {message}); the same request is refused again, so it is "
                                  "not retried in this run (each run asks once): change the deployment's "
                                  "content filter, or use another model", status)
        if status in (400, 422) and url == self.chat_url and not CONTEXT_OVERFLOW.search(said) \
                and (param := refused_param(resp, said, answer.error)) is not None:
            raise Refused(param, status, message)
        retry_after = asked_wait(resp, said) if status in (429, 503) else None
        if status == 429 and retry_after is not None and retry_after > MAX_RETRY_AFTER_S:
            # A daily or monthly limit: waiting hours in every call helps nobody. (A 503's long
            # wait, maintenance, is waited for MAX_RETRY_AFTER_S at a time, as before.)
            raise LLMRequestError(f"{url}: HTTP {status}: the provider asks to wait {duration(retry_after)} "
                                  f"before the next request{aside(message)}; a daily or monthly limit: run the "
                                  "same command once it has passed (finished work is kept), or raise the "
                                  "limit with the provider", status, every_call=True)
        if retry_after is not None:
            retry_after = min(retry_after, MAX_RETRY_AFTER_S)
        if status == 404 and answer.page and not self.azure_unversioned:
            # (no model's refusal: an OpenAI-compatible server's is JSON; an Azure deployment's URL
            # without llm.api_version is told that, as any 404 of it: not to add /v1 to it)
            base = "" if self.settings.api_version else without_secrets(self.settings.api_base)
            raise wrong_address(one_line(hidden(answer.page, self.secrets)), url, self.setting, base,
                                embeddings=url == self.embeddings_url)
        self.reject(status, message, url, model, stage, retry_after, code=answer.code, error=answer.error,
                    said=said)

    def reject(self, status: int, message: str, url: str, model: str, stage: str,
                retry_after: float | None = None, *, code: str = "", error: dict | None = None,
                said: str = "") -> None:
        """Raises what an HTTP error (or an error a stream carried) is: ``Retryable``, or an
        ``LLMRequestError`` that says what to change (``code``: the error's code or type;
        ``error``: its error object, which tells llama.cpp's own errors; ``said``: the provider's
        words whole, where ``message`` is one line cut at 200 characters)."""
        if kv_cache_full(status, said or message):
            # llama.cpp's KV cache, shared by its slots, filled by the requests in progress: each
            # gets its 500, and their slots are cleared, so a retry usually fits; through a proxy
            # too (LiteLLM's 500, a gateway's 502 or 503), in whatever shape it relays the words.
            raise Retryable(http_said(status, message), status, retry_after, crowded=True,
                            fix=crowded_advice(stage, self.settings.concurrency))
        if batch_too_small(status, error):
            # llama.cpp's input (an embedding's) longer than its physical batch: asking again
            # gets the same. (It was retried as a server error, then "check its logs".)
            raise LLMRequestError(f"{url}: HTTP {status}: the input is longer than the server takes in one "
                                  f"batch ({message}); {batch_advice(stage)}", status)
        if status != 429 and status not in GATEWAY_STATUS and CONTEXT_OVERFLOW.search(message):
            # A 400 (OpenAI, vLLM, llama.cpp) or a 500 some other server words so: asking again
            # gets the same.
            raise LLMRequestError(f"the request is longer than {model}'s context allows ({message}); "
                                  f"{overflow_advice(stage)}, or give the model a longer context "
                                  "(llama.cpp: -c; Ollama: OLLAMA_CONTEXT_LENGTH; vLLM: --max-model-len)",
                                  status)
        if status == 501:
            what = ("set llm.embedding_model = \"\" (no embeddings), or serve embeddings there "
                    "(llama.cpp: --embeddings)" if url == self.embeddings_url
                    else f"check that {self.setting} is an "
                         "OpenAI-compatible endpoint")
            raise LLMRequestError(f"{url}: HTTP {status}: the server does not offer this{aside(message)}; "
                                  f"{what}", status)
        if status in RETRY_STATUS or status >= 500:
            raise Retryable(http_said(status, message), status, retry_after)
        if status == 407 and self.proxy is not None:   # (an http:// endpoint's: the proxy answers for it)
            raise LLMRequestError(proxy_refused(self.proxy, f"HTTP 407: {message}" if message else "HTTP 407"),
                                  status, every_call=True)
        if status == 403 and (why := forbidden_reason(code, message, self.setting)):
            raise LLMRequestError(f"{url}: HTTP 403: {why}", status)
        if status == 403 and ("model" in message.lower() or model_not_found(code)):
            # OpenAI: "Project ... does not have access to model ...": the key is good.
            # (A model no setting names, a library's: no "llm.*_model", no such setting; as
            # ``LLMClient._unserved`` says it.)
            keys = model_settings(self.settings, model)
            raise LLMRequestError(f"{url}: HTTP 403: the key may not use {model} ({message}); give "
                                  f"{' / '.join(keys) + ' ' if keys else ''}a model it may use, or grant "
                                  "the key that model", status)
        if status in (401, 403):
            raise LLMRequestError(f"{url}: HTTP {status}: {key_advice(self.settings, self._api_key, self.setting)}"
                                  f"{aside(message)}", status)
        if status == 413:   # the server's or a proxy's limit on a request's size
            raise LLMRequestError(f"{url}: HTTP 413: the request is larger than the server (or a proxy "
                                  f"in front of it) accepts{aside(message)}; {overflow_advice(stage)}, or "
                                  "raise that limit", status)
        if status in (400, 422) and unknown_model(code, message, model):
            # (A proxy's 400 for what OpenAI answers 404: every call would fail alike.)
            keys = model_settings(self.settings, model)
            where = f"{' / '.join(keys)} = {model!r} " if keys else ""
            raise LLMRequestError(f"unknown model: {url} does not serve {model} ({message}); give "
                                  f"{where}a model the server serves, or check {self.setting}",
                                  status, every_call=True, said=message)
        if status == 404:
            keys = model_settings(self.settings, model)
            base, setting = without_secrets(self.settings.api_base), self.setting
            parsed = httpx.URL(base)
            if self.azure_unversioned:
                raise LLMRequestError(
                    f"{url}: HTTP 404{aside(message)}; an Azure OpenAI deployment URL needs "
                    "llm.api_version (e.g. \"2024-10-21\"); or use Azure's v1 API: set "
                    f"{setting} to 'https://{parsed.host}/openai/v1' and the *_model keys to "
                    "deployment names", status)
            if "model" not in message.lower() and not model_not_found(code) and not versioned(base) \
                    and not self.settings.api_version:
                # Not about the model, and no version in the path (as /v1, /v1beta/openai): most
                # servers (OpenAI, Ollama, vLLM, llama.cpp) serve under /v1.
                fixed = with_version(base)
                own = " (Ollama's /api is its own API)" if fixed != base.rstrip("/") + "/v1" else ""
                raise LLMRequestError(f"{url}: HTTP 404, no such route{aside(message)}; most servers serve "
                                      f"the OpenAI API under /v1{own}: set {setting} to {fixed!r}", status)
            fix = (f"check {' / '.join(keys)} = {model!r}: give a model the server serves, or {setting}"
                   if keys else f"give a model the server serves, or check {setting}")
            raise LLMRequestError(f"unknown model or wrong api_base: {model} at {url}; {fix}{aside(message)}",
                                  status, said=message, code=code)
        raise LLMRequestError(f"{url} rejected the request for {model}: {http_said(status, message)}",
                              status)

    def stream_error(self, error: Any, model: str, stage: str) -> None:
        """Raises what an error sent inside a stream is. One that carries a client error's code
        (a context overflow, a bad request) is final, as that status would be; any other is
        retried as a server error."""
        if isinstance(error, str):
            try:
                error = msgspec.json.decode(error)
            except (msgspec.DecodeError, RecursionError):
                pass
        if isinstance(error, dict) and isinstance(error.get("error"), dict):
            error = error["error"]
        message = error.get("message") if isinstance(error, dict) else None
        said = " ".join(hidden(str(message if message is not None else error), self.secrets).split())
        message = one_line(said)
        code = (error.get("code") or error.get("status")) if isinstance(error, dict) else None
        status = int(code) if isinstance(code, (int, str)) and str(code).isdigit() else 0
        message = f"error in the stream: {message}"
        if status in RETRY_STATUS:   # a rate limit, a timeout: waited for and retried as such
            raise Retryable(message, status)
        # (An event that gives no code is a server's error, as below: llama.cpp's KV cache full too.)
        llama = error if isinstance(error, dict) else None   # (its error object, as llama.cpp's own are told)
        if kv_cache_full(status or 500, said) or batch_too_small(status, llama):
            self.reject(status or 500, message, self.chat_url, model, stage, error=llama, said=said)
        if 400 <= status < 500 or CONTEXT_OVERFLOW.search(message):
            self.reject(status or 400, message, self.chat_url, model, stage)
        raise Retryable(message, 500)   # the server failed: its logs say more

    def json(self, resp: httpx.Response) -> Any:
        """The reply's JSON; a web page or a truncated body raises what it is."""
        try:
            return msgspec.json.decode(resp.content)
        except (msgspec.DecodeError, RecursionError):
            if page := html_page(resp.text):
                raise self.web_page(page, "JSON", str(resp.request.url)) from None
            raise Retryable("the answer was not valid JSON (truncated?)", resp.status_code) from None

    def web_page(self, page: str, wanted: str, url: str) -> WebPageAnswer:
        """``provider_errors.web_page``, the page's words with the secrets sent hidden: a proxy's
        login page answered with HTTP 200 may quote the request back in its title, as an error
        status's body may (``check_status``)."""
        base = "" if self.settings.api_version else without_secrets(self.settings.api_base)
        return web_page(hidden(page, self.secrets), wanted, url, self.setting, base)

    def stream_event(self, data: str, model: str, stage: str) -> dict | None:
        """The event a streamed ``data:`` line carries (None: not an object, passed over);
        an error event raises what it is (``stream_error``)."""
        try:
            event = msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError):
            raise Retryable("a streamed event was not valid JSON (truncated?)",
                            200) from None
        if not isinstance(event, dict):
            return None
        if "error" in event:
            self.stream_error(event["error"], model, stage)
        return event


def chat_answer(body: Any, resp: httpx.Response, secrets: tuple[str, ...]) -> Answer:
    """The answer a chat reply's JSON ``body`` holds; a body of another shape is ``Retryable``,
    the server's words quoted with ``secrets`` hidden (``Replies.secrets``). Token counts it does
    not give are -1."""
    if not isinstance(body, dict):
        raise Retryable(f"the answer is not a JSON object ({json_kind(body)})", 200)
    choices = body.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise Retryable(f"the answer's 'choices' is not a list ({json_kind(choices)})", 200)
    if not choices:
        # (A proxy's error sent as a 200 may quote the request's key back, as an error status does.)
        raise Retryable(f"answer without choices ({one_line(hidden(provider_message(resp), secrets))})",
                        200)
    choice = choices[0]
    if not isinstance(choice, dict):
        raise Retryable(f"the answer's first choice is not an object ({json_kind(choice)})", 200)
    message = choice.get("message")
    if message is None:
        message = {}
    elif not isinstance(message, dict):
        raise Retryable(f"the answer's 'message' is not an object ({json_kind(message)})", 200)
    prompt_tokens, completion_tokens = read_usage(body.get("usage"))
    return Answer(text=read_content(message.get("content"), "the answer's"),
                  finish_reason=read_finish(choice.get("finish_reason")),
                  prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def unstreamed(lines: list[str]) -> dict | None:
    """The whole JSON chat answer a server sent for a streamed request (one that ignores
    ``stream``, as some gateways do), from the body's ``lines``; None when they are no such
    answer."""
    try:
        body = msgspec.json.decode("\n".join(lines))
    except (msgspec.DecodeError, RecursionError):
        return None
    return body if isinstance(body, dict) and "choices" in body else None


def event_usage(event: dict) -> dict | None:
    """A streamed event's token counts, when it has any (any other 'usage' is ignored, as a
    missing one)."""
    usage = event.get("usage")
    return usage if isinstance(usage, dict) and usage else None


def event_deltas(event: dict) -> Iterator[tuple[str, list[str], str | None]]:
    """Each choice of a streamed event: its piece of answer, the piece of thinking streamed
    apart from it (``THINKING_KEYS``, the first one set: a list of one, or empty), and its
    finish_reason (None until the last). A malformed choice raises ``Retryable`` when it comes:
    the choices before it are taken."""
    choices = event.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise Retryable("a streamed event's 'choices' is not a list "
                        f"({json_kind(choices)})", 200)
    for choice in choices or ():
        if not isinstance(choice, dict):
            raise Retryable("a streamed event's choice is not an object "
                            f"({json_kind(choice)})", 200)
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        elif not isinstance(delta, dict):
            raise Retryable(f"a streamed event's 'delta' is not an object ({json_kind(delta)})",
                            200)
        piece = read_content(delta.get("content"), "a streamed event's")
        # (The names are one field's: vLLM kept reasoning_content beside reasoning when it renamed
        # it, and mlx-vlm sends both, the same text twice; taken twice, an answer without usage
        # was counted, and booked, with its thinking twice over.)
        yield piece, thinking_of(delta), choice["finish_reason"] if read_finish(choice.get("finish_reason")) else None


def thinking_of(fields: dict) -> list[str]:
    """The thinking a streamed delta or a whole answer's message holds apart from its answer
    (``THINKING_KEYS``, the first one set): a list of one, or empty."""
    return [fields[k] for k in THINKING_KEYS if isinstance(fields.get(k), str) and fields[k]][:1]


def answer_thinking(body: Any) -> list[str]:
    """The thinking a whole chat answer (``chat_answer``'s ``body``) holds apart from its answer,
    as ``thinking_of``: paid for as the answer is, and counted with it when the server says no
    usage (a streamed answer's was; a whole one's was left out)."""
    try:
        message = body["choices"][0]["message"]
    except (TypeError, KeyError, IndexError):
        return []
    return thinking_of(message) if isinstance(message, dict) else []


# -- whether an answer is usable ----------------------------------------------------------------
CUT_OFF = "unusable answer: cut off at max_tokens (finish_reason length)"
# ... and of a request that sent no max_tokens: the server's own output limit or the model's context
# cut it (the row said "at max_tokens" of requests that sent none).
CUT_OFF_UNASKED = ("unusable answer: cut off by the server's own limit, no max_tokens sent "
                   "(finish_reason length)")
CUT_OFFS = (CUT_OFF, CUT_OFF_UNASKED)
# What an answer cut off at max_tokens is (``LLMClient.chat``); a function: usable when it says so.
OnLength = Literal["retry", "accept", "keep"] | Callable[[str], bool]


def checker(validate: Callable[[str], bool] | None,
            on_length: OnLength, limited: bool = True) -> Callable[[Answer], str | None]:
    """Why an answer is unusable (the ``llm_calls`` error), or None when it is usable;
    ``validate`` None: any text is; ``limited``: the request sent max_tokens (else a cut-off
    answer is ``CUT_OFF_UNASKED``)."""
    cut_off = CUT_OFF if limited else CUT_OFF_UNASKED

    def check(answer: Answer) -> str | None:
        if answer.finish_reason == "content_filter":   # (cached before content filters were known)
            return UNUSABLE + ": stopped by a content filter"
        if answer.finish_reason == "length" and (
                on_length == "retry" or (callable(on_length) and not on_length(answer.text))):
            return cut_off
        if validate is None or validate(answer.text):
            return None
        # Nothing at all, cut off (a model's thinking ran to max_tokens and left no answer): asked
        # again with more room, as a cut-off answer is. (Text the caller cannot use is no matter
        # of room: a chatty summary asked again with twice the tokens only costs more.)
        return cut_off if answer.finish_reason == "length" and not answer.text.strip() else UNUSABLE
    return check
