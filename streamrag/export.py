"""Writing the published index for other tools: JSON, or GraphML for Gephi and yEd."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from xml.sax import saxutils

from streamrag.errors import StreamragError
from streamrag.store import Store


def _load(store: Store) -> dict:
    with store.snapshot():
        docs_of: dict[str, set[str]] = defaultdict(set)
        for r in store.query(
                "SELECT DISTINCT s.entity_id, d.path FROM entity_sources s "
                "JOIN document_chunks dc ON dc.chunk_id = s.chunk_id JOIN documents d ON d.id = dc.doc_id"):
            docs_of[r["entity_id"]].add(r["path"])
        members: dict[str, list[str]] = defaultdict(list)
        for r in store.query("SELECT community_id, entity_id FROM community_members ORDER BY entity_id"):
            members[r["community_id"]].append(r["entity_id"])
        entities = [{**r, "documents": sorted(docs_of.get(r["id"], ()))}
                    for r in store.query("SELECT id, name, type, description, mentions, degree FROM entities ORDER BY id")]
        relationships = store.query("SELECT id, source, target, description, weight, mentions, combined_degree "
                                    "FROM relationships ORDER BY id")
        communities = [{**r, "members": members.get(r["id"], [])} for r in store.query(
            "SELECT id, level, parent, size FROM communities ORDER BY level, id")]
        reports = []
        for r in store.query(
                "SELECT c.id AS community, r.key, r.title, r.summary, r.rating, r.rating_explanation, "
                "r.findings, r.text, r.extractive FROM communities c JOIN reports r ON r.key = c.report_key "
                "ORDER BY c.level, c.id"):
            r["findings"] = json.loads(r["findings"])
            r["extractive"] = bool(r["extractive"])
            reports.append(r)
        claims = store.query("SELECT * FROM claims ORDER BY id")
        documents = store.query("SELECT id, path, title, tokens FROM documents ORDER BY path")
    return {"version": store.version, "documents": documents, "entities": entities,
            "relationships": relationships, "claims": claims, "communities": communities,
            "reports": reports}


def check_out(out: Path, fmt: str) -> None:
    """Refuses an ``out`` that is a folder, before any work is done."""
    if out.is_dir():
        raise StreamragError(f"{out}: is a folder; give the file to write, e.g. "
                             f"{out / ('graph.' + fmt)}")


def export(store: Store, out: Path, fmt: str) -> dict[str, int]:
    """Writes the index to ``out`` as ``json`` or ``graphml``; returns what was written.
    Missing parent folders of ``out`` are created."""
    check_out(out, fmt)
    data = _load(store)
    text = json.dumps(data, indent=1, ensure_ascii=False) if fmt == "json" else _graphml(data)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except BrokenPipeError:
        raise  # OUT is a pipe (/dev/stdout) whose reader left: the CLI exits quietly
    except OSError as e:
        raise StreamragError(f"{out}: cannot write the export ({e.strerror or e}); give a file "
                             "in a folder you can write to") from None
    return {k: len(data[k]) for k in ("entities", "relationships", "communities", "reports")}


# Characters XML 1.0 does not allow at all, even escaped: C0 controls other than tab, newline
# and carriage return, lone surrogates, and U+FFFE / U+FFFF. Document text can hold them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def escape(value) -> str:
    """``value`` as XML character data, without the characters XML 1.0 forbids."""
    return saxutils.escape(_NOT_XML.sub("", str(value)))


def quoteattr(value) -> str:
    """``value`` as a quoted XML attribute, without the characters XML 1.0 forbids."""
    return saxutils.quoteattr(_NOT_XML.sub("", str(value)))


def _graphml(data: dict) -> str:
    """Nodes carry their level-0 community, their deepest community and its level."""
    level0: dict[str, str] = {}
    deepest: dict[str, tuple[int, str]] = {}
    for c in data["communities"]:
        for m in c["members"]:
            if c["level"] == 0:
                level0[m] = c["id"]
            if m not in deepest or c["level"] > deepest[m][0]:
                deepest[m] = (c["level"], c["id"])
    keys = [("name", "node", "string"), ("type", "node", "string"), ("description", "node", "string"),
            ("community", "node", "string"), ("leaf_community", "node", "string"),
            ("level", "node", "int"), ("degree", "node", "int"),
            ("description", "edge", "string"), ("weight", "edge", "double")]
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">']
    for name, kind, typ in keys:
        out.append(f'  <key id="{kind[0]}_{name}" for="{kind}" attr.name="{name}" attr.type="{typ}"/>')
    out.append('  <graph id="streamrag" edgedefault="undirected">')
    for e in data["entities"]:
        level, leaf = deepest.get(e["id"], (-1, ""))
        attrs = {"name": e["name"], "type": e["type"], "description": e["description"],
                 "community": level0.get(e["id"], ""), "leaf_community": leaf, "level": level,
                 "degree": e["degree"]}
        out.append(f"    <node id={quoteattr(e['id'])}>")
        out += [f'      <data key="n_{k}">{escape(str(v))}</data>' for k, v in attrs.items()]
        out.append("    </node>")
    for r in data["relationships"]:
        out.append(f"    <edge id={quoteattr(r['id'])} source={quoteattr(r['source'])} target={quoteattr(r['target'])}>")
        out.append(f'      <data key="e_description">{escape(r["description"])}</data>')
        out.append(f'      <data key="e_weight">{r["weight"]}</data>')
        out.append("    </edge>")
    out += ["  </graph>", "</graphml>"]
    return "\n".join(out) + "\n"
