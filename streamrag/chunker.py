"""Cutting a document into token-bounded chunks whose boundaries survive edits.

A chunk id is the hash of its text, so a chunk is re-extracted exactly when its text changes.
A fixed token grid (or plain greedy packing from the top) would shift every boundary after
an inserted paragraph and re-extract the rest of the document. Here boundaries are chosen by
local content only:

1. The text is split into *units*: paragraphs (blank-line separated); a paragraph longer than
   the body budget is split at sentence ends or line breaks, a sentence still too long at
   whitespace, and a word still too long at token boundaries. Each unit is encoded once.
2. The boundary after each unit has a key ``(level, hash of the unit's text)``, where level
   ranks paragraph end > sentence end > whitespace > token. A boundary is an *anchor* when its
   key is strictly the largest of all boundaries within ``W`` tokens on either side, so
   whether a boundary is an anchor depends only on the text within ``W`` tokens of it.
3. Between two anchors, the stretch is one chunk if it fits, or is packed from its start
   into nearly full pieces that end at the best-ranked boundaries; that depends only on the
   stretch itself.

An edit therefore changes the anchors within ``W`` tokens of it and the chunks of the
stretches touching them; chunks further away keep their text and id. ``W`` is 1.5 body
budgets (``ANCHOR_WINDOW``): an edit re-extracts the edited chunk and a few around it, and
chunks average about 0.8 of ``chunk_size`` (on A Christmas Carol: 44 chunks where a fixed
grid gives 38 and a window of half a body gave 52, each chunk costing one prompt overhead).

Each chunk after the first starts with about ``overlap`` tokens from the text just before
its body, snapped forward to a sentence or word start; that prefix too depends only on
nearby text. Bodies are packed to ``chunk_size - overlap`` so prefix plus body fits.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import zlib
from array import array
from collections import deque
from collections.abc import Callable
from itertools import accumulate
from typing import NamedTuple

from streamrag.ids import chunk_id
from streamrag.records import Chunk, Document, Spans
from streamrag.sentences import CJK_CLOSERS, CJK_TERMINATORS, ends_with_abbreviation
from streamrag.tokens import (blank_led, encode_ordinary, get_encoding, last_cut, more_words_than, safe_cut,
                             safe_cuts, tokens_up_to)

# W, in bodies: wider windows mean fuller chunks (fewer calls) but edits reach further.
# Bump when the cutting rules change: a changed chunker recuts every document.
VERSION = "4"
ANCHOR_WINDOW = 1.5
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# A sentence ends at . ! ? or an ellipsis followed by whitespace (so "3.14" and "e.g.x" do not
# end one), or at a run of full-width terminators (。！？ and the half-width ｡) whether or not
# whitespace follows, since Chinese and Japanese put none between sentences; closing quotes and
# brackets after the terminator stay with its sentence. The full stop of a title or an initial
# ("Mrs.", "J.") is no sentence end (``sentences.ends_with_abbreviation``).
_CLOSERS = "\"'\u201d\u2019)\\]"
_SENTENCE_BREAK = re.compile(rf"[.!?\u2026][{_CLOSERS}]*\s+"
                             rf"|[{CJK_TERMINATORS}]+[{_CLOSERS}{CJK_CLOSERS}]*\s*"
                             r"|\n\s*")
_WHITESPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]")   # (a letter or digit)
_LAST_BREAK = re.compile(r"(?s:.*)\n[ \t]*\n")   # (its end: that of the last paragraph break's core)
_BLANKS = re.compile(r"\s*")

PARAGRAPH, SENTENCE, WORD, TOKEN = 3, 2, 1, 0


def _going_on() -> None:
    """A cut's ``check`` when none is given: nothing stops it."""


# A cut's ``check`` is called this many units (or boundaries, pieces, chunks) apart, a few
# milliseconds of work: often enough to stop a 100 MB log's cut (a minute) at once, seldom
# enough to cost nothing.
_CHECK_EVERY = 256


class _Units:
    """The units of a document as compact arrays, one entry each: where it starts and ends,
    its tokens, and its boundary key, ``(level, hash of its text)`` packed into one integer
    ordered as the pair (``level << 32 | crc32``). A book on one line is a million units: as
    objects (and their keys as tuples) they took twice the document's size."""

    __slots__ = ("start", "end", "tokens", "key", "check")

    def __init__(self, check: Callable[[], None] = _going_on) -> None:
        self.start, self.end, self.tokens, self.key = array("q"), array("q"), array("q"), array("q")
        # (the cut's, ``cut_document``: called a unit in ``_CHECK_EVERY``, and by their users)
        self.check = check

    def __len__(self) -> int:
        return len(self.start)

    def add(self, start: int, end: int, tokens: int, level: int, text: str) -> None:
        if not len(self.start) % _CHECK_EVERY:
            self.check()
        self.start.append(start)
        self.end.append(end)
        self.tokens.append(tokens)
        self.key.append(level << 32 | zlib.crc32(text.encode("utf-8", "surrogatepass")))

    def level(self, i: int) -> int:
        return self.key[i] >> 32

    def relevel(self, i: int, level: int) -> None:
        """Unit ``i`` ends at a boundary of ``level`` (its text, and so its hash, the same)."""
        self.key[i] = level << 32 | self.key[i] & 0xFFFFFFFF


