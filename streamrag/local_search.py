"""Local and basic search: find what a question is about, and build one budgeted context.

Local search starts from entities: the nearest by embedding when ``llm.embedding_model`` is set
and vectors exist, otherwise SQLite FTS5 BM25 over entity names (weighted up) and descriptions.
Personalized PageRank over the relationship graph, seeded with those entities, then adds the
entities most connected to them (``query.local_pagerank``). The context has three sections,
each held to its share of the budget the caller gives (``local_max_tokens`` less the answer
prompt and the question, when a model answers):

* ``local_text_share`` - the source chunks the entities come from: those of the entities the
  question names first, then those having the most of its other words (any word of the same
  stem; BM25 on ties), then those mentioning the most selected entities (their texts
  read as the section takes them);
* ``local_community_share`` - the reports (title and summary) of the entities' communities,
  those holding the most selected entities first, deeper (more specific) ones on ties;
* the rest - the entities, the relationships touching them (both ends selected first) and
  the claims about them or naming them as their object.

Every context line starts with the tag an answer cites it by: ``[E:id]``, ``[L:id]``,
``[R:community id]`` or ``[T:chunk id]``; a claim line names its subject and object and carries
the ``[E:id]`` of the selected one of them: its subject's, or, of a claim about an outside entity
naming a selected one as its object, its object's. (Tagged with an outsider, an answer citing it
cited an entity the context does not show, and one citing nothing was said to rest on every
document of that outsider.)

Basic search is plain retrieval: the top ``basic_top_k`` chunks by BM25 (or embedding).

User text never reaches FTS5 syntax: a MATCH expression is built from the question's words,
each one quoted as an FTS5 string.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence

import msgspec

from streamrag import index_rows
from streamrag.reports import claim_period
from streamrag.store import Store
from streamrag.terms import words
from streamrag.tokens import count_tokens, fewest_tokens, truncate

log = logging.getLogger(__name__)

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each even ever every few for
from further had has have having he her here hers herself him himself his how i if in into is it
its itself just me might more most much must my myself no nor not now of off on once only or other
ought our ours ourselves out over own same shall she should so some such than that the their
theirs them themselves then there these they this those through to too under until up upon us
very was we were what when where which while who whom whose why will with within without would
you your yours yourself yourselves tell know give show explain describe list anything something
thing things does did done say said says happen happened happens
""".split())

# A question's words are ORed in one FTS5 query: a long one is cut to this many. Which stay
# matters: a name at the end of a long question ("... for our history society lecture. Who is
# Dmitri Quinquay?") was the 40th word, and its search found other people.
MAX_TERMS = 32


def query_terms(text: str, *, extra_stop: frozenset[str] = frozenset()) -> list[str]:
    """The distinct content words of a question, in order; of a long one the ``MAX_TERMS`` most
    telling: words written capitalised (names) first, then the last ones (a question ends on
    what it asks, after its background)."""
    out: list[str] = []
    for w in words(text):
        if len(w) < 2 or w in STOPWORDS or w in extra_stop or w in out:
            continue
        out.append(w)
    if len(out) <= MAX_TERMS:
        return out
    named = {w for tok in re.findall(r"\w+", text) if tok[:1].isupper() for w in words(tok)}
    last = {w: i for i, w in enumerate(words(text))}
    kept = set(sorted(out, key=lambda w: (w not in named, -last[w]))[:MAX_TERMS])
    return [w for w in out if w in kept]


