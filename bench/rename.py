"""What renaming a note in an Obsidian vault costs. Prints one JSON line.

    python bench/rename.py --generate 200 --seed 11
    python bench/rename.py --generate 200 --related --port 19300-19309

The vault is made from ``../shared/tools/corpusgen.py`` output: a note per article, and a note
per entity named in at least ``--min-links`` articles, whose first mention in each article
becomes a ``[[link]]`` (with ``--related``, each article also ends with a "## Related" list of
its links, as many vaults do). Steps, each a sync through the simulator:

1. full index of the vault                                   -> full
2. the entity note linked from about ``--links`` notes renamed as Obsidian renames it: the file
   moved, ``[[Old]]`` rewritten to ``[[New]]`` in every linking note -> rename
3. renamed back                                              -> back (answers from the cache)
4. from the vault of step 1, one word of each of the same notes' text edited instead -> plain

For each: model calls paid by stage (cache hits left out) and, for rename and plain, the
elements summarized whose description set changed, were new, or kept their descriptions
(``summaries_same_input`` counts waste: it should be 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import anyio
from _harness import add_port_option, emit, generate_corpus, simulator_process

from streamrag.config import load_settings
from streamrag.pipeline import sync
from streamrag.store import Store

NEW_NAME = "Quillmark Northway"   # no corpusgen name: the renamed note's new name


def make_vault(gen: Path, out: Path, articles: int, min_links: int, related: bool) -> dict[str, int]:
    """Writes the vault; returns each entity note's name -> the notes linking to it."""
    truth = json.loads((gen / "ground_truth.json").read_text())
    docs = truth["documents"][:articles]
    ids = {d["doc_id"] for d in docs}
    names = sorted((e["name"] for e in truth["entities"] if len(set(e["docs"]) & ids) >= min_links),
                   key=len, reverse=True)
    if not names:
        return {}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    linked: dict[str, int] = dict.fromkeys(names, 0)
    out.mkdir()
    for d in docs:
        title, _, body = (gen / d["file"]).read_text().partition("\n")
        seen: list[str] = []

        def link(m: re.Match) -> str:
            if m.group(1) in seen:
                return m.group(1)
            seen.append(m.group(1))
            return f"[[{m.group(1)}]]"

        body = pattern.sub(link, body)
        if related and seen:
            body = body.rstrip() + "\n\n## Related\n\n" + "\n".join(f"- [[{n}]]" for n in sorted(seen)) + "\n"
        for n in seen:
            linked[n] += 1
        name = re.sub(r"[^\w -]", "", title).strip()
        (out / f"{d['doc_id']} {name}.md").write_text(f"# {title}\n{body}")
    for n in names:
        (out / f"{n}.md").write_text(f"# {n}\n\n{n} appears in {linked[n]} notes.\n")
    return linked


def rename(vault: Path, old: str, new: str) -> list[Path]:
    """Obsidian's rename: the note moved, and its links rewritten in the notes linking to it."""
    (vault / f"{old}.md").rename(vault / f"{new}.md")
    link = re.compile(r"\[\[" + re.escape(old) + r"(?=[\]|#])")
    changed = []
    for f in sorted(vault.glob("*.md")):
        text = f.read_text()
        if link.search(text):
            f.write_text(link.sub("[[" + new, text))
            changed.append(f)
    return changed


def paid(result) -> dict[str, int]:
    return {k: v.get("calls", 0) - v.get("cached", 0) for k, v in result.llm.items()
            if v.get("calls", 0) - v.get("cached", 0)}


def description_sets(db: Path) -> dict[str, frozenset[str]]:
    store = Store(db, readonly=True)
    try:
        rows = store.query("SELECT entity_id AS id, description FROM entity_sources UNION ALL "
                           "SELECT relationship_id, description FROM relationship_sources")
        out: dict[str, set[str]] = {}
        for r in rows:
            if r["description"]:
                out.setdefault(r["id"], set()).add(r["description"])
        return {k: frozenset(v) for k, v in out.items()}
    finally:
        store.close()


