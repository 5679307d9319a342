"""Citations in an answer: ``[E:id]`` entities, ``[L:id]`` relationships, ``[R:id]`` community
reports, ``[T:id]`` source chunks.

They are parsed leniently (``[R:C1, C2]``, ``[R:C1; E:ent-2]``), resolved against the index,
and the ones that name nothing are dropped from the text with only their own gap tidied.
``check`` does all of it for one answer and names the documents it rests on.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from streamrag.store import Store
from streamrag.terms import words

# What a citation holds after its kind: ids, no bracket, on one line, or on several where the
# answer's lines were wrapped: a line may end right after the kind's colon or a separator
# ("[R:C1,\n C2]"), never elsewhere (a blank line, prose after an unclosed "[E:x").
_IDS = r"[ \t]*(?:\r?\n)?((?:[^\]\[\n]*[,;][ \t]*\r?\n)*[^\]\[\n]*)"
_CITATION = re.compile(r"\[(E|L|R|T):" + _IDS + r"\]")
# A citation the answer's length limit cut in two: "... [R:C24" at its very end.
_OPEN_CITATION = re.compile(r"\[(?:[ELRT](?::" + _IDS + r")?)?")


def without_open_citation(text: str) -> str:
    """``text`` without a citation left open at its end (an answer cut off at its limit)."""
    return text[:open_citation_at(text)]


def open_citation_at(text: str) -> int:
    """Where a citation still open at the end of ``text`` begins, with the spaces before it
    (``len(text)`` if none): a streamed answer holds it back until it closes, or the answer
    ends cut off in it. (Found from its bracket back: a regular expression anchored at the end
    took time growing with the square of a run of blanks, for every piece of a stream.)"""
    i = text.rfind("[")
    if i < 0 or not _OPEN_CITATION.fullmatch(text, i):
        return len(text)
    return len(text[:i].rstrip())
_KINDS = {"E": "entity", "L": "relationship", "R": "report", "T": "chunk"}


def parse_citations(text: str) -> list[tuple[str, str]]:
    """(kind letter, id) of every citation in ``text``, in order, each once.

    Accepts ``[R:C1]``, ``[R:C1, C2]`` and ``[R:C1; R:C2]``.
    """
    out: list[tuple[str, str]] = []
    for m in _CITATION.finditer(text):
        for part in re.split(r"[,;]\s*", m.group(2)):
            k, ident = _cited(part, m.group(1))
            if ident and (k, ident) not in out:
                out.append((k, ident))
    return out


_DOCS_SQL = {
    "E": "SELECT DISTINCT d.path FROM entity_sources s JOIN document_chunks dc ON dc.chunk_id = s.chunk_id "
         "JOIN documents d ON d.id = dc.doc_id WHERE s.entity_id = ?",
    "L": "SELECT DISTINCT d.path FROM relationship_sources s JOIN document_chunks dc ON dc.chunk_id = s.chunk_id "
         "JOIN documents d ON d.id = dc.doc_id WHERE s.relationship_id = ?",
    "R": "SELECT DISTINCT d.path FROM community_members m JOIN entity_sources s ON s.entity_id = m.entity_id "
         "JOIN document_chunks dc ON dc.chunk_id = s.chunk_id JOIN documents d ON d.id = dc.doc_id "
         "WHERE m.community_id = ?",
    "T": "SELECT DISTINCT d.path FROM document_chunks dc JOIN documents d ON d.id = dc.doc_id "
         "WHERE dc.chunk_id = ?",
}


def resolve(store: Store, kind: str, ident: str) -> dict | None:
    """The citation record of ``[kind:ident]``, or None if the index holds no such item."""
    tag = f"[{kind}:{ident}]"
    base = {"tag": tag, "kind": _KINDS[kind], "id": ident, "resolved": True}
    if kind == "E":
        name = store.scalar("SELECT name FROM entities WHERE id = ?", (ident,))
        label = None if name is None else {"name": name}
    elif kind == "L":
        row = store.query("SELECT a.name AS s, b.name AS t FROM relationships r JOIN entities a ON a.id = r.source "
                          "JOIN entities b ON b.id = r.target WHERE r.id = ?", (ident,))
        label = {"name": f"{row[0]['s']} -- {row[0]['t']}"} if row else None
    elif kind == "R":
        title = store.scalar("SELECT r.title FROM communities c JOIN reports r ON r.key = c.report_key "
                             "WHERE c.id = ?", (ident,))
        label = None if title is None else {"title": title}
    else:
        path = store.scalar("SELECT d.path FROM document_chunks dc JOIN documents d ON d.id = dc.doc_id "
                            "WHERE dc.chunk_id = ? ORDER BY d.path LIMIT 1", (ident,))
        label = None if path is None else {"path": path}
    if label is None:
        return None
    docs = [r[0] for r in store.conn.execute(_DOCS_SQL[kind], (ident,))]
    return {**base, **label, "documents": sorted(docs)}


def _cited(part: str, kind: str) -> tuple[str, str]:
    """(kind letter, id) of one part of a citation bracket whose own kind is ``kind``."""
    part = part.strip().strip("'\"` ")
    own = re.match(r"^(E|L|R|T):\s*", part)
    return (own.group(1), part[own.end():].strip()) if own else (kind, part)


def drop_citations(text: str, bad: set[tuple[str, str]],
                   rename: dict[tuple[str, str], tuple[str, str]] | None = None) -> str:
    """``text`` without the citations in ``bad`` ((kind letter, id) pairs), and with those in
    ``rename`` written as named there.

    Only citation brackets naming something in ``bad`` or ``rename`` are rewritten; every other
    character is kept as it was. A bracket keeps its other parts, each under its own kind (``[E:x, L:y]``
    without ``E:x`` is ``[L:y]``). Where a whole bracket goes, the space it leaves is tidied:
    no space before the punctuation that followed it, and one space, not two, between words.
    """
    out = ""
    pos = 0
    rename = rename or {}
    for m in _CITATION.finditer(text):
        parts = [_cited(p, m.group(1)) for p in re.split(r"[,;]\s*", m.group(2))]
        parts = [(k, i) for k, i in parts if i]
        if not any(p in bad or p in rename for p in parts):
            continue  # left exactly as written
        kept = list(dict.fromkeys(rename.get(p, p) for p in parts if p not in bad))
        out += text[pos:m.start()]
        pos = m.end()
        if kept:
            if len({k for k, _ in kept}) == 1:
                out += f"[{kept[0][0]}:{', '.join(i for _, i in kept)}]"
            else:
                out += f"[{'; '.join(f'{k}:{i}' for k, i in kept)}]"
            continue
        # The whole bracket goes: tidy only the gap it leaves.
        trimmed = out.rstrip(" \t")
        gap = len(out) > len(trimmed)
        line_start = not trimmed or trimmed.endswith("\n")
        after = text[pos:]
        follow = len(after) - len(after.lstrip(" \t"))
        if follow and (gap or line_start):
            pos += follow  # "a [X] b" -> "a b"; "    [X] b" keeps its indentation: "    b"
        elif gap and not line_start and (not after or after[0] in ".,;:!?)\r\n"):
            out = trimmed  # "a [X]." -> "a."
    return out + text[pos:]


class Given:
    """The items an answer was given (``context_tags``), found as a model may cite them: in
    another case (``[E:ENT-3B..]``), a report by its number (``[R:8]`` for ``C8``), or with a
    full stop caught in the bracket (``[E:ent-3b.]``)."""

    def __init__(self, context_tags: list[str]) -> None:
        self.items = {(k, i.lower()): (k, i) for k, i in parse_citations(" ".join(context_tags))}

    def checked(self, text: str) -> str:
        """``text`` without the citations of items not given, and those it cites in another
        form written as the context wrote them (``[R:8]`` as ``[R:C8]``)."""
        cited = parse_citations(text)
        found = {c: self.find(*c) for c in cited}
        return drop_citations(text, {c for c, f in found.items() if f is None},
                              {c: f for c, f in found.items() if f is not None and f != c})

    def find(self, kind: str, ident: str) -> tuple[str, str] | None:
        """The (kind, id) of the given item ``[kind:ident]`` names, or None."""
        key = ident.rstrip(".,;:").lower()
        found = self.items.get((kind, key))
        if found is None and kind == "R" and key.isdigit():
            found = self.items.get((kind, f"c{key}"))
        return found


def check(store: Store, text: str, context_tags: list[str],
          named: Sequence[str] = ()) -> tuple[str, list[dict], list[str], list[str]]:
    """An answer's citations resolved against what it was given.

    A citation counts when it names an item of ``context_tags`` (the context the answer was
    written from) that the index holds. Others (an id the model made up, or one a document told
    it to cite: a real item it was never shown) are dropped from the text and listed apart.
    Returns that text, the resolved citations, the dropped ones, and the documents the answer
    rests on: those of its citations, or, when it cites nothing, those of ``context_tags``, in
    the order of ``relevance``: first those that give the entities the question names
    (``named``, ids), the most cited next, then those giving more of the entities its reports
    are about; the rest in the order first cited."""
    given = Given(context_tags)
    cited, unresolved, seen = [], [], set()
    bad, rename = set(), {}
    for kind, ident in parse_citations(text):
        item = given.find(kind, ident)
        record = resolve(store, *item) if item is not None and item not in seen else None
        if item is None or (record is None and item not in seen):
            unresolved.append(f"[{kind}:{ident}]")
            bad.add((kind, ident))
            continue
        if record is not None:
            cited.append(record)
            seen.add(item)
        if item != (kind, ident):
            rename[(kind, ident)] = item   # (written as the context wrote it)
    text = drop_citations(text, bad, rename)
    counts: Counter[str] = Counter()
    for c in cited:
        counts.update(c["documents"])
    if not cited:
        for kind, ident in parse_citations(" ".join(context_tags)):
            counts.update(sorted(r[0] for r in store.conn.execute(_DOCS_SQL[kind], (ident,))))
    documents = relevance(store, counts, named, [c["id"] for c in cited if c["kind"] == "report"])
    return text, [{k: v for k, v in c.items() if k != "documents"} for c in cited], unresolved, documents


def relevance(store: Store, counts: Counter[str], named: Sequence[str], reports: Sequence[str]) -> list[str]:
    """The documents of ``counts`` (each with how many citations rest on it, in the order first
    cited) in the order an answer lists them: first those whose text gives more of the entities
    ``named`` (ids: those the question names), then the most cited, then those giving more
    members of the communities ``reports`` (ids). A report rests on every document of its
    members, all cited once: 'Who is Pavel Ashberg?' answered from the report on him and a
    union listed first two documents of the union that never name him, by path."""
    speaks = _documents_giving(store, "SELECT ? AS entity_id", named)
    members = _documents_giving(store, "SELECT entity_id FROM community_members WHERE community_id = ?", reports)
    return sorted(counts, key=lambda p: (-speaks[p], -counts[p], -members[p]))   # (stable: first seen)


def _documents_giving(store: Store, entities_sql: str, args: Sequence[str]) -> Counter[str]:
    """How many of the entities ``entities_sql`` selects (run once for each of ``args``) each
    document's chunks give, by path (counted by SQLite: a root report's members have tens of
    thousands of sources, which counted here doubled an offline global answer's time)."""
    out: Counter[str] = Counter()
    for arg in dict.fromkeys(args):
        out.update(dict(store.conn.execute(
            f"SELECT d.path, count(DISTINCT s.entity_id) FROM ({entities_sql}) e "
            "JOIN entity_sources s ON s.entity_id = e.entity_id JOIN document_chunks dc ON dc.chunk_id = s.chunk_id "
            "JOIN documents d ON d.id = dc.doc_id GROUP BY d.path", (arg,))))
    return out


