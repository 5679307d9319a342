"""The plain records that flow between stages.

Stages pass these msgspec Structs over their streams; nothing here touches SQL or HTTP.
Extraction records keep the names the model wrote; ids are derived later (``ids.py``) when
records are merged into entities and relationships.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec


class Document(msgspec.Struct, frozen=True):
    id: str                 # doc-<hash of text>
    path: str               # where it was read from (metadata, not identity)
    title: str
    text: str


class Chunk(msgspec.Struct, frozen=True):
    id: str                 # chk-<hash of text>
    doc_id: str
    idx: int                # position in the document
    text: str
    tokens: int


class Spans(NamedTuple):
    """Where each chunk of a cut text lies, for the next cut of a changed version to resume
    from (``chunker.cut_document``): chunk k's part of the text is ``text[starts[k]:ends[k]]``
    (from its body's start, the first from 0, to the next chunk's), ``digests[k]`` its digest
    (``chunker._digest``)."""

    starts: list[int]
    ends: list[int]
    digests: list[bytes]


class EntityRecord(msgspec.Struct, frozen=True):
    name: str
    type: str
    description: str


class RelationshipRecord(msgspec.Struct, frozen=True):
    source: str             # entity names as written
    target: str
    description: str
    strength: float = 5.0   # 1..10


class ClaimRecord(msgspec.Struct, frozen=True):
    subject: str
    object: str | None
    type: str
    status: str             # TRUE | FALSE | SUSPECTED
    start_date: str | None
    end_date: str | None
    description: str
    source_text: str


class Extraction(msgspec.Struct):
    """What one chunk yielded, after all gleaning rounds."""
    entities: list[EntityRecord] = msgspec.field(default_factory=list)
    relationships: list[RelationshipRecord] = msgspec.field(default_factory=list)
    claims: list[ClaimRecord] = msgspec.field(default_factory=list)
    dropped: int = 0        # lines that could not be parsed
    rounds: int = 1         # model calls that produced records (1 + gleanings)
    checks: int = 0         # gleaning checks asked (one before each gleaning, when index.glean_check is on)
    # Offline only: the lone capitalised words read as no name for opening a sentence alone
    # ("Ada was ..."), as written, sorted; ``joins`` reads them against a document's title
    openers: list[str] = msgspec.field(default_factory=list)
    # Offline only: each name the chunk also said shorter -> those shorter names as written
    # ("Margaret Hollis" -> ["Margaret"]), which ``joins`` reads as said beside it (as data: a
    # description's text is the document's own words, "(Also called X.)" among them)
    called: dict[str, list[str]] = msgspec.field(default_factory=dict)


class Entity(msgspec.Struct):
    """A merged entity: every live mention of one normalized name."""
    id: str
    name: str
    type: str
    description: str                              # summarized when several sources differ
    mentions: int
    degree: int = 0


class Relationship(msgspec.Struct):
    """A merged, undirected relationship between two entities (source id < target id)."""
    id: str
    source: str
    target: str
    description: str | None  # None while a graph read back leaves it in the store (GraphState.describe)
    weight: float
    mentions: int
    combined_degree: int = 0


class Claim(msgspec.Struct):
    id: str
    subject_id: str
    object_id: str | None
    type: str
    status: str
    start_date: str | None
    end_date: str | None
    description: str
    source_text: str
    chunk_id: str


class Community(msgspec.Struct):
    id: str                 # stable across updates
    level: int
    parent: str | None
    members: list[str]      # entity ids, sorted


class Report(msgspec.Struct):
    key: str                # hash of what produced it
    title: str
    summary: str
    rating: float
    rating_explanation: str
    findings: list[dict]    # {summary, explanation, entities: [ids], relationships: [ids]}
    text: str               # Markdown
    tokens: int
    elements: dict          # {"entities": [...], "relationships": [...], "reports": [...]}
    extractive: bool = False
    answer: str | None = None   # the key in llm_cache of the model's answer it is (not stored in its row)
