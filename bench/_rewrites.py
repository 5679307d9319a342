"""Why an update wrote the reports it did (``incremental.py --explain``): each report written
anew, its community's context before and after compared element by element, from what the
index stores (a report keeps the id and a hash of each line of its context: ``elements``).

A change is put down to the document when it is one of the document's entities, relationships
or claims (a member it brought or took away, an edge it made or left, a description it added
to or took from); else it is the clustering's (a member Leiden moved that the document never
named), a child's report (a context too large for the budget shows its children's reports), or
the selection (a context too large for the budget shows what fits, by degree, of members that
stayed). Each community rewritten is counted once, under the first of those that applies, in
that order; a community new at this step under ``new community``. (A report stored before
reports kept their lines, ``reports.build_context``, has none: its every element shows as come.)
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from streamrag.store import Store

CAUSES = ("new community", "document", "clustering", "child report", "selection", "unknown")


@dataclass
class Snapshot:
    """The communities of an index and the contexts of their reports, as stored."""

    communities: dict[str, tuple[int, frozenset[str], str]]   # id -> (level, members, report key)
    lines: dict[str, dict[str, str]]                           # report key -> element id -> line hash
    reports: set[str]                                          # every stored report's key
    ends: dict[str, tuple[str, str]]                           # relationship id -> its two entities
    docs: dict[str, dict[str, set[str]]] = field(default_factory=dict)   # path -> its elements


def snapshot(db: Path, documents: list[str] = ()) -> Snapshot:
    """What ``db`` holds now; with the entities, relationships and claims of ``documents``
    (their paths as indexed, or the ends of them: ``doc_00201.txt``)."""
    store = Store(db, readonly=True)
    try:
        members: dict[str, set[str]] = {}
        for r in store.query("SELECT community_id, entity_id FROM community_members"):
            members.setdefault(r["community_id"], set()).add(r["entity_id"])
        communities = {r["id"]: (r["level"], frozenset(members.get(r["id"], ())), r["report_key"])
                       for r in store.query("SELECT id, level, report_key FROM communities")}
        lines = {}
        for r in store.query("SELECT key, elements FROM reports"):
            elements = json.loads(r["elements"])
            lines[r["key"]] = dict(x.split("=", 1) for x in elements.get("lines", ()))
        ends = {r["id"]: (r["source"], r["target"]) for r in store.query("SELECT id, source, target FROM relationships")}
        docs = {name: _document(store, name) for name in documents}
        return Snapshot(communities, lines, set(lines), ends, docs)
    finally:
        store.close()


def _document(store: Store, name: str) -> dict[str, set[str]]:
    chunks = [r["chunk_id"] for r in store.query(
        "SELECT DISTINCT dc.chunk_id FROM files f JOIN document_chunks dc ON dc.doc_id = f.doc_id "
        "WHERE f.path = ? OR f.path LIKE ?", (name, "%/" + name))]
    marks = ",".join("?" * len(chunks))
    return {
        "entities": {r["entity_id"] for r in store.query(
            f"SELECT entity_id FROM entity_sources WHERE chunk_id IN ({marks})", chunks)},
        "relationships": {r["relationship_id"] for r in store.query(
            f"SELECT relationship_id FROM relationship_sources WHERE chunk_id IN ({marks})", chunks)},
        "claims": {r["id"] for r in store.query(f"SELECT id FROM claims WHERE chunk_id IN ({marks})", chunks)},
    }


def explain(before: Snapshot, after: Snapshot, document: str) -> dict:
    """The reports ``after`` wrote anew since ``before``, each with its community's level and
    size, whether its context overflowed the budget, what changed in it and the cause (see the
    module docstring); ``document`` the one changed (its elements from either snapshot)."""
    doc = {k: before.docs.get(document, {}).get(k, set()) | after.docs.get(document, {}).get(k, set())
           for k in ("entities", "relationships", "claims")}
    mine = doc["entities"] | doc["relationships"] | doc["claims"]
    rows = []
    for cid, (level, members, key) in sorted(after.communities.items(), key=lambda x: (x[1][0], x[0])):
        if key in before.reports:
            continue   # kept, or found written before
        now = after.lines.get(key, {})
        row = {"id": cid, "level": level, "size": len(members),
               "overflows": any(k[:1] == "C" for k in now) or not members <= now.keys()}
        was = before.communities.get(cid)
        if was is None:
            row["cause"], row["changes"] = "new community", {}
            rows.append(row)
            continue
        old_members, old = was[1], before.lines.get(was[2], {})
        changes: Counter[str] = Counter()
        causes: set[str] = set()
        for eid in sorted(old.keys() | now.keys()):
            if old.get(eid) == now.get(eid):
                continue
            kind = {"ent": "entity", "rel": "relationship", "clm": "claim"}.get(eid[:3], "child report")
            how = "changed" if eid in old and eid in now else "came" if eid in now else "went"
            if kind == "child report":
                why = "child report"
            elif eid in mine:
                why = "document"
            elif how == "changed":
                why = "unknown"   # (a line the document did not write: a renamed end)
            else:
                ends = {eid} if kind == "entity" else set(after.ends.get(eid) or before.ends.get(eid) or ())
                moved = ends - (members & old_members)   # an end that came or went
                why = "clustering" if moved and not moved & doc["entities"] else \
                    "document" if moved else "selection"
            changes[f"{kind} {how} ({why})"] += 1
            causes.add(why)
        row["cause"] = next((c for c in CAUSES[1:] if c in causes), "unknown")
        row["changes"] = dict(sorted(changes.items()))
        rows.append(row)
    return {"rewritten": len(rows), "by_cause": dict(Counter(r["cause"] for r in rows)),
            "by_level": dict(sorted(Counter(r["level"] for r in rows).items())),
            "name": document, "document": {k: len(v) for k, v in doc.items()}, "communities": rows}


def summed(told: list[dict]) -> dict:
    """What ``explain`` said of several changes, together: the reports rewritten, by cause and
    by level, and the communities rewritten for a cause other than the document's (each with
    the document changed)."""
    causes: Counter[str] = Counter()
    levels: Counter[int] = Counter()
    for t in told:
        causes.update(t["by_cause"])
        levels.update({int(k): v for k, v in t["by_level"].items()})
    return {"changes": len(told), "rewritten": sum(t["rewritten"] for t in told),
            "by_cause": dict(causes.most_common()), "by_level": dict(sorted(levels.items())),
            "not_the_document": [{**r, "document": t["name"]} for t in told for r in t["communities"]
                                 if r["cause"] not in ("document", "new community")]}
