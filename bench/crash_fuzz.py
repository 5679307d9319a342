"""Whether ``kill -9`` at any moment, then a restart, loses, duplicates or pays for anything twice.
Prints one JSON line.

    python bench/crash_fuzz.py --trials 3 --seed 1
    python bench/crash_fuzz.py --trials 20 --seed 7 --port 18500-18509
    python bench/crash_fuzz.py --trials 20 --offline --docs 150 --delay-scale 0.2
    python bench/crash_fuzz.py --trials 20 --stages publishing --max-kills 8

Each trial copies a corpus (``../shared/tools/corpusgen.py``'s, or ``--corpus DIR``) to a folder
pointed at a simulator this script runs in a thread (``--latency-ms`` per answer), then, a few
times over: runs ``streamrag index`` (or, in some rounds, ``streamrag watch``) in a process of its
own and SIGKILLs it a random moment after it says it entered a stage drawn from extracting,
summarizing, clustering, reporting and publishing (``index`` says each stage on stderr, ``watch
--json`` each state on stdout; a watch round may make its changes while the daemon runs, and its
kill then lands in the sync of them), and may change the folder (add, edit, delete or rename a
file). A last ``index`` runs to its end. ``--offline`` points the folder at no model (the NLP
extractor, extractive reports: its stages last a fraction of a model's, so give ``--delay-scale``
below 1 and more ``--docs``); ``--stages`` draws the kills from those named alone (``start`` among them: a kill up to
1.5 s after the process starts, before it says a stage). Then:

(a) ``status --json`` opens the index and says its last run ``ok``;
(b) the entities, relationships (weights, mentions, degrees), their sources (provenance), claims,
    documents and chunks equal those of a fresh index of the final folder through the same
    simulator (``mismatches``: trials where they do not);
(c) no prompt reached the simulator twice (the fresh index left out), but for those the README
    allows: a call in flight at a kill, whose answer the killed process had not cached
    (``repeated_calls``: the others; ``reasked_in_flight``: those allowed). Which answers are
    cached is read after each kill; the cache key of a request the simulator saw is made as the
    client makes it, for each shipped prompt (``unmapped``: the last run's requests whose answer
    no such key finds: 0, or the check cannot tell a call in flight from one cached);
(d) no table holds the same row twice, no document path twice (``duplicates``).

``kills_by_stage`` counts the kills by the stage the process last said it was in;
``published_at_kill`` the kills after which the index's version had moved; ``not_intact_at_kill``
those after which the database failed SQLite's ``quick_check``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import queue
import random
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from _harness import ROOT, add_port_option, emit, folder, generate_corpus, simulator_thread

STAGES = ("extracting", "summarizing", "clustering", "reporting", "publishing")
# Drawn only when --stages names it: a kill a moment after the process starts, before it says a
# stage (opening, making or upgrading the index; taking the writer lock; the scan).
START = "start"
# How long after a stage's line a kill may come, in seconds: about how long the stage lasts on a
# 40-document corpus (shorter once the cache answers).
LATEST_S = {START: 1.5, "extracting": 3.0, "summarizing": 1.0, "clustering": 0.1, "reporting": 0.6, "publishing": 0.15}
WATCH_STATES = {"summarizing": "merging"}   # watch says a sync's stages in its own words
_STAGE_LINE = re.compile(r"^\[\s*[\d.]+s\] (\w+)$")   # index's progress line off a terminal

# What the index and a fresh one are compared on (the published graph and its provenance).
COMPARED = {
    "entities": "SELECT id, name, type, description, mentions, degree FROM entities",
    "relationships": "SELECT id, source, target, description, weight, mentions, combined_degree "
                     "FROM relationships",
    "entity_sources": "SELECT * FROM entity_sources",
    "relationship_sources": "SELECT * FROM relationship_sources",
    "claims": "SELECT * FROM claims",
    "documents": "SELECT id, path, title, tokens, chars FROM documents",
    "document_chunks": "SELECT d.path, c.idx, c.chunk_id FROM document_chunks c JOIN documents d ON d.id = c.doc_id",
    "chunks": "SELECT id, text, tokens FROM chunks",
}
MEMORY_LIMIT = 6 << 30   # bytes of address space, for this script and each process it starts
VERSION = "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'version'"


def cache_keys(route: str, request: dict) -> set[str]:
    """The keys the client may have cached a request's answer under: its prompt's name and
    version are not sent, so one key per shipped prompt."""
    from streamrag import cache

    if route == "embeddings":
        texts = request.get("input")
        return {cache.embedding_key(request.get("model", ""), t)
                for t in ([texts] if isinstance(texts, str) else texts or []) if isinstance(t, str)}
    options = {k: request[k] for k in ("temperature", "max_tokens", "logit_bias", "response_format", "stop",
                                       "seed") if request.get(k) is not None}
    if "max_completion_tokens" in request:
        options.setdefault("max_tokens", request["max_completion_tokens"])
    return {cache.cache_key(request.get("model", ""), request.get("messages", []), options, p.name, p.version)
            for p in shipped_prompts()}


@functools.cache
def shipped_prompts() -> list:
    from streamrag.prompts import load_prompt

    return [load_prompt(p.stem) for p in sorted((ROOT / "prompts").glob("*.md"))]


class CallLog:
    """Every prompt the simulator is asked, with the process that asked it (the simulator's
    ``on_request`` sees each request and its key, in the thread that answers it), and what each
    killed process had cached."""

    def __init__(self, sim) -> None:
        self.epoch: int | None = 0         # the process asking now; None: not counted
        self.arrivals: dict[str, list[int]] = {}
        self.requests: dict[str, tuple[str, dict]] = {}
        self.cached_at_kill: dict[int, set[str]] = {}
        self.lock = threading.Lock()
        self.sim = sim
        sim.on_request = self.record

    def record(self, route: str, request: dict, key: str) -> None:
        with self.lock:
            self.requests.setdefault(key, (route, request))
            if self.epoch is not None:
                self.arrivals.setdefault(key, []).append(self.epoch)

    def drain(self, quiet_s: float = 0.3, most_s: float = 15) -> None:
        """Waits until the simulator has held no connection for ``quiet_s``: a request the killed
        process sent is still read and answered after its death, on a loaded machine seconds
        later, and would be counted as the next process's (a prompt asked twice by one)."""
        end, quiet_since = time.monotonic() + most_s, time.monotonic()
        while time.monotonic() < end:
            busy = self.sim.open_connections() > 0
            now = time.monotonic()
            if busy:
                quiet_since = now
            elif now - quiet_since >= quiet_s:
                return
            time.sleep(0.02)

    def clear(self) -> None:
        self.arrivals.clear()
        self.requests.clear()
        self.cached_at_kill.clear()

    def repeats(self) -> tuple[list[dict], int]:
        """The repeats not allowed, and the number of those allowed: a prompt asked again after
        a kill whose index had not cached its answer (in flight at the kill)."""
        from streamrag import simulator

        bad, allowed = [], 0
        for key, epochs in self.arrivals.items():
            for first, again in zip(epochs, epochs[1:]):
                cached = self.cached_at_kill.get(first)
                if cached is not None and not cache_keys(*self.requests[key]) & cached:
                    allowed += 1
                else:
                    route, request = self.requests[key]
                    bad.append({"route": route, "runs": [first, again], "killed": cached is not None,
                                "task": route == "chat" and simulator.detect_task(
                                    request.get("messages", []), logit_bias=bool(request.get("logit_bias")))})
        return bad, allowed

    def unmapped(self, epoch: int, db: Path) -> int:
        """Prompts run ``epoch`` asked whose answer ``db`` does not hold under any key
        ``cache_keys`` gives: if not 0, it cannot tell a repeat in flight from one cached."""
        cached = cached_keys(db)
        return sum(1 for key, epochs in self.arrivals.items()
                   if epoch in epochs and not cache_keys(*self.requests[key]) & cached)