def fts_match(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: any of ``terms``, each quoted, so no input can break it."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms if t)


def name_words(name: str) -> list[str]:
    """The words of an entity's name a question has when it names it (``question.named_entities``):
    its stopwords left out, so "Who is Scrooge?" names "Up Scrooge" as much as "Scrooge"."""
    return [w for w in words(name) if w not in STOPWORDS]


def is_named(asked: Sequence[str], name: str) -> bool:
    """Whether the question's words ``asked`` name the entity ``name``: they have all its
    ``name_words``, and a name repeating a word ("Humbert Humbert"; "Scrooge Scrooge", a slip of
    an extraction) written whole, as a run of words. "Who is Scrooge?" does not name "Scrooge
    Scrooge", and "Was Fred fond of Scrooge, as Scrooge was of him?" names "Scrooge" only."""
    own = name_words(name)
    if not own or not set(own) <= set(asked):
        return False
    return len(set(own)) == len(own) or bool(runs(asked, words(name)))


def anchors(question: str, named: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (id, name) of ``named`` (entities whose names the question has) that it asks about:
    the names it writes, not the shorter names inside them ("Norouxford" in "Norouxford Energy
    Conference 2033"), unless it also writes the shorter one on its own ("Is Kharos home to
    the Kharos Financial Conduct Board?"). Longer by the words that name it (``name_words``),
    or, of names those words name alike, by its own words where the question writes the longer
    one (``writes_more_of``): "Bram" is inside "Bram Tell" for "Who is Bram Tell?" ("tell" is a
    stopword), and "Scrooge" not inside "Up Scrooge" for "Who is Scrooge?", which it was left
    out for. Words are counted: "Humbert" is inside "Humbert Humbert"."""
    asked = words(question)
    names = [words(name) for _e, name in named]
    held = [Counter(name_words(name)) for _e, name in named]
    out = []
    for i, (eid, name) in enumerate(named):
        longer = [other for other, own in zip(names, held, strict=True) if held[i] < own or (
            held[i] == own and Counter(names[i]) < Counter(other) and writes_more_of(asked, other, names[i]))]
        if not longer or _written_apart(asked, names[i], longer):
            out.append((eid, name))
    return out


def writes_more_of(asked: Sequence[str], name: Sequence[str], other: Sequence[str]) -> bool:
    """Whether the question's words ``asked`` write the words ``name`` as a name, rather than
    ``other`` (of a name the same words name, ``name_words``): as a run of words, and ``other``
    not, or in fewer words. "Who is Bram Tell?" writes "Bram Tell", not "Bram" ("tell" is a
    stopword, so both are named by "bram"); "Who is Scrooge?" writes "Scrooge", not "Up Scrooge".
    (``anchors`` and ``question.choose_mode`` both decide by it which of such names is asked.)"""
    if not runs(asked, name):
        return False
    return not runs(asked, other) or len(name) > len(other)


def _written_apart(asked: list[str], name: list[str], longer: list[list[str]]) -> bool:
    """Whether the words ``asked`` have ``name`` outside each of the ``longer`` names holding
    it; never when one of those is not written as a run of words (where it is, is not known)."""
    held: list[tuple[int, int]] = []
    for other in longer:
        found = runs(asked, other)
        if not found:
            return False
        held += found
    return any(not any(x <= i and j <= y for x, y in held) for i, j in runs(asked, name))


def runs(tokens: Sequence[str], name: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) of every run of ``tokens`` that is the words ``name``. (Found from where its
    first word is, by ``index``: an extractive answer looks for every name sharing a word with
    the one asked about in each sentence, 65,000 looks for "Lake Yorrell Harbor Port Authority".)"""
    n = len(name)
    if not n:
        return []
    name = list(name)
    first, last = name[0], len(tokens) - n
    out = []
    i = -1
    while True:
        try:
            i = tokens.index(first, i + 1)
        except ValueError:
            return out
        if i > last:
            return out
        if n == 1 or list(tokens[i:i + n]) == name:
            out.append((i, i + n))


# --------------------------------------------------------------------------------------------
# Finding entities and chunks (SQL and model edges)
# --------------------------------------------------------------------------------------------
def fts_entities(store: Store, question: str, k: int, *,
                 extra_stop: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
    """(entity id, score) of the best BM25 matches over names (weight 4) and descriptions."""
    terms = query_terms(question, extra_stop=extra_stop)
    if not terms or k <= 0:
        return []
    rows = store.conn.execute(
        "SELECT id, bm25(entities_fts, 0.0, 4.0, 1.0) FROM entities_fts WHERE entities_fts MATCH ? "
        "ORDER BY 2, id LIMIT ?", (fts_match(terms), k)).fetchall()
    return [(r[0], -float(r[1])) for r in rows]


def fts_chunks(store: Store, question: str, k: int, *,
               extra_stop: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
    """(chunk id, score) of the best BM25 matches over chunk texts."""
    terms = query_terms(question, extra_stop=extra_stop)
    if not terms or k <= 0:
        return []
    rows = store.conn.execute(
        "SELECT id, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY 2, id LIMIT ?",
        (fts_match(terms), k)).fetchall()
    return [(r[0], -float(r[1])) for r in rows]


def nearest(store: Store, kind: str, model: str, vector: list[float], k: int,
            allowed: set[str] | None = None) -> list[tuple[str, float]]:
    """(item id, cosine) of the ``k`` stored vectors of ``kind`` nearest to ``vector``."""
    import numpy as np

    ids: list[str] = []
    blobs: list[bytes] = []
    size = 4 * len(vector)   # float32
    other = 0   # vectors of another length: the model under that name changed (not comparable)
    for item_id, blob in store.conn.execute(
            "SELECT item_id, vector FROM embeddings WHERE kind = ? AND model = ?", (kind, model)):
        if allowed is not None and item_id not in allowed:
            continue
        if len(blob) != size:
            other += 1
            continue
        ids.append(item_id)
        blobs.append(blob)
    if other:
        log.warning(
            "%d of the index's %s vectors from %s have another length than the question's (%d): the "
            "model under that name changed since the index was built, and they are left out; set "
            "llm.embedding_model to the one that built it, or give the new one another name and run "
            "`streamrag index` again", other, kind, model, len(vector))
    if not ids or k <= 0:
        return []
    # One matrix product (a loop in Python took 0.8 s for 5,000 vectors of 1,536)
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), len(vector)).astype(np.float64)
    q = np.asarray(vector, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    scores = (matrix @ q) / (norms * (float(np.linalg.norm(q)) or 1.0))
    scored = sorted(zip(ids, scores.tolist(), strict=True), key=lambda p: (-p[1], p[0]))
    return scored[:k]


def fallback_entities(store: Store, k: int) -> list[tuple[str, float]]:
    """The most connected entities, for a question that matches no entity at all."""
    rows = store.conn.execute("SELECT id, degree FROM entities ORDER BY degree DESC, mentions DESC, id "
                              "LIMIT ?", (k,)).fetchall()
    return [(r[0], 0.0) for r in rows]


# The edges in the graph's order (by their two ends: ``graph.sorted_pairs``), read from an index
# alone (``relationships_pair``) with no sort: the graph is made of them as they come, without
# numpy (a local ask sorted 202,659 of them after importing it, 0.2 s of its 1.3).
GRAPH_EDGES = "SELECT source, target, weight FROM relationships ORDER BY source, target"


def widen(store: Store, seeds: Sequence[tuple[str, float]], extra: int) -> list[tuple[str, float]]:
    """``seeds`` followed by up to ``extra`` entities ranked by PageRank personalised to them."""
    if extra <= 0 or not seeds:
        return list(seeds)
    from streamrag.graph import Graph, personalized_pagerank

    ids = [r[0] for r in store.conn.execute("SELECT id FROM entities")]   # (Graph sorts them)
    edges = store.conn.execute(GRAPH_EDGES).fetchall()
    graph = Graph(ids, edges, drop_unknown=True)
    top = max((s for _, s in seeds), default=0.0)
    weights = {eid: (s / top if top > 0 else 1.0) or 1e-3 for eid, s in seeds}
    seen = {eid for eid, _ in seeds}
    out = list(seeds)
    # at most len(seeds) of the ranking are seeds, so this many places always suffice
    for eid, score in personalized_pagerank(graph, weights, top_k=len(seeds) + extra):
        if len(out) >= len(seeds) + extra:
            break
        if eid not in seen:
            out.append((eid, score))
            seen.add(eid)
    return out


# --------------------------------------------------------------------------------------------
# The local context
# --------------------------------------------------------------------------------------------
class LocalData(msgspec.Struct):
    """Everything the local context is built from, loaded in one snapshot."""
    entities: list[dict]          # id, name, type, description; in selection order
    relationships: list[dict]     # id, source, target, source_name, target_name, description, weight, combined_degree
    claims: list[dict]            # id, subject_id, subject_name, object_id, object_name, type, status, start_date, end_date, description
    chunks: list[dict]            # id, hits (selected entities it mentions), rank, anchor_hits; text if given
    reports: list[dict]           # community, level, title, summary, hits


def load_local_data(store: Store, entity_ids: Sequence[str], anchors: Sequence[str] = (),
                    asked: Sequence[Sequence[str]] = ()) -> LocalData:
    """The rows the local context of ``entity_ids`` may use (call inside a snapshot).

    ``anchors`` are the entities the question names (among ``entity_ids``): each chunk and
    report counts how many of them it holds (``anchor_hits``), so that the context puts the
    named entity's own sources first. ``asked`` are the question's other words (each as the
    index's words it stands for: ``chunks_holding``): each chunk has how many of them it holds
    and their BM25 score (``asked``), the next key of the text section's order."""
    if not entity_ids:
        return LocalData([], [], [], [], [])
    marks = ",".join("?" * len(entity_ids))
    rank = {eid: i for i, eid in enumerate(entity_ids)}
    ents = {r["id"]: r for r in store.query(
        f"SELECT id, name, type, description, degree FROM entities WHERE id IN ({marks})", list(entity_ids))}
    entities = [ents[e] for e in entity_ids if e in ents]
    rels = store.query(
        "SELECT r.id, r.source, r.target, r.description, r.weight, r.combined_degree, "
        "a.name AS source_name, b.name AS target_name, a.type AS source_type, b.type AS target_type "
        "FROM relationships r "
        "JOIN entities a ON a.id = r.source JOIN entities b ON b.id = r.target "
        f"WHERE r.source IN ({marks}) OR r.target IN ({marks})", [*entity_ids, *entity_ids])
    # About an entity, or naming it as their object; one of each claim several chunks make
    # (``merge.distinct_claims``: the smallest id of those saying the same).
    claims = store.query(
        "SELECT min(c.id) AS id, c.subject_id, s.name AS subject_name, c.object_id, o.name AS object_name, "
        "c.type, c.status, c.start_date, c.end_date, c.description FROM claims c "
        "LEFT JOIN entities s ON s.id = c.subject_id LEFT JOIN entities o ON o.id = c.object_id "
        f"WHERE c.subject_id IN ({marks}) OR c.object_id IN ({marks}) "
        "GROUP BY c.subject_id, c.object_id, c.type, c.status, c.start_date, c.end_date, c.description "
        "ORDER BY 1", [*entity_ids, *entity_ids])
    anchored = set(anchors)
    hits: dict[str, set[str]] = {}
    for r in store.query(f"SELECT DISTINCT chunk_id, entity_id FROM entity_sources WHERE entity_id IN ({marks})",
                         list(entity_ids)):
        hits.setdefault(r["chunk_id"], set()).add(r["entity_id"])
    # Without their texts: the few the context has room for are read as it takes them
    # (``build_local_context``; a question about two hubs read 3,026 for the three it took).
    held = chunks_holding(store, asked)
    chunks = [{"id": c, "hits": len(hits[c]), "rank": min(rank[e] for e in hits[c]),
               "anchor_hits": len(hits[c] & anchored), "asked": held.get(c, (0, 0.0))} for c in sorted(hits)]
    anchor_marks = ",".join("?" * len(anchored))
    reports = store.query(
        "SELECT c.id AS community, c.level, r.title, r.summary, count(*) AS hits, "
        + (f"sum(m.entity_id IN ({anchor_marks}))" if anchored else "0") + " AS anchor_hits "
        "FROM community_members m "
        "JOIN communities c ON c.id = m.community_id JOIN reports r ON r.key = c.report_key "
        f"WHERE m.entity_id IN ({marks}) GROUP BY c.id", [*sorted(anchored), *entity_ids])
    return LocalData(entities, rels, claims, chunks, reports)


def chunks_holding(store: Store, asked: Iterable[Sequence[str]]) -> dict[str, tuple[int, float]]:
    """chunk id -> (how many of the question's words ``asked`` its text has, each given as the
    words of the index it stands for (``query._Search._asked_forms``: "married" and "marry" for
    "marry"; not "marrow"); the sum of their BM25 scores): FTS5 queries of each word's forms.
    (The count comes first: "live", in 8 of Scrooge's 43 chunks, found them alike.) A word in
    more than half the searchable chunks is left out: it tells none apart, and BM25, which gives
    it no weight, ordered them by their length alone ("letter", in 229 of 265 news reports, put
    the one with Wendell Tavden's letter fifth, out of the context)."""
    groups = list(dict.fromkeys(tuple(forms) for forms in asked if forms))
    if not groups:
        return {}
    # (the chunks chunks_fts holds: ``chunks`` also keeps those saved and not published, their
    # extraction failed or the run stopped first)
    rows = store.scalar("SELECT count(*) FROM live_chunks")
    held: dict[str, tuple[int, float]] = {}
    for forms in groups:
        found = _rows_matching(store, fts_match(forms), rows // 2 + 1)
        if found > rows // 2:
            continue
        ids = dict(store.conn.execute("SELECT rowid, id FROM chunks_fts WHERE chunks_fts MATCH ?", (fts_match(forms),)))
        scores: dict[str, float] = {}
        for form in forms:
            # A word's forms weigh as one word, as a prefix's did: FTS5 weighs each form by its
            # own rarity, and "living", in one of A Christmas Carol's chunks, put that one
            # before the one saying where Scrooge lived. (Read by rowid: see _rows_matching.)
            scored = store.conn.execute("SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?",
                                        (fts_match([form]),)).fetchall()
            weight = _idf(rows, found) / _idf(rows, len(scored))
            for rowid, score in scored:
                cid = ids[rowid]
                scores[cid] = scores.get(cid, 0.0) - score * weight   # (FTS5's bm25 is lower for a better match)
        for cid, score in scores.items():
            n, total = held.get(cid, (0, 0.0))
            held[cid] = (n + 1, total + score)
    return held


def _rows_matching(store: Store, match: str, most: int) -> int:
    """How many chunks ``match`` finds, counting up to ``most``. By rowid alone: a row's id is
    read with its whole text, and a word in half the index (1,245 of 2,488 chunks) took 14 ms
    for its ids, 0.4 for its rowids."""
    return store.scalar("SELECT count(*) FROM (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)",
                        (match, most))


def _idf(rows: int, found: int) -> float:
    """FTS5's BM25 weight of a word ``found`` in that many of ``rows`` rows."""
    return max(math.log((rows - found + 0.5) / (found + 0.5)), 1e-6)


def index_words(store: Store, start: str) -> list[str]:
    """The words of the searchable chunks that begin with ``start`` (FTS5's own vocabulary, read
    through a temporary ``fts5vocab`` table of this connection)."""
    store.conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_words USING fts5vocab(main, 'chunks_fts', 'row')")
    return [t for (t,) in store.conn.execute("SELECT term FROM temp.chunk_words WHERE term >= ? AND term < ?",
                                               (start, start + "\U0010ffff"))]


def claim_rank(rank: dict[str, int]) -> Callable[[dict], tuple]:
    """The order claims enter a local context: by the rank of their subject, or of their object
    when it is the selected one (a claim about an outside entity naming a selected one)."""
    def key(c: dict) -> tuple:
        return (min(rank.get(c["subject_id"], 1 << 30), rank.get(c.get("object_id"), 1 << 30)), c["id"])
    return key


def claim_tag(c: dict, selected: Collection[str]) -> str:
    """The tag a claim's line carries: its subject's, or its object's when only the object is
    ``selected`` (a claim found by its object)."""
    found_by_object = c["subject_id"] not in selected and c.get("object_id") in selected
    return f"[E:{c['object_id'] if found_by_object else c['subject_id']}]"


def tagged_claim_line(c: dict, tag: str) -> str:
    """A claim's line in a local context: its tag (what an answer cites it by: ``claim_tag``,
    required: the subject's, taken when none was given, is an entity the context may not show),
    its type, status and dates, the names of its subject and object, and what it says."""
    said = ", ".join(x for x in (c["type"], c["status"], claim_period(c.get("start_date"), c.get("end_date"))) if x)
    ends = [f"{end} {_clean(name)}" for end, name in (("subject", c.get("subject_name")),
                                                        ("object", c.get("object_name") or c.get("object_id"))) if name]
    return f"{tag} claim ({said}){' ' + ', '.join(ends) if ends else ''}: {_clean(c['description'])}"


class Context(msgspec.Struct):
    text: str
    sections: dict[str, int]      # tokens used per section
    budgets: dict[str, int]       # tokens allowed per section
    tags: list[str]               # every tag in the context, in order
    types: dict[str, str] = {}    # entity name -> type, of the entities the context names


def _clean(text: str) -> str:
    return " ".join(str(text).split())


def _words_over(text: str, n: int) -> bool:
    """Whether ``text`` has more than ``n`` words (as ``str.split`` finds them), known from its
    first ``n + 1``."""
    return n < 0 or len(text.split(None, n)) > n


# A line that does not fit is cut to the room left only where at least this many tokens are
# left (``_Section.add``; ``refuses`` says the same of a line from its first words).
_LEAST_CUT = 32


class _Section:
    def __init__(self, title: str, budget: int, encoding: str) -> None:
        self.encoding = encoding
        self.budget = budget
        self.lines = [title]
        self.used = count_tokens(title, encoding) + 1
        self.tags: list[str] = []
        if self.used > budget:
            self.lines, self.used = [], 0

    def add(self, tag: str, line: str, *, cut: bool = False) -> bool:
        if not self.lines:
            return False
        room = self.budget - self.used - 1
        if fewest_tokens(line) > room and (not cut or room < _LEAST_CUT):
            return False  # cannot fit, known without encoding it (most lines, once a section is full)
        cost = count_tokens(line, self.encoding) + 1
        if self.used + cost > self.budget:
            if not cut or room < _LEAST_CUT:
                return False
            line = truncate(line, room, self.encoding)
            cost = count_tokens(line, self.encoding) + 1
            if self.used + cost > self.budget:
                return False
        self.lines.append(line)
        self.used += cost
        self.tags.append(tag)
        return True

    def refuses(self, tag: str, text: str) -> bool:
        """Whether ``add(tag, f"{tag} {_clean(text)}", cut=True)`` would refuse that line for its
        words alone (``fewest_tokens``: a cleaned line's are those of its tag and its text), found
        from the first words of ``text``, not the whole of it cleaned and split: a question about
        two hubs made lines of 3,026 chunks for the three its text section had room for."""
        if not self.lines:
            return True
        room = self.budget - self.used - 1
        return room < _LEAST_CUT and _words_over(str(text), room - len(tag.split()))

    def full(self) -> bool:
        """Whether the section takes no line whatever: one has at least its tag, a word, and
        so a token (``fewest_tokens``), and there is no room for one."""
        return not self.lines or self.budget - self.used - 1 < 1

    def render(self) -> str:
        return "\n".join(self.lines) if self.tags else ""


def build_local_context(data: LocalData, *, max_tokens: int, text_share: float,
                        community_share: float, encoding: str = "o200k_base",
                        anchors: Sequence[str] = (),
                        texts: Callable[[list[str]], Iterable[tuple[str, str]]] | None = None) -> Context:
    """The local context of ``data`` within ``max_tokens``, each section within its share.

    ``texts`` reads (id, text) of chunks by id (``index_rows.chunk_texts``), for those of
    ``data.chunks`` given without one (``load_local_data``'s), only as far as the section goes.

    ``anchors`` are the entities the question names: what they are part of comes first in every
    section (their relationships, the reports of their communities, the chunks mentioning them),
    before what merely ties other selected entities together; a question about one person is
    answered from that person's neighbourhood, not from the busiest corner of the selection."""
    text_budget = int(max_tokens * text_share)
    community_budget = int(max_tokens * community_share)
    table_budget = max_tokens - text_budget - community_budget
    selected = {e["id"] for e in data.entities}
    anchored = set(anchors)
    rank = {e["id"]: i for i, e in enumerate(data.entities)}

    tables = _Section("Entities, relationships and claims", table_budget, encoding)
    for e in data.entities:
        tag = f"[E:{e['id']}]"
        tables.add(tag, f"{tag} {_clean(e['name'])} ({e['type']}): {_clean(e['description'])}", cut=True)
    for c in sorted(data.claims, key=claim_rank(rank)):
        tag = claim_tag(c, selected)
        tables.add(tag, tagged_claim_line(c, tag))

    def rel_key(r: dict) -> tuple:
        both = r["source"] in selected and r["target"] in selected
        best = min(rank.get(r["source"], 1 << 30), rank.get(r["target"], 1 << 30))
        anchor = r["source"] in anchored or r["target"] in anchored
        return (not anchor, not both, best, -r["combined_degree"], -r["weight"], r["id"])

    for r in sorted(data.relationships, key=rel_key):
        tag = f"[L:{r['id']}]"
        tables.add(tag, f"{tag} {_clean(r['source_name'])} -- {_clean(r['target_name'])}: "
                        f"{_clean(r['description'])}")

    reports = _Section("Community reports", community_budget, encoding)
    for r in sorted(data.reports, key=lambda r: (-r.get("anchor_hits", 0), -r["hits"], -r["level"],
                                                r["community"])):
        tag = f"[R:{r['community']}]"
        reports.add(tag, f"{tag} {_clean(r['title'])}: {_clean(r['summary'])}", cut=True)

    sources = _Section("Source text", text_budget, encoding)
    ordered = sorted(data.chunks, key=_chunk_order)
    for c, text in _with_texts(ordered, texts, until=sources.full):
        tag = f"[T:{c['id']}]"
        if not sources.refuses(tag, text):
            sources.add(tag, f"{tag} {_clean(text)}", cut=True)

    types = {r[f"{end}_name"]: r[f"{end}_type"] for r in data.relationships
             for end in ("source", "target") if r.get(f"{end}_type")}
    types.update((e["name"], e["type"]) for e in data.entities)
    parts = [s for s in (tables, reports, sources) if s.tags]
    return Context(
        text="\n\n".join(s.render() for s in parts),
        sections={"tables": tables.used if tables.tags else 0,
                  "reports": reports.used if reports.tags else 0,
                  "text": sources.used if sources.tags else 0},
        budgets={"tables": table_budget, "reports": community_budget, "text": text_budget},
        tags=[t for s in parts for t in s.tags], types=types)


def _chunk_order(c: dict) -> tuple:
    """The order chunks enter the text section: those mentioning the most entities the question
    names, then those having the most of its other words (``chunks_holding``), then those
    mentioning the most selected entities."""
    many, score = c.get("asked", (0, 0.0))
    return (-c.get("anchor_hits", 0), -many, -score, -c["hits"], c["rank"], c["id"])


# Chunk texts are read this many at first as the text section takes them (it takes about three:
# 4,000 tokens of chunks of 1,200), then twice as many each time: a section left with room for
# a short line (under ``_LEAST_CUT`` tokens, none cut to fit it) reads on to the last chunk.
_FIRST_TEXTS = 8


def _with_texts(chunks: list[dict], texts: Callable[[list[str]], Iterable[tuple[str, str]]] | None,
                until: Callable[[], bool]) -> Iterator[tuple[dict, str]]:
    """(chunk, its text) of each of ``chunks`` in order, until ``until()`` says no more is
    wanted: its own text, or read by ``texts`` as they are asked for, a few first (not another
    part once the section is full); one no longer stored is left out, as ``load_chunks`` leaves it."""
    at, many = 0, _FIRST_TEXTS
    while at < len(chunks) and not until():
        part = chunks[at:at + many]
        at, many = at + many, 2 * many
        unread = [c["id"] for c in part if "text" not in c]
        read = dict(texts(unread)) if unread and texts is not None else {}
        for c in part:
            if until():
                return
            text = c["text"] if "text" in c else read.get(c["id"])
            if text is not None:
                yield c, text


def build_basic_context(chunks: Sequence[dict], *, max_tokens: int,
                        encoding: str = "o200k_base") -> Context:
    """The retrieved chunks, best first, within ``max_tokens``."""
    sources = _Section("Source text", max_tokens, encoding)
    for c in chunks:
        tag = f"[T:{c['id']}]"
        sources.add(tag, f"{tag} {_clean(c['text'])}", cut=True)
    return Context(text=sources.render(), sections={"text": sources.used if sources.tags else 0},
                   budgets={"text": max_tokens}, tags=list(sources.tags))


def load_chunks(store: Store, ids: Sequence[str]) -> list[dict]:
    """Chunk rows (id, text) in the order of ``ids``; one no longer stored is left out."""
    texts = dict(index_rows.chunk_texts(store, list(ids)))
    return [{"id": i, "text": texts[i]} for i in ids if i in texts]
