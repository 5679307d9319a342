"""Where a sentence ends: the rules the chunker, the summarizer, reports and extractive answers
share.

A full stop after a title, a common abbreviation or a lone capital ("Mrs. Cratchit", "e.g. this",
"J. Smith") ends no sentence. Splitting there cut "said Mrs." off from its name: descriptions
ended mid-sentence and a chunk could end on the title. Chinese and Japanese end sentences with
full-width terminators and no space after them; the closing quotes and brackets after one stay
with its sentence. Each user builds its own pattern from these (the chunker also cuts at line
ends, extractive answers only before a capital), but the terminators and closers are these.
A line needs no terminator to end its sentence where Markdown ends a paragraph: a heading's line
and the line before a blank one (``line_parts``); a heading read into the sentence under it
("Ada Lovelace Ada was a mathematician") was quoted in answers and reports.

Sentences joined into one text (``joined``: offline descriptions, extractive summaries) keep
their boundary: one without a terminator, a list item's, gets a full stop before the next. A
colon or a semicolon ends no sentence: it leads into what follows, and is kept before what it
leads into only ("Agenda:" of one description before "Ada Osk left" of another is "Agenda.").

A heading is no sentence to quote (``is_heading``): a Markdown heading's line, or a line of its
own, unended, in title case ("Aftermath of Lake Kelholmford Marathon 2034": ``is_title``, the
offline extractor's rule for headlines too) with its body after it. A line in title case with
nothing after it, or closing a paragraph, says what it says ("Call Ada Osk on Friday"). Extractive
answers and reports leave headings out of what they quote; the passages and contexts keep them.

A Markdown table's row is a sentence of its own, read as its cells say it: "| Ada Osk | Boston |"
is "Ada Osk; Boston." (``table_row_text``); which lines are rows is ``table_rows``'s to say, for
every reader of them (the offline extractor and extractive answers had a rule each). Its pipes are borders, not words: quoted as written
they stood in offline descriptions, reports and extractive answers. The words stay in their
order, so a quote of a row is still found as a phrase of its chunk's words.
"""

from __future__ import annotations

import re

ABBREVIATIONS = ("Mr", "Mrs", "Ms", "Mx", "Dr", "St", "Prof", "Sr", "Jr", "Rev", "Hon", "Gen", "Col",
                 "Capt", "Lt", "Sgt", "Gov", "Sen", "Rep", "Fr", "Mt", "Ft", "Messrs", "Mme", "Mlle",
                 "vs", "cf", "approx", "e.g", "i.e", "viz", "Fig", "Vol", "pp")
# Titles the offline extractor drops before a name, so that "Mr. Fezziwig" and "Fezziwig" are one
# person (``nlp``'s notes; the titles it keeps, "Mrs." or "Miss", name a wife or a daughter).
# ``nlp`` and ``joins`` read it as ``nlp.HONORIFICS``: a change to it changes which names are
# extracted and joined, so it bumps ``nlp.VERSION`` and ``joins.RULE``. ``extractive`` reads it
# too, to rank an answer's sentences (no version: nothing stored depends on that).
HONORIFICS = frozenset("mr ms mx dr prof professor sir rev reverend messrs herr".split())

# Lookbehinds for a regex matching the whitespace after a sentence's last character: not after
# "<abbreviation>." nor after a lone capital's full stop.
NOT_AFTER_ABBREVIATION = ("".join(rf"(?<!\b{re.escape(a)}\.)" for a in ABBREVIATIONS)
                          + r"(?<!\b[A-Z]\.)")

_ENDS_WITH_ABBREVIATION = re.compile(
    r"(?:\b(?:" + "|".join(re.escape(a) for a in ABBREVIATIONS) + r")|(?<![\w.])[A-Z])\.$")


def ends_with_abbreviation(text: str) -> bool:
    """Whether ``text`` ends with the full stop of an abbreviation or an initial."""
    return _ENDS_WITH_ABBREVIATION.search(text[-12:]) is not None


CJK_TERMINATORS = "\u3002\uff01\uff1f\uff61"   # 。！？ and the half-width ｡
CJK_CLOSERS = "\u300d\u300f\u3011\u3015\u3009\u300b\uff09\uff3d\uff02\uff07"   # 」』】〕〉》）］＂＇