def summarized(db: Path, run_id: str) -> set[str]:
    """The elements whose summary is an answer the model gave in run ``run_id``."""
    store = Store(db, readonly=True)
    try:
        return {r["owner"] for r in store.query(
            "SELECT owner FROM answers WHERE key IN (SELECT cache_key FROM llm_calls "
            "WHERE run_id = ? AND stage = 'summarize' AND cached = 0)", (run_id,))}
    finally:
        store.close()


def why(before: dict[str, frozenset[str]], after: dict[str, frozenset[str]], owners: set[str]) -> dict[str, int]:
    kinds = {"summaries_new_element": 0, "summaries_descriptions_changed": 0, "summaries_same_input": 0}
    for o in owners:
        kind = ("summaries_new_element" if o not in before else
                "summaries_same_input" if before[o] == after.get(o) else "summaries_descriptions_changed")
        kinds[kind] += 1
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generate", type=int, default=200, metavar="N", help="articles (default 200)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--scale", type=int, default=60, help="corpusgen's world size (default 60)")
    ap.add_argument("--min-links", type=int, default=15, help="articles naming an entity that gets a note")
    ap.add_argument("--links", type=int, default=20, help="notes linking to the note renamed (about)")
    ap.add_argument("--related", action="store_true", help='articles end with a "## Related" list of links')
    ap.add_argument("--corpusgen", type=Path, metavar="PATH")
    add_port_option(ap)
    args = ap.parse_args()

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        generate_corpus("rename.py", args.corpusgen, tmp / "gen", seed=args.seed, scale=args.scale,
                        docs=args.generate, takes_corpus=False)
        vault = tmp / "vault"
        linked = make_vault(tmp / "gen", vault, args.generate, args.min_links, args.related)
        if not linked:   # (no note to rename: the empty pattern matched everywhere, a KeyError '')
            sys.exit(f"rename.py: no entity is named in --min-links {args.min_links} of the {args.generate} "
                     "articles, so no note to rename; give a larger --generate or a smaller --min-links")
        old = min(linked, key=lambda n: (abs(linked[n] - args.links), n))
        env = {k: v for k, v in os.environ.items() if k != "STREAMRAG_API_BASE"}
        settings = load_settings(None, env=env, overrides={"llm": {"requests_per_minute": 0, "tokens_per_minute": 0}})
        settings.llm.api_base = stack.enter_context(simulator_process(args.port))

        def run(db: Path):
            return anyio.run(lambda: sync([vault], settings, db, root=vault, command="bench"))

        db = tmp / "index.db"
        full = run(db)
        shutil.copytree(vault, tmp / "vault.base")
        shutil.copy2(db, tmp / "base.db")
        before = description_sets(db)
        linking = rename(vault, old, NEW_NAME)
        renamed = run(db)
        rename_why = why(before, description_sets(db), summarized(db, renamed.run_id))
        rename(vault, NEW_NAME, old)
        back = run(db)

        shutil.rmtree(vault)
        shutil.copytree(tmp / "vault.base", vault)
        for f in linking:
            if f.name != f"{old}.md":
                text, _, rest = f.read_text().partition("## Related")
                f.write_text(re.sub(r"\b[a-z]{9,}\b", "something", text, count=1) + _ + rest)
        plain = run(tmp / "base.db")
        plain_why = why(before, description_sets(tmp / "base.db"), summarized(tmp / "base.db", plain.run_id))

    emit({"bench": "rename", "articles": args.generate, "seed": args.seed, "related": args.related,
          "notes": full.documents, "renamed": old, "linking_notes": len(linking),
          "entities": full.entities, "relationships": full.relationships,
          "full_calls": paid(full), "rename_calls": paid(renamed), "rename_chunks_extracted": renamed.chunks_extracted,
          **{f"rename_{k}": v for k, v in rename_why.items()},
          "back_calls": paid(back), "plain_calls": paid(plain), "plain_chunks_extracted": plain.chunks_extracted,
          **{f"plain_{k}": v for k, v in plain_why.items()}})


if __name__ == "__main__":
    main()
