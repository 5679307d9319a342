"""The graph an update works on: the published graph with this run's changes merged in.

``GraphState.apply`` re-merges every entity and relationship the added and removed chunks
touch, ``finish_graph`` brings degrees up to date from what moved, and ``dirty_communities``
names the communities whose report context may differ. A long-running process keeps the graph
it published (``GraphCache``) so its next update need not read it back. The rows it starts
from come from ``index_rows``; what it computes is published there too.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import weakref
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypeVar

import msgspec

from streamrag import ids, index_rows, joins, merge
from streamrag.communities import GraphEdges
from streamrag.config import Settings
from streamrag.graph import neighbour_counts
from streamrag.records import Claim, Community, Entity, Extraction, Relationship
from streamrag.store import Store
from streamrag.summarizer import new_summary_input

# Published entity degrees are distinct-neighbour counts kept up to date from each run's changes
# (see GraphState.finish_graph); an index without this mark is recounted once.
DEGREES_VERSION = "1"

# Reading a relationship's description by its id costs about as many rows of a pass over them
# all: ``describe`` reads a third of them or more in one pass.
_LOOKUP_COST = 3


@dataclass
class Change:
    added_docs: set[str]
    removed_docs: set[str]
    kept_docs: set[str]
    doc_chunks: dict[str, list[str]]
    live: set[str]
    added_chunks: set[str]
    removed_chunks: set[str]
    extractions: dict[str, Extraction] | index_rows.StoredExtractions   # (each taken once, by ``pop``)
    # The added chunks published with another extractor's result than the run's: those whose
    # claims call failed, with ``extractor.claimless_key``'s (``Indexer._changes``)
    keys: dict[str, str] = field(default_factory=dict)
    # Live chunks that stay as published, now live with the run's extractor's extraction of the
    # same records (``Indexer._changes``): chunk id -> that extractor; bookkeeping, no change
    rekeyed: dict[str, str] = field(default_factory=dict)
    # The documents this run cut into chunks (read anew, or cut again under other chunking
    # settings): a kept one among them may hold other chunks than published (``find_recut``)
    cut: set[str] = field(default_factory=set)
    # The folder's files after the change, path -> (doc id, size, change stamp) (the scan's; None:
    # not known, no file's name read as a title), and the kept documents whose files' names now
    # say other full names (``retitled``): what a document's title says may move a join
    files: Mapping[str, tuple[str, int, float]] | None = None
    retitled: set[str] = field(default_factory=set)
    # The titles of the documents this run read (doc id -> the title of the file it is shown
    # with: its front matter's, else its first line; ``Document.title``): the others' are published
    titles: dict[str, str] = field(default_factory=dict)
    # The documents this run read, and whether each opens with a line of code that reads as a
    # heading in its first chunk (``joins.code_heading``): no heading to title it; once, in an
    # index from before they were marked, the kept ones opening with a heading whose mark this
    # changes (read again, then those left pending: ``Indexer._code_headings_published``)
    code_headings: dict[str, bool] = field(default_factory=dict)
    # The kept documents this run cut into other chunks than published (``find_recut``), found
    # once by an offline run (``Indexer._join_bookkeeping``) for its check of nothing to redo and
    # its joins; None: not found (read through ``recut_of``, which then asks ``find_recut``)
    recut: frozenset[str] | None = None


def read_again(added: Collection[str], removed: Collection[str], before: dict[str, tuple[str, int, float]],
               now: dict[str, tuple[str, int, float]], retimed: Collection[str] = ()) -> tuple[set[str], set[str]]:
    """The ``added`` documents that are unchanged files read anew (a loader upgrade, another
    ``index.text_field``), and the ``removed`` documents they replace (a run's, and its
    estimate's, which counts them alike): ``before`` and ``now`` map a path to its (doc id,
    size, change stamp), as the files table holds them and as scanned;
    ``retimed``: paths whose files are unchanged but for a new status-change time
    (``on_disk.retimed``: a vault restored with `cp -a` said "5 added, 5 removed").

    A file indexed already with the same size and stamp whose document changed was read anew:
    its text differs only in how it was read, so its documents, the one it held and the one it
    holds, are neither removed nor added. Copies of the text in other files are counted as copies
    are (indexed once): deleting or adding one in the same run reads no document as removed or
    added (a rule asking every file of a document to be unchanged said "2 removed, 2 read
    again" of two documents read again, their copies deleted).

    A document read again is one added paired with one removed, one for one, so that the
    documents before, plus those added, less those removed, are those after: a file read anew
    into another file's text has its document removed, not unsaid; one whose old text another
    file keeps has its new one added."""
    unchanged = ((p, doc_id) for p, (doc_id, size, stamp) in now.items()
                 if p in before and (before[p][1:] == (size, stamp) or p in retimed))
    return _paired(before, unchanged, added, removed)


def edits(before: dict[str, tuple[str, int, float]], now: Iterable[tuple[str, str]],
          added: Collection[str], removed: Collection[str]) -> int:
    """How many of the ``added`` documents are files edited, not files come: a path (of ``now``'s
    (path, doc id) pairs) that held a ``removed`` document (``before``: path -> (doc id, ...)) and
    holds an added one. Paired one for one, so that an edit counts in neither added nor removed
    and the documents before, plus those added and edited, less those removed and edited, are
    those after. A rename (the same text at another path) adds and removes no document; a file
    renamed and edited at once is one added and one removed (its path did not stay)."""
    return len(_paired(before, now, added, removed)[0])


def document_changes(added: Collection[str], removed: Collection[str], before: dict[str, tuple[str, int, float]],
                     now: dict[str, tuple[str, int, float]], retimed: Collection[str] = ()) -> tuple[int, int, int, int]:
    """(documents added, edited, removed, read again) of an update, as a run says them and its
    estimate foretells them: of the ``added`` and ``removed`` documents, first those read again
    (``read_again``: ``before``, ``now`` and ``retimed`` as it takes them), then of the others
    the edits (``edits``), each counted once. One function for both, so they cannot drift."""
    again, replaced = read_again(added, removed, before, now, retimed)
    new, gone = set(added) - again, set(removed) - replaced
    edited = edits(before, ((p, doc_id) for p, (doc_id, _size, _stamp) in now.items()), new, gone)
    return len(new) - edited, edited, len(gone) - edited, len(again)


def renamed(before: Mapping[str, tuple[str, int, float]], now: Mapping[str, tuple[str, int, float]],
            kept: Collection[str]) -> int:
    """How many of the ``kept`` documents (their text indexed already) are at another path now
    (``before``, ``now``: path -> (doc id, ...), as ``document_changes`` takes them): a path of
    theirs gone and another come, a file renamed or moved. `index` counted them unchanged where
    `watch` said "1 renamed" of the same `mv`, and published a version with nothing said changed.
    A copy added or deleted alone is no rename: its text keeps the path it had. Files are
    compared, not rows: a row written above the others of a .jsonl numbers them anew
    (``rows.jsonl#1`` is ``rows.jsonl#2`` now), which renames nothing."""
    from streamrag.loader import file_of   # (as index_rows imports it: not for every command)

    def paths(table: Mapping[str, tuple[str, int, float]]) -> dict[str, set[str]]:
        held: dict[str, set[str]] = defaultdict(set)
        for path, (doc_id, _size, _stamp) in table.items():
            if doc_id in kept:
                held[doc_id].add(file_of(path))
        return held

    was, now_at = paths(before), paths(now)
    return sum(1 for doc_id, at in now_at.items()
               if at - (had := was.get(doc_id, set())) and had - at)


def _paired(before: dict[str, tuple[str, int, float]], now: Iterable[tuple[str, str]],
            added: Collection[str], removed: Collection[str]) -> tuple[set[str], set[str]]:
    """The ``added`` documents held at a path (of ``now``'s (path, doc id) pairs, taken in order)
    that held a ``removed`` one (``before``: path -> (doc id, ...)), and those removed ones:
    paired one for one, each document in one pair at most (a text in two files is one document)."""
    new: set[str] = set()
    gone: set[str] = set()
    # (only the paths holding an added document sorted: a sync sorted every path of the folder,
    # twice (read_again, edits), 0.6 s at 300,000 files, 0.14 s so)
    for path, doc_id in sorted(pair for pair in now if pair[1] in added):
        was = before.get(path)
        if was is not None and was[0] in removed and doc_id not in new and was[0] not in gone:
            new.add(doc_id)
            gone.add(was[0])
    return new, gone


def stranded_chunks(store: Store) -> set[str]:
    """The live chunks ``GraphState.stranded`` merges again: none once a version is published
    with the claim_ends mark, which says a claim's subject and object are entities. Looked for
    once a version of ``store`` (the claims and entities change only with a publish): a run reads
    the published bookkeeping (``unread``) and then the graph (``load``), and an estimate both
    says them and works the update out, each of which asked the index (a pass over its claims)."""
    version = store.version
    if not version or store.get_meta("claim_ends"):
        return set()
    stamp = (version, store.get_meta("published_at"))
    found = _stranded_found.get(store)
    if found is None or found[0] != stamp:
        found = _stranded_found[store] = (stamp, frozenset(index_rows.stranded_claim_chunks(store)))
    return set(found[1])


# store -> ((version, published_at), the chunks ``stranded_chunks`` found of that version)
_stranded_found: weakref.WeakKeyDictionary[Store, tuple[tuple[int, str | None], frozenset[str]]] = \
    weakref.WeakKeyDictionary()


def retitled(before: Mapping[str, tuple[str, int, float]], now: Mapping[str, tuple[str, int, float]]) -> set[str]:
    """The documents, held before and now, whose files' names say other full names
    (``joins.file_title``): a note renamed "Ada Lovelace.md", or its copy so named deleted.
    ``before`` and ``now`` map a path to its (doc id, size, stamp), as the files table holds them
    and as scanned. Only the documents of a path that came, went or holds another document are
    looked at (a rename or a copy: a sync looked at nothing more)."""
    moved = {v[0] for p, v in now.items() if (was := before.get(p)) is None or was[0] != v[0]}
    # (and the documents those paths held: one deleted, or edited away while a copy keeps it)
    moved |= {v[0] for p, v in before.items() if (held := now.get(p)) is None or held[0] != v[0]}
    if not moved:
        return set()

    def titles(files: Mapping[str, tuple[str, int, float]]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = defaultdict(set)
        for path, (doc_id, _size, _stamp) in files.items():
            if doc_id in moved and (title := joins.file_title(path)) is not None:
                out[doc_id].add(title)
        return out
    was, held = titles(before), titles(now)
    held_before = {v[0] for v in before.values() if v[0] in moved}
    held_now = {v[0] for v in now.values() if v[0] in moved}
    return {d for d in held_before & held_now if was.get(d, set()) != held.get(d, set())}


def titled_anew(store: Store, change: Change) -> set[str]:
    """The kept documents this run read whose own titles (``Change.titles``: a front matter's
    "title: Ada Lovelace") say another full name than they were published with, read as names
    (``joins.name_title``): what a document's title says may move a join, and its text, its id,
    stays."""
    read = {d: t for d, t in change.titles.items() if d in change.kept_docs}
    published = index_rows.document_titles(store, read) if read else {}
    return {d for d, t in read.items() if joins.name_title(t) != joins.name_title(published.get(d, t))}


def _titles(store: Store, change: Change, docs: set[str], code: Collection[str] = ()) -> dict[str, set[str]]:
    """The full names the titles of ``docs`` say after ``change``: their files' names
    (``joins.file_title``), their first lines' headings (``joins.heading_title``, read from
    each one's first chunk, but of those opening with code: ``code``, ``GraphState.code_headings``)
    and their own titles (``joins.own_title``: a front matter's)."""
    out: dict[str, set[str]] = defaultdict(set)
    if not docs:
        return out
    for path, (doc_id, _size, _stamp) in (change.files or {}).items():
        if doc_id in docs and (title := joins.file_title(path)) is not None:
            out[doc_id].add(title)
    # (documents may open with the same chunk: a note and its copy with a line added)
    first: dict[str, set[str]] = defaultdict(set)
    for d in docs:
        if (cs := change.doc_chunks.get(d)) and d not in code:
            first[cs[0]].add(d)
    for chunk_id, text in index_rows.opening_headings(store, sorted(first)):
        if (title := joins.heading_title(text)) is not None:
            for d in first[chunk_id]:
                out[d].add(title)
    own = index_rows.document_titles(store, docs - change.titles.keys()) | \
        {d: t for d, t in change.titles.items() if d in docs}
    # (only a title that names someone has its document's opening read)
    named = {d: t for d, t in own.items() if joins.name_title(t) is not None and d in change.doc_chunks}
    opening = dict(index_rows.chunk_texts(store, sorted({change.doc_chunks[d][0] for d in named})))
    for d, t in named.items():
        if (title := joins.own_title(t, opening.get(change.doc_chunks[d][0], ""))) is not None:
            out[d].add(title)
    return out


def find_recut(store: Store, change: Change) -> set[str]:
    """The kept documents this run cut into other chunks than they were published with (another
    chunk size or overlap): only those it cut (``Change.cut``) are read back, on each call (it
    keeps nothing: an offline run asks it once and keeps the answer in ``Change.recut``, which
    ``recut_of`` reads)."""
    cut = change.cut & change.kept_docs
    published = index_rows.sources(store, "document_chunks", "doc_id", cut) if cut else {}
    return {d for d in cut if {r["chunk_id"] for r in published.get(d, ())} != set(change.doc_chunks[d])}


def recut_of(store: Store, change: Change) -> frozenset[str]:
    """The kept documents ``change`` cut into other chunks than published: ``Change.recut`` when
    the run found it, else ``find_recut``'s answer (None is "not found", never "none recut").
    Every reader of it goes through here, so that they cannot read None two ways."""
    return change.recut if change.recut is not None else frozenset(find_recut(store, change))


def _documents_moved(store: Store, change: Change) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The chunks of each document whose chunks ``change`` may move, as published and as it leaves
    them: the documents removed (before only), added (after only), and kept that held a removed
    chunk, hold an added one or were cut into other chunks (both; ``find_recut``). Any other
    document holds the chunks it held.

    A kept document (its id is its text's hash) is cut into other chunks only under another
    chunker key (chunk size, overlap, versions: ``chunking_marks``), and may then hold no added
    chunk and no removed one: its old chunks all live on in other documents and its new ones were
    live already (a chunk-overlap change gave a document's second chunk the first one's last
    words, as a third file held them). Found by its chunks alone, it kept a join its published
    chunks made and its new ones do not."""
    held = {r["doc_id"] for rs in index_rows.sources(store, "document_chunks", "chunk_id",
                                                      change.removed_chunks).values() for r in rs}
    kept = {d for d in change.kept_docs if d in held or not change.added_chunks.isdisjoint(change.doc_chunks[d])} \
        if change.added_chunks else held & change.kept_docs
    kept |= recut_of(store, change)
    before = {d: {r["chunk_id"] for r in rs}
              for d, rs in index_rows.sources(store, "document_chunks", "doc_id", change.removed_docs | kept).items()}
    return before, {d: set(change.doc_chunks[d]) for d in change.added_docs | kept}


def _regrouped(before: dict[str, set[str]], after: dict[str, set[str]], live: set[str]) -> set[str]:
    """The ``live`` chunks (kept, neither added nor removed) whose sharing of a document with
    another may differ after a change (``_documents_moved``'s ``before`` and ``after``): those of a
    group of live chunks one document holds on one side and none on the other. A file edited
    takes its unchanged chunks, together, from one document to the next: none; a document
    removed whose chunk another document holds too (the same paragraph in two files): that
    chunk."""
    def groups(documents: dict[str, set[str]]) -> set[frozenset[str]]:
        return {frozenset(chunks & live) for chunks in documents.values()}
    return set().union(*(groups(before) ^ groups(after)))


def _documents_of(store: Store, chunks: set[str], before: dict[str, set[str]],
                  after: dict[str, set[str]]) -> dict[str, set[str]]:
    """The documents holding each of the live ``chunks`` after a change (``_documents_moved``'s
    ``before`` and ``after``): the published ones it leaves as they were, and those it moved."""
    out: dict[str, set[str]] = defaultdict(set)
    moved = before.keys() | after.keys()
    for chunk_id, rows in index_rows.sources(store, "document_chunks", "chunk_id", chunks).items():
        out[chunk_id].update(r["doc_id"] for r in rows if r["doc_id"] not in moved)
    for doc_id, held in after.items():
        for chunk_id in held & chunks:
            out[chunk_id].add(doc_id)
    return out


class KeptPartition(msgspec.Struct):
    """The partition a model's run published, kept by the offline run that replaced it (meta
    ``model_partition``, bookkeeping: no query reads it) for the next run with a model to
    warm-start Leiden from. Started from the offline run's partition instead, that run
    clustered the model's graph anew and gave most communities other members and ids, so
    their report contexts, which name sub-communities by id, missed the cached answers (200
    documents, one edited: 153 of 184 reports asked anew). Only the partition is kept: a report
    is found again by its context's key (the cached answer), which is sound whatever changed,
    where the published bookkeeping of what changed is the offline graph's, not the model's."""

    communities: list[Community]
    leiden: str | None          # the model's run's Leiden settings (meta ``leiden``)
    changed_since_fresh: int    # ... and its entities changed since its last drift check


class _KeptCommunity(msgspec.Struct):
    """A ``records.Community`` of a ``KeptSettings``: its fields checked but for its members,
    left undecoded (most of a partition's bytes)."""

    id: str
    level: int
    parent: str | None
    members: msgspec.Raw


class KeptSettings(msgspec.Struct):
    """A ``KeptPartition`` read for its Leiden settings (``start_leiden``) or for being there: its
    fields checked as the whole one's are, its communities' members left undecoded (a
    20,000-entity graph's, 1.5 MB: 43 ms a decode whole, 8 ms so; a run read it whole twice).
    Its communities are checked too: one read so that ``warm_start`` could not (another
    streamrag's ``Community``) was the run's start for ``start_leiden``, which then said "it is
    clustered afresh" by the settings of a partition ``warm_start`` dropped. (Members not a list
    of strings still pass here alone.)"""

    communities: list[_KeptCommunity]
    leiden: str | None
    changed_since_fresh: int


Kept = TypeVar("Kept", KeptPartition, KeptSettings)
MODEL_PARTITION = "model_partition"


def changed_since_fresh(store: Store) -> int:
    """The entities changed since the published partition's last drift check (meta
    ``changed_since_fresh``, as ``updated_partition`` counts them)."""
    return int(store.get_meta("changed_since_fresh", "0") or 0)


def kept_partition(store: Store, shape: type[Kept] = KeptPartition) -> Kept | None:
    """The model's partition an offline run kept, for a run with a model of the offline index
    (``shape``: read as a ``KeptPartition``, or a ``KeptSettings``)."""
    kept = store.get_meta(MODEL_PARTITION)
    try:
        return msgspec.json.decode(kept, type=shape) if kept else None
    except msgspec.DecodeError:   # (kept by another streamrag: a start, no more; the published one serves)
        return None


def partition_to_keep(store: Store, state: GraphState, *, offline: bool) -> dict[str, str | None]:
    """The bookkeeping an update writes of the model's partition: an offline run of an index a
    model built keeps the published one (the model's); an offline run of an offline index leaves
    the one kept as it is; a run with a model drops it (its own partition is published now)."""
    if not offline:
        return {MODEL_PARTITION: None}
    if not (index_rows.built_by_model(store) and state.old_communities):
        return {}
    kept = KeptPartition(communities=state.old_communities, leiden=store.get_meta("leiden"),
                         changed_since_fresh=changed_since_fresh(store))
    return {MODEL_PARTITION: msgspec.json.encode(kept).decode()}


class WarmStart(NamedTuple):
    """The partition an update's Leiden starts from (``warm_start``)."""

    previous: list[Community]
    leiden: str | None          # the Leiden settings it was made with (None: not marked)
    since_check: int            # entities changed since its last drift check
    kept: bool                  # the model's partition an offline run kept, not the published one


def _kept_for(store: Store, *, offline: bool, shape: type[Kept] = KeptPartition) -> Kept | None:
    """The model's partition a run starts from instead of the published one: a run with a
    model of an index an offline run made of a model's (``KeptPartition``); else None.

    One a streamrag before the mark left stale (its model run, then its offline run, after the
    keeping) is taken too: an older model's partition is still a nearer start than the offline
    one published (news41 through the simulator, the next model run after one more edit: 10 and
    20 articles, 0 reports paid from the stale one, 11 from the published one; 30 articles, an
    article added each time, 11 against 26). Such a streamrag (schema 32) refuses an index any
    streamrag of schema 33 on has written. (``shape``: as ``kept_partition`` reads it.)"""
    return None if offline or not index_rows.built_offline(store) else kept_partition(store, shape)


def start_leiden(store: Store, *, offline: bool) -> str | None:
    """The Leiden settings of the partition a run starts from (``warm_start``'s ``leiden``),
    known before the graph is: a run with other settings clusters afresh. Read from the
    published partition, a run with a model after an offline run with other settings said
    "it is clustered afresh" of a run that started from the model's partition (settings as the
    run's) and was silent on one it clustered afresh, and its estimate took one for the other."""
    kept = _kept_for(store, offline=offline, shape=KeptSettings)
    return kept.leiden if kept is not None else store.get_meta("leiden")


def warm_start(store: Store, state: GraphState, *, offline: bool) -> WarmStart:
    """The partition a run clusters from: the published one, or for a run with a model of an
    index an offline run made of a model's, the model's partition that run kept
    (``KeptPartition``). ``state``: the graph the run clusters, its changes applied."""
    kept = _kept_for(store, offline=offline)
    if kept is None:
        return WarmStart(state.old_communities, store.get_meta("leiden"),
                         changed_since_fresh(store), False)
    return WarmStart(kept.communities, kept.leiden, kept.changed_since_fresh, True)


def moved_since(previous: Iterable[Community], entities: Collection[str]) -> int:
    """The entities that came or went since ``previous`` was made: what a kept partition counts
    toward its drift check (the model's graph it was made of is not kept, so an entity whose
    edges alone changed is not counted)."""
    before = {m for c in previous if c.level == 0 for m in c.members}
    return len(before.symmetric_difference(entities))


class GraphState:
    def __init__(self) -> None:
        self.entities: dict[str, Entity] = {}
        self.relationships: dict[str, Relationship] = {}
        self.claims: dict[str, Claim] = {}
        self.old_communities: list[Community] = []
        self.old_reports: dict[str, str] = {}    # community id -> key of the report shown
        self.old_contexts: dict[str, str] = {}   # community id -> key of its report's context
        self.old_degree: dict[str, int] = {}
        self.old_weight: dict[str, float] = {}
        self.claim_ends_changed: set[str] = set()  # entities a claim naming them (either end) came to or left
        self.changed_since_fresh = 0             # entities changed since the last drift check
        self.leiden_key = ""                     # the Leiden settings of this run's partition
        self.old_combined: dict[str, int] = {}
        self.changed_entities: set[str] = set()
        self.changed_relationships: set[str] = set()
        self.deleted_entities: set[str] = set()
        self.deleted_relationships: set[str] = set()
        self.rewired: set[str] = set()           # entities with an edge added, removed or reweighted
        self.degree_delta: Counter[str] = Counter()  # neighbours gained (lost: negative) this run
        self.counted = False                     # the published degrees were counted by this code
        self.entity_mentions_added: list[merge.EntityMention] = []
        self.relationship_mentions_added: list[merge.RelationshipMention] = []
        self.claims_added: list[Claim] = []
        # short name's entity id -> the full name's it joins (``joins``); None: not kept by the
        # index published (one built before joins), so every name is looked at once
        self.joins: dict[str, str] | None = {}
        # the published ``joins`` made by another rule (``joins.RULE``): every name looked at once
        self.rejoin_all = False
        self.rejoined: set[str] = set()          # live chunks merged again for a join that moved
        self.openers_added: dict[str, list[str]] = {}   # added chunk -> its ``Extraction.openers``
        self.called_added: dict[str, dict[str, list[str]]] = {}   # ... -> its ``Extraction.called``
        self.joins_moved = 0                     # short names joined anew, parted or joined to another
        self.joins_joined = 0                    # ... of them, joined anew (none before)
        self.joins_parted = 0                    # ... and parted (joined to none now)
        # the documents whose first chunk opens with a heading their text indents as code
        # ("    # Ada Lovelace", ``joins.code_heading``: the chunk lost the indent), no title;
        # every run keeps them, a model's too (meta ``name_code_headings``)
        self.code_headings: set[str] = set()
        # live chunks with a claim whose subject or object is no entity, in an index merged
        # before a claim's ends were made entities (``merge.mentions_of``): merged again once
        self.stranded: set[str] = set()
        self.version = 0
        self.stamp = ""                          # when that version was published
        self.in_id_order = False                 # entities and relationships iterate in id order
        # entity -> ids of the relationships it is the source of, in id order (None: not made
        # yet); a kept graph carries it to the next run, which brings it up to date
        # (``relationships_by_source``) from the relationships that left a source this run
        self.by_source: dict[str, list[str]] | None = None
        # the graph as clustered (``clustered_graph``): the published one's, when a kept graph
        # carries it, and this run's once made
        self.graph_edges: GraphEdges | None = None
        self._graph_made: GraphEdges | None = None
        self.left_source: dict[str, str] = {}    # relationship deleted or re-sourced -> its source before
        self.retry_summaries: set[str] = set()   # fell back to extractive last time: try again
        self.fallbacks: set[str] = set()         # fell back this time
        self.unusable: dict[str, int] = {}       # element -> runs in a row its summary answers were unusable
        # report attempt (``report_stage.report_attempt``: context key and output budget) -> runs in
        # a row its report answers were unusable (of this run, once ``report_stage`` has run)
        self.report_unusable: dict[str, int] = {}
        # community held below index.report_min_members -> [attempt, runs]: the count its report
        # had when a model last wrote it, kept for when it is asked for again
        self.report_held: dict[str, list] = {}
        # element summarized this run -> the key in llm_cache of the answer its summary is (None:
        # no model wrote it); ``index_rows.publish`` keeps them in the table ``answers``
        self.answers: dict[str, str | None] = {}

    @classmethod
    def unread(cls, store: Store) -> GraphState:
        """The published version's bookkeeping (the summaries and reports to try again, the
        answers unusable on runs in a row), its graph not read: enough for a run that finds
        nothing changed to tell it has nothing to do (``Indexer._nothing_to_redo``)."""
        st = cls()
        st.version = store.version
        st.stamp = store.get_meta("published_at", "") or ""
        st.retry_summaries = set(msgspec.json.decode(store.get_meta("summary_fallbacks", "[]") or "[]"))
        st.unusable = msgspec.json.decode(store.get_meta("summary_unusable", "{}") or "{}", type=dict[str, int])
        st.report_unusable = msgspec.json.decode(store.get_meta("report_unusable", "{}") or "{}",
                                                 type=dict[str, int])
        st.report_held = msgspec.json.decode(store.get_meta("report_unusable_held", "{}") or "{}",
                                             type=dict[str, list])
        st.counted = store.get_meta("degrees") == DEGREES_VERSION
        joined = store.get_meta("name_joins")
        st.joins = msgspec.json.decode(joined, type=dict[str, str]) if joined else \
            ({} if not st.version else None)
        st.rejoin_all = st.joins is not None and bool(st.version) and \
            store.get_meta("name_joins_rule") != joins.RULE
        st.code_headings = set(msgspec.json.decode(store.get_meta("name_code_headings") or "[]", type=list[str]))
        st.stranded = stranded_chunks(store)
        return st

    @classmethod
    def load(cls, store: Store) -> GraphState:
        """The published graph. The relationships' descriptions are left in the store (None)
        until a step reads them (``describe``): an update needs those of the relationships it
        merges, publishes changed or shows in a report, not all 200,000 (the index of 10,000
        documents: 34 MB of text; the graph read back held 142 MB, now 95 MB)."""
        st = cls.unread(store)
        for eid, name, etype, description, mentions, degree in index_rows.entity_rows(store):
            st.entities[eid] = Entity(id=eid, name=name, type=etype, description=description,
                                      mentions=mentions, degree=degree)
            st.old_degree[eid] = degree
        # A relationship's ends are the entities' own id strings, not copies read with its row:
        # two for each of 200,000 relationships were 28 MB of the graph of 10,000 documents.
        same = {eid: eid for eid in st.entities}
        for rid, source, target, weight, mentions, combined in index_rows.relationship_edges(store):
            st.relationships[rid] = Relationship(
                id=rid, source=same.get(source, source), target=same.get(target, target), description=None,
                weight=weight, mentions=mentions, combined_degree=combined)
            st.old_combined[rid] = combined
            st.old_weight[rid] = weight
        st.claims = {c.id: c for c in index_rows.load_claims(store)}
        for community, context_key, report_key in index_rows.load_communities(store):
            st.old_communities.append(community)
            st.old_reports[community.id] = report_key
            st.old_contexts[community.id] = context_key
        return st

    def describe(self, store: Store, ids: Iterable[str]) -> None:
        """Reads from the store the descriptions ``load`` left there of the relationships among
        ``ids`` (those of the published version: one merged or summarized this run has its own)."""
        relationships = self.relationships
        unread = {rid for rid in ids if (r := relationships.get(rid)) is not None and r.description is None}
        # (the index of 10,000 documents: 10,044 were 0.04 s looked up by id; all 202,662 were
        # 0.69 s looked up, 0.32 s picked from one pass, as a third of them are)
        many = len(unread) * _LOOKUP_COST > len(relationships)
        for rid, description in index_rows.relationship_descriptions(store, unread, one_pass=many) if unread else ():
            relationships[rid].description = description

    def apply(self, store: Store, change: Change, settings: Settings) -> list[tuple[str, str, list[str]]]:
        """Re-merges every element the changed chunks touch; returns the summaries to write.
        ``change.extractions`` is emptied: each is let go once its mentions are taken."""
        ent_m, rel_m = self._take_mentions(change)
        self.mark_code_headings(change)   # (before the joins: ``_titles`` reads them)
        self.rejoined = self._rejoin(store, change, settings, ent_m) | (
            self.stranded - change.removed_chunks - change.added_chunks)
        again_e, again_r = self._mentions_again(store, self.rejoined)
        # (a chunk merged again leaves with its mentions as they were and comes with them joined anew)
        ent_m, rel_m = merge.joined(ent_m + again_e, rel_m + again_r, self.joins or {}, joins.JOINING)
        self.entity_mentions_added, self.relationship_mentions_added = ent_m, rel_m
        removed = change.removed_chunks | self.rejoined
        affected_e = {m.entity_id for m in ent_m} | index_rows.ids_for_chunks(store, "entity_sources", "entity_id", removed)
        affected_r = {m.relationship_id for m in rel_m} | index_rows.ids_for_chunks(
            store, "relationship_sources", "relationship_id", removed)
        retry = self.retry_summaries
        affected_e |= {i for i in retry if i.startswith("ent-") and i in self.entities}
        affected_r |= {i for i in retry if i.startswith("rel-") and i in self.relationships}
        new_input = functools.partial(new_summary_input, limit=settings.index.summary_max_descriptions)
        jobs: list[tuple[str, str, list[str]]] = []
        renamed = self._remerge_entities(store, affected_e, merge.group(ent_m), removed, settings,
                                         new_input, jobs)
        # A relationship's summary is written under its entities' names: when one of them is now
        # shown under another name ("VELO" outnumbering "Velo"), it is written again, as a fresh
        # index would write it.
        # (Those of the published graph, which this state still is: looked up, not found by a
        # pass over every relationship.)
        affected_r |= index_rows.ids_touching(store, renamed) if renamed else set()
        self._remerge_relationships(store, affected_r, merge.group(rel_m), removed, renamed, new_input, jobs)
        return jobs

    def _take_mentions(self, change: Change) -> tuple[list[merge.EntityMention], list[merge.RelationshipMention]]:
        """The added chunks' mentions; claims of removed chunks are dropped and added ones taken.

        Each extraction is taken out of ``change`` as it is read (a run's are read from the store
        as they are taken, ``index_rows.StoredExtractions``): nothing reads it again, and a first
        index of 10,000 documents held them all (165 MB) beside their mentions (220 MB)."""
        ent_m: list[merge.EntityMention] = []
        rel_m: list[merge.RelationshipMention] = []
        shared: dict[str, str] = {}   # (equal strings of the mentions held once: let go with it)
        self.openers_added, self.called_added = {}, {}
        for chunk_id in sorted(change.added_chunks):
            extraction = change.extractions.pop(chunk_id)
            if extraction.openers:
                self.openers_added[chunk_id] = extraction.openers
            if extraction.called:
                self.called_added[chunk_id] = extraction.called
            e, r, c = merge.mentions_of(chunk_id, extraction, shared)
            ent_m += e
            rel_m += r
            self.claims_added += c
        self.entity_mentions_added, self.relationship_mentions_added = ent_m, rel_m
        for claim_id in [cid for cid, c in self.claims.items() if c.chunk_id in change.removed_chunks]:
            gone = self.claims.pop(claim_id)
            self.claim_ends_changed.update(e for e in (gone.subject_id, gone.object_id) if e)
        for c in self.claims_added:
            self.claims[c.id] = c
            self.claim_ends_changed.update(e for e in (c.subject_id, c.object_id) if e)
        return ent_m, rel_m

    def mark_code_headings(self, change: Change) -> None:
        """Brings ``code_headings`` up to date with the documents ``change`` reads (its
        ``code_headings``: whether each opens with code that reads as a heading) and the documents
        it removes (every run, a model's too: ``Indexer._code_headings_read``)."""
        read = change.code_headings
        self.code_headings = {d for d in self.code_headings - change.removed_docs if read.get(d, True)} | \
            {d for d, code in read.items() if code}

    def _rejoin(self, store: Store, change: Change, settings: Settings,
                added: list[merge.EntityMention]) -> set[str]:
        """Brings ``joins`` up to date with the names the change adds and removes, and those of the
        live chunks it gives other documents to share or other titles (those it may move:
        ``joins.touched``; a join asks the two names to share a document, or the short name's
        document to be titled the full name: ``retitled``); returns the live chunks, not added, whose
        mentions are merged again for a join that moved, and counts them (``joins_moved``). Offline
        only: an index a model extracts joins nothing (and one an offline run joined splits its
        joins)."""
        old = self.joins or {}
        removed = change.removed_chunks
        now: dict[str, str] = {}
        every = self.joins is None or self.rejoin_all   # (every name looked at: ``unread``)
        self.rejoin_all = False
        if settings.offline:
            before, after = _documents_moved(store, change)
            regrouped = _regrouped(before, after, change.live - change.added_chunks)
            # (a document's title says a full name: one renamed has its names looked at again)
            regrouped |= {c for d in change.retitled & change.kept_docs for c in change.doc_chunks.get(d, ())
                          if c in change.live and c not in change.added_chunks}
            # (and the lone words their sentences open with: a note titled a full name, "Ada
            # Lovelace.md", that says "Ada was ..." joins the "Ada" of other documents to her)
            names = list(itertools.chain((m.name for m in added),
                                         index_rows.ids_for_chunks(store, "entity_sources", "name",
                                                                   removed | regrouped),
                                         (e.name for e in self.entities.values()) if every else (),
                                         itertools.chain.from_iterable(self.openers_added.values()),
                                         index_rows.opening_words(store, removed | regrouped)))
            keys = joins.touched(names)
            shorts = {ids.entity_id(k) for k in keys}
            # (the full names of the graph holding one of the words looked up in its full-text
            # table: a pass over every entity was most of a small update to a large index; none
            # in a first index's empty graph, whose words were 0.12 s of 1,000 documents' run)
            held = self.entities.values() if every else \
                [self.entities[i] for i in index_rows.named_with(store, joins.spellings(names))
                 if i in self.entities] if keys and self.entities else ()
            fulls = {ids.entity_id(n) for n in itertools.chain((e.name for e in held), (m.name for m in added))
                     if " " in n and (ends := joins.full_name_ends(n)) is not None and not keys.isdisjoint(ends)}
            own, chunks, types = self._own_names(store, shorts | fulls, old, removed, added, settings)
            opening = self._opening(store, change, [e for e in own if joins.short_key(e.name) is not None])
            in_documents = _documents_of(store, set().union(*chunks.values(), *opening.values()), before, after)
            documents = {eid: {d for c in cs for d in in_documents.get(c, ())} for eid, cs in chunks.items()}
            opened = {eid: {d for c in cs for d in in_documents.get(c, ())} for eid, cs in opening.items()}
            # (the titles of the documents saying a short name alone: of a note, its file's name)
            saying_short = {d for e in own if joins.short_key(e.name) is not None
                            for d in documents.get(e.id, set()) | opened.get(e.id, set())}
            now = joins.joins(own, documents, _titles(store, change, saying_short, self.code_headings), opened,
                              types)
            now = {s: f for s, f in old.items() if s not in shorts} | {s: f for s, f in now.items() if s in shorts}
        moved = {s for s in old.keys() | now.keys() if old.get(s) != now.get(s)}
        self.joins = dict(sorted(now.items()))
        self.joins_moved = len(moved)
        self.joins_joined = sum(1 for s in moved if s not in old)
        self.joins_parted = sum(1 for s in moved if s not in now)
        if not moved:
            return set()
        rows = index_rows.sources(store, "entity_sources", "entity_id", {old.get(s, s) for s in moved})
        return {r["chunk_id"] for rs in rows.values() for r in rs
                if ids.entity_id(r["name"]) in moved and r["chunk_id"] not in removed} - change.added_chunks

    def _opening(self, store: Store, change: Change, shorts: list[Entity]) -> dict[str, set[str]]:
        """The live chunks after ``change`` that open a sentence with one of the short names
        ``shorts`` alone (``Extraction.openers``: "Ada was ..."), by the short name's entity id."""
        by_key = {ids.normalize_name(e.name): e.id for e in shorts}
        out: dict[str, set[str]] = defaultdict(set)
        if not by_key:
            return out
        # (a chunk merged again is removed with its published openers and added with its own)
        published = ((c, w) for c, w in index_rows.opened_with(store, [e.name for e in shorts])
                     if c not in change.removed_chunks)
        for chunk_id, word in itertools.chain(published, ((c, w) for c, ws in self.openers_added.items() for w in ws)):
            if (eid := by_key.get(ids.normalize_name(word))) is not None and chunk_id in change.live:
                out[eid].add(chunk_id)
        return out

    def _own_names(self, store: Store, wanted: set[str], old: dict[str, str], removed: set[str],
                   added: list[merge.EntityMention], settings: Settings
                   ) -> tuple[list[Entity], dict[str, set[str]], dict[str, Counter[str]]]:
        """Each of the names (entity ids, as written) of ``wanted`` still said after the change,
        merged from its own mentions alone (a full name's entity holds those of the short names
        joined to it, under ``old`` joins), the chunks saying each (a short name's: as a person,
        or untyped, ``joins.JOINING``, or read there as a full name it fits) and the chunks
        reading its mentions as each type (a join asks most of a short name's to read it as a
        person: ``joins.read_as_person``)."""
        own: dict[str, list[merge.EntityMention]] = defaultdict(list)
        stored = wanted | {old[s] for s in wanted if s in old}
        for rs in index_rows.sources(store, "entity_sources", "entity_id", stored).values():
            for r in rs:
                if r["chunk_id"] not in removed and (eid := ids.entity_id(r["name"])) in wanted:
                    own[eid].append(merge.EntityMention(eid, r["chunk_id"], r["name"], r["type"], r["description"]))
        for m in added:
            if m.entity_id in wanted:
                own[m.entity_id].append(m)
        chunks = {eid: {m.chunk_id for m in ms if m.type in joins.JOINING or joins.short_key(m.name) is None}
                  for eid, ms in own.items()}
        # (a chunk saying a short name beside a full name it fits says it as a person, though the
        # extractor resolved it there, "Margaret Hollis ... told Margaret": its extraction keeps
        # the short names it read as the full one, ``Extraction.called``; never the description's
        # text, which a document's own "(Also called MARGARET.)" may end)
        # (only the full names a short name looked at fits, and their mentions read as a person:
        # the extractions of those chunks are read whole)
        short_keys = {k for ms in own.values() if (k := joins.short_key(ms[0].name)) is not None}
        fits = {eid: ends for eid, ms in own.items()
                if (ends := joins.full_name_ends(ms[0].name)) is not None and not short_keys.isdisjoint(ends)}
        added_chunks = {m.chunk_id for m in added}
        stored_called = index_rows.called_in(store, {m.chunk_id for eid in fits for m in own[eid]
                                                     if m.type == joins.PERSON
                                                     and m.chunk_id not in added_chunks})
        for eid, ends in fits.items():
            for m in (m for m in own[eid] if m.type == joins.PERSON):
                source = self.called_added if m.chunk_id in added_chunks else stored_called
                called = source.get(m.chunk_id, {})
                for alias in called.get(m.name, ()):
                    if joins.short_key(alias) in ends and (short := ids.entity_id(alias)) in chunks:
                        chunks[short].add(m.chunk_id)
        # (its name and type alone: a name said in 3,000 chunks had their descriptions sorted)
        return ([merge.merge_entity(eid, ms, settings.index.entity_types, []) for eid, ms in sorted(own.items())],
                chunks, {eid: Counter(t for _c, t in {(m.chunk_id, m.type) for m in ms}) for eid, ms in own.items()})

    def _mentions_again(self, store: Store, chunks: set[str]) -> tuple[list[merge.EntityMention],
                                                                        list[merge.RelationshipMention]]:
        """The mentions of live ``chunks``, from the extractions they are published with."""
        ent_m: list[merge.EntityMention] = []
        rel_m: list[merge.RelationshipMention] = []
        extractions = index_rows.live_extractions(store, chunks) if chunks else {}
        for chunk_id in sorted(extractions):
            e, r, _claims = merge.mentions_of(chunk_id, extractions[chunk_id])   # (its claims stay)
            ent_m += e
            rel_m += r
        return ent_m, rel_m

    def _remerge_entities(self, store: Store, affected: set[str], new_e: dict[str, list[merge.EntityMention]],
                          removed: set[str], settings: Settings,
                          new_input: Callable[[list[str], list[str]], list[str] | None],
                          jobs: list[tuple[str, str, list[str]]]) -> set[str]:
        """Merges each affected entity from its remaining and new mentions (or drops it), adding
        the summaries to write to ``jobs``; returns the entities now shown under another name."""
        retry = self.retry_summaries
        old_sources = index_rows.sources(store, "entity_sources", "entity_id", affected)
        renamed: set[str] = set()
        for eid in sorted(affected):
            old_rows = old_sources.get(eid, [])
            kept = [merge.EntityMention(eid, r["chunk_id"], r["name"], r["type"], r["description"])
                    for r in old_rows if r["chunk_id"] not in removed]
            mentions = kept + new_e.get(eid, [])
            if not mentions:
                self.entities.pop(eid, None)
                self.deleted_entities.add(eid)
                continue
            before = merge.unique_descriptions(r["description"] for r in old_rows)
            descriptions = merge.descriptions_after(
                before, (r["description"] for r in old_rows if r["chunk_id"] in removed),
                (m.description for m in new_e.get(eid, [])), (m.description for m in kept))
            ent = merge.merge_entity(eid, mentions, settings.index.entity_types, descriptions)
            previous = self.entities.get(eid)
            if previous is not None and new_input(descriptions, before) is None and previous.name == ent.name \
                    and eid not in retry:
                ent.description = previous.description
            elif len(descriptions) > 1:
                jobs.append((eid, ent.name, descriptions))
            else:
                ent.description = descriptions[0] if descriptions else ""
                self.answers[eid] = None   # (no model's answer now, whatever it was)
                self.unusable.pop(eid, None)   # (nor a summary to ask: none is settled)
            if previous is not None and previous.name != ent.name:
                renamed.add(eid)
            self.entities[eid] = ent
            self.changed_entities.add(eid)
        return renamed

    def _remerge_relationships(self, store: Store, affected: set[str],
                               new_r: dict[str, list[merge.RelationshipMention]], removed: set[str],
                               renamed: set[str], new_input: Callable[[list[str], list[str]], list[str] | None],
                               jobs: list[tuple[str, str, list[str]]]) -> None:
        """Merges each affected relationship from its remaining and new mentions (or drops it),
        noting the entities whose edges moved and adding the summaries to write to ``jobs``."""
        retry = self.retry_summaries
        self.describe(store, affected)   # (a relationship whose mentions are as they were keeps its own)
        old_sources = index_rows.sources(store, "relationship_sources", "relationship_id", affected)
        for rid in sorted(affected):
            old_rows = old_sources.get(rid, [])
            kept_rows = [r for r in old_rows if r["chunk_id"] not in removed]
            mentions_r = new_r.get(rid, [])
            if not kept_rows and not mentions_r:
                gone = self.relationships.pop(rid, None)
                if gone is not None:
                    self.left_source.setdefault(rid, gone.source)
                    self.rewired |= {gone.source, gone.target}
                    if gone.source != gone.target:
                        self.degree_delta.update({gone.source: -1, gone.target: -1})
                self.deleted_relationships.add(rid)
                continue
            prev = self.relationships.get(rid)
            src, dst = (mentions_r[0].source, mentions_r[0].target) if mentions_r else (prev.source, prev.target)
            kept_r = [merge.RelationshipMention(rid, src, dst, r["chunk_id"], r["description"], r["strength"])
                      for r in kept_rows]
            all_m = kept_r + mentions_r
            before = merge.unique_descriptions(r["description"] for r in old_rows)
            descriptions = merge.descriptions_after(
                before, (r["description"] for r in old_rows if r["chunk_id"] in removed),
                (m.description for m in mentions_r), (r["description"] for r in kept_rows))
            rel = merge.merge_relationship(rid, all_m, descriptions)
            if prev is not None and new_input(descriptions, before) is None and rid not in retry \
                    and src not in renamed and dst not in renamed:
                rel.description = prev.description
            elif len(descriptions) > 1:
                names = f"{self.entities[src].name if src in self.entities else src} and " \
                        f"{self.entities[dst].name if dst in self.entities else dst}"
                jobs.append((rid, names, descriptions))
            else:
                self.answers[rid] = None
                self.unusable.pop(rid, None)
            if prev is None or prev.weight != rel.weight or (prev.source, prev.target) != (src, dst):
                self.rewired |= {src, dst}
            if prev is None and src != dst:
                self.degree_delta.update((src, dst))
            if prev is not None and prev.source != rel.source:
                self.left_source.setdefault(rid, prev.source)
            self.relationships[rid] = rel
            self.changed_relationships.add(rid)

    def published_unusable(self) -> dict[str, int]:
        """The elements whose summary answers were unusable, and on how many runs in a row, as
        published (elements that left the graph are forgotten)."""
        return {k: n for k, n in sorted(self.unusable.items()) if k in self.entities or k in self.relationships}

    def published(self, store: Store, communities: list[Community],
                  assignments: dict[str, tuple[str, str]]) -> GraphState:
        """This run's graph as the next run's starting point: what ``load`` would read from
        the store once this run is published (the elements are shared, not copied)."""
        st = GraphState()
        # (an unchanged graph's is the published one's; a changed one not clustered has none made)
        st.graph_edges = self._graph_made or (self.graph_edges if self.same_graph() else None)
        st.version, st.stamp = store.version, store.get_meta("published_at", "") or ""
        st.retry_summaries = set(self.fallbacks)
        st.unusable = self.published_unusable()
        st.report_unusable = dict(sorted(self.report_unusable.items()))
        st.report_held = dict(sorted(self.report_held.items()))
        st.counted = True
        st.entities, st.relationships = self.entities, self.relationships
        st.claims = self.claims  # in any order: a report context sorts them
        st.joins = self.joins
        st.code_headings = self.code_headings
        st.in_id_order = self.in_id_order
        st.by_source = self.relationships_by_source()
        # The published degrees and weights, brought up to date from what changed (every
        # element whose degree, combined degree or weight moved is among the changed ones,
        # see ``finish_graph``): rebuilding them from 200,000 relationships took a tenth of a
        # second of every update. This state is let go once published, so they are moved.
        st.old_degree, st.old_combined, st.old_weight = self.old_degree, self.old_combined, self.old_weight
        self.old_degree, self.old_combined, self.old_weight = {}, {}, {}
        for eid in self.deleted_entities:
            st.old_degree.pop(eid, None)
        for eid in self.changed_entities:
            if (e := self.entities.get(eid)) is not None:
                st.old_degree[eid] = e.degree
        for rid in self.deleted_relationships:
            st.old_combined.pop(rid, None)
            st.old_weight.pop(rid, None)
        for rid in self.changed_relationships:
            if (r := self.relationships.get(rid)) is not None:
                st.old_combined[rid], st.old_weight[rid] = r.combined_degree, r.weight
        st.old_communities = sorted(communities, key=lambda c: c.id)
        st.old_contexts = {cid: context for cid, (context, _report) in assignments.items()}
        st.old_reports = {cid: report for cid, (_context, report) in assignments.items()}
        return st

    def set_description(self, element_id: str, text: str) -> None:
        target = self.entities if element_id.startswith("ent-") else self.relationships
        target[element_id].description = text

    def relationships_by_source(self) -> dict[str, list[str]]:
        """Entity -> ids of the relationships it is the source of, in id order: made once from
        the whole graph, then brought up to date from what this run merged (grouping 200,000
        relationships was a fifth of a second of every update's reports)."""
        if self.by_source is None:
            self.by_source = {}
            # (in id order already once ``finish_graph`` has run: sorting 200,000 ids again and
            # looking each one up was half of the 0.13 s this took)
            ordered = self.relationships.items() if self.in_id_order else sorted(self.relationships.items())
            for rid, r in ordered:
                self.by_source.setdefault(r.source, []).append(rid)
            self.left_source.clear()
            return self.by_source
        by_source = self.by_source
        for rid, source in self.left_source.items():
            ids = by_source.get(source)
            if ids is not None and rid in ids:
                ids.remove(rid)
                if not ids:
                    del by_source[source]
        self.left_source.clear()
        for rid in self.changed_relationships:
            r = self.relationships.get(rid)
            if r is not None:
                ids = by_source.setdefault(r.source, [])
                if rid not in ids:
                    bisect.insort(ids, rid)
        return by_source

    def new_entities(self) -> set[str]:
        """The entities the published version did not hold (each was merged this run, so is
        among the changed ones)."""
        return {e for e in self.changed_entities if e in self.entities and e not in self.old_degree}

    def same_graph(self) -> bool:
        """Whether the entities, edges and weights are those of the published version.

        Worked out from what changed: an element enters the graph, or has its weight set, only
        as it is merged, which counts it as changed (comparing every entity and weight was
        a fifth of a second of an update with nothing to do)."""
        return (len(self.entities) == len(self.old_degree) and not self.new_entities()
                and len(self.relationships) == len(self.old_weight)
                and all(self.old_weight.get(rid) == r.weight for rid in self.changed_relationships
                        if (r := self.relationships.get(rid)) is not None))

    def clustered_graph(self, store: Store) -> GraphEdges:
        """The graph as clustering reads it, once ``finish_graph`` has put the entities in id
        order: from the published graph's, when this state carries it, and the edges now of the
        entities whose edges moved (their relationships in the store, and those merged this
        run), not from every relationship again."""
        if self._graph_made is None:
            nodes = list(self.entities)
            if self.graph_edges is None:
                self._graph_made = GraphEdges.of(nodes, ((r.source, r.target, r.weight)
                                                         for r in self.relationships.values()))
            else:
                relationships = self.relationships
                touching = (self.changed_relationships | index_rows.ids_touching(store, self.rewired)) \
                    if self.rewired else set()
                self._graph_made = self.graph_edges.updated(nodes, self.rewired, [
                    (r.source, r.target, r.weight) for rid in sorted(touching) if (r := relationships.get(rid))])
        return self._graph_made

    def finish_graph(self, store: Store, *, check: bool = False) -> None:
        """Degrees for the whole graph; elements whose degree moved count as changed.

        Counted from the published degrees and the relationships this run added or removed:
        only entities that gained or lost a neighbour, and the relationships touching them or
        changed, are visited (recounting 200,000 relationships was a second of every update).
        ``check`` (tests) recounts everything and fails if the two differ.
        """
        # In id order. A graph in id order that no element entered this run (deleting keeps the
        # order) is so already: re-sorting 200,000 relationships was a third of a second of an
        # update that deleted a document, or changed nothing.
        if not self.in_id_order or self.new_entities():
            self.entities = {k: self.entities[k] for k in sorted(self.entities)}  # keys sort faster than items
        if not self.in_id_order or any(r not in self.old_weight for r in self.changed_relationships
                                       if r in self.relationships):
            self.relationships = {k: self.relationships[k] for k in sorted(self.relationships)}
        self.in_id_order = True
        if not self.counted:  # a first index, or one published before degrees were kept this way
            full = neighbour_counts(self.relationships.values())
            degree: Callable[[str], int] = lambda e: full.get(e, 0)  # noqa: E731
            entities, relationships = self.entities, self.relationships
        else:
            degree = lambda e: self.old_degree.get(e, 0) + self.degree_delta.get(e, 0)  # noqa: E731
            moved = {e for e, n in self.degree_delta.items() if n}
            entities = {e: self.entities[e] for e in sorted(moved | self.changed_entities) if e in self.entities}
            touching = self.changed_relationships | index_rows.ids_touching(store, moved)
            relationships = {r: self.relationships[r] for r in sorted(touching) if r in self.relationships}
        for e in entities.values():
            e.degree = degree(e.id)
            if self.old_degree.get(e.id) != e.degree:
                self.changed_entities.add(e.id)
        for r in relationships.values():
            r.combined_degree = degree(r.source) + degree(r.target)
            if self.old_combined.get(r.id) != r.combined_degree:
                self.changed_relationships.add(r.id)
        if check:
            full = neighbour_counts(self.relationships.values())
            wrong = [e.id for e in self.entities.values() if e.degree != full.get(e.id, 0)]
            wrong += [r.id for r in self.relationships.values()
                      if r.combined_degree != full.get(r.source, 0) + full.get(r.target, 0)]
            if wrong:
                raise AssertionError(f"degrees counted from the changes differ from a recount: {wrong[:5]}")
        # Every changed relationship is published whole: one whose combined degree alone moved
        # was not merged, and its description is still the store's.
        self.describe(store, self.changed_relationships)



class GraphCache:
    """The graph a long-running process published last, kept for its next sync.

    Reading the graph back from the store was the largest part of a small update to a large
    index. The kept graph is used only while the store still holds the version it was published
    as (another writer, or a store replaced under the daemon, makes the next sync read the
    store), and only once: a sync takes it and, when it publishes, leaves its own.
    """

    def __init__(self) -> None:
        self._state: GraphState | None = None
        self._db: Path | None = None

    def take(self, store: Store) -> GraphState | None:
        state, self._state = self._state, None
        if state is None or self._db != store.path.resolve() or state.version != store.version \
                or state.stamp != (store.get_meta("published_at", "") or ""):
            return None
        return state

    def keep(self, state: GraphState, db: Path) -> None:
        self._state, self._db = state, db.resolve()


def check_cached(store: Store, cached: GraphState, loaded: GraphState) -> None:
    """Tests: a kept graph equals the graph read from the store (``store``), the descriptions
    it has read too (one it has not is read from the store when a step needs it)."""
    loaded.describe(store, list(loaded.relationships))
    kept = {rid: msgspec.structs.replace(r, description=loaded.relationships[rid].description)
            if r.description is None and rid in loaded.relationships else r
            for rid, r in cached.relationships.items()}
    if kept != loaded.relationships:
        raise AssertionError("the kept graph's relationships differ from the store's")
    for name in ("entities", "claims", "old_degree", "old_combined", "old_weight",
                 "old_contexts", "old_reports", "retry_summaries", "unusable", "report_unusable", "report_held", "counted",
                 "version", "joins"):
        if getattr(cached, name) != getattr(loaded, name):
            raise AssertionError(f"the kept graph's {name} differ from the store's")
    if cached.by_source is not None and cached.relationships_by_source() != loaded.relationships_by_source():
        raise AssertionError("the kept graph's relationships by source differ from the store's")
    if [(c.id, c.level, c.parent, c.members) for c in cached.old_communities] != \
            [(c.id, c.level, c.parent, c.members) for c in loaded.old_communities]:
        raise AssertionError("the kept graph's communities differ from the store's")


def check_rewired(store: Store, state: GraphState, changed: set[str]) -> None:
    """Tests: every entity with an edge added, removed or reweighted since the published
    version (found here from the store) is among ``changed``."""
    old = index_rows.relationship_weights(store)
    new = {(r.source, r.target): r.weight for r in state.relationships.values()}
    moved = {n for pair in old.keys() ^ new.keys() for n in pair}
    moved |= {n for pair in old.keys() & new.keys() if old[pair] != new[pair] for n in pair}
    missing = (moved & set(state.entities)) - changed
    if missing:
        raise AssertionError(f"rewired entities not counted as changed: {sorted(missing)[:5]}")


def dirty_communities(state: GraphState, communities: list[Community], *, same_settings: bool) -> set[str]:
    """Communities whose report context may differ from the published one, not counting their
    children's reports (checked as the levels are written): new ones, those whose members
    changed, and those holding a changed entity, an internal relationship that changed, or a
    member a claim naming it (as subject or object) came to or left, or whose claim names a changed
    entity at its other end. Everything when the context settings changed."""
    old = {c.id: c for c in state.old_communities}
    if not same_settings:
        return {c.id for c in communities}
    touched = state.changed_entities | state.claim_ends_changed
    # Where the ends of the changed relationships and the other ends of claims naming a changed
    # entity live, at each level: only theirs are looked up (a map of every member of every
    # community was a tenth of a second of each update).
    ends = [(r.source, r.target) for rid in state.changed_relationships
            if (r := state.relationships.get(rid)) is not None]   # (a deleted one changed its ends' degrees)
    # A claim is in the contexts of its subject's and its object's communities, which may be
    # others, and names both: one end renamed changes its line where the other end lives.
    changed = state.changed_entities
    others: set[str] = set()
    for claim in state.claims.values() if changed else ():
        if claim.object_id in changed:
            others.add(claim.subject_id)
        if claim.subject_id in changed and claim.object_id:
            others.add(claim.object_id)
    wanted = {e for pair in ends for e in pair} | others
    dirty: set[str] = set()
    where: dict[tuple[int, str], str] = {}
    for c in communities:
        before = old.get(c.id)
        if before is None or before.level != c.level or (
                before.members != c.members and set(before.members) != set(c.members)) \
                or not touched.isdisjoint(c.members):
            dirty.add(c.id)
        for m in wanted.intersection(c.members):
            where[(c.level, m)] = c.id
    levels = {c.level for c in communities}
    for source, target in ends:
        for level in levels:
            home = where.get((level, source))
            if home is not None and home == where.get((level, target)):
                dirty.add(home)
    for other in others:
        for level in levels:
            if (level, other) in where:
                dirty.add(where[(level, other)])
    return dirty