# The gap between two sentences: white space after . ! ? (the one-character lookbehind goes
# first: most positions fail it at once, before the thirty-odd abbreviation lookbehinds are
# tried), or any space after a full-width terminator and the closers that follow it.
SENTENCE_GAP = re.compile(r"(?<=[.!?])" + NOT_AFTER_ABBREVIATION + r"\s+"
                          + rf"|(?:(?<=[{CJK_TERMINATORS}])|(?<=[{CJK_TERMINATORS}][{CJK_CLOSERS}]))"
                          + rf"(?![{CJK_TERMINATORS}{CJK_CLOSERS}])\s*(?=\S)")


# Where SENTENCE_GAP may match: after . ! ? before white space (its first alternative), or
# about a full-width terminator (its second). Most descriptions hold neither (one sentence),
# or only the first: splitting them with the gap pattern itself tried its lookbehinds at every
# character (the largest part of an offline index's extractive summaries, profiled).
_AFTER_STOP = re.compile(r"[.!?](?=\s)")
_CJK_STOP = re.compile(rf"[{CJK_TERMINATORS}]")


# A line that ends its sentence whatever its last character: a Markdown heading's ("# Ada
# Lovelace" over "Ada was ..." read "Ada Lovelace Ada was ...") and, as a blank line parts
# paragraphs, the line before a blank one ("Open questions" over a blank line and a paragraph).
# A line may end "\r\n" (a CRLF file, a model's answer): its "\r" is white space to both.
HEADING_LINE = re.compile(r"[ \t]{0,3}#{1,6}(?:[ \t\r]|$)")
# A Markdown setext heading's underline: under a paragraph's line, "=======" or "-------" makes
# a heading of it ("Minutes" over "=======", ``markdown`` and ``extractive`` read it so).
SETEXT_UNDERLINE = re.compile(r" {0,3}(?:=+|-+)[ \t]*$")
_BLANK_LINE = re.compile(r"\n[ \t\r]*\n\s*")


def is_heading_line(sentence: str) -> bool:
    """Whether ``sentence`` (one of ``sentences_of``) is a Markdown heading's line: a title, not
    a sentence a report may quote ("# Ada Lovelace." stood for Ada in a report's members)."""
    return "\n" not in sentence and HEADING_LINE.match(sentence) is not None


def line_parts(text: str) -> list[str]:
    """``text`` parted at its blank lines and around its Markdown headings' lines, the parts
    as written (a text of one line, most descriptions, is one part)."""
    if "\n" not in text:
        return [text]
    out: list[str] = []
    for para in _BLANK_LINE.split(text):
        if "#" not in para:
            out.append(para)
            continue
        lines: list[str] = []
        for line in para.split("\n"):
            if HEADING_LINE.match(line) is None:
                lines.append(line)
                continue
            if lines:
                out.append("\n".join(lines))
                lines = []
            out.append(line)
        if lines:
            out.append("\n".join(lines))
    return out


def split_at_gaps(text: str) -> list[str]:
    """The sentences of ``text`` as written: ``SENTENCE_GAP.split`` of each of its
    ``line_parts``."""
    parts = [p for p in line_parts(text) if p.strip()]
    if len(parts) <= 1:
        return _split_part(parts[0] if parts else text)
    return [s for part in parts for s in _split_part(part)]


def _split_part(text: str) -> list[str]:
    """``SENTENCE_GAP.split(text)``, the gap pattern tried only after . ! ? before white space
    when ``text`` holds no full-width terminator."""
    if _CJK_STOP.search(text) is not None:
        return SENTENCE_GAP.split(text)
    out, start = [], 0
    for stop in _AFTER_STOP.finditer(text):
        # (no stop lies inside the last gap: without a full-width terminator a gap is white space)
        at = stop.end()
        gap = SENTENCE_GAP.match(text, at)   # (its lookbehinds see the text before ``at``)
        if gap is not None:
            out.append(text[start:at])
            start = gap.end()
    out.append(text[start:])
    return out


# A Markdown (GFM) table: the row under its header ("|---|:--:|", "--- | ---") makes every line of
# its run of lines holding a "|" a row.
TABLE_DELIMITER = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*$", re.MULTILINE)
_CELL_BORDER = re.compile(r"(?<!\\)\|")     # (an escaped pipe, "\|", is a cell's text)
QUOTE_MARKS = re.compile(r"[ \t]*(?:>[ \t]?)*")        # a quoted line's "> > " (matches "" too)
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+\u2022]|\d{1,3}[.)])[ \t]")


