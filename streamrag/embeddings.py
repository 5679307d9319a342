"""Embeddings of entity descriptions and chunk texts, for the query side (local search ranks
entities by them, basic search chunks; no search reads a report's vector, so none is made:
reports were a third of the embedding tokens of a small corpus).

Only items whose text changed since their stored vector are sent (the row keeps a hash of the
embedded text), so an update embeds what it changed and nothing else. Vectors are stored as
little-endian float32 blobs, written in the publish transaction.
"""

from __future__ import annotations

import array
import sys

from streamrag import index_rows
from streamrag.ids import text_hash
from streamrag.store import Store


def pack(vector: list[float]) -> bytes:
    """``vector`` as little-endian float32s, as the index and the answer cache keep it."""
    floats = array.array("f", vector)
    if sys.byteorder == "big":
        floats.byteswap()
    return floats.tobytes()


def entity_text(name: str, description: str) -> str:
    return f"{name}: {description}"


def fresh_vectors(store: Store, kind: str, model: str) -> tuple[set[str], int]:
    """The ids of the index's ``kind`` items (``entity`` or ``chunk``) whose ``model`` vector was
    made of their present text, and how many items have none such: an offline update or a
    failed embedding stage writes none, and an entity's description changes under its vector.
    (A chunk's id is the hash of its text: any vector of it is of its text.)"""
    have = index_rows.embedded(store, kind, model)
    if kind == "chunk":
        ids = [r[0] for r in store.conn.execute("SELECT id FROM chunks")]
        fresh = {i for i in ids if i in have}
    else:
        rows = store.conn.execute("SELECT id, name, description FROM entities").fetchall()
        ids = [r[0] for r in rows]
        fresh = {i for i, name, description in rows
                 if have.get(i) == text_hash(entity_text(name, description))}
    return fresh, len(ids) - len(fresh)


async def embed_missing(llm, store: Store, model: str, state, change) -> list[tuple]:
    """Vectors for every item about to be published whose text has none yet, as rows of the
    ``embeddings`` table. The caller writes them with the rest of the version, so a reader
    never meets a new vector beside the old row it describes (the LLM cache keeps them safe
    until then). Reports are not embedded: no search reads them."""
    todo: list[tuple[str, str, str]] = []  # (kind, item id, text)
    have = index_rows.embedded(store, "entity", model)
    for e in state.entities.values():
        text = entity_text(e.name, e.description)
        if have.get(e.id) != text_hash(text):
            todo.append(("entity", e.id, text))
    have = index_rows.embedded(store, "chunk", model)
    for chunk_id, text in index_rows.chunk_texts(store, [c for c in change.live if c not in have]):
        todo.append(("chunk", chunk_id, text))
    rows: list[tuple] = []
    for i in range(0, len(todo), 256):
        batch = todo[i:i + 256]
        vectors = await llm.embed([t for _k, _i, t in batch], model=model, stage="embed")
        rows += [(k, item, model, text_hash(t), pack(v)) for (k, item, t), v in zip(batch, vectors, strict=True)]
    return rows