class GivenOnly:
    """A streamed answer passed on to ``out`` as ``check`` will have it: without the citations
    of items it was not given (not in ``context_tags``), variants written as the context wrote
    them. A citation a document told the model to write was shown on the terminal, though the
    footer said it was dropped. What may still change is held back: an open citation, and the
    spaces and citations at the end (whether one goes takes the space before it, and the
    character after it decides how). What is settled is passed on and let go, all but its last
    character (the context of what follows), so each piece costs what it holds. ``restarted``:
    a piece beginning with it starts the answer over (``llm.RESTARTED``); ``flush`` passes on
    the rest when the answer ends."""

    def __init__(self, context_tags: list[str], out, restarted: str = "") -> None:
        self.given = Given(context_tags)
        self.out = out
        self.restarted = restarted
        self.text = ""   # the answer as the model wrote it, from the last settled character
        self.sent = 0    # characters of its checked text passed on

    def feed(self, piece: str) -> None:
        if self.restarted and piece.startswith(self.restarted):
            self.flush()
            self.out(self.restarted)
            self.text, self.sent, piece = "", 0, piece[len(self.restarted):]
        self.text += piece
        settled = self.text[:_settled_end(self.text[:open_citation_at(self.text)])]
        self._send(settled)
        if len(settled) > 1:   # (its last character stays, as it was passed on)
            self.text, self.sent = self.text[len(settled) - 1:], 1

    def flush(self) -> None:
        self._send(self.text)

    def _send(self, text: str) -> None:
        checked = self.given.checked(text)
        if len(checked) > self.sent:
            self.out(checked[self.sent:])
            self.sent = len(checked)


