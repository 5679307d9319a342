"""What each query mode costs: calls and tokens per question, and dynamic vs static selection.

Indexes ``--corpus`` through the deterministic simulator (started in-process unless
``--api-base`` is given) with the default index settings, then asks a fixed set of six
questions in every mode: three global ones (the same for every corpus) and three local ones
about the index's three most connected entities. Query answers are never served from the cache,
so every call is paid. Prints ONE JSON line:

    global_static, global_dynamic, local, basic: {calls, prompt_tokens, completion_tokens}
        averaged per question;
    dynamic_vs_static: dynamic tokens / static tokens (prompt + completion), static at the
        deepest level, over all six questions; and the same over the three global questions.

    python bench/query_cost.py --corpus ../shared/corpus/christmas_carol
    python bench/query_cost.py --corpus DIR --api-base http://localhost:8000/v1 --model my-model
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _harness import add_port_option, folder, simulator_thread   # (it puts the checkout on sys.path)

from streamrag.config import load_settings
from streamrag.pipeline import sync
from streamrag.query import ask
from streamrag.store import Store

GLOBAL_QUESTIONS = (
    "What are the main themes of these documents?",
    "Which organizations and people matter most across the collection, and how are they connected?",
    "What conflicts, disputes or crises recur across the documents, and how were they resolved?",
)
LOCAL_TEMPLATES = (
    "What do the documents say about {name}?",
    "Who is {name} connected to, and how?",
    "What has {name} done, and where?",
)
MODES = {
    "global_static": ("global", -1),
    "global_dynamic": ("global", None),
    "local": ("local", None),
    "basic": ("basic", None),
}


def settings_for(api_base: str, model: str | None, api_key: str, *, cache: bool):
    llm: dict = {"api_base": api_base, "cache": cache}
    if model:
        for key in ("extraction_model", "summary_model", "report_model", "rating_model", "answer_model"):
            llm[key] = model
    if api_base.startswith("http://127.0.0.1"):  # the simulator: no limits to respect
        llm.update(requests_per_minute=0, tokens_per_minute=0)
    env = {"STREAMRAG_API_KEY": api_key} if api_key else {}
    return load_settings(None, env=env, overrides={"llm": llm})


def local_questions(db: Path) -> list[str]:
    store = Store(db, readonly=True)
    try:
        names = [r["name"] for r in store.query(
            "SELECT name FROM entities ORDER BY degree DESC, mentions DESC, id LIMIT 3")]
    finally:
        store.close()
    return [t.format(name=n) for t, n in zip(LOCAL_TEMPLATES, names, strict=False)]


def run(corpus: Path, api_base: str, model: str | None, api_key: str, db: Path) -> dict:
    index_settings = settings_for(api_base, model, api_key, cache=True)
    started = time.monotonic()
    result = anyio.run(lambda: sync([corpus], index_settings, db, root=corpus))
    index_s = time.monotonic() - started
    print(f"indexed {result.documents} documents in {index_s:.1f} s: {result.entities} entities, "
          f"{result.communities} communities", file=sys.stderr)

    query_settings = settings_for(api_base, model, api_key, cache=False)
    questions = list(GLOBAL_QUESTIONS) + local_questions(db)
    out: dict = {"corpus": str(corpus), "docs": result.documents, "chunks": result.chunks,
                 "entities": result.entities, "communities": result.communities,
                 "index_wall_s": round(index_s, 1), "questions": len(questions)}
    per_question: dict[str, list[dict]] = {}
    for name, (mode, level) in MODES.items():
        rows = []
        for q in questions:
            answer = ask(q, query_settings, db, mode=mode, level=level)
            rows.append({"calls": answer.llm["calls"], "prompt_tokens": answer.llm["prompt_tokens"],
                         "completion_tokens": answer.llm["completion_tokens"],
                         "level": answer.level, "reports": answer.details.get("reports")})
        per_question[name] = rows
        out[name] = {k: round(sum(r[k] for r in rows) / len(rows), 1)
                     for k in ("calls", "prompt_tokens", "completion_tokens")}
    out["static_level"] = per_question["global_static"][0]["level"]

    def tokens(name: str, rows: slice) -> int:
        return sum(r["prompt_tokens"] + r["completion_tokens"] for r in per_question[name][rows])

    every, glob = slice(None), slice(0, len(GLOBAL_QUESTIONS))
    out["dynamic_vs_static"] = round(tokens("global_dynamic", every) / max(1, tokens("global_static", every)), 3)
    out["dynamic_vs_static_global_questions"] = round(
        tokens("global_dynamic", glob) / max(1, tokens("global_static", glob)), 3)
    out["reports_read"] = {"global_static": per_question["global_static"][0]["reports"],
                           "global_dynamic": [r["reports"] for r in per_question["global_dynamic"]]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, type=folder, help="folder to index")
    p.add_argument("--api-base", default="", help="OpenAI-compatible endpoint (default: in-process simulator)")
    p.add_argument("--model", default=None, help="model for every chat job (default: the settings' models)")
    p.add_argument("--db", type=Path, default=None, help="index database (default: a temporary file)")
    add_port_option(p)
    args = p.parse_args(argv)
    api_key = os.environ.get("STREAMRAG_API_KEY") or os.environ.get("OPENAI_API_KEY") or ""
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "index.db"
        if args.api_base:
            out = run(args.corpus, args.api_base.rstrip("/"), args.model, api_key, db)
        else:
            with simulator_thread(args.port) as sim:
                out = run(args.corpus, sim.base_url, args.model, api_key, db)
    print(json.dumps({"bench": "query_cost", **out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
