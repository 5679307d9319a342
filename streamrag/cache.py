"""Keys of the LLM answer cache.

A key is a versioned SHA-256 over the canonical JSON (sorted keys, no whitespace) of everything
that can change the answer: the model, the messages, every request option and the prompt's name
and version. Nothing that cannot change it goes in: not the API key, not the URL, not whether the
answer was streamed. Options set to ``None`` are dropped, so leaving an option out and passing its
``None`` default give the same key.

The prefix (``llm-v1-``, ``emb-v1-``) names the scheme. Changing what goes into a key means a new
prefix, so old rows stay recognisable instead of silently answering a different question.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

CHAT_SCHEME = "llm-v1"
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
              prompt_name: str = "", prompt_version: str = "") -> str:
    """The cache key of one chat completion request."""
    return _hash(CHAT_SCHEME, {
        "model": model,
        "messages": messages,
        "options": canonical_options(options),
        "prompt": [prompt_name or "", prompt_version or ""],
    })


def embedding_key(model: str, text: str) -> str:
    """The cache key of the embedding of one text."""
    return _hash(EMBEDDING_SCHEME, [model, text])


def batch_key(keys: list[str]) -> str:
    """A key naming a set of embedding keys (what one accounting row of a batch refers to)."""
    return _hash(BATCH_SCHEME, sorted(keys))