def _settled_end(text: str) -> int:
    """Where the spaces and closed citations at the end of ``text`` begin."""
    end = len(text)
    while True:
        end = len(text[:end].rstrip())
        start = text.rfind("[", 0, end)
        if not (end and text[end - 1] == "]" and start >= 0 and _CITATION.fullmatch(text, start, end)):
            return end
        end = start


def quoted_first(store: Store, quotes: list[tuple[str, str]], documents: list[str]) -> list[str]:
    """``documents`` with those that hold the sentences an extractive answer quotes
    (``extractive.quotes``: each with its passage's tag) first, in the answer's order. A quote
    of source text is its chunk's document's. A quoted report sentence rests on every document
    of the community's members (hundreds, for a large one), but only a few say it: they are
    found by a phrase of the quote's words in the full-text index. A local context line starts
    with a label no document has ("Name (type): ", "A -- B: "), and an element's description may
    join sentences from several documents: when the whole quote is found nowhere, each sentence
    after the label is looked for on its own."""
    allowed, first = set(documents), []
    for quote, tag in quotes:
        cited = parse_citations(tag)
        if cited and cited[0][0] == "T":
            first += [p for (p,) in store.conn.execute(_DOCS_SQL["T"] + " ORDER BY d.path", (cited[0][1],))
                      if p in allowed and p not in first]
            continue
        whole, sentences = _phrases(quote)
        found = _holding(store, whole)
        for sentence in [] if found else sentences:
            # (its first words only when the whole is found nowhere: those of a stock phrase,
            # '"We are confident this is the right step for everyone involved," said Petra
            # Harent.', are in every document, and the one that said it came 13th)
            found += _holding(store, sentence) or (_holding(store, sentence[:12]) if len(sentence) > 12 else [])
        first += [p for p in dict.fromkeys(found) if p in allowed and p not in first]
    return first + [d for d in documents if d not in first]


def _holding(store: Store, phrase: list[str]) -> list[str]:
    """The documents whose text has ``phrase`` (words), by path; none for a phrase under 4 words."""
    if len(phrase) < 4:
        return []
    rows = store.conn.execute(
        "SELECT DISTINCT d.path FROM chunks_fts JOIN document_chunks dc ON dc.chunk_id = chunks_fts.id "
        "JOIN documents d ON d.id = dc.doc_id WHERE chunks_fts MATCH ? ORDER BY d.path LIMIT 50",
        ('"' + " ".join(phrase) + '"',))   # words are letters and digits: no quote
    return [p for (p,) in rows]


_LABEL = re.compile(r"^[^:\n]{1,200}?(?: \([^)\n]{1,40}\)| -- [^:\n]{1,200}?): ")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _phrases(quote: str) -> tuple[list[str], list[list[str]]]:
    """The phrases ``quoted_first`` looks for: the whole quote, and each sentence of the quote
    without a context line's label (their first 30 words)."""
    body = _LABEL.sub("", quote, count=1)
    return words(quote)[:30], [words(s)[:30] for s in _SENTENCE.split(body)]
