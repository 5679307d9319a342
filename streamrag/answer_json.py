"""Reading the JSON of an OpenAI-compatible answer: its text, token usage, finish reason and
embeddings, whatever shape a server or a proxy gives them.

A count or a finish reason of the wrong type is taken as none given (the counts are then
estimated): it says nothing about the answer itself. Text or vectors of a shape that cannot be
read make the answer unreadable (``Retryable``, status 200): asked for again, and said in the
error if every try fails.
"""

from __future__ import annotations

from typing import Any

from streamrag.provider_errors import Retryable


def _int(value: Any) -> int:
    """A token count from ``usage``, or -1 when the provider gave none."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else -1


def read_usage(usage: Any) -> tuple[int, int]:
    """(prompt, completion) tokens from an answer's ``usage``, -1 for each it does not give.

    A ``usage`` that is not an object is ignored like a missing one (the counts are then
    estimated): it says nothing about whether the answer itself is good. So is a prompt count
    of 0."""
    if not isinstance(usage, dict):
        return -1, -1
    prompt = _int(usage.get("prompt_tokens"))
    # No prompt is 0 tokens: Ollama says 0 for one it had cached (and paid for before).
    return (prompt or -1), _int(usage.get("completion_tokens"))


def read_finish(value: Any) -> str | None:
    """A ``finish_reason``; one that is not a string is taken as none given."""
    return value if isinstance(value, str) else None


def json_kind(value: Any) -> str:
    """What a JSON value is, for a message about an answer of an unexpected shape."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def read_content(content: Any, whose: str) -> str:
    """The text of a message's (or a delta's) ``content``: a string, null, or a list of parts
    (as some servers and proxies send), whose text parts are joined; other parts (images,
    reasoning) are left out. Any other shape cannot be read (``Retryable``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Retryable(f"{whose} 'content' is neither text nor a list of parts ({json_kind(content)})",
                        200)
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            raise Retryable(f"{whose} 'content' has a part that is not an object ({json_kind(part)})",
                            200)
        kind, text = part.get("type"), part.get("text")
        if kind is not None and kind not in ("text", "output_text"):
            continue
        if isinstance(text, dict) and isinstance(text.get("value"), str):   # {"text": {"value": ...}}
            text = text["value"]
        if not isinstance(text, str):
            raise Retryable(f"{whose} 'content' has a text part without text ({json_kind(text)})", 200)
        texts.append(text)
    return "".join(texts)


def read_embeddings(data: list) -> list[list[float]]:
    """The vectors of an embeddings answer's ``data``, in input order (by ``index`` when given).
    Items of another shape make the answer unreadable (``Retryable``)."""
    found: list[tuple[int, int, list[float]]] = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise Retryable(f"embedding {i} of the answer is not an object ({json_kind(item)})", 200)
        index = item.get("index", i)
        if not isinstance(index, int) or isinstance(index, bool):
            raise Retryable(f"embedding {i} of the answer has an 'index' that is not a whole "
                            f"number ({json_kind(index)})", 200)
        vector = item.get("embedding")
        if (not isinstance(vector, list) or not vector
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector)):
            what = "an empty list" if vector == [] else (
                "a list holding other things than numbers" if isinstance(vector, list) else json_kind(vector))
            raise Retryable(f"embedding {i} of the answer is not a list of numbers ({what})", 200)
        found.append((index, i, [float(x) for x in vector]))
    if len({len(v) for _, _, v in found}) > 1:
        raise Retryable("the answer's embeddings are not all of the same length", 200)
    return [v for _, _, v in sorted(found, key=lambda f: (f[0], f[1]))]