class Run:
    """``streamrag index`` or ``watch --json`` in a process of its own; the stages it says, in a
    queue."""

    def __init__(self, command: str, folder: Path, db: Path, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMRAG_", "OPENAI_"))}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        args = [sys.executable, "-m", "streamrag", command, str(folder), "--db", str(db)]
        self.watch = command == "watch"
        self.log = open(log, "a")
        self.proc = subprocess.Popen(args + (["--json"] if self.watch else []), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
        self.stages: queue.Queue[str | None] = queue.Queue()
        self.last = ""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.write(line)
            if self.watch:
                try:
                    event = json.loads(line)
                except ValueError:
                    event = {}
                stage = event.get("event") == "state" and event.get("state")
            else:
                m = _STAGE_LINE.match(line.strip())
                stage = m and m.group(1)
            if stage:
                self.last = stage
                self.stages.put(stage)
        self.stages.put(None)

    def wait_for(self, stage: str, timeout: float = 120) -> bool:
        """Whether the process says ``stage`` before it ends."""
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                said = self.stages.get(timeout=left)
            except queue.Empty:
                return False
            if said == stage:
                return True
            if said is None or said == "idle":   # ended, or (watch) its sync did without the stage
                return False
        return False

    def kill(self) -> bool:
        """SIGKILL; whether it was still running."""
        running = self.proc.poll() is None
        if running:
            self.proc.send_signal(signal.SIGKILL)
        self.finish(30)
        return running

    def finish(self, timeout: float = 300) -> int:
        code = self.proc.wait(timeout)
        self.reader.join(10)
        self.log.close()
        return code


def stage_list(text: str) -> tuple[str, ...]:
    """An argparse type for ``--stages``: names from ``STAGES``, comma-separated."""
    named = tuple(s.strip() for s in text.split(",") if s.strip())
    if not named or set(named) - {START, *STAGES}:
        raise argparse.ArgumentTypeError(f"{text!r}: name stages from {', '.join((START, *STAGES))}")
    return named


def make_corpus(args: argparse.Namespace, work: Path) -> tuple[list[Path], list[Path]]:
    """The corpus's documents, and spare ones the adds bring in."""
    source = work / "source"
    if args.corpus:
        shutil.copytree(args.corpus, source)
        files = sorted(p for p in source.iterdir() if p.suffix in (".txt", ".md"))
        return files[:-2], files[-2:]
    generate_corpus("crash_fuzz.py", args.corpusgen, source, seed=args.corpus_seed, scale=args.docs,
                    docs=args.docs + 8, hint="try another --corpus-seed")
    files = sorted(source.glob("*.txt"))
    return files[:args.docs], files[args.docs:]


def change_folder(folder: Path, spare: list[Path], rng: random.Random, n: int) -> list[str]:
    """``n`` random changes to the folder's documents: add, edit, delete, rename."""
    made = []
    for _ in range(n):
        docs = sorted(p for p in folder.iterdir() if p.suffix in (".txt", ".md"))
        kind = rng.choice(("add", "edit", "delete", "rename") if len(docs) > 2 else ("add", "edit"))
        victim = rng.choice(docs)
        if kind == "add":
            src = rng.choice(spare)
            shutil.copy(src, folder / f"{src.stem}_{rng.randrange(10**6)}.txt")
        elif kind == "edit":
            victim.write_text(victim.read_text() + f"\nMaren Olvesk met Tobias Quell at Harrow Point on day "
                              f"{rng.randrange(1000)}, and the Quell Foundation paid.\n")
        elif kind == "delete":
            victim.unlink()
        else:
            victim.rename(victim.with_name(f"{victim.stem}_r{rng.randrange(10**6)}{victim.suffix}"))
        made.append(kind)
    return made


def db_value(db: Path, sql: str) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            row = conn.execute(sql).fetchone()
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0
    return (row[0] or 0) if row else 0


def rows(db: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {name: sorted(conn.execute(sql).fetchall(), key=repr) for name, sql in COMPARED.items()}
    finally:
        conn.close()


def duplicates(db: Path) -> dict[str, int]:
    """Rows a table holds twice (its integer row ids left out), and document paths held twice."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out = {}
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND name NOT LIKE '%fts%' AND name NOT LIKE 'sqlite%'")]
        for t in tables:
            info = conn.execute(f"PRAGMA table_info({t})").fetchall()
            cols = [c[1] for c in info if not _row_id(c, info)]
            listed = ", ".join(f'"{c}"' for c in cols)
            twice = conn.execute(f'SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT {listed} FROM "{t}")) '
                                 f'FROM "{t}"').fetchone()[0]
            if twice:
                out[t] = twice
        paths = conn.execute("SELECT count(*) - count(DISTINCT path) FROM documents").fetchone()[0]
        if paths:
            out["documents.path"] = paths
        return out
    finally:
        conn.close()


def _row_id(column: tuple, info: list[tuple]) -> bool:
    """Whether ``column`` (a row of ``PRAGMA table_info``, of the table ``info`` lists) is the
    table's row id: its one INTEGER primary key. An INTEGER column of a primary key of several
    is data (document_chunks' idx): left out, a document whose text repeats (the same chunk at
    idx 0 and 1) was counted a duplicate row, a false alarm on repetitive files."""
    return bool(column[5]) and column[2].upper() == "INTEGER" and sum(1 for c in info if c[5]) == 1


def cached_keys(db: Path) -> set[str]:
    """The keys of the answers ``db`` holds (none where a process killed at its start made no
    index, or not yet its tables)."""
    if not db.exists():
        return set()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return {r[0] for r in conn.execute("SELECT key FROM llm_cache")}
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        return set()
    finally:
        conn.close()


def intact(db: Path) -> bool:
    if not db.exists():   # (killed before it made one: nothing to be broken)
        return True
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def status_ok(db: Path, log: Path) -> bool:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "streamrag", "status", "--db", str(db), "--json"],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    with open(log, "a") as f:
        f.write(out.stderr)
    try:
        return out.returncode == 0 and json.loads(out.stdout)["last_run"]["status"] == "ok"
    except (ValueError, KeyError, TypeError):
        return False


def killed_round(calls: CallLog, rng: random.Random, folder: Path, db: Path, log: Path,
                 spare: list[Path], watch: bool, stages: tuple[str, ...] = STAGES,
                 delay_scale: float = 1.0) -> tuple[str, bool, bool] | None:
    """One run killed a random moment into a random stage: (the stage it last said, whether the
    version moved, whether the database passes SQLite's quick_check), or None when it ended
    before."""
    stage = rng.choice(stages)
    delay = rng.uniform(0, LATEST_S[stage] * delay_scale)
    change_during = watch and rng.random() < 0.5
    version = db_value(db, VERSION)
    calls.epoch += 1
    run = Run("watch" if watch else "index", folder, db, log)
    try:
        if change_during and run.wait_for("idle"):
            version = db_value(db, VERSION)
            change_folder(folder, spare, rng, rng.randint(1, 3))
        said = stage == START or run.wait_for(WATCH_STATES.get(stage, stage) if watch else stage)
        if said:
            time.sleep(delay)
        if said or watch:
            last = run.last or START
            if run.kill():
                calls.drain()
                calls.cached_at_kill[calls.epoch] = cached_keys(db)
                return last, db_value(db, VERSION) != version, intact(db)
        run.finish()
        return None
    finally:
        if run.proc.poll() is None:
            run.kill()


def trial(args: argparse.Namespace, calls: CallLog, api_base: str, docs: list[Path], spare: list[Path],
          n: int, work: Path) -> dict:
    rng = random.Random(f"{args.seed}:{n}")
    folder, db, log = work / f"t{n}", work / f"t{n}.db", work / f"t{n}.log"
    folder.mkdir()
    for f in docs:
        shutil.copy(f, folder / f.name)
    (folder / "streamrag.toml").write_text("" if args.offline else
                                           f'[llm]\napi_base = "{api_base}"\nrequests_per_minute = 0\n'
                                           "tokens_per_minute = 0\n")
    calls.clear()
    kills: list[tuple[str, bool, bool]] = []
    for _ in range(rng.randint(1, args.max_kills)):
        done = killed_round(calls, rng, folder, db, log, spare, watch=rng.random() < args.watch_share,
                            stages=args.stages, delay_scale=args.delay_scale)
        if done:
            kills.append(done)
        if rng.random() < 0.5:
            change_folder(folder, spare, rng, rng.randint(1, 3))
    calls.epoch += 1
    final_epoch = calls.epoch
    final = Run("index", folder, db, log).finish()
    calls.epoch = None   # the fresh index asks everything again: not counted
    fresh = work / f"t{n}.fresh.db"
    fresh_code = Run("index", folder, fresh, log).finish()
    ok = final == 0 and status_ok(db, log)
    same = fresh_code == 0 and rows(db) == rows(fresh)
    repeated, in_flight = calls.repeats()
    unmapped = calls.unmapped(final_epoch, db)
    calls.epoch = 0
    return {"kills": kills, "ok": ok, "same": same, "repeated": repeated, "in_flight": in_flight, "unmapped": unmapped,
            "duplicates": duplicates(db), "log": str(log)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1, help="draws the kills and changes (default 1)")
    ap.add_argument("--start", type=int, default=0, metavar="N",
                    help="the first trial's number (a trial's draws are the seed's and its number's)")
    ap.add_argument("--docs", type=int, default=40, help="corpusgen documents (default 40)")
    ap.add_argument("--corpus-seed", type=int, default=11, help="corpusgen's seed (default 11)")
    ap.add_argument("--corpus", type=folder, metavar="DIR", help="a folder of .txt/.md documents instead")
    ap.add_argument("--corpusgen", type=Path, metavar="PATH")
    ap.add_argument("--max-kills", type=int, default=3, help="kills per trial, at most (default 3)")
    ap.add_argument("--watch-share", type=float, default=0.35, help="share of rounds run by watch")
    ap.add_argument("--latency-ms", type=float, default=20, help="the simulator's latency (default 20)")
    ap.add_argument("--offline", action="store_true", help="index with no model (NLP extraction)")
    ap.add_argument("--stages", type=stage_list, default=STAGES, metavar="A,B",
                    help=f"the stages kills are drawn from (default {','.join(STAGES)})")
    ap.add_argument("--delay-scale", type=float, default=1.0, metavar="F",
                    help="times each stage's latest kill (default 1; offline stages are shorter)")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="keep the trials' folders, indexes and logs here")
    add_port_option(ap)
    args = ap.parse_args()

    # A run of this script died with no word when the kernel's OOM killer ended a python process
    # of 23 GB (which, its log did not tell: an index it started had stalled before scanning):
    # on a machine others share, 6 GB of address space, which the processes started inherit,
    # ends such a one alone, with a MemoryError where it happened.
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    started = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory() as tmp, simulator_thread(args.port, latency_ms=args.latency_ms) as sim:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        docs, spare = make_corpus(args, work)
        calls = CallLog(sim)
        for n in range(args.start, args.start + args.trials):
            results.append(trial(args, calls, sim.base_url, docs, spare, n, work))
    failed = [r for r in results if not (r["ok"] and r["same"]) or r["repeated"] or r["duplicates"]]
    emit({"bench": "crash_fuzz", "trials": args.trials, "seed": args.seed, "offline": args.offline,
          "kills": sum(len(r["kills"]) for r in results),
          "kills_by_stage": dict(Counter(stage for r in results for stage, _, _ in r["kills"])),
          "published_at_kill": sum(moved for r in results for _, moved, _ in r["kills"]),
          "not_intact_at_kill": sum(not whole for r in results for _, _, whole in r["kills"]),
          "status_not_ok": sum(not r["ok"] for r in results),
          "mismatches": sum(not r["same"] for r in results),
          "repeated_calls": sum(len(r["repeated"]) for r in results),
          "reasked_in_flight": sum(r["in_flight"] for r in results),
          "unmapped": sum(r["unmapped"] for r in results),
          "duplicates": sum(sum(r["duplicates"].values()) for r in results),
          "failed_trials": [{"trial": args.start + results.index(r), **{k: r[k] for k in ("ok", "same", "repeated", "duplicates")},
                             **({"log": r["log"]} if args.keep else {})} for r in failed],
          "seconds": round(time.monotonic() - started, 1)})


if __name__ == "__main__":
    main()
