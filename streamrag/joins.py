"""A person's short name joined to the full name it stands for, across the whole index. Pure.

The offline extractor resolves "Scrooge" to "Ebenezer Scrooge" within one chunk only: its result
is cached by chunk, so it may not look beyond it. Across chunks the join is made at merge time
(``graph_state``), from the set of every live name, so that the index after any sequence of
changes is still the index of the folder as it is: the mentions of a short name are merged
under the full name's id while the join holds, under their own once it no longer does.

The rule is conservative. A one-word person name joins the one full person name (two or more
capitalised words after any title: "Ebenezer Scrooge") ending with it, or starting with it (a
first name: "Ebenezer"), if a document says both. Two such names ("Bob Cratchit", "Belinda
Cratchit"), or none, leave it as written; so does one no document says beside it: "Joe", the
dealer in rags and bones of A Christmas Carol's fourth stave, is not "Joe Miller", the jester
its fifth names once. (A document says both in two chunks or in one: there the offline
extractor reads the short name as the full one, which leaves the short name no mention of that
chunk; its extraction keeps the short names it so read, ``Extraction.called``, data, not the
"(Also called Margaret.)" closing the full name's description, which a text's own words may
write too. How often each is said is no sign of which full name a short one means: "Scrooge"
outnumbers "Ebenezer Scrooge", whom it means, 38 chunks to 2.) A title and one word ("Uncle
Scrooge", "Mrs. Cratchit", "Old Marley") is no full name: it neither takes a join nor stops
one. Organisations, places and events never join, nor does a word the extractor reads as a
title or an institution's head ("Spirit", "King"), which names a character by its role, not a
person by name. A short name joins only where it is read as a
person: by more chunks than read it as anything else (``read_as_person``), and then its mentions
read so (or untyped) join and those read otherwise stay its own (``JOINING``, ``merge.joined``):
two notes' "Met with Ada" go under "Ada Lovelace", "the parser in Ada" (a place to the
extractor) stays "Ada". (A join took all of a short name's mentions, the language with her, so
one mention read as a place kept her apart vault-wide.) One of each is no sign, and stays apart;
nor are its documents that read it as a place any sign that a document says both. (Every join of
A Christmas Carol and of the synthetic corpus is of names typed a person in every mention; the
synthetic corpus's one short name read both ways, "Pellric", a place in nine chunks and a person
in one, has no full name.)

A document's title says the full name it is as its text would: its file's name ("People/Ada
Lovelace.md", "Lovelace, Ada.md", "Dr. Ada Lovelace.md": ``file_title``), its first line's
Markdown heading ("# Ada Lovelace", not "    # Ada Lovelace", which is code: ``heading_title``)
or its front matter's title ("title: Ada Lovelace", ``own_title``). A vault of one note per
person names her so and calls her "Ada" in the note's text; "Ada" then joins "Ada Lovelace"
wherever another note names her in full. Her note may say "Ada" only where it opens a sentence
("Ada was ..."), which the extractor reads as no name: it keeps such words with the chunk's
extraction (``Extraction.openers``), and they count against the document's title alone, never
as a mention. A title names no entity of its own (a full name only titles say joins nothing:
"Meeting Notes.md" makes no person), and A Christmas Carol's staves ("stave4_last_spirit.txt",
"STAVE FOUR") name no one, so "Joe" stays apart. A file renamed, its front matter's title
edited, or a copy of its text come or gone, moves what its document's title says
(``graph_state.retitled``, ``graph_state.titled_anew``).

Only offline indexes join (``graph_state``): a model names its entities as it reads the text,
and may well give "Scrooge" where the text means another Scrooge; no measure says it is as safe.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Mapping

from streamrag import ids, nlp
from streamrag.records import Entity
from streamrag.terms import words

PERSON = "person"
# The types a joined short name's mention is merged under the full name in (``merge.joined``): a
# person's, or none (a relationship's end alone); a mention read as another type ("the parser
# in Ada", a place) stays the short name's own.
JOINING = frozenset({PERSON, ""})
# The rule's version, kept with the joins (meta ``name_joins_rule``, bookkeeping: a rule that makes
# the same joins publishes no version): an index whose joins another rule made looks at every name
# once (``GraphState.rejoin_all``), as a fresh index would join them.
# 2: a short name joins only a full name a document says beside it (d43f1e3).
# 3: a document's file name or first-line heading says the full name it is.
# 4: ... and a document so titled says the short name when it opens a sentence with it alone
#    ("Ada Lovelace.md": "Ada was ...", which the extractor reads as no name).
# 5: a title reads "Lovelace, Ada" and "Dr. Ada Lovelace" as "Ada Lovelace"; a front matter's
#    title is a document's title too.
# 6: a short name any of whose mentions is typed other than a person joins nothing.
# 7: a short name joins when more chunks read it as a person than as anything else
#    (``read_as_person``); only its mentions read as a person (or untyped) join, and only their
#    documents count (``JOINING``).
# 8: a chunk says a short name that its extractor resolved there to a full name it fits
#    ("Margaret Hollis ... told Margaret"), for the document holding it.
# 9: ... read from ``Extraction.called``, not from a description ending "(Also called X.)", which
#    a document's own words may write: extracted again, such a chunk yields the records it did
#    and is not merged again, so the joins its words made are looked at under the new rule.
# 10: a title that is its document's first line ended at a line separator (U+2028, a form feed)
#    or decomposed (NFD; its text is composed) is that line, no name the document says
#    (``own_title``, loader VERSION 26): a row so titled is read again to the same text and a
#    title saying the same name, so its title moves no join (``graph_state.titled_anew``). A
#    first line's heading ends there too ("# Ada Lovelace\u2028born 1815", ``heading_title``).
# 11: ... at no U+0085, which a text keeps only as Latin-1's byte 0x85 (``LINE_END``, loader VERSION
#    30): "Ada\x85Lovelace wrote." was titled "Ada" and its first line "Ada".
# 12: ... and a row's title cell at no U+0085 either (loader VERSION 31, ``loader._one_line_title``):
#    a row titled "Ada\x85Lovelace" by its text's first line was titled "Ada Lovelace", read as a
#    name the row says besides its text; its title is that line now, and an index's joins are
#    looked at again under it (``titled_anew`` reads no change: both say the name "ada lovelace").
RULE = "12"
# Where a title's line ends in a document's text besides "\n": where ``str.splitlines`` ends one
# (a line separator, a form feed: an index's older texts), but for U+0085, which a text keeps only
# as the byte 0x85 of one read as Latin-1 or ISO-8859-7, no line end (``loader._newlines``, whose
# ``_title`` ends its lines here too).
LINE_END = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\u2028\u2029]")
# Words before a name that are no part of the person's own name (the extractor keeps them in it).
_TITLES = nlp.KEEP_TITLES | nlp.ADJECTIVES
# Words that are a role, not a name, alone.
_ROLES = nlp.KEEP_TITLES | nlp.OF_HEADS | nlp.KIN
# A row of a .jsonl or .csv file is a document of its own ("people.csv#3"): its file's name is
# no title of the row.
_ROW = re.compile(r"\.(?:jsonl|csv)#\d+$", re.IGNORECASE)
# A Markdown heading ("# Ada Lovelace", "## Ada Lovelace ##").
_HEADING = re.compile(r"#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*")


def full_name_ends(name: str) -> tuple[str, str] | None:
    """The first and last words (as ``ids.normalize_name`` keys them) of a person's full name:
    two or more capitalised words (name particles between them) after any title; None for a
    name that is none ("Uncle Scrooge", "Ghost of Jacob Marley")."""
    ends = _written_ends(name)
    return None if ends is None else (ids.normalize_name(ends[0]), ids.normalize_name(ends[1]))


def _written_ends(name: str) -> tuple[str, str] | None:
    """``full_name_ends``, as the name writes them."""
    words = name.split()
    while words and words[0].rstrip(".").casefold() in _TITLES:
        words = words[1:]
    if len(words) < 2 or not all(w[:1].isupper() or w in nlp.PARTICLES for w in words):
        return None
    return words[0], words[-1]


def file_title(path: str) -> str | None:
    """The full name a file's name gives the document it holds (``name_title`` of its stem:
    "People/Ada Lovelace.md", "Lovelace, Ada.md": "ada lovelace"); None for a name that is no
    full name ("notes.md", "doc_00001.txt", "ada lovelace.md") and for a row of a .jsonl or .csv
    file."""
    if _ROW.search(path):
        return None
    # (the stem as ``PurePosixPath.stem`` has it, without parsing the path: a folder of 10,000
    # notes renamed has each note's title read before and after, ``graph_state.retitled``)
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return name_title(name[:dot] if 0 < dot < len(name) - 1 else name)


@functools.lru_cache(maxsize=1 << 16)
def name_title(name: str) -> str | None:
    """The full name a title written ``name`` says, keyed as ``ids.normalize_name`` keys names:
    "Ada Lovelace"; a catalogue's surname first, "Lovelace, Ada"; after an honorific the
    extractor drops from names too, "Dr. Ada Lovelace" (a title it keeps stays: "Mrs. Ada
    Lovelace" is that name); None for a name that is no full name. Remembered: the same stems
    are read again as their folders move."""
    surname, comma, given = name.partition(",")
    if comma and given.strip() and "," not in given:
        name = f"{given} {surname}"
    words = name.split()
    while len(words) > 1 and words[0].rstrip(".").casefold() in nlp.HONORIFICS:
        words = words[1:]
    name = " ".join(words)
    return ids.normalize_name(name) if _written_ends(name) is not None else None


def own_title(title: str, text: str) -> str | None:
    """The full name a document's own title says ("title: Ada Lovelace" in its front matter;
    the title it is shown with, ``Document.title``), keyed as ``file_title`` keys it
    (``name_title``); None when that title is only its first line (``text``: its opening), which
    the extractor reads as text, or ``heading_title`` reads as a heading."""
    # (a line ends where the loader's title ends one, ``LINE_END``: it titles "Ada\u2028Lovelace" "Ada")
    lines = (part.strip().lstrip("#").strip() for line in text.split("\n") for part in LINE_END.split(line))
    first = next((line for line in lines if any(ch.isalnum() for ch in line)), "")
    return None if title.strip() == first else name_title(title)


def heading_title(text: str) -> str | None:
    """The full name a document's first line gives it as a Markdown heading ("# Ada Lovelace"),
    keyed as ``file_title`` keys it (``name_title``); None for any other first line. (A first
    line without "#" is text, whose names the extractor reads; a heading's names it reads only
    where the text under it says them too.) A line indented four columns or more is code, no
    heading ("    # Ada Lovelace", Markdown's indented code block): a chunk has lost its first
    line's indent, so a document whose text opens so is known by ``code_heading``."""
    line = _first_line(text)
    # (a line ends where the loader's title and ``own_title`` end one, ``LINE_END``: "# Ada
    # Lovelace\u2028born 1815" is headed "Ada Lovelace", as with "\n" in its place)
    line = next((part for part in LINE_END.split(line) if part.strip()), line)
    if _indent(line) >= 4:
        return None
    m = _HEADING.fullmatch(line.strip())
    return name_title(m.group(1)) if m is not None else None


def code_heading(text: str) -> bool:
    """Whether a document's ``text`` opens with a line of code that reads as a heading once its
    indent is gone, as its first chunk has it ("    # Ada Lovelace": ``heading_title``)."""
    line = _first_line(text)
    return _indent(line) >= 4 and heading_title(line.strip()) is not None


def _first_line(text: str) -> str:
    """The first line of ``text`` that is not blank, as written (read a line at a time: a
    document's text may be megabytes)."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        if text[start:end].strip():
            return text[start:end]
        start = end + 1
    return text[start:]


def _indent(line: str) -> int:
    """The columns a line is indented by, a tab to the next multiple of four (CommonMark's)."""
    stripped = line.lstrip(" \t")
    return len(line[:len(line) - len(stripped)].expandtabs(4))


def short_key(name: str) -> str | None:
    """The key of a one-word name that may join a full name ("Scrooge" -> "scrooge"); None for
    any other (several words, a role: "Spirit")."""
    key = ids.normalize_name(name)
    if not key or " " in key or key in _ROLES or not name.strip()[:1].isupper():
        return None
    return key


def touched(names: Iterable[str]) -> set[str]:
    """The short names (keys) whose join may move when these names come or go: each one-word
    name, and the first and last words of each full name."""
    out: set[str] = set()
    for name in names:
        if (key := short_key(name)) is not None:
            out.add(key)
        elif (ends := full_name_ends(name)) is not None:
            out.update(ends)
    return out


def spellings(names: Iterable[str]) -> set[str]:
    """What the full-text table is searched with for the full names holding a word ``touched``
    keys in ``names``: each such word as written, and each key in each way the table may write
    it. The key is no word of the table's: it is case-folded ("Strauß", "strauss") where the
    table's words are lower-cased ("strauß"), and has lost its inner quotes where the table's words
    break ("D'Arcy-O'Neill", "darcy-oneill"; the table "d arcy o neill"). A key says neither
    whether it lost any nor where ("darcy" is "Darcy" as well as "D'Arcy"), so for every key,
    quotes lost or not, the first word of each way the table may write it (a word as the table
    splits them: "darcy") is searched, and so is every pair of pieces that word can begin with
    ("d a", "d ar", ... "darc y"; n(n-1)/2 pairs for a word of n letters, 21 for "scrooge"):
    where the key lost one or more quotes, the table holds that word in pieces, begun by one of
    these pairs ("d arcy"), and a search for the key cut once ("d arcy oneill") missed a name
    that lost two. (More full names are found than hold the key: ``_rejoin`` keeps those whose
    ends are keyed as it is.)"""
    out: set[str] = set()
    for name in names:
        if (key := short_key(name)) is not None:
            written: tuple[str, ...] = (name.strip(),)
            keys: tuple[str, ...] = (key,)
        elif (ends := _written_ends(name)) is not None:
            written, keys = ends, tuple(ids.normalize_name(w) for w in ends)
        else:
            continue
        out.update(written)
        for word in (ws[0] for key in keys for form in _table_forms(key) if (ws := words(form))):
            out.add(word)
            out.update(f"{word[:i]} {word[i:j]}" for i in range(1, len(word)) for j in range(i + 1, len(word) + 1))
    return out


def _table_forms(key: str) -> set[str]:
    """The ways the full-text table may write a word keyed ``key``: case folding made an "ß"
    "ss" and a final "ς" "σ", which its lower-casing keeps ("Strauss" and "Strauß" are one
    key, "strauss")."""
    forms = {key, key[:-1] + "ς"} if key.endswith("σ") else {key}
    for _ in range(key.count("ss")):
        forms |= {f[:i] + "ß" + f[i + 2:] for f in forms for i in range(len(f) - 1) if f[i:i + 2] == "ss"}
    return forms


def joins(names: Iterable[Entity], documents: Mapping[str, Collection[str]],
          titles: Mapping[str, Collection[str]] | None = None,
          opened: Mapping[str, Collection[str]] | None = None,
          types: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, str]:
    """Short name's entity id -> the full name's entity id it joins, for ``names``: one entity
    per name as written (its own mentions merged: its shown name and type); ``documents``: each
    name's entity id -> the documents saying it (a short name's: as a person, or untyped);
    ``titles``: a document -> the full names its title says (``file_title``, ``heading_title``),
    of the documents saying a short name or opening a sentence with it; ``opened``: a short
    name's entity id -> the documents opening a sentence with it alone ("Ada was ...",
    ``Extraction.openers``), which count against titles only; ``types``: a short name's entity
    id -> the chunks reading its mentions as each type (``read_as_person``; else its entity's
    type alone says)."""
    shorts: dict[str, str] = {}
    fulls: dict[str, set[str]] = {}
    keyed: dict[str, str] = {}
    types = types or {}
    for e in names:
        if (key := short_key(e.name)) is not None:
            if read_as_person(types[e.id]) if e.id in types else e.type == PERSON:
                shorts[key] = e.id
        elif e.type == PERSON and (ends := full_name_ends(e.name)) is not None:
            keyed[e.id] = ids.normalize_name(e.name)
            for word in set(ends):
                fulls.setdefault(word, set()).add(e.id)
    titles, opened = titles or {}, opened or {}
    out: dict[str, str] = {}
    for key, eid in sorted(shorts.items()):
        if len(fit := fulls.get(key, ())) != 1:
            continue
        said, full = set(documents.get(eid, ())), next(iter(fit))
        if not said.isdisjoint(documents.get(full, ())) or \
                any(keyed[full] in titles.get(d, ()) for d in said.union(opened.get(eid, ()))):
            out[eid] = full
    return out


def read_as_person(chunks: Mapping[str, int]) -> bool:
    """Whether a short name whose mentions the chunks read as each type (type -> chunks: an
    untyped mention, a relationship's end alone, is no reading) is a person's: more of its
    chunks read it so than read it as anything else. One chunk's "the parser in Ada" (a place)
    beside two chunks' "Met with Ada" leaves "Ada" a person's, joined where it joins; the place
    stays apart, its mentions under the short name's own entity (``JOINING``). One chunk's
    person beside nine chunks' place ("Pellric") is the extractor's misreading."""
    person = chunks.get(PERSON, 0)
    return person > sum(n for t, n in chunks.items() if t not in (PERSON, ""))