def table_rows(lines: list[str]) -> list[bool]:
    """Which of a block's lines are a Markdown table's rows, the one rule the offline extractor
    and extractive answers share. Read without their quote marks ("> | a | b |" in a quote is
    a row too), a run of lines holding a "|" with a delimiter row among them is a table, each
    line of it a row; elsewhere a line between pipes is one ("| Cache | Sofia |"). A list
    item is no row, a pipe in it text ("- a list item with a | pipe")."""
    bare = [line[QUOTE_MARKS.match(line).end():].strip() for line in lines]
    piped = ["|" in b and _LIST_ITEM.match(b) is None for b in bare]
    rows = [p and b[0] == "|" == b[-1] for p, b in zip(piped, bare)]
    start = 0
    while start < len(bare):
        if not piped[start]:
            start += 1
            continue
        end = start
        while end < len(bare) and piped[end]:
            end += 1
        if any(TABLE_DELIMITER.match(b) for b in bare[start:end]):
            rows[start:end] = [True] * (end - start)
        start = end
    return rows


def table_row_text(row: str) -> str:
    """A Markdown table's row (or a piece of one) as the sentence its cells make, the cells
    parted by semicolons and the pipes gone: "| Ada Osk | Engineer | Boston |" is "Ada Osk;
    Engineer; Boston."; "" for the delimiter row under a header ("| --- | :-: |")."""
    cells = [c.strip().replace("\\|", "|") for c in _CELL_BORDER.split(row)]
    if all(not c.strip(":-") for c in cells):
        return ""
    text = "; ".join(c for c in cells if c)
    return text if not text or text.endswith((".", "!", "?", "\u2026")) else text + "."


# A sentence's end: a terminator and the closing quotes, brackets and Markdown emphasis after it
# ('hey?"_'). Not a colon or a semicolon: they lead into what follows ("Attendees:", "engineer;"),
# and what a description or a summary joins after one need not be it.
_ENDED = re.compile(rf"[.!?\u2026{CJK_TERMINATORS}][\"'\u201d\u2019)\]_*{CJK_CLOSERS}]*$")
# What opens a sentence that goes on from a colon or semicolon before it, read from its words
# alone: a list item's marker, a quotation, a word in lower case ("said:" "'It isn't that'").
_GOES_ON = re.compile(r"(?:[-*+\u2022]|\d{1,3}[.)])\s|[\"'\u201c\u2018]|[^\W\d_]")


def ended(sentence: str) -> bool:
    """Whether ``sentence`` ends as a sentence does (a list item, a heading, or one that leads
    into the next with a colon or a semicolon need not)."""
    return _ENDED.search(sentence) is not None


def closed(sentence: str) -> str:
    """``sentence`` ending as a sentence does, to stand apart from what follows it: as written
    if it does (``ended``), its last colon or semicolon a full stop ("Agenda:" is "Agenda."),
    else with a full stop added."""
    if ended(sentence):
        return sentence
    return sentence[:-1] + "." if sentence.endswith((":", ";")) else sentence + "."


def _goes_on(sentence: str, after: str) -> bool:
    """Whether ``after``, written right after ``sentence`` or not known to be, goes on from it:
    ``sentence`` ends with a colon or semicolon, and ``after`` opens as what one leads into (a
    list item, a quotation, a word in lower case). "Agenda:" and "Ada Osk left" do not."""
    if not sentence.endswith((":", ";")):
        return False
    m = _GOES_ON.match(after)
    return m is not None and (not m.group().isalpha() or m.group().islower())


def joined(sentences: list[str], follows: list[bool] | None = None) -> str:
    """``sentences`` as one text, each but the last ending as a sentence does (``closed``): one
    written without an end (a list item, "Call Ada Osk on Friday") gets a full stop, so that it
    runs into no next one ("Call Ada Osk on Friday Marta Lind visited ..." was quoted as
    written). One ending with a colon or semicolon keeps it only before what it leads into:
    the sentence written right after it (``follows[i]``: whether ``sentences[i + 1]`` is), or,
    where that is not known (no ``follows``), one that opens as a list item, a quotation or a
    word in lower case does (``_goes_on``); else it is cut from what it led into ("Agenda:" of
    one description, "Ada Osk left" of another, read "Agenda: Ada Osk left": now "Agenda. Ada
    Osk left")."""
    last = len(sentences) - 1
    out = []
    for i, s in enumerate(sentences):
        if i < last and not ended(s):
            keeps = s.endswith((":", ";")) and (follows[i] if follows is not None
                                                else _goes_on(s, sentences[i + 1]))
            s = s if keeps else closed(s)
        out.append(s)
    return " ".join(out)


