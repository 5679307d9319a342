"""Content-derived, versioned ids and keys.

An id is ``<prefix>-<hex>`` where hex is a SHA-256 over a canonical encoding of the content, with
``ID_SCHEME`` mixed in so a future change of the scheme yields different ids instead of
silently colliding with old ones. Re-running on the same content gives the same ids, which is
what makes every write an idempotent upsert.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Callable
from typing import Any

import msgspec

from streamrag.invisible import visible

ID_SCHEME = "v1"

_json = msgspec.json.Encoder(order="sorted")


def digest(*parts: Any, length: int = 16) -> str:
    """Hex SHA-256 of the canonical JSON of ``parts`` (with the id scheme), cut to ``length``."""
    h = hashlib.sha256(ID_SCHEME.encode())
    h.update(_json.encode(list(parts)))
    return h.hexdigest()[:length]


def text_hash(text: str, length: int = 16, check: Callable[[], None] | None = None) -> str:
    """Hex SHA-256 of a string, cut to ``length`` (cheaper than ``digest`` for large texts).
    ``check`` is called between its slices (a stop's: it raises to end the hash there)."""
    if len(text) <= _HASHED_AT_ONCE:
        return hashlib.sha256(f"{ID_SCHEME}\0{text}".encode()).hexdigest()[:length]
    # A big document's text is encoded a slice at a time (the same bytes: UTF-8 encodes each
    # character alone), not copied whole twice over (the scheme prefixed, then its UTF-8).
    # Between slices a stop is seen: a 50 MB document's hash took 0.4-0.6 s in one go, loaded.
    h = hashlib.sha256(f"{ID_SCHEME}\0".encode())
    for at in range(0, len(text), _HASHED_AT_ONCE):
        if check is not None:
            check()
        h.update(text[at:at + _HASHED_AT_ONCE].encode())
    return h.hexdigest()[:length]


_HASHED_AT_ONCE = 1 << 20


def document_id(text: str, check: Callable[[], None] | None = None) -> str:
    return "doc-" + text_hash(text, check=check)


def chunk_id(text: str) -> str:
    return "chk-" + text_hash(text)


_QUOTES = "\"'`\u2018\u2019\u201c\u201d\u00ab\u00bb"
_PUNCT_EDGES = re.compile(r"^[\W_]+|[\W_]+$", re.UNICODE)
_SPACES = re.compile(r"\s+")
_POSSESSIVE = re.compile(r"['\u2019]s\W*$", re.IGNORECASE)


@functools.lru_cache(maxsize=1 << 16)   # names repeat across mentions: most calls are repeats
def normalize_name(name: str) -> str:
    """The key entities merge on: case, whitespace, quotes, edge punctuation and the characters
    no reader sees (``invisible``, which the loader takes out of documents too) ignored.

    ``"  The  'Cratchit' family. "`` and ``"the cratchit family"`` are one entity. Inner
    punctuation that carries meaning (``"AT&T"``, ``"U.S."``'s inner dots) is kept.
    """
    s = unicodedata.normalize("NFKC", visible(name))
    s = _SPACES.sub(" ", s).strip()
    s = _POSSESSIVE.sub("", s)
    s = "".join(ch for ch in s if ch not in _QUOTES)
    s = _PUNCT_EDGES.sub("", s)
    return _SPACES.sub(" ", s).strip().casefold()


@functools.lru_cache(maxsize=1 << 16)
def entity_id(name: str) -> str:
    return "ent-" + text_hash(normalize_name(name))


def relationship_id(source_entity_id: str, target_entity_id: str) -> str:
    """Relationships are undirected: the id is the same whichever end comes first."""
    a, b = sorted((source_entity_id, target_entity_id))
    return "rel-" + digest(a, b)


def claim_id(chunk: str, subject: str, obj: str, claim_type: str, description: str) -> str:
    return "clm-" + digest(chunk, normalize_name(subject), normalize_name(obj), claim_type, description)
