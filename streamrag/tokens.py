"""Token counting that never touches the network.

tiktoken fetches its BPE files from the internet the first time an encoding is used. streamrag
ships the official files for the encodings it uses as package data and loads them through
tiktoken's own constructors, so the published SHA-256 that tiktoken checks is the one that
guards our copy too.
"""

from __future__ import annotations

import functools
import re
import threading
from importlib import resources

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

from streamrag.errors import ConfigError

SHIPPED = ("o200k_base", "cl100k_base")
_lock = threading.Lock()


def _shipped_path(name: str) -> str:
    return str(resources.files("streamrag") / "data" / "tiktoken" / f"{name}.tiktoken")


_encodings: dict[str, tiktoken.Encoding] = {}


def get_encoding(name: str = "o200k_base") -> tiktoken.Encoding:
    """The named encoding, built once from the shipped BPE file (hash-checked).

    Built under a lock: threads that ask at the same time (the simulator's request handlers)
    would otherwise each spend a quarter second building it, holding the GIL.
    """
    enc = _encodings.get(name)
    if enc is None:
        with _lock:
            enc = _encodings.get(name)
            if enc is None:
                enc = _encodings[name] = _build(name)
    return enc


def _build(name: str) -> tiktoken.Encoding:
    if name not in SHIPPED:
        raise ConfigError(
            f"unknown tokenizer encoding {name!r}: streamrag ships {', '.join(SHIPPED)}; "
            "set index.encoding to one of them"
        )
    local = _shipped_path(name)

    def load_local(_url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        data = tiktoken.load.read_file(local)
        if expected_hash and not tiktoken.load.check_hash(data, expected_hash):
            raise ConfigError(f"the shipped tokenizer file {local} is corrupt; reinstall streamrag")
        return _parse_bpe(data)

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = load_local
    try:
        params = getattr(openai_public, name)()
    finally:
        openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**params)


def _parse_bpe(data: bytes) -> dict[bytes, int]:
    """``base64-token rank`` lines as a dict (one split and two maps: a third of a second less
    than a loop over 200,000 lines, paid by every command that counts tokens)."""
    import binascii

    words = data.split()
    if len(words) % 2:
        raise ValueError("a tokenizer file holds a token and its rank on every line")
    return dict(zip(map(binascii.a2b_base64, words[::2]), map(int, words[1::2])))


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """Number of tokens of ``text`` (special-token text is counted as ordinary text)."""
    if len(text) <= _REMEMBERED_CHARS and text.isascii():
        return _count_short(text, encoding)
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


# Short texts are counted again and again: a sentence of a description in every summary of the
# elements it describes, an element's line in the report context of each level holding it (an
# offline index of 3,000 documents asked 176,000 counts, half of texts counted before). Their
# counts are remembered: those of the last 32,768 ASCII texts of at most 512 characters, 25 MB
# at worst. (Other texts take 2 or 4 bytes a character, and a copy in UTF-8 once tokenized:
# 65,536 of CJK or emoji held 200-270 MB for good in a daemon.)
_REMEMBERED_CHARS = 512


@functools.lru_cache(maxsize=1 << 15)
def _count_short(text: str, encoding: str) -> int:
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


# o200k_base lets a run of punctuation take the line breaks and slashes after it into the same
# piece ("//\n//" is one), so a word made only of slashes right after a line break may not be
# a piece of its own.
_ABSORBED = re.compile(r"[\r\n]/+(?=\s|\Z)")


def fewest_tokens(text: str) -> int:
    """A lower bound on ``count_tokens(text)`` that costs no encoding: about the number of words.

    The shipped encodings first split text into pieces and encode each piece into at least one
    token. No piece holds parts of two words separated by whitespace, but for one case: a word
    of slashes right after a line break, which o200k_base may join to the piece before it, so
    such words are not counted. A caller packing a token budget can thus reject a line that
    cannot fit without encoding it.
    """
    words = len(text.split())
    return words - len(_ABSORBED.findall(text)) if "/" in text else words


def count_message_tokens(messages: list[dict], encoding: str = "o200k_base") -> int:
    """Approximate prompt tokens of a chat request: contents plus a few tokens per message."""
    return sum(count_tokens(str(m.get("content") or ""), encoding) + 4 for m in messages) + 3


def truncate(text: str, max_tokens: int, encoding: str = "o200k_base") -> str:
    """``text`` cut to at most ``max_tokens`` tokens, never inside a character: a token may
    hold part of one (CJK, emoji), and the cut ended on U+FFFD."""
    enc = get_encoding(encoding)
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    # The tokens' bytes are a prefix of the text's UTF-8: only a last character can be broken.
    return enc.decode_bytes(ids[:max(max_tokens, 0)]).decode("utf-8", errors="ignore")