# The words title case leaves in lower case: articles, conjunctions, prepositions ("Aftermath of
# the Marathon"). Any other word in lower case ("met", "was") says a sentence without its full
# stop. (The offline extractor's list too: it reads names in title case by it.)
TITLE_SMALL = frozenset("""
a an the and but or nor for so yet as if than vs v versus to of in on at by up
about above across after against along amid amidst among around before behind below beneath
beside besides between beyond despite down during except from inside into like near off onto
out outside over past per since through throughout till toward towards under until upon via
with within without
""".split())
_NO_TITLE_END = ".!?:;,\"'\u201d\u2019"   # a line ending so is a sentence or leads into one
_WORD_TRAILING = ".,:;!?\"')]\u201d\u2019"   # what a word of a line may carry after it


def is_title(line: str, *, common: frozenset[str] = frozenset(), small: frozenset[str] = TITLE_SMALL) -> bool:
    """Whether ``line`` reads as a title by its words alone, the one rule the offline extractor's
    headlines (``nlp._is_headline``) and ``is_heading`` share: no end (nor a colon, semicolon or
    comma, which lead into what follows: "Dear Ada Osk,"), at most 200 characters, three words
    or more opening with a letter, three in five of them capitalised, and those in lower case
    ``small`` words ("Aftermath of Lake Kelholmford Marathon 2034", "THE FIRST OF THE THREE
    SPIRITS"). "Kim Lowe met Leo Marsh in Dublin" is a sentence without its full stop; a line of
    a script without capitals is no title. ``common``: words that, capitalised, say no more
    than a sentence's opening does; a title needs more capitalised words than those (the
    offline extractor passes its common words; this module knows none)."""
    if not line or line[-1] in _NO_TITLE_END or len(line) > 200:
        return False
    words = [w for w in line.split() if w[0].isalpha()]
    if len(words) < 3:
        return False
    caps = sum(1 for w in words if w[0].isupper())
    said = sum(1 for w in words if w.lower() in common) if common else 0
    if caps < 0.6 * len(words) or caps <= said:
        return False
    # ("iPhone" is neither case; "met", "said" in lower case say the line is no title.)
    return all(w.rstrip(_WORD_TRAILING) in small for w in words if w.islower())


def is_heading(line: str, *, body_follows: bool) -> bool:
    """Whether ``line`` (a sentence of its own line: a paragraph of one line, a description's
    line) is a heading, a title and not a sentence to quote: a Markdown heading's
    (``is_heading_line``) always; a line reading as a title (``is_title``), unended, only where
    ``body_follows``: the text of its document goes on after it, the body it heads. A line in
    title case alone ("Call Ada Osk on Friday" a whole note, "Dear Ada Osk,", "See You Soon"
    closing a letter, an attendee list "Ada Osk, Marta Lind, Bram Tull" ending a paragraph) is
    what its text says, no title: left out, an answer lost the only sentence on the question.
    A line with a full stop is a sentence, in capitals too ("THEY WERE PORTLY GENTLEMEN."), as
    a title's own is indistinguishable from it ("THE END OF IT.")."""
    if is_heading_line(line):
        return True
    return body_follows and "\n" not in line and not ended(line) and is_title(line)


def headed_sentences(text: str) -> list[tuple[str, bool]]:
    """The sentences of ``text`` (``sentences_of``), each with whether it is a heading
    (``is_heading``): a Markdown heading's line, or a line of its own (a part of ``line_parts``
    of one sentence) reading as a title with a sentence not a heading after it in ``text``."""
    parts = [[s for s in (x.strip() for x in _split_part(p)) if s] for p in line_parts(text) if p.strip()]
    out: list[tuple[str, bool]] = []
    body_follows = False
    for sentences in reversed(parts):
        for s in reversed(sentences):
            heading = is_heading(s, body_follows=body_follows and len(sentences) == 1)
            out.append((s, heading))
            body_follows = body_follows or not heading
    return out[::-1]


def sentences_of(text: str) -> list[str]:
    """The sentences of ``text`` (``split_at_gaps``), stripped, the empty ones left out."""
    return [s for s in (x.strip() for x in split_at_gaps(text)) if s]
