"""Merging per-chunk extractions into entities, relationships and claims. Pure functions.

Rules, chosen so that the merged graph depends only on the *set* of live chunk extractions
(whatever order they arrived in, and whether they were indexed at once or over many updates):

* Entities merge on ``ids.normalize_name``, and a short name on the full name it joins
  (``joins``, offline: "Scrooge" on "Ebenezer Scrooge"). The shown name is the most frequent
  surface form of the entity's own name (ties: alphabetical). The type is the majority of the typed mentions; a tie goes to the type
  listed first in ``index.entity_types``, then alphabetical; no typed mention gives "unknown".
* A relation whose end was not listed as an entity in the same chunk gets an untyped mention of
  that entity from the chunk, so every relationship end is an entity with support of its own and
  removing a chunk never strands an edge.
* So does a claim's subject (and object) that no entity line of its chunk named: a report or an
  answer finds a claim through its subject, so a subject that is no entity left the claim stored
  but never shown.
* Relationships are undirected and merge on the unordered pair of entity ids. Weight is the sum
  of ``strength / 10`` over supporting mentions: each extraction that states the link adds up to
  1, so weight grows with the number of supporting extractions, scaled by how strongly each
  stated it.
* A claim is stored once per chunk that makes it (its row is its provenance: a chunk's removal
  withdraws exactly its own). Those that say the same (subject, object, type, status, dates and
  description) are shown as one, by the smallest id among them (``distinct_claims``): a sentence
  in the overlap of two chunks, or copied into two files, was two lines of each context.
* ``mentions`` counts distinct supporting chunks. Sources are sorted, so equal inputs give
  byte-equal outputs.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import NamedTuple

from streamrag import ids
from streamrag.records import Claim, Entity, Extraction, Relationship


class EntityMention(NamedTuple):
    entity_id: str
    chunk_id: str
    name: str
    type: str
    description: str


class RelationshipMention(NamedTuple):
    relationship_id: str
    source: str          # entity id, source < target
    target: str
    chunk_id: str
    description: str
    strength: float


def mentions_of(chunk_id: str, extraction: Extraction, shared: dict[str, str] | None = None,
                ) -> tuple[list[EntityMention], list[RelationshipMention], list[Claim]]:
    """The entity, relationship and claim mentions one chunk's extraction contributes.

    ``shared``: the strings of the mentions made before (ids, names, types, descriptions), each
    kept once: a mention holds the copy found there, and adds its new ones. A first index holds
    every mention of every chunk until it publishes, and equal strings are the rule (a sentence
    is the description of every pair of names in it, an id that of every mention of one
    element): the mentions of 3,000 documents took 52 MB with a copy of each, 34 MB so."""
    share = shared.setdefault if shared is not None else _same
    entities: dict[tuple[str, str], EntityMention] = {}
    for rec in extraction.entities:
        name = " ".join(rec.name.split())
        if not ids.normalize_name(name):
            continue
        name = share(name, name)
        eid = ids.entity_id(name)
        m = EntityMention(share(eid, eid), chunk_id, name, share(kind := rec.type.strip().lower(), kind),
                          share(text := " ".join(rec.description.split()), text))
        entities.setdefault((m.entity_id, m.description), m)
    listed = {eid for eid, _ in entities}
    rels: dict[tuple[str, str], RelationshipMention] = {}
    for rec in extraction.relationships:
        a, b = " ".join(rec.source.split()), " ".join(rec.target.split())
        if not ids.normalize_name(a) or not ids.normalize_name(b):
            continue
        ea, eb = ids.entity_id(a), ids.entity_id(b)
        if ea == eb:
            continue
        ea, eb = share(ea, ea), share(eb, eb)
        for eid, name in ((ea, a), (eb, b)):
            if eid not in listed:
                entities.setdefault((eid, ""), EntityMention(eid, chunk_id, share(name, name), "", ""))
                listed.add(eid)
        src, dst = sorted((ea, eb))
        rid = ids.relationship_id(src, dst)
        m = RelationshipMention(share(rid, rid), src, dst, chunk_id,
                                share(text := " ".join(rec.description.split()), text), float(rec.strength))
        key = (m.relationship_id, m.description)
        if key not in rels or rels[key].strength < m.strength:
            rels[key] = m
    claims = []
    for c in extraction.claims:
        if not ids.normalize_name(c.subject):
            continue
        obj = c.object if c.object and ids.normalize_name(c.object) else None
        for name in (c.subject, obj):
            if name and (eid := ids.entity_id(name)) not in listed:
                name = " ".join(name.split())
                entities.setdefault((eid, ""), EntityMention(share(eid, eid), chunk_id, share(name, name), "", ""))
                listed.add(eid)
        claims.append(Claim(
            id=ids.claim_id(chunk_id, c.subject, obj or "", c.type, c.description),
            subject_id=ids.entity_id(c.subject), object_id=ids.entity_id(obj) if obj else None,
            type=c.type, status=c.status, start_date=c.start_date, end_date=c.end_date,
            description=c.description, source_text=c.source_text, chunk_id=chunk_id))
    return list(entities.values()), list(rels.values()), claims


def claim_said(c: Claim) -> tuple:
    """What a claim says, apart from the chunk saying it: claims saying the same are one."""
    return (c.subject_id, c.object_id, c.type, c.status, c.start_date, c.end_date, c.description)


def distinct_claims(claims: Iterable[Claim]) -> list[Claim]:
    """One of each claim ``claims`` hold (``claim_said``), that of the smallest id, in id order:
    the same whatever the order they came in, or which other chunks say them."""
    first: dict[tuple, Claim] = {}
    for c in sorted(claims, key=lambda c: c.id):
        first.setdefault(claim_said(c), c)
    return list(first.values())


def joined(entities: list[EntityMention], relationships: list[RelationshipMention], to: dict[str, str],
           kinds: Collection[str] | None = None) -> tuple[list[EntityMention], list[RelationshipMention]]:
    """Chunks' mentions (``mentions_of``'s) with each entity id that ``to`` joins to another
    (``joins.joins``) replaced by that one, kept as ``mentions_of`` keeps them: one entity mention
    per chunk, entity and description, the strongest relationship mention per chunk, relationship
    and description, and none between a name and the full name it joins. ``kinds``: the types a
    mention is joined in (``joins.JOINING``; None: any); a mention of another stays its own
    name's, and so do the relationships of a chunk that says the name only so."""
    if not to:
        return entities, relationships
    if kinds is None:
        apart: set[tuple[str, str]] = set()
    else:
        read = {(m.chunk_id, m.entity_id, m.type in kinds) for m in entities if m.entity_id in to}
        apart = {(c, e) for c, e, joins in read if not joins and (c, e, True) not in read}
    ents: dict[tuple[str, str, str], EntityMention] = {}
    for m in entities:
        eid = m.entity_id if kinds is not None and m.type not in kinds else to.get(m.entity_id, m.entity_id)
        ents.setdefault((m.chunk_id, eid, m.description), m._replace(entity_id=eid))
    rels: dict[tuple[str, str, str], RelationshipMention] = {}
    for m in relationships:
        a, b = (e if (m.chunk_id, e) in apart else to.get(e, e) for e in (m.source, m.target))
        if a == b:
            continue
        if (a, b) != (m.source, m.target):
            src, dst = sorted((a, b))
            m = m._replace(relationship_id=ids.relationship_id(src, dst), source=src, target=dst)
        key = (m.chunk_id, m.relationship_id, m.description)
        if key not in rels or rels[key].strength < m.strength:
            rels[key] = m
    return list(ents.values()), list(rels.values())


