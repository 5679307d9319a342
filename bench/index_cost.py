"""Tokens, calls, time and memory of indexing a corpus from scratch. Prints one JSON line.

    python bench/index_cost.py --corpus ../shared/corpus/christmas_carol
    python bench/index_cost.py --corpus DIR --offline          # no LLM at all
    python bench/index_cost.py --corpus DIR --api-base http://localhost:8000/v1 --model M

By default the deterministic simulator answers, in its own process with no latency, so the
figures are streamrag's own costs. Settings are the shipped defaults (chunks of 1200 tokens with
100 overlap, one gleaning) unless flags say otherwise; the client's rate limits are lifted for
the simulator. ``--api-base`` measures a real provider with the limits of the settings file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path

import anyio
from _harness import add_port_option, emit, folder, peak_rss_mb, simulator_process

from streamrag import chunker, loader
from streamrag.config import load_settings
from streamrag.pipeline import sync
from streamrag.store import Store


def corpus_facts(corpus: Path, settings) -> tuple[int, int]:
    docs = tokens = 0
    for path in loader.scan([corpus], settings.index.include):
        try:
            documents, _ = loader.read_documents(path, root=corpus, text_field=settings.index.text_field)
        except Exception:  # noqa: BLE001 - the index run records it
            continue
        for d in documents:
            docs += 1
            tokens += sum(c.tokens for c in chunker.chunk_document(
                d, chunk_size=10**9, overlap=0, encoding=settings.index.encoding))
    return docs, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, type=folder)
    ap.add_argument("--offline", action="store_true", help="NLP extraction and extractive reports")
    ap.add_argument("--api-base", help="measure this OpenAI-compatible endpoint instead of the simulator")
    ap.add_argument("--model", help="model for every chat job (default: the settings')")
    ap.add_argument("--embedding-model", default="", help="also embed (e.g. text-embedding-3-small)")
    ap.add_argument("--config", help="settings file")
    ap.add_argument("--chunk-size", type=int)
    ap.add_argument("--gleanings", type=int)
    ap.add_argument("--claims", action="store_true")
    ap.add_argument("--db", help="keep the index here (default: a temporary file)")
    add_port_option(ap)
    args = ap.parse_args()

    overrides: dict = {"index": {}, "llm": {}}
    if args.offline:
        overrides["index"]["extractor"] = "nlp"
    if args.chunk_size:
        overrides["index"]["chunk_size"] = args.chunk_size
    if args.gleanings is not None:
        overrides["index"]["max_gleanings"] = args.gleanings
    if args.claims:
        overrides["index"]["extract_claims"] = True
    if args.model:
        for job in ("extraction", "summary", "report", "rating", "answer"):
            overrides["llm"][f"{job}_model"] = args.model
    overrides["llm"]["embedding_model"] = args.embedding_model
    if not args.api_base and not args.offline:
        overrides["llm"].update(requests_per_minute=0, tokens_per_minute=0)
    env = {k: v for k, v in os.environ.items() if k != "STREAMRAG_API_BASE"}
    settings = load_settings(args.config, env=env, overrides=overrides)

    with contextlib.ExitStack() as stack:
        if not args.offline:
            settings.llm.api_base = args.api_base or stack.enter_context(simulator_process(args.port))
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        db = Path(args.db) if args.db else Path(tmp) / "index.db"
        started = time.monotonic()
        result = anyio.run(lambda: sync([args.corpus], settings, db, root=args.corpus, command="bench"))
        wall = time.monotonic() - started
        store = Store(db, readonly=True)
        by_stage = {r["stage"]: {"calls": r["calls"], "prompt_tokens": r["p"], "completion_tokens": r["c"]}
                    for r in store.query("SELECT stage, count(*) AS calls, sum(prompt_tokens) AS p, "
                                         "sum(completion_tokens) AS c FROM llm_calls WHERE cached = 0 "
                                         "GROUP BY stage ORDER BY stage")}
        store.close()
    docs, corpus_tokens = corpus_facts(args.corpus, settings)
    chat = {k: v for k, v in by_stage.items() if k != "embed"}
    prompt = sum(v["prompt_tokens"] for v in chat.values())
    completion = sum(v["completion_tokens"] for v in chat.values())
    emit({
        "bench": "index_cost", "corpus": str(args.corpus), "offline": settings.offline,
        "docs": docs, "corpus_tokens": corpus_tokens, "chunks": result.chunks,
        "chat_calls": sum(v["calls"] for v in chat.values()), "prompt_tokens": prompt,
        "completion_tokens": completion,
        "chat_tokens_per_corpus_token": round((prompt + completion) / corpus_tokens, 3) if corpus_tokens else None,
        "embedding_tokens": by_stage.get("embed", {}).get("prompt_tokens", 0),
        "by_stage": by_stage, "entities": result.entities, "relationships": result.relationships,
        "communities": result.communities, "reports": result.reports, "failures": result.failures,
        "wall_s": round(wall, 2), "peak_rss_mb": peak_rss_mb(),
        "settings": {"chunk_size": settings.index.chunk_size, "chunk_overlap": settings.index.chunk_overlap,
                     "max_gleanings": settings.index.max_gleanings, "glean_check": settings.index.glean_check},
    })


if __name__ == "__main__":
    main()