def chunk_document(doc: Document, *, chunk_size: int, overlap: int, encoding: str) -> list[Chunk]:
    """``doc`` cut into chunks of at most ``chunk_size`` tokens, overlapping by about ``overlap``."""
    text = doc.text
    if not text or text.isspace():
        return []
    enc = get_encoding(encoding)
    chunk_size, overlap, budget = _sizes(chunk_size, overlap)
    units = _units(text, enc, budget)
    spans = _spans(text, units, _pieces(units, budget, chunk_size), overlap, enc, first=True)
    del units
    return _finish(doc, text, spans, chunk_size, overlap, enc)


def _sizes(chunk_size: int, overlap: int) -> tuple[int, int, int]:
    """The chunk size and overlap the chunker keeps to, and the body budget they leave."""
    chunk_size = max(8, int(chunk_size))
    overlap = max(0, min(int(overlap), chunk_size // 2))
    return chunk_size, overlap, chunk_size - overlap


def _spans(text: str, units: _Units, pieces: list[tuple[int, int]], overlap: int, enc,
           first: bool) -> list[tuple[int, int, int, int | None]]:
    """Each piece's span: where its prefix and body begin, where it ends, its body's tokens if
    known (``first``: the pieces begin the document, the first without a prefix)."""
    spans = []
    for i, (a, b) in enumerate(pieces):
        if not i % _CHECK_EVERY:
            units.check()
        start, end = units.start[a], units.end[b - 1]
        spans.append((_overlap_start(text, start, overlap, enc) if i or not first else start, start, end,
                      _body_tokens(units, a, b, text, enc)))
    return spans


def _body_tokens(units: _Units, a: int, b: int, text: str, enc) -> int | None:
    """The tokens of units ``[a, b)`` together, when they are the sum of theirs: each meets the
    one before at a safe seam (``tokens.safe_cut``: a long sentence's pieces cut between
    words, lines and paragraphs after their line break); else None (a sentence's end within a
    line is none: counted whole)."""
    starts = units.start[a + 1:b]
    if units.end[a:b - 1] != starts or not safe_cuts(enc, text, starts):
        return None
    return sum(units.tokens[a:b])


# ---------------------------------------------------------------------------- resuming
#
# A file that grows (a log, a journal) or changes in one place is cut again around its change,
# not whole. The chunks before an anchor R are a function of the text up to the end of the
# sentence or paragraph of the first unit ending more than W tokens past R: a paragraph's units
# are made of its own text alone, its sentence cuts found from its start by the characters up
# to each (and the one after it), and where it ends by its characters up to the first after its
# break; each boundary before R is an anchor or not by the units within W of it, R by those up
# to W past it (and by the text's end lying further than W past it: the text goes on past that
# unit); each stretch's pieces are made of its own units, each chunk's prefix and token count
# of the text before its end. So where the text up to that sentence's or paragraph's end is the
# previous version's (``_unchanged``: by the digests of its chunks' parts, ``Spans``), the
# previous chunks before R stand, and R starts a piece of both. Likewise the chunks from an
# anchor T on are a function of the text from the first unit within W tokens before T, and of
# the overlap's characters before T (``_overlap_start``: at most 12 a token, and the one
# before): where the text from before those on ends the previous version too
# (``_unchanged_end``), and the paragraphs from the first after that start
# (``_paragraph_after``) are the units', the previous chunks from T on stand, moved. Within a
# paragraph split into sentences (a log's lines) the sentence cuts from one whose break begins 12
# characters past a letter or digit after that start are the whole text's too (``_sentence_after``:
# no break takes a letter, and a cut's abbreviation test looks 12 back), and its units with them
# where the paragraph is split in both versions: in the new by its units, in the previous by T
# lying inside it, one of its chunk starts (a chunk starts at a unit). The anchors
# between are found from the units of a few chunks before the change to a few after it alone
# (``_resumed``), taking only those more than W tokens past the first of them (``_anchors``
# leaves out the nearer ones) and more than W before the last: an anchor's test looks W either
# way, and the text's start and end count only within W of them. Those units begin at a unit
# start of the whole text's, a paragraph's start or a sentence cut of a paragraph split (a
# log's lines: ``_resume_point``).


class Cut(NamedTuple):
    """A document cut (``cut_document``): the chunks of the previous version's it keeps at its
    start (``kept``, the same text and index), the chunks after them made now, the index of the
    first of the previous version's chunks it keeps at its end (``tail``: all from there on, the
    same text, moved to after the chunks made; their number if none), and the spans of all."""

    kept: int
    chunks: list[Chunk]
    tail: int
    spans: Spans


# How many of the previous version's chunks before its first changed one the units are
# computed from, in turn: the first that holds an anchor far enough from the change (a few
# bodies hold several) is used, else the text is cut from its start. As many past the last
# changed one they are computed to, else to the text's end.
_BACK = (16, 128)


def cut_document(doc: Document, before: Spans | None, *, chunk_size: int, overlap: int, encoding: str,
                 key: bytes, check: Callable[[], None] = _going_on) -> Cut:
    """``chunk_document(doc)`` (the chunks between ``kept`` and the tail) and its spans;
    ``before``, the spans of the previous version of its text cut with the same settings and
    digested with ``key`` (which names them), lets it keep the chunks before and after its
    change rather than cut them again. ``check`` is called every few milliseconds of the work:
    what it raises stops the cut (a run cancelled while a worker thread cuts a big file, which
    Python waits for as it exits: ``extraction_stage.cut_big``)."""
    text = doc.text
    before = before or Spans([], [], [])
    if not text or text.isspace():
        return Cut(0, [], len(before.starts), Spans([], [], []))
    enc = get_encoding(encoding)
    chunk_size, overlap, budget = _sizes(chunk_size, overlap)
    resumed = _resumed(text, enc, budget, overlap, before, key, check) if before.starts else None
    if resumed is None:
        kept, tail, moved = 0, len(before.starts), 0
        units = _units(text, enc, budget, check=check)
        pieces = _pieces(units, budget, chunk_size)
    else:
        kept, units, pieces, tail, moved = resumed
    spans = _spans(text, units, pieces, overlap, enc, first=not kept)
    del units
    starts: list[int] = []
    chunks = _finish(doc, text, spans, chunk_size, overlap, enc, kept, starts, check)
    if resumed is not None and not chunks:
        # Nothing made between the chunks kept and those moved (every piece blank: not seen, the
        # text cut again holds a kept chunk's body): no span would cover that text, so cut whole.
        whole = cut_document(doc, None, chunk_size=chunk_size, overlap=overlap, encoding=encoding, key=key,
                             check=check)
        return Cut(0, whole.chunks, len(before.starts), whole.spans)
    if not kept:
        starts[0] = 0   # (the first chunk's part holds the blanks before it)
    ends = starts[1:] + ([before.starts[tail] + moved] if tail < len(before.starts) else [len(text)])
    made = [_digest(text, s, e, key) for s, e in zip(starts, ends)]
    return Cut(kept, chunks, tail, Spans(
        before.starts[:kept] + starts + [s + moved for s in before.starts[tail:]],
        before.ends[:kept] + ends + [e + moved for e in before.ends[tail:]],
        before.digests[:kept] + made + before.digests[tail:]))


def _digest(text: str, start: int, end: int, key: bytes) -> bytes:
    """The digest of ``text[start:end]`` keyed with ``key`` (the chunking settings: parts cut
    with others match none)."""
    return hashlib.blake2b(text[start:end].encode("utf-8", "surrogatepass"), digest_size=16, key=key).digest()


def _unchanged(text: str, before: Spans, key: bytes) -> tuple[int, int]:
    """The first of ``before``'s chunks whose part of the text differs in ``text`` (their
    number if none does), and how many characters of ``text`` are the previous version's."""
    for k, (s, e, d) in enumerate(zip(*before)):
        if e > len(text) or _digest(text, s, e, key) != d:
            return k, s
    return len(before.starts), before.ends[-1]


def _unchanged_end(text: str, before: Spans, key: bytes, changed: int) -> tuple[int, int]:
    """The first of ``before``'s chunks after ``changed`` from which on each one's part of the
    text ends ``text`` as it ended the previous version (their number if the last's does
    not), and how far they moved (the difference of the texts' lengths)."""
    moved = len(text) - before.ends[-1]
    k = len(before.starts)
    while k > changed and before.starts[k - 1] + moved >= 0 and _digest(
            text, before.starts[k - 1] + moved, before.ends[k - 1] + moved, key) == before.digests[k - 1]:
        k -= 1
    return k, moved


def _resumed(text: str, enc, budget: int, overlap: int, before: Spans, key: bytes,
             check: Callable[[], None] = _going_on):
    """``(kept, units, pieces, tail, moved)``: how many of ``before``'s chunks stand at the
    start; the units from a paragraph start before them (or the text's) to past the change,
    with the pieces from the last anchor whose chunks before it stand (or the start) to the
    first from which the previous chunks stand, moved (or the end); the index of the first of
    those and how far they moved (see "resuming"). None when nothing stands."""
    changed, same = _unchanged(text, before, key)
    tail, moved = _unchanged_end(text, before, key, changed)
    window = ANCHOR_WINDOW * budget
    n = len(before.starts)
    after = before.starts[tail] + moved if tail < n else len(text)   # (where the unchanged end begins)
    near = before.starts[tail + _BACK[0]] + moved if tail + _BACK[0] < n else len(text)
    points: dict[int, tuple[int, int] | None] = {}   # back -> its resume point, once for both stops
    breaks = _Breaks(text)
    for stop in dict.fromkeys((near, len(text))):
        for back in _BACK + (None,):
            if back is not None and changed - back >= 1:
                if back not in points:
                    points[back] = _resume_point(text, enc, budget, before.starts[changed - back], breaks)
                point = points[back]
                if point is None or point[0] >= same:
                    continue
            else:
                point = None
            first, start = point or (None, None)
            if first is None and stop == len(text):
                return None   # (cut whole)
            units = _units(text, enc, budget, first, stop, start, breaks, check)
            pos = array("q", accumulate(units.tokens, initial=0))
            anchors = _anchors(units, pos, window)
            if first is None:
                kept, r, head = 0, -1, 0
            else:
                r = _last_standing(units, pos, anchors, window, same)
                if r is None:
                    continue
                head = anchors[r]
                kept = bisect.bisect_left(before.starts, units.start[head])
                if kept == n or before.starts[kept] != units.start[head]:
                    # (not a chunk start of the previous version: the change may have moved how a
                    # paragraph within its window is split; other settings match no digest at all)
                    return None
            end, reused = len(units), n
            if units.end[-1] < len(text):   # (the units stop short of the text's end)
                t = _first_standing(text, units, pos, anchors[r + 1:], window, overlap, after, breaks)
                reused = bisect.bisect_left(before.starts, units.start[t] - moved) if t is not None else n
                if reused == n or before.starts[reused] != units.start[t] - moved:
                    break   # (on to the units to the text's end)
                end = t
            bounds = [head] + [a for a in anchors[r + 1:] if a < end] + [end]
            pieces = [p for a, b in zip(bounds, bounds[1:]) for p in _split_stretch(units, pos, a, b, budget)]
            return kept, units, pieces, reused, moved
    return None


def _resume_point(text: str, enc, budget: int, at: int, breaks: _Breaks) -> tuple[int, int] | None:
    """``(first, start)``: the first unit start after ``at`` as the whole text's ``_units`` makes
    it, a sentence cut inside a paragraph split into sentences (a log's lines: one paragraph) or
    a paragraph's start, and the start of its paragraph; None if none follows. From after a
    letter or digit, which no paragraph or sentence break takes: the breaks found from there
    are the whole text's (``_paragraph_after``)."""
    w = _WORD.search(text, at)
    if w is None:
        return None
    c = w.end()
    b = breaks.after(c)
    e = b.end() if b else len(text)
    s = _paragraph_start(text, c)
    if _paragraph_tokens(text, enc, budget, s, e) > budget:
        for cut in _sentence_cuts(text, s, e, c):
            if cut < e:
                return cut, s
    return (e, e) if e < len(text) else None


def _paragraph_start(text: str, at: int) -> int:
    """Where the paragraph holding ``at`` begins (the character before ``at`` no blank): after
    the blanks of the last paragraph break before it, else at the text's first character that
    is no blank."""
    m = _LAST_BREAK.match(text, 0, at)
    if m is None:
        return _NOT_BLANK.search(text).start()
    return _BLANKS.match(text, m.end()).end()


def _paragraph_after(text: str, at: int, breaks: _Breaks) -> int | None:
    """The start of the first paragraph after ``at``, as ``_units`` of the whole text finds it:
    a paragraph break found from after a character that is no blank is one of the whole
    text's (none takes that character), or None if no paragraph follows."""
    m = _NOT_BLANK.search(text, at)
    b = breaks.after(m.end()) if m else None
    return b.end() if b and b.end() < len(text) else None


def _last_standing(units: _Units, pos: array, anchors: list[int], window: float, same: int) -> int | None:
    """The last of ``anchors`` (its place in the list) whose chunks before it stand: the
    sentence or paragraph of the first unit ending more than ``window`` tokens past it ends
    within the ``same`` first characters (strictly: the character after its break too)."""
    for r in range(len(anchors) - 1, -1, -1):
        i = anchors[r]
        if units.start[i] >= same:
            continue
        u = bisect.bisect_right(pos, pos[i] + window) - 1   # (the unit ending past the window)
        if u >= len(units):
            continue
        while units.level(u) < SENTENCE:   # (a long sentence's pieces: to its end)
            u += 1
        if units.end[u] < same:
            return r
    return None


def _first_standing(text: str, units: _Units, pos: array, anchors: list[int], window: float, overlap: int,
                    after: int, breaks: _Breaks) -> int | None:
    """The first of ``anchors`` whose chunks from it on are the previous version's, moved: the
    text from ``after`` on is the previous version's end, and so are the paragraphs from the
    first after it on (``_paragraph_after``), or the sentences from a cut of the paragraph
    after it (``_sentence_after``) for an anchor inside that paragraph; the units within
    ``window`` tokens before the anchor are of those, and its first chunk's prefix lies after
    ``after`` (``_overlap_start`` looks at most 12 characters a token back, and at the one before)."""
    q = _paragraph_after(text, after, breaks)
    cut, end = _sentence_after(text, after, breaks) or (None, None)
    for i in anchors:
        left = bisect.bisect_left(pos, pos[i] - window) - 1   # (the first unit the anchor's test looks at)
        if left < 0 or units.start[i] - overlap * 12 - 1 < after:
            continue
        if (q is not None and units.start[left] >= q) or (cut is not None and cut <= units.start[left]
                                                          and units.start[i] < end):
            return i
    return None


def _sentence_after(text: str, at: int, breaks: _Breaks) -> tuple[int, int] | None:
    """``(cut, end)``: a sentence cut of the paragraph holding the first letter or digit from
    ``at`` on, and that paragraph's end, such that, where the paragraph is split into sentences,
    the cuts from it to its end are the whole text's whatever the text before ``at``: found from
    after a letter or digit 12 characters or more past that first one (no break takes one), and
    so looking back no further than it (``_sentence_cuts``); None if the paragraph has no such cut."""
    w = _WORD.search(text, at)
    b = breaks.after(w.end()) if w else None
    end = b.end() if b else len(text)
    later = _WORD.search(text, w.start() + 12, end) if w else None
    if later is None:
        return None
    cut = next(_sentence_cuts(text, w.start(), end, later.end()))
    return (cut, end) if cut < end else None


# ---------------------------------------------------------------------------- units


def _units(text: str, enc, budget: int, first: int | None = None, stop: int | None = None,
           start: int | None = None, breaks: _Breaks | None = None,
           check: Callable[[], None] = _going_on) -> _Units:
    """The units of ``text``, paragraph by paragraph: no list of the paragraphs, nor of any
    paragraph's sentences or tokens, is held at once. From ``first``, a unit's start, if given
    (``_resumed``: a paragraph's start, or a sentence cut of a paragraph split that begins at
    ``start``), else from the text's first paragraph; to the end of the paragraph holding
    ``stop``, if given (of its sentence, in a paragraph split into sentences: a log of lines is
    one paragraph), else to the text's end. ``breaks``: the searches for its first paragraph
    break ``_resumed`` made already. ``check``: the cut's (``cut_document``)."""
    units = _Units(check)
    if first is None:
        first = len(text) - len(text.lstrip())
    s = first
    for e in _paragraph_ends(text, first, breaks or _Breaks(text)):
        if stop is not None and s > stop:
            break
        if start is not None and s == first and s != start:   # (its paragraph split: ``_resume_point``)
            _split_paragraph(units, text, start, e, enc, budget, first, stop)
        elif e > s and not _blank(text, s, e):
            n = _paragraph_tokens(text, enc, budget, s, e)
            if n <= budget:
                units.add(s, e, n, PARAGRAPH, text[s:e])
            else:
                _split_paragraph(units, text, s, e, enc, budget, stop=stop)
        s = e
    return units


def _paragraph_tokens(text: str, enc, budget: int, s: int, e: int) -> int:
    """The tokens of the paragraph ``text[s:e]`` when at most ``budget``, else a number past it.

    A paragraph with more words than the budget has more tokens too (``more_words_than``): it
    is split without being encoded whole (a book on one line was encoded an extra time), and so
    is one with few words found to have more a window at a time (``tokens_up_to``, its count
    exact when within the budget: such a paragraph is not encoded again)."""
    if e - s > 4 * budget and more_words_than(text, budget, s, e):
        return budget + 1
    return tokens_up_to(enc, text, budget, s, e)


def _paragraph_ends(text: str, first: int, breaks: _Breaks):
    last = first
    b = breaks.after(first)   # (then on from it, as a finditer from ``first`` goes)
    if b is not None:
        last = b.end()
        yield last
        for m in _PARAGRAPH_BREAK.finditer(text, last):
            last = m.end()
            yield last
    if last < len(text):
        yield len(text)


_NOT_BLANK = re.compile(r"\S")


class _Breaks:
    """The first paragraph break from a place in ``text`` (``after``), the last search
    remembered: a log has no blank line, so each search runs to its end (0.03 s at 100 MB), and
    a cut around a change searched four times from near it (``_resumed``). A search from
    anywhere between where the last began and the break it found finds that break again: a
    break's match depends on its own characters alone, not on where the search began."""

    __slots__ = ("text", "_since", "_found")

    def __init__(self, text: str) -> None:
        self.text, self._since, self._found = text, None, None

    def after(self, at: int) -> re.Match | None:
        """``_PARAGRAPH_BREAK.search(text, at)``."""
        if self._since is None or at < self._since or self._found is not None and at > self._found.start():
            self._since, self._found = at, _PARAGRAPH_BREAK.search(self.text, at)
        return self._found


def _blank(text: str, s: int, e: int) -> bool:
    """``not text[s:e].strip()``, without the copy."""
    return _NOT_BLANK.search(text, s, e) is None


def _split_paragraph(units: _Units, text: str, s: int, e: int, enc, budget: int, at: int | None = None,
                     stop: int | None = None) -> None:
    """The units of paragraph ``text[s:e]``, split into sentences (from its cut ``at`` if given),
    to the end of the sentence holding ``stop`` if given (its last unit then not reached)."""
    before = len(units)
    a = s if at is None else at
    for b in _sentence_cuts(text, s, e, a, units.check):
        if b > a:
            tokens = encode_ordinary(enc, text, a, b, units.check)
            if len(tokens) <= budget:
                units.add(a, b, len(tokens), SENTENCE, text[a:b])
            else:
                _split_sentence(units, text, a, b, tokens, enc, budget)
            a = b
            if stop is not None and stop < b < e:
                return
    if len(units) > before:   # the last piece ends the paragraph
        units.relevel(len(units) - 1, PARAGRAPH)


def _sentence_cuts(text: str, s: int, e: int, at: int, check: Callable[[], None] = _going_on):
    """The sentence cuts of paragraph ``text[s:e]`` from ``at`` (its start, or a cut of it, or a
    character after a letter or digit, which no sentence break takes), and its end. ``check``:
    the cut's, called before each search (``_sentence_breaks``)."""
    # not after a title or an initial: a chunk ending "said Mrs." parts the name from its sentence
    for m in _sentence_breaks(text, at, e, check):
        if m.end() < e and not ends_with_abbreviation(text[max(s, m.start() - 12):m.start() + 1]):
            yield m.end()
    yield e


# Characters searched at once for a sentence break: a line of 8 MB with none (a base64 blob) was
# searched whole, most of a second holding up a stop (``_sentence_breaks``).
_SEARCH_WINDOW = 1 << 20
# What a break's first alternative may hold before its blanks: its mark, then closers.
_MARK_OR_CLOSER = frozenset(".!?\u2026" + _CLOSERS.replace("\\", ""))


def _sentence_breaks(text: str, at: int, e: int, check: Callable[[], None]):
    """``_SENTENCE_BREAK.finditer(text, at, e)``, searched ``_SEARCH_WINDOW`` characters at a time,
    ``check`` called before each search. A match found in a window is the whole search's when it
    ends before the window does: no break's first character is another's closer, blank or later
    character, so a search from ``at`` to ``e`` tries the same places first and fails at each; one
    reaching the window's end is searched again to ``e``. None found, the search goes on from the
    run of marks and closers the window ends with (a "." whose blank lies past it)."""
    while at < e:
        check()
        w = min(e, at + _SEARCH_WINDOW)
        m = _SENTENCE_BREAK.search(text, at, w)
        if m is not None and m.end() == w < e:
            m = _SENTENCE_BREAK.search(text, m.start(), e)   # (its blanks may run on past the window)
        if m is not None:
            yield m
            at = m.end()
            continue
        if w == e:
            return
        r = w
        while r > at and text[r - 1] in _MARK_OR_CLOSER:
            r -= 1
        if r == at:   # (a window of marks and closers alone: searched to the end at once)
            yield from _SENTENCE_BREAK.finditer(text, at, e)
            return
        at = r


def _split_sentence(units: _Units, text: str, a: int, b: int, tokens, enc, budget: int) -> None:
    """Cut at whitespace-led tokens where possible, else at a token boundary."""
    step = max(1, budget - 4)
    led = blank_led(enc)   # (looked up: decoding each token tried took a third of a long line's time)
    cuts: list[tuple[int, int]] = []   # (token index, level of the cut)
    s, n = 0, len(tokens)
    while n - s > step:
        if not len(cuts) % _CHECK_EVERY:   # (a line of 8 MB with no blank took most of a second here)
            units.check()
        e, level = s + step, TOKEN
        for j in range(s + step, s + step // 2, -1):
            if led[tokens[j]]:
                e, level = j, WORD
                break
        cuts.append((e, level))
        s = e
    # Character offsets advance cut by cut: each counts the characters of the tokens since the
    # last (decoding from the sentence's start at every cut was quadratic in its length), as
    # the bytes that begin one (a cut inside a character goes after it), with no copy of the
    # sentence in UTF-8 (a 25 MB line's took 75 MB).
    char_cuts, levels = [], []
    prev_t = chars = 0
    for k, (t, level) in enumerate(cuts):
        if not k % _CHECK_EVERY:
            units.check()
        chars += len(enc.decode_bytes(tokens[prev_t:t].tolist()).translate(None, _CONTINUATION))
        prev_t = t
        char_cuts.append(a + chars)
        levels.append(level)
    bounds = [a] + char_cuts + [b]
    at = [0] + [t for t, _ in cuts] + [n]   # the token each bound is at (where it is a seam)
    for i, level in enumerate(levels + [SENTENCE]):
        x, y = bounds[i], bounds[i + 1]
        if y > x:
            # Between safe seams (or the sentence's ends) the unit's tokens are the sentence's
            # there (``tokens.safe_cut``): counted, not encoded again.
            if (i == 0 or safe_cut(enc, text, x)) and (i == len(cuts) or safe_cut(enc, text, y)):
                count = at[i + 1] - at[i]
            else:
                count = len(enc.encode_ordinary(text[x:y]))
            units.add(x, y, count, level, text[x:y])


_CONTINUATION = bytes(range(0x80, 0xC0))   # bytes inside a UTF-8 character, after its first


# ---------------------------------------------------------------------------- boundaries


def _pieces(units: _Units, budget: int, chunk_size: int) -> list[tuple[int, int]]:
    """Unit ranges ``[a, b)`` forming the chunk bodies (a lone chunk needs no overlap room)."""
    n = len(units)
    pos = array("q", accumulate(units.tokens, initial=0))
    if pos[-1] <= chunk_size:
        return [(0, n)]
    anchors = [0] + _anchors(units, pos, ANCHOR_WINDOW * budget) + [n]
    pieces: list[tuple[int, int]] = []
    for i, (a, b) in enumerate(zip(anchors, anchors[1:])):
        if not i % _CHECK_EVERY:
            units.check()
        pieces.extend(_split_stretch(units, pos, a, b, budget))
    return pieces


def _anchors(units: _Units, pos: array, window: float) -> list[int]:
    """Unit indices ``i`` (a boundary before unit i) whose key is a strict local maximum."""
    n = len(units)
    key = units.key   # the boundary before unit i is keyed by unit i - 1's key

    def window_max(order: range) -> array:
        best = array("q", [-1]) * n   # (-1: below every key, which packs a level >= 0)
        q: deque[int] = deque()
        for i in order:
            if not i % _CHECK_EVERY:
                units.check()
            while q and abs(pos[i] - pos[q[0]]) > window:
                q.popleft()
            best[i] = key[q[0] - 1] if q else -1
            while q and key[q[-1] - 1] <= key[i - 1]:
                q.pop()
            q.append(i)
        return best

    left = window_max(range(1, n))
    right = window_max(range(n - 1, 0, -1))
    # The document's edges count as the strongest boundaries, so no stretch is a sliver.
    end = pos[-1]
    return [i for i in range(1, n) if key[i - 1] > left[i] and key[i - 1] > right[i]
            and window < pos[i] < end - window]


def _split_stretch(units: _Units, pos: array, a: int, b: int, budget: int) -> list[tuple[int, int]]:
    """Split units ``[a, b)`` into pieces within budget, packed from the stretch's start.

    Each piece ends at the best-ranked boundary in the last quarter of its budget (the
    furthest one among equals), so pieces are nearly full and end at paragraph or sentence
    ends where the text allows. An edit inside the stretch changes only the pieces from the
    edit on.
    """
    out: list[tuple[int, int]] = []
    cur = a
    while pos[b] - pos[cur] > budget:
        best, best_key = None, None
        fallback = cur + 1
        for j in range(cur + 1, b):
            size = pos[j] - pos[cur]
            if size > budget:
                break
            fallback = j
            if size >= 0.75 * budget:
                key = (units.level(j - 1), size)
                if best_key is None or key > best_key:
                    best, best_key = j, key
        cut = best if best is not None else fallback
        out.append((cur, cut))
        cur = cut
    out.append((cur, b))
    return out


# ---------------------------------------------------------------------------- overlap, assembly


def _overlap_start(text: str, body_start: int, overlap: int, enc) -> int:
    """Where the prefix before ``body_start`` begins: about ``overlap`` tokens, at a word start."""
    if overlap <= 0 or body_start <= 0:
        return body_start
    window_start = max(0, body_start - overlap * 12)
    window = text[window_start:body_start]
    tokens = enc.encode_ordinary(window)
    if len(tokens) > overlap:
        tail = len(enc.decode_bytes(tokens[-overlap:]))
        data = window.encode("utf-8", "surrogatepass")
        cand = window_start + len(data[: len(data) - tail].decode("utf-8", "ignore"))
    else:
        cand = window_start
    if cand > 0 and not text[cand - 1].isspace():
        # Not at a word start: prefer a sentence start in the first half, else the next word.
        half = cand + (body_start - cand) // 2
        m = _SENTENCE_BREAK.search(text, cand, body_start)
        if m and m.end() <= half:
            cand = m.end()
        else:
            w = _WHITESPACE.search(text, cand, body_start)
            cand = w.end() if w else body_start
    return min(cand, body_start)


def _finish(doc: Document, text: str, spans: list[tuple[int, int, int, int | None]], chunk_size: int,
            overlap: int, enc, idx: int = 0, starts: list[int] | None = None,
            check: Callable[[], None] = _going_on) -> list[Chunk]:
    """The chunks of ``spans``, numbered from ``idx``; each one's body start appended to ``starts``."""
    texts = [text[p:e].strip() for p, _, e, _ in spans]
    counts = []
    for i, (span, t) in enumerate(zip(spans, texts)):
        if not i % _CHECK_EVERY:
            check()
        counts.append(_counted(text, span, t, enc))
    out: list[Chunk] = []
    for (p, s, e, _), body, n in zip(spans, texts, counts):
        for piece, tokens in _fit(text, p, s, e, body, n, chunk_size, overlap, enc):
            if piece:
                out.append(Chunk(id=chunk_id(piece), doc_id=doc.id, idx=idx + len(out), text=piece, tokens=tokens))
                if starts is not None:
                    starts.append(s)
    return out


def _counted(text: str, span: tuple[int, int, int, int | None], piece: str, enc) -> int:
    """The tokens of ``piece``, a chunk's text (``span``: where its prefix and body begin, where
    it ends, and its body's tokens when known, ``_body_tokens``): its prefix's and its body's
    when they meet at a safe seam and no blank was stripped off its start (a chunk was encoded
    once more whole: 1.09 times the text), else counted. Blanks stripped off its end (a
    paragraph's or a sentence's) are taken off the body's count from the last safe seam before
    them: the few characters after it counted with and without them."""
    p, s, e, body = span
    if body is None or text[p].isspace() or p < s and not safe_cut(enc, text, s):
        return len(enc.encode_ordinary(piece))
    end = p + len(piece)   # (nothing stripped off its start: it begins at p)
    if end < e:
        cut = last_cut(enc, text, max(s, end - 64), end)
        if cut is None:
            return len(enc.encode_ordinary(piece))
        body += len(enc.encode_ordinary(text[cut:end])) - len(enc.encode_ordinary(text[cut:e]))
    return body + (len(enc.encode_ordinary(text[p:s])) if p < s else 0)


def _fit(text: str, p: int, s: int, e: int, body: str, n: int, chunk_size: int, overlap: int,
         enc) -> list[tuple[str, int]]:
    """Rarely needed: token counts are not exactly additive, so shrink the prefix, then split."""
    while n > chunk_size and p < s:
        overlap = max(0, overlap - (n - chunk_size) - 2)
        p = _overlap_start(text, s, overlap, enc) if overlap else s
        body = text[p:e].strip()
        n = len(enc.encode_ordinary(body))
    if n <= chunk_size:
        return [(body, n)]
    tokens = enc.encode_ordinary(text[s:e])
    out = []
    step = max(1, chunk_size - 4)
    for i in range(0, len(tokens), step):
        piece = enc.decode(tokens[i:i + step]).strip()
        out.append((piece, len(enc.encode_ordinary(piece))))
    return out
