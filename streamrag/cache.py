"""Keys of the LLM answer cache.

A key is a versioned SHA-256 over the canonical JSON (sorted keys, no whitespace) of everything
that can change the answer: the model, the messages, every request option and the prompt's name
and version. Nothing that cannot change it goes in: not the API key, not the URL, not whether the
answer was streamed. Options set to ``None`` are dropped, so leaving an option out and passing its
``None`` default give the same key.

The prefix (``llm-v1-``, ``emb-v1-``) names the scheme. Changing what goes into a key means a new
prefix, so old rows stay recognisable instead of silently answering a different question.

One exception to "not the URL": a search's answer (``ask``) is keyed by the endpoint too
(``llmat-v1-``), for ``ask --api-base`` names the server whose answer the user wants: two servers
serving one model name (Ollama's and vLLM's "llama3", two Azure deployments labelled alike) may
answer differently, and one asked anew was answered by the other's cached words. The index's calls
keep the model's key: its extractions were made by whichever server made them, and a server moved
(or put behind a proxy) re-paying every summary and report is what a user would not expect.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

CHAT_SCHEME = "llm-v1"
ENDPOINT_CHAT_SCHEME = "llmat-v1"   # ... of a chat keyed by its endpoint too (``cache_key``'s ``endpoint``)
EMBEDDING_SCHEME = "emb-v1"
BATCH_SCHEME = "embb-v1"

# Options that are floats to the provider: 0 and 0.0 must give the same key.
_FLOAT_OPTIONS = frozenset({"temperature", "top_p", "frequency_penalty", "presence_penalty"})

_encoder = msgspec.json.Encoder(order="sorted")


def _hash(scheme: str, payload: Any) -> str:
    h = hashlib.sha256(scheme.encode())
    h.update(b"\0")
    h.update(_encoder.encode(payload))
    return f"{scheme}-{h.hexdigest()}"


def canonical_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without ``None`` values, with float options as floats."""
    out = {}
    for name, value in options.items():
        if value is None:
            continue
        if name in _FLOAT_OPTIONS and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        out[name] = value
    return out


def cache_key(model: str, messages: list[dict], options: dict[str, Any],
              prompt_name: str = "", prompt_version: str = "", endpoint: str = "") -> str:
    """The cache key of one chat completion request; with ``endpoint`` (the api_base asked,
    without a password), that endpoint's answer to it."""
    request = {
        "model": model,
        "messages": messages,
        "options": canonical_options(options),
        "prompt": [prompt_name or "", prompt_version or ""],
    }
    if endpoint:
        return _hash(ENDPOINT_CHAT_SCHEME, {**request, "endpoint": endpoint})
    return _hash(CHAT_SCHEME, request)


def embedding_key(model: str, text: str) -> str:
    """The cache key of the embedding of one text."""
    return _hash(EMBEDDING_SCHEME, [model, text])


def batch_key(keys: list[str]) -> str:
    """A key naming a set of embedding keys (what one accounting row of a batch refers to)."""
    return _hash(BATCH_SCHEME, sorted(keys))
