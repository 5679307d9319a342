"""The model client's answer cache: what it finds in ``llm_cache``, what it puts there, and the
requests on the wire that an identical request waits for instead of sending its own.

Keys are ``cache.py``'s. A lookup reads the store directly; a put is a function of a store,
run by the call log in the transaction that records the call (``CallLog.record``), so a paid
answer and its ``llm_calls`` row are committed together. A request in flight shares its answer
only after that commit (``flying``): a caller arriving later finds it cached.

With ``llm.cache`` off nothing is looked up, put or shared; without a store, nothing is looked
up or put, but identical requests in flight are still sent once.

A chat answer's row holds its JSON: as text when short, else zlib-compressed, as a blob that
starts with ``PACKED`` (``pack``). A report's answer is some 3.5 KB of JSON and compresses to
about 1 KB; the answers of one change to a watched folder (an added document's extraction, then
a score of summaries and reports) are most of what the index grows by each change, and are kept
``store.keep_unused_days``. An embedding's row holds its float32s after ``VECTOR`` (the
precision the index keeps them in: ``embeddings.pack``): 6 KB for 1,536 dimensions, not 32 KB
of JSON, and these rows are never pruned. Rows written as text (every row before
``llm_cache_packed``) are read as they are; a blob of no known marker, or that does not
decompress, is a row that cannot be read: asked again and replaced, as one cut short is.
"""

from __future__ import annotations

import array
import contextlib
import sys
import zlib
from collections.abc import Callable, Iterator

import anyio
import msgspec

from streamrag.errors import LLMError
from streamrag.store import Store


PACKED = b"zlib:"     # what a compressed row's blob starts with (a format marker, for a later one)
VECTOR = b"f32:"      # ... and an embedding's, little-endian float32s
_PACK_FROM = 200      # bytes of JSON from which a row is compressed (a shorter one gains little)


def pack(body: bytes) -> str | bytes:
    """What ``llm_cache.response`` holds of the JSON ``body``: compressed, marked, when that is
    shorter; else the JSON as text."""
    if len(body) >= _PACK_FROM:
        packed = PACKED + zlib.compress(body, 6)
        if len(packed) < len(body):
            return packed
    return body.decode()


def unpack(raw: str | bytes) -> str | bytes | None:
    """The JSON a row's ``response`` holds, or None when it cannot be read."""
    if isinstance(raw, str):
        return raw
    if not raw.startswith(PACKED):
        return None
    try:
        return zlib.decompress(raw[len(PACKED):])
    except zlib.error:
        return None


def pack_vector(vector: list[float]) -> bytes:
    """What ``llm_cache.response`` holds of an embedding."""
    from streamrag.embeddings import pack as floats   # (loads index_rows: only once one is cached)

    return VECTOR + floats(vector)


def unpack_vector(raw: str | bytes) -> list[float] | None:
    """The embedding a row holds (as float32s, or as JSON: text, or compressed), or None when
    it cannot be read."""
    if isinstance(raw, bytes) and raw.startswith(VECTOR):
        if (len(raw) - len(VECTOR)) % 4:
            return None
        floats = array.array("f", raw[len(VECTOR):])
        if sys.byteorder == "big":
            floats.byteswap()
        return floats.tolist()
    body = unpack(raw)
    if body is None:
        return None
    try:
        return msgspec.json.decode(body, type=list[float])
    except msgspec.DecodeError:
        return None


class Answer(msgspec.Struct):
    """A chat answer as the client reads it off the wire, and what the cache holds of it."""
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


class Flight:
    """An uncached request on the wire; identical requests wait for it."""
    __slots__ = ("done", "answer", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.answer: Answer | None = None
        self.error: LLMError | None = None


Put = Callable[[Store], None]


class AnswerCache:
    """``llm_cache`` as one client reads and fills it, and that client's requests in flight."""

    def __init__(self, store: Store | None, enabled: bool) -> None:
        self.store = store
        self.enabled = enabled
        self._inflight: dict[str, Flight] = {}

    @property
    def readable(self) -> bool:
        return self.enabled and self.store is not None

    def answer(self, key: str) -> tuple[Answer | None, bool]:
        """The cached answer, if any; and whether a row is cached that cannot be read (cut
        short, or of another shape): it is asked again, and the new answer replaces it."""
        if not self.readable:
            return None, False
        assert self.store is not None
        raw = self.store.cache_get(key)
        if raw is None:
            return None, False
        body = unpack(raw)
        if body is None:
            return None, True
        try:
            return msgspec.json.decode(body, type=Answer), False
        except msgspec.DecodeError:
            return None, True

    def vector(self, key: str) -> list[float] | None:
        """The cached embedding, if any that can be read (a row cut short, or of another shape,
        is asked again and replaced)."""
        if not self.readable:
            return None
        assert self.store is not None
        raw = self.store.cache_get(key)
        return None if raw is None else unpack_vector(raw)

    def in_flight(self, key: str) -> Flight | None:
        """The identical request on the wire, if any: wait for it rather than send another."""
        return self._inflight.get(key)

    @contextlib.contextmanager
    def flying(self, key: str) -> Iterator[Flight]:
        """A request of ``key`` on the wire for the block's length: set its ``answer`` (or
        ``error``) in the block, after the answer is committed; identical requests are let go
        when the block ends."""
        flight = Flight()
        if self.enabled:
            self._inflight[key] = flight
        try:
            yield flight
        finally:
            flight.done.set()
            if self._inflight.get(key) is flight:
                del self._inflight[key]

    def put_answer(self, key: str, model: str, answer: Answer, *, replace: bool) -> Put | None:
        """The write that caches ``answer``; ``replace``: over a cached one found unusable."""
        if not self.enabled:
            return None
        response = pack(msgspec.json.encode(answer))
        return lambda store: store.cache_put(key, model, response, replace=replace)

    def put_vectors(self, model: str, vectors: dict[str, list[float]]) -> Put | None:
        """The write that caches embeddings (asked for as none was cached, or none that could
        be read: they replace what is there)."""
        if not self.enabled or not vectors:
            return None
        rows = {key: pack_vector(vector) for key, vector in vectors.items()}

        def put(store: Store) -> None:
            for key, vector in rows.items():
                store.cache_put(key, model, vector, replace=True)
        return put


__all__ = ["Answer", "AnswerCache", "Flight", "PACKED", "VECTOR", "pack", "pack_vector", "unpack", "unpack_vector"]
