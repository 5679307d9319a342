"""Token counting that never touches the network.

tiktoken fetches its BPE files from the internet the first time an encoding is used. streamrag
ships the official files for the encodings it uses as package data and loads them through
tiktoken's own constructors, so the published SHA-256 that tiktoken checks is the one that
guards our copy too. tiktoken is imported when an encoding is first built: a command that
counts nothing (``status``, an offline basic ask) does not load it. A command that counts a few
texts (an ask's context) counts them from the parsed ranks in Python, without tiktoken's encoder
(see "counting without the encoder" below).
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
from array import array
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

from streamrag.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

SHIPPED = ("o200k_base", "cl100k_base")
_lock = threading.RLock()   # (``get_encoding`` holds it while ``_params`` takes it)


def _shipped_path(name: str) -> str:
    return str(resources.files("streamrag") / "data" / "tiktoken" / f"{name}.tiktoken")


_encodings: dict[str, tiktoken.Encoding] = {}


def get_encoding(name: str = "o200k_base") -> tiktoken.Encoding:
    """The named encoding, built once from the shipped BPE file (hash-checked).

    Built under a lock: threads that ask at the same time (the simulator's request handlers)
    would otherwise each spend a quarter second building it, holding the GIL.
    """
    return _once(_encodings, name, _build)


def _once(made: dict, name: str, make: Callable[[str], Any]) -> Any:
    """``made[name]``, made by ``make(name)`` the first time, under the lock (checked again
    inside it, so threads asking at once make it once)."""
    value = made.get(name)
    if value is None:
        with _lock:
            value = made.get(name)
            if value is None:
                value = made[name] = make(name)
    return value


def _build(name: str) -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.Encoding(**_params(name))


_loaded: dict[str, dict] = {}


def _params(name: str) -> dict:
    """The arguments of the named encoding's ``tiktoken.Encoding`` (its name, split pattern,
    special tokens and ranks), read once from the shipped file (hash-checked): the encoder is
    built from them, and the light counter counts with them."""
    return _once(_loaded, name, _load)


def _load(name: str) -> dict:
    if name not in SHIPPED:
        raise ConfigError(
            f"unknown tokenizer encoding {name!r}: streamrag ships {', '.join(SHIPPED)}; "
            "set index.encoding to one of them"
        )
    import tiktoken.load
    import tiktoken_ext.openai_public as openai_public

    local = _shipped_path(name)

    def load_local(_url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        data = tiktoken.load.read_file(local)
        if expected_hash and not tiktoken.load.check_hash(data, expected_hash):
            raise ConfigError(f"the shipped tokenizer file {local} is corrupt; reinstall streamrag")
        return _parse_bpe(data, ranked_by_line=bool(expected_hash))

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = load_local
    try:
        return getattr(openai_public, name)()
    finally:
        openai_public.load_tiktoken_bpe = original


def _parse_bpe(data: bytes, *, ranked_by_line: bool = False) -> dict[bytes, int]:
    """``base64-token rank`` lines as a dict (one split and two maps: a third of a second less
    than a loop over 200,000 lines, paid by every command that counts tokens). ``ranked_by_line``:
    each line's rank is its number from 0, known of a shipped file whose hash was checked (both
    are so), so the ranks are not read (a fifth of the parse, 24 ms of every command's)."""
    import binascii

    if ranked_by_line:   # (split a quarter megabyte at a time: a list of all 400,000 words at
        # once held 25 MB more at the peak of a command's memory; a regex over the lines, slower)
        ranks: dict[bytes, int] = {}
        rank, start = itertools.count(), 0
        while start < len(data):
            end = data.find(b"\n", min(start + (1 << 18), len(data) - 1)) + 1 or len(data)
            words = data[start:end].split()
            if len(words) % 2:
                raise ValueError("a tokenizer file holds a token and its rank on every line")
            ranks.update(zip(map(binascii.a2b_base64, words[::2]), rank))
            start = end
        return ranks
    words = data.split()
    if len(words) % 2:
        raise ValueError("a tokenizer file holds a token and its rank on every line")
    return dict(zip(map(binascii.a2b_base64, words[::2]), map(int, words[1::2])))


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """Number of tokens of ``text`` (special-token text is counted as ordinary text)."""
    if len(text) <= _REMEMBERED_CHARS and text.isascii():
        return _count_short(text, encoding)
    return count_uncached(text, encoding)


def count_uncached(text: str, encoding: str = "o200k_base") -> int:
    """``count_tokens`` without remembering ``text`` (for a caller that remembers its own counts:
    ``summarizer.SentenceCounts``)."""
    if encoding not in _encodings:
        light = _light_tokens(text, encoding)
        if light is not None:
            return len(light)
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


# Short texts are counted again and again: a sentence of a description in every summary of the
# elements it describes, an element's line in the report context of each level holding it (an
# offline index of 3,000 documents asked 176,000 counts, half of texts counted before). Their
# counts are remembered: those of the last 32,768 ASCII texts of at most 512 characters, 25 MB
# at worst. (Other texts take 2 or 4 bytes a character, and a copy in UTF-8 once tokenized:
# 65,536 of CJK or emoji held 200-270 MB for good in a daemon.)
_REMEMBERED_CHARS = 512


_count_short = functools.lru_cache(maxsize=1 << 15)(count_uncached)


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


_WORD = re.compile(r"\S+")


def more_words_than(text: str, n: int, start: int = 0, end: int | None = None) -> bool:
    """``fewest_tokens(text[start:end]) > n``, found without a copy of the text or a list of its
    words (a book on one line made one of millions), and as soon as ``n`` words are passed."""
    end = len(text) if end is None else end
    words = 0
    for m in _WORD.finditer(text, start, end):
        at = m.start()
        if at > start and text[at] == "/" and _ABSORBED.match(text, at - 1, end):
            continue   # (``_ABSORBED`` from its line break, ``end`` as the end: may join the word before)
        words += 1
        if words > n:
            return True
    return False


# Characters encoded at once by ``encode_ordinary``: a text longer than this is encoded a window
# at a time, each ending at a safe seam (``_SEAM``, see "prompts around a text" below), where the
# tokens of the whole are those of the part before it and those of the part after it.
_WINDOW = 1 << 20
# ... and this many when a ``check`` is called between windows: a quarter of a second of a base64
# blob's encoding (a megabyte of it took half a second, and a stop waited for the whole line's).
_CHECKED_WINDOW = 1 << 18


def encode_ordinary(enc: tiktoken.Encoding, text: str, start: int = 0, end: int | None = None,
                    check: Callable[[], None] | None = None) -> array:
    """``enc.encode_ordinary(text[start:end])`` as a compact array: a list of 20 million tokens (a
    100 MB line) took 700 MB, the array takes 80. A long text is encoded a window at a time;
    ``check``, if given, is called before each (what it raises stops the encoding)."""
    end = len(text) if end is None else end
    out = array("I")
    window = _WINDOW if check is None else _CHECKED_WINDOW
    if end - start <= window or not analysed(enc):
        out.extend(enc.encode_ordinary(text[start:end]))
        return out
    for at, cut in _windows(text, start, end, window):
        if check is not None:
            check()
        out.extend(enc.encode_ordinary(text[at:cut]))
    return out


def tokens_up_to(enc: tiktoken.Encoding, text: str, n: int, start: int = 0, end: int | None = None) -> int:
    """``len(enc.encode_ordinary(text[start:end]))`` when it is at most ``n``, else a number past
    ``n``: found a window of a few times ``n`` characters at a time (``encode_ordinary``), as
    soon as ``n`` tokens are passed: a book on one line with few spaces (CJK, base64) was
    encoded whole to learn it is more than a chunk."""
    end = len(text) if end is None else end
    if not analysed(enc):
        return len(enc.encode_ordinary(text[start:end]))
    count = 0
    for at, cut in _windows(text, start, end, max(4096, 8 * n)):
        count += len(enc.encode_ordinary(text[at:cut]))
        if count > n:
            break
    return count


def _windows(text: str, start: int, end: int, window: int):
    """``text[start:end]`` as spans ``(at, cut)`` of about ``window`` characters, each ending
    at a safe seam (``_SEAM``) when there is one (the last at ``end``)."""
    at = start
    while at < end:
        cut = end
        if end - at > window:
            # (the last seam in the window's second half, found from its end: a loop over all of
            # them took a tenth of a long line's encoding)
            seam = _LAST_SEAM.match(text, at + window // 2, at + window)
            if seam is not None:
                cut = seam.end()
            else:   # (no seam in the window's second half: on to the first one after it, if any)
                seam = _SEAM.search(text, at + window, end)
                cut = seam.end() if seam is not None and seam.end() < end else end
        yield at, cut
        at = cut


def analysed(enc: tiktoken.Encoding | str) -> bool:
    """Whether ``enc`` splits text with a pattern whose safe seams are known (see "prompts
    around a text" below). ``enc`` built, or named: its pattern read from the shipped file,
    nothing built. (``_pat_str``: tiktoken's own regex, private: a tiktoken without it is
    counted whole.)"""
    pattern = _params(enc)["pat_str"] if isinstance(enc, str) else getattr(enc, "_pat_str", None)
    return pattern in _ANALYSED


def safe_cut(enc: tiktoken.Encoding, text: str, at: int) -> bool:
    """Whether the tokens of any stretch of ``text`` over ``at`` are those of its part before
    ``at`` and those of its part after (a safe seam, ``_SEAM``, there, and ``enc`` analysed)."""
    return safe_cuts(enc, text, (at,))


def safe_cuts(enc: tiktoken.Encoding, text: str, cuts) -> bool:
    """Whether each of ``cuts`` is a safe seam of ``text`` (``safe_cut``): a chunk's units, its
    sentences or lines, meet at one each (``enc`` looked at once, not at each)."""
    n, seam = len(text), _SEAM.match
    return analysed(enc) and all(0 < at < n and seam(text, at - 1, at + 1) for at in cuts)


def last_cut(enc: tiktoken.Encoding, text: str, start: int, end: int) -> int | None:
    """The last place inside ``text[start:end]`` that is a safe seam (``safe_cut``), or None."""
    seam = _LAST_SEAM.match(text, start, end) if analysed(enc) else None
    return seam.end() if seam is not None else None


@functools.lru_cache(maxsize=4)
def blank_led(enc: tiktoken.Encoding) -> bytes:
    """For each token of ``enc``, whether its bytes begin with a space, a line break or a tab (1)
    or not (0): looked up, not decoded, for each token a long sentence's cut may go before."""
    led = bytearray(enc.n_vocab)
    for token in range(enc.n_vocab):
        try:
            led[token] = enc.decode_single_token_bytes(token)[:1] in (b" ", b"\n", b"\t")
        except KeyError:   # (a gap in the ranks, or a special token's)
            pass
    return bytes(led)


def count_message_tokens(messages: list[dict], encoding: str = "o200k_base") -> int:
    """Approximate prompt tokens of a chat request: contents plus a few tokens per message."""
    return sum(count_tokens(str(m.get("content") or ""), encoding) + 4 for m in messages) + 3


def truncate(text: str, max_tokens: int, encoding: str = "o200k_base") -> str:
    """``text`` cut to at most ``max_tokens`` tokens, never inside a character: a token may
    hold part of one (CJK, emoji), and the cut ended on U+FFFD."""
    if encoding not in _encodings:
        light = _light_tokens(text, encoding)
        if light is not None:
            if len(light) <= max_tokens:
                return text
            return b"".join(light[:max(max_tokens, 0)]).decode("utf-8", errors="ignore")
    enc = get_encoding(encoding)
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    # The tokens' bytes are a prefix of the text's UTF-8: only a last character can be broken.
    return enc.decode_bytes(ids[:max(max_tokens, 0)]).decode("utf-8", errors="ignore")


# ---------------------------------------------------------------------- counting without the encoder
#
# tiktoken's encoder is built from the parsed ranks into tables of its own: 0.15-0.3 s and 45 MB
# more, which a local ask paid to count its context's 58 lines (39,000 characters) and cut two.
# Until the encoder is built, ``count_uncached`` and ``truncate`` count a text in Python from
# the same ranks, as the encoder does: the text split by the encoding's own pattern (with
# ``regex``, the module tiktoken itself requires), a piece that is a token taken whole, any
# other merged from its bytes, the adjacent pair of lowest rank first (the leftmost of equal
# ones), until no pair is a token. (The merges of a piece only ever make parts of it, so every
# rank it needs is looked up.) Only texts of characters the two pattern engines (tiktoken's
# own, ``regex``) class alike are taken: Latin (ASCII to Latin Extended-B) and general
# punctuation, long assigned, whose classes the patterns ask (letter, its kinds, mark, number,
# space) Unicode 14 and the newer tables of ``regex`` agree on (``test_tokens`` compares the
# tokens of each with the encoder's, in many settings). Any other text (CJK, emoji, Greek: the
# engines' Unicode versions may part), an encoding whose pattern is not one of the two read
# here (``_ANALYSED``: another tiktoken may ship another, which the engines need not read
# alike), a piece longer than ``_LIGHT_PIECE`` bytes, and every text once ``_LIGHT_WORK`` was
# spent (the encoder is faster from there; an index run builds it at once) go to the encoder.
# The work is weighed, not the characters: a text costs about its length in characters' split
# and look-ups, and merging a piece of n bytes about 2 * n + n * n / 6 more (quadratic: 262,144
# characters of prose took 0.09 s, of 63-letter random words 0.8 s). ``_LIGHT_WORK`` is about
# 0.07 s of it, less than building either encoder (cl100k 0.08 s, o200k 0.2 s), and a text
# turned down after its split is charged the split.
_LIGHT_TEXT = re.compile("[\x00-\u024f\u2000-\u206f]*")
_LIGHT_PIECE = 64
_LIGHT_WORK = 1 << 18
_light_work = 0   # (spent, by every thread: a bound, not a tally)


def _light_tokens(text: str, encoding: str) -> list[bytes] | None:
    """The tokens of ``text`` (each one's bytes) as the encoder makes them, counted without it;
    ``None`` for a text it does not take (see above)."""
    global _light_work
    if _light_work + len(text) > _LIGHT_WORK or not _LIGHT_TEXT.fullmatch(text) or not analysed(encoding):
        return None
    params = _params(encoding)
    ranks = params["mergeable_ranks"]
    pieces = [piece.encode() for piece in _splitter(params["pat_str"]).findall(text)]
    work: int | None = len(text)
    for piece in pieces:
        if piece not in ranks:
            if len(piece) > _LIGHT_PIECE:
                work = None
                break
            work += 2 * len(piece) + len(piece) * len(piece) // 6
    if work is None or _light_work + work > _LIGHT_WORK:
        _light_work += len(text)   # (split for nothing)
        return None
    _light_work += work
    out: list[bytes] = []
    for piece in pieces:
        if piece in ranks:
            out.append(piece)
        else:
            out += _merged(piece, ranks)
    return out


@functools.lru_cache(maxsize=4)
def _splitter(pattern: str):
    import regex

    return regex.compile(pattern)


def _merged(piece: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """The tokens byte-pair merging makes of ``piece`` (each one's bytes): from its bytes, the
    adjacent pair whose join has the lowest rank joined first (the leftmost of equal ones), until
    no join of a pair has a rank."""
    parts = [piece[i:i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best is None or rank < best):
                best, at = rank, i
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts


# ---------------------------------------------------------------------------- prompts around a text
#
# A prompt is a fixed template around a chunk's text, and the chunker has counted the text. The
# shipped encodings first split text into pieces with a regex matched left to right, then
# encode each piece alone, so count(a + b) == count(a) + count(b) whenever the split of a + b
# has a piece boundary at the seam and the pieces of a are those of a alone. A seam guarantees
# both when (1) no alternative of the regex can take its left character and then its right one
# into a piece (a path reaching past the seam must take both: there is no lookbehind, ``^`` or
# ``\b``), and (2) its left character is not whitespace (the lookahead ``(?!\S)`` and cl100k's
# ``$`` are tried only after ``\s+`` took it). Both hold for an ASCII letter or digit followed by
# ASCII whitespace or punctuation other than ``'`` (``'s`` joins a word in both): after a word
# the letter alternatives end (or take a contraction, from ``'``), after digits ``\p{N}{1,3}``
# ends, and no other alternative takes a letter or digit at all. ("t>" is such a seam, ".\n" and
# ">\n" are not: o200k and cl100k take punctuation with the line breaks after it, o200k slashes
# too; " x" is not, the space leading the word.) A line break before a character that is neither
# whitespace nor ``/`` is a seam too, though its left character is whitespace: (1) no
# alternative takes a line break and then such a character (the letter alternatives' first
# character is no line break, the punctuation one takes only line breaks and slashes after its
# run, the others no line break but in a run of whitespace), and (2) the run of whitespace the break ends is taken whole
# by ``\s*[\r\n]+`` (o200k) or ``\s*[\r\n]`` (cl100k, or its ``\s++$`` alone) from wherever a
# piece of it starts, before ``(?!\S)`` is tried: a paragraph's or a line's end before the next
# one's first word. Proved for these patterns only: a tokenizer with another one is counted whole.
_ANALYSED = frozenset((
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""",   # o200k_base
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$"""
    r"""|\s*[\r\n]|\s+(?!\S)|\s""",   # cl100k_base
))
# A letter or digit, or a line break, with a safe seam after it (the character after it looked
# at, not taken; Python's ``\s`` holds all the tokenizers' whitespace, and more).
_SEAM = re.compile(r"[A-Za-z0-9](?=[\t\n\x0b\x0c\r !-&(-/:-@\[-`{-~])|\n(?=[^\s/])")
_LAST_SEAM = re.compile(r"(?s:.*)(?:" + _SEAM.pattern + ")")   # (its end: the last seam's)


def count_prompt_tokens(messages: list[dict], text: str, text_tokens: int, encoding: str = "o200k_base") -> int:
    """``count_message_tokens(messages, encoding)``, exactly, for messages rendered around ``text``
    of ``text_tokens`` tokens (``count_tokens(text, encoding)``, which the caller vouches for):
    the template's parts are counted once (``count_around``)."""
    total = 3
    for m in messages:
        content = str(m.get("content") or "")
        at = content.find(text) if text else -1
        if at < 0:
            total += _count_fixed(content, encoding) + 4
        else:
            total += count_around(content[:at], text, content[at + len(text):], text_tokens, encoding) + 4
    return total


def count_around(before: str, text: str, after: str, text_tokens: int, encoding: str = "o200k_base") -> int:
    """``count_tokens(before + text + after, encoding)``, ``text_tokens`` being ``text``'s count.

    The whole is cut at safe seams (see above) nearest each edge of ``text``, on either side:
    what lies before the first cut and after the last is the template's own (counted once and
    remembered), what lies between the cuts at an edge a few characters counted each time, and
    the text's inside its count less those of its own few edge characters. A text with no safe
    seam inside it, or a tokenizer not analysed, is counted whole."""
    whole = before + text + after
    if not text or not analysed(encoding):
        return count_tokens(whole, encoding)
    s, e = len(before), len(before) + len(text)
    if not before or _SEAM.match(whole, s - 1, s + 1):
        l1 = l2 = s
    else:
        first = _SEAM.search(whole, s, e)   # (a cut inside the text: the end of this match)
        if first is None:
            return count_tokens(whole, encoding)
        l1, l2 = _last_seam(before), first.end()
    if not after or _SEAM.match(whole, e - 1, e + 1):
        r1 = r2 = e
    else:
        r1 = None
        for start in dict.fromkeys((max(l2 - 1, s, e - 64), max(l2 - 1, s))):   # (near the end first)
            for m in _SEAM.finditer(whole, start, e):
                r1 = m.end()
            if r1 is not None:
                break
        if r1 is None:
            return count_tokens(whole, encoding)
        r2 = e + _first_seam(after)
    return (_count_fixed(whole[:l1], encoding) + count_tokens(whole[l1:l2], encoding)
            + text_tokens - count_tokens(text[:l2 - s], encoding) - count_tokens(text[r1 - s:], encoding)
            + count_tokens(whole[r1:r2], encoding) + _count_fixed(whole[r2:], encoding))


@functools.lru_cache(maxsize=64)
def _count_fixed(text: str, encoding: str) -> int:
    """A template's part (the same for every chunk): counted once."""
    return count_tokens(text, encoding)


@functools.lru_cache(maxsize=64)
def _last_seam(text: str) -> int:
    """The last safe cut inside ``text`` (0 if none)."""
    cut = 0
    for m in _SEAM.finditer(text):
        cut = m.end()
    return cut


@functools.lru_cache(maxsize=64)
def _first_seam(text: str) -> int:
    """The first safe cut inside ``text`` (its length if none)."""
    m = _SEAM.search(text)
    return m.end() if m else len(text)