def _same(s: str, _default: str) -> str:
    return s


def _pick_type(types: Iterable[str], order: Sequence[str]) -> str:
    counts = Counter(t for t in types if t)
    if not counts:
        return "unknown"
    rank = {t.lower(): i for i, t in enumerate(order)}
    return min(counts, key=lambda t: (-counts[t], rank.get(t, len(rank)), t))


def unique_descriptions(descriptions: Iterable[str]) -> list[str]:
    """Distinct non-empty descriptions, sorted (the input of a summary)."""
    return sorted({d for d in descriptions if d})


def descriptions_after(before: list[str], unsaid: Iterable[str], said: Iterable[str],
                       kept: Iterable[str]) -> list[str]:
    """``unique_descriptions`` of an element's mentions after a change, from those before it
    (``before``: sorted, distinct) and the descriptions of the mentions removed (``unsaid``),
    added (``said``) and kept (``kept``, looked through only when one unsaid may be gone): a hub
    named in every chunk of a big log is not sorted again for an edit's few mentions. (Those
    said are merged in by slices, not inserted one by one: a big file added to a hub's index
    moved the whole list for each of its thousands.)"""
    said = {d for d in said if d}
    gone = {d for d in unsaid if d} - said
    if gone:
        gone -= {d for d in kept if d in gone}
    now = [d for d in before if d not in gone] if gone else before
    after: list[str] = []
    start = 0
    for d in sorted(said):
        at = bisect.bisect_left(now, d, start)
        after += now[start:at]
        if at == len(now) or now[at] != d:
            after.append(d)
        start = at
    return after + now[start:]


def merge_entity(entity_id: str, mentions: Sequence[EntityMention],
                 entity_types: Sequence[str] = (), descriptions: list[str] | None = None) -> Entity:
    """One entity from all of its live mentions (description not yet summarized);
    ``descriptions``: theirs (``unique_descriptions``), when the caller has them already."""
    names = Counter(name for _chunk, name in {(m.chunk_id, m.name) for m in mentions})
    # (a short name joined to it is not its name: "Scrooge", said 38 times, shows "Ebenezer Scrooge")
    own = [n for n in names if ids.entity_id(n) == entity_id] or names
    name = min(own, key=lambda n: (-names[n], n))
    if descriptions is None:
        descriptions = unique_descriptions(m.description for m in mentions)
    return Entity(
        id=entity_id, name=name, type=_pick_type((m.type for m in mentions), entity_types),
        description="\n".join(descriptions),
        mentions=len({m.chunk_id for m in mentions}))


def merge_relationship(relationship_id: str, mentions: Sequence[RelationshipMention],
                       descriptions: list[str] | None = None) -> Relationship:
    """One relationship from all of its live mentions (description not yet summarized);
    ``descriptions``: theirs (``unique_descriptions``), when the caller has them already."""
    first = mentions[0]
    if descriptions is None:
        descriptions = unique_descriptions(m.description for m in mentions)
    # A repeat of the same (chunk, description, strength) counts once, as its provenance row does
    # (summed in that order, so a float weight does not move with the mentions' order).
    strengths = [s for _c, _d, s in sorted({(m.chunk_id, m.description, m.strength) for m in mentions})]
    return Relationship(
        id=relationship_id, source=first.source, target=first.target,
        description="\n".join(descriptions),
        weight=round(sum(strengths) / 10.0, 6), mentions=len({m.chunk_id for m in mentions}))


def group(mentions: Iterable[EntityMention] | Iterable[RelationshipMention]) -> dict[str, list]:
    """Mentions grouped by their entity or relationship id."""
    out: dict[str, list] = defaultdict(list)
    for m in mentions:
        out[m[0]].append(m)
    return out
