"""What one change costs once a corpus is indexed. Prints one JSON line.

    python bench/incremental.py --corpus DIR          # DIR: at least 200 documents
    python bench/incremental.py --generate 200 --seed 11
    python bench/incremental.py --generate 200 --port 19300-19309   # runs side by side: a range each
    python bench/incremental.py --generate 200 --config regen.toml  # other settings (a streamrag.toml)

With ``--corpus``, the last file (in name order) is held out and added as the new document;
with ``--generate N`` the corpus is made by ``../shared/tools/corpusgen.py`` with N + 1
documents (the same N plus one more). Steps, each a sync through the simulator (in-process
state kept in one index):

1. full index of the N documents                     -> full_tokens, reports_total
2. add the held-out document                         -> add_tokens, reports_regenerated_add
3. modify one document (one sentence added)          -> modify_tokens, reports_regenerated_modify
4. delete one document of the first index (not the   -> delete_tokens, reports_regenerated_delete
   one added, nor the one modified)
   then a run with nothing changed                   -> noop_tokens, reports_regenerated_noop
5. the added document indexed alone, in a fresh index -> add_alone_tokens
6. a new file is written, synced, and asked about    -> freshness_s (written until
   ``ask --mode local`` cites it, zero simulated latency); its name one index.include takes
   (``fresh_note_name``), ``fresh_doc`` in the line

Tokens are chat prompt + completion tokens actually paid (cache hits excluded).
``reports_regenerated_*`` count the reports a step wrote anew, however it got their text: a
paid call, the LLM cache (a context the index had before, as when a change is undone), or
extractive (offline, a community below index.report_min_members, a stand-in for a failed
call); ``reports_paid_*`` count those of them a paid call wrote (``reports_by_paid_calls``).
Calls are counted apart from reports: ``add_report_calls`` is the report calls the add sent to
the model (``report_calls_sent``: none the cache answered; a call that failed, one cancelled,
and a report cut off and asked again with more room, one each: each was a request sent), of
which ``add_report_calls_failed`` failed or were cancelled (wrote no report), and
``add_report_tokens`` their tokens. (``add_llm_reports`` was the report calls sent, named as
if reports: it is ``add_report_calls``.) Targets:
add_tokens <= 1.5 x add_alone_tokens + the tokens of the regenerated reports, and regenerated
reports <= 10% of all reports for one changed document. ``changed`` names the document each
step added, modified and deleted. ``wall_*_s`` are each sync's own wall
time: with ``--offline --generate 3000`` they show how an update's time grows with the index.
The syncs of the one index run as `streamrag watch` runs them, keeping the graph each published
in memory for the next (`streamrag index` reads it from the store again).

One document's share depends on which document it is. ``--samples K`` (with ``--generate``)
also adds each of K more documents alone to a copy of the full index, and deletes each of K of
its documents alone, and prints the mean and largest share of each (``add_share_mean``,
``add_share_max``, ``adds_over_10pct``; the same for deletes) of the reports rewritten, as
``reports_regenerated_*`` count them, and of those a paid call wrote, as ``reports_paid_*``
count them (``add_paid_share_mean``, ``add_paid_share_max``, ``adds_paid_over_10pct``; the
same for deletes).

``--explain`` adds why each report the add, the modify and the delete wrote was written
(``explain``: for each, its community's level and size, whether its context overflowed
index.report_max_input_tokens, what came, went or changed in it, and the cause: the document,
the clustering moving a member the document never named, a child's report, the selection of
what fits, or a new community; bench/_rewrites.py); with ``--samples``, ``explain_samples``
sums it over the sampled adds and deletes, and lists the communities the document did not cause
to be rewritten.

The modify step rewrites a paragraph of the document a third of the way along the folder's
documents (a ``.jsonl`` or ``.csv`` file, a document per row, is never the one).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _harness import add_port_option, emit, folder, generate_corpus, peak_rss_mb, simulator_process
from _rewrites import explain, snapshot, summed

from streamrag.config import load_settings
from streamrag.errors import ConfigError
from streamrag.graph_state import GraphCache
from streamrag.loader import scan
from streamrag.pipeline import sync
from streamrag.query import ask
from streamrag.store import Store


def paid_tokens(result) -> int:
    return sum(s.get("prompt_tokens", 0) + s.get("completion_tokens", 0) for s in result.llm.values())


def by_stage(result) -> dict[str, int]:
    return {k: v.get("prompt_tokens", 0) + v.get("completion_tokens", 0) for k, v in result.llm.items()}


def report_tokens(result) -> int:
    s = result.llm.get("report", {})
    return s.get("prompt_tokens", 0) + s.get("completion_tokens", 0)


def reports_by_paid_calls(result) -> int:
    """The reports paid calls wrote in this run: its report calls less those the LLM cache
    answered, those that failed (a report cut off and asked again with more room is a failed
    call and an answered one) and those cancelled."""
    s = result.llm.get("report", {})
    return s.get("calls", 0) - s.get("cached", 0) - s.get("errors", 0) - s.get("cancelled", 0)


def report_calls_sent(result) -> int:
    """The report calls this run sent to the model: its report calls less those the LLM cache
    answered (a failed call, a cancelled one and a report cut off and asked again count one
    each: each was a request sent, whether or not it wrote a report)."""
    s = result.llm.get("report", {})
    return s.get("calls", 0) - s.get("cached", 0)


def report_calls_failed(result) -> int:
    """Of ``report_calls_sent``, those that wrote no report: failed or cancelled."""
    s = result.llm.get("report", {})
    return s.get("errors", 0) + s.get("cancelled", 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=folder)
    ap.add_argument("--generate", type=int, metavar="N")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--corpusgen", type=Path, metavar="PATH",
                    help="the corpus generator for --generate (default: ../shared/tools/corpusgen.py "
                         "beside the checkout)")
    ap.add_argument("--samples", type=int, default=0, metavar="K",
                    help="with --generate: also the mean and largest share of reports rewritten over "
                         "K documents added alone and K deleted alone")
    ap.add_argument("--offline", action="store_true")
    ap.add_argument("--api-base")
    ap.add_argument("--model")
    ap.add_argument("--config", type=Path, metavar="FILE",
                    help="a settings file for every sync (e.g. [index] report_regen_threshold = 0.02); "
                         "the rate limits stay off, and --offline and --model still win, the "
                         "simulator (or --api-base) still the endpoint")
    ap.add_argument("--explain", action="store_true",
                    help="also why each report the add, the modify and the delete wrote anew was written "
                         "(``explain``: its level, size and what changed in its context; bench/_rewrites.py)")
    add_port_option(ap)
    args = ap.parse_args()
    if not args.corpus and not args.generate:
        ap.error("give --corpus DIR or --generate N")
    if args.samples and not args.generate:
        ap.error("--samples needs --generate (the documents added are made by the same generator)")

    overrides: dict = {"llm": {"requests_per_minute": 0, "tokens_per_minute": 0}, "index": {}}
    if args.offline:
        overrides["index"]["extractor"] = "nlp"
    if args.model:
        overrides["llm"].update({f"{j}_model": args.model for j in ("extraction", "summary", "report")})
    env = {k: v for k, v in os.environ.items() if k != "STREAMRAG_API_BASE"}
    try:
        settings = load_settings(args.config, env=env, overrides=overrides)
    except ConfigError as e:
        sys.exit(f"incremental.py: {e}")

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        source = tmp / "source"
        if args.generate:
            generate_corpus("incremental.py", args.corpusgen, source, seed=args.seed, scale=args.generate,
                            docs=args.generate + max(1, args.samples), hint="try another --seed (7 makes 10,000)")
        else:
            shutil.copytree(args.corpus, source)
        files = indexable(source, settings)
        if len(files) < 3 or not any(f.suffix.lower() not in RECORD_SUFFIXES for f in files):
            sys.exit(f"incremental.py: {args.corpus or source} holds {len(files)} files index.include "
                     "takes; give a folder of 3 or more, one of them not .jsonl or .csv (to modify)")
        fresh_name = fresh_note_name(files, settings, tmp / "probe")
        if fresh_name is None:
            sys.exit("incremental.py: index.include takes no new file the freshness step could write "
                     "(zz_fresh_note with a suffix of the corpus's documents, or one of their names "
                     "with _fresh_note after it); widen index.include")
        # (the same N documents and the next one whatever --samples says: corpusgen's
        # --docs N + K is the documents of N + 1 and K - 1 more)
        held_out = files[args.generate:] if args.generate else files[-1:]
        files = files[:len(files) - len(held_out) + 1]
        corpus = tmp / "corpus"
        corpus.mkdir()
        for f in files[:-1]:
            shutil.copy2(f, corpus / f.name)
        extra = files[-1]

        if not args.offline:
            settings.llm.api_base = args.api_base or stack.enter_context(simulator_process(args.port))
        db = tmp / "index.db"

        cache = GraphCache()  # as `watch` runs: the graph a sync published is kept for the next

        def run(folder: Path, database: Path):
            return anyio.run(lambda: sync([folder], settings, database, root=folder, command="bench",
                                          graph_cache=cache if database == db else None))

        full = run(corpus, db)
        sampled: dict[str, list] | None = {} if args.explain else None
        samples = one_at_a_time(corpus, db, held_out[:args.samples], tmp / "sample.db", run, sampled) \
            if args.samples else {}
        added = corpus / extra.name
        snaps = [snapshot(db)] if args.explain else []
        shutil.copy2(extra, added)
        add = run(corpus, db)
        victim = modified_document(indexable(corpus, settings))
        deleted = deleted_document(corpus, files[:-1], victim)
        if args.explain:   # (each step's document read from the index it is in)
            snaps.append(snapshot(db, [added.name, victim.name, deleted.name]))
        text = victim.read_text()
        paragraphs = text.split("\n\n")
        # Rewrite one paragraph in the middle: a new sentence naming a person already in it.
        k = len(paragraphs) // 2
        names = [w for w in paragraphs[k].split() if w[:1].isupper() and w.isalpha()][:1] or ["Officials"]
        paragraphs[k] += (f" {names[0]} later met Ilsabet Quorn of the Varnholt Ferry Company "
                          "to discuss the revised figures.")
        victim.write_text("\n\n".join(paragraphs))
        modify = run(corpus, db)
        if args.explain:
            snaps.append(snapshot(db, [victim.name, deleted.name]))
        deleted.unlink()
        delete = run(corpus, db)
        if args.explain:
            snaps.append(snapshot(db))
        noop = run(corpus, db)      # nothing changed: nothing should be paid or rewritten

        alone_dir = tmp / "alone"
        alone_dir.mkdir()
        shutil.copy2(extra, alone_dir / extra.name)
        alone = run(alone_dir, tmp / "alone.db")

        store = Store(db, readonly=True)
        names = [r["name"] for r in store.query("SELECT name FROM entities ORDER BY mentions DESC LIMIT 1")]
        store.close()
        newcomer = "Quillon Marbeck"
        fresh_doc = corpus / fresh_name
        started = time.monotonic()
        fresh_doc.write_text(f"{newcomer} met {names[0] if names else 'the council'} on Friday to "
                             f"discuss the harbor lease. {newcomer} later announced a new ferry route.\n")
        run(corpus, db)
        answer = ask(f"Who is {newcomer}?", settings, db, mode="local")
        freshness = time.monotonic() - started
        cited = fresh_name in answer.documents

    emit({"bench": "incremental", "corpus": str(args.corpus or f"corpusgen seed {args.seed} n {args.generate}"),
          "docs": full.documents, "offline": settings.offline, "api_base": settings.llm.api_base,
          "full_tokens": paid_tokens(full), "add_tokens": paid_tokens(add), "modify_tokens": paid_tokens(modify),
          "delete_tokens": paid_tokens(delete), "add_alone_tokens": paid_tokens(alone),
          "add_report_tokens": report_tokens(add),
          "add_by_stage": by_stage(add), "modify_by_stage": by_stage(modify), "delete_by_stage": by_stage(delete),
          "alone_by_stage": by_stage(alone),
          "add_report_calls": report_calls_sent(add), "add_report_calls_failed": report_calls_failed(add),
          "add_target_ok": paid_tokens(add) <= 1.5 * paid_tokens(alone) + report_tokens(add),
          "reports_total": full.reports, "reports_regenerated_add": add.reports_generated,
          "reports_regenerated_modify": modify.reports_generated,
          "reports_regenerated_delete": delete.reports_generated,
          "regenerated_share_max": round(max(add.reports_generated, modify.reports_generated,
                                             delete.reports_generated) / max(1, full.reports), 4),
          "reclustered": [add.reclustered, modify.reclustered, delete.reclustered],
          "freshness_s": round(freshness, 3), "fresh_doc": fresh_name, "fresh_doc_cited": cited,
          "noop_tokens": paid_tokens(noop), "reports_regenerated_noop": noop.reports_generated,
          "reports_paid_add": reports_by_paid_calls(add), "reports_paid_modify": reports_by_paid_calls(modify),
          "reports_paid_delete": reports_by_paid_calls(delete), "reports_paid_noop": reports_by_paid_calls(noop),
          "changed": {"add": added.name, "modify": victim.name, "delete": deleted.name},
          "wall_full_s": full.wall_s, "wall_add_s": add.wall_s, "wall_modify_s": modify.wall_s,
          "wall_delete_s": delete.wall_s, "wall_noop_s": noop.wall_s,
          **shares(samples, full.reports), "peak_rss_mb": peak_rss_mb(),
          **({"explain": {step: explain(snaps[k], snaps[k + 1], name) for k, (step, name) in enumerate(
              (("add", added.name), ("modify", victim.name), ("delete", deleted.name)))},
              "explain_samples": {kind: summed(told) for kind, told in (sampled or {}).items()}}
             if args.explain else {})})


RECORD_SUFFIXES = (".jsonl", ".csv")
"""The formats that hold a document per row: a sentence added to a paragraph of the file
changes none of its documents (a line that is no row), so none is the one modified."""


def indexable(folder: Path, settings) -> list[Path]:
    """The files of ``folder`` (not of its subfolders) a sync reads, as the loader's scan takes
    them (``index.include`` and ``index.exclude``, hidden files, tools' leftovers and conflict
    copies); in name order."""
    return [p for p in scan([folder], settings.index.include, root=folder, exclude=settings.index.exclude,
                            skipped=[], unlisted=[], left_out={}) if p.parent == folder]


def fresh_note_name(documents: list[Path], settings, probe: Path) -> str | None:
    """The name of the file the freshness step writes into the corpus of ``documents``: the
    first of ``zz_fresh_note`` with a suffix of theirs, then each of their names with
    ``_fresh_note`` after its stem, that no document has and a sync would read, as the loader's
    scan takes names (tried on an empty file in the folder ``probe``, made and removed here);
    None when ``index.include`` (or ``index.exclude``) takes none. (It was zz_fresh_note.txt
    whatever index.include said: with include = ["*.md"] the note was never read, and
    fresh_doc_cited said false of an index that had not been given it.) Record files
    (``RECORD_SUFFIXES``) lend neither suffix nor name: the note is no row."""
    whole = [p for p in documents if p.suffix.lower() not in RECORD_SUFFIXES]
    taken = {p.name.lower() for p in documents}
    candidates = [f"zz_fresh_note{s}" for s in dict.fromkeys(p.suffix for p in whole)]
    candidates += [f"{p.stem}_fresh_note{p.suffix}" for p in whole]
    probe.mkdir()
    try:
        for name in candidates:
            if name.lower() in taken:
                continue
            (probe / name).touch()
            read = indexable(probe, settings)
            (probe / name).unlink()
            if read:
                return name
        return None
    finally:
        probe.rmdir()


def modified_document(documents: list[Path]) -> Path:
    """The document the modify step rewrites a paragraph of, of ``documents`` (the folder's,
    once the add was made): the one a third of the way along, of those that are one document
    each (not ``RECORD_SUFFIXES``). (It was the one a third of the way along the folder's .txt
    files: a folder of .md files had none, an IndexError.) In a generated corpus, all .txt, it
    is the same document as before."""
    whole = [p for p in documents if p.suffix.lower() not in RECORD_SUFFIXES]
    return whole[len(whole) // 3]


def deleted_document(corpus: Path, own: list[Path], modified: Path) -> Path:
    """The document the delete step removes from ``corpus``: the middle one of the corpus's own
    (``own``, the documents of the first index), the one just modified left out. (It was the
    middle .txt of the folder once the add was made, which in a small corpus was the document
    just added: harbor's delete undid the add, its 4 reports answered by the cache, 0 tokens.)
    In a generated corpus it is the same document as before."""
    candidates = sorted(corpus / f.name for f in own if f.name != modified.name)
    return candidates[len(candidates) // 2]


def one_at_a_time(corpus: Path, db: Path, extras: list[Path], copy: Path, run,
                  explained: dict[str, list] | None = None) -> dict[str, list]:
    """The sync results of each of ``extras`` added alone to a copy of ``db`` (the index of
    ``corpus``), and of each of as many of ``corpus``'s documents, spread over it, deleted alone.
    ``corpus`` is left as it was. With ``explained``, why each wrote its reports
    (``_rewrites.explain``) is added to its list of the kind ("add", "delete")."""
    def synced(kind: str, name: str):
        before = snapshot(copy, [name]) if explained is not None else None
        result = run(corpus, copy)
        if explained is not None:
            explained.setdefault(kind, []).append(explain(before, snapshot(copy, [name]), name))
        return result

    def fresh_copy() -> None:
        for p in copy.parent.glob(copy.name + "*"):
            p.unlink()
        conn = sqlite3.connect(db)
        conn.execute("VACUUM INTO ?", (str(copy),))
        conn.close()

    rewritten: dict[str, list] = {"add": [], "delete": []}
    for f in extras:
        fresh_copy()
        shutil.copy2(f, corpus / f.name)
        rewritten["add"].append(synced("add", f.name))
        (corpus / f.name).unlink()
    own = sorted(corpus.iterdir())
    for f in own[::max(1, len(own) // len(extras))][:len(extras)]:
        fresh_copy()
        kept = f.read_bytes(), f.stat()
        f.unlink()
        rewritten["delete"].append(synced("delete", f.name))
        f.write_bytes(kept[0])
        os.utime(f, ns=(kept[1].st_atime_ns, kept[1].st_mtime_ns))
    for p in copy.parent.glob(copy.name + "*"):
        p.unlink()
    return rewritten


def shares(samples: dict[str, list], total: int) -> dict[str, object]:
    """The mean and largest share of ``total`` reports rewritten per sampled change (``samples``:
    the sync result of each), and of those a paid call wrote (``*_paid_*``)."""
    out: dict[str, object] = {}
    for kind, results in samples.items():
        out[f"samples_{kind}"] = len(results)
        for paid, counts in (("", [r.reports_generated for r in results]),
                             ("_paid", [reports_by_paid_calls(r) for r in results])):
            out[f"{kind}{paid}_share_mean"] = round(sum(counts) / len(counts) / max(1, total), 4)
            out[f"{kind}{paid}_share_max"] = round(max(counts) / max(1, total), 4)
            out[f"{kind}s{paid}_over_10pct"] = sum(c > 0.1 * total for c in counts)
    return out


if __name__ == "__main__":
    main()
